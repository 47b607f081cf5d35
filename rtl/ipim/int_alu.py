"""The 32-bit integer ALU of the SIMB ops (one SIMD lane of an INT32 ``comp``, ``calc_arf``)."""


from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .isa import AluOp

__all__ = ["IntALU"]


class IntALU(wiring.Component):
    """Combinational INT32 operation ``result = op(a, b)`` with the semantics of :mod:`.isa`.

    Two's complement, wrapping. ``MAC`` is ``c + a * b``; ``SHIFT`` is ``a << b``
    for ``b >= 0`` and the arithmetic ``a >> -b`` otherwise, ``|b| >= 32`` giving
    0 or the sign; ``CROP_LSB``/``CROP_MSB`` keep the ``b`` least/most
    significant bits of ``a`` with ``b`` clamped to 0..32. The latency is the
    caller's (the SIMD unit and the PE put the result into their own pipelines).

    Attributes
    ----------
    op : In(AluOp)
    a, b, c : In(32)
        Operands; ``c`` is the accumulator of ``MAC``.
    result : Out(32)
    """

    op: In(AluOp)
    a: In(32)
    b: In(32)
    c: In(32)
    result: Out(32)

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        sb = b.as_signed()
        r = Signal(32)
        # Shift amount and crop width, clamped so that the shifters stay 6 bits wide.
        left = Signal(6)
        right = Signal(6)
        m.d.comb += [
            left.eq(Mux(sb >= 32, 32, b[:6])),
            right.eq(Mux(sb <= -32, 32, (-sb)[:6])),
        ]
        crop = Signal(6)
        m.d.comb += crop.eq(Mux(sb < 0, 0, Mux(sb > 32, 32, b[:6])))
        ones = Signal(33)
        top = Signal(6)
        m.d.comb += [ones.eq((1 << crop) - 1),        # crop ones in the low bits
                     top.eq(32 - crop)]
        shl = Signal(32)
        sar = Signal(signed(32))
        m.d.comb += [shl.eq(Mux(left >= 32, 0, (a << left)[:32])),
                     sar.eq(Mux(right >= 32, Mux(a[31], -1, 0), a.as_signed() >> right))]
        with m.Switch(self.op):
            with m.Case(AluOp.ADD):
                m.d.comb += r.eq(a + b)
            with m.Case(AluOp.SUB):
                m.d.comb += r.eq(a - b)
            with m.Case(AluOp.MUL):
                m.d.comb += r.eq(a * b)
            with m.Case(AluOp.MAC):
                m.d.comb += r.eq(self.c + a * b)
            with m.Case(AluOp.SHIFT):
                m.d.comb += r.eq(Mux(sb >= 0, shl, sar))
            with m.Case(AluOp.AND):
                m.d.comb += r.eq(a & b)
            with m.Case(AluOp.OR):
                m.d.comb += r.eq(a | b)
            with m.Case(AluOp.XOR):
                m.d.comb += r.eq(a ^ b)
            with m.Case(AluOp.CROP_LSB):
                m.d.comb += r.eq(a & ones[:32])
            with m.Case(AluOp.CROP_MSB):
                # The b most significant bits: ones(b) moved to the top.
                m.d.comb += r.eq(a & (ones[:32] << top)[:32])
        m.d.comb += self.result.eq(r)
        return m
