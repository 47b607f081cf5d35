"""The near-bank PE of iPIM (Fig. 2c): DataRF, AddrRF, SIMD unit, integer ALU and the
bank's in-DRAM memory controller, executing the SIMB instructions of :data:`.isa.PE_OPS`."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.port import Cmd, CmdSignature, DRAMArraySignature
from ..mem.timing import Timing, resolve_timing
from ..params import check, check_choice, check_int, check_pow2
from .bus import BUSY_LAYOUT, VECTOR_BITS, IssueSignature, RemoteBankSignature, SPMPortSignature
from .isa import DRAM_BITS, REG_BITS, SPM_BITS
from .pe_bank import PEBankPath
from .pe_completion import PECompletion
from .pe_dispatch import PEDispatch
from .pe_fixed import PEFixedPath
from .pe_spm_engine import PESpmEngine
from .simd import SIMDUnit

__all__ = ["SIMBPE", "from_config"]


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

    Parts. The decode register and the register files are
    :class:`~pimforge.rtl.ipim.pe_dispatch.PEDispatch`, the fixed-latency path
    :class:`~pimforge.rtl.ipim.pe_fixed.PEFixedPath`, the bank path
    :class:`~pimforge.rtl.ipim.pe_bank.PEBankPath`, the scratchpad engine
    :class:`~pimforge.rtl.ipim.pe_spm_engine.PESpmEngine` and the completion
    port :class:`~pimforge.rtl.ipim.pe_completion.PECompletion`, joined by
    streams; the PE adds its counters.

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
        self._fixed_kw = {"tag_bits": tag_bits, "t_add": t_add, "t_mul": t_mul, "t_mac": t_mac,
                          "t_logic": t_logic, "t_alu": t_alu, "t_arf": t_arf, "t_drf": t_drf}
        simd_lat = SIMDUnit.latencies_of(t_add=t_add, t_mul=t_mul, t_mac=t_mac,
                                         t_logic=t_logic)
        self._bank_kw = {
            "tag_bits": tag_bits, "remote_tag_bits": remote_tag_bits, "timing": timing,
            "rows": bank_vectors // row_vectors, "columns": row_vectors, "queue": dram_queue,
            "scheduler": scheduler, "page_policy": page_policy, "col_gate": self.tsv_gate,
            "path_latency": bank_path_latency}
        self.pgsm_latency, self.vsm_latency = pgsm_latency, vsm_latency
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
        dsp = m.submodules.dispatch = PEDispatch(tag_bits=self.tag_bits,
                                                 drf_entries=self.drf_entries,
                                                 arf_entries=self.arf_entries)
        fixed = m.submodules.fixed = PEFixedPath(**self._fixed_kw)
        bank = m.submodules.bank = PEBankPath(**self._bank_kw)
        engine = m.submodules.engine = PESpmEngine(
            tag_bits=self.tag_bits, slot_bits=max(1, ceil_log2(self.dram_queue)),
            pgsm_bits=self.pgsm_bits, vsm_bits=self.vsm_bits,
            pgsm_latency=self.pgsm_latency, vsm_latency=self.vsm_latency)
        cpl = m.submodules.completion = PECompletion(tag_bits=self.tag_bits)

        wiring.connect(m, wiring.flipped(self.issue), dsp.issue)
        m.d.comb += [dsp.pe_id.eq(self.pe_id), dsp.pg_id.eq(self.pg_id),
                     dsp.vault_id.eq(self.vault_id), dsp.chip_id.eq(self.chip_id)]
        wiring.connect(m, dsp.fixed, fixed.instr)
        wiring.connect(m, dsp.bank, bank.instr)
        wiring.connect(m, dsp.spm, engine.instr)
        wiring.connect(m, engine.reserve, bank.reserve)
        m.d.comb += engine.slot.eq(bank.slot)      # the slot that a reservation takes
        wiring.connect(m, engine.write, bank.write)
        wiring.connect(m, bank.ldp, engine.ldp)
        wiring.connect(m, fixed.done, cpl.fixed)
        wiring.connect(m, engine.done, cpl.engine)
        wiring.connect(m, bank.done, cpl.bank)
        wiring.connect(m, cpl.done, dsp.complete)
        wiring.connect(m, wiring.flipped(self.pgsm), engine.pgsm)
        wiring.connect(m, wiring.flipped(self.vsm), engine.vsm)
        wiring.connect(m, wiring.flipped(self.remote), bank.remote)
        wiring.connect(m, wiring.flipped(self.arr), bank.arr)
        wiring.connect(m, wiring.flipped(self.cmd), bank.cmd)
        m.d.comb += [self.act_want.eq(bank.act_want), bank.act_ok.eq(self.act_ok)]
        if self.tsv_gate:
            m.d.comb += [self.col_want.eq(bank.col_want), bank.col_ok.eq(self.col_ok)]

        cmd = self.cmd
        events = {
            "simd": fixed.simd_busy, "alu": fixed.alu_busy,
            "drf": dsp.drf_used, "arf": dsp.arf_used,
            "rdwr": cmd.valid & ((cmd.kind == Cmd.RD) | (cmd.kind == Cmd.WR)),
            "act": cmd.valid & (cmd.kind == Cmd.ACT), "pre": cmd.valid & (cmd.kind == Cmd.PRE),
            "ref": cmd.valid & (cmd.kind == Cmd.REF),
            "remote": self.remote.resp.valid & self.remote.resp.ready,
        }
        for n, ev in events.items():
            c = getattr(self.perf, n)
            with m.If(ev):
                m.d.sync += c.eq(c + 1)
        m.d.comb += self.busy.eq(dsp.busy | fixed.busy | engine.busy | bank.busy)
        # The units busy this cycle, summed over the vault by the control core.
        m.d.comb += [self.units.simd.eq(events["simd"]), self.units.alu.eq(events["alu"]),
                     self.units.arf.eq(events["arf"]), self.units.drf.eq(events["drf"]),
                     self.units.pgsm.eq(self.pgsm.valid), self.units.vsm.eq(self.vsm.valid),
                     self.units.bank.eq(bank.ctrl_busy)]
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
