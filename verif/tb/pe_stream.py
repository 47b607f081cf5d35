"""A cycle-accurate stream harness shared by the shifter and PE testbenches.

One coroutine wakes on every falling edge: it first samples the outputs (the
registered state after the previous rising edge), then applies the inputs of
this cycle, which the next rising edge captures. An input applied in cycle
``c`` to a block of latency ``L`` is therefore seen in cycle ``c + L``.
"""

from __future__ import annotations

from cocotb.triggers import FallingEdge

__all__ = ["run_stream"]


async def run_stream(dut, stim: list[dict | None], outputs: tuple[str, ...], *,
                     drain: int, idle_inputs: dict | None = None) -> list[tuple[int, dict]]:
    """Apply *stim* (one dict of port values per cycle, None = idle) and collect outputs.

    Returns ``(cycle, {port: int})`` for every cycle with ``out_valid`` high.
    During idle cycles ``in_valid`` is 0 and the ports in *idle_inputs* take those
    values (random garbage that must be ignored).
    """
    seen = []
    edge = FallingEdge(dut.clk)
    for cycle in range(len(stim) + drain):
        await edge
        if dut.out_valid.value:
            seen.append((cycle, {o: int(getattr(dut, o).value) for o in outputs}))
        rec = stim[cycle] if cycle < len(stim) else None
        if rec is None:
            dut.in_valid.value = 0
            for k, v in (idle_inputs or {}).items():
                getattr(dut, k).value = v
        else:
            for k, v in rec.items():
                getattr(dut, k).value = v
            dut.in_valid.value = 1
    return seen
