"""The fixed-latency path of the near-bank PE: the SIMD unit, the integer ALU, the register
moves and the reservation line that books each one's completion cycle."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int
from .bus import VECTOR_BITS
from .int_alu import IntALU
from .isa import LANES, REG_BITS, Opcode
from .pe_completion import completion_layout
from .pe_dispatch import fixed_layout
from .simd import SIMDUnit

__all__ = ["PEFixedPath"]

# Kinds of a fixed-latency completion.
_W_SIMD, _W_DRF, _W_ARF, _W_NONE = range(4)


class PEFixedPath(wiring.Component):
    """``comp``, ``calc_arf``, ``mov_arf``, ``mov_drf`` and ``reset`` at their fixed latencies.

    An instruction on ``instr`` finishes exactly ``lat`` cycles after it is
    taken: ``t_add``/``t_mul``/``t_mac``/``t_logic`` for ``comp`` (by its
    op), ``t_alu`` for ``calc_arf``, ``t_arf`` for ``mov_arf``, ``t_drf`` for
    ``mov_drf`` and ``reset``, and 1 for any other opcode (which finishes
    doing nothing). Its completion cycle is booked in a reservation line when
    it is taken, so ``done`` never waits; ``instr.ready`` is low while the
    cycle it would finish in is booked already (it depends on the payload's
    opcode, not on ``valid``).

    Parameters
    ----------
    tag_bits : int
        Width of the issue tags.
    t_add, t_mul, t_mac, t_logic : int
        SIMD latencies (as :class:`~pimforge.rtl.ipim.simd.SIMDUnit`).
    t_alu, t_arf, t_drf : int
        ``calc_arf``; ``mov_arf``; ``mov_drf`` and ``reset``.

    Attributes
    ----------
    instr : In(stream.Signature(fixed_layout(tag_bits)))
    done : Out(stream.Signature(completion_layout(tag_bits), always_ready=True))
        The instruction whose booked cycle this is, with its register write.
    simd_busy, alu_busy : Out(1)
        A ``comp`` is in flight in the SIMD unit; a ``calc_arf`` in the integer ALU.
    busy : Out(1)
        An instruction is in flight.
    max_latency : int
        The longest latency (the length of the reservation line).
    """

    def __init__(self, *, tag_bits: int, t_add: int = 4, t_mul: int = 5, t_mac: int = 8,
                 t_logic: int = 1, t_alu: int = 1, t_arf: int = 1, t_drf: int = 1):
        for n, v in (("t_alu", t_alu), ("t_arf", t_arf), ("t_drf", t_drf)):
            check_int(n, v, 1, 64)
        self._simd_kw = {"t_add": t_add, "t_mul": t_mul, "t_mac": t_mac, "t_logic": t_logic}
        simd_lat = SIMDUnit.latencies_of(**self._simd_kw)
        self.tag_bits = tag_bits
        self.t_alu, self.t_arf, self.t_drf = t_alu, t_arf, t_drf
        self.max_latency = max(*simd_lat.values(), t_alu, t_arf, t_drf)
        super().__init__({
            "instr": In(stream.Signature(fixed_layout(tag_bits))),
            "done": Out(stream.Signature(completion_layout(tag_bits), always_ready=True)),
            "simd_busy": Out(1), "alu_busy": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        simd = m.submodules.simd = SIMDUnit(**self._simd_kw)
        alu = m.submodules.alu = IntALU()
        p = self.instr.payload
        opc, comp, calc, mov = p.instr.opcode, p.instr.args.comp, p.instr.args.calc, \
            p.instr.args.mov
        V = VECTOR_BITS
        L = self.max_latency
        entry = data.StructLayout({"valid": 1, "kind": 2, "tag": self.tag_bits,
                                   "idx": REG_BITS, "mask": LANES, "data": V})
        line = [Signal(entry, name=f"resv{k}") for k in range(L)]
        lat = Signal(range(L + 1))
        new = Signal(entry)
        m.d.comb += [alu.op.eq(calc.op), alu.a.eq(p.asrc1), alu.b.eq(p.asrc2), alu.c.eq(0)]
        srcs_a = Array(p.src1[32 * i:32 * i + 32] for i in range(LANES))
        bcast = Signal(32)
        m.d.comb += bcast.eq(srcs_a[comp.lane])
        m.d.comb += [simd.op.eq(comp.op), simd.dtype.eq(comp.dtype),
                     simd.a.eq(Mux(comp.mode, Cat(bcast, bcast, bcast, bcast), p.src1)),
                     simd.b.eq(p.src2), simd.d.eq(p.dst)]
        lanes = Array(p.op[32 * i:32 * i + 32] for i in range(LANES))
        mov_lane = Signal(32)
        m.d.comb += mov_lane.eq(lanes[mov.lane])
        # (valid from a signal: a constant bit assigned alone becomes an ``always @*`` with
        # nothing to wait on, which Verilator never runs.)
        m.d.comb += [new.valid.eq(self.instr.valid), new.tag.eq(p.tag)]
        with m.Switch(opc):
            with m.Case(Opcode.COMP):
                m.d.comb += [lat.eq(simd.lat), new.kind.eq(_W_SIMD), new.idx.eq(comp.dst),
                             new.mask.eq(comp.vec_mask)]
            with m.Case(Opcode.CALC_ARF):
                m.d.comb += [lat.eq(self.t_alu), new.kind.eq(_W_ARF), new.idx.eq(calc.dst),
                             new.data.eq(alu.result)]
            with m.Case(Opcode.MOV_ARF):
                m.d.comb += [lat.eq(self.t_arf), new.kind.eq(_W_ARF), new.idx.eq(mov.arf),
                             new.data.eq(mov_lane)]
            with m.Case(Opcode.MOV_DRF):
                m.d.comb += [lat.eq(self.t_drf), new.kind.eq(_W_DRF), new.idx.eq(mov.drf),
                             new.mask.eq(1 << mov.lane),
                             new.data.eq(Cat(p.amov, p.amov, p.amov, p.amov))]
            with m.Case(Opcode.RESET):
                m.d.comb += [lat.eq(self.t_drf), new.kind.eq(_W_DRF),
                             new.idx.eq(p.instr.args.reset.drf), new.mask.eq(0b1111),
                             new.data.eq(0)]
            with m.Default():
                m.d.comb += [lat.eq(1), new.kind.eq(_W_NONE)]
        taken = Array([*(s.valid for s in line), Const(0, 1)])
        go = Signal()
        m.d.comb += [self.instr.ready.eq(~taken[lat]), go.eq(self.instr.valid & self.instr.ready)]
        m.d.comb += simd.in_valid.eq(go & (opc == Opcode.COMP))
        for k in range(L):
            nxt = line[k + 1] if k + 1 < L else Const(0, entry.size)
            with m.If(go & (lat == k + 1)):
                m.d.sync += line[k].eq(new)
            with m.Else():
                m.d.sync += line[k].eq(nxt)

        head = line[0]
        d = self.done.payload
        with m.If(head.valid):
            # A _W_NONE completion counts as a DataRF write of no lanes (mask 0).
            m.d.comb += [self.done.valid.eq(1), d.tag.eq(head.tag),
                         d.drf.eq(head.kind != _W_ARF), d.arf.eq(head.kind == _W_ARF),
                         d.idx.eq(head.idx), d.mask.eq(head.mask),
                         d.data.eq(Mux(head.kind == _W_SIMD, simd.result, head.data))]

        alu_line = Signal(L)
        for k in range(L):
            nxt = alu_line[k + 1] if k + 1 < L else 0
            m.d.sync += alu_line[k].eq(Mux(go & (opc == Opcode.CALC_ARF) & (lat == k + 1),
                                           1, nxt))
        m.d.comb += [self.simd_busy.eq(simd.busy), self.alu_busy.eq(alu_line.any()),
                     self.busy.eq(Cat(s.valid for s in line).any())]
        return m
