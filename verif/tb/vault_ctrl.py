"""cocotb tests of the vault controller: protocol, scoreboard, scheduling, page policy, refresh."""

from __future__ import annotations

import itertools

import cocotb

from ..models.dram_timing import refresh_gaps
from .common import rng, start
from .vault_env import VaultEnv


@cocotb.test()
async def random_traffic_protocol_and_scoreboard(dut):
    """Random reads/writes with random data over few rows (bank conflicts, same-block
    hazards), phases of full queues and response back-pressure, refreshes landing on
    busy queues: every command meets every timing rule, every tag returns once with
    the right data."""
    r = rng("random")
    await start(dut)
    env = VaultEnv(dut, r)
    cocotb.start_soon(env.run(max_cycles=10**9))
    total = 0
    for _phase in range(8):
        env.p_req = r.choice([1.0, 1.0, 0.5, 0.1])
        env.p_resp = r.choice([1.0, 0.6, 0.2])
        for _ in range(90):
            while env.outstanding > 100:
                await RisingEdgeN(dut, 10)
            env.request(r.random() < 0.5, r.randrange(env.banks), r.randrange(3),
                        r.randrange(3))
            total += 1
        await RisingEdgeN(dut, r.randrange(50, 400))
    env.p_req = env.p_resp = 1.0
    while env.outstanding:
        await RisingEdgeN(dut, 20)
    env.check()
    assert len(env.responses) == total
    dut._log.info("%d requests, %d commands %s, %d cycles queue-full, %d REF with a "
                  "non-empty queue", total, len(env.cmds), env.checker.counts,
                  env.full_cycles, env.ref_with_queue)
    assert env.full_cycles > 0, "the queue never filled"
    assert env.ref_with_queue > 0, "no refresh collided with queued requests"
    assert env.checker.counts.get("PRE", 0) > 0 and env.checker.counts.get("WR", 0) > 0


async def RisingEdgeN(dut, n):
    from cocotb.triggers import ClockCycles
    await ClockCycles(dut.clk, n)


@cocotb.test()
async def scheduler_order(dut):
    """A row hit queued behind a row miss of the same bank: FR-FCFS serves the hit
    first, FCFS serves them in arrival order."""
    await start(dut)
    env = VaultEnv(dut, rng("order"))
    h = env.hmc
    cocotb.start_soon(env.run(max_cycles=10**9))
    # Start right after a refresh so none falls inside the experiment.
    while not any(c[1] == "REF" for c in env.cmds):
        await RisingEdgeN(dut, 10)
    # Sent back to back: the miss B waits behind A's row (tRAS), so both B and the
    # younger hit C are queued when the scheduler chooses.
    a = env.request(0, 0, 1, 0)
    b = env.request(0, 0, 2, 0)   # row miss, older
    c = env.request(0, 0, 1, 1)   # row hit, younger
    while env.outstanding:
        await RisingEdgeN(dut, 1)
    env.check()
    order = [t for _, t, _, _ in env.responses]
    if h.scheduler == "frfcfs":
        assert order == [a, c, b], f"FR-FCFS did not serve the row hit first: {order}"
    else:
        assert order == [a, b, c], f"FCFS reordered: {order}"
    rds = [(x[3], x[4]) for x in env.cmds if x[1] == "RD"]
    assert rds == ([(1, 0), (1, 1), (2, 0)] if h.scheduler == "frfcfs"
                   else [(1, 0), (2, 0), (1, 1)]), rds


@cocotb.test()
async def page_policy(dut):
    """Close page precharges every bank once no queued request wants its row; open page
    keeps rows open and precharges only on a conflict or for refresh."""
    r = rng("page")
    await start(dut)
    env = VaultEnv(dut, r)
    h = env.hmc
    cocotb.start_soon(env.run(max_cycles=10**9))
    env.p_req = 0.3
    for _ in range(120):
        env.request(r.random() < 0.3, r.randrange(env.banks), r.randrange(4), r.randrange(4))
    while env.outstanding:
        await RisingEdgeN(dut, 20)
    await RisingEdgeN(dut, 3 * env.t.tRAS + env.t.wr_to_pre)
    env.check()
    open_banks = [b.open_row for b in env.checker.bank if b.open_row is not None]
    last_row: dict[int, int] = {}
    for i, (cyc, cmd, bank, row, _col) in enumerate(env.cmds):
        if cmd == "ACT":
            last_row[bank] = row
        if cmd == "PRE" and h.page_policy == "open":
            # Open page: the next command to this bank is REF's or an ACT to another row.
            nxt = next((x for x in env.cmds[i + 1:] if x[2] in (bank, -1)), None)
            assert nxt is None or nxt[1] == "REF" or nxt[3] != row, \
                f"open page closed row {row} of bank {bank} at {cyc} and reopened it"
    if h.page_policy == "close":
        assert not open_banks, f"close page left rows open: {open_banks}"
        acts = env.checker.counts.get("ACT", 0)
        assert env.checker.counts.get("PRE", 0) >= acts
    else:
        # A refresh closes every bank; rows opened after the last one must stay open.
        last_act = max((x[0] for x in env.cmds if x[1] == "ACT"), default=-1)
        last_ref = max((x[0] for x in env.cmds if x[1] == "REF"), default=-1)
        assert open_banks or last_ref > last_act, "open page closed every row while idle"


