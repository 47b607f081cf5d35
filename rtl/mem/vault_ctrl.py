"""Vault controller: request queue, scheduler, refresher and bank machines, with the
tagged response path.

The controller is assembled from its parts as LiteDRAM's is (bank machines,
multiplexer, refresher): :class:`~pimforge.rtl.mem.cmd_queue.CommandQueue`
holds the requests, :class:`~pimforge.rtl.mem.scheduler.Scheduler` picks the
command, :class:`~pimforge.rtl.mem.refresher.Refresher` owes refreshes and one
:class:`~pimforge.rtl.mem.bank.BankMachine` per bank keeps its row and timing.
"""

from __future__ import annotations

import math

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..hierarchy import Leaf, leaf_name
from ..params import check_bool, check_choice, check_int, check_pow2
from .bank import bank_leaf
from .cmd_queue import CommandQueue
from .port import PE, Cmd, CmdSignature, DRAMArraySignature, VaultPortSignature
from .refresher import Refresher
from .scheduler import Scheduler
from .timing import Timing, resolve_timing

__all__ = ["VaultController", "from_config", "vault_leaf", "vault_leaf_name"]


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
    path): ``arr.re``/``arr.we`` with ``arr.addr`` = bank, row, column and
    ``arr.wdata`` in the cycle of the RD/WR; ``arr.rdata`` is expected one cycle
    after ``arr.re`` (a synchronous read).

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
    act_gate : bool
        Add ``act_want``/``act_ok``: an ACT issues only when a block outside
        allows it (the power limits shared with other controllers' banks on one
        DRAM die); see :class:`~pimforge.rtl.mem.scheduler.Scheduler`. Off, the
        controller and its Verilog are as without the parameter.
    col_gate : bool
        Add ``col_want``/``col_ok``: a RD or WR issues only when a block outside
        grants the data path (the TSVs a vault's controllers share when they sit
        on the base die); see :class:`~pimforge.rtl.mem.scheduler.Scheduler`.
    path_latency : int
        Cycles added to every response: the round trip between the controller
        and its bank (a base-die controller's command goes down the TSVs, the
        read data or write acknowledgement comes back up). 0 leaves the
        controller and its Verilog as without the parameter.

    Attributes
    ----------
    bus : In(VaultPortSignature)
        Requests in, responses out.
    arr : Out(DRAMArraySignature)
        The DRAM array port (Verilog ``arr__re``, ``arr__addr``...).
    cmd : Out(CmdSignature)
        The command issued this cycle (Verilog ``cmd__valid``, ``cmd__kind``...).
    pe_count : Out
        Queued requests of class PE (RMAS's Q).
    occupancy : Out
        Queued requests.
    conflict_now : Out
        Queued requests whose bank holds another row open this cycle.
    busy : Out(1)
        Requests queued or responses in flight.
    act_want : Out(1)
        With ``act_gate``: the scheduler's pick this cycle is an ACT that meets
        every constraint of this controller (independent of ``act_ok``).
    act_ok : In(1)
        With ``act_gate``: that ACT may issue this cycle; low, no command issues.
    col_want : Out(1)
        With ``col_gate``: the scheduler's pick this cycle is a legal RD or WR.
    col_ok : In(1)
        With ``col_gate``: that column command may issue this cycle.
    """

    def __init__(self, *, timing: Timing, banks: int = 16, rows: int = 64, columns: int = 16,
                 queue_depth: int = 16, tag_bits: int = 8, scheduler: str = "frfcfs",
                 page_policy: str = "open", starvation_limit: int = 256, block_bytes: int = 16,
                 act_gate: bool = False, col_gate: bool = False, path_latency: int = 0):
        if not isinstance(timing, Timing):
            raise TypeError(f"timing must be a Timing, not {timing!r}")
        check_pow2("banks", banks, 1, 64)
        check_pow2("rows", rows, 2, 2**24)
        check_pow2("columns", columns, 2, 4096)
        check_pow2("block_bytes", block_bytes, 1, 256)
        check_int("queue_depth", queue_depth, 2, 64)
        check_choice("scheduler", scheduler, ("fcfs", "frfcfs"))
        check_choice("page_policy", page_policy, ("open", "close"))
        check_int("starvation_limit", starvation_limit, 1, 1 << 20)
        check_bool("act_gate", act_gate)
        check_bool("col_gate", col_gate)
        check_int("path_latency", path_latency, 0, 64)
        self.act_gate, self.col_gate, self.path_latency = act_gate, col_gate, path_latency
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
        self.resp_latency = timing.rd_latency + path_latency
        self.resp_depth = math.ceil(self.resp_latency / timing.col_gap) + 4
        self.port_signature = VaultPortSignature(
            bank_bits=self.bank_bits, row_bits=self.row_bits, col_bits=self.col_bits,
            tag_bits=tag_bits, data_bits=self.data_bits)
        self.arr_signature = DRAMArraySignature(addr_bits=self.arr_addr_bits,
                                                data_bits=self.data_bits)
        self.cmd_signature = CmdSignature(bank_bits=self.bank_bits, row_bits=self.row_bits,
                                          col_bits=self.col_bits)
        qbits = ceil_log2(queue_depth + 1)
        ports = {
            "bus": In(self.port_signature),
            "arr": Out(self.arr_signature), "cmd": Out(self.cmd_signature),
            "pe_count": Out(qbits), "occupancy": Out(qbits), "conflict_now": Out(qbits),
            "busy": Out(1),
        }
        if act_gate:
            ports |= {"act_want": Out(1), "act_ok": In(1)}
        if col_gate:
            ports |= {"col_want": Out(1), "col_ok": In(1)}
        super().__init__(ports)
        self.latencies = {"read": self.resp_latency, "write_ack": self.resp_latency}

    def elaborate(self, platform):
        m = Module()
        t = self.timing
        NB = self.banks
        req, resp = self.bus.req, self.bus.resp

        # ---- parts: bank machines, request queue, refresher, scheduler ------------
        banks = [bank_leaf(timing=t, row_bits=self.row_bits) for _ in range(NB)]
        for i, b in enumerate(banks):
            m.submodules[f"bank{i}"] = b
        queue = m.submodules.queue = CommandQueue(layout=self.port_signature.req_layout,
                                                  depth=self.queue_depth)
        refresher = m.submodules.refresher = Refresher(tREFI=t.tREFI)
        sched = m.submodules.scheduler = Scheduler(
            timing=t, banks=NB, layout=self.port_signature.req_layout,
            queue_depth=self.queue_depth, scheduler=self.scheduler,
            page_policy=self.page_policy, starvation_limit=self.starvation_limit,
            act_gate=self.act_gate, col_gate=self.col_gate)
        wiring.connect(m, wiring.flipped(req), queue.req)
        wiring.connect(m, queue.view, sched.queue)
        wiring.connect(m, refresher, sched.refresh)
        for b, port in zip(banks, sched.banks):
            wiring.connect(m, b, port)

        wiring.connect(m, sched.cmd, wiring.flipped(self.cmd))
        if self.act_gate:
            m.d.comb += [self.act_want.eq(sched.act_want), sched.act_ok.eq(self.act_ok)]
        if self.col_gate:
            m.d.comb += [self.col_want.eq(sched.col_want), sched.col_ok.eq(self.col_ok)]

        sel = sched.sel
        issue_rd = sched.cmd.kind == Cmd.RD
        issue_wr = sched.cmd.kind == Cmd.WR
        issue_col = issue_rd | issue_wr
        m.d.comb += [
            self.arr.re.eq(issue_rd), self.arr.we.eq(issue_wr),
            self.arr.addr.eq(Cat(sel.col, sel.row, sel.bank)),
            self.arr.wdata.eq(sel.data),
        ]

        # ---- data path: fixed-latency return with the tag -----------------------
        L = self.resp_latency
        # Credits = FIFO slots neither filled nor promised to a command in flight.
        credits = Signal(range(self.resp_depth + 1), init=self.resp_depth)
        rfifo = m.submodules.rfifo = SyncFIFO(width=len(resp.payload.as_value()),
                                              depth=self.resp_depth)
        m.d.comb += sched.resp_space.eq(credits != 0)
        inflight = Signal(range(L + 1))
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
        m.d.comb += [dfifo.w_en.eq(rd_d1), dfifo.w_data.eq(self.arr.rdata)]
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
        ent, valid = queue.view.entries, queue.view.valid
        b_open = Array(b.is_open for b in banks)
        b_row = Array(b.open_row for b in banks)
        pe_n = sum(valid[i] & (e.cls == PE) for i, e in enumerate(ent))
        conf_n = sum(valid[i] & b_open[e.bank] & (b_row[e.bank] != e.row)
                     for i, e in enumerate(ent))
        count = queue.view.count
        m.d.comb += [
            self.pe_count.eq(pe_n), self.occupancy.eq(count), self.conflict_now.eq(conf_n),
            self.busy.eq((count != 0) | (inflight != 0) | rfifo.r_rdy),
        ]
        return m


def vault_leaf(**kwargs):
    """A :class:`VaultController` of these keyword arguments as one Verilog module
    that every vault of a cube instantiates (the name hashes every argument)."""

    return Leaf(vault_leaf_name(**kwargs), lambda: VaultController(**kwargs))


def vault_leaf_name(**kwargs) -> str:
    """The module name of :func:`vault_leaf` of these keyword arguments."""

    return leaf_name("vault_ctrl", digest=sorted(kwargs.items()))


def from_config(cfg, **overrides) -> VaultController:
    """A vault controller of ``cfg.hmc`` (tags 8 bits unless overridden)."""
    h = cfg.hmc
    kw = {"timing": resolve_timing(h.timing, h.tck_ns), "banks": h.banks_per_vault,
          "rows": h.rows, "columns": h.columns, "queue_depth": h.queue_depth, "tag_bits": 8,
          "scheduler": h.scheduler, "page_policy": h.page_policy,
          "starvation_limit": h.starvation_limit, "block_bytes": h.block_bytes}
    kw.update(overrides)
    return VaultController(**kw)
