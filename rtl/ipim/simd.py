"""The 4-lane SIMD unit of the near-bank PE (Fig. 2c): FP32 on the ``rtl/fp`` units, INT32."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..fp.add import FP32Add
from ..fp.mul import FP32Mul
from ..fp.shift import K_WIDTH, FP32Shift, ShiftOp
from ..params import check_int
from .int_alu import IntALU
from .isa import LANES, AluOp, DType

__all__ = ["SIMDUnit"]

_UNIT_MAX = 8          # the deepest pipeline the rtl/fp units take; more is padding
_K_MAX = (1 << (K_WIDTH - 1)) - 1

# Where a finished operation's result comes from.
_INT, _ADD, _MUL, _MAC, _SHIFT = range(5)


def _delay(m: Module, sig, n: int, name: str):
    """*sig* delayed by *n* register stages."""
    for i in range(n):
        nxt = Signal.like(sig, name=f"{name}_d{i}")
        m.d.sync += nxt.eq(sig)
        sig = nxt
    return sig


class SIMDUnit(wiring.Component):
    """Four 32-bit lanes computing one ``comp`` per cycle at the op's fixed latency.

    An operation presented with ``in_valid`` finishes ``lat`` cycles later with
    ``out_valid`` and ``result``; ``lat`` (combinational from ``op``) is
    ``t_add`` for ADD/SUB, ``t_mul`` for MUL, ``t_mac`` for MAC and ``t_logic``
    for SHIFT and the bitwise ops, in both dtypes. Operations of different
    latencies overlap, so the caller must not start one that would finish in
    the same cycle as another (the PE reserves its completion slot).

    FP32 lanes use :class:`~pimforge.rtl.fp.add.FP32Add` (SUB flips the sign of
    ``b``), :class:`~pimforge.rtl.fp.mul.FP32Mul`, a separate multiplier and
    adder chained for MAC (``d + round(a * b)``, the product's pipeline taking
    ``min(t_mul, t_mac - 1)`` stages) and the LDEXP of
    :class:`~pimforge.rtl.fp.shift.FP32Shift` for SHIFT (``b`` as a signed
    integer, clamped to +-511: every finite non-zero binary32 has over- or
    underflowed by then, so the clamp changes no result). A unit deeper than
    the rtl/fp maximum of 8 stages is padded with registers. INT32 lanes are
    :class:`~pimforge.rtl.ipim.int_alu.IntALU`.

    Parameters
    ----------
    t_add, t_mul, t_mac, t_logic : int
        Latencies in cycles (``t_mac`` at least 2).

    Attributes
    ----------
    in_valid : In(1)
    op : In(AluOp)
    dtype : In(DType)
    a, b, d : In(128)
        Lane vectors (lane ``i`` = bits ``[32i, 32i+32)``); ``d`` is MAC's accumulator.
    lat : Out
        Latency of the operation on ``op``/``dtype``.
    out_valid : Out(1)
    result : Out(128)
    busy : Out(1)
        An operation is in flight.
    max_latency : int
    """

    def __init__(self, *, t_add: int = 4, t_mul: int = 5, t_mac: int = 8, t_logic: int = 1):
        self.latencies_of(t_add=t_add, t_mul=t_mul, t_mac=t_mac, t_logic=t_logic)
        self.t_add, self.t_mul, self.t_mac, self.t_logic = t_add, t_mul, t_mac, t_logic
        self.max_latency = max(t_add, t_mul, t_mac, t_logic)
        self.latencies = self.latencies_of(t_add=t_add, t_mul=t_mul, t_mac=t_mac,
                                           t_logic=t_logic)
        w = LANES * 32
        super().__init__({"in_valid": In(1), "op": In(AluOp), "dtype": In(DType),
                          "a": In(w), "b": In(w), "d": In(w),
                          "lat": Out(range(self.max_latency + 1)), "out_valid": Out(1),
                          "result": Out(w), "busy": Out(1)})

    @staticmethod
    def latencies_of(*, t_add: int, t_mul: int, t_mac: int, t_logic: int) -> dict[str, int]:
        """Latency per op class (the same for both dtypes)."""
        for n, v in (("t_add", t_add), ("t_mul", t_mul), ("t_logic", t_logic)):
            check_int(n, v, 1, 64)
        check_int("t_mac", t_mac, 2, 64)
        return {"add": t_add, "sub": t_add, "mul": t_mul, "mac": t_mac, "logic": t_logic}

    def latency_of(self, op: AluOp) -> int:
        """Latency of *op* (the same for both dtypes)."""
        return {AluOp.ADD: self.t_add, AluOp.SUB: self.t_add, AluOp.MUL: self.t_mul,
                AluOp.MAC: self.t_mac}.get(op, self.t_logic)

    def elaborate(self, platform):
        m = Module()
        op, fp = self.op, self.dtype == DType.FP32
        with m.Switch(op):
            for o in AluOp:
                with m.Case(o):
                    m.d.comb += self.lat.eq(self.latency_of(o))

        src = Signal(3)
        with m.If(~fp):
            m.d.comb += src.eq(_INT)
        with m.Elif((op == AluOp.ADD) | (op == AluOp.SUB)):
            m.d.comb += src.eq(_ADD)
        with m.Elif(op == AluOp.MUL):
            m.d.comb += src.eq(_MUL)
        with m.Elif(op == AluOp.MAC):
            m.d.comb += src.eq(_MAC)
        with m.Else():
            m.d.comb += src.eq(_SHIFT)

        # Completion line: slot k finishes k cycles from now (one result per slot).
        slot = data.StructLayout({"valid": 1, "src": 3, "data": LANES * 32})
        L = self.max_latency
        line = [Signal(slot, name=f"slot{k}") for k in range(L)]
        int_res = Signal(LANES * 32)
        lat = self.lat
        for k in range(L):
            nxt = line[k + 1] if k + 1 < L else Const(0, slot.size)
            with m.If(self.in_valid & (lat == k + 1)):
                m.d.sync += line[k].eq(Cat(Const(1, 1), src, int_res))
            with m.Else():
                m.d.sync += line[k].eq(nxt)
        m.d.comb += [self.out_valid.eq(line[0].valid),
                     self.busy.eq(Cat(s.valid for s in line).any())]

        lm = min(self.t_mul, self.t_mac - 1)
        la = self.t_mac - lm
        outs = {_ADD: [], _MUL: [], _MAC: [], _SHIFT: []}
        for i in range(LANES):
            a = self.a[32 * i:32 * i + 32]
            b = self.b[32 * i:32 * i + 32]
            d = self.d[32 * i:32 * i + 32]
            alu = m.submodules[f"int{i}"] = IntALU()
            m.d.comb += [alu.op.eq(op), alu.a.eq(a), alu.b.eq(b), alu.c.eq(d),
                         int_res[32 * i:32 * i + 32].eq(alu.result)]

            add = m.submodules[f"add{i}"] = FP32Add(latency=min(self.t_add, _UNIT_MAX))
            m.d.comb += [add.a.eq(a), add.b.eq(b ^ ((op == AluOp.SUB) << 31)),
                         add.in_valid.eq(self.in_valid)]
            outs[_ADD].append(_delay(m, add.result, self.t_add - add.latency, f"add{i}"))

            mul = m.submodules[f"mul{i}"] = FP32Mul(latency=min(self.t_mul, _UNIT_MAX))
            m.d.comb += [mul.a.eq(a), mul.b.eq(b), mul.in_valid.eq(self.in_valid)]
            outs[_MUL].append(_delay(m, mul.result, self.t_mul - mul.latency, f"mul{i}"))

            mm = m.submodules[f"macmul{i}"] = FP32Mul(latency=min(lm, _UNIT_MAX))
            m.d.comb += [mm.a.eq(a), mm.b.eq(b), mm.in_valid.eq(self.in_valid)]
            prod = _delay(m, mm.result, lm - mm.latency, f"macmul{i}")
            acc = _delay(m, d, lm, f"macacc{i}")
            ma = m.submodules[f"macadd{i}"] = FP32Add(latency=min(la, _UNIT_MAX))
            m.d.comb += [ma.a.eq(acc), ma.b.eq(prod), ma.in_valid.eq(1)]
            outs[_MAC].append(_delay(m, ma.result, la - ma.latency, f"macadd{i}"))

            sh = m.submodules[f"shift{i}"] = FP32Shift(latency=min(self.t_logic, _UNIT_MAX),
                                                       isqrt_magic=0, recip_magic=0)
            sb = b.as_signed()
            k = Mux(sb > _K_MAX, _K_MAX, Mux(sb < -_K_MAX - 1, -_K_MAX - 1, sb))
            m.d.comb += [sh.a.eq(a), sh.k.eq(k), sh.op.eq(ShiftOp.LDEXP),
                         sh.in_valid.eq(self.in_valid)]
            outs[_SHIFT].append(_delay(m, sh.result, self.t_logic - sh.latency, f"shift{i}"))

        by_src = Array([line[0].data, Cat(*outs[_ADD]), Cat(*outs[_MUL]), Cat(*outs[_MAC]),
                        Cat(*outs[_SHIFT])])
        m.d.comb += self.result.eq(by_src[line[0].src])
        return m
