"""The NicePIM PIM-node: NN engine, DRAM banks, node controller, DMA, data sharing, NI."""

from __future__ import annotations

import re

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..hierarchy import Leaf, leaf_name
from ..mem.crossbar import rr_pick
from ..mem.port import Cmd
from ..mem.timing import Timing, resolve_timing
from ..mem.vault_ctrl import VaultController
from ..noc.flit import NoCLink
from ..noc.ni import NetworkInterface
from ..params import check, check_int
from .dma import TensorDMA
from .engine import NNEngine
from .node_ctrl import NodeController
from .params import TASK_LAYOUT, ibuf_row_lines, wbuf_row_lines
from .share import DataShare

__all__ = ["COUNTERS", "PIMNode", "from_config", "node_kwargs", "node_leaf"]

#: The node's counters (32 bits each, cleared by reset), in :class:`PIMNode.PerfSignature`.
COUNTERS = (
    "cycles",        # the task list was running
    "overhead",      # running with no unit busy and no WAIT holding (the tasks' own cycles)
    "waiting",       # WAIT tasks holding
    "eng_busy", "eng_stream",        # the engine ran a tile; streamed input pixels
    "dma_busy", "dma_stall",         # the DMA ran a task; waited for the DRAM
    "overlap",                       # the engine and the DMA both busy
    "share_busy", "share_stall",     # a SEND ran; waited for the DRAM or the network
    "dma_rd", "dma_wr",              # DRAM words the DMA read and wrote
    "sent", "received",              # words sent to / written from the network
    "dram_act", "dram_pre", "dram_rd", "dram_wr", "dram_ref",   # commands to the banks
    "flits_out", "flits_in",         # flits into and out of the network at this node
)

#: DRAM reads the tensor DMA keeps in flight: the bank controller's read latency over its
#: column gap (8 / 2 cycles) plus its request queue, rounded up to a power of two.
DMA_INFLIGHT = 8
#: Requests the node's bank controller queues.
QUEUE_DEPTH = 4


