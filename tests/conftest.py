"""Fixtures shared by the tests.

- ``simulate``: a block on Amaranth's Python simulator with async testbenches
  (:func:`pimforge.verif.tb.amaranth_sim.simulate`; helper functions outside tests import
  it from there).
- ``preset``: a preset config with overrides, loaded once per session (configs are
  frozen dataclasses, so one object serves every test).
- ``block``: a registered block built for a preset with overrides, ready to simulate.
- ``simb_vault``: the SIMB program loader for a vault's instruction memory
  (:func:`pimforge.verif.tb.ipim.programs.load_and_start`) with the small vault config
  the vault tests share (``SMALL_VAULT``).

How the tests share the two workers (``--dist loadgroup``, see
:func:`pytest_collection_modifyitems`): a module's tests stay together on one worker, so
its module fixtures (a Verilator build, a simulator run) are made once; the items of
``INDEPENDENT`` modules (one Verilog lint or one cocotb bench each, every build of its
own) go one by one to whichever worker is free; the modules of a ``SHARED_BUILDS`` group
run on one worker, one after another, because they need the same Verilator build and a
second worker would only wait on its lock.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from pimforge.gen.config import load_config
from pimforge.gen.registry import get_block
from pimforge.verif.tb.amaranth_sim import simulate as _simulate
from pimforge.verif.tb.ipim.programs import SMALL_VAULT, load_and_start

#: Modules whose tests are independent of each other and each cost minutes at most.
INDEPENDENT = {"test_cli", "test_regression"}
#: Modules that run on the same native build of the ``ipim_small`` cube.
SHARED_BUILDS = {"test_ipim_image_rtl": "ipim_small_cube", "test_ipim_cube": "ipim_small_cube",
                 "test_ipim_placement": "ipim_small_cube"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Group the tests for ``--dist loadgroup`` (module doc); before xdist reads the
    marks."""
    for item in items:
        mod = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if mod not in INDEPENDENT:
            item.add_marker(pytest.mark.xdist_group(SHARED_BUILDS.get(mod, mod)))


@functools.cache
def _preset(name: str, overrides: tuple) -> object:
    return load_config(name, dict(overrides))


def load_preset(name: str = "default", overrides: dict | None = None):
    """*name* with *overrides* (``{"section.field": value}``), cached for the session."""
    return _preset(name, tuple(sorted((overrides or {}).items())))


@pytest.fixture
def simulate():
    """``simulate(dut, *testbenches, period=1e-6, processes=(), vcd=None)``."""
    return _simulate


@pytest.fixture
def preset():
    """``preset(name="default", overrides=None)``: a resolved config, cached."""
    return load_preset


@pytest.fixture
def block():
    """``block(name, config="default", overrides=None)``: the registered block *name*
    built for that config."""
    def build(name: str, config: str = "default", overrides: dict | None = None):
        return get_block(name).build(load_preset(config, overrides))
    return build


@pytest.fixture
def simb_vault():
    """``load_and_start`` (an async testbench step) and the small vault's overrides."""
    return SimpleNamespace(load_and_start=load_and_start, small=SMALL_VAULT)
