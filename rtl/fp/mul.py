"""Pipelined IEEE-754 binary32 multiplier, round-to-nearest-even."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .ieee import (BIAS, Pipeline, check_latency, lzc, round_pack, shift_left, shift_right_sticky,
                   unpack)

__all__ = ["FP32Mul", "from_config"]

_PROD = 48  # 24 x 24-bit significand product


class FP32Mul(wiring.Component):
    """Pipelined binary32 multiplier ``result = a * b``, one operation per cycle.

    Results are rounded to nearest, ties to even, and are bit-exact to IEEE
    754 (and to numpy ``float32``) for every non-NaN result: subnormal
    inputs and outputs are supported (no flush to zero), the sign of a zero
    product is the XOR of the operand signs, overflow rounds to infinity.
    ``0 * inf`` and any NaN operand give the canonical quiet NaN
    ``0x7FC00000`` (NaN payloads are not propagated).

    The datapath has three sections, separated by registers according to
    *latency* (see :class:`~pimforge.rtl.fp.ieee.Pipeline`):

    1. unpack and classify; the 24 x 24-bit significand product and the
       sum of the exponents;
    2. count leading zeros of the product (a subnormal operand leaves many)
       and normalize: shift left to put the hidden bit on top, limited by
       the exponent, or shift right with a sticky bit when the product is
       below the normal range (subnormal or zero result);
    3. round to nearest-even, pack, and select the special results.

    Latency 1 puts all three sections in one cycle, latency 2 registers
    after section 1, latency 3 after every section, and higher latencies
    add register stages on the output.

    Parameters
    ----------
    latency : int
        Cycles from an operation's ``in_valid`` to its ``out_valid``, 1..8.

    Attributes
    ----------
    a, b : In(32)
        Operands (binary32 bit patterns), sampled when ``in_valid`` is high.
    in_valid : In(1)
        An operation is presented this cycle.
    result : Out(32)
        The product, valid when ``out_valid`` is high.
    out_valid : Out(1)
        ``in_valid`` delayed by *latency* cycles.
    latency : int
        As given.
    latencies : dict
        ``{"result": latency}``, recorded in the manifest.
    """

    a: In(32)
    b: In(32)
    in_valid: In(1)
    result: Out(32)
    out_valid: Out(1)

    def __init__(self, *, latency: int):
        check_latency(latency)
        self.latency = latency
        self.latencies = {"result": latency}
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        pipe = Pipeline(m, self.latency)
        pipe.valid(self.in_valid, self.out_valid)

        # -- Section 1: classify, multiply significands, add exponents.
        a, b = unpack(m, self.a, "a"), unpack(m, self.b, "b")
        product = Signal(_PROD)
        m.d.comb += product.eq(a.sig * b.sig)
        # The product's bit 47 stands for 2**(ea + eb - 2*127 - 46 + 47): the
        # window with its top bit at 47 has biased exponent ea + eb - 126.
        # Carried unsigned as exp_sum = ea + eb (2..508).
        exp_sum = Signal(9)
        m.d.comb += exp_sum.eq(a.exp + b.exp)
        zero = a.is_zero | b.is_zero
        inf = a.is_inf | b.is_inf
        s1 = pipe.cut(0, {
            "sign": a.sign ^ b.sign,
            "exp_sum": exp_sum,
            "product": product,
            "nan": a.is_nan | b.is_nan | (inf & zero),
            "inf": inf,
            "zero": zero,
        })

        # -- Section 2: normalize. (Comparisons and constants are written so
        # that both operands have the same width, which keeps the generated
        # Verilog lint-clean.)
        exp_sum = s1["exp_sum"]
        zeros = lzc(m, s1["product"], "lzc")  # 0..48, six bits
        # Without room to shift left (exp_sum < 127) the product is below
        # 2**-126 even with its top bit at 47: shift right by 127 - exp_sum
        # (at most 125), keep the lost bits as sticky; the result is
        # subnormal or zero.
        below = ~exp_sum[7:].any() & ~exp_sum[:7].all()
        right = ~exp_sum[:7]  # 127 - exp_sum when below
        shifted_right, lost = shift_right_sticky(m, s1["product"], right, "denorm")
        # Otherwise shift left by the leading zeros, but no further than the
        # room above biased exponent 1: exp_sum - 127 (added as 2**9 - 127).
        room = Signal(9)
        m.d.comb += room.eq((exp_sum + Const(2**9 - BIAS, 9))[:9])
        clamp = ~room[6:].any() & (room[:6] < zeros)
        left = Signal(9)
        m.d.comb += left.eq(Mux(clamp, room, zeros))
        norm = Signal(_PROD)
        m.d.comb += norm.eq(Mux(below, shifted_right,
                                shift_left(m, s1["product"], left[:6], "norm")))
        # Biased exponent of the window: exp_sum - 126 - left = room - left + 1.
        exp = Signal(10)
        m.d.comb += exp.eq(Mux(below, Const(1, 10), (room - left)[:9] + 1))
        s2 = pipe.cut(1, {
            "sign": s1["sign"],
            "exp": exp,
            "norm": norm,
            "lost": below & lost,
            "nan": s1["nan"],
            "inf": s1["inf"],
            "zero": s1["zero"],
        })

        # -- Section 3: round and pack.
        norm = s2["norm"]
        result = round_pack(
            m, sign=s2["sign"], exp=s2["exp"], sig=norm[_PROD - 24:], guard=norm[_PROD - 25],
            sticky=norm[:_PROD - 25].any() | s2["lost"], is_zero=s2["zero"],
            zero_sign=s2["sign"], is_inf=s2["inf"], inf_sign=s2["sign"], is_nan=s2["nan"])
        pipe.output(result, self.result)
        return m


def from_config(cfg) -> FP32Mul:
    """The multiplier with the latency of ``cfg.fp.mul_latency``."""
    return FP32Mul(latency=cfg.fp.mul_latency)
