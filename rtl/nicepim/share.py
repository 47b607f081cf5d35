"""Data sharing between PIM-nodes: DRAM words sent to another node's DRAM over the NoC."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..mem.port import VaultPortSignature
from ..noc.flit import NoCLink
from ..noc.ni import recv_layout, send_layout
from ..params import check
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
    word, low half first. One word is in flight at a time: a word takes the DRAM
    read latency plus the three flits' injection.

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
        The node's DRAM port.

    Attributes
    ----------
    task : In(TASK_LAYOUT)
    start : In(1)
    busy, stall : Out(1)
        A ``SEND`` is running; it waits for the DRAM or the network.
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
                 port: VaultPortSignature):
        check(packet_flits >= MESSAGE_FLITS, "packet_flits", packet_flits,
              f"at least {MESSAGE_FLITS} (an address flit and a DRAM word in two flits)")
        check(port.data_bits == 2 * link.flit_bits, "link.flit_bits", link.flit_bits,
              f"half the DRAM word ({port.data_bits // 2} bits)")
        check(link.flit_bits >= port.row_bits + port.col_bits, "link.flit_bits",
              link.flit_bits, "wide enough for a DRAM word address")
        self.link, self.packet_flits, self.port = link, packet_flits, port
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

        # ---- send ---------------------------------------------------------------------
        rd, resp = self.rd_dram.req, self.rd_dram.resp
        k = Signal(16)
        word = Signal(2 * B)
        m.d.comb += [resp.ready.eq(1), *addr(rd, t.base + k)]
        out = self.send.payload
        head = Signal(B)        # the address flit, exactly one flit wide
        m.d.comb += [head.eq(t.dest + k), out.dest_x.eq(t.node[:4]), out.dest_y.eq(t.node[4:8]),
                     out.flits.eq(MESSAGE_FLITS), out.data.eq(Cat(head, word))]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += k.eq(0)
                    m.next = "NEXT"
            with m.State("NEXT"):
                m.d.comb += self.busy.eq(1)
                with m.If(k == t.count):
                    m.next = "IDLE"
                with m.Else():
                    m.next = "RD"
            with m.State("RD"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1), rd.valid.eq(1)]
                with m.If(rd.ready):
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1)]
                with m.If(resp.valid & ~resp.payload.we):
                    m.d.sync += word.eq(resp.payload.data)
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [self.busy.eq(1), self.send.valid.eq(1)]
                with m.If(self.send.ready):
                    m.d.sync += [k.eq(k + 1), self.sent.eq(self.sent + 1)]
                    m.next = "NEXT"
                with m.Else():
                    m.d.comb += self.stall.eq(1)
        return m
