"""PIM-CapsNet's approximate special functions (Sec. 5.2.2) as a :class:`RoutingOps`.

A numpy float32 model of what the reconfigurable PE computes, for the accuracy
study (Table 5).  It implements the interface of
:mod:`pimforge.verif.models.routing` so that a bit-exact model of the PE's
flows can replace it without touching the routing or accuracy code.

Exponential (Eq. 13-14)
    ``e^x = 2^y`` with ``y = log2(e) x``.  Writing ``2^y = 2^floor(y) * 2^f``
    (``f = y - floor(y)``), the FP32 bit pattern of the result is the fixed-point
    number ``floor(y) + b + (2^f - 1)`` (``b = 127``) shifted left by 23 bits.
    The PE replaces ``2^f - f`` by its mean ``Avg = integral_0^1 (2^f - f) df =
    1/ln 2 - 1/2`` and so computes one float32 multiply and one float32 add,
    ``z = log2(e) * x + (Avg + b - 1)``, then the bit shifting ``BS``: the
    significand of ``z`` is shifted by its real exponent so that the integer part
    of ``z`` fills the exponent field and its fraction the mantissa -- the bit
    pattern ``floor(z * 2^23)``.  Because ``z`` is a float32 near 127, only about
    16 fraction bits survive: the "over-chunked" low bits the paper mentions.
    ``z < 0`` flushes to 0 and ``z >= 255`` saturates to +inf.

Accuracy recovery
    The result is multiplied by ``k = mean(e^x / approx(x))`` over
    ``calibration_samples`` (10,000 in the paper) values of ``x`` drawn
    uniformly from [-10, 0] (the range of the max-shifted softmax arguments)
    with ``calibration_seed`` -- "enlarging the results by the mean percentage of
    the value difference", one extra multiply.

Inverse square root and reciprocal
    The magic-constant bit trick (Lomont, the paper's [60]): the integer view
    ``i`` of ``x`` gives the seed ``0x5f3759df - (i >> 1)`` for ``1/sqrt(x)`` and
    ``0x7ef311c7 - i`` for ``1/x``, refined by ``newton_steps`` Newton-Raphson
    steps in float32: ``y * (1.5 - (0.5 x) * y * y)`` and ``y * (2 - x * y)``.

Reductions keep the sequential float32 accumulation of
:class:`~pimforge.verif.models.routing.ExactFloat32Ops`.
"""

from __future__ import annotations

import math

import numpy as np

from pimforge.verif.models.routing import ExactFloat32Ops

__all__ = ["ApproxOps", "exp_approx", "rsqrt_approx", "recip_approx", "recovery_factor",
           "EXP_AVG", "RSQRT_MAGIC", "RECIP_MAGIC"]

F32 = np.float32
LOG2E = F32(1.0 / math.log(2.0))
#: Mean of 2^f - f over f in [0, 1].
EXP_AVG = 1.0 / math.log(2.0) - 0.5
EXP_BIAS = F32(EXP_AVG + 127 - 1)
RSQRT_MAGIC = 0x5F3759DF
RECIP_MAGIC = 0x7EF311C7


def _as_f32(x) -> np.ndarray:
    return np.asarray(x, dtype=F32)


def exp_approx(x: np.ndarray) -> np.ndarray:
    """Eq. 14 without recovery: ``BS(log2(e) x + Avg + b - 1)`` in float32."""
    z = (_as_f32(x) * LOG2E).astype(F32)
    z = (z + EXP_BIAS).astype(F32)
    zd = np.clip(z.astype(np.float64), 0.0, 255.0)
    bits = np.floor(zd * float(1 << 23)).astype(np.uint32)
    bits = np.where(z >= 255, np.uint32(0x7F800000), bits)
    bits = np.where(np.isnan(z), np.uint32(0x7FC00000), bits)
    return bits.astype(np.uint32).view(F32)


def rsqrt_approx(x: np.ndarray, newton_steps: int = 1) -> np.ndarray:
    """Magic-constant ``1/sqrt(x)`` with *newton_steps* float32 Newton steps."""
    x = _as_f32(x)
    i = x.view(np.uint32)
    y = (np.uint32(RSQRT_MAGIC) - (i >> np.uint32(1))).astype(np.uint32).view(F32)
    h = (x * F32(0.5)).astype(F32)
    for _ in range(newton_steps):
        y = (y * (F32(1.5) - (h * y).astype(F32) * y)).astype(F32)
    return y


def recip_approx(x: np.ndarray, newton_steps: int = 1) -> np.ndarray:
    """Magic-constant ``1/x`` (``x > 0``) with *newton_steps* float32 Newton steps."""
    x = _as_f32(x)
    i = x.view(np.uint32)
    y = (np.uint32(RECIP_MAGIC) - i).astype(np.uint32).view(F32)
    for _ in range(newton_steps):
        y = (y * (F32(2) - (x * y).astype(F32))).astype(F32)
    return y


def recovery_factor(samples: int = 10_000, seed: int = 2019) -> np.float32:
    """The accuracy-recovery multiplier ``mean(e^x / exp_approx(x))``, x ~ U[-10, 0]."""
    x = np.random.default_rng(seed).uniform(-10.0, 0.0, samples).astype(F32)
    ratio = np.exp(x.astype(np.float64)) / exp_approx(x).astype(np.float64)
    return F32(np.mean(ratio))


class ApproxOps(ExactFloat32Ops):
    """Routing ops with the PE's approximations.

    Parameters
    ----------
    recovery : bool
        Multiply every ``exp`` result by :func:`recovery_factor` (Eq. 14 + recovery).
    newton_steps : int
        Newton steps of ``rsqrt`` and ``recip``.
    calibration_samples, calibration_seed : int
        Draw of the recovery calibration.
    """

    def __init__(self, *, recovery: bool = True, newton_steps: int = 1,
                 calibration_samples: int = 10_000, calibration_seed: int = 2019):
        self.recovery = recovery
        self.newton_steps = newton_steps
        self.factor = (recovery_factor(calibration_samples, calibration_seed) if recovery
                       else F32(1))
        self.name = f"approx{'+recovery' if recovery else ''}"

    @classmethod
    def from_config(cls, pe, recovery: bool | None = None) -> "ApproxOps":
        """From a ``PEConfig`` (``cfg.pe``); *recovery* overrides ``pe.exp_recovery``."""
        return cls(recovery=pe.exp_recovery if recovery is None else recovery,
                   newton_steps=pe.newton_steps, calibration_samples=pe.calibration_samples,
                   calibration_seed=pe.calibration_seed)

    def exp(self, x: np.ndarray) -> np.ndarray:
        e = exp_approx(x)
        return (e * self.factor).astype(F32) if self.recovery else e

    def rsqrt(self, x: np.ndarray) -> np.ndarray:
        return rsqrt_approx(x, self.newton_steps)

    def recip(self, x: np.ndarray) -> np.ndarray:
        return recip_approx(x, self.newton_steps)
