"""Whole-accelerator energy: MAC array + on-chip scratchpads + off-chip DRAM (Sec. VI-D).

The baseline is CapsAcc as published (DESCNet Sec. IV-C version (a)): every
value on chip in 8 MiB of single-port SRAM (16 banks, no power gating), so
no DRAM traffic, and the memory leaks for the whole inference. A DESCNet
organization adds the off-chip accesses of Eq. 3-4 at
:data:`~pimforge.sim.descnet.sram.E_DRAM_PJ_PER_BYTE`. The array's energy is
the same in both (:data:`~pimforge.sim.descnet.sram.E_MAC_PJ` per MAC), as
the paper keeps the accelerator and its throughput unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import sram
from .profiles import Profile

__all__ = ["Breakdown", "accelerator_mj", "baseline_8mib", "offchip_mj", "system"]

BASELINE_BYTES = 8 * 1024 * 1024
_BPV = np.array([1.0, 1.0, 4.0])    # bytes per D, W, A value


@dataclass(frozen=True)
class Breakdown:
    accelerator_mj: float
    onchip_mj: float
    offchip_mj: float

    @property
    def total_mj(self) -> float:
        return self.accelerator_mj + self.onchip_mj + self.offchip_mj


def accelerator_mj(prof: Profile) -> float:
    return prof.macs * sram.E_MAC_PJ * 1e-9


def offchip_mj(prof: Profile) -> float:
    """Eq. 3-4 traffic; accumulator preloads count 4 bytes per value, the rest 1."""
    fills = np.array([o.fill for o in prof.ops], dtype=float)
    rd = float((fills * _BPV).sum())
    wr = float(prof.offchip_writes.sum())
    return (rd + wr) * sram.E_DRAM_PJ_PER_BYTE * 1e-9


def baseline_8mib(prof: Profile) -> Breakdown:
    """CapsAcc with all memory on chip (8 MiB)."""
    moved = float(((prof.reads + prof.writes) * _BPV).sum())
    dyn = moved * float(sram.access_pj(BASELINE_BYTES, 1, 1)) * 1e-9
    stat = float(sram.leak_mw(BASELINE_BYTES, 1)) * prof.total_seconds   # mW x s = mJ
    return Breakdown(accelerator_mj(prof), dyn + stat, 0.0)


def system(prof: Profile, onchip_mj: float) -> Breakdown:
    """A DESCNet organization whose scratchpads take ``onchip_mj``."""
    return Breakdown(accelerator_mj(prof), onchip_mj, offchip_mj(prof))
