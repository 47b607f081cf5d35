"""NicePIM DNN runs on the array RTL: the mapper's per-node cost model against the node RTL
on sampled layer tiles, a reduced network with a residual block end to end bit-exact
against numpy, ``pimforge run dnn``'s dump and JSON, and bad input.

Random cases draw from ``random.Random(seed)`` with ``seed`` from ``PIMFORGE_SEED``
(default 1), logged. One Verilator build of nicepim_small's array serves every test
(the one tests/test_nicepim_array.py uses).
"""

import logging
import os
import random

import pytest

from pimforge.gen.config import load_config
from pimforge.sim.nicepim.costmodel_check import CASES, check_cases, random_cases
from pimforge.sim.nicepim.rtl_run import build_array_driver

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "1"))


@pytest.fixture(scope="module")
def cfg():
    return load_config("nicepim_small")


@pytest.fixture(scope="module")
def exe(cfg):
    return build_array_driver(cfg)


def test_cost_model_within_5_percent_of_the_node_rtl(cfg, exe):
    """Sampled node parts (kernels 1 to 7, strides 1 and 2, borders and interior parts,
    groups, every layout in and out, tilings limited by each buffer): bit-exact outputs,
    the model's node cycles within 5% of the RTL's, its DRAM words within 2% and its row
    activations within 10% (+2)."""
    cases = list(CASES) + random_cases(cfg, random.Random(SEED), 4)
    rows = check_cases(cfg, cases, seed=SEED, exe=exe)
    for r in rows:
        log.info("seed %d %-20s %-40s %-14s rtl %7d model %9.0f (%+.2f%%) words %d/%.0f "
                 "acts %d/%.0f", SEED, r.name, r.shape, r.layouts, r.cycles_rtl,
                 r.cycles_model, 100 * r.error, r.words_rtl, r.words_model, r.acts_rtl,
                 r.acts_model)
        assert r.matches_reference, (SEED, r.name)
        assert abs(r.error) <= 0.05, (SEED, r.name, r.cycles_rtl, r.cycles_model)
        assert abs(r.words_model - r.words_rtl) <= 0.02 * r.words_rtl, (SEED, r.name)
        assert abs(r.acts_model - r.acts_rtl) <= 0.1 * r.acts_rtl + 2, (SEED, r.name)
    # the model does not fit a constant: its errors are small against the spread of the
    # cases' cycles (two orders of magnitude)
    cyc = [r.cycles_rtl for r in rows]
    assert max(cyc) > 50 * min(cyc)
