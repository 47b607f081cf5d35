"""Where a routing run's cycles over its ideal-memory time go, by measured parts.

The vault controller is deterministic: with an always-ready memory a vault is
busy ``phase_busy[p][v]`` cycles in phase ``p``
(:func:`~pimforge.sim.capsnet.timing.program_cycles`), and a phase lasts until
its slowest vault reaches the barrier and the crossbar has moved the phase's
sends. On the RTL with the banked DRAM model a vault is busy longer only by
the cycles its read bundle waits (``rd.ready`` low), which the driver counts
per phase and vault as vault request stalls (the bundle's banks behind) and
bandwidth stalls (the vault's TSVs behind). So, per phase, with ``v*`` the
vault that reached the barrier last on the RTL:

``phase_rtl - phase_ideal = vrs(v*) + bw(v*) - hidden + barrier``

* ``vrs(v*)``, ``bw(v*)``: the last vault's stall cycles (measured);
* ``hidden``: the part of them that overlapped work the ideal-memory critical
  vault does beyond ``v*``'s (``max_v busy_ideal - busy_ideal(v*)``, >= 0);
* ``barrier``: the change of the wait from the last arrival to the release
  (crossbar transfers still in flight, measured on both runs);
* ``unaccounted = busy_rtl(v*) - stalls(v*) - busy_ideal(v*)``: zero when the
  stall counters explain every extra cycle of the vault (what the tests check).

Summed over the phases the parts equal ``cycles - ideal_cycles`` exactly.
"""

from __future__ import annotations

from .rtl_run import RTLRun

__all__ = ["BREAKDOWN", "PARTS", "cycles_over_ideal", "time_breakdown"]

#: Keys of the breakdown's parts, in the order the parts are printed.
PARTS = ("bandwidth_stalls", "crossbar_stalls", "vault_request_stalls",
         "hidden_by_other_vaults", "barrier_and_crossbar", "unaccounted")
#: Keys of :func:`time_breakdown` (Fig. 16a's factors, and the TSV's).
BREAKDOWN = ("compute", "inter_vault_communication", "vault_request_stalls",
             "tsv_bandwidth_stalls")


def cycles_over_ideal(run: RTLRun, timing: dict) -> dict:
    """The breakdown of ``run.cycles - timing["cycles"]`` (see the module doc).

    *timing* is :func:`~pimforge.sim.capsnet.timing.program_cycles` of the same
    programs. Returns ``{"cycles", "ideal_cycles", "over", "parts": {PARTS...},
    "last_vault": [v* per phase], "per_phase": [{"over", PARTS...} per phase]}``;
    ``hidden_by_other_vaults`` is negative (it is subtracted).
    """
    ideal_len, rtl_len = timing["phase_cycles"], run.phase_cycles
    ideal_busy = timing["phase_busy"]
    if not (len(rtl_len) == len(ideal_len) == len(ideal_busy) == len(run.phase_busy)):
        raise ValueError(f"the RTL run has {len(rtl_len)} phases, the timing model "
                         f"{len(ideal_len)}: not the same programs")
    parts = dict.fromkeys(PARTS, 0)
    last, per_phase = [], []
    for p, (busy, b_ideal) in enumerate(zip(run.phase_busy, ideal_busy)):
        vrs, bw = run.phase_vault_request_stalls[p], run.phase_bandwidth_stalls[p]
        xs = _crossbar_stalls(run, p, len(busy))
        v = max(range(len(busy)), key=lambda k: (busy[k], -(vrs[k] + bw[k] + xs[k])))
        last.append(v)
        ph = {"over": rtl_len[p] - ideal_len[p], "bandwidth_stalls": bw[v],
              "crossbar_stalls": xs[v], "vault_request_stalls": vrs[v],
              "hidden_by_other_vaults": -(max(b_ideal) - b_ideal[v]),
              "barrier_and_crossbar": (rtl_len[p] - max(busy)) - (ideal_len[p] - max(b_ideal)),
              "unaccounted": busy[v] - vrs[v] - bw[v] - xs[v] - b_ideal[v]}
        per_phase.append(ph)
        for k in PARTS:
            parts[k] += ph[k]
    return {"cycles": run.cycles, "ideal_cycles": timing["cycles"],
            "over": run.cycles - timing["cycles"], "parts": parts, "last_vault": last,
            "per_phase": per_phase}


def _crossbar_stalls(run: RTLRun, p: int, vaults: int) -> list[int]:
    # Runs read back from before the crossbar stalls were counted have none.
    return run.phase_crossbar_stalls[p] if run.phase_crossbar_stalls else [0] * vaults


def time_breakdown(run: RTLRun) -> dict:
    """The run's cycles split as Fig. 16(a) splits the time: ``compute``,
    ``inter_vault_communication``, ``vault_request_stalls`` (and
    ``tsv_bandwidth_stalls``, which the figure does not show).

    Per phase, on the vault that reached the barrier last (``v*``, the most
    active cycles): its stall cycles by cause (its banks behind: vault request
    stalls; its TSV behind: TSV bandwidth; the crossbar behind: inter-vault
    communication), the rest of its active cycles as compute, and the phase's
    cycles after it reached the barrier (the crossbar still moving the
    aggregation's sends) as inter-vault communication. The release cycle
    between phases is compute (the controller's barrier). The parts add up to
    ``run.cycles``. Returns ``{"cycles", "parts": {BREAKDOWN...}, "share":
    {BREAKDOWN...}}`` (shares of ``cycles``).
    """
    parts = dict.fromkeys(BREAKDOWN, 0)
    for p, busy in enumerate(run.phase_busy):
        vrs, bw = run.phase_vault_request_stalls[p], run.phase_bandwidth_stalls[p]
        xs = _crossbar_stalls(run, p, len(busy))
        v = max(range(len(busy)), key=lambda k: (busy[k], -(vrs[k] + bw[k] + xs[k])))
        parts["compute"] += busy[v] - vrs[v] - bw[v] - xs[v]
        parts["vault_request_stalls"] += vrs[v]
        parts["tsv_bandwidth_stalls"] += bw[v]
        parts["inter_vault_communication"] += xs[v] + run.phase_cycles[p] - busy[v]
    parts["compute"] += run.cycles - sum(run.phase_cycles)
    return {"cycles": run.cycles, "parts": parts,
            "share": {k: x / run.cycles for k, x in parts.items()}}
