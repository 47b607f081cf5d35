"""The scratchpad engine of the near-bank PE: its accesses of the PGSM and the VSM, one at a
time."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int
from .bus import VECTOR_BITS, SPMPortSignature
from .isa import DRAM_BITS, REG_BITS, SPM_BITS, Opcode
from .pe_completion import completion_layout
from .pe_dispatch import mem_layout

__all__ = ["PESpmEngine"]

# Engine states.
_IDLE, _REQ, _WAIT, _FIN, _BREQ = range(5)
# Jobs: rd/wr_{pgsm,vsm}; st_pgsm; ld_pgsm (bank data in).
_J_RD, _J_WR, _J_STP, _J_LDP = range(4)


class PESpmEngine(wiring.Component):
    """``rd/wr_pgsm``, ``rd/wr_vsm``, the PGSM read of ``st_pgsm`` and the PGSM write of
    ``ld_pgsm``, one access at a time.

    An access is a request on ``pgsm`` or ``vsm``, held until ``ready``; a read
    then waits for ``rvalid``. The engine finishes an instruction on ``done``
    (a read's DataRF write), except ``st_pgsm``: its line goes on ``write`` to
    the bank path, in the slot that it reserved on ``reserve`` when it was
    taken, and the bank path finishes it when the bank acknowledges the write.
    ``ld_pgsm`` data from the bank arrives on ``ldp`` and is written into the
    PGSM; it goes ahead of a new instruction on ``instr`` (the bank's response
    FIFO holds everything behind it).

    ``instr.ready`` depends on the engine's state, ``ldp.valid`` and
    ``reserve.ready``; ``ldp.ready`` on the state only.

    Parameters
    ----------
    tag_bits : int
        Width of the issue tags.
    slot_bits : int
        Width of a bank slot number.
    pgsm_bits, vsm_bits : int
        Line address widths of the PGSM and VSM ports.
    pgsm_latency, vsm_latency : int
        Read latencies of the PGSM and VSM ports.

    Attributes
    ----------
    instr : In(stream.Signature(mem_layout(tag_bits)))
        A scratchpad instruction from dispatch.
    ldp : In(stream.Signature(StructLayout({"tag", "spm", "data"})))
        An ``ld_pgsm``'s vector from the bank.
    reserve : Out(stream.Signature(StructLayout({"tag", "idx", "spm"})))
        An ``st_pgsm`` takes a bank slot, number ``slot``.
    slot : In(slot_bits)
    write : Out(stream.Signature(StructLayout({"dram", "data", "slot"})))
        The bank write of an ``st_pgsm``.
    done : Out(stream.Signature(completion_layout(tag_bits)))
        A finished access.
    pgsm, vsm : Out(SPMPortSignature)
    busy : Out(1)
        An access is in progress.
    """

    def __init__(self, *, tag_bits: int, slot_bits: int, pgsm_bits: int, vsm_bits: int,
                 pgsm_latency: int = 1, vsm_latency: int = 1):
        check_int("slot_bits", slot_bits, 1, 6)
        self.tag_bits, self.slot_bits = tag_bits, slot_bits
        super().__init__({
            "instr": In(stream.Signature(mem_layout(tag_bits))),
            "ldp": In(stream.Signature(data.StructLayout(
                {"tag": tag_bits, "spm": SPM_BITS, "data": VECTOR_BITS}))),
            "reserve": Out(stream.Signature(data.StructLayout(
                {"tag": tag_bits, "idx": REG_BITS, "spm": SPM_BITS}))),
            "slot": In(slot_bits),
            "write": Out(stream.Signature(data.StructLayout(
                {"dram": DRAM_BITS, "data": VECTOR_BITS, "slot": slot_bits}))),
            "done": Out(stream.Signature(completion_layout(tag_bits))),
            "pgsm": Out(SPMPortSignature(addr_bits=pgsm_bits, latency=pgsm_latency)),
            "vsm": Out(SPMPortSignature(addr_bits=vsm_bits, latency=vsm_latency)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        state = Signal(range(5))
        vsm = Signal()
        we = Signal()
        addr = Signal(SPM_BITS)
        line = Signal(VECTOR_BITS)
        job = Signal(2)
        tag = Signal(self.tag_bits)
        idx = Signal(REG_BITS)
        dram = Signal(DRAM_BITS)
        slot = Signal(self.slot_bits)
        idle = state == _IDLE
        ins, ip = self.instr, self.instr.payload
        is_ = {o: ip.opcode == o for o in Opcode}

        m.d.comb += [
            self.reserve.valid.eq(ins.valid & is_[Opcode.ST_PGSM] & idle & ~self.ldp.valid),
            self.reserve.payload.tag.eq(ip.tag), self.reserve.payload.idx.eq(ip.drf),
            self.reserve.payload.spm.eq(ip.spm),
            ins.ready.eq(idle & ~self.ldp.valid & (~is_[Opcode.ST_PGSM] | self.reserve.ready)),
            self.ldp.ready.eq(idle),
        ]
        with m.If(self.ldp.valid & self.ldp.ready):
            m.d.sync += [state.eq(_REQ), vsm.eq(0), we.eq(1), addr.eq(self.ldp.payload.spm),
                         line.eq(self.ldp.payload.data), job.eq(_J_LDP),
                         tag.eq(self.ldp.payload.tag)]
        with m.Elif(ins.valid & ins.ready):
            wr = is_[Opcode.WR_PGSM] | is_[Opcode.WR_VSM]
            m.d.sync += [state.eq(_REQ), vsm.eq(is_[Opcode.RD_VSM] | is_[Opcode.WR_VSM]),
                         we.eq(wr), addr.eq(ip.spm), line.eq(ip.data), tag.eq(ip.tag),
                         idx.eq(ip.drf), dram.eq(ip.dram), slot.eq(self.slot),
                         job.eq(Mux(wr, _J_WR, Mux(is_[Opcode.ST_PGSM], _J_STP, _J_RD)))]
        for port, sel in ((self.pgsm, ~vsm), (self.vsm, vsm)):
            m.d.comb += [port.valid.eq((state == _REQ) & sel), port.we.eq(we),
                         port.addr.eq(addr), port.wdata.eq(line), port.wmask.eq(0b1111)]
        p_ready = Mux(vsm, self.vsm.ready, self.pgsm.ready)
        p_rvalid = Mux(vsm, self.vsm.rvalid, self.pgsm.rvalid)
        p_rdata = Mux(vsm, self.vsm.rdata, self.pgsm.rdata)
        with m.If((state == _REQ) & p_ready):
            m.d.sync += state.eq(Mux(we, _FIN, _WAIT))
        with m.If((state == _WAIT) & p_rvalid):
            m.d.sync += [line.eq(p_rdata), state.eq(Mux(job == _J_STP, _BREQ, _FIN))]

        m.d.comb += [self.write.valid.eq(state == _BREQ), self.write.payload.dram.eq(dram),
                     self.write.payload.data.eq(line), self.write.payload.slot.eq(slot)]
        with m.If(self.write.valid & self.write.ready):
            m.d.sync += state.eq(_IDLE)

        d = self.done.payload
        m.d.comb += [self.done.valid.eq(state == _FIN), d.tag.eq(tag), d.drf.eq(job == _J_RD),
                     d.idx.eq(idx), d.mask.eq(0b1111), d.data.eq(line)]
        with m.If(self.done.valid & self.done.ready):
            m.d.sync += state.eq(_IDLE)
        m.d.comb += self.busy.eq(~idle)
        return m
