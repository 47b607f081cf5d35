"""Golden model of the PIM-CapsNet PE (:class:`pimforge.rtl.capsnet.pe.CapsNetPE`).

Bit-exact reference of every flow, vectorized over numpy arrays of binary32
bit patterns (``uint32``). Additions and multiplications are numpy float32
operations (IEEE binary32, round to nearest even, subnormals kept) with every
NaN made the canonical 0x7FC00000: the FP32 units' own model
(:mod:`pimforge.verif.models.fp32`);
the bit tricks come from :mod:`pimforge.verif.models.fp32_shift`. The order of
operations below is the order of the RTL pipeline, operand for operand.

Flows (``x`` = operand ``a``, ``d`` = operand ``b``; ``+``/``*`` each round once)
    EXP    ``t = x * log2e``; ``t = t + (Avg + 127 - 1)``; ``z = FIX(t, 23)`` read as FP32;
           with recovery ``z = z * R``.
    ISQRT  ``h = x * 0.5``; ``y = isqrt_magic - (bits(x) >> 1)``; then per Newton step
           ``t = h * y``; ``t = t * y``; ``t = 1.5 + (-t)``; ``y = y * t``.
    RECIP  ``y = recip_magic - bits(x)``; per step ``t = x * y``; ``t = 2 + (-t)``; ``y = y * t``.
    DIV    ``y = recip(d)`` as RECIP; then ``q = x * y``.
    MAC    ``p = x * d`` accumulated into ``La = add_latency`` interleaved lanes: the
           ``j``-th product of a group goes to lane ``j % La`` as ``S = S + p`` (a fresh
           lane starts from ``-0.0 + p``, which is ``p``); the group's ``last`` element
           returns ``((S_0 + S_1) + S_2) + ... + S_{La-1}``, unused lanes being -0.0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pimforge.rtl.capsnet.params import (
    EXP_BIAS,
    EXP_FIX_SHIFT,
    ISQRT_HALF,
    ISQRT_THREE_HALVES,
    LOG2E,
    RECIP_TWO,
    PEConstants,
    f32_bits,
    pe_constants,
)
from pimforge.rtl.capsnet.pe import Flow

from .. import fp32
from .. import fp32_shift as sh

__all__ = ["CANONICAL_NAN", "NEG_ZERO", "f32_add", "f32_mul", "exp_approx", "isqrt_approx",
           "recip_approx", "div_approx", "PEModel", "Record"]

CANONICAL_NAN = np.uint32(0x7FC00000)
NEG_ZERO = 0x80000000
SIGN = np.uint32(0x80000000)


def _u32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint64).astype(np.uint32)


def f32_add(a, b) -> np.ndarray:
    """Binary32 ``a + b`` (RNE) on bit patterns, NaN canonical: the FP32 adder's model."""
    return np.asarray(fp32.fp32_add(_u32(a), _u32(b)), dtype=np.uint32)


def f32_mul(a, b) -> np.ndarray:
    """Binary32 ``a * b`` (RNE) on bit patterns, NaN canonical: the FP32 multiplier's model."""
    return np.asarray(fp32.fp32_mul(_u32(a), _u32(b)), dtype=np.uint32)


def exp_approx(x, *, recovery: float | None, log2e: float | None = None,
               bias: float | None = None) -> np.ndarray:
    """The exponential flow (Eq. 13-14) on bit patterns *x*; ``recovery`` is R or None."""

    t = f32_mul(x, f32_bits(LOG2E if log2e is None else log2e))
    t = f32_add(t, f32_bits(EXP_BIAS if bias is None else bias))
    z = sh.fix(t, EXP_FIX_SHIFT)
    if recovery is not None:
        z = f32_mul(z, f32_bits(recovery))
    return z


def isqrt_approx(x, *, newton_steps: int, magic: int) -> np.ndarray:
    """The inverse-square-root flow on bit patterns *x*."""
    x = _u32(x)
    h = f32_mul(x, f32_bits(ISQRT_HALF))
    y = sh.isqrt_seed(x, magic)
    for _ in range(newton_steps):
        t = f32_mul(h, y)
        t = f32_mul(t, y)
        t = f32_add(f32_bits(ISQRT_THREE_HALVES), t ^ SIGN)
        y = f32_mul(y, t)
    return y


