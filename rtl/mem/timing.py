"""DRAM timing resolved from ns to vault-controller cycles (data, no hardware).

The config gives every constraint in ns (:class:`~pimforge.gen.config.hmc.DRAMTimingNs`);
:func:`resolve_timing` turns them into whole controller cycles once, rounding up,
so that the RTL counters, the protocol checker and the membench report all use
the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = ["TIMING_NAMES", "Timing", "resolve_timing"]

TIMING_NAMES = ("tRCD", "tRP", "tRAS", "tRC", "tCCD", "tRRD", "tFAW", "tWR", "tRTP", "tWTR",
                "tCL", "tCWL", "tBL", "tRFC", "tREFI")


@dataclass(frozen=True)
class Timing:
    """DRAM timing in controller cycles, plus the derived command-to-command gaps."""

    tRCD: int
    tRP: int
    tRAS: int
    tRC: int
    tCCD: int
    tRRD: int
    tFAW: int
    tWR: int
    tRTP: int
    tWTR: int
    tCL: int
    tCWL: int
    tBL: int
    tRFC: int
    tREFI: int

    @property
    def wr_to_pre(self) -> int:
        """WR -> PRE of the same bank: write data ends, then write recovery."""
        return self.tCWL + self.tBL + self.tWR

    @property
    def wr_to_rd(self) -> int:
        """WR -> RD on the vault: write data ends, then write-to-read turnaround."""
        return self.tCWL + self.tBL + self.tWTR

    @property
    def rd_to_wr(self) -> int:
        """RD -> WR on the vault: read burst leaves the TSVs before write data
        arrives, with a 2-cycle bus turnaround (Ramulator's tRTRS)."""
        return max(1, self.tCL + self.tBL + 2 - self.tCWL)

    @property
    def rd_latency(self) -> int:
        """RD command to the end of its data burst (when the response is returned)."""
        return self.tCL + self.tBL

    @property
    def col_gap(self) -> int:
        """Column to column on the vault: command spacing and data-bus occupancy."""
        return max(self.tCCD, self.tBL)

    def as_dict(self) -> dict[str, int]:
        return {n: getattr(self, n) for n in TIMING_NAMES}


def resolve_timing(timing_ns, tck_ns: float) -> Timing:
    """Resolve a :class:`DRAMTimingNs` to cycles of *tck_ns*: ``ceil(t / tCK)``, at least 1.

    The quotient is rounded to 1e-6 before the ceiling so that 13.6 ns / 0.8 ns
    gives 17 cycles and not 18 through floating-point noise.
    """
    vals = {}
    for f in fields(timing_ns):
        vals[f.name] = max(1, math.ceil(round(getattr(timing_ns, f.name) / tck_ns, 6)))
    return Timing(**{n: vals[n] for n in TIMING_NAMES})
