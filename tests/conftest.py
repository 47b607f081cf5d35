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

"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from pimforge.gen.config import load_config
from pimforge.gen.registry import get_block
from pimforge.verif.tb.amaranth_sim import simulate as _simulate
from pimforge.verif.tb.ipim.programs import SMALL_VAULT, load_and_start


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
