"""FP32 datapath parameters shared by every design that computes in binary32."""

from __future__ import annotations

from dataclasses import dataclass

from .base import check_int

__all__ = ["FPConfig"]


@dataclass(frozen=True)
class FPConfig:
    """Pipeline depths of the FP32 units.

    Parameters
    ----------
    add_latency : int
        Register stages of the adder (cycles from ``in_valid`` to ``out_valid``).
    mul_latency : int
        Register stages of the multiplier.
    """

    add_latency: int = 3
    mul_latency: int = 3

    def __post_init__(self):
        check_int("fp.add_latency", self.add_latency, 1, 8)
        check_int("fp.mul_latency", self.mul_latency, 1, 8)
