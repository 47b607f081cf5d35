"""Pipelined IEEE-754 binary32 adder, round-to-nearest-even."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .ieee import (Pipeline, check_latency, lzc, round_pack, shift_left, shift_right_sticky,
                   unpack, zext)

__all__ = ["FP32Add", "from_config"]

# Bits kept below the significand while aligning: guard, round and sticky.
_EXTRA = 3
# Width of the sum: carry + 24-bit significand + guard/round/sticky.
_SUM = 1 + 24 + _EXTRA


class FP32Add(wiring.Component):
    """Pipelined binary32 adder ``result = a + b``, one operation per cycle.

    Results are rounded to nearest, ties to even, and are bit-exact to IEEE
    754 (and to numpy ``float32``) for every non-NaN result: subnormal
    inputs and outputs are supported (no flush to zero), an exact zero sum
    of opposite-signed operands is ``+0`` and ``(-0) + (-0)`` is ``-0``,
    overflow rounds to infinity. ``inf - inf`` and any NaN operand give the
    canonical quiet NaN ``0x7FC00000`` (NaN payloads are not propagated).
    Subtraction is addition with bit 31 of ``b`` flipped.

    The datapath has three sections, separated by registers according to
    *latency* (see :class:`~pimforge.rtl.fp.ieee.Pipeline`):

    1. unpack and classify; order the operands by magnitude; align the
       smaller significand to the larger exponent with a sticky right shift;
    2. add or subtract the significands (28 bits), count leading zeros and
       normalize with a left shift limited by the exponent (so that results
       below ``2**-126`` come out as subnormals);
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
        The sum, valid when ``out_valid`` is high.
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

        # -- Section 1: classify, swap so that |big| >= |small|, align.
        a, b = unpack(m, self.a, "a"), unpack(m, self.b, "b")
        swap = b.magnitude > a.magnitude
        big_sign = Mux(swap, b.sign, a.sign)
        big_exp = Mux(swap, b.exp, a.exp)
        big_sig = Mux(swap, b.sig, a.sig)
        small_exp = Mux(swap, a.exp, b.exp)
        small_sig = Mux(swap, a.sig, b.sig)
        # Aligning by more than the 27-bit window moves everything into the sticky bit.
        # big_exp >= small_exp, so the 8-bit difference cannot wrap.
        aligned, sticky = shift_right_sticky(m, Cat(Const(0, _EXTRA), small_sig),
                                             (big_exp - small_exp)[:8], "align")
        s1 = pipe.cut(0, {
            "sign": big_sign,
            "exp": big_exp,
            "big": Cat(Const(0, _EXTRA), big_sig),
            # The sticky bit joins the lowest bit: with guard and round bits
            # above it, every rounding decision stays exact (also after the
            # one-bit renormalization that a subtraction may need).
            "small": aligned | zext(sticky, 24 + _EXTRA),
            "subtract": a.sign ^ b.sign,
            "nan": a.is_nan | b.is_nan | (a.is_inf & b.is_inf & (a.sign ^ b.sign)),
            "inf": a.is_inf | b.is_inf,
            "inf_sign": Mux(a.is_inf, a.sign, b.sign),
            # Sign of an exact zero sum in round-to-nearest: -0 only for (-x) + (-y).
            "zero_sign": a.sign & b.sign,
        })

        # -- Section 2: add/subtract, normalize.
        total = Signal(_SUM)
        # |big| >= |small|, so the difference never wraps.
        m.d.comb += total.eq(Mux(s1["subtract"], s1["big"] - s1["small"],
                                 s1["big"] + s1["small"]))
        zeros = lzc(m, total, "lzc")  # 0..28, five bits
        # The window's top bit (bit 27) stands for 2**(exp + 1 - 127); a left
        # shift by n lowers the exponent by n, but never below 1, where the
        # result stays subnormal. (Comparisons are kept between equal widths
        # so that the generated Verilog lints clean.)
        exp = s1["exp"]
        clamp = ~exp[5:].any() & (exp[:5] < zeros)
        shift = Signal(8)
        m.d.comb += shift.eq(Mux(clamp, exp, zeros))
        norm = shift_left(m, total, shift[:5], "norm")
        s2 = pipe.cut(1, {
            "sign": s1["sign"],
            # exp + 1 - shift, with shift <= exp.
            "exp": (exp - shift)[:8] + 1,
            "norm": norm,
            "zero": ~total.any(),
            "nan": s1["nan"],
            "inf": s1["inf"],
            "inf_sign": s1["inf_sign"],
            "zero_sign": s1["zero_sign"],
        })

        # -- Section 3: round and pack.
        norm = s2["norm"]
        result = round_pack(
            m, sign=s2["sign"], exp=s2["exp"], sig=norm[_SUM - 24:], guard=norm[_SUM - 25],
            sticky=norm[:_SUM - 25].any(), is_zero=s2["zero"], zero_sign=s2["zero_sign"],
            is_inf=s2["inf"], inf_sign=s2["inf_sign"], is_nan=s2["nan"])
        pipe.output(result, self.result)
        return m


def from_config(cfg) -> FP32Add:
    """The adder with the latency of ``cfg.fp.add_latency``."""
    return FP32Add(latency=cfg.fp.add_latency)
