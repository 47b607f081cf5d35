"""Command scheduler of a vault: FCFS/FR-FCFS pick, page policy, vault-wide timing."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_bool, check_choice, check_int, check_pow2
from .bank import BankMachine, TimingCounter
from .cmd_queue import CommandQueue
from .port import Cmd, CmdSignature
from .refresher import Refresher
from .timing import Timing

__all__ = ["Scheduler"]


class Scheduler(wiring.Component):
    """Picks the one DRAM command a vault issues each cycle (LiteDRAM's multiplexer).

    It sees every queued request and every bank machine's state, enforces the
    vault-wide constraints (tCCD/tBL column gap, WR->RD and RD->WR turnaround,
    tRRD, tFAW) and chooses, in priority order:

    * while a refresh is pending: PRE of an open bank whose tRAS/tRTP/tWR allow
      it, then REF once every bank is idle; no ACT or column command;
    * ``frfcfs``: the oldest row hit whose column command is legal, else the
      oldest ACT/PRE of a request that is the oldest of its bank; a PRE waits
      while younger hits to the open row are queued, unless the queue head has
      waited ``starvation_limit`` cycles (then it acts as FCFS);
    * ``fcfs``: only the oldest request of each bank may issue, oldest first;
    * ``close`` page policy: PRE of a bank whose open row no queued request wants.

    A column command also needs ``resp_space`` (a response slot is free) and
    takes its entry out of the queue.

    External ACT gate (``act_gate=True``). Banks of other controllers on the
    same DRAM die share its power limits (tRRD, tFAW across controllers), which
    a block outside the controller enforces. ``act_want`` is high in a cycle in
    which the pick above is an ACT, i.e. every constraint this scheduler knows
    (the bank's, its own tRRD/tFAW, no refresh pending) allows it and nothing of
    higher priority is legal; it depends on registered state and the queue,
    never on ``act_ok``. The ACT issues only when ``act_ok`` is high in the same
    cycle; otherwise nothing issues that cycle. Issuing nothing is what keeps
    the ordering rules: the ACT was the pick, so issuing a lower-priority
    command in its place (a younger request's column command under FCFS, a
    close-page PRE) could overtake it. With one bank nothing is lost: an ACT is
    picked only while the bank is closed and no refresh is pending, when no
    PRE, RD, WR or REF is legal anyway. Refresh is never held back by the gate
    (a pending refresh picks no ACT, so ``act_want`` is low).

    External column gate (``col_gate=True``). The banks' data reaches the
    controller over a path shared with other controllers (the vault's TSVs when
    the PEs sit on the base die), which a block outside grants. ``col_want`` is
    high in a cycle in which the pick above is a RD or WR; it depends on
    registered state and the queue, never on ``col_ok``. The column command
    issues only when ``col_ok`` is high in the same cycle; otherwise nothing
    issues, for the reason given for the ACT gate (a column command is picked
    only when it is legal, so with one bank no PRE, ACT or REF is lost; with
    several banks an ACT or PRE of another bank waits behind the refused column
    command).

    Parameters
    ----------
    timing : Timing
        DRAM timing in controller cycles.
    banks : int
        Bank machines driven.
    layout : data.StructLayout
        Request payload (``we``, ``cls``, ``bank``, ``row``, ``col``, ``tag``, ``data``).
    queue_depth : int
        Entries of the queue read.
    scheduler : str
        ``"fcfs"`` or ``"frfcfs"``.
    page_policy : str
        ``"open"`` or ``"close"``.
    starvation_limit : int
        Cycles the queue head may wait before FR-FCFS falls back to FCFS.
    act_gate : bool
        Add the ``act_want``/``act_ok`` ports (see above); off, every ACT the
        scheduler picks issues.
    col_gate : bool
        Add the ``col_want``/``col_ok`` ports (see above); off, every column
        command the scheduler picks issues.

    Attributes
    ----------
    queue : In(CommandQueue.Signature)
        The queued requests; the served entry is taken.
    banks : In(BankMachine.Signature).array(banks)
        Commands to, and state of, each bank machine.
    refresh : In(Refresher.Signature)
        Refresh pending in, REF issued out.
    resp_space : In(1)
        A column command may issue (its response has a slot).
    cmd : Out(CmdSignature)
        The command issued this cycle.
    sel : Out(layout)
        The request the command serves.
    act_want : Out(1)
        With ``act_gate``: the pick this cycle is an ACT.
    act_ok : In(1)
        With ``act_gate``: the picked ACT may issue this cycle.
    col_want : Out(1)
        With ``col_gate``: the pick this cycle is a RD or WR.
    col_ok : In(1)
        With ``col_gate``: the picked column command may issue this cycle.
    """

    def __init__(self, *, timing: Timing, banks: int, layout: data.StructLayout,
                 queue_depth: int, scheduler: str = "frfcfs", page_policy: str = "open",
                 starvation_limit: int = 256, act_gate: bool = False,
                 col_gate: bool = False):
        if not isinstance(timing, Timing):
            raise TypeError(f"timing must be a Timing, not {timing!r}")
        check_pow2("banks", banks, 1, 64)
        check_choice("scheduler", scheduler, ("fcfs", "frfcfs"))
        check_choice("page_policy", page_policy, ("open", "close"))
        check_int("starvation_limit", starvation_limit, 1, 1 << 20)
        check_bool("act_gate", act_gate)
        check_bool("col_gate", col_gate)
        self.act_gate, self.col_gate = act_gate, col_gate
        self.timing, self.nbanks, self.layout = timing, banks, layout
        self.queue_depth, self.scheduler, self.page_policy = queue_depth, scheduler, page_policy
        self.starvation_limit = starvation_limit
        self.bank_bits = max(1, ceil_log2(banks))
        row_bits = Shape.cast(layout["row"].shape).width
        col_bits = Shape.cast(layout["col"].shape).width
        ports = {
            "queue": In(CommandQueue.Signature(layout=layout, depth=queue_depth)),
            "banks": In(BankMachine.Signature(row_bits=row_bits)).array(banks),
            "refresh": In(Refresher.Signature()),
            "resp_space": In(1),
            "cmd": Out(CmdSignature(bank_bits=self.bank_bits, row_bits=row_bits,
                                    col_bits=col_bits)),
            "sel": Out(layout),
        }
        if act_gate:
            ports |= {"act_want": Out(1), "act_ok": In(1)}
        if col_gate:
            ports |= {"col_want": Out(1), "col_ok": In(1)}
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        t = self.timing
        Q, NB = self.queue_depth, self.nbanks
        banks = self.banks
        ent, valid = self.queue.entries, self.queue.valid
        b_open = Array(b.is_open for b in banks)
        b_row = Array(b.open_row for b in banks)
        b_act_ok = Array(b.act_ok for b in banks)
        b_pre_ok = Array(b.pre_ok for b in banks)
        b_col_ok = Array(b.col_ok for b in banks)

        # ---- vault-wide constraints -------------------------------------------
        issue_act, issue_pre, issue_rd, issue_wr, issue_ref = (Signal(name=n) for n in (
            "issue_act", "issue_pre", "issue_rd", "issue_wr", "issue_ref"))
        issue_col = issue_rd | issue_wr
        ccd = TimingCounter(m, t.col_gap, "ccd")
        ccd.load(issue_col, t.col_gap)
        rd_gap = TimingCounter(m, t.wr_to_rd, "wtr")
        rd_gap.load(issue_wr, t.wr_to_rd)
        wr_gap = TimingCounter(m, t.rd_to_wr, "rtw")
        wr_gap.load(issue_rd, t.rd_to_wr)
        rrd = TimingCounter(m, t.tRRD, "rrd")
        rrd.load(issue_act, t.tRRD)
        # tFAW: the 4th-last ACT must be tFAW old; one counter per ACT of the window.
        faw = [TimingCounter(m, t.tFAW, f"faw{i}") for i in range(4)]
        faw_next = Signal(2)
        for i, c in enumerate(faw):
            c.load(issue_act & (faw_next == i), t.tFAW)
        with m.If(issue_act):
            m.d.sync += faw_next.eq(faw_next + 1)
        for c in (ccd, rd_gap, wr_gap, rrd, *faw):
            c.elaborate()
        faw_ok = Signal()
        m.d.comb += faw_ok.eq(Array(c.ready for c in faw)[faw_next])
        act_vault_ok = rrd.ready & faw_ok

        # ---- per-entry state ----------------------------------------------------
        hit = [Signal(name=f"hit{i}") for i in range(Q)]
        older_bank = [Signal(name=f"older_bank{i}") for i in range(Q)]
        older_addr = [Signal(name=f"older_addr{i}") for i in range(Q)]
        bank_hits = [Signal(name=f"bank_has_hit{i}") for i in range(Q)]
        for i, e in enumerate(ent):
            m.d.comb += hit[i].eq(valid[i] & b_open[e.bank] & (b_row[e.bank] == e.row))
            ob, oa = Const(0), Const(0)
            for j in range(i):
                same_bank = valid[j] & (ent[j].bank == e.bank)
                ob = ob | same_bank
                oa = oa | (same_bank & (ent[j].row == e.row) & (ent[j].col == e.col))
            m.d.comb += [older_bank[i].eq(ob), older_addr[i].eq(oa)]
        for i, e in enumerate(ent):
            bh = Const(0)
            for j in range(Q):
                if j != i:
                    bh = bh | (hit[j] & (ent[j].bank == e.bank))
            m.d.comb += bank_hits[i].eq(bh)

        head_wait = Signal(range(self.starvation_limit + 1))
        starving = Signal()
        m.d.comb += starving.eq(head_wait == self.starvation_limit)
        reorder = Const(int(self.scheduler == "frfcfs")) & ~starving

        col_c = [Signal(name=f"col_c{i}") for i in range(Q)]
        row_c = [Signal(name=f"row_c{i}") for i in range(Q)]
        refreshing = self.refresh.pending
        for i, e in enumerate(ent):
            dir_ok = Mux(e.we, wr_gap.ready, rd_gap.ready)
            m.d.comb += col_c[i].eq(
                hit[i] & b_col_ok[e.bank] & ~older_addr[i] & ccd.ready & dir_ok
                & self.resp_space & ~refreshing & (reorder | ~older_bank[i]))
            act_c = valid[i] & ~b_open[e.bank] & b_act_ok[e.bank] & act_vault_ok
            pre_c = (valid[i] & b_open[e.bank] & ~hit[i] & b_pre_ok[e.bank]
                     & ~(reorder & bank_hits[i]))
            m.d.comb += row_c[i].eq((act_c | pre_c) & ~older_bank[i] & ~refreshing)

        # Close page: a bank no queued request wants an open row of.
        close_c = [Signal(name=f"close_c{b}") for b in range(NB)]
        if self.page_policy == "close":
            for b in range(NB):
                wanted = Const(0)
                for i, e in enumerate(ent):
                    wanted = wanted | (valid[i] & (e.bank == b) & (e.row == banks[b].open_row))
                m.d.comb += close_c[b].eq(banks[b].pre_ok & ~wanted & ~refreshing)
        # Refresh: precharge every open bank, then REF when all are idle.
        ref_pre = [Signal(name=f"ref_pre{b}") for b in range(NB)]
        all_idle = Signal()
        m.d.comb += all_idle.eq(Cat(b.act_ok for b in banks).all())
        for b in range(NB):
            m.d.comb += ref_pre[b].eq(refreshing & banks[b].pre_ok)

        # ---- selection: one command per cycle ----------------------------------
        sel_entry = Signal(range(Q))
        sel_bank = Signal(self.bank_bits)
        kind = Signal(3)
        # With the gate, the selection below drives the pick; kind is the pick unless
        # it is an ACT that act_ok refuses or a RD/WR that col_ok refuses.
        gated = self.act_gate or self.col_gate
        pick = Signal(3) if gated else kind
        with m.If(refreshing):
            with m.If(all_idle):
                m.d.comb += pick.eq(Cmd.REF)
            for b in reversed(range(NB)):
                with m.If(ref_pre[b]):
                    m.d.comb += [pick.eq(Cmd.PRE), sel_bank.eq(b)]
        with m.Else():
            # Lowest priority first, so the last matching assignment wins.
            for b in reversed(range(NB)):
                with m.If(close_c[b]):
                    m.d.comb += [pick.eq(Cmd.PRE), sel_bank.eq(b)]
            if self.scheduler == "frfcfs":
                with m.If(reorder):
                    for i in reversed(range(Q)):
                        with m.If(row_c[i]):
                            m.d.comb += [pick.eq(Mux(b_open[ent[i].bank], Cmd.PRE, Cmd.ACT)),
                                         sel_bank.eq(ent[i].bank), sel_entry.eq(i)]
                    for i in reversed(range(Q)):
                        with m.If(col_c[i]):
                            m.d.comb += [pick.eq(Mux(ent[i].we, Cmd.WR, Cmd.RD)),
                                         sel_bank.eq(ent[i].bank), sel_entry.eq(i)]
                with m.Else():
                    self._fcfs_select(m, ent, row_c, col_c, b_open, pick, sel_bank, sel_entry)
            else:
                self._fcfs_select(m, ent, row_c, col_c, b_open, pick, sel_bank, sel_entry)

        if gated:
            refused = []
            if self.act_gate:
                m.d.comb += self.act_want.eq(pick == Cmd.ACT)
                refused.append(self.act_want & ~self.act_ok)
            if self.col_gate:
                m.d.comb += self.col_want.eq((pick == Cmd.RD) | (pick == Cmd.WR))
                refused.append(self.col_want & ~self.col_ok)
            m.d.comb += kind.eq(Mux(refused[0] if len(refused) == 1 else refused[0] | refused[1],
                                    Cmd.NOP, pick))
        sel = self.sel
        m.d.comb += sel.eq(Array(e.as_value() for e in ent)[sel_entry])
        m.d.comb += [
            issue_act.eq(kind == Cmd.ACT), issue_pre.eq(kind == Cmd.PRE),
            issue_rd.eq(kind == Cmd.RD), issue_wr.eq(kind == Cmd.WR),
            issue_ref.eq(kind == Cmd.REF),
        ]
        for b, bm in enumerate(banks):
            here = sel_bank == b
            m.d.comb += [
                bm.act.eq(issue_act & here), bm.act_row.eq(sel.row),
                bm.pre.eq(issue_pre & here), bm.rd.eq(issue_rd & here),
                bm.wr.eq(issue_wr & here), bm.ref.eq(issue_ref),
            ]
        m.d.comb += [
            self.refresh.issued.eq(issue_ref),
            self.queue.take.eq(issue_col), self.queue.take_index.eq(sel_entry),
            self.cmd.valid.eq(kind != 0), self.cmd.kind.eq(kind),
            self.cmd.bank.eq(sel_bank),
            self.cmd.row.eq(Mux(issue_pre, b_row[sel_bank], sel.row)),
            self.cmd.col.eq(Mux(issue_col, sel.col, 0)),
        ]

        # The head's wait resets when it is served or the queue is empty.
        with m.If(~valid[0] | (issue_col & (sel_entry == 0))):
            m.d.sync += head_wait.eq(0)
        with m.Elif(~starving):
            m.d.sync += head_wait.eq(head_wait + 1)
        return m

    @staticmethod
    def _fcfs_select(m, ent, row_c, col_c, b_open, kind, sel_bank, sel_entry):
        for i in reversed(range(len(ent))):
            with m.If(col_c[i]):
                m.d.comb += [kind.eq(Mux(ent[i].we, Cmd.WR, Cmd.RD)),
                             sel_bank.eq(ent[i].bank), sel_entry.eq(i)]
            with m.Elif(row_c[i]):
                m.d.comb += [kind.eq(Mux(b_open[ent[i].bank], Cmd.PRE, Cmd.ACT)),
                             sel_bank.eq(ent[i].bank), sel_entry.eq(i)]
