"""Mesh router in the Amaranth simulator: XY routes, wormhole VCs allocated per packet
(or kept, for ordered packets), message classes, credits, no loss.

The testbench plays the five upstream senders (they send only with a credit and
count the credits coming back) and the five downstream buffers (``depth`` flits
per VC, drained at random, a credit returned for every flit drained), so both
sides of the credit protocol are checked at every cycle.
"""

import logging
import random

import pytest

from pimforge.rtl.noc.flit import EAST, LOCAL, NORTH, PORTS, SOUTH, WEST, NoCLink
from pimforge.rtl.noc.router import Router
from pimforge.rtl.params import ParameterError
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)


def xy_port(x, y, dx, dy):
    """The output port of dimension-order routing: X first, then Y."""
    if dx > x:
        return EAST
    if dx < x:
        return WEST
    if dy < y:
        return NORTH
    if dy > y:
        return SOUTH
    return LOCAL


def run_router(seed, *, vcs, depth, load, drain_p, packets=60, rows=3, cols=3, pos=(1, 1),
               classes=1, p_ordered=0.3, in_vcs=None):
    """Random packets into every input (on the input VCs *in_vcs*, default all), a
    share *p_ordered* of them ordered; returns counters of what was seen."""
    r = random.Random(seed)
    log.info("seed %d vcs %d depth %d load %.2f drain %.2f classes %d ordered %.2f", seed, vcs,
             depth, load, drain_p, classes, p_ordered)
    link = NoCLink.Signature(rows=rows, cols=cols, vcs=vcs, flit_bits=32)
    dut = Router(link=link, depth=depth, classes=classes)
    per = vcs // classes
    in_vcs = list(range(vcs)) if in_vcs is None else in_vcs
    X, Y = pos
    # Per input port and VC, a queue of flits (whole packets one after the other).
    queues = {(p, v): [] for p in range(PORTS) for v in range(vcs)}
    flits = {}          # id -> (input port, vc, expected output, head, tail, ordered)
    fid = 0
    for _ in range(packets * PORTS):
        p, v = r.randrange(PORTS), r.choice(in_vcs)
        dx, dy = r.randrange(cols), r.randrange(rows)
        n = r.randint(1, 4)
        o = int(r.random() < p_ordered)
        for i in range(n):
            f = {"payload": fid, "vc": v, "head": int(i == 0), "tail": int(i == n - 1),
                 "ordered": o, "dest_x": dx, "dest_y": dy, "src": p}
            flits[fid] = (p, v, xy_port(X, Y, dx, dy), i == 0, i == n - 1, o)
            queues[(p, v)].append(f)
            fid += 1
    total = fid
    got = {}
    seen = {"stall": 0, "both_vcs": 0, "full_down": 0, "renamed": 0, "ordered": 0,
            "same_input_parallel": 0, "open_max": 0}

    async def tb(ctx):
        ctx.set(dut.x, X)
        ctx.set(dut.y, Y)
        credits = {(p, v): depth for p in range(PORTS) for v in range(vcs)}
        down = {(o, v): 0 for o in range(PORTS) for v in range(vcs)}
        back = {(o, v): 0 for o in range(PORTS) for v in range(vcs)}
        open_pkt = {(o, v): None for o in range(PORTS) for v in range(vcs)}
        last = {(p, v): -1 for p in range(PORTS) for v in range(vcs)}
        cycle = 0
        while len(got) < total:
            assert cycle < 40 * total, f"seed {seed}: {total - len(got)} flits stuck (deadlock)"
            # Upstream senders: one flit per port, only with a credit.
            for p in range(PORTS):
                ok = [v for v in range(vcs) if queues[(p, v)] and credits[(p, v)] > 0]
                send = ok and r.random() < load
                ctx.set(dut.inp[p].valid, bool(send))
                if send:
                    v = r.choice(ok)
                    ctx.set(dut.inp[p].flit, queues[(p, v)].pop(0))
                    credits[(p, v)] -= 1
            # Downstream buffers return the credits of what they drained last cycle.
            for o in range(PORTS):
                ctx.set(dut.out[o].credit, sum(back[(o, v)] << v for v in range(vcs)))
            # Outputs of this cycle.
            for o in range(PORTS):
                if ctx.get(dut.out[o].valid):
                    f = ctx.get(dut.out[o].flit)
                    i, v = f.payload, f.vc
                    assert i in flits and i not in got, f"seed {seed}: flit {i} lost or twice"
                    p, pv, want, hd, tl, od = flits[i]
                    got[i] = cycle
                    if od:
                        assert v == pv, f"seed {seed}: ordered flit {i} changed VC {pv} -> {v}"
                        seen["ordered"] += 1
                    assert v // per == pv // per, f"seed {seed}: flit {i} left its class"
                    seen["renamed"] += v != pv
                    assert o == want, f"seed {seed}: flit {i} to port {o}, XY says {want}"
                    # An input VC is a FIFO: its packets leave in order.
                    assert i > last[(p, pv)], f"seed {seed}: flit {i} overtook {last[(p, pv)]}"
                    last[(p, pv)] = i
                    # Wormhole: on one output VC, a packet's flits are not interleaved
                    # with another packet's.
                    cur = open_pkt[(o, v)]
                    assert (cur is None) == bool(hd), f"seed {seed}: packet interleaved at {i}"
                    assert cur is None or cur == (p, pv), f"seed {seed}: VC shared at {i}"
                    open_pkt[(o, v)] = None if tl else (p, pv)
                    down[(o, v)] += 1
                    assert down[(o, v)] <= depth, f"seed {seed}: sent without credit on {o}/{v}"
                    seen["full_down"] += down[(o, v)] == depth
            for p in range(PORTS):
                cr = ctx.get(dut.inp[p].credit)
                for v in range(vcs):
                    credits[(p, v)] += (cr >> v) & 1
                    assert credits[(p, v)] <= depth, f"seed {seed}: credit overflow {p}/{v}"
                busy = [v for v in range(vcs) if queues[(p, v)]]
                seen["stall"] += any(credits[(p, v)] == 0 for v in busy)
            seen["both_vcs"] += sum(ctx.get(dut.out[o].valid) for o in range(PORTS)) >= 3
            # Packets open at once on one output port, and from one input port on
            # several VCs of one output (the per-packet VC allocation at work).
            for o in range(PORTS):
                held = [open_pkt[(o, v)] for v in range(vcs) if open_pkt[(o, v)] is not None]
                seen["open_max"] = max(seen["open_max"], len(held))
                ins = [q for q, _ in held]
                seen["same_input_parallel"] += len(ins) > len(set(ins))
            assert not ctx.get(dut.overflow), f"seed {seed}: input buffer overflow"
            for (o, v), n in down.items():
                back[(o, v)] = int(n > 0 and r.random() < drain_p)
                down[(o, v)] -= back[(o, v)]
            await ctx.tick()
            cycle += 1
        # every credit comes home once the buffers are empty
        for p in range(PORTS):
            ctx.set(dut.inp[p].valid, 0)
        for _ in range(3):
            for o in range(PORTS):
                ctx.set(dut.out[o].credit, 0)
            await ctx.tick()
        for p in range(PORTS):
            for v in range(vcs):
                assert credits[(p, v)] <= depth

    simulate(dut, tb)
    assert len(got) == total
    return seen


