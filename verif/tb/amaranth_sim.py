"""Running a block on Amaranth's Python simulator, the way every unit test does.

The block testbenches on Verilog use cocotb (:mod:`pimforge.verif.tb.common`); the unit
tests of small blocks use Amaranth's simulator with async testbenches, all through
:func:`simulate` (``tests/conftest.py`` hands it to tests as the ``simulate`` fixture).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from amaranth.sim import Simulator

__all__ = ["simulate"]


def simulate(dut, *testbenches: Callable, period: float = 1e-6,
             processes: Iterable[Callable] = (), vcd: str | Path | None = None) -> Simulator:
    """Simulate *dut* on one clock of *period* seconds with the async *testbenches*
    (``add_testbench``) and *processes* (``add_process``) until every testbench returns;
    *vcd*: also write the waves there. Returns the finished simulator."""
    sim = Simulator(dut)
    sim.add_clock(period)
    for tb in testbenches:
        sim.add_testbench(tb)
    for proc in processes:
        sim.add_process(proc)
    if vcd is None:
        sim.run()
    else:
        with sim.write_vcd(str(vcd)):
            sim.run()
    return sim
