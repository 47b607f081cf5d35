"""Organization of the HMC-like 3D memory cube (vaults and banks)."""

from __future__ import annotations

from dataclasses import dataclass

from .base import check_pow2

__all__ = ["HMCConfig"]


@dataclass(frozen=True)
class HMCConfig:
    """Cube organization.

    Parameters
    ----------
    vaults : int
        Vaults in the cube (each with its own vault controller on the logic die).
    banks_per_vault : int
        DRAM banks under one vault controller.
    """

    vaults: int = 2
    banks_per_vault: int = 16

    def __post_init__(self):
        check_pow2("hmc.vaults", self.vaults, 1, 64)
        check_pow2("hmc.banks_per_vault", self.banks_per_vault, 1, 64)

    @property
    def vault_bits(self) -> int:
        return max(1, (self.vaults - 1).bit_length())

    @property
    def bank_bits(self) -> int:
        return max(1, (self.banks_per_vault - 1).bit_length())