class PIMNode(wiring.Component):
    """One PIM-node of NicePIM (Fig. 3): its DRAM banks, bank controller, NN engine,
    tensor DMA, data-sharing unit, network interface and node controller.

    The node's banks are bound together into one bank of
    ``banks_per_node * bank_width_bits`` bits (Sec. III-A: they "work in the same
    manner as one DRAM bank but with larger port-width"), behind one
    :class:`~pimforge.rtl.mem.vault_ctrl.VaultController` (bank timing, page
    policy, refresh, FR-FCFS). The DMA, the data-sharing reads and the writes of
    received words share its request port round robin. The bank array itself is a
    simulation model outside the node, on ``arr`` (a read's word is expected on
    ``arr.rdata`` one cycle after ``arr.re``).

    The node's router is the mesh's (:class:`~pimforge.rtl.noc.mesh.Mesh` wires
    every router's links in one place); ``net_out``/``net_in`` are its local port.

    Parameters
    ----------
    pe_rows, pe_cols, ibuf_lines, wbuf_lines, obuf_lines : int
        The engine (:class:`~pimforge.rtl.nicepim.engine.NNEngine`).
    task_entries : int
        The task memory.
    timing : Timing
        DRAM timing in node cycles.
    rows, columns : int
        Rows of the node's (bound) bank and DRAM words per row.
    word_bytes : int
        One DRAM word (one access of all the node's banks).
    queue_depth : int
        Requests the bank controller queues.
    scheduler, page_policy : str
        The bank controller's policies.
    link : NoCLink.Signature
        The mesh's links (flits half a DRAM word).
    depth, packet_flits : int
        The routers' VC buffers and the network interface's longest message.

    Attributes
    ----------
    node_id : In
        This node's index ``y * cols + x``.
    prog : Out(WritePort.Signature)
        The task memory's write port.
    start : In(1)
    done : Out(1)
        The task list has ended and the bank controller is idle (every write of the
        node has reached the banks).
    arr : Out(DRAMArraySignature)
    net_out : Out(link)
    net_in : In(link)
    perf : Out(PerfSignature)
    """

    class PerfSignature(wiring.Signature):
        """The node's counters.

        Members
        -------
        cycles, overhead, waiting, eng_busy, ... : Out(32)
            One per name of :data:`COUNTERS`.
        """

        def __init__(self):
            super().__init__({n: Out(32) for n in COUNTERS})

        def __eq__(self, other):
            return type(other) is type(self)

        def __hash__(self):
            return hash(type(self))

        def __repr__(self):
            return "PIMNode.PerfSignature()"

    def __init__(self, *, pe_rows: int, pe_cols: int, ibuf_lines: int, wbuf_lines: int,
                 obuf_lines: int, task_entries: int, timing: Timing, rows: int, columns: int,
                 word_bytes: int, queue_depth: int = QUEUE_DEPTH, scheduler: str = "frfcfs",
                 page_policy: str = "open", link: NoCLink.Signature, depth: int,
                 packet_flits: int):
        check_int("word_bytes", word_bytes, 8, 256)
        check(link.flit_bits * 16 == word_bytes * 8 * 8, "link.flit_bits", link.flit_bits,
              f"half the DRAM word ({word_bytes * 4} bits)")
        self.link = link
        ctrl_kw = dict(timing=timing, banks=1, rows=rows, columns=columns,
                            queue_depth=queue_depth, tag_bits=exact_log2(DMA_INFLIGHT),
                            scheduler=scheduler,
                            page_policy=page_policy, block_bytes=word_bytes)
        probe = VaultController(**ctrl_kw)
        port = probe.port_signature
        # The parts, built here so that a bad parameter is reported at construction.
        # a row of the weight buffer holds a DRAM word of weight lines
        # and a row of the input buffer a word of input lines
        nb = wbuf_row_lines(pe_rows, pe_cols, wbuf_lines, word_bytes * 8)
        ni = ibuf_row_lines(pe_rows, ibuf_lines, word_bytes * 8)
        self._engine = NNEngine(pe_rows=pe_rows, pe_cols=pe_cols, ibuf_lines=ibuf_lines,
                                wbuf_lines=wbuf_lines, obuf_lines=obuf_lines,
                                wbuf_row_lines=nb, ibuf_row_lines=ni)
        self._dma = TensorDMA(pe_rows=pe_rows, pe_cols=pe_cols, ibuf_lines=ibuf_lines,
                              wbuf_lines=wbuf_lines, obuf_lines=obuf_lines, port=port,
                              inflight=DMA_INFLIGHT, wbuf_row_lines=nb, ibuf_row_lines=ni)
        self._share = DataShare(link=link, packet_flits=packet_flits, port=port,
                                inflight=DMA_INFLIGHT)
        self._ni = NetworkInterface(link=link, depth=depth, packet_flits=packet_flits)
        self._ctrl = NodeController(task_entries=task_entries)
        self._dram = probe
        self.latencies = {"dram_read": probe.latencies["read"],
                          "pe_array": pe_rows + pe_cols - 1}
        super().__init__({
            "node_id": In(link.flit_layout["src"].shape),
            "prog": Out(WritePort.Signature(addr_width=ceil_log2(task_entries),
                                            shape=TASK_LAYOUT)),
            "start": In(1), "done": Out(1),
            "arr": Out(probe.arr_signature),
            "net_out": Out(link), "net_in": In(link),
            "perf": Out(self.PerfSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        eng, dma, share = self._engine, self._dma, self._share
        ni, ctrl, dram = self._ni, self._ctrl, self._dram
        for name, part in (("engine", eng), ("dma", dma), ("share", share), ("ni", ni),
                           ("ctrl", ctrl), ("dram", dram)):
            m.submodules[name] = part

        # ---- controller, units, buffers ---------------------------------------------
        wiring.connect(m, wiring.flipped(self.prog), ctrl.prog)
        # Done once the list has ended and its last DRAM writes have reached the banks.
        m.d.comb += [ctrl.start.eq(self.start), self.done.eq(ctrl.done & ~dram.busy),
                     eng.task.eq(ctrl.eng_task), dma.task.eq(ctrl.dma_task),
                     share.task.eq(ctrl.share_task),
                     eng.start.eq(ctrl.eng_start), dma.start.eq(ctrl.dma_start),
                     share.start.eq(ctrl.share_start),
                     ctrl.eng_busy.eq(eng.busy), ctrl.dma_busy.eq(dma.busy),
                     ctrl.dma_ready.eq(dma.ready),
                     ctrl.share_busy.eq(share.busy), ctrl.received.eq(share.received)]
        wiring.connect(m, dma.ibuf_w, eng.ibuf_w)
        wiring.connect(m, dma.wbuf_w, eng.wbuf_w)
        wiring.connect(m, dma.obuf_r, eng.obuf_r)

        # ---- network -------------------------------------------------------------------
        m.d.comb += ni.node.eq(self.node_id)
        wiring.connect(m, share.send, ni.send[0])
        wiring.connect(m, ni.recv[0], share.recv)
        wiring.connect(m, ni.net_out, wiring.flipped(self.net_out))
        wiring.connect(m, wiring.flipped(self.net_in), ni.net_in)

        # ---- DRAM: three requesters, round robin --------------------------------------
        reqs = [dma.dram.req, share.rd_dram.req, share.wr_dram.req]
        bus = dram.bus
        _, grant = rr_pick(m, [r.valid for r in reqs], bus.req.valid & bus.req.ready, "dram")
        for g, r in zip(grant, reqs, strict=True):
            with m.If(g):
                m.d.comb += [bus.req.valid.eq(1), bus.req.payload.eq(r.payload),
                             r.ready.eq(bus.req.ready)]
        # Responses go to everyone: only the active reader (the DMA or a SEND, never both)
        # takes a read's data; write acknowledgements are dropped.
        for port in (dma.dram, share.rd_dram, share.wr_dram):
            m.d.comb += [port.resp.valid.eq(bus.resp.valid),
                         port.resp.payload.eq(bus.resp.payload)]
        m.d.comb += bus.resp.ready.eq(1)
        wiring.connect(m, dram.arr, wiring.flipped(self.arr))

        # ---- counters ----------------------------------------------------------------
        kind = dram.cmd.kind
        fire = [r.valid & r.ready for r in reqs]
        events = {
            "cycles": ctrl.running,
            "overhead": ctrl.running & ~ctrl.waiting & ~(eng.busy | dma.busy | share.busy),
            "waiting": ctrl.waiting, "overlap": eng.busy & dma.busy,
            "eng_busy": eng.busy, "eng_stream": eng.streaming,
            "dma_busy": dma.busy, "dma_stall": dma.stall,
            "share_busy": share.busy, "share_stall": share.stall,
            "dma_rd": fire[0] & ~reqs[0].payload.we, "dma_wr": fire[0] & reqs[0].payload.we,
            "dram_act": dram.cmd.valid & (kind == Cmd.ACT),
            "dram_pre": dram.cmd.valid & (kind == Cmd.PRE),
            "dram_rd": dram.cmd.valid & (kind == Cmd.RD),
            "dram_wr": dram.cmd.valid & (kind == Cmd.WR),
            "dram_ref": dram.cmd.valid & (kind == Cmd.REF),
            "flits_out": ni.net_out.valid, "flits_in": ni.net_in.valid,
        }
        m.d.comb += [self.perf.sent.eq(share.sent), self.perf.received.eq(share.received)]
        for name, ev in events.items():
            cnt = getattr(self.perf, name)
            with m.If(ev):
                m.d.sync += cnt.eq(cnt + 1)
        return m


def node_kwargs(cfg) -> dict:
    """The :class:`PIMNode` keyword arguments of ``cfg.nicepim``."""
    n = cfg.nicepim
    check(n.dataflow == "ws", "nicepim.dataflow", n.dataflow,
          "'ws' (the engine is built weight-stationary; 'os' is a mapper option only)")
    return dict(
        pe_rows=n.pe_rows, pe_cols=n.pe_cols, ibuf_lines=n.ibuf_lines,
        wbuf_lines=n.wbuf_lines, obuf_lines=n.obuf_lines, task_entries=n.task_entries,
        timing=resolve_timing(n.timing, n.tck_ns), rows=n.rows, columns=n.row_words,
        word_bytes=n.word_bytes, queue_depth=n.dram_queue, scheduler=n.scheduler,
        page_policy=n.page_policy,
        link=NoCLink.Signature(rows=n.na_rows, cols=n.na_cols, vcs=n.noc_vcs,
                               flit_bits=n.flit_bits),
        depth=n.noc_buffer_depth, packet_flits=n.noc_packet_flits)


def node_leaf(**kwargs) -> Leaf:
    """A :class:`PIMNode` as one Verilog module that every node of an array instantiates.

    The module carries Verilator's ``no_inline_module``: inlined, every node of an array
    is a copy to compile (a 4x8 array of 128x8-PE nodes took 7.5 GB to lint).
    """

    def verilog(name: str) -> str:
        from amaranth.back import verilog as amaranth_verilog

        text = amaranth_verilog.convert(PIMNode(**kwargs), name=name, emit_src=False)
        head = re.search(rf"^module {re.escape(name)}\(.*?\);\n", text, re.M | re.S)
        if head is None:
            raise ValueError(f"no module {name} in its own Verilog")
        return (text[:head.end()] + "  /*verilator no_inline_module*/\n"
                + text[head.end():])

    return Leaf(leaf_name("nicepim_node", digest=sorted(kwargs.items(), key=str)),
                lambda: PIMNode(**kwargs), verilog=verilog)


def from_config(cfg) -> PIMNode:
    """One PIM-node of ``cfg.nicepim``."""
    return PIMNode(**node_kwargs(cfg))
