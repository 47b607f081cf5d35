"""Data sharing between PIM-nodes: DRAM words sent to another node's DRAM over the NoC."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..mem.port import VaultPortSignature
from ..noc.flit import NoCLink
from ..noc.ni import recv_layout, send_layout
from ..params import check, check_pow2
from .params import TASK_LAYOUT

__all__ = ["DataShare", "MESSAGE_FLITS"]

#: Flits of a data-sharing message: the destination word address, then the word's halves.
MESSAGE_FLITS = 3


class DataShare(wiring.Component):
    """Sends DRAM words to other nodes (``SEND`` tasks) and writes the words other
    nodes send into this node's DRAM.

    ``SEND``: for ``k < count``, read word ``base + k`` of this node's DRAM and send
    it to node ``node`` (``x | y << 4``) as one message of :data:`MESSAGE_FLITS`
    flits (the flit is half a DRAM word): the destination word ``dest + k``, then the
    word, low half first. Up to *inflight* reads are in flight, each tagged with its
    slot of a reorder buffer (the bank controller may answer out of order); the
    messages leave in order, one as soon as the network interface takes the one
    before (a message a :data:`MESSAGE_FLITS` cycles at the link's flit rate), so the
    DRAM's read latency is paid once per ``SEND``, not once per word.

    Receiving runs whatever the task list does (so that two nodes sending to each
    other never wait on each other): every message that arrives is written to the
    DRAM word it names, and ``received`` counts the words written since reset (the
    ``WAIT`` task waits for it).

    Parameters
    ----------
    link : NoCLink.Signature
        The mesh's links (``flit_bits`` = half the DRAM word).
    packet_flits : int
        The network interface's longest message (at least :data:`MESSAGE_FLITS`).
    port : VaultPortSignature
        The node's DRAM port; its tag must hold a reorder-buffer slot.
    inflight : int
        Reads in flight (a power of two).

    Attributes
    ----------
    task : In(TASK_LAYOUT)
    start : In(1)
    busy, stall : Out(1)
        A ``SEND`` is running; it has no word read to send (waits for the DRAM).
    rd_dram, wr_dram : Out(port)
        Reads of the words sent; writes of the words received.
    send : Out(stream.Signature(send_layout))
        Messages to the network interface.
    recv : In(stream.Signature(recv_layout))
        Messages from it.
    received, sent : Out(32)
        Words written from the network, words sent.
    """

    def __init__(self, *, link: NoCLink.Signature, packet_flits: int,
                 port: VaultPortSignature, inflight: int = 8):
        check_pow2("inflight", inflight, 1, 256)
        check(port.tag_bits >= exact_log2(inflight), "port.tag_bits", port.tag_bits,
              f"at least {exact_log2(inflight)} (a reorder-buffer slot of {inflight})")
        check(packet_flits >= MESSAGE_FLITS, "packet_flits", packet_flits,
              f"at least {MESSAGE_FLITS} (an address flit and a DRAM word in two flits)")
        check(port.data_bits == 2 * link.flit_bits, "link.flit_bits", link.flit_bits,
              f"half the DRAM word ({port.data_bits // 2} bits)")
        check(link.flit_bits >= port.row_bits + port.col_bits, "link.flit_bits",
              link.flit_bits, "wide enough for a DRAM word address")
        self.link, self.packet_flits, self.port = link, packet_flits, port
        self.inflight = inflight
        super().__init__({
            "task": In(TASK_LAYOUT), "start": In(1), "busy": Out(1), "stall": Out(1),
            "rd_dram": Out(port), "wr_dram": Out(port),
            "send": Out(stream.Signature(send_layout(link, packet_flits))),
            "recv": In(stream.Signature(recv_layout(link, packet_flits))),
            "received": Out(32), "sent": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        B = self.link.flit_bits
        cb, rb = self.port.col_bits, self.port.row_bits
        t = self.task

        def addr(req, a):
            return [req.payload.col.eq(a[:cb]), req.payload.row.eq(a[cb:cb + rb]),
                    req.payload.bank.eq(0), req.payload.cls.eq(1)]

        # ---- receive: each message is one DRAM write ----------------------------------
        wr, msg = self.wr_dram.req, self.recv.payload
        m.d.comb += [wr.valid.eq(self.recv.valid), wr.payload.we.eq(1),
                     *addr(wr, msg.data[:B]), wr.payload.data.eq(msg.data[B:3 * B]),
                     self.recv.ready.eq(wr.ready), self.wr_dram.resp.ready.eq(1)]
        with m.If(wr.valid & wr.ready):
            m.d.sync += self.received.eq(self.received + 1)

        # ---- send: reads issued ahead, messages popped in order ---------------------
        Q = self.inflight
        qb = exact_log2(Q)
        rd, resp = self.rd_dram.req, self.rd_dram.resp
        iss = Signal(16)        # words whose read was issued
        pop = Signal(16)        # words sent
        rob = m.submodules.rob = Memory(shape=2 * B, depth=Q, init=[])
        rob_w = rob.write_port()
        rob_r = rob.read_port(domain="comb")
        rob_v = Signal(Q)
        running = Signal()
        got = resp.valid & ~resp.payload.we
        slot = pop[:qb] if qb else 0
        head_ok = rob_v.bit_select(slot, 1)
        m.d.comb += [resp.ready.eq(1), *addr(rd, t.base + iss),
                     rd.payload.tag.eq(iss[:qb] if qb else 0),
                     rob_w.addr.eq(resp.payload.tag[:qb] if qb else 0),
                     rob_w.data.eq(resp.payload.data), rob_w.en.eq(running & got),
                     rob_r.addr.eq(slot)]
        out = self.send.payload
        head = Signal(B)        # the address flit, exactly one flit wide
        m.d.comb += [head.eq(t.dest + pop), out.dest_x.eq(t.node[:4]),
                     out.dest_y.eq(t.node[4:8]), out.flits.eq(MESSAGE_FLITS),
                     out.data.eq(Cat(head, rob_r.data))]
        ahead = Signal(16)
        m.d.comb += ahead.eq(iss - pop)
        with m.If(self.start & ~running):
            m.d.sync += [running.eq(1), iss.eq(0), pop.eq(0), rob_v.eq(0)]
        with m.If(running):
            m.d.comb += [self.busy.eq(1), self.stall.eq(~head_ok),
                         rd.valid.eq((iss != t.count) & (ahead < Q)),
                         self.send.valid.eq(head_ok)]
            with m.If(pop == t.count):
                m.d.sync += running.eq(0)
            with m.If(rd.valid & rd.ready):
                m.d.sync += iss.eq(iss + 1)
            with m.If(got):
                m.d.sync += rob_v.bit_select(resp.payload.tag[:qb] if qb else 0, 1).eq(1)
            with m.If(self.send.valid & self.send.ready):
                m.d.sync += [pop.eq(pop + 1), self.sent.eq(self.sent + 1),
                             rob_v.bit_select(slot, 1).eq(0)]
        return m
