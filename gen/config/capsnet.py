"""PIM-CapsNet compute parameters: the PE and its vault-level organization."""

from __future__ import annotations

from dataclasses import dataclass

from .base import check_int

__all__ = ["PEConfig", "CapsNetConfig"]


@dataclass(frozen=True)
class PEConfig:
    """The reconfigurable PE of PIM-CapsNet Sec. 5.2.2.

    Parameters
    ----------
    newton_steps : int
        Newton-Raphson refinements after the magic-constant seed in the
        inverse-square-root and reciprocal flows.
    exp_recovery : bool
        Apply the accuracy-recovery multiply of the exponential flow (Eq. 14).
    calibration_samples : int
        Samples used to derive the approximation constants (the paper uses 10,000).
    calibration_seed : int
        Seed of the calibration sample draw, so the constants are reproducible.
    """

    newton_steps: int = 1
    exp_recovery: bool = True
    calibration_samples: int = 10_000
    calibration_seed: int = 2019

    def __post_init__(self):
        check_int("pe.newton_steps", self.newton_steps, 0, 3)
        check_int("pe.calibration_samples", self.calibration_samples, 100, 10_000_000)
        check_int("pe.calibration_seed", self.calibration_seed, 0, 2**32 - 1)


@dataclass(frozen=True)
class CapsNetConfig:
    """Vault-level PIM-CapsNet organization.

    Parameters
    ----------
    pes_per_vault : int
        PEs beside each vault controller (16 in the paper).
    """

    pes_per_vault: int = 16

    def __post_init__(self):
        check_int("capsnet.pes_per_vault", self.pes_per_vault, 1, 64)
