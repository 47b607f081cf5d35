"""The vault-level units of the iPIM control core: the ``seti_vsm`` write into the VSM, the
``req`` to the network port and the CtrlRF's integer ALU (Sec. IV-B)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_int, check_pow2
from .bus import SPMPortSignature
from .isa import DRAM_BITS, INSTRUCTION, LANES, REG_BITS, SPM_BITS, AluOp, Opcode
from .issue_queue import IssueQueue

__all__ = ["VaultUnits", "req_layout"]


def req_layout(tag_bits: int) -> data.StructLayout:
    """Payload of a ``req`` leaving on ``nic_req``: the remote bank line to read and
    where its reply goes (``vsm``, ``tag`` echoed by the reply)."""
    return data.StructLayout({"chip": 4, "vault": 6, "pg": 4, "pe": 4, "dram": DRAM_BITS,
                              "vsm": SPM_BITS, "tag": tag_bits})


def _int_alu(m: Module, op, a, b, name: str):
    """The 32-bit integer ALU of CALC_ARF/CALC_CRF (semantics in isa.py)."""
    res = Signal(32, name=f"{name}_res")
    bs = b.as_signed()
    nb = Signal(signed(34), name=f"{name}_nb")
    m.d.comb += nb.eq(-bs)
    k = Signal(range(33), name=f"{name}_k")        # CROP width, b clamped to 0..32
    m.d.comb += k.eq(Mux(bs < 0, 0, Mux(bs > 32, 32, b[:6])))
    lo_mask = Signal(33, name=f"{name}_lo")
    m.d.comb += lo_mask.eq((Const(1, 33) << k) - 1)
    kc = Signal(range(33), name=f"{name}_kc")
    m.d.comb += kc.eq(32 - k)
    hi_keep = Signal(33, name=f"{name}_hi")
    m.d.comb += hi_keep.eq((Const(1, 33) << kc) - 1)
    with m.Switch(op):
        with m.Case(AluOp.ADD):
            m.d.comb += res.eq(a + b)
        with m.Case(AluOp.SUB):
            m.d.comb += res.eq(a - b)
        with m.Case(AluOp.MUL):
            m.d.comb += res.eq(a * b)
        with m.Case(AluOp.SHIFT):
            with m.If(bs >= 0):
                m.d.comb += res.eq(Mux(bs >= 32, 0, a << b[:5]))
            with m.Else():
                m.d.comb += res.eq(Mux(nb >= 32, Mux(a[31], 0xFFFF_FFFF, 0),
                                       a.as_signed() >> nb[:5]))
        with m.Case(AluOp.AND):
            m.d.comb += res.eq(a & b)
        with m.Case(AluOp.OR):
            m.d.comb += res.eq(a | b)
        with m.Case(AluOp.XOR):
            m.d.comb += res.eq(a ^ b)
        with m.Case(AluOp.CROP_LSB):
            m.d.comb += res.eq(a & lo_mask[:32])
        with m.Case(AluOp.CROP_MSB):
            m.d.comb += res.eq(a & ~hi_keep[:32])
    return res


class VaultUnits(wiring.Component):
    """``seti_vsm``, ``req``, ``calc_crf`` and ``seti_crf`` after the core issued them.

    ``go`` says that ``instr`` issues this cycle with slot ``tag``; the units
    look at its opcode. ``seti_vsm`` and ``req`` wait in one-entry output
    registers for ``vsm``/``nic_req`` to take them; the core issues another
    only while ``seti_ready``/``req_ready`` is high (the register is empty or
    is taken this cycle: registered state and the port's ``ready`` only).
    ``seti_done`` reports the VSM taking the write. The ALU computes at issue
    from the CtrlRF operands ``crf_a``/``crf_b`` (read in the issue cycle) and
    writes the CtrlRF at the end of the ``t_alu``-th cycle counting the issue
    cycle, through ``t_alu - 1`` registers; with ``t_alu > 1`` ``alu_done``
    reports the write (with ``t_alu = 1`` the instruction takes no slot and
    ``alu_done`` stays low).

    Parameters
    ----------
    tag_bits : int
        Width of a slot number.
    crf_entries : int
        CtrlRF entries (sets the write address width).
    vsm_bits, t_vsm : int
        Address width and read latency of the ``vsm`` port.
    t_alu : int
        Latency of the ALU.

    Attributes
    ----------
    go : In(1)
    instr : In(INSTRUCTION)
    tag : In(tag_bits)
    crf_a, crf_b : In(32)
        CtrlRF operands of ``instr``.
    crf_we : Out(1)
    crf_addr : Out(ceil_log2(crf_entries))
    crf_data : Out(32)
        The CtrlRF write port.
    seti_ready, req_ready : Out(1)
    seti_done, alu_done : Out(IssueQueue.FinishSignature(tag_bits))
    vsm : Out(SPMPortSignature(addr_bits=vsm_bits, latency=t_vsm))
    nic_req : Out(stream.Signature(req_layout(tag_bits)))
    """

    def __init__(self, *, tag_bits: int, crf_entries: int, vsm_bits: int, t_vsm: int = 1,
                 t_alu: int = 1):
        check_int("tag_bits", tag_bits, 1, 16)
        check_pow2("crf_entries", crf_entries, 4, 1 << REG_BITS)
        check_int("t_alu", t_alu, 1, 64)
        self.tag_bits, self.crf_entries, self.t_alu = tag_bits, crf_entries, t_alu
        finish = IssueQueue.FinishSignature(tag_bits)
        super().__init__({
            "go": In(1), "instr": In(INSTRUCTION), "tag": In(tag_bits),
            "crf_a": In(32), "crf_b": In(32),
            "crf_we": Out(1), "crf_addr": Out(ceil_log2(crf_entries)), "crf_data": Out(32),
            "seti_ready": Out(1), "req_ready": Out(1),
            "seti_done": Out(finish), "alu_done": Out(finish),
            "vsm": Out(SPMPortSignature(addr_bits=vsm_bits, latency=t_vsm)),
            "nic_req": Out(stream.Signature(req_layout(tag_bits))),
        })

    def elaborate(self, platform):
        m = Module()
        ins, op, slot, fire = self.instr, self.instr.opcode, self.tag, self.go
        cb = ceil_log2(self.crf_entries)

        # seti_vsm: imm on every lane, vec_mask as the lane write mask.
        seti_v, seti_tag = Signal(), Signal(self.tag_bits)
        sv = ins.args.seti_vsm
        with m.If(self.vsm.valid & self.vsm.ready):
            m.d.sync += seti_v.eq(0)
        with m.If(fire & (op == Opcode.SETI_VSM)):
            m.d.sync += [seti_v.eq(1), seti_tag.eq(slot), self.vsm.addr.eq(sv.vsm),
                         self.vsm.wdata.eq(Cat(*([sv.imm] * LANES))),
                         self.vsm.wmask.eq(sv.vec_mask)]
        m.d.comb += [self.vsm.valid.eq(seti_v), self.vsm.we.eq(1),
                     self.seti_ready.eq(~seti_v | self.vsm.ready),
                     self.seti_done.valid.eq(self.vsm.valid & self.vsm.ready),
                     self.seti_done.tag.eq(seti_tag)]

        req_v = Signal()
        rq = ins.args.req
        with m.If(self.nic_req.valid & self.nic_req.ready):
            m.d.sync += req_v.eq(0)
        with m.If(fire & (op == Opcode.REQ)):
            m.d.sync += req_v.eq(1)
            m.d.sync += [self.nic_req.payload[n].eq(rq[n])
                         for n in ("chip", "vault", "pg", "pe", "dram", "vsm")]
            m.d.sync += self.nic_req.payload.tag.eq(slot)
        m.d.comb += [self.nic_req.valid.eq(req_v),
                     self.req_ready.eq(~req_v | self.nic_req.ready)]

        # The result is computed at issue and written at the end of the t_alu-th cycle
        # (the issue cycle is the first), through t_alu - 1 registers.
        cc = ins.args.calc_crf
        alu = _int_alu(m, cc.op, self.crf_a, self.crf_b, "crf_alu")
        is_seti_crf = op == Opcode.SETI_CRF
        a_v = [fire & ((op == Opcode.CALC_CRF) | is_seti_crf)]
        a_d = [Mux(is_seti_crf, ins.args.seti_crf.dst, cc.dst)[:cb]]
        a_r = [Mux(is_seti_crf, ins.args.seti_crf.imm, alu)]
        a_t = [slot]
        for i in range(1, self.t_alu):
            v, d = Signal(name=f"alu_v{i}"), Signal(cb, name=f"alu_dst{i}")
            r, t = Signal(32, name=f"alu_res{i}"), Signal(self.tag_bits, name=f"alu_tag{i}")
            m.d.sync += [v.eq(a_v[-1]), d.eq(a_d[-1]), r.eq(a_r[-1]), t.eq(a_t[-1])]
            a_v.append(v)
            a_d.append(d)
            a_r.append(r)
            a_t.append(t)
        m.d.comb += [self.crf_we.eq(a_v[-1]), self.crf_addr.eq(a_d[-1]),
                     self.crf_data.eq(a_r[-1]),
                     self.alu_done.valid.eq(a_v[-1] if self.t_alu > 1 else 0),
                     self.alu_done.tag.eq(a_t[-1])]
        return m
