"""The control core of one iPIM vault, on the base die (Sec. IV-B, Fig. 2b).

Pipeline
--------
``pc`` addresses the instruction memory (a synchronous read port), so the
word of ``pc`` is in the issue stage one cycle later. The issue stage decodes
it (layout :data:`~pimforge.rtl.ipim.isa.INSTRUCTION`), checks it against the
issued-instruction queue and, when it may go, *issues* it: the next ``pc`` is
presented to the memory in the same cycle, so independent instructions issue
back to back (IPC 1).

Issued-instruction queue
------------------------
(:class:`~pimforge.rtl.ipim.issue_queue.IssueQueue`, with the dependency check.)
``inst_queue`` slots; a slot holds the decoded hazard resources of one issued
instruction and its outstanding bits: one per PE of ``simb_mask`` (PEs beyond
``pes`` are ignored) plus one for a vault-level unit. A PE's ``done`` with the
slot's number as ``done_tag`` clears its bit at the end of that cycle; the
slot retires, lock-step, once no bit is left: from the next cycle on it is
free and its resources no longer block anything (no bypass, so an instruction
that depends on it issues one cycle after the last ``done`` at the earliest).
Slots are taken lowest free first and retire in any order; the slot number
is the instruction's ``tag``. Instructions that finish in their issue cycle
(jumps, ``nop``, ``sync``, ``halt``, a PE instruction whose mask selects no PE
of this vault, a CtrlRF write with ``t_alu = 1``) take no slot.

Dependency check
----------------
Exactly :func:`~pimforge.rtl.ipim.isa.accesses` and
:func:`~pimforge.rtl.ipim.isa.conflicts`: each instruction is decoded into at
most three register reads, one register write, one memory read and one memory
write (:data:`HAZARD`); registers (DataRF, AddrRF, CtrlRF) match per entry,
bank/PGSM/VSM per address when direct and as the whole store when indirect,
except that two bank accesses that enter the PE's request queue in issue order
(``ld_rf``, ``st_rf``, ``ld_pgsm``) never conflict (see :mod:`~pimforge.rtl.ipim.isa`).
The instruction in the issue stage waits (a bubble) while any occupied slot
has a true (its reads against the slot's writes), anti (its writes against
the slot's reads) or output (writes against writes) dependency with it. An
AddrRF read whose indirect address operand is 256 or more names no AddrRF
entry that any instruction can write, so it is dropped from the check.
The check ignores ``simb_mask``: two instructions on disjoint PEs that touch the
same register or address still wait for each other, as ``conflicts`` says.

Units
-----
* PE instructions (:data:`~pimforge.rtl.ipim.isa.PE_OPS`): broadcast in one
  cycle on ``pe[p]`` to every PE of the mask, only in a cycle where all of them
  have ``ready`` high (protocol of :class:`~pimforge.rtl.ipim.bus.IssueSignature`).
  A PE finishes an instruction (``done``) once its effect is in place: a write
  into the PGSM or the VSM has been accepted by that scratchpad.
* ``seti_vsm``: one write of the VSM port ``vsm`` (``imm`` on every lane,
  ``vec_mask`` as ``wmask``); the slot retires when the VSM took it.
* ``req``: one request on the stream ``nic_req`` (fields of :func:`req_layout`,
  with the slot as ``tag``); the slot retires when ``landed`` reports that tag,
  i.e. when the reply's line has been written into the VSM.
* ``calc_crf``/``seti_crf``: the integer ALU of the core, ``t_alu`` cycles: the
  CtrlRF entry is written at the end of the ``t_alu``-th cycle counting the
  issue cycle, so a dependent instruction issues ``t_alu`` cycles after it
  (``t_alu - 1`` bubbles). With ``t_alu = 1`` the instruction takes no slot;
  otherwise its slot retires with the write.
* ``jump``/``cjump``: resolved in the issue stage, once their CtrlRF operands
  have no pending write in the queue (a RAW stall otherwise); the target is
  read from the CtrlRF and presented to the instruction memory in the same
  cycle, so a jump costs no bubble: the **branch penalty is 0 cycles** after
  its operands are ready (the target word is in the issue stage in the next
  cycle, as the fall-through would be). Jumps take no slot.
* ``sync``: once the queue is empty (every earlier instruction retired, every
  earlier ``req`` landed), ``sync.arrive`` rises with ``sync.phase``; the sync
  commits in the cycle ``sync.proceed`` is high. ``proceed`` is a one-cycle
  pulse given to every vault at once; an ``arrive`` in the following cycle
  belongs to the next sync.
* ``halt``: once the queue is empty the core stops (``halted``). ``nop`` and
  the undefined opcodes (22 to 31) issue in one cycle and do nothing.

Host interface
--------------
After reset the core is halted. The driver writes the program through
``imem_we``/``imem_addr``/``imem_data`` while halted and pulses ``start``: the
core clears its counters and runs from instruction 0. The CtrlRF keeps its
values across programs (0 after reset); its index is taken modulo
``crf_entries``.

Counters (``perf``, :class:`ControlCore.PerfSignature`)
-------------------------------------------------------
Cleared by ``start``; they count the cycles in which the core runs (from the
cycle after ``start`` to the cycle its ``halt`` issues, both included):

``cycles``
    Running cycles. ``cycles = issued + stall_dep + stall_full + stall_unit +
    stall_sync`` holds exactly: the issue stage holds an instruction in every
    running cycle (``start`` fetches instruction 0).
``issued``
    Instructions that left the issue stage (every opcode, jumps, nops, the
    committed sync and the halt included); IPC = ``issued / cycles``.
``issued_<class>``
    The same per class of :data:`OPCODE_CLASSES`.
``stall_sync``
    A ``sync`` or ``halt`` waits for the queue to drain or (sync) for ``proceed``.
``stall_dep``
    Otherwise: a dependency on an occupied slot.
``stall_full``
    Otherwise: the instruction needs a slot and none is free.
``stall_unit``
    Otherwise: its unit is not ready: a masked PE has ``ready`` low (its
    in-DRAM controller queue or a PE-side port is full: the memory stall of
    Fig. 13), or the VSM or network port still holds the previous
    ``seti_vsm``/``req``.
``busy_<unit>``
    Sum over the running cycles of the number of PEs whose ``pe_busy[p].<unit>``
    is high (PE-cycles; utilization = ``busy_u / (cycles * pes)``), for the
    units of :data:`BUSY_UNITS`.

Parameters
----------
pes : int
    PEs of the vault (``pgs * pes_per_pg``), at most 64.
inst_queue : int
    Slots of the issued-instruction queue (``ipim.inst_queue``).
imem_depth : int
    Instruction memory words (``ipim.imem_instructions``).
crf_entries : int
    CtrlRF entries.
vsm_lines : int
    VSM lines (sets the width of the ``vsm`` port's address).
t_alu : int
    Latency of the core's integer ALU (``calc_crf``/``seti_crf``).
t_vsm : int
    Read latency published by the ``vsm`` port's signature (the core only writes).
counter_bits : int
    Width of each counter.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.sram import sram_leaf
from ..params import check_int, check_pow2
from .bus import (
    BUSY_LAYOUT,
    BUSY_UNITS,
    VECTOR_BITS,
    IssueSignature,
    SPMPortSignature,
    SyncSignature,
)
from .core_units import VaultUnits, req_layout
from .isa import (
    INSTRUCTION,
    ISA_VERSION,
    MASK_BITS,
    PE_OPS,
    REG_BITS,
    SPM_BITS,
    WORD_BITS,
    AluOp,
    Cond,
    Opcode,
    Store,
    format_of,
)
from .issue_queue import HAZARD, IssueQueue

__all__ = ["ControlCore", "from_config", "req_layout", "reply_layout", "landed_signature",
           "HAZARD",
           "OPCODE_CLASSES", "BUSY_UNITS", "BUSY_LAYOUT", "COUNTER_NAMES"]

#: Issued-instruction classes counted by ``perf.issued_<class>``.
OPCODE_CLASSES: dict[str, tuple[Opcode, ...]] = {
    "comp": (Opcode.COMP,),
    "calc_arf": (Opcode.CALC_ARF,),
    "bank": (Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM, Opcode.ST_PGSM),
    "pgsm": (Opcode.RD_PGSM, Opcode.WR_PGSM),
    "vsm": (Opcode.RD_VSM, Opcode.WR_VSM),
    "mov": (Opcode.MOV_DRF, Opcode.MOV_ARF, Opcode.RESET),
    "seti_vsm": (Opcode.SETI_VSM,),
    "req": (Opcode.REQ,),
    "ctrl": (Opcode.JUMP, Opcode.CJUMP, Opcode.CALC_CRF, Opcode.SETI_CRF),
    "sync": (Opcode.SYNC,),
    "other": (Opcode.NOP, Opcode.HALT),
}
assert sorted(op.value for ops in OPCODE_CLASSES.values() for op in ops) == \
    sorted(op.value for op in Opcode)

#: PE units whose busy cycles the core sums (one bit each in ``pe_busy[p]``).

STALLS = ("stall_dep", "stall_full", "stall_unit", "stall_sync")
#: Every member of ``perf``, in order.
COUNTER_NAMES = (("cycles", "issued", *STALLS)
                 + tuple(f"issued_{c}" for c in OPCODE_CLASSES)
                 + tuple(f"busy_{u}" for u in BUSY_UNITS))

# PE_OPS in opcode order: iterating the frozenset would order the generated
# Verilog by string hashes, which change from run to run (and defeat the build cache).
_PE_OPS = tuple(sorted(PE_OPS, key=lambda o: o.value))
# Vault-level opcodes that hold a slot until their unit finishes.
_UNIT_SLOT_OPS = (Opcode.SETI_VSM, Opcode.REQ, Opcode.CALC_CRF, Opcode.SETI_CRF)


def reply_layout(tag_bits: int) -> data.StructLayout:
    """Payload of a ``req`` reply arriving at the VSM: the line and the request's
    ``vsm``/``tag``."""
    return data.StructLayout({"vsm": SPM_BITS, "tag": tag_bits, "data": VECTOR_BITS})


def landed_signature(tag_bits: int) -> wiring.Signature:
    """The VSM's report that the reply of ``req`` *tag* is written (VSM side):
    ``valid`` one cycle per reply, ``tag``. No back-pressure."""
    return wiring.Signature({"valid": Out(1), "tag": Out(tag_bits)})


def _decode_hazards(m: Module, ins) -> data.View:
    """The :data:`HAZARD` view of the instruction view *ins* (isa.accesses in gates)."""
    hz = Signal(HAZARD)
    args = ins.args
    D, A, C = Store.DRF.value, Store.ARF.value, Store.CRF.value

    def reg(slot, store, idx, en=1):
        m.d.comb += [slot.en.eq(en), slot.store.eq(store), slot.idx.eq(idx)]

    def mem(slot, store, addr, ind, queued=0):
        m.d.comb += [slot.en.eq(1), slot.store.eq(store.value), slot.whole.eq(ind),
                     slot.queued.eq(queued), slot.addr.eq(Mux(ind, 0, addr))]

    def ind_reg(slot, addr, ind):
        # The AddrRF entry named by an indirect address; none beyond REG_BITS.
        reg(slot, A, addr[:REG_BITS], ind & (addr[REG_BITS:] == 0))

    with m.Switch(ins.opcode):
        with m.Case(Opcode.COMP):
            f = args.comp
            reg(hz.rd0, D, f.src1)
            reg(hz.rd1, D, f.src2)
            reg(hz.rd2, D, f.dst, f.op == AluOp.MAC)
            reg(hz.wr, D, f.dst)
        with m.Case(Opcode.CALC_ARF):
            f = args.calc
            reg(hz.rd0, A, f.src1)
            reg(hz.rd1, A, f.src2)
            reg(hz.wr, A, f.dst)
        with m.Case(Opcode.LD_RF, Opcode.ST_RF):
            f = args.rf_bank
            ind_reg(hz.rd0, f.dram, f.dram_ind)
            with m.If(ins.opcode == Opcode.LD_RF):
                mem(hz.mrd, Store.BANK, f.dram, f.dram_ind, queued=1)
                reg(hz.wr, D, f.drf)
            with m.Else():
                mem(hz.mwr, Store.BANK, f.dram, f.dram_ind, queued=1)
                reg(hz.rd1, D, f.drf)
        with m.Case(Opcode.LD_PGSM, Opcode.ST_PGSM):
            f = args.pgsm_bank
            ind_reg(hz.rd0, f.dram, f.dram_ind)
            ind_reg(hz.rd1, f.pgsm, f.pgsm_ind)
            with m.If(ins.opcode == Opcode.LD_PGSM):
                mem(hz.mrd, Store.BANK, f.dram, f.dram_ind, queued=1)
                mem(hz.mwr, Store.PGSM, f.pgsm, f.pgsm_ind)
            with m.Else():
                mem(hz.mrd, Store.PGSM, f.pgsm, f.pgsm_ind)
                mem(hz.mwr, Store.BANK, f.dram, f.dram_ind)
        for rd, wr, fmt, store in ((Opcode.RD_PGSM, Opcode.WR_PGSM, "rf_pgsm", Store.PGSM),
                                   (Opcode.RD_VSM, Opcode.WR_VSM, "rf_vsm", Store.VSM)):
            with m.Case(rd, wr):
                f = args[fmt]
                addr, ind = (f.pgsm, f.pgsm_ind) if store is Store.PGSM else (f.vsm, f.vsm_ind)
                ind_reg(hz.rd0, addr, ind)
                with m.If(ins.opcode == rd):
                    mem(hz.mrd, store, addr, ind)
                    reg(hz.wr, D, f.drf)
                with m.Else():
                    mem(hz.mwr, store, addr, ind)
                    reg(hz.rd1, D, f.drf)
        with m.Case(Opcode.MOV_DRF):
            reg(hz.rd0, A, args.mov.arf)
            reg(hz.wr, D, args.mov.drf)
        with m.Case(Opcode.MOV_ARF):
            reg(hz.rd0, D, args.mov.drf)
            reg(hz.wr, A, args.mov.arf)
        with m.Case(Opcode.RESET):
            reg(hz.wr, D, args.reset.drf)
        with m.Case(Opcode.SETI_VSM):
            mem(hz.mwr, Store.VSM, args.seti_vsm.vsm, 0)
        with m.Case(Opcode.REQ):
            mem(hz.mwr, Store.VSM, args.req.vsm, 0)
        with m.Case(Opcode.JUMP, Opcode.CJUMP):
            reg(hz.rd0, C, args.jump.target)
            reg(hz.rd1, C, args.jump.src, ins.opcode == Opcode.CJUMP)
        with m.Case(Opcode.CALC_CRF):
            reg(hz.rd0, C, args.calc_crf.src1)
            reg(hz.rd1, C, args.calc_crf.src2)
            reg(hz.wr, C, args.calc_crf.dst)
        with m.Case(Opcode.SETI_CRF):
            reg(hz.wr, C, args.seti_crf.dst)
    return hz


class ControlCore(wiring.Component):
    """Control core of one vault (see the module docstring).

    Assembled from the :class:`~pimforge.rtl.ipim.issue_queue.IssueQueue` and the
    :class:`~pimforge.rtl.ipim.core_units.VaultUnits` (``seti_vsm``, ``req``, the
    CtrlRF's ALU); fetch, the CtrlRF, the issue decision and the counters are its own.

    Parameters
    ----------
    pes, inst_queue, imem_depth, crf_entries, vsm_lines, t_alu, t_vsm, counter_bits
        See the module docstring.

    Attributes
    ----------
    imem_we, imem_addr, imem_data : In
        Instruction memory backdoor write (one 128-bit word per cycle, while halted).
    start : In(1)
        Pulse while halted: clear the counters and run from instruction 0.
    halted : Out(1)
        High after reset and once a ``halt`` has issued.
    pe : Out(IssueSignature(tag_bits)).array(pes)
        SIMB issue to each PE.
    pe_busy : In(BUSY_LAYOUT).array(pes)
        Per-PE unit activity, summed into ``perf.busy_<unit>``.
    vsm : Out(SPMPortSignature(addr_bits, t_vsm))
        ``seti_vsm`` writes into the VSM.
    nic_req : Out(stream.Signature(req_layout(tag_bits)))
        ``req`` to the network interface.
    landed : In(landed_signature(tag_bits))
        A ``req`` reply of this tag has been written into the VSM.
    sync : Out(SyncSignature())
        The inter-vault barrier.
    issue_valid, issue_pc : Out
        Trace: an instruction issued this cycle, and its address.
    perf : Out(ControlCore.PerfSignature(counter_bits))
        Performance counters.
    crf : Memory
        The CtrlRF of the last elaboration (a simulator reads ``crf.data[i]``).
    """

    class PerfSignature(wiring.Signature):
        """The performance counters of the control core (all outputs).

        Members
        -------
        One ``Out(counter_bits)`` per name of :data:`COUNTER_NAMES` (meanings in
        the module docstring).
        """

        def __init__(self, counter_bits: int):
            check_int("counter_bits", counter_bits, 16, 64)
            self._counter_bits = counter_bits
            super().__init__({n: Out(counter_bits) for n in COUNTER_NAMES})

        @property
        def counter_bits(self) -> int:
            return self._counter_bits

        def __eq__(self, other):
            return type(other) is type(self) and other.counter_bits == self.counter_bits

        def __hash__(self):
            return hash((type(self), self.counter_bits))

        def __repr__(self):
            return f"ControlCore.PerfSignature({self.counter_bits})"

    def __init__(self, *, pes: int, inst_queue: int, imem_depth: int, crf_entries: int = 32,
                 vsm_lines: int = 256, t_alu: int = 1, t_vsm: int = 1, counter_bits: int = 48):
        check_int("pes", pes, 1, MASK_BITS)
        check_int("inst_queue", inst_queue, 1, 256)
        check_pow2("imem_depth", imem_depth, 16, 1 << 16)
        check_pow2("crf_entries", crf_entries, 4, 1 << REG_BITS)
        check_pow2("vsm_lines", vsm_lines, 2, 1 << SPM_BITS)
        check_int("t_alu", t_alu, 1, 64)
        check_int("t_vsm", t_vsm, 1, 64)
        self.pes, self.inst_queue, self.imem_depth = pes, inst_queue, imem_depth
        self.crf_entries, self.vsm_lines, self.t_alu = crf_entries, vsm_lines, t_alu
        self.tag_bits = max(1, ceil_log2(inst_queue))
        self.vsm_bits = max(1, ceil_log2(vsm_lines))
        self.pc_bits = ceil_log2(imem_depth)
        self.isa_version = ISA_VERSION
        self.latencies = {"alu": t_alu}
        super().__init__({
            "imem_we": In(1), "imem_addr": In(self.pc_bits), "imem_data": In(WORD_BITS),
            "start": In(1), "halted": Out(1),
            "pe": Out(IssueSignature(tag_bits=self.tag_bits)).array(pes),
            "pe_busy": In(BUSY_LAYOUT).array(pes),
            "vsm": Out(SPMPortSignature(addr_bits=self.vsm_bits, latency=t_vsm)),
            "nic_req": Out(stream.Signature(req_layout(self.tag_bits))),
            "landed": In(landed_signature(self.tag_bits)),
            "sync": Out(SyncSignature()),
            "issue_valid": Out(1), "issue_pc": Out(self.pc_bits),
            "perf": Out(self.PerfSignature(counter_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        c = self._fetch(m)
        self._ctrl_rf(m, c)
        self._issue(m, c)
        self._next_pc(m, c)
        self._dispatch(m, c)
        self._counters(m, c)
        return m

    def _fetch(self, m: Module) -> SimpleNamespace:
        """Instruction memory and fetch: while running, the word of ``pc`` is always in
        the issue stage (start presents address 0, and every cycle presents the next pc)."""
        m.submodules.imem = imem = sram_leaf(width=WORD_BITS, depth=self.imem_depth)
        m.d.comb += [imem.w_en.eq(self.imem_we), imem.w_addr.eq(self.imem_addr),
                     imem.w_data.eq(self.imem_data)]
        running = Signal()
        pc = Signal(self.pc_bits)
        next_pc = Signal(self.pc_bits)
        m.d.comb += [imem.r_addr.eq(next_pc), self.halted.eq(~running)]
        ins = data.View(INSTRUCTION, imem.r_data)
        return SimpleNamespace(imem=imem, running=running, ivalid=running, pc=pc,
                               next_pc=next_pc, ins=ins, op=ins.opcode)

    def _ctrl_rf(self, m: Module, c: SimpleNamespace) -> None:
        """The CtrlRF: read in the issue stage (a jump's target and condition, or the
        ALU's sources), written by the ALU."""
        ins, op = c.ins, c.op
        m.submodules.crf = crf = Memory(shape=32, depth=self.crf_entries, init=[])
        self.crf = crf      # for a simulator's backdoor read, ``crf.data[i]``
        crf_w = crf.write_port()
        crf_a = crf.read_port(domain="comb")
        crf_b = crf.read_port(domain="comb")
        is_jump = (op == Opcode.JUMP) | (op == Opcode.CJUMP)
        cb = ceil_log2(self.crf_entries)
        m.d.comb += [
            crf_a.addr.eq(Mux(is_jump, ins.args.jump.target, ins.args.calc_crf.src1)[:cb]),
            crf_b.addr.eq(Mux(is_jump, ins.args.jump.src, ins.args.calc_crf.src2)[:cb]),
        ]
        c.crf_w, c.crf_a, c.crf_b = crf_w, crf_a, crf_b

    def _issue(self, m: Module, c: SimpleNamespace) -> None:
        """The issue decision: the issued-instruction queue's dependency check, a free
        slot when the instruction needs one, and the unit that takes it ready."""
        P, Q, ins, op = self.pes, self.inst_queue, c.ins, c.op
        q = m.submodules.queue = IssueQueue(slots=Q, pes=P)
        hz = _decode_hazards(m, ins)
        m.d.comb += q.hazard.eq(hz)
        dep = q.dep

        mask = Signal(P)
        is_pe_op = Signal()
        with m.Switch(op):
            for o in _PE_OPS:
                with m.Case(o):
                    m.d.comb += [is_pe_op.eq(1), mask.eq(ins.args[format_of(o)].simb_mask[:P])]
        # A one-cycle ALU writes the CtrlRF at the end of the issue cycle: no slot.
        slot_ops = [o for o in _UNIT_SLOT_OPS
                    if self.t_alu > 1 or o not in (Opcode.CALC_CRF, Opcode.SETI_CRF)]
        is_unit_op = Signal()
        m.d.comb += is_unit_op.eq(Cat(*(op == o for o in slot_ops)).any())
        needs_slot = (is_pe_op & mask.any()) | is_unit_op
        full = needs_slot & ~q.any_free
        pes_ready = Cat(*(~mask[p] | self.pe[p].ready for p in range(P))).all()

        units = m.submodules.units = VaultUnits(
            tag_bits=self.tag_bits, crf_entries=self.crf_entries, vsm_bits=self.vsm_bits,
            t_vsm=self.vsm.signature.latency, t_alu=self.t_alu)
        unit_ready = Signal()
        with m.Switch(op):
            with m.Case(*_PE_OPS):
                m.d.comb += unit_ready.eq(pes_ready)
            with m.Case(Opcode.SETI_VSM):
                m.d.comb += unit_ready.eq(units.seti_ready)
            with m.Case(Opcode.REQ):
                m.d.comb += unit_ready.eq(units.req_ready)
            with m.Case(Opcode.SYNC):
                m.d.comb += unit_ready.eq(q.drained & self.sync.proceed)
            with m.Case(Opcode.HALT):
                m.d.comb += unit_ready.eq(q.drained)
            with m.Default():
                m.d.comb += unit_ready.eq(1)
        fire = Signal()
        m.d.comb += fire.eq(c.ivalid & ~dep & ~full & unit_ready)
        m.d.comb += [self.issue_valid.eq(fire), self.issue_pc.eq(c.pc)]
        m.d.comb += [self.sync.arrive.eq(c.ivalid & (op == Opcode.SYNC) & q.drained),
                     self.sync.phase.eq(ins.args.sync.phase)]
        c.__dict__.update(q=q, dep=dep, mask=mask, is_pe_op=is_pe_op, needs_slot=needs_slot,
                          full=full, units=units, fire=fire)

    def _next_pc(self, m: Module, c: SimpleNamespace) -> None:
        """Next pc: jumps resolve in the issue stage, so the target's word is fetched at
        once; start runs from address 0 and an issued halt stops."""
        ins, op, pc, next_pc, running, fire = c.ins, c.op, c.pc, c.next_pc, c.running, c.fire
        taken = Signal()
        c_src = c.crf_b.data
        with m.Switch(ins.args.jump.cond):
            with m.Case(Cond.Z):
                m.d.comb += taken.eq(c_src == 0)
            with m.Case(Cond.NZ):
                m.d.comb += taken.eq(c_src != 0)
            with m.Case(Cond.LTZ):
                m.d.comb += taken.eq(c_src[31])
            with m.Case(Cond.GEZ):
                m.d.comb += taken.eq(~c_src[31])
        m.d.comb += next_pc.eq(pc)
        with m.If(~running):
            m.d.comb += next_pc.eq(0)
        with m.Elif(fire):
            with m.If((op == Opcode.JUMP) | ((op == Opcode.CJUMP) & taken)):
                m.d.comb += next_pc.eq(c.crf_a.data)
            with m.Elif(op != Opcode.HALT):
                m.d.comb += next_pc.eq(pc + 1)
        m.d.sync += pc.eq(next_pc)
        with m.If(~running & self.start):
            m.d.sync += running.eq(1)
        with m.If(fire & (op == Opcode.HALT)):
            m.d.sync += running.eq(0)

    def _dispatch(self, m: Module, c: SimpleNamespace) -> None:
        """The SIMB broadcast to the masked PEs, the vault units' inputs and ports, and
        the queue's slot bookkeeping (taken at issue, freed by the PEs' and the units'
        completions)."""
        P, U, q, units, fire, slot = self.pes, self.pes, c.q, c.units, c.fire, c.q.slot
        for p in range(P):
            port = self.pe[p]
            m.d.comb += [port.valid.eq(fire & c.is_pe_op & c.mask[p]),
                         port.instr.eq(c.imem.r_data), port.tag.eq(slot)]
        m.d.comb += [units.go.eq(fire), units.instr.eq(c.ins), units.tag.eq(slot),
                     units.crf_a.eq(c.crf_a.data), units.crf_b.eq(c.crf_b.data),
                     c.crf_w.en.eq(units.crf_we), c.crf_w.addr.eq(units.crf_addr),
                     c.crf_w.data.eq(units.crf_data)]
        wiring.connect(m, wiring.flipped(self.vsm), units.vsm)
        wiring.connect(m, wiring.flipped(self.nic_req), units.nic_req)
        # U is the vault-unit bit of a slot's outstanding bits.
        m.d.comb += [q.take.eq(fire & c.needs_slot),
                     q.take_pending.eq(Mux(c.is_pe_op, c.mask, 1 << U))]
        for p in range(P):
            m.d.comb += [q.pe_done[p].valid.eq(self.pe[p].done),
                         q.pe_done[p].tag.eq(self.pe[p].done_tag)]
        wiring.connect(m, units.seti_done, q.unit_done[0])
        wiring.connect(m, units.alu_done, q.unit_done[1])
        m.d.comb += [q.unit_done[2].valid.eq(self.landed.valid),
                     q.unit_done[2].tag.eq(self.landed.tag)]

    def _counters(self, m: Module, c: SimpleNamespace) -> None:
        """The performance counters (``COUNTER_NAMES``): cleared at start, each cycle's
        stall charged to one cause."""
        P, running, fire, op = self.pes, c.running, c.fire, c.op
        ctr = self.perf
        incs = {n: Const(0) for n in COUNTER_NAMES}
        incs["cycles"] = running
        incs["issued"] = fire
        waiting = c.ivalid & ~fire
        sync_like = (op == Opcode.SYNC) | (op == Opcode.HALT)
        incs["stall_sync"] = waiting & sync_like
        incs["stall_dep"] = waiting & ~sync_like & c.dep
        incs["stall_full"] = waiting & ~sync_like & ~c.dep & c.full
        incs["stall_unit"] = waiting & ~sync_like & ~c.dep & ~c.full
        for cls, ops in OPCODE_CLASSES.items():
            incs[f"issued_{cls}"] = fire & Cat(*(op == o for o in ops)).any()
        for u in BUSY_UNITS:
            bits = Cat(*(self.pe_busy[p][u] for p in range(P)))
            cnt = Signal(range(P + 1), name=f"busy_{u}_now")
            m.d.comb += cnt.eq(sum(bits[p] for p in range(P)))
            incs[f"busy_{u}"] = Mux(running, cnt, 0)
        for n in COUNTER_NAMES:
            with m.If(~running & self.start):
                m.d.sync += getattr(ctr, n).eq(0)
            with m.Else():
                m.d.sync += getattr(ctr, n).eq(getattr(ctr, n) + incs[n])


def from_config(cfg) -> ControlCore:
    """The control core of one vault of ``cfg.ipim``."""
    c = cfg.ipim
    return ControlCore(pes=c.pes, inst_queue=c.inst_queue, imem_depth=c.imem_instructions,
                       crf_entries=c.crf_entries, vsm_lines=c.vsm_lines, t_alu=c.t_alu,
                       t_vsm=c.t_vsm)
