"""The dispatch stage of the near-bank PE: the decode register, the DataRF and AddrRF read in
the dispatch cycle and written at completion, and the routing of each instruction to the
fixed-latency path, the bank path or the scratchpad engine."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_int, check_pow2
from .bus import VECTOR_BITS, IssueSignature
from .isa import DRAM_BITS, INSTRUCTION, LANES, REG_BITS, RESERVED_ARF, SPM_BITS, Opcode
from .pe_completion import completion_layout

__all__ = ["PEDispatch", "fixed_layout", "mem_layout"]

# The opcodes served by the bank path and by the scratchpad engine; every other opcode
# finishes at a fixed latency (one outside ``PE_OPS``, which the core never sends,
# finishes after one cycle doing nothing).
_BANK_OPS = (Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM)
_SPM_OPS = (Opcode.RD_PGSM, Opcode.WR_PGSM, Opcode.RD_VSM, Opcode.WR_VSM, Opcode.ST_PGSM)


def fixed_layout(tag_bits: int) -> data.StructLayout:
    """An instruction for the fixed-latency path with its register operands.

    ``src1``, ``src2``, ``dst`` are the DataRF entries of ``comp``'s fields,
    ``op`` the DataRF entry of the format's ``drf`` field; ``asrc1``, ``asrc2``
    the AddrRF entries of ``calc_arf``, ``amov`` the AddrRF entry of ``mov_drf``.
    """
    check_int("tag_bits", tag_bits, 1, 16)
    v = VECTOR_BITS
    return data.StructLayout({"instr": INSTRUCTION, "tag": tag_bits, "src1": v, "src2": v,
                              "dst": v, "op": v, "asrc1": 32, "asrc2": 32, "amov": 32})


def mem_layout(tag_bits: int) -> data.StructLayout:
    """An instruction for the bank path or the scratchpad engine, addresses resolved.

    ``dram`` and ``spm`` are the bank and scratchpad addresses (the AddrRF
    entry where the format's ``*_ind`` bit is set), ``drf`` the DataRF entry
    number and ``data`` that entry's contents.
    """
    check_int("tag_bits", tag_bits, 1, 16)
    return data.StructLayout({"opcode": Opcode, "tag": tag_bits, "drf": REG_BITS,
                              "dram": DRAM_BITS, "spm": SPM_BITS, "data": VECTOR_BITS})


class PEDispatch(wiring.Component):
    """Decode register, register files and dispatch of the near-bank PE.

    An instruction taken on ``issue`` waits in the decode register until the
    path of its opcode takes it: ``fixed``, ``bank`` or ``spm``, whichever
    one its opcode names (only that stream's ``valid`` is high). The
    operands are read from the register files in that cycle, so a result
    written at completion is seen by the next instruction dispatched.
    ``issue.ready`` is high when the register is empty or dispatches this
    cycle; it depends on registered state and the paths' ``ready`` only.

    The completion port's choice arrives on ``complete``: it pulses
    ``issue.done`` and writes the register files (the DataRF lanes of the
    mask, the low 32 bits into the AddrRF). A0..A3 read ``pe_id``, ``pg_id``,
    ``vault_id``, ``chip_id`` and ignore writes. Register numbers wider than
    the files wrap (the low bits are used).

    Parameters
    ----------
    tag_bits : int
        Issued-instruction queue slot width of ``issue``.
    drf_entries, arf_entries : int
        DataRF (128-bit) and AddrRF (32-bit) entries.

    Attributes
    ----------
    issue : In(IssueSignature(tag_bits=tag_bits))
    pe_id, pg_id, vault_id, chip_id : In
        The ids of A0..A3 (6, 4, 6, 4 bits).
    fixed : Out(stream.Signature(fixed_layout(tag_bits)))
        To the fixed-latency path.
    bank : Out(stream.Signature(mem_layout(tag_bits)))
        To the bank path (``ld_rf``, ``st_rf``, ``ld_pgsm``).
    spm : Out(stream.Signature(mem_layout(tag_bits)))
        To the scratchpad engine (``rd/wr_pgsm``, ``rd/wr_vsm``, ``st_pgsm``).
    complete : In(stream.Signature(completion_layout(tag_bits), always_ready=True))
        The instruction finishing this cycle.
    drf_used, arf_used : Out(1)
        The DataRF / AddrRF is read by the instruction dispatched or written this cycle.
    busy : Out(1)
        The decode register holds an instruction.
    """

    def __init__(self, *, tag_bits: int, drf_entries: int = 64, arf_entries: int = 64):
        check_pow2("drf_entries", drf_entries, 4, 1 << REG_BITS)
        check_pow2("arf_entries", arf_entries, 8, 1 << REG_BITS)
        self.tag_bits = tag_bits
        self.drf_entries, self.arf_entries = drf_entries, arf_entries
        super().__init__({
            "issue": In(IssueSignature(tag_bits=tag_bits)),
            "pe_id": In(6), "pg_id": In(4), "vault_id": In(6), "chip_id": In(4),
            "fixed": Out(stream.Signature(fixed_layout(tag_bits))),
            "bank": Out(stream.Signature(mem_layout(tag_bits))),
            "spm": Out(stream.Signature(mem_layout(tag_bits))),
            "complete": In(stream.Signature(completion_layout(tag_bits), always_ready=True)),
            "drf_used": Out(1), "arf_used": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        iss = self.issue
        V = VECTOR_BITS
        ND, NA = self.drf_entries, self.arf_entries
        dbits, abits = ceil_log2(ND), ceil_log2(NA)

        drf = Array(Signal(V, name=f"drf{i}") for i in range(ND))
        arf_regs = [Signal(32, name=f"arf{i}") for i in range(RESERVED_ARF, NA)]
        ids = [self.pe_id, self.pg_id, self.vault_id, self.chip_id]
        arf = Array([*(Signal(32, name=f"arf_id{i}") for i in range(RESERVED_ARF)),
                     *arf_regs])
        for i, v in enumerate(ids):
            m.d.comb += arf[i].eq(v)

        cur = Signal(INSTRUCTION)
        cur_v = Signal()
        cur_tag = Signal(self.tag_bits)
        dispatch = Signal()
        m.d.comb += iss.ready.eq(~cur_v | dispatch)
        with m.If(iss.valid & iss.ready):
            m.d.sync += [cur_v.eq(1), cur.eq(iss.instr), cur_tag.eq(iss.tag)]
        with m.Elif(dispatch):
            m.d.sync += cur_v.eq(0)

        opc = cur.opcode
        a = cur.args
        is_ = {o: cur_v & (opc == o) for o in Opcode}

        # Operand fields whose place depends on the format.
        f_drf = Signal(REG_BITS)
        f_dram = Signal(DRAM_BITS)
        f_dram_ind = Signal()
        f_spm = Signal(SPM_BITS)
        f_spm_ind = Signal()
        with m.Switch(opc):
            with m.Case(Opcode.LD_RF, Opcode.ST_RF):
                m.d.comb += [f_drf.eq(a.rf_bank.drf), f_dram.eq(a.rf_bank.dram),
                             f_dram_ind.eq(a.rf_bank.dram_ind)]
            with m.Case(Opcode.LD_PGSM, Opcode.ST_PGSM):
                m.d.comb += [f_dram.eq(a.pgsm_bank.dram), f_dram_ind.eq(a.pgsm_bank.dram_ind),
                             f_spm.eq(a.pgsm_bank.pgsm), f_spm_ind.eq(a.pgsm_bank.pgsm_ind)]
            with m.Case(Opcode.RD_PGSM, Opcode.WR_PGSM):
                m.d.comb += [f_drf.eq(a.rf_pgsm.drf), f_spm.eq(a.rf_pgsm.pgsm),
                             f_spm_ind.eq(a.rf_pgsm.pgsm_ind)]
            with m.Case(Opcode.RD_VSM, Opcode.WR_VSM):
                m.d.comb += [f_drf.eq(a.rf_vsm.drf), f_spm.eq(a.rf_vsm.vsm),
                             f_spm_ind.eq(a.rf_vsm.vsm_ind)]
            with m.Case(Opcode.MOV_DRF, Opcode.MOV_ARF):
                m.d.comb += f_drf.eq(a.mov.drf)
            with m.Case(Opcode.RESET):
                m.d.comb += f_drf.eq(a.reset.drf)

        # Register reads of the dispatch cycle.
        comp, calc, mov = a.comp, a.calc, a.mov
        d_op = drf[f_drf[:dbits]]
        dram_addr = Signal(DRAM_BITS)
        spm_addr = Signal(SPM_BITS)
        m.d.comb += [dram_addr.eq(Mux(f_dram_ind, arf[f_dram[:abits]], f_dram)),
                     spm_addr.eq(Mux(f_spm_ind, arf[f_spm[:abits]], f_spm))]

        bank_op = Cat(is_[o] for o in _BANK_OPS).any()
        spm_op = Cat(is_[o] for o in _SPM_OPS).any()
        fx = self.fixed.payload
        m.d.comb += [
            self.fixed.valid.eq(cur_v & ~bank_op & ~spm_op),
            fx.instr.eq(cur), fx.tag.eq(cur_tag),
            fx.src1.eq(drf[comp.src1[:dbits]]), fx.src2.eq(drf[comp.src2[:dbits]]),
            fx.dst.eq(drf[comp.dst[:dbits]]), fx.op.eq(d_op),
            fx.asrc1.eq(arf[calc.src1[:abits]]), fx.asrc2.eq(arf[calc.src2[:abits]]),
            fx.amov.eq(arf[mov.arf[:abits]]),
            self.bank.valid.eq(bank_op), self.spm.valid.eq(spm_op),
        ]
        for path in (self.bank, self.spm):
            p = path.payload
            m.d.comb += [p.opcode.eq(opc), p.tag.eq(cur_tag), p.drf.eq(f_drf),
                         p.dram.eq(dram_addr), p.spm.eq(spm_addr), p.data.eq(d_op)]
        m.d.comb += dispatch.eq((self.fixed.valid & self.fixed.ready) |
                                (self.bank.valid & self.bank.ready) |
                                (self.spm.valid & self.spm.ready))

        # Completion: the register writes.
        c = self.complete.payload
        w_en = Signal()
        wa_en = Signal()
        m.d.comb += [w_en.eq(self.complete.valid & c.drf), wa_en.eq(self.complete.valid & c.arf),
                     iss.done.eq(self.complete.valid), iss.done_tag.eq(c.tag)]
        for i in range(ND):
            with m.If(w_en & (c.idx[:dbits] == i)):
                for ln in range(LANES):
                    with m.If(c.mask[ln]):
                        m.d.sync += drf[i][32 * ln:32 * ln + 32].eq(c.data[32 * ln:32 * ln + 32])
        for i, r in enumerate(arf_regs, RESERVED_ARF):
            with m.If(wa_en & (c.idx[:abits] == i)):
                m.d.sync += r.eq(c.data[:32])

        # Which register files this cycle uses, for the PE's counters.
        reads_drf = is_[Opcode.COMP] | is_[Opcode.ST_RF] | is_[Opcode.WR_PGSM] | \
            is_[Opcode.WR_VSM] | is_[Opcode.MOV_ARF]
        reads_arf = is_[Opcode.CALC_ARF] | is_[Opcode.MOV_DRF] | \
            (f_dram_ind & (is_[Opcode.LD_RF] | is_[Opcode.ST_RF] | is_[Opcode.LD_PGSM] |
                           is_[Opcode.ST_PGSM])) | (f_spm_ind & (spm_op | is_[Opcode.LD_PGSM]))
        m.d.comb += [self.drf_used.eq((dispatch & reads_drf) | w_en),
                     self.arf_used.eq((dispatch & reads_arf) | wa_en),
                     self.busy.eq(cur_v)]
        return m
