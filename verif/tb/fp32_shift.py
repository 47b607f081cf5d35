"""cocotb testbench of the FP32 shifter (``fp32_shift``) against its golden model.

Every :class:`~pimforge.rtl.fp.shift.ShiftOp` is driven with corner operands
(signed zeros, subnormals, the normal range ends, infinities, NaNs) crossed
with corner amounts, then with random patterns and amounts, one per cycle with
random idle cycles; each result must arrive exactly ``latency`` cycles after
its operands and equal :func:`pimforge.verif.models.fp32_shift.shift` bit for bit.
"""

from __future__ import annotations

import cocotb
import numpy as np

from pimforge.gen.config import Config, from_dict
from pimforge.rtl.capsnet.params import pe_constants
from pimforge.rtl.fp.shift import K_WIDTH, ShiftOp

from ..models import fp32_shift as model
from .common import bench, rng, start
from .pe_stream import run_stream

CORNER_A = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00400000,
            0x00800000, 0x80800000, 0x3F800000, 0xBF800000, 0x3FFFFFFF, 0x7F7FFFFF,
            0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
            0x42FE0000, 0x437F0000, 0x437EFFFF, 0x3EFFFFFF, 0x4B000000, 0x4AFFFFFE]
CORNER_K = [0, 1, -1, 2, -2, 23, -23, 24, -24, 25, -25, 31, -31, 32, -32, 126, -126, 127,
            -127, 149, -149, 150, -150, 254, -254, 255, 300, -300, 511, -512]


def _magics():
    c = pe_constants(_cfg())
    return dict(isqrt_magic=c.isqrt_magic, recip_magic=c.recip_magic)


def _cfg():
    return from_dict(Config, bench()["config"])


async def _check(dut, ops, a, k, idle=0.2):
    r = rng("shift")
    latency = int(bench()["latencies"]["result"])
    stim = []
    for o, x, y in zip(ops, a, k):
        while r.random() < idle:
            stim.append(None)
        stim.append({"op": int(o), "a": int(x), "k": int(y)})
    await start(dut)
    seen = await run_stream(dut, stim, ("result",), drain=latency + 2,
                            idle_inputs={"a": r.getrandbits(32), "k": 5})
    issued = [c for c, s in enumerate(stim) if s is not None]
    assert len(seen) == len(ops), f"{len(seen)} results for {len(ops)} operations"
    m = _magics()
    bad = 0
    for i, ((cyc, out), o, x, y) in enumerate(zip(seen, ops, a, k)):
        want = int(model.shift(ShiftOp(o), np.uint32(x), y, **m))
        assert cyc == issued[i] + latency, \
            f"op {i} came out in cycle {cyc}, not {issued[i]} + {latency}"
        if out["result"] != want:
            bad += 1
            if bad <= 10:
                dut._log.error("%s a=%08x k=%d: got %08x want %08x", ShiftOp(o).name, x, y,
                               out["result"], want)
    assert bad == 0, f"{bad} of {len(ops)} results differ from the golden model"


@cocotb.test()
async def corners(dut):
    """Every op on every corner operand crossed with every corner amount."""
    ops, a, k = [], [], []
    for o in ShiftOp:
        for x in CORNER_A:
            for y in (CORNER_K if o in (ShiftOp.LDEXP, ShiftOp.SRL, ShiftOp.SLL, ShiftOp.FIX)
                      else [0]):
                ops.append(o.value), a.append(x), k.append(y)
    await _check(dut, ops, a, k, idle=0.05)


@cocotb.test()
async def random_ops(dut):
    """Random ops, random patterns, amounts random in the full range and near the edges."""
    r = rng("random_ops")
    ops, a, k = [], [], []
    lo, hi = -(1 << (K_WIDTH - 1)), (1 << (K_WIDTH - 1)) - 1
    for _ in range(3000):
        o = r.choice(list(ShiftOp))
        x = r.getrandbits(32)
        if r.random() < 0.3:          # subnormals and tiny normals
            x = (x & 0x80000000) | r.getrandbits(r.choice([8, 16, 23, 24]))
        y = r.choice([r.randint(lo, hi), r.randint(-40, 40), r.randint(-160, 160)])
        ops.append(o.value), a.append(x), k.append(y)
    await _check(dut, ops, a, k)


@cocotb.test()
async def exp_fix_range(dut):
    """FIX with k = 23 over the exponential flow's inputs y' in [-1, 256] (Fig. 12)."""
    r = rng("fix")
    a = [int(np.float32(r.uniform(-1.0, 256.0)).view(np.uint32)) for _ in range(1500)]
    await _check(dut, [ShiftOp.FIX.value] * len(a), a, [23] * len(a), idle=0.0)