@pytest.mark.parametrize("seed, vcs, depth, load, drain_p, classes", [
    (1, 2, 4, 1.0, 0.5, 1),      # above saturation: downstream backpressure
    (2, 2, 2, 0.7, 0.9, 1),
    (3, 1, 3, 1.0, 0.7, 1),
    (4, 3, 1, 0.9, 0.6, 1),      # one-flit buffers: every flit waits for its credit
    (5, 4, 2, 1.0, 0.6, 2),      # two classes of two VCs each
])
def test_router_random_traffic(seed, vcs, depth, load, drain_p, classes):
    seen = run_router(seed, vcs=vcs, depth=depth, load=load, drain_p=drain_p, classes=classes)
    assert seen["stall"] and seen["full_down"] and seen["both_vcs"] and seen["ordered"], seen
    if vcs // classes > 1:
        assert seen["renamed"] and seen["same_input_parallel"], seen


def test_router_allocates_a_free_vc_per_packet():
    """Every packet arrives on input VC 0 and is unordered: a router that kept the VC
    (static allocation) would send one packet at a time per output, on VC 0."""
    seen = run_router(21, vcs=4, depth=3, load=1.0, drain_p=0.5, p_ordered=0.0, in_vcs=[0])
    assert seen["renamed"] > 0 and seen["open_max"] >= 3, seen


def test_router_keeps_ordered_packets_on_their_vc():
    """All packets ordered: none changes VC (the checks in run_router), so one input VC's
    packets stay behind one another on one output VC."""
    seen = run_router(22, vcs=2, depth=2, load=1.0, drain_p=0.7, p_ordered=1.0)
    assert seen["renamed"] == 0 and seen["ordered"] > 0, seen


@pytest.mark.parametrize("pos", [(0, 0), (2, 1)])
def test_router_at_other_positions(pos):
    run_router(11 + pos[0], vcs=2, depth=3, load=0.8, drain_p=0.8, packets=20, pos=pos)


def test_router_parameter_checks():
    link = NoCLink.Signature(rows=2, cols=2, vcs=2, flit_bits=32)
    with pytest.raises(ParameterError, match="depth must be an integer between 1 and 64, not 0"):
        Router(link=link, depth=0)
    with pytest.raises(ParameterError, match="classes"):
        Router(link=NoCLink.Signature(rows=2, cols=2, vcs=3, flit_bits=32), depth=2, classes=2)
    with pytest.raises(ParameterError, match="vcs must be an integer between 1 and 8, not 9"):
        NoCLink.Signature(rows=2, cols=2, vcs=9, flit_bits=32)
    assert link == NoCLink.Signature(rows=2, cols=2, vcs=2, flit_bits=32)
    assert link != NoCLink.Signature(rows=2, cols=2, vcs=1, flit_bits=32)
    assert repr(link) == "NoCLink.Signature(rows=2, cols=2, vcs=2, flit_bits=32)"
