"""Vault controller: request queue, FCFS/FR-FCFS scheduler, page policy, refresh, tags."""

from __future__ import annotations

import hashlib
import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .bank import TimingCounter, bank_leaf
from .port import PE, Cmd, VaultPortSignature
from .timing import Timing, resolve_timing

__all__ = ["VaultController", "from_config", "vault_leaf"]


class VaultController(wiring.Component):
    """One vault's memory controller over ``banks`` DRAM bank machines.

    Each cycle issues at most one DRAM command (the vault's command bus):

    * refresh first: when tREFI elapses a refresh becomes pending; from then on
      no ACT or column command issues, open banks are precharged as soon as
      their tRAS/tRTP/tWR allow, and REF issues once every bank is idle, so
      refresh can never be starved;
    * ``frfcfs``: the oldest row hit whose column command is legal, else the
      oldest ACT/PRE of a request that is the oldest of its bank; a PRE waits
      while younger hits to the open row are queued, unless the queue head has
      waited ``starvation_limit`` cycles (then the controller acts as FCFS);
    * ``fcfs``: only the oldest request of each bank may issue, oldest first;
    * ``close`` page policy: a bank whose open row no queued request wants is
      precharged (after the commands above).

    Requests to the same block keep their order; all others may be reordered.
    A read returns its data tCL + tBL after the RD (end of the burst); a write
    is acknowledged with the same latency after its WR. Responses wait in a
    FIFO; column commands stall while the FIFO could overflow.

    The DRAM array is a simulation model outside this block (the TSV data
    path): ``arr_re``/``arr_we`` with ``arr_addr`` = bank, row, column and
    ``arr_wdata`` in the cycle of the RD/WR; ``arr_rdata`` is expected one cycle
    after ``arr_re`` (a synchronous read).

    Parameters
    ----------
    timing : Timing
        DRAM timing in controller cycles.
    banks, rows, columns : int
        Geometry (powers of two).
    queue_depth : int
        Request-queue entries.
    tag_bits : int
        Width of request tags.
    scheduler : str
        ``"fcfs"`` or ``"frfcfs"``.
    page_policy : str
        ``"open"`` or ``"close"``.
    starvation_limit : int
        See above.
    block_bytes : int
        Access granularity.

    Attributes
    ----------
    bus : In(VaultPortSignature)
        Requests in, responses out.
    cmd_valid, cmd_kind, cmd_bank, cmd_row, cmd_col : Out
        The command issued this cycle (:class:`~pimforge.rtl.mem.port.Cmd`;
        ``REF`` covers all banks).
    pe_count : Out
        Queued requests of class PE (RMAS's Q).
    occupancy : Out
        Queued requests.
    conflict_now : Out
        Queued requests whose bank holds another row open this cycle.
    busy : Out(1)
        Requests queued or responses in flight.
    """

    def __init__(self, *, timing: Timing, banks: int = 16, rows: int = 64, columns: int = 16,
                 queue_depth: int = 16, tag_bits: int = 8, scheduler: str = "frfcfs",
                 page_policy: str = "open", starvation_limit: int = 256, block_bytes: int = 16):
        def pow2(name, v, lo, hi):
            if not isinstance(v, int) or not lo <= v <= hi or v & (v - 1):
                raise ValueError(f"{name} must be a power of two between {lo} and {hi}, "
                                 f"not {v!r}")
        pow2("banks", banks, 1, 64)
        pow2("rows", rows, 2, 2**24)
        pow2("columns", columns, 2, 4096)
        pow2("block_bytes", block_bytes, 1, 256)
        if not isinstance(queue_depth, int) or not 2 <= queue_depth <= 64:
            raise ValueError(f"queue_depth must be an integer between 2 and 64, "
                             f"not {queue_depth!r}")
        if scheduler not in ("fcfs", "frfcfs"):
            raise ValueError(f"scheduler must be 'fcfs' or 'frfcfs', not {scheduler!r}")
        if page_policy not in ("open", "close"):
            raise ValueError(f"page_policy must be 'open' or 'close', not {page_policy!r}")
        self.timing = timing
        self.banks, self.rows, self.columns = banks, rows, columns
        self.queue_depth, self.tag_bits = queue_depth, tag_bits
        self.scheduler, self.page_policy = scheduler, page_policy
        self.starvation_limit = starvation_limit
        self.bank_bits = max(1, ceil_log2(banks))
        self.row_bits = ceil_log2(rows)
        self.col_bits = ceil_log2(columns)
        self.data_bits = block_bytes * 8
        self.arr_addr_bits = self.bank_bits + self.row_bits + self.col_bits
        # Responses in flight are bounded by the read latency over the column gap.
        self.resp_depth = math.ceil(timing.rd_latency / timing.col_gap) + 4
        self.port_signature = VaultPortSignature(
            bank_bits=self.bank_bits, row_bits=self.row_bits, col_bits=self.col_bits,
            tag_bits=tag_bits, data_bits=self.data_bits)
        qbits = ceil_log2(queue_depth + 1)
        super().__init__({
            "bus": In(self.port_signature),
            "arr_re": Out(1), "arr_we": Out(1), "arr_addr": Out(self.arr_addr_bits),
            "arr_wdata": Out(self.data_bits), "arr_rdata": In(self.data_bits),
            "cmd_valid": Out(1), "cmd_kind": Out(3), "cmd_bank": Out(self.bank_bits),
            "cmd_row": Out(self.row_bits), "cmd_col": Out(self.col_bits),
            "pe_count": Out(qbits), "occupancy": Out(qbits), "conflict_now": Out(qbits),
            "busy": Out(1),
        })
        self.latencies = {"read": timing.rd_latency, "write_ack": timing.rd_latency}

    def elaborate(self, platform):
        m = Module()
        t = self.timing
        Q, NB = self.queue_depth, self.banks
        req, resp = self.bus.req, self.bus.resp

        banks = [bank_leaf(timing=t, row_bits=self.row_bits) for _ in range(NB)]
        for i, b in enumerate(banks):
            m.submodules[f"bank{i}"] = b
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

        # ---- refresh ------------------------------------------------------------
        refi = Signal(range(t.tREFI + 1), init=t.tREFI - 1)
        ref_pending = Signal(range(9))
        ref_due = Signal()
        m.d.comb += ref_due.eq(refi == 0)
        m.d.sync += refi.eq(Mux(ref_due, t.tREFI - 1, refi - 1))
        # Up to 8 refreshes may be owed (JEDEC postponement limit); never dropped.
        with m.If(ref_due & ~issue_ref):
            m.d.sync += ref_pending.eq(ref_pending + 1)
        with m.Elif(issue_ref & ~ref_due):
            m.d.sync += ref_pending.eq(ref_pending - 1)

        # ---- request queue (compacting: entry 0 is the oldest) ----------------
        lay = self.port_signature.req_layout
        ent = [Signal(lay, name=f"q{i}") for i in range(Q)]
        count = Signal(range(Q + 1))
        valid = [Signal(name=f"qv{i}") for i in range(Q)]
        for i in range(Q):
            m.d.comb += valid[i].eq(count > i)

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

        # Response space: in-flight column commands plus queued responses fit the FIFO.
        L = t.rd_latency
        # Credits = FIFO slots neither filled nor promised to a command in flight.
        credits = Signal(range(self.resp_depth + 1), init=self.resp_depth)
        rfifo = m.submodules.rfifo = SyncFIFO(width=len(resp.payload.as_value()),
                                              depth=self.resp_depth)
        resp_space = Signal()
        m.d.comb += resp_space.eq(credits != 0)
        inflight = Signal(range(L + 1))

        head_wait = Signal(range(self.starvation_limit + 1))
        starving = Signal()
        m.d.comb += starving.eq(head_wait == self.starvation_limit)
        reorder = Const(int(self.scheduler == "frfcfs")) & ~starving

        col_c = [Signal(name=f"col_c{i}") for i in range(Q)]
        row_c = [Signal(name=f"row_c{i}") for i in range(Q)]
        refreshing = ref_pending.any()
        for i, e in enumerate(ent):
            dir_ok = Mux(e.we, wr_gap.ready, rd_gap.ready)
            m.d.comb += col_c[i].eq(
                hit[i] & b_col_ok[e.bank] & ~older_addr[i] & ccd.ready & dir_ok & resp_space
                & ~refreshing & (reorder | ~older_bank[i]))
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
        with m.If(refreshing):
            with m.If(all_idle):
                m.d.comb += kind.eq(Cmd.REF)
            for b in reversed(range(NB)):
                with m.If(ref_pre[b]):
                    m.d.comb += [kind.eq(Cmd.PRE), sel_bank.eq(b)]
        with m.Else():
            # Lowest priority first, so the last matching assignment wins.
            for b in reversed(range(NB)):
                with m.If(close_c[b]):
                    m.d.comb += [kind.eq(Cmd.PRE), sel_bank.eq(b)]
            if self.scheduler == "frfcfs":
                with m.If(reorder):
                    for i in reversed(range(Q)):
                        with m.If(row_c[i]):
                            m.d.comb += [kind.eq(Mux(b_open[ent[i].bank], Cmd.PRE, Cmd.ACT)),
                                         sel_bank.eq(ent[i].bank), sel_entry.eq(i)]
                    for i in reversed(range(Q)):
                        with m.If(col_c[i]):
                            m.d.comb += [kind.eq(Mux(ent[i].we, Cmd.WR, Cmd.RD)),
                                         sel_bank.eq(ent[i].bank), sel_entry.eq(i)]
                with m.Else():
                    self._fcfs_select(m, ent, row_c, col_c, b_open, kind, sel_bank, sel_entry)
            else:
                self._fcfs_select(m, ent, row_c, col_c, b_open, kind, sel_bank, sel_entry)

        sel = Signal(lay)
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
            self.cmd_valid.eq(kind != 0), self.cmd_kind.eq(kind),
            self.cmd_bank.eq(sel_bank),
            self.cmd_row.eq(Mux(issue_pre, b_row[sel_bank], sel.row)),
            self.cmd_col.eq(Mux(issue_col, sel.col, 0)),
            self.arr_re.eq(issue_rd), self.arr_we.eq(issue_wr),
            self.arr_addr.eq(Cat(sel.col, sel.row, sel.bank)),
            self.arr_wdata.eq(sel.data),
        ]

        # ---- queue update: remove the served entry, compact, append -----------
        accept = Signal()
        m.d.comb += [req.ready.eq(count < Q), accept.eq(req.valid & req.ready)]
        removed = [Signal(name=f"rm{i}") for i in range(Q)]
        shift = Const(0)
        for i in range(Q):
            m.d.comb += removed[i].eq(issue_col & (sel_entry == i))
            shift = shift | removed[i]
            nxt = ent[i + 1] if i + 1 < Q else Const(0, len(ent[i].as_value()))
            with m.If(shift):
                m.d.sync += ent[i].eq(nxt)
        tail = Signal(range(Q + 1))
        m.d.comb += tail.eq(count - issue_col)
        for i in range(Q):
            with m.If(accept & (tail == i)):
                m.d.sync += ent[i].eq(req.payload)
        m.d.sync += count.eq(tail + accept)

        with m.If((count == 0) | (issue_col & (sel_entry == 0))):
            m.d.sync += head_wait.eq(0)
        with m.Elif(~starving):
            m.d.sync += head_wait.eq(head_wait + 1)

        # ---- data path: fixed-latency return with the tag -----------------------
        line = [Signal(1 + 1 + self.tag_bits, name=f"dl{i}") for i in range(L)]
        m.d.sync += line[0].eq(Cat(issue_col, sel.we, sel.tag))
        for i in range(1, L):
            m.d.sync += line[i].eq(line[i - 1])
        # line[L-1] is valid L cycles after the command, at the end of the burst.
        out_v, out_we, out_tag = line[L - 1][0], line[L - 1][1], line[L - 1][2:]
        dfifo = m.submodules.dfifo = SyncFIFO(width=self.data_bits,
                                              depth=math.ceil(L / t.col_gap) + 2)
        rd_d1 = Signal()
        m.d.sync += rd_d1.eq(issue_rd)
        m.d.comb += [dfifo.w_en.eq(rd_d1), dfifo.w_data.eq(self.arr_rdata)]
        rd_out = out_v & ~out_we
        m.d.comb += dfifo.r_en.eq(rd_out)
        m.d.comb += [
            rfifo.w_en.eq(out_v),
            rfifo.w_data.eq(Cat(out_we, out_tag, Mux(rd_out, dfifo.r_data, 0))),
            resp.valid.eq(rfifo.r_rdy),
            resp.payload.eq(rfifo.r_data),
            rfifo.r_en.eq(resp.ready),
        ]
        with m.If(issue_col & ~out_v):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(out_v & ~issue_col):
            m.d.sync += inflight.eq(inflight - 1)
        popped = rfifo.r_rdy & resp.ready
        with m.If(issue_col & ~popped):
            m.d.sync += credits.eq(credits - 1)
        with m.Elif(popped & ~issue_col):
            m.d.sync += credits.eq(credits + 1)

        # ---- observation ------------------------------------------------------
        pe_n = sum(valid[i] & (e.cls == PE) for i, e in enumerate(ent))
        conf_n = sum(valid[i] & b_open[e.bank] & (b_row[e.bank] != e.row)
                     for i, e in enumerate(ent))
        m.d.comb += [
            self.pe_count.eq(pe_n), self.occupancy.eq(count), self.conflict_now.eq(conf_n),
            self.busy.eq((count != 0) | (inflight != 0) | rfifo.r_rdy),
        ]
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


def vault_leaf(**kwargs):
    """A :class:`VaultController` of these keyword arguments as one Verilog module
    that every vault of a cube instantiates (the name hashes every argument)."""
    from ..hierarchy import Leaf

    key = hashlib.sha1(repr(sorted(kwargs.items())).encode()).hexdigest()[:10]
    return Leaf(f"vault_ctrl_{key}", lambda: VaultController(**kwargs))


def from_config(cfg, **overrides) -> VaultController:
    """A vault controller of ``cfg.hmc`` (tags 8 bits unless overridden)."""
    h = cfg.hmc
    kw = {"timing": resolve_timing(h.timing, h.tck_ns), "banks": h.banks_per_vault,
          "rows": h.rows, "columns": h.columns, "queue_depth": h.queue_depth, "tag_bits": 8,
          "scheduler": h.scheduler, "page_policy": h.page_policy,
          "starvation_limit": h.starvation_limit, "block_bytes": h.block_bytes}
    kw.update(overrides)
    return VaultController(**kw)