@cocotb.test()
async def refresh_interval(dut):
    """REF every tREFI while idle and within tREFI plus the time to close the banks
    under traffic; none is dropped."""
    r = rng("refresh")
    await start(dut)
    env = VaultEnv(dut, r)
    t = env.t
    cocotb.start_soon(env.run(max_cycles=10**9))
    await RisingEdgeN(dut, 3 * t.tREFI + 5)
    idle_refs = [c for c, k, *_ in env.cmds if k == "REF"]
    assert len(idle_refs) == 3, f"{len(idle_refs)} REFs in 3 tREFI while idle"
    gaps = [b - a for a, b in itertools.pairwise(idle_refs)]
    assert all(g == t.tREFI for g in gaps), f"idle REF gaps {gaps}, tREFI {t.tREFI}"
    start_cycle = env.cycle
    env.p_req = 1.0
    while env.cycle - start_cycle < 3 * t.tREFI:
        if env.outstanding < 40:
            env.request(r.random() < 0.5, r.randrange(env.banks), r.randrange(env.rows),
                        r.randrange(env.cols))
        await RisingEdgeN(dut, 2)
    while env.outstanding:
        await RisingEdgeN(dut, 20)
    env.check()
    refs = [c for c, k, *_ in env.cmds if k == "REF"]
    busy_refs = [c for c in refs if c >= start_cycle]
    bound = t.tREFI + max(t.tRAS, t.wr_to_pre, t.tRTP) + t.tRP + env.banks + 2
    gaps = refresh_gaps(refs, env.cycle)[1:-1]
    expected = (env.cycle - 5) // t.tREFI
    dut._log.info("%d REFs in %d cycles (tREFI %d), largest gap %d under traffic, bound %d",
                  len(refs), env.cycle, t.tREFI, max(gaps), bound)
    assert len(busy_refs) >= 2
    assert max(gaps) <= bound, f"REF gap {max(gaps)} > {bound}"
    assert expected - 1 <= len(refs) <= expected + 1, f"{len(refs)} REFs, expected {expected}"


@cocotb.test()
async def no_starvation(dut):
    """An old row miss behind an endless stream of younger row hits is served within
    the starvation limit (FR-FCFS then falls back to FCFS) plus one row cycle."""
    r = rng("starve")
    await start(dut)
    env = VaultEnv(dut, r)
    h, t = env.hmc, env.t
    cocotb.start_soon(env.run(max_cycles=10**9))
    env.request(0, 0, 1, 0)
    while env.outstanding:
        await RisingEdgeN(dut, 1)
    # Hits already queued when the miss arrives, and more keep coming faster than
    # they are served, so the open row always has a queued hit.
    for col in range(1, 4):
        env.request(0, 0, 1, col)
    miss = env.request(0, 0, 2, 0)
    sent_at = env.cycle
    served_at = None
    col = 4
    while env.cycle - sent_at < h.starvation_limit + 600:
        while env.outstanding < 30:
            env.request(0, 0, 1, col % env.cols)
            col += 1
        await RisingEdgeN(dut, 1)
        if served_at is None and any(tg == miss for _, tg, _, _ in env.responses):
            served_at = env.cycle
    while env.outstanding:
        await RisingEdgeN(dut, 10)
    env.check()
    bound = h.starvation_limit + t.tRAS + t.tRP + t.tRCD + t.rd_latency + t.tRFC + 40
    assert served_at is not None, "the row miss was never served"
    dut._log.info("miss served after %d cycles (bound %d), %d hits meanwhile",
                  served_at - sent_at, bound, col - 1)
    assert served_at - sent_at <= bound
    if h.scheduler == "frfcfs" and h.page_policy == "open":
        # FR-FCFS did prefer the younger hits until the limit.
        assert served_at - sent_at >= h.starvation_limit // 2
