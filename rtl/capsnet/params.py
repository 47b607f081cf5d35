"""The constants of the PIM-CapsNet PE approximations, derived here and nowhere else.

Both the RTL generator (:mod:`pimforge.rtl.capsnet.pe`, :mod:`pimforge.rtl.fp.shift`)
and the golden model (:mod:`pimforge.verif.models.capsnet.pe`) import them, so a
constant can never differ between the hardware and its reference.

Exponential (PIM-CapsNet Eq. 13-14)
    ``e**x = 2**y`` with ``y = log2(e) * x``. Writing the integer ``(y + b) * 2**23``
    (``b = 127``) as an FP32 pattern gives ``2**floor(y) * (1 + f)``, ``f = y - floor(y)``;
    the exact pattern would need ``floor(y) + b + 2**f - 1 = y + (2**f - f) + b - 1``.
    The paper replaces ``2**f - f`` by its mean over ``f`` in ``[0, 1)``:
    ``Avg = integral_0^1 (2**f - f) df = 1/ln 2 - 1/2`` (0.94270), so the value fed to
    the float-to-fixed shift is ``y' = log2(e) * x + (Avg + b - 1)`` (Eq. 14).
    Accuracy recovery: ``calibration_samples`` inputs drawn uniformly from
    :data:`EXP_CALIBRATION_RANGE` with ``numpy.random.default_rng(calibration_seed)``
    run through the approximation (without recovery); the results are enlarged by
    the mean percentage of the value difference, i.e. multiplied by
    ``R = 1 + mean((exact - approx) / approx)``.

Inverse square root and reciprocal (bit-shifting seeds, Lomont)
    Reading a positive FP32 pattern ``i`` as an integer gives about
    ``2**23 * (log2(x) + b - s)`` with ``s`` in ``[0, 0.0861]``; so
    ``M - (i >> 1)`` approximates ``x**-1/2`` when ``M = 1.5 * 2**23 * (b - s)`` and
    ``M - i`` approximates ``1/x`` when ``M = 2 * 2**23 * (b - s)``. The best ``M``
    inside that first-principles bracket is found by :func:`search_magic`: a
    golden-section search over the integers followed by an exhaustive local scan,
    minimizing the maximum relative error (float64 arithmetic) over a dense grid
    of one period of inputs, after ``min(newton_steps, 1)`` Newton steps (one step
    is the regime of the default config; further steps square the error, so the
    constant that is best after one step stays best).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["EXP_CALIBRATION_RANGE", "LOG2E", "EXP_AVG", "EXP_BIAS", "PEConstants",
           "calibration_inputs", "exp_recovery_factor", "exp_without_recovery", "f32_bits",
           "isqrt_magic", "pe_constants", "recip_magic", "search_magic"]

FP32_BIAS = 127
#: Input range of the calibration draw: the softmax inputs (routing logits b_ij).
EXP_CALIBRATION_RANGE = (-20.0, 20.0)
#: log2(e) as the nearest binary32 value.
LOG2E = float(np.float32(1.0 / math.log(2.0)))
#: Mean of 2**f - f over f in [0, 1): the closed form of the integral.
EXP_AVG = 1.0 / math.log(2.0) - 0.5
#: Avg + b - 1 of Eq. 14 as the nearest binary32 value.
EXP_BIAS = float(np.float32(EXP_AVG + FP32_BIAS - 1))
#: Newton-step constants, exact in binary32.
ISQRT_THREE_HALVES = 1.5
ISQRT_HALF = 0.5
RECIP_TWO = 2.0
#: Float-to-fixed distance of the exponential flow: 23 fraction bits.
EXP_FIX_SHIFT = 23


def f32_bits(x: float) -> int:
    """The binary32 bit pattern of *x* (rounded to nearest even)."""
    return int(np.float32(x).view(np.uint32))


def _grid(lo: float, octaves: int, n: int) -> np.ndarray:
    """*n* binary32 patterns spread evenly over *octaves* octaves starting at *lo*."""
    b0 = f32_bits(lo)
    b1 = b0 + (octaves << 23)
    return np.linspace(b0, b1 - 1, n).astype(np.int64)


def _isqrt_err(magic: int, steps: int, bits: np.ndarray) -> float:
    x = bits.astype(np.uint32).view(np.float32).astype(np.float64)
    y = ((magic - (bits >> 1)) & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
    for _ in range(steps):
        y = y * (1.5 - 0.5 * x * y * y)
    return float(np.max(np.abs(y * np.sqrt(x) - 1.0)))


def _recip_err(magic: int, steps: int, bits: np.ndarray) -> float:
    x = bits.astype(np.uint32).view(np.float32).astype(np.float64)
    y = ((magic - bits) & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
    for _ in range(steps):
        y = y * (2.0 - x * y)
    return float(np.max(np.abs(y * x - 1.0)))


def search_magic(err, lo: int, hi: int, *, fine=None, scan: int = 16) -> int:
    """The integer in ``[lo, hi]`` minimizing ``err(m)``: golden section, then a local scan.

    ``err`` is unimodal over the bracket at the scale of the search (the maximum of
    the two error lobes of the seed); the final exhaustive scan of ``+-scan`` around
    the bracket left removes the integer steps, using ``fine`` (a denser-grid
    error) when given.
    """
    invphi = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c = int(round(b - invphi * (b - a)))
    d = int(round(a + invphi * (b - a)))
    fc, fd = err(c), err(d)
    while b - a > 4 * scan:
        if fc < fd:
            b, d, fd = d, c, fc
            c = int(round(b - invphi * (b - a)))
            fc = err(c)
        else:
            a, c, fc = c, d, fd
            d = int(round(a + invphi * (b - a)))
            fd = err(d)
    fine = fine or err
    best = min(range(a - scan, b + scan + 1), key=lambda m: (fine(m), m))
    return best


def _bracket(scale: float) -> tuple[int, int]:
    # s in [0, 0.0861] (the largest gap between log2(1 + f) and f): M = scale * 2**23 * (b - s)
    return int(scale * 2**23 * (FP32_BIAS - 0.0861)), int(scale * 2**23 * FP32_BIAS)


def isqrt_magic(newton_steps: int) -> int:
    """The inverse-square-root seed constant, best after ``min(newton_steps, 1)`` steps."""
    return _isqrt_magic(min(newton_steps, 1))


def recip_magic(newton_steps: int) -> int:
    """The reciprocal seed constant, best after ``min(newton_steps, 1)`` steps."""
    return _recip_magic(min(newton_steps, 1))


@functools.cache
def _isqrt_magic(steps: int) -> int:
    # x**-1/2 via i >> 1 has a period of two octaves; 2**18 points resolve the
    # error maxima to the last bit of the constant (Lomont's 0x5f37642f for the
    # bare seed and 0x5f375a86 after one step come out of this search).
    coarse, dense = _grid(1.0, 2, 1 << 14), _grid(1.0, 2, 1 << 18)
    return search_magic(lambda m: _isqrt_err(m, steps, coarse), *_bracket(1.5),
                        fine=lambda m: _isqrt_err(m, steps, dense))


@functools.cache
def _recip_magic(steps: int) -> int:
    coarse, dense = _grid(1.0, 1, 1 << 14), _grid(1.0, 1, 1 << 18)  # period: one octave
    return search_magic(lambda m: _recip_err(m, steps, coarse), *_bracket(2.0),
                        fine=lambda m: _recip_err(m, steps, dense))


def exp_without_recovery(x: np.ndarray) -> np.ndarray:
    """The exponential flow of Eq. 13-14 without recovery, on float32 values *x*.

    Each step is one IEEE binary32 operation as the PE performs it (multiply by
    :data:`LOG2E` and add :data:`EXP_BIAS`, each rounded to nearest even, then
    the float-to-fixed shift by :data:`EXP_FIX_SHIFT` truncated), so for the
    finite inputs of the calibration range it is bit-exact with the golden
    model's ``exp_approx(x, recovery=None)`` (``tests/test_capsnet_pe.py`` checks
    that on the calibration draw). Returns float32 values.
    """
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        t = (x * np.float32(LOG2E)).astype(np.float32)
        t = (t + np.float32(EXP_BIAS)).astype(np.float32)
        v = np.ldexp(t.astype(np.float64), EXP_FIX_SHIFT)
        v = np.where(v > 0, np.floor(np.minimum(v, float(0x7F800000))), 0.0)
    return v.astype(np.uint32).view(np.float32)


def calibration_inputs(samples: int, seed: int) -> np.ndarray:
    """The calibration draw: *samples* float32 inputs uniform in :data:`EXP_CALIBRATION_RANGE`."""
    return np.random.default_rng(seed).uniform(*EXP_CALIBRATION_RANGE, samples).astype(
        np.float32)


@functools.cache
def exp_recovery_factor(samples: int, seed: int) -> float:
    """The accuracy-recovery multiplier ``R`` (nearest binary32) of the exponential flow."""
    x = calibration_inputs(samples, seed)
    approx = exp_without_recovery(x).astype(np.float64)
    exact = np.exp(x.astype(np.float64))
    return float(np.float32(1.0 + np.mean((exact - approx) / approx)))


@dataclass(frozen=True)
class PEConstants:
    """Every constant a PE for one config needs, as binary32 values or 32-bit patterns."""

    newton_steps: int
    exp_recovery: bool
    add_latency: int
    mul_latency: int
    shift_latency: int
    isqrt_magic: int
    recip_magic: int
    log2e: float
    exp_bias: float
    exp_recovery_factor: float

    def bits(self, name: str) -> int:
        return f32_bits(getattr(self, name))


def pe_constants(cfg) -> PEConstants:
    """The constants for *cfg* (``cfg.fp`` latencies and ``cfg.pe``)."""
    pe = cfg.pe
    return PEConstants(
        newton_steps=pe.newton_steps, exp_recovery=pe.exp_recovery,
        add_latency=cfg.fp.add_latency, mul_latency=cfg.fp.mul_latency, shift_latency=1,
        isqrt_magic=isqrt_magic(pe.newton_steps), recip_magic=recip_magic(pe.newton_steps),
        log2e=LOG2E, exp_bias=EXP_BIAS,
        exp_recovery_factor=exp_recovery_factor(pe.calibration_samples, pe.calibration_seed))
