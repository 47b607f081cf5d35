"""Routing a batch of the digits network on the PE RTL equals route_pim(PEOps) bit for bit."""

import dataclasses
import json

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.sim.capsnet.digits_net import ITERATIONS, load_digits_split, load_trained
from pimforge.sim.capsnet.rtl_routing import PEStreamRunner, route_on_pe, routing_pe_counts
from pimforge.verif.models.capsnet.pe_ops import PEOps
from pimforge.verif.models.capsnet.routing import route_pim

F32 = np.float32
KEYS = ("u_hat", "c", "s", "v", "b")


def _bits(x):
    return np.asarray(x, F32).view(np.uint32)


@pytest.fixture(scope="module")
def runner():
    return PEStreamRunner(load_config("default"))


@pytest.fixture(scope="module")
def sample():
    _, _, xte, _ = load_digits_split()
    return load_trained().primary_capsules(xte[10:13]), load_trained().W


def test_rtl_routing_is_bit_exact_and_the_check_can_fail(runner, sample, preset):
    u, W = sample
    got = route_on_pe(u, W, ITERATIONS, runner)
    cfg = preset("default")
    ref = route_pim(u, W, ITERATIONS, PEOps.from_config(cfg))
    for k in KEYS:
        np.testing.assert_array_equal(_bits(got[k]), _bits(getattr(ref, k)), err_msg=k)
    # A model with another MAC order or without the recovery multiply is told apart.
    seq = route_pim(u, W, ITERATIONS, PEOps(cfg.pe, dataclasses.replace(cfg.fp, add_latency=1)))
    norec = route_pim(u, W, ITERATIONS, PEOps.from_config(cfg, recovery=False))
    assert not np.array_equal(_bits(got["u_hat"]), _bits(seq.u_hat))
    assert np.array_equal(_bits(got["u_hat"]), _bits(norec.u_hat))
    assert not np.array_equal(_bits(got["c"]), _bits(norec.c))
    # the closed-form counts (used by the energy model) are what the RTL run issued
    n_l, n_h, c_h, c_l = W.shape
    want = routing_pe_counts(len(u), n_l, n_h, c_l, c_h, ITERATIONS)
    assert {k.lower(): v for k, v in runner.per_flow.items()} == {
        k: v for k, v in want.items() if k != "mac_groups"}
    assert runner.mac_groups == want["mac_groups"]
    assert want["exp"] == ITERATIONS * n_l * n_h


def test_accuracy_cli_rtl_sample(tmp_path, capsys):
    from pimforge.gen.cli import main

    out = tmp_path / "acc.json"
    assert main(["accuracy", "--rtl-sample", "--rtl-images", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PE approx, w/ recovery" in text and "bit-exact" in text
    data = json.loads(out.read_text())
    assert data["rtl_sample"]["bit_exact"] and data["rtl_sample"]["images"] == 2
    assert data["rtl_sample"]["mismatches"] == {k: 0 for k in ("u_hat", "c", "s", "v", "b")}
    assert len(data["rows"]) == 4 and set(data["paper_table5"]) >= {"Caps-MN1"}
    assert main(["accuracy", "--rtl-images", "0"]) == 2