def recip_approx(x, *, newton_steps: int, magic: int) -> np.ndarray:
    """The reciprocal flow on bit patterns *x*."""
    x = _u32(x)
    y = sh.recip_seed(x, magic)
    for _ in range(newton_steps):
        t = f32_mul(x, y)
        t = f32_add(f32_bits(RECIP_TWO), t ^ SIGN)
        y = f32_mul(y, t)
    return y


def div_approx(a, d, *, newton_steps: int, magic: int) -> np.ndarray:
    """The division flow ``a / d = a * recip(d)`` on bit patterns."""
    return f32_mul(a, recip_approx(d, newton_steps=newton_steps, magic=magic))


@dataclass(frozen=True)
class Record:
    """One PE input: flow, operands (bit patterns), MAC group tags and a user tag."""

    op: int
    a: int
    b: int = 0
    first: bool = False
    last: bool = False
    tag: int = 0


class PEModel:
    """The PE of one config: vectorized flows and an in-order stream model.

    Parameters
    ----------
    cfg : Config
        Reads ``cfg.fp`` (the MAC lane count is ``cfg.fp.add_latency``) and ``cfg.pe``.
    """

    def __init__(self, cfg):
        self.c: PEConstants = pe_constants(cfg)
        self.lanes = self.c.add_latency

    def exp(self, x) -> np.ndarray:
        return exp_approx(x, recovery=self.c.exp_recovery_factor if self.c.exp_recovery
                          else None)

    def isqrt(self, x) -> np.ndarray:
        return isqrt_approx(x, newton_steps=self.c.newton_steps, magic=self.c.isqrt_magic)

    def recip(self, x) -> np.ndarray:
        return recip_approx(x, newton_steps=self.c.newton_steps, magic=self.c.recip_magic)

    def div(self, a, d) -> np.ndarray:
        return div_approx(a, d, newton_steps=self.c.newton_steps, magic=self.c.recip_magic)

    def mac(self, a, b) -> int:
        """One whole accumulation group: the sum of ``a[i] * b[i]`` in the PE's order."""
        s = self.stream([Record(self._flow().MAC, int(x), int(y), i == 0, i == len(a) - 1)
                         for i, (x, y) in enumerate(zip(_u32(a), _u32(b)))])
        return s[0][1]

    @staticmethod
    def _flow():
        return Flow

    def stream(self, records) -> list[tuple[int, int, int]]:
        """Outputs of a record stream, in order: ``(input index, result bits, tag)``.

        Non-MAC records give one output each; MAC records give one at their
        group's ``last``. A MAC record with ``first`` set, or the first MAC
        record after a ``last``, opens a new group (an open group is dropped).
        """
        Flow = self._flow()
        recs = list(records)
        ops = np.array([Flow(r.op).value for r in recs], dtype=np.int64)
        a = np.array([r.a for r in recs], dtype=np.uint64).astype(np.uint32)
        b = np.array([r.b for r in recs], dtype=np.uint64).astype(np.uint32)
        res = np.zeros(len(recs), dtype=np.uint32)
        for flow, fn in ((Flow.EXP, lambda m: self.exp(a[m])),
                         (Flow.ISQRT, lambda m: self.isqrt(a[m])),
                         (Flow.RECIP, lambda m: self.recip(a[m])),
                         (Flow.DIV, lambda m: self.div(a[m], b[m]))):
            m = ops == flow.value
            if m.any():
                res[m] = fn(m)
        prod = f32_mul(a, b)
        out, lanes, j, open_ = [], [NEG_ZERO] * self.lanes, 0, False
        for i, r in enumerate(recs):
            if Flow(r.op) is not Flow.MAC:
                out.append((i, int(res[i]), r.tag))
                continue
            if r.first or not open_:
                j, open_ = 0, True
            lane = j % self.lanes
            acc = NEG_ZERO if j < self.lanes else lanes[lane]
            lanes[lane] = int(f32_add(acc, prod[i]))
            j += 1
            if r.last:
                s = lanes[0]
                for k in range(1, self.lanes):
                    s = int(f32_add(s, lanes[k] if k < j else NEG_ZERO))
                out.append((i, s, r.tag))
                open_ = False
        return out
