"""Golden model of the binary32 adder and multiplier, and their stimulus.

:func:`fp32_add` and :func:`fp32_mul` take and return bit patterns (numpy
``uint32`` arrays or ints) and compute with numpy ``float32``, which is IEEE
754 round-to-nearest-even with subnormals on every platform numpy supports;
every NaN result is replaced by the canonical quiet NaN :data:`QNAN`, as the
hardware does. :func:`ref_add` and :func:`ref_mul` are an independent
integer-only implementation (exact arithmetic on Python ints, then one
rounding) that the tests use to check the numpy model itself, so that a
platform that flushed subnormals to zero would be caught rather than trusted.

:func:`corner_values` and :func:`random_pairs` produce the stimulus shared by
the unit tests and the cocotb benches.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = ["QNAN", "fp32_add", "fp32_mul", "ref_add", "ref_mul", "is_nan", "corner_values",
           "corner_pairs", "random_pairs", "bits_of", "float_of"]

#: Canonical quiet NaN returned for every NaN result.
QNAN = 0x7FC00000

_EXP_MASK = 0x7F800000
_FRAC_MASK = 0x007FFFFF


def bits_of(x: float) -> int:
    """Bit pattern of the binary32 nearest to *x* (numpy rounding)."""
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def float_of(bits: int) -> float:
    """The binary32 value of a bit pattern, as a Python float."""
    return float(np.array(bits, dtype=np.uint32).view(np.float32))


def is_nan(bits) -> np.ndarray | bool:
    """Whether bit pattern(s) encode a NaN."""
    b = np.asarray(bits, dtype=np.uint32)
    r = ((b & _EXP_MASK) == _EXP_MASK) & ((b & _FRAC_MASK) != 0)
    return bool(r) if r.ndim == 0 else r


def _binary(op, a, b):
    scalar = np.ndim(a) == 0 and np.ndim(b) == 0
    av = np.asarray(a, dtype=np.uint32).view(np.float32)
    bv = np.asarray(b, dtype=np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        r = np.asarray(op(av, bv), dtype=np.float32)
    out = r.view(np.uint32).copy()
    out[np.isnan(r)] = QNAN
    return int(out) if scalar else out


def fp32_add(a, b):
    """``a + b`` on binary32 bit patterns (round to nearest even, canonical NaN)."""
    return _binary(np.add, a, b)


def fp32_mul(a, b):
    """``a * b`` on binary32 bit patterns (round to nearest even, canonical NaN)."""
    return _binary(np.multiply, a, b)


# -- Integer-only reference ---------------------------------------------------

def _decode(bits: int) -> tuple[str, int, int, int]:
    """(kind, sign, significand, exponent) with value = significand * 2**exponent."""
    sign = bits >> 31
    field = (bits >> 23) & 0xFF
    frac = bits & _FRAC_MASK
    if field == 0xFF:
        return ("nan" if frac else "inf"), sign, 0, 0
    if field == 0:
        return ("zero" if frac == 0 else "finite"), sign, frac, -149
    return "finite", sign, frac | (1 << 23), field - 150


def _round(sign: int, sig: int, exp: int) -> int:
    """Round the nonzero exact value ``sig * 2**exp`` to binary32, ties to even."""
    # Exponent of the lowest kept bit: 24 significant bits for normals, but
    # never below 2**-149 (the subnormal quantum).
    top = sig.bit_length() - 1 + exp          # value in [2**top, 2**(top+1))
    lsb = max(top - 23, -149)
    if lsb > exp:
        drop = lsb - exp
        q, r = sig >> drop, sig & ((1 << drop) - 1)
        half = 1 << (drop - 1)
        if r > half or (r == half and q & 1):
            q += 1
    else:
        q = sig << (exp - lsb)
    # q * 2**lsb; q may have grown to 2**24 after rounding up.
    if q >= 1 << 24:
        q >>= 1
        lsb += 1
    if q < 1 << 23:                            # subnormal (lsb == -149)
        return (sign << 31) | q
    field = lsb + 150
    if field >= 0xFF:
        return (sign << 31) | _EXP_MASK
    return (sign << 31) | (field << 23) | (q & _FRAC_MASK)


def ref_add(a: int, b: int) -> int:
    """``a + b`` computed exactly on integers and rounded once (canonical NaN)."""
    ka, sa, ma, ea = _decode(a)
    kb, sb, mb, eb = _decode(b)
    if ka == "nan" or kb == "nan" or (ka == kb == "inf" and sa != sb):
        return QNAN
    if ka == "inf":
        return a
    if kb == "inf":
        return b
    e = min(ea, eb)
    total = (-1) ** sa * (ma << (ea - e)) + (-1) ** sb * (mb << (eb - e))
    if total == 0:
        # Round to nearest: an exact zero sum is +0 unless both addends are negative.
        return (sa & sb) << 31
    return _round(int(total < 0), abs(total), e)


def ref_mul(a: int, b: int) -> int:
    """``a * b`` computed exactly on integers and rounded once (canonical NaN)."""
    ka, sa, ma, ea = _decode(a)
    kb, sb, mb, eb = _decode(b)
    sign = sa ^ sb
    if ka == "nan" or kb == "nan" or {ka, kb} == {"inf", "zero"}:
        return QNAN
    if "inf" in (ka, kb):
        return (sign << 31) | _EXP_MASK
    if "zero" in (ka, kb):
        return sign << 31
    return _round(sign, ma * mb, ea + eb)


# -- Stimulus -------------------------------------------------------------------

def corner_values() -> list[int]:
    """Operands that exercise every special path, each with both signs.

    Zeros, the smallest and largest subnormals, the smallest normal, one and
    its neighbours, the largest finite value, infinities, a quiet and a
    signalling NaN, values whose sums with others land exactly on rounding
    ties (``2**-24``, ``3 * 2**-24``, ``2**24``, ``1 + 2**-12`` whose square
    is a tie), values near the overflow threshold and near ``2**-126`` so
    that pairs cancel, overflow, or produce subnormals.
    """
    magnitudes = [
        0x00000000,  # 0
        0x00000001,  # smallest subnormal 2**-149
        0x00000002,
        0x00000003,
        0x00400000,  # 2**-127 (subnormal, one bit)
        0x007FFFFF,  # largest subnormal
        0x00800000,  # smallest normal 2**-126
        0x00800001,
        0x00FFFFFF,
        0x01000000,  # 2**-125
        0x0C800000,  # 2**-102: its product with 2**-24 is below the subnormal range
        0x1F800000,  # 2**-64: squares to 2**-128 (subnormal product)
        0x20000000,  # 2**-63
        0x33800000,  # 2**-24: 1 + this is a tie (rounds to even, down)
        0x33C00000,  # 1.5 * 2**-24
        0x34400000,  # 3 * 2**-24: 1 + this is a tie (rounds to even, up)
        0x34000000,  # 2**-23: one ulp of 1
        0x3F000000,  # 0.5
        0x3F7FFFFF,  # largest below 1
        0x3F800000,  # 1
        0x3F800001,  # 1 + ulp: + 2**-24 is a tie that rounds up
        0x3F800800,  # 1 + 2**-12: its square is a tie
        0x3FC00000,  # 1.5
        0x3FFFFFFF,  # largest below 2
        0x40000000,  # 2
        0x40490FDB,  # pi
        0x4B000000,  # 2**23
        0x4B800000,  # 2**24: + 1 is a tie
        0x4B800001,
        0x5F800000,  # 2**64: squares to 2**128 (overflow)
        0x7E800000,  # 2**126
        0x7F000000,  # 2**127: doubles to overflow
        0x7F7FFFFE,
        0x7F7FFFFF,  # largest finite
        0x7F800000,  # infinity
        0x7FC00000,  # quiet NaN
        0x7F800001,  # signalling NaN
        0x7FFFFFFF,  # NaN with all payload bits
    ]
    return [m | s for m in magnitudes for s in (0, 0x80000000)]


def corner_pairs() -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of :func:`corner_values` (the full cross product)."""
    v = np.array(corner_values(), dtype=np.uint32)
    a, b = np.meshgrid(v, v, indexing="ij")
    return a.ravel(), b.ravel()


