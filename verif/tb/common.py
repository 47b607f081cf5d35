"""Helpers shared by the cocotb testbenches: bench parameters, seeds, clock and reset."""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

__all__ = ["bench", "rng", "start", "CLOCK_NS"]

CLOCK_NS = 10


def bench() -> dict:
    """The manifest of the block under test (config, ports, latencies)."""
    return json.loads(os.environ["PIMFORGE_BENCH"])


def rng(tag: str = "") -> random.Random:
    """A local generator seeded from the bench seed (logged), salted by *tag*."""
    seed = int(os.environ.get("PIMFORGE_SEED", "1"))
    cocotb.log.info("random seed %d (rerun with PIMFORGE_SEED=%d)", seed, seed)
    return random.Random(f"{seed}:{tag}")


async def start(dut, reset_cycles: int = 2) -> None:
    """Start the clock and hold reset for *reset_cycles* rising edges."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
