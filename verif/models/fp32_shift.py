"""Golden model of :class:`pimforge.rtl.fp.shift.FP32Shift`, vectorized over numpy arrays.

Every operation takes and returns binary32 bit patterns as ``uint32`` arrays;
``k`` is an integer array (or scalar) broadcast against ``a``.
"""

from __future__ import annotations

import numpy as np

from pimforge.rtl.fp.shift import CANONICAL_NAN, POS_INF, ShiftOp

__all__ = ["shift", "ldexp", "fix", "srl", "sll", "isqrt_seed", "recip_seed"]


def _u32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint64).astype(np.uint32)


def _f64(a: np.ndarray) -> np.ndarray:
    return _u32(a).view(np.float32).astype(np.float64)


def ldexp(a, k) -> np.ndarray:
    """``float32(float64(a) * 2**k)`` (one RNE rounding), NaN made canonical."""
    a = _u32(a)
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), a.shape)
    # float64 holds a * 2**k exactly for |k| <= 511, so the cast is the only rounding.
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        r = np.ldexp(_f64(a), k.astype(np.int32)).astype(np.float32).view(np.uint32)
    return np.where(np.isnan(a.view(np.float32)), np.uint32(CANONICAL_NAN), r).astype(np.uint32)


def fix(a, k) -> np.ndarray:
    """``trunc(a * 2**k)`` saturated to ``[0, 0x7F800000]``; NaN gives 0x7FC00000."""
    a = _u32(a)
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), a.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.ldexp(_f64(a), k.astype(np.int32))
        v = np.where(v > 0, np.floor(np.minimum(v, float(POS_INF))), 0.0)
    r = v.astype(np.uint32)
    return np.where(np.isnan(a.view(np.float32)), np.uint32(CANONICAL_NAN), r).astype(np.uint32)


def srl(a, k) -> np.ndarray:
    a = _u32(a).astype(np.uint64)
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), a.shape)
    mag = np.minimum(np.abs(k), 32).astype(np.uint64)
    r = np.where(k >= 0, a >> mag, (a << mag) & 0xFFFFFFFF)
    return np.where(mag >= 32, 0, r).astype(np.uint32)


def sll(a, k) -> np.ndarray:
    return srl(a, -np.asarray(k, dtype=np.int64))


def isqrt_seed(a, magic: int) -> np.ndarray:
    return ((np.int64(magic) - (_u32(a).astype(np.int64) >> 1)) & 0xFFFFFFFF).astype(np.uint32)


def recip_seed(a, magic: int) -> np.ndarray:
    return ((np.int64(magic) - _u32(a).astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)


def shift(op: ShiftOp, a, k=0, *, isqrt_magic: int = 0, recip_magic: int = 0) -> np.ndarray:
    """Apply one :class:`ShiftOp` to every element of *a*."""
    op = ShiftOp(op)
    if op is ShiftOp.LDEXP:
        return ldexp(a, k)
    if op is ShiftOp.SRL:
        return srl(a, k)
    if op is ShiftOp.SLL:
        return sll(a, k)
    if op is ShiftOp.FIX:
        return fix(a, k)
    if op is ShiftOp.ISQRT_SEED:
        return isqrt_seed(a, isqrt_magic)
    return recip_seed(a, recip_magic)