def random_pairs(rng: random.Random, n: int, op: str) -> tuple[np.ndarray, np.ndarray]:
    """*n* random operand pairs for *op* (``"add"`` or ``"mul"``), drawn from
    *rng*: a quarter uniform bit patterns, and the rest operands whose
    exponents make the interesting cases likely.

    For ``"add"``: nearby exponents and opposite signs (massive cancellation,
    exact zeros), subnormal and tiny normal operands (subnormal sums), and
    equal-magnitude pairs. For ``"mul"``: exponents whose sum lands near the
    subnormal range, the overflow threshold and in the middle.
    """
    if op not in ("add", "mul"):
        raise ValueError(f"op must be 'add' or 'mul', not {op!r}")
    a = np.empty(n, dtype=np.uint32)
    b = np.empty(n, dtype=np.uint32)
    r = rng.getrandbits
    for i in range(n):
        kind = rng.randrange(4)
        x = r(32)
        if kind == 0:
            y = r(32)
        elif op == "add":
            ex = (x >> 23) & 0xFF
            if kind == 1:    # nearby exponents, any signs: cancellation and alignment
                ey = min(max(ex + rng.randint(-3, 3), 0), 0xFE)
                x = (x & 0x807FFFFF) | (min(ex, 0xFE) << 23)
                y = (r(9) >> 8 << 31) | (ey << 23) | r(23)
                if rng.random() < 0.3:  # same leading significand bits: deep cancellation
                    y = (y & ~0xFFFF) | (x & 0xFFFF) ^ r(4)
            elif kind == 2:  # tiny operands: subnormal sums
                x = (x & 0x80000000) | rng.randrange(0x01800000)
                y = (r(1) << 31) | rng.randrange(0x01800000)
            else:            # exact negation and near-negation
                y = (x ^ 0x80000000) ^ (r(2) if rng.random() < 0.5 else 0)
        else:
            # target is the sum of the biased exponents; the product's is target - 127.
            if kind == 1:    # near and below 2**-126: subnormal and underflowing products
                target = rng.randint(95, 130)
            elif kind == 2:  # near the overflow threshold
                target = rng.randint(375, 385)
            else:            # ordinary range
                target = rng.randint(200, 310)
            ex = rng.randint(max(0, target - 0xFE), min(0xFE, target))
            ey = target - ex
            x = (r(1) << 31) | (ex << 23) | r(23)
            y = (r(1) << 31) | (ey << 23) | r(23)
        a[i] = x & 0xFFFFFFFF
        b[i] = y & 0xFFFFFFFF
    return a, b
