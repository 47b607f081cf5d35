"""Organization of the HMC-like 3D memory cube: vaults, banks, DRAM timing, scheduling.

Clock choice: the vault controllers run at the DRAM command clock ``tck_ns``
(0.8 ns in an HMC 2.1 part, 1.25 GHz), so that one controller cycle is one
DRAM command slot. Every DRAM timing below is given in ns and resolved once to
these controller cycles (:func:`pimforge.rtl.mem.timing.resolve_timing`);
the membench trace and its JSON report use the same unit. ``Config.freq_mhz``
stays the clock of the PEs on the logic die.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

from .base import check, check_choice, check_float, check_int, check_pow2

__all__ = ["MAPPINGS", "PAGE_POLICIES", "SCHEDULERS", "DRAMTimingNs", "HMCConfig"]

SCHEDULERS = ("fcfs", "frfcfs")
PAGE_POLICIES = ("open", "close")
MAPPINGS = ("default", "capsnet")

_TCK_HMC21 = 0.8


def _ns(cycles: int) -> float:
    # The HMC 2.1 defaults are quoted in 0.8 ns cycles (Ramulator's HMC model);
    # stored in ns, rounded so that the ns -> cycle resolution is exact.
    return round(cycles * _TCK_HMC21, 6)


@dataclass(frozen=True)
class DRAMTimingNs:
    """DRAM timing constraints in ns (HMC 2.1 part, Ramulator's HMC model).

    Parameters
    ----------
    tCL, tRCD, tRP, tCWL, tRAS, tRC, tBL, tCCD, tRTP, tWTR, tWR, tRRD, tFAW, tRFC, tREFI : float
        The usual JEDEC meanings; tBL is the data-burst duration of one block.
        Defaults: 17, 17, 17, 13, 34, 51, 4, 4, 9, 3, 19, 7, 17, 200, 9750
        cycles of 0.8 ns.
    """

    tCL: float = _ns(17)
    tRCD: float = _ns(17)
    tRP: float = _ns(17)
    tCWL: float = _ns(13)
    tRAS: float = _ns(34)
    tRC: float = _ns(51)
    tBL: float = _ns(4)
    tCCD: float = _ns(4)
    tRTP: float = _ns(9)
    tWTR: float = _ns(3)
    tWR: float = _ns(19)
    tRRD: float = _ns(7)
    tFAW: float = _ns(17)
    tRFC: float = _ns(200)
    tREFI: float = _ns(9750)

    #: Where the table sits in a config (error messages name it).
    WHERE: ClassVar[str] = "hmc.timing"

    def __post_init__(self):
        for f in fields(self):
            check_float(f"{self.WHERE}.{f.name}", getattr(self, f.name), 0.1, 100_000.0)
        check(self.tRC >= self.tRAS, f"{self.WHERE}.tRC", self.tRC,
              f"at least tRAS ({self.tRAS} ns)")
        check(self.tREFI > self.tRFC, f"{self.WHERE}.tREFI", self.tREFI,
              f"longer than tRFC ({self.tRFC} ns)")


@dataclass(frozen=True)
class HMCConfig:
    """Cube organization and the vault controllers' policies.

    Parameters
    ----------
    vaults : int
        Vaults in the cube (each with its own vault controller on the logic die).
    banks_per_vault : int
        DRAM banks under one vault controller.
    links : int
        Host link ports on the crossbar.
    capacity_per_vault : int
        Bytes behind one vault controller; rows per bank are derived from it.
        The DRAM array is a sparse simulation model, so a large capacity costs
        address bits only.
    row_bytes : int
        DRAM page (row buffer) size of one bank.
    block_bytes : int
        Access granularity (one column command moves one block).
    max_block_bytes : int
        HMC "MAX block" = sub-page size of the default mapping (32-256 B).
    queue_depth : int
        Request-queue entries of one vault controller.
    scheduler : str
        ``"fcfs"`` or ``"frfcfs"``.
    page_policy : str
        ``"open"`` or ``"close"``.
    mapping : str
        ``"default"`` (HMC low interleave, Fig. 13a) or ``"capsnet"`` (Fig. 13b).
    starvation_limit : int
        Controller cycles the oldest request may wait before FR-FCFS stops
        preferring younger row hits.
    tck_ns : float
        DRAM command clock = vault-controller clock.
    vault_bw_gbs : float
        Internal (TSV) bandwidth of one vault between its DRAM partition and the
        logic die, GB/s. PIM-CapsNet Table 4: 512 GB/s internal over 32 vaults
        = 16.0. The PIM-CapsNet driver's banked DRAM model moves at most this
        much per vault.
    link_bw_gbs : float
        Aggregate bandwidth of the host links, both directions together, GB/s
        (half of it each way). PIM-CapsNet Sec. 4 / Table 4: "fully-duplex
        links which can provide up to 320GB/s" (the HMC 1.0 figure: 8 links x
        16 lanes x 10 Gb/s x 2 directions). The crossbar is built to switch
        the links' traffic to the vaults, so logic-die units that reach the
        vaults through it (PIM-Intra's centralized units, Sec. 6.1) share this
        bandwidth.
    timing : DRAMTimingNs
        Timing constraints in ns.
    """

    vaults: int = 2
    banks_per_vault: int = 16
    links: int = 2
    # 4 MiB: 1024 rows of 256 B in each of 16 banks (the DRAM array is a sparse model).
    capacity_per_vault: int = 4 * 1024 * 1024
    row_bytes: int = 256
    block_bytes: int = 16
    max_block_bytes: int = 32
    queue_depth: int = 16
    scheduler: str = "frfcfs"
    page_policy: str = "open"
    mapping: str = "capsnet"       # the PIM-CapsNet mapping (Sec. 5.2)
    starvation_limit: int = 256
    tck_ns: float = _TCK_HMC21
    vault_bw_gbs: float = 16.0
    link_bw_gbs: float = 320.0
    timing: DRAMTimingNs = field(default_factory=DRAMTimingNs)

    def __post_init__(self):
        check_pow2("hmc.vaults", self.vaults, 1, 64)
        check_pow2("hmc.banks_per_vault", self.banks_per_vault, 1, 64)
        check_pow2("hmc.links", self.links, 1, 8)
        check_pow2("hmc.block_bytes", self.block_bytes, 16, 16)
        check_pow2("hmc.max_block_bytes", self.max_block_bytes, 32, 256)
        check_pow2("hmc.row_bytes", self.row_bytes, max(self.block_bytes, self.max_block_bytes),
                   8192)
        check_pow2("hmc.capacity_per_vault", self.capacity_per_vault,
                   self.banks_per_vault * self.row_bytes * 2, 2**32)
        check_int("hmc.queue_depth", self.queue_depth, 2, 64)
        check_choice("hmc.scheduler", self.scheduler, SCHEDULERS)
        check_choice("hmc.page_policy", self.page_policy, PAGE_POLICIES)
        check_choice("hmc.mapping", self.mapping, MAPPINGS)
        check_int("hmc.starvation_limit", self.starvation_limit, 8, 65535)
        check_float("hmc.tck_ns", self.tck_ns, 0.1, 100.0)
        v = self.vault_bw_gbs
        check(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 100_000,
              "hmc.vault_bw_gbs", v,
              "a positive number of GB/s (internal TSV bandwidth of one vault) up to 100000")
        check_float("hmc.link_bw_gbs", self.link_bw_gbs, 0.001, 100_000.0)
        # The capsnet mapping's largest sub-page (256 B) must fit in one row.
        if self.mapping == "capsnet":
            check(self.row_bytes >= 256, "hmc.row_bytes", self.row_bytes,
                  "at least 256 with mapping 'capsnet' (its largest sub-page)")

    @property
    def vault_bits(self) -> int:
        return max(1, (self.vaults - 1).bit_length())

    @property
    def bank_bits(self) -> int:
        return max(1, (self.banks_per_vault - 1).bit_length())

    @property
    def rows(self) -> int:
        """Rows per bank."""
        return self.capacity_per_vault // (self.banks_per_vault * self.row_bytes)

    @property
    def columns(self) -> int:
        """Blocks per row."""
        return self.row_bytes // self.block_bytes

    @property
    def row_bits(self) -> int:
        return max(1, (self.rows - 1).bit_length())

    @property
    def col_bits(self) -> int:
        return max(1, (self.columns - 1).bit_length())

    @property
    def addr_bits(self) -> int:
        """Width of a physical byte address of the whole cube."""
        return (self.vaults * self.capacity_per_vault - 1).bit_length()
