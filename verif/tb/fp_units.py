"""cocotb testbench of the binary32 adder and multiplier (``fp32_add``, ``fp32_mul``).

The block under test is read from the manifest (``bench()["block"]``), and so
is its latency. A driver streams one operation per cycle, with random idle
cycles in some tests (random data on ``a``/``b`` while ``in_valid`` is low,
which must be ignored); a monitor collects every ``out_valid`` result in
order and checks that it arrives exactly *latency* cycles after its
operands. At the end every result is compared bit for bit with the golden
model of :mod:`pimforge.verif.models.fp32` (NaN results must be the
canonical quiet NaN the model returns).

Both coroutines wake on the falling edge only: inputs written there are
stable at the next rising edge and the registered outputs read there belong
to the previous rising edge, which keeps the cost to one wake-up per
coroutine per cycle.
"""

from __future__ import annotations

import random
from typing import Callable

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, Event, FallingEdge, First

from ..models.fp32 import corner_pairs, fp32_add, fp32_mul, random_pairs
from .common import bench, rng, start

_UNITS = {"fp32_add": ("add", fp32_add), "fp32_mul": ("mul", fp32_mul)}


def _unit() -> tuple[str, Callable, int]:
    b = bench()
    if b["block"] not in _UNITS:
        raise ValueError(f"fp_units tests fp32_add or fp32_mul, not {b['block']!r}")
    op, golden = _UNITS[b["block"]]
    return op, golden, int(b["latencies"]["result"])


async def _stream(dut, a: np.ndarray, b: np.ndarray, r: random.Random, idle: float) -> None:
    """Drive every pair of *a*, *b* (idle cycles with probability *idle*) and
    check results, their order and their timing."""
    op, golden, latency = _unit()
    await start(dut)
    a_list, b_list = a.tolist(), b.tolist()
    n = len(a_list)
    issued: list[int] = []            # falling-edge index at which each operation was driven
    seen: list[tuple[int, int]] = []  # (falling-edge index, result) of every out_valid
    done = Event()
    edge = FallingEdge(dut.clk)

    async def monitor() -> None:
        cycle = 0
        while True:
            await edge
            cycle += 1
            if dut.out_valid.value:
                seen.append((cycle, int(dut.result.value)))
                if len(seen) == n:
                    done.set()

    async def driver() -> None:
        cycle = 0
        i = 0
        while i < n:
            await edge
            cycle += 1
            if idle and r.random() < idle:
                dut.in_valid.value = 0
                dut.a.value = r.getrandbits(32)
                dut.b.value = r.getrandbits(32)
                continue
            dut.a.value = a_list[i]
            dut.b.value = b_list[i]
            dut.in_valid.value = 1
            issued.append(cycle)
            i += 1
        await edge
        dut.in_valid.value = 0

    cocotb.start_soon(monitor())
    await cocotb.start_soon(driver())
    await First(done.wait(), ClockCycles(dut.clk, latency + 4))
    # A few more cycles: out_valid must stay low once the stream has drained.
    await ClockCycles(dut.clk, latency + 2)

    assert len(seen) == n, f"{n} operations issued, {len(seen)} results seen"
    late = [(i, s - d) for i, (d, (s, _)) in enumerate(zip(issued, seen)) if s - d != latency]
    assert not late, (f"{len(late)} results off the {latency}-cycle latency, first: operation "
                      f"{late[0][0]} after {late[0][1]} cycles")
    got = np.array([res for _, res in seen], dtype=np.uint32)
    want = golden(a, b)
    bad = np.flatnonzero(got != want)
    for i in bad[:8]:
        dut._log.error("%s(%#010x, %#010x) = %#010x, expected %#010x", op, int(a[i]), int(b[i]),
                       int(got[i]), int(want[i]))
    assert bad.size == 0, f"{bad.size} of {n} {op} results differ from the golden model"
    dut._log.info("%d %s results bit-exact, latency %d", n, op, latency)


@cocotb.test()
async def corner_cross_product(dut):
    """Every ordered pair of corner values (specials, subnormals, ties), back to back."""
    a, b = corner_pairs()
    await _stream(dut, a, b, rng("corners"), idle=0.0)


@cocotb.test()
async def random_back_to_back(dut):
    """Random bit patterns and targeted exponents, one operation per cycle."""
    op, _, _ = _unit()
    r = rng("random")
    a, b = random_pairs(r, 24000, op)
    await _stream(dut, a, b, r, idle=0.0)


@cocotb.test()
async def random_with_gaps(dut):
    """Random operands with idle cycles (and random data while idle) between them."""
    op, _, _ = _unit()
    r = rng("gaps")
    a, b = random_pairs(r, 8000, op)
    await _stream(dut, a, b, r, idle=0.3)
