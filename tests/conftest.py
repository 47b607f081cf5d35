"""Test distribution over the cores (pytest-xdist, ``--dist loadgroup``): the tests of one
module run in one worker, so that a module's fixtures (a Verilator build, a simulator
run) are made once; modules that share a Verilator build name one group
(``pytestmark = pytest.mark.xdist_group(...)``) so that only one worker builds it; the
block and preset lints of tests/test_cli.py and the cocotb benches of
tests/test_regression.py, independent of each other, spread over all workers."""

import pytest

_SPREAD = {"test_cli", "test_regression"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(m.name == "xdist_group" for m in item.iter_markers()):
            continue
        mod = item.module.__name__.rsplit(".", 1)[-1]
        if mod not in _SPREAD:
            item.add_marker(pytest.mark.xdist_group(mod))
