"""The PGSM on the Amaranth simulator: random traffic from every PE port against a
line-memory model (grant-time semantics), latency, banking, round-robin."""

import random

import pytest
from amaranth.hdl import Fragment

from pimforge.gen.config import load_config
from pimforge.rtl.ipim import pgsm as pgsm_mod
from pimforge.rtl.ipim.pgsm import PGSM
from pimforge.verif.tb.amaranth_sim import simulate


def run_traffic(dut: PGSM, seed: int, n: int, *, p_req: float, hot_bank: bool = False):
    """Each port holds random requests until ``ready``; returns the log and errors."""
    r = random.Random(seed)
    P, B, L = dut.n_ports, dut.banks, dut.latency
    mem: dict[int, int] = {}
    state = {"errors": [], "grants": [0] * P, "waits": 0, "max_wait": 0, "rd": 0, "wr": 0}

    def new_req():
        a = r.randrange(dut.lines)
        if hot_bank:
            a -= a % B
        return {"we": r.random() < 0.5, "addr": a, "wdata": r.getrandbits(128),
                "wmask": r.choice([0xF, 0xF, r.randrange(16)]), "age": 0}

    async def bench(ctx):
        reqs = [None] * P
        due: list[list[tuple[int, int]]] = [[] for _ in range(P)]   # (cycle, data)
        for cyc in range(n):
            for p in range(P):
                if reqs[p] is None and r.random() < p_req:
                    reqs[p] = new_req()
                q, port = reqs[p], dut.ports[p]
                ctx.set(port.valid, q is not None)
                if q is not None:
                    ctx.set(port.we, q["we"])
                    ctx.set(port.addr, q["addr"])
                    ctx.set(port.wdata, q["wdata"])
                    ctx.set(port.wmask, q["wmask"])
            # Outputs of this cycle.
            per_bank = {}
            writes = []
            for p in range(P):
                port = dut.ports[p]
                rv = ctx.get(port.rvalid)
                if due[p] and due[p][0][0] == cyc:
                    _, exp = due[p].pop(0)
                    if not rv or ctx.get(port.rdata) != exp:
                        state["errors"].append(f"cycle {cyc} port {p}: rvalid {rv} rdata "
                                               f"{ctx.get(port.rdata):#x}, expected {exp:#x}")
                elif rv:
                    state["errors"].append(f"cycle {cyc} port {p}: rvalid without a read")
                q = reqs[p]
                if q is None:
                    continue
                if ctx.get(port.ready):
                    side = (q["addr"] % B, q["we"])
                    per_bank[side] = per_bank.get(side, 0) + 1
                    state["grants"][p] += 1
                    state["max_wait"] = max(state["max_wait"], q["age"])
                    if q["we"]:
                        writes.append(q)
                        state["wr"] += 1
                    else:
                        due[p].append((cyc + L, mem.get(q["addr"], 0)))
                        state["rd"] += 1
                    reqs[p] = None
                else:
                    q["age"] += 1
                    state["waits"] += 1
            for q in writes:
                old = mem.get(q["addr"], 0)
                new = 0
                for ln in range(4):
                    src = q["wdata"] if q["wmask"] >> ln & 1 else old
                    new |= src & (0xFFFFFFFF << (32 * ln))
                mem[q["addr"]] = new
            for side, k in per_bank.items():
                if k > 1:
                    state["errors"].append(f"cycle {cyc}: {k} grants on bank/side {side}")
            await ctx.tick()

    simulate(dut, bench, period=1e-9)
    return state


@pytest.mark.parametrize("ports, lines, latency, banks, seed", [
    (2, 64, 1, None, 1), (4, 64, 3, None, 2), (3, 32, 2, 2, 3), (4, 16, 1, 1, 4)])
def test_random_traffic(ports, lines, latency, banks, seed):
    print(f"seed {seed}")
    dut = PGSM(ports=ports, lines=lines, latency=latency, banks=banks)
    st = run_traffic(dut, seed, 600, p_req=0.7)
    assert not st["errors"], st["errors"][:10]
    assert st["rd"] > 100 and st["wr"] > 100
    assert st["waits"] > 0, "no bank conflict happened"


def test_hot_bank_round_robin():
    """Every port on one bank, always asking: grants rotate, nobody waits long."""
    dut = PGSM(ports=4, lines=64, latency=1)
    st = run_traffic(dut, 5, 400, p_req=1.0, hot_bank=True)
    assert not st["errors"], st["errors"][:10]
    g = st["grants"]
    assert max(g) - min(g) <= max(g) // 4, g
    # One read and one write side per bank: at most 3 others ahead on each side.
    assert st["max_wait"] <= 2 * dut.n_ports, st


def test_from_config_and_checks():
    cfg = load_config("default", {"ipim.pes_per_pg": 4, "ipim.t_pgsm": 2})
    dut = pgsm_mod.from_config(cfg)
    assert (dut.n_ports, dut.lines, dut.latency, dut.banks) == (4, cfg.ipim.pgsm_lines, 2, 4)
    assert dut.ports[0].signature.flip() == dut.port_signature
    Fragment.get(dut, None)
    with pytest.raises(Exception, match="banks must be a power of two"):
        PGSM(ports=2, lines=64, banks=3)
