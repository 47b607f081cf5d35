"""DESCNet scratchpad parameters: sectored multi-bank SPM, PMU and organization."""

from __future__ import annotations

from dataclasses import dataclass

from .base import check, check_choice, check_int, check_pow2

__all__ = ["ORGANIZATIONS", "SPMConfig"]

ORGANIZATIONS = ("SMP", "SEP", "HY")


@dataclass(frozen=True)
class SPMConfig:
    """A power-gated sectored scratchpad and the DESCNet organization built from it.

    Parameters
    ----------
    size_bytes : int
        Capacity of the stand-alone ``spm`` block.
    word_bits : int
        Width of one word (one access).
    banks : int
        Banks ``B``; consecutive words go to consecutive banks.
    sectors : int
        Sectors per bank ``SC``; the sectors with the same index in all banks
        share one sleep signal (DESCNet Sec. V-A).
    ports : int
        Ports of the stand-alone ``spm`` block (1-3).
    wakeup_cycles : int
        Cycles from the release of a sleep request until the sector is usable.
    sleep_cycles : int
        Cycles from a sleep request until the sector is off and acknowledged.
    organization : str
        ``SMP``, ``SEP`` or ``HY`` for the ``descnet_spm`` block.
    shared_bytes, data_bytes, weight_bytes, acc_bytes : int
        Memory sizes of the organization (the ones it does not use are ignored).
    shared_ports : int
        Ports of the shared memory (3 in SMP; 1-3 in HY, Sec. VI-C).
    shared_sectors, data_sectors, weight_sectors, acc_sectors : int
        Sectors per bank of each memory of the organization (1 = no power gating).
    """

    size_bytes: int = 1024
    word_bits: int = 32
    banks: int = 4
    sectors: int = 4
    ports: int = 1
    wakeup_cycles: int = 3
    sleep_cycles: int = 2
    organization: str = "HY"
    shared_bytes: int = 512
    data_bytes: int = 256
    weight_bytes: int = 256
    acc_bytes: int = 256
    shared_ports: int = 3
    shared_sectors: int = 2
    data_sectors: int = 2
    weight_sectors: int = 2
    acc_sectors: int = 2

    def __post_init__(self):
        check_pow2("spm.word_bits", self.word_bits, 8, 128)
        check_pow2("spm.banks", self.banks, 1, 64)
        check_pow2("spm.sectors", self.sectors, 1, 256)
        check_int("spm.ports", self.ports, 1, 3)
        # Elaboration grows with the macros x ports (about 15 s for 256 x 3, 41 s
        # for 1024 x 3 on a 2-core machine), not with the capacity.
        check(self.banks * self.sectors <= 1024, "spm.sectors", self.sectors,
              f"at most {1024 // self.banks} with {self.banks} banks (at most 1024 SRAM "
              f"macros, banks x sectors, so that the scratchpad elaborates in under a minute)")
        check_int("spm.wakeup_cycles", self.wakeup_cycles, 1, 1024)
        check_int("spm.sleep_cycles", self.sleep_cycles, 1, 1024)
        check_choice("spm.organization", self.organization, ORGANIZATIONS)
        check_int("spm.shared_ports", self.shared_ports, 1, 3)
        word = self.word_bits // 8
        for name, size, sc in (("size_bytes", self.size_bytes, self.sectors),
                               ("shared_bytes", self.shared_bytes, self.shared_sectors),
                               ("data_bytes", self.data_bytes, self.data_sectors),
                               ("weight_bytes", self.weight_bytes, self.weight_sectors),
                               ("acc_bytes", self.acc_bytes, self.acc_sectors)):
            check_pow2(f"spm.{name}", size, 8, 1 << 24)
            if name != "size_bytes":
                check_pow2(f"spm.{name[:-6]}_sectors", sc, 1, 256)
            check(size >= word * self.banks * sc, f"spm.{name}", size,
                  f"at least word_bits/8 x banks x sectors = {word * self.banks * sc} bytes "
                  f"(one word per bank and sector)")
        check(self.organization != "SMP" or self.shared_ports == 3, "spm.shared_ports",
              self.shared_ports, "3 for the SMP organization")
