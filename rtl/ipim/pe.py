"""The near-bank PE of iPIM (Fig. 2c): DataRF, AddrRF, SIMD unit, integer ALU and the
bank's in-DRAM memory controller, executing the SIMB instructions of :data:`.isa.PE_OPS`."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.port import PE as CLS_PE
from ..mem.port import Cmd, CmdSignature, DRAMArraySignature
from ..mem.timing import Timing, resolve_timing
from ..mem.vault_ctrl import VaultController
from ..params import check, check_choice, check_int, check_pow2
from .bus import BUSY_LAYOUT, VECTOR_BITS, IssueSignature, RemoteBankSignature, SPMPortSignature
from .int_alu import IntALU
from .isa import DRAM_BITS, INSTRUCTION, LANES, REG_BITS, RESERVED_ARF, SPM_BITS, Opcode
from .simd import SIMDUnit

__all__ = ["SIMBPE", "from_config"]

# Kinds of a bank request slot (_REMOTE: a read for the ``remote`` port, not an instruction).
_LD_RF, _ST_RF, _LD_PGSM, _ST_PGSM, _REMOTE = range(5)
# Kinds of a fixed-latency completion.
_W_SIMD, _W_DRF, _W_ARF, _W_NONE = range(4)
# Scratchpad engine states and jobs.
_IDLE, _REQ, _WAIT, _FIN, _BREQ = range(5)
_J_RD, _J_WR, _J_STP, _J_LDP = range(4)   # rd/wr_{pgsm,vsm}; st_pgsm; ld_pgsm (bank data in)


class SIMBPE(wiring.Component):
    """One near-bank PE: executes every opcode of :data:`~pimforge.rtl.ipim.isa.PE_OPS`.

    Pipeline. An instruction taken on ``issue`` is held in one decode register
    and dispatched from there, reading the DataRF/AddrRF operands in the
    dispatch cycle, to one of three paths, which run concurrently:

    * fixed latency -- ``comp`` on the :class:`~pimforge.rtl.ipim.simd.SIMDUnit`
      (``t_add``/``t_mul``/``t_mac``/``t_logic``), ``calc_arf`` on the
      :class:`~pimforge.rtl.ipim.int_alu.IntALU` (``t_alu``), ``mov_arf``
      (``t_arf``), ``mov_drf`` and ``reset`` (``t_drf``);
    * the bank -- ``ld_rf``, ``st_rf``, ``ld_pgsm`` (and the bank write of
      ``st_pgsm``) as requests to a one-bank
      :class:`~pimforge.rtl.mem.vault_ctrl.VaultController` (request queue,
      FR-FCFS or FCFS, open or close page, refresh), up to ``dram_queue``
      outstanding, served out of order where the scheduler finds row hits;
    * the scratchpad engine -- ``rd/wr_pgsm``, ``rd/wr_vsm``, the PGSM read of
      ``st_pgsm`` and the PGSM write of ``ld_pgsm``, one access at a time.

    Remote reads. A read of the bank taken on ``remote`` (another vault's
    ``req``, Sec. IV-D: "the remote vault adds this request to the DRAM request
    queue of the corresponding PE") waits in a one-entry register, then goes
    into the same controller queue as the PE's own requests, in a bank slot of
    its own, and is scheduled with them. Its response leaves on
    ``remote.resp``, never through the completion port, and frees the slot
    when it is taken. It is no instruction of the PE: no ``done``, no register
    write.

    Structural hazards. Every finishing instruction uses the one completion
    port (``done``, the DataRF write port and the AddrRF write port together)
    for one cycle. Fixed-latency instructions reserve their completion cycle at
    dispatch in a reservation line; an instruction whose cycle is taken, whose
    path is busy (scratchpad engine not idle, controller queue full, no free
    bank slot) waits in the decode register, and ``ready`` is low while it
    waits (``ready`` = decode register empty, or it dispatches this cycle:
    registered state only). Completions without a fixed latency take the port
    in the cycles left free, the scratchpad engine before bank responses; a
    bank response waits in the controller's response FIFO.

    The controller's one request port takes, in this order: the bank write of
    an ``st_pgsm`` whose PGSM read is done (it already holds its slot), the
    pending remote read, then the bank instruction in the decode register. A
    remote read therefore also takes the free slot ahead of an ``st_pgsm``
    dispatching in the same cycle. Remote reads are never starved by a busy
    PE; a stream of them can hold the PE's bank instructions back, bounded by
    the remote initiator's outstanding requests (its tags). The choice depends
    on registered state only, and so does ``remote.req.ready`` (the register is
    empty or goes into the queue this cycle): ``remote.req.valid`` reaches
    neither ``issue.ready`` nor ``remote.req.ready``. A remote response that is
    not taken (``remote.resp.ready`` low) holds the head of the response FIFO
    and, behind it, the PE's own bank responses.

    Ordering. RAW/WAR/WAW hazards are the control core's (it never issues an
    instruction conflicting, by :func:`~pimforge.rtl.ipim.isa.accesses`, with an
    unfinished one), so operands are read at dispatch and results written at
    completion, when ``done`` pulses: a write to the bank is done when the
    controller acknowledges its WR, a scratchpad write when the scratchpad
    takes it (its storage is written then).

    Addresses and register numbers wider than this PE's storage wrap (the low
    bits are used); indirect addresses take the low bits of the AddrRF entry.
    A0..A3 read the ``pe_id``, ``pg_id``, ``vault_id``, ``chip_id`` inputs and
    ignore writes.

    Simplifications. The scratchpad engine serves one access at a time (an
    ``rd_pgsm`` occupies it for the request, the read latency and the
    completion). Each PE refreshes its bank on its own tREFI counter.

    Power limits. The bank's controller enforces the bank's own timing; the
    limits between the banks of one DRAM die (tRRDS, tRRDL, tFAW across the
    PEs of a PG) are the PG's :class:`~pimforge.rtl.ipim.act_window.ActWindow`,
    which the vault joins to ``act_want``/``act_ok``: the controller raises
    ``act_want`` when its pick is an ACT and issues it only in a cycle when
    ``act_ok`` is high, and nothing else meanwhile (with one bank, nothing else
    is legal while an ACT is the pick). A PE on its own needs ``act_ok`` held
    high.

    Placement. A near-bank PE (the default) reaches its bank directly. With
    ``tsv_gate`` the PE and its controller sit on the base die (Fig. 8's
    process-on-base-die machine): each RD/WR moves its vector over the vault's
    shared TSVs, granted by the vault's
    :class:`~pimforge.rtl.ipim.tsv.TSVArbiter` through ``col_want``/``col_ok``,
    and every bank response comes ``bank_path_latency`` cycles later (the
    command down the TSVs, the data or acknowledgement back up).

    Parameters
    ----------
    tag_bits : int
        Issued-instruction queue slot width of ``issue``.
    drf_entries, arf_entries : int
        DataRF (128-bit) and AddrRF (32-bit) entries.
    pgsm_lines, vsm_lines : int
        Scratchpad lines (the port address widths).
    pgsm_latency, vsm_latency : int
        Read latencies of the scratchpad ports.
    t_add, t_mul, t_mac, t_logic : int
        SIMD latencies.
    t_alu, t_arf, t_drf : int
        ``calc_arf``; ``mov_arf``; ``mov_drf`` and ``reset``.
    timing : Timing
        The bank's DRAM timing in cycles.
    bank_vectors, row_vectors : int
        Bank and row size in 128-bit vectors.
    dram_queue : int
        Request-queue entries of the bank's controller (and outstanding bank requests,
        the PE's own and remote reads together).
    scheduler, page_policy : str
        As :class:`~pimforge.rtl.mem.vault_ctrl.VaultController`.
    remote_tag_bits : int
        Tag width of the ``remote`` port.
    tsv_gate : bool
        The bank's column commands wait for ``col_ok`` (see Placement).
    bank_path_latency : int
        Cycles added to every bank response (see Placement).

    Attributes
    ----------
    issue : In(IssueSignature)
    pgsm : Out(SPMPortSignature)
        Into the PG's PGSM.
    vsm : Out(SPMPortSignature)
        Towards the vault's VSM.
    arr : Out(DRAMArraySignature)
        The bank's array (``addr`` = column, row, then one bank bit that is 0).
    cmd : Out(CmdSignature)
        DRAM command issued this cycle (observation: protocol checks, ACT windows).
    act_want : Out(1)
        The bank's controller would issue an ACT this cycle (its own constraints
        met); never depends on ``act_ok``.
    act_ok : In(1)
        That ACT may issue this cycle (the PG's ACT window grants it).
    col_want, col_ok : Out(1), In(1)
        With ``tsv_gate``: the bank's controller would issue a RD or WR this
        cycle; the vault's TSVs carry its data this cycle.
    pe_id, pg_id, vault_id, chip_id : In
        The ids of A0..A3 (6, 4, 6, 4 bits).
    perf : Out(SIMBPE.PerfSignature)
        Performance counters.
    units : Out(BUSY_LAYOUT)
        The units busy this cycle (SIMD, int ALU, AddrRF, DataRF, a PGSM or VSM
        request, the bank's controller), for the control core's counters.
    remote : In(RemoteBankSignature)
        Reads of the bank for the vault's remote request server
        (``dram_bits`` = :data:`~pimforge.rtl.ipim.isa.DRAM_BITS`,
        ``tag_bits`` = ``remote_tag_bits``).
    busy : Out(1)
        An instruction is held or in flight, or a remote read is not yet answered.
    latencies : dict
        Issue-to-done cycles of the fixed-latency opcodes (idle PE).
    """

    class PerfSignature(wiring.Signature):
        """The PE's performance counters (32 bits, wrapping), driven by the PE.

        Members
        -------
        simd : Out(32)
            Cycles with a ``comp`` in flight in the SIMD unit.
        alu : Out(32)
            Cycles with a ``calc_arf`` in flight in the integer ALU.
        drf : Out(32)
            Cycles in which the DataRF is read or written.
        arf : Out(32)
            Cycles in which the AddrRF is read or written.
        rdwr, act, pre, ref : Out(32)
            DRAM RD+WR, ACT, PRE and REF commands of the bank.
        remote : Out(32)
            Remote reads served (responses taken on ``remote.resp``).
        """

        NAMES = ("simd", "alu", "drf", "arf", "rdwr", "act", "pre", "ref", "remote")

        def __init__(self):
            super().__init__({n: Out(32) for n in self.NAMES})

        def __eq__(self, other):
            return type(other) is type(self)

        def __hash__(self):
            return hash(type(self))

        def __repr__(self):
            return "SIMBPE.PerfSignature()"

    def __init__(self, *, tag_bits: int, timing: Timing, drf_entries: int = 64,
                 arf_entries: int = 64, pgsm_lines: int = 64, vsm_lines: int = 256,
                 pgsm_latency: int = 1, vsm_latency: int = 1, t_add: int = 4, t_mul: int = 5,
                 t_mac: int = 8, t_logic: int = 1, t_alu: int = 1, t_arf: int = 1,
                 t_drf: int = 1, bank_vectors: int = 4096, row_vectors: int = 64,
                 dram_queue: int = 16, scheduler: str = "frfcfs", page_policy: str = "open",
                 remote_tag_bits: int = 2, tsv_gate: bool = False,
                 bank_path_latency: int = 0):
        if not isinstance(timing, Timing):
            raise TypeError(f"timing must be a Timing, not {timing!r}")
        check_pow2("drf_entries", drf_entries, 4, 1 << REG_BITS)
        check_pow2("arf_entries", arf_entries, 8, 1 << REG_BITS)
        check_pow2("pgsm_lines", pgsm_lines, 2, 1 << SPM_BITS)
        check_pow2("vsm_lines", vsm_lines, 2, 1 << SPM_BITS)
        check_pow2("row_vectors", row_vectors, 2, 4096)
        check_pow2("bank_vectors", bank_vectors, 2 * row_vectors, 1 << 24)
        check_int("dram_queue", dram_queue, 2, 64)
        for n, v in (("t_alu", t_alu), ("t_arf", t_arf), ("t_drf", t_drf)):
            check_int(n, v, 1, 64)
        check_choice("scheduler", scheduler, ("fcfs", "frfcfs"))
        check_choice("page_policy", page_policy, ("open", "close"))
        check(t_mac >= 2, "t_mac", t_mac, "at least 2")
        check_int("remote_tag_bits", remote_tag_bits, 1, 8)
        check_int("bank_path_latency", bank_path_latency, 0, 64)
        self.tsv_gate = bool(tsv_gate)
        self.tag_bits = tag_bits
        self.remote_tag_bits = remote_tag_bits
        self.timing = timing
        self.drf_entries, self.arf_entries = drf_entries, arf_entries
        self.t_alu, self.t_arf, self.t_drf = t_alu, t_arf, t_drf
        self.dram_queue = dram_queue
        # The parts are built in elaborate (a PE that is never elaborated leaves no
        # unused parts behind); their parameters are checked here.
        self._simd_kw = {"t_add": t_add, "t_mul": t_mul, "t_mac": t_mac, "t_logic": t_logic}
        simd_lat = SIMDUnit.latencies_of(**self._simd_kw)
        self._ctrl_kw = {
            "timing": timing, "banks": 1, "rows": bank_vectors // row_vectors,
            "columns": row_vectors, "queue_depth": dram_queue,
            "tag_bits": max(1, ceil_log2(dram_queue)), "scheduler": scheduler,
            "page_policy": page_policy, "block_bytes": VECTOR_BITS // 8, "act_gate": True,
            "col_gate": self.tsv_gate, "path_latency": bank_path_latency}
        self.rows, self.columns = bank_vectors // row_vectors, row_vectors
        row_bits, col_bits = ceil_log2(self.rows), ceil_log2(self.columns)
        self.pgsm_bits = max(1, ceil_log2(pgsm_lines))
        self.vsm_bits = max(1, ceil_log2(vsm_lines))
        self.max_latency = max(*simd_lat.values(), t_alu, t_arf, t_drf)
        # Issue to done on an idle PE: one cycle in the decode register, then the unit.
        lat = {f"comp_{k}": v + 1 for k, v in simd_lat.items()}
        lat.update(calc_arf=t_alu + 1, mov_arf=t_arf + 1, mov_drf=t_drf + 1, reset=t_drf + 1)
        self.latencies = lat
        gate = {"col_want": Out(1), "col_ok": In(1)} if self.tsv_gate else {}
        super().__init__({
            **gate,
            "issue": In(IssueSignature(tag_bits=tag_bits)),
            "pgsm": Out(SPMPortSignature(addr_bits=self.pgsm_bits, latency=pgsm_latency)),
            "vsm": Out(SPMPortSignature(addr_bits=self.vsm_bits, latency=vsm_latency)),
            "arr": Out(DRAMArraySignature(addr_bits=1 + row_bits + col_bits,
                                          data_bits=VECTOR_BITS)),
            "cmd": Out(CmdSignature(bank_bits=1, row_bits=row_bits, col_bits=col_bits)),
            "act_want": Out(1), "act_ok": In(1),
            "pe_id": In(6), "pg_id": In(4), "vault_id": In(6), "chip_id": In(4),
            "perf": Out(self.PerfSignature()),
            "units": Out(BUSY_LAYOUT),
            "remote": In(RemoteBankSignature(dram_bits=DRAM_BITS, tag_bits=remote_tag_bits)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        simd = m.submodules.simd = SIMDUnit(**self._simd_kw)
        ctrl = m.submodules.ctrl = VaultController(**self._ctrl_kw)
        wiring.connect(m, wiring.flipped(self.arr), ctrl.arr)
        wiring.connect(m, wiring.flipped(self.cmd), ctrl.cmd)
        m.d.comb += [self.act_want.eq(ctrl.act_want), ctrl.act_ok.eq(self.act_ok)]
        if self.tsv_gate:
            m.d.comb += [self.col_want.eq(ctrl.col_want), ctrl.col_ok.eq(self.col_ok)]
        iss = self.issue
        V = VECTOR_BITS
        ND, NA = self.drf_entries, self.arf_entries
        dbits, abits = ceil_log2(ND), ceil_log2(NA)

        # ---- storage ---------------------------------------------------------------
        drf = Array(Signal(V, name=f"drf{i}") for i in range(ND))
        arf_regs = [Signal(32, name=f"arf{i}") for i in range(RESERVED_ARF, NA)]
        ids = [self.pe_id, self.pg_id, self.vault_id, self.chip_id]
        arf = Array([*(Signal(32, name=f"arf_id{i}") for i in range(RESERVED_ARF)),
                     *arf_regs])
        for i, v in enumerate(ids):
            m.d.comb += arf[i].eq(v)

        # ---- decode register -------------------------------------------------------
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
        f_dram = Signal(24)
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
        d_src1, d_src2 = drf[comp.src1[:dbits]], drf[comp.src2[:dbits]]
        d_dst = drf[comp.dst[:dbits]]
        d_op = drf[f_drf[:dbits]]
        a_src1, a_src2 = arf[calc.src1[:abits]], arf[calc.src2[:abits]]
        a_mov = arf[mov.arf[:abits]]
        a_dram = arf[f_dram[:abits]]
        a_spm = arf[f_spm[:abits]]
        dram_addr = Signal(24)
        spm_addr = Signal(SPM_BITS)
        m.d.comb += [dram_addr.eq(Mux(f_dram_ind, a_dram, f_dram)),
                     spm_addr.eq(Mux(f_spm_ind, a_spm, f_spm))]
        lanes = Array(d_op[32 * i:32 * i + 32] for i in range(LANES))
        mov_lane = Signal(32)
        m.d.comb += mov_lane.eq(lanes[mov.lane])

        # ---- fixed-latency paths and their completion reservation line -------------
        L = self.max_latency
        entry = data.StructLayout({"valid": 1, "kind": 2, "tag": self.tag_bits,
                                   "idx": REG_BITS, "mask": LANES, "data": V})
        line = [Signal(entry, name=f"resv{k}") for k in range(L)]
        bank_op = is_[Opcode.LD_RF] | is_[Opcode.ST_RF] | is_[Opcode.LD_PGSM]
        spm_op = is_[Opcode.RD_PGSM] | is_[Opcode.WR_PGSM] | is_[Opcode.RD_VSM] | \
            is_[Opcode.WR_VSM] | is_[Opcode.ST_PGSM]
        # Everything else finishes at a fixed latency (an opcode outside PE_OPS, which
        # the core never sends, finishes after one cycle doing nothing).
        fixed = cur_v & ~bank_op & ~spm_op
        lat = Signal(range(L + 1))
        new = Signal(entry)
        alu = m.submodules.alu = IntALU()
        m.d.comb += [alu.op.eq(calc.op), alu.a.eq(a_src1), alu.b.eq(a_src2), alu.c.eq(0)]
        srcs_a = Array(d_src1[32 * i:32 * i + 32] for i in range(LANES))
        bcast = Signal(32)
        m.d.comb += bcast.eq(srcs_a[comp.lane])
        m.d.comb += [simd.op.eq(comp.op), simd.dtype.eq(comp.dtype),
                     simd.a.eq(Mux(comp.mode, Cat(bcast, bcast, bcast, bcast), d_src1)),
                     simd.b.eq(d_src2), simd.d.eq(d_dst)]
        # (valid from a signal: a constant bit assigned alone becomes an ``always @*`` with
        # nothing to wait on, which Verilator never runs.)
        m.d.comb += [new.valid.eq(cur_v), new.tag.eq(cur_tag)]
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
                             new.data.eq(Cat(a_mov, a_mov, a_mov, a_mov))]
            with m.Case(Opcode.RESET):
                m.d.comb += [lat.eq(self.t_drf), new.kind.eq(_W_DRF), new.idx.eq(f_drf),
                             new.mask.eq(0b1111), new.data.eq(0)]
            with m.Default():
                m.d.comb += [lat.eq(1), new.kind.eq(_W_NONE)]
        taken = Array([*(s.valid for s in line), Const(0, 1)])
        fixed_go = Signal()
        m.d.comb += fixed_go.eq(fixed & ~taken[lat])
        m.d.comb += simd.in_valid.eq(fixed_go & is_[Opcode.COMP])
        for k in range(L):
            nxt = line[k + 1] if k + 1 < L else Const(0, entry.size)
            with m.If(fixed_go & (lat == k + 1)):
                m.d.sync += line[k].eq(new)
            with m.Else():
                m.d.sync += line[k].eq(nxt)
        head = line[0]

        # ---- bank path -------------------------------------------------------------
        NS = self.dram_queue
        sbits = max(1, ceil_log2(NS))
        # ``tag``: the issue tag of an instruction's slot, the remote tag of a remote read.
        slot_l = data.StructLayout({"kind": 3, "tag": max(self.tag_bits, self.remote_tag_bits),
                                    "idx": REG_BITS, "spm": SPM_BITS})
        slots = Array(Signal(slot_l, name=f"bslot{i}") for i in range(NS))
        used = Signal(NS)
        free_idx = Signal(sbits)
        any_free = Signal()
        for i in reversed(range(NS)):
            with m.If(~used[i]):
                m.d.comb += [free_idx.eq(i), any_free.eq(1)]
        req, resp = ctrl.bus.req, ctrl.bus.resp
        col_bits = ceil_log2(ctrl.columns)
        row_bits = ceil_log2(ctrl.rows)

        # Scratchpad engine registers (declared here: its bank write has priority).
        e_state = Signal(range(5))
        e_vsm = Signal()
        e_we = Signal()
        e_addr = Signal(SPM_BITS)
        e_data = Signal(V)
        e_job = Signal(2)
        e_tag = Signal(self.tag_bits)
        e_idx = Signal(REG_BITS)
        e_dram = Signal(24)
        e_breq = e_state == _BREQ

        e_slot = Signal(sbits)
        # A remote read waits in a one-entry register before the queue: were the port's
        # valid to take part in this cycle's choice, it would reach ``issue.ready``
        # (through the dispatch of the PE's own bank instruction) combinationally.
        rmt = self.remote
        p_v = Signal()
        p_dram = Signal(DRAM_BITS)
        p_tag = Signal(self.remote_tag_bits)
        r_take = Signal()          # the pending remote read goes into the queue
        m.d.comb += [r_take.eq(p_v & ~e_breq & any_free & req.ready),
                     rmt.req.ready.eq(~p_v | r_take)]
        with m.If(rmt.req.valid & rmt.req.ready):
            m.d.sync += [p_v.eq(1), p_dram.eq(rmt.req.payload.dram),
                         p_tag.eq(rmt.req.payload.tag)]
        with m.Elif(r_take):
            m.d.sync += p_v.eq(0)
        b_we = Signal()
        b_addr = Signal(24)
        b_data = Signal(V)
        b_slot = Signal(slot_l)
        with m.If(e_breq):
            m.d.comb += [b_we.eq(1), b_addr.eq(e_dram), b_data.eq(e_data),
                         b_slot.kind.eq(_ST_PGSM), b_slot.tag.eq(e_tag)]
            m.d.comb += req.payload.tag.eq(e_slot)
        # On r_take only: the slot written at dispatch of an st_pgsm in a cycle when the
        # queue refuses the remote read must be the st_pgsm's.
        with m.Elif(r_take):
            m.d.comb += [b_addr.eq(p_dram), b_slot.kind.eq(_REMOTE), b_slot.tag.eq(p_tag)]
            m.d.comb += req.payload.tag.eq(free_idx)
        with m.Else():
            m.d.comb += [b_we.eq(is_[Opcode.ST_RF]), b_addr.eq(dram_addr), b_data.eq(d_op),
                         b_slot.tag.eq(cur_tag), b_slot.idx.eq(f_drf), b_slot.spm.eq(spm_addr),
                         b_slot.kind.eq(Mux(is_[Opcode.ST_RF], _ST_RF,
                                            Mux(is_[Opcode.LD_PGSM], _LD_PGSM,
                                                Mux(is_[Opcode.ST_PGSM], _ST_PGSM, _LD_RF))))]
            m.d.comb += req.payload.tag.eq(free_idx)
        m.d.comb += [
            req.valid.eq(e_breq | ((p_v | bank_op) & any_free)),
            req.payload.we.eq(b_we), req.payload.cls.eq(CLS_PE), req.payload.bank.eq(0),
            req.payload.col.eq(b_addr[:col_bits]),
            req.payload.row.eq(b_addr[col_bits:col_bits + row_bits]),
            req.payload.data.eq(b_data),
        ]
        b_take = req.valid & req.ready
        bank_go = Signal()
        m.d.comb += bank_go.eq(b_take & ~e_breq & ~r_take)
        set_used = Signal(NS)
        clr_used = Signal(NS)
        # A slot is taken by a bank request, or by st_pgsm at dispatch: its bank write
        # comes after the PGSM read, and a slot held from the start means that it
        # cannot wait behind ld_pgsm responses that wait for the engine. A remote read
        # takes its slot when the queue takes it.
        alloc = Signal()
        with m.If(alloc):
            m.d.sync += slots[free_idx].eq(b_slot)
            m.d.comb += set_used.eq(1 << free_idx)

        r_slot = slots[resp.payload.tag]
        r_ldp = resp.valid & (r_slot.kind == _LD_PGSM)
        r_rmt = resp.valid & (r_slot.kind == _REMOTE)
        m.d.comb += [rmt.resp.valid.eq(r_rmt), rmt.resp.payload.tag.eq(r_slot.tag),
                     rmt.resp.payload.data.eq(resp.payload.data)]

        # ---- scratchpad engine -----------------------------------------------------
        e_idle = e_state == _IDLE
        spm_go = Signal()
        # st_pgsm takes the free slot at dispatch: not in a cycle a remote read takes it.
        m.d.comb += spm_go.eq(spm_op & e_idle & ~r_ldp &
                              (~is_[Opcode.ST_PGSM] | (any_free & ~r_take)))
        m.d.comb += alloc.eq(bank_go | r_take | (spm_go & is_[Opcode.ST_PGSM]))
        take_ldp = Signal()
        m.d.comb += take_ldp.eq(r_ldp & e_idle)
        with m.If(take_ldp):
            m.d.sync += [e_state.eq(_REQ), e_vsm.eq(0), e_we.eq(1), e_addr.eq(r_slot.spm),
                         e_data.eq(resp.payload.data), e_job.eq(_J_LDP), e_tag.eq(r_slot.tag)]
        with m.Elif(spm_go):
            wr = is_[Opcode.WR_PGSM] | is_[Opcode.WR_VSM]
            m.d.sync += [e_state.eq(_REQ),
                         e_vsm.eq(is_[Opcode.RD_VSM] | is_[Opcode.WR_VSM]),
                         e_we.eq(wr), e_addr.eq(spm_addr), e_data.eq(d_op), e_tag.eq(cur_tag),
                         e_idx.eq(f_drf), e_dram.eq(dram_addr), e_slot.eq(free_idx),
                         e_job.eq(Mux(wr, _J_WR, Mux(is_[Opcode.ST_PGSM], _J_STP, _J_RD)))]
        for port, sel in ((self.pgsm, ~e_vsm), (self.vsm, e_vsm)):
            m.d.comb += [port.valid.eq((e_state == _REQ) & sel), port.we.eq(e_we),
                         port.addr.eq(e_addr), port.wdata.eq(e_data), port.wmask.eq(0b1111)]
        p_ready = Mux(e_vsm, self.vsm.ready, self.pgsm.ready)
        p_rvalid = Mux(e_vsm, self.vsm.rvalid, self.pgsm.rvalid)
        p_rdata = Mux(e_vsm, self.vsm.rdata, self.pgsm.rdata)
        with m.If((e_state == _REQ) & p_ready):
            m.d.sync += e_state.eq(Mux(e_we, _FIN, _WAIT))
        with m.If((e_state == _WAIT) & p_rvalid):
            m.d.sync += [e_data.eq(p_rdata), e_state.eq(Mux(e_job == _J_STP, _BREQ, _FIN))]
        with m.If(e_breq & b_take):
            m.d.sync += e_state.eq(_IDLE)

        # ---- completion port: reserved line head, then the engine, then the bank ----
        e_fin = (e_state == _FIN) & ~head.valid
        with m.If(e_fin):
            m.d.sync += e_state.eq(_IDLE)
        r_done = Signal()
        m.d.comb += r_done.eq(resp.valid & ~r_ldp & ~r_rmt & ~head.valid & ~(e_state == _FIN))
        r_served = Signal()
        m.d.comb += r_served.eq(r_rmt & rmt.resp.ready)
        m.d.comb += resp.ready.eq(take_ldp | r_done | r_served)
        with m.If(resp.valid & resp.ready):
            m.d.comb += clr_used.eq(1 << resp.payload.tag)
        m.d.sync += used.eq((used | set_used) & ~clr_used)

        w_en = Signal()
        w_idx = Signal(REG_BITS)
        w_mask = Signal(LANES)
        w_data = Signal(V)
        wa_en = Signal()
        with m.If(head.valid):
            m.d.comb += [iss.done.eq(1), iss.done_tag.eq(head.tag),
                         w_en.eq(head.kind != _W_ARF), wa_en.eq(head.kind == _W_ARF),
                         w_idx.eq(head.idx), w_mask.eq(head.mask),
                         w_data.eq(Mux(head.kind == _W_SIMD, simd.result, head.data))]
        with m.Elif(e_fin):
            m.d.comb += [iss.done.eq(1), iss.done_tag.eq(e_tag),
                         w_en.eq(e_job == _J_RD), w_idx.eq(e_idx), w_mask.eq(0b1111),
                         w_data.eq(e_data)]
        with m.Elif(r_done):
            m.d.comb += [iss.done.eq(1), iss.done_tag.eq(r_slot.tag),
                         w_en.eq(r_slot.kind == _LD_RF), w_idx.eq(r_slot.idx),
                         w_mask.eq(0b1111), w_data.eq(resp.payload.data)]
        for i in range(ND):
            with m.If(w_en & (w_idx[:dbits] == i)):
                for ln in range(LANES):
                    with m.If(w_mask[ln]):
                        m.d.sync += drf[i][32 * ln:32 * ln + 32].eq(w_data[32 * ln:32 * ln + 32])
        for i, r in enumerate(arf_regs, RESERVED_ARF):
            with m.If(wa_en & (w_idx[:abits] == i)):
                m.d.sync += r.eq(w_data[:32])

        # ---- dispatch --------------------------------------------------------------
        m.d.comb += dispatch.eq(cur_v & (fixed_go | bank_go | spm_go))

        # ---- observation -------------------------------------------------------------
        alu_line = Signal(L)
        for k in range(L):
            nxt = alu_line[k + 1] if k + 1 < L else 0
            m.d.sync += alu_line[k].eq(Mux(fixed_go & is_[Opcode.CALC_ARF] & (lat == k + 1),
                                           1, nxt))
        reads_drf = is_[Opcode.COMP] | is_[Opcode.ST_RF] | is_[Opcode.WR_PGSM] | \
            is_[Opcode.WR_VSM] | is_[Opcode.MOV_ARF]
        reads_arf = is_[Opcode.CALC_ARF] | is_[Opcode.MOV_DRF] | \
            (f_dram_ind & (is_[Opcode.LD_RF] | is_[Opcode.ST_RF] | is_[Opcode.LD_PGSM] |
                           is_[Opcode.ST_PGSM])) | (f_spm_ind & (spm_op | is_[Opcode.LD_PGSM]))
        cmd = ctrl.cmd
        events = {
            "simd": simd.busy, "alu": alu_line.any(),
            "drf": (dispatch & reads_drf) | w_en, "arf": (dispatch & reads_arf) | wa_en,
            "rdwr": cmd.valid & ((cmd.kind == Cmd.RD) | (cmd.kind == Cmd.WR)),
            "act": cmd.valid & (cmd.kind == Cmd.ACT), "pre": cmd.valid & (cmd.kind == Cmd.PRE),
            "ref": cmd.valid & (cmd.kind == Cmd.REF),
            "remote": r_served,
        }
        for n, ev in events.items():
            c = getattr(self.perf, n)
            with m.If(ev):
                m.d.sync += c.eq(c + 1)
        m.d.comb += self.busy.eq(cur_v | Cat(s.valid for s in line).any() | ~e_idle |
                                 p_v | used.any() | ctrl.busy)
        # The units busy this cycle, summed over the vault by the control core.
        m.d.comb += [self.units.simd.eq(events["simd"]), self.units.alu.eq(events["alu"]),
                     self.units.arf.eq(events["arf"]), self.units.drf.eq(events["drf"]),
                     self.units.pgsm.eq(self.pgsm.valid), self.units.vsm.eq(self.vsm.valid),
                     self.units.bank.eq(ctrl.busy)]
        return m


def from_config(cfg, **overrides) -> SIMBPE:
    """The PE of ``cfg.ipim`` (issue tags sized for ``inst_queue``); on the base die
    (``ipim.pe_placement``) its bank accesses cross the TSVs (``ipim.t_tsv`` each way)."""
    c = cfg.ipim
    kw = {"tag_bits": max(1, ceil_log2(c.inst_queue)),
          "timing": resolve_timing(c.timing, c.tck_ns),
          "drf_entries": c.drf_entries, "arf_entries": c.arf_entries,
          "pgsm_lines": c.pgsm_lines, "vsm_lines": c.vsm_lines,
          "pgsm_latency": c.t_pgsm, "vsm_latency": c.t_vsm,
          "t_add": c.t_add, "t_mul": c.t_mul, "t_mac": c.t_mac, "t_logic": c.t_logic,
          "t_alu": c.t_alu, "t_arf": c.t_arf, "t_drf": c.t_drf,
          "bank_vectors": c.bank_vectors, "row_vectors": c.row_vectors,
          "dram_queue": max(2, c.dram_queue), "scheduler": c.scheduler,
          "page_policy": c.page_policy, "remote_tag_bits": c.remote_slot_bits,
          "tsv_gate": c.base_die, "bank_path_latency": 2 * c.t_tsv if c.base_die else 0}
    kw.update(overrides)
    return SIMBPE(**kw)
