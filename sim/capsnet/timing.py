"""Cycle count of compiled vault programs, from the controller's fixed timing.

The operation controller (:mod:`pimforge.rtl.capsnet.vault`) is deterministic:
an instruction takes ``c + pe_latency + 6`` cycles (fetch, decode, setup,
``c`` issue cycles, drain), where ``c = n1 * n2 * ceil(n3 / lanes) * g'``
(``lanes = capsnet.pes_per_vault`` outputs of the ``o3`` loop per cycle,
``g' = 2`` for ADD; :meth:`~pimforge.verif.models.capsnet.isa.InstrStats.issue_cycles`),
a barrier or halt 3 cycles plus
the wait for the slowest vault, and a barrier is released no earlier than the
crossbar has moved the busiest vault port's bytes at ``intervault_bw_gbs``.
:func:`program_cycles` evaluates this from the ISA executor's statistics; the
tests check that it equals the RTL's count with an always-ready operand memory
(``--dram ideal``; the banked DRAM model of the driver adds stalls), so runs too large for the RTL
(full-size networks on 32 vaults) can be timed from the ISA model.
The statistics depend on the instructions only, so :func:`compiled_cycles`
times compiled programs without running them (the distribution choice of
:func:`pimforge.sim.capsnet.workload.choose_dimension` compares the dimensions so).
"""

from __future__ import annotations

import math
from collections import defaultdict

from pimforge.verif.models.capsnet.isa import program_stats

__all__ = ["compiled_cycles", "program_cycles"]


def program_cycles(stats, vaults: int, phases: int, pe_latency: int, cfg) -> dict:
    """``{"cycles", "phase_cycles", "xbar_wait", "phase_busy"}`` of one run (see the
    module doc; ``phase_busy[p][v]``: vault ``v``'s cycles in phase ``p`` until it
    waits at its barrier or has halted, the barrier's 3 included)."""
    lanes = cfg.capsnet.pes_per_vault
    bw = cfg.capsnet.intervault_bw_gbs * 1e9 / (cfg.freq_mhz * 1e6)
    busy = defaultdict(int)
    sent = defaultdict(int)
    recv = defaultdict(int)
    for st in stats:
        busy[st.phase, st.vault] += st.issue_cycles(lanes) + pe_latency + 6
        if st.op == "SEND" and st.peer != st.vault:
            sent[st.phase, st.vault] += st.send_bytes
            recv[st.phase, st.peer] += st.send_bytes
    phase_cycles, total, wait = [], 0, 0
    for p in range(phases):
        natural = max(busy[p, v] for v in range(vaults)) + 3
        if p < phases - 1:
            worst = max(max(sent[p, v], recv[p, v]) for v in range(vaults))
            need = math.ceil(worst / bw - 1e-6) if worst else 0
            length = max(natural, need)
            wait += length - natural
            phase_cycles.append(length)
            total += length + 1
        else:   # the driver counts the cycle that sees every vault halted
            phase_cycles.append(natural + 1)
            total += natural + 1
    # A vault reaches its barrier (or halts) 3 cycles after its last instruction.
    phase_busy = [[busy[p, v] + 3 for v in range(vaults)] for p in range(phases)]
    return {"cycles": total, "phase_cycles": phase_cycles, "xbar_wait": wait,
            "phase_busy": phase_busy}


def compiled_cycles(programs, vaults: int, pe_latency: int, cfg) -> int:
    """:func:`program_cycles` of compiled *programs* (one list per vault) without
    executing them: equal to the ISA model's run and to the RTL with an
    always-ready memory."""
    ex = program_stats(programs)
    return program_cycles(ex.stats, vaults, ex.phases, pe_latency, cfg)["cycles"]
