"""cocotb testbench of the PIM-CapsNet PE (``capsnet_pe``) against its golden model.

Each test builds a stream of records (flow, operands, MAC tags, a tag), drives
it one per cycle with idle cycles (random garbage on the operand ports while
``in_valid`` is low), and checks that the outputs are exactly those of
:meth:`pimforge.verif.models.capsnet.pe.PEModel.stream`: same count, same
order, same tags, bit-identical results, each ``latency`` cycles after the
input that produced it (the MAC result after the group's ``last``).
"""

from __future__ import annotations

import random

import cocotb
import numpy as np

from pimforge.gen.config import Config, from_dict
from pimforge.rtl.capsnet.pe import Flow

from ...models.capsnet.pe import PEModel, Record
from ..common import bench, rng, start
from ..pe_stream import run_stream

SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
            0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x3F800000, 0xBF800000,
            0x1E3CE508, 0x5E000000]


def _cfg():
    return from_dict(Config, bench()["config"])


def _f(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def _operand(r: random.Random, flow: Flow) -> int:
    u = r.random()
    if u < 0.05:
        return r.choice(SPECIALS)
    if u < 0.10:
        return r.getrandbits(32)
    if flow is Flow.EXP:
        return _f(r.uniform(-25.0, 25.0) if u < 0.9 else r.uniform(-120.0, 120.0))
    if flow is Flow.MAC:
        return _f(r.gauss(0.0, 1.0) * 10 ** r.uniform(-3, 3))
    return _f(10 ** r.uniform(-8, 8) * (1 if r.random() < 0.9 else -1))


def _rec(r: random.Random, flow: Flow, tag: int, first=False, last=False) -> Record:
    return Record(flow, _operand(r, flow), _operand(r, flow), first, last, tag & 0xFFFF)


async def _check(dut, recs: list[Record], r: random.Random, idle: float) -> None:
    model = PEModel(_cfg())
    latency = int(bench()["latencies"]["pe"])
    stim, issued = [], []
    for rec in recs:
        while r.random() < idle:
            stim.append(None)
        issued.append(len(stim))
        stim.append({"op": rec.op.value, "a": rec.a, "b": rec.b, "first": int(rec.first),
                     "last": int(rec.last), "tag": rec.tag})
    await start(dut)
    seen = await run_stream(dut, stim, ("result", "out_tag", "out_op"), drain=latency + 3,
                            idle_inputs={"a": r.getrandbits(32), "b": r.getrandbits(32),
                                         "op": r.randrange(5), "first": 1, "last": 1})
    want = model.stream(recs)
    assert len(seen) == len(want), f"{len(seen)} outputs, expected {len(want)}"
    bad = 0
    for (cyc, out), (i, bits, tag) in zip(seen, want):
        ok = (out["result"] == bits and out["out_tag"] == tag and out["out_op"] == recs[i].op.value
              and cyc == issued[i] + latency)
        if not ok:
            bad += 1
            if bad <= 10:
                dut._log.error("input %d (%s a=%08x b=%08x first=%d last=%d): got %08x tag %d "
                               "cycle %d, want %08x tag %d cycle %d", i, recs[i].op.name,
                               recs[i].a, recs[i].b, recs[i].first, recs[i].last,
                               out["result"], out["out_tag"], cyc, bits, tag,
                               issued[i] + latency)
    assert bad == 0, f"{bad} of {len(want)} outputs differ from the golden model"


@cocotb.test()
async def each_flow_back_to_back(dut):
    """Every non-MAC flow, 300 inputs back to back, specials included."""
    r = rng("flows")
    recs = []
    for flow in (Flow.EXP, Flow.ISQRT, Flow.RECIP, Flow.DIV):
        recs += [_rec(r, flow, len(recs) + i) for i in range(300)]
    await _check(dut, recs, r, idle=0.0)


@cocotb.test()
async def mac_random_groups(dut):
    """MAC groups of random lengths 1..40 with idle gaps inside and between groups."""
    r = rng("mac")
    recs = []
    for _ in range(60):
        n = r.choice([1, 2, 3, 4, 5, r.randint(1, 40)])
        recs += [_rec(r, Flow.MAC, len(recs), i == 0, i == n - 1) for i in range(n)]
    await _check(dut, recs, r, idle=0.3)


@cocotb.test()
async def flow_switch_every_cycle(dut):
    """Random flow per input, MAC groups left open across other flows, no gaps."""
    r = rng("mixed")
    recs = []
    for i in range(1500):
        flow = Flow(r.randrange(5))
        if flow is Flow.MAC:
            recs.append(_rec(r, flow, i, first=r.random() < 0.1, last=r.random() < 0.2))
        else:
            recs.append(_rec(r, flow, i))
    await _check(dut, recs, r, idle=0.0)


@cocotb.test()
async def mac_group_boundaries(dut):
    """Defined behaviour at group boundaries: ``first`` abandons an open group, a MAC
    after ``last`` opens a new group without ``first``, single-product groups back
    to back, and ``first`` with ``last`` on one input."""
    r = rng("bounds")
    one, two, three = _f(1.0), _f(2.0), _f(3.0)
    recs = [
        Record(Flow.MAC, one, two, True, False, 1),    # opens a group
        Record(Flow.MAC, one, two, False, False, 2),
        Record(Flow.MAC, three, three, True, False, 3),  # abandons it: result 9 + 1
        Record(Flow.MAC, one, one, False, True, 4),
        Record(Flow.MAC, two, two, False, True, 5),    # new group without first: 4
        Record(Flow.MAC, two, three, True, True, 6),   # 6
        Record(Flow.MAC, three, three, True, True, 7),  # 9
    ]
    recs += [Record(Flow.MAC, _f(float(i)), one, i == 0, i == 9, 8 + i) for i in range(10)]
    want = [b for _, b, _ in PEModel(_cfg()).stream(recs)]
    assert [float(np.uint32(w).view(np.float32)) for w in want] == [10.0, 4.0, 6.0, 9.0, 45.0]
    await _check(dut, recs, r, idle=0.0)
