"""cocotb tests of RMAS against the Eq. 15 golden model."""

from __future__ import annotations

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from ..models.rmas import policy_grant, rmas_nh
from .common import bench, rng, start


async def _apply(dut, V, qb, q, target, gv, gh, policy):
    await RisingEdge(dut.clk)
    dut.q.value = sum(x << (qb * i) for i, x in enumerate(q))
    dut.target.value = sum(1 << i for i, t in enumerate(target) if t)
    dut.gamma_v.value, dut.gamma_h.value, dut.policy.value = gv, gh, policy
    await RisingEdge(dut.clk)
    await ReadOnly()
    hf = int(dut.host_first.value)
    return {v for v in range(V) if hf >> v & 1}, int(dut.arrival.value), int(dut.n_h.value)


def _params():
    cfg = bench()["config"]["hmc"]
    V = cfg["vaults"]
    qb = (cfg["queue_depth"]).bit_length()
    return V, qb


@cocotb.test()
async def rmas_matches_formula(dut):
    """Random Q, targets and gammas (corners on purpose: no target, empty queues,
    gamma 0, full queues): grants and n_h equal the model."""
    r = rng("rmas")
    await start(dut)
    V, qb = _params()
    qmax = (1 << qb) - 1
    cases = [([0] * V, [True] * V, 1, 1), ([qmax] * V, [True] * V, 255, 1),
             ([0] * V, [False] * V, 3, 3), ([1] * V, [True] * V, 0, 5)]
    for _ in range(400):
        q = [r.choice([0, 1, r.randrange(qmax + 1), qmax]) for _ in range(V)]
        target = [r.random() < 0.5 for _ in range(V)]
        cases.append((q, target, r.randrange(256), r.randrange(256)))
    seen = set()
    for q, target, gv, gh in cases:
        got, arr, nh = await _apply(dut, V, qb, q, target, gv, gh, 0)
        exp, _ = policy_grant(0, q, target, gv, gh)
        enh = rmas_nh(q, target, gv, gh)
        assert nh == enh, f"n_h {nh} != {enh} for q={q} target={target} gv={gv} gh={gh}"
        assert got == exp and not arr, f"grant {got} != {exp} for q={q} target={target}"
        seen.add((enh == 0, enh == sum(target)))
    assert len(seen) >= 3, "random cases missed n_h = 0 / n_max / in between"


@cocotb.test()
async def naive_policies(dut):
    """RMAS-PIM grants nothing, RMAS-GPU grants every vault, arrival sets the flag."""
    r = rng("naive")
    await start(dut)
    V, qb = _params()
    for _ in range(30):
        q = [r.randrange(1 << qb) for _ in range(V)]
        target = [r.random() < 0.5 for _ in range(V)]
        for policy, exp, exp_arr in ((1, set(), 0), (2, set(range(V)), 0), (3, set(), 1)):
            got, arr, _ = await _apply(dut, V, qb, q, target, 7, 9, policy)
            assert (got, arr) == (exp, exp_arr), f"policy {policy}: {got}, arrival {arr}"
