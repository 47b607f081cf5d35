"""Network interface: messages in and out of the mesh, cut into and rebuilt from flits."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.crossbar import rr_pick
from ..params import check, check_bool, check_int
from .flit import NoCLink

__all__ = ["NetworkInterface", "from_config", "recv_layout", "send_layout"]


def send_layout(link: NoCLink.Signature, packet_flits: int) -> data.StructLayout:
    """A message to send: destination column and row, length in flits, data (flit ``i``
    carries ``data[i * flit_bits:(i + 1) * flit_bits]``)."""
    fl = link.flit_layout
    return data.StructLayout({
        "dest_x": fl["dest_x"].shape, "dest_y": fl["dest_y"].shape,
        "flits": ceil_log2(packet_flits + 1), "data": packet_flits * link.flit_bits})


def recv_layout(link: NoCLink.Signature, packet_flits: int) -> data.StructLayout:
    """A received message: source node (``y * cols + x``), length in flits, data."""
    return data.StructLayout({
        "src": link.flit_layout["src"].shape, "flits": ceil_log2(packet_flits + 1),
        "data": packet_flits * link.flit_bits})


class NetworkInterface(wiring.Component):
    """Sends messages of 1 to ``packet_flits`` flits into the mesh and rebuilds the
    messages that arrive, with one send and one receive stream per message class.

    Sending: the message on ``send[c]`` goes out one flit per cycle (head first,
    the routing fields on every flit) while the router's local input has a
    credit for its VC; ``send[c].ready`` rises with its tail. Class ``c`` owns
    the VCs ``c * vcs/classes`` up to the next class's. Without ``ordered``, a
    message takes the next VC of its class (round robin) that has a credit, and
    the routers give it any free VC of its class on every hop, as BookSim's
    sources and routers do: messages of one flow may overtake one another, so a
    protocol that needs no order (NicePIM's data sharing: every message names
    its destination word; iPIM's ``req``: replies carry their tag) gets the
    network's full throughput. With ``ordered``, the VC is fixed per destination
    node and the flits say ``ordered``, so that the routers keep the packet on
    that VC index on every hop: the messages of one (source, destination,
    class) flow cannot overtake one another and arrive in order, with no
    reorder buffer (which would need sequence numbers and a receive window per
    flow). The classes' messages interleave flit by flit
    (round robin among those with a credit), so a message waiting for credits
    never holds back another class. ``flits`` = 0 is sent as one flit.

    Receiving: every VC has a ``depth``-flit FIFO (the credits the router's
    local output starts with; a credit goes back as a flit leaves the FIFO) and
    a reassembly register; whole messages of class ``c`` leave on ``recv[c]``,
    its VCs served round robin. With requests and replies in two classes, a
    node that takes no request while its reply waits to be sent cannot block
    the replies it needs itself (no protocol deadlock): iPIM's remote ``req``
    is a class-0 request answered by a class-1 reply.

    Parameters
    ----------
    link : NoCLink.Signature
        The mesh's links.
    depth : int
        Flits per VC buffer of the routers (credits of the local input; the
        size of this interface's receive FIFOs).
    packet_flits : int
        Longest message in flits.
    classes : int
        Message classes (1 or 2); ``link.vcs`` must be a multiple of it.
    ordered : bool
        Keep every flow's messages in order (see above).

    Attributes
    ----------
    node : In
        This node's index ``y * cols + x`` (the ``src`` of what it sends).
    send : In(stream.Signature(send_layout)).array(classes)
    recv : Out(stream.Signature(recv_layout)).array(classes)
    net_out : Out(link)
        To the router's local input (``Mesh.local_in[node]``).
    net_in : In(link)
        From the router's local output (``Mesh.local_out[node]``).
    """

    def __init__(self, *, link: NoCLink.Signature, depth: int, packet_flits: int,
                 classes: int = 1, ordered: bool = False):
        if not isinstance(link, NoCLink.Signature):
            raise TypeError(f"link must be a NoCLink.Signature, not {link!r}")
        check_int("depth", depth, 1, 64)
        check_int("packet_flits", packet_flits, 1, 16)
        check_int("classes", classes, 1, 2)
        check(link.vcs % classes == 0, "classes", classes,
              f"a divisor of the link's {link.vcs} VCs")
        check_bool("ordered", ordered)
        self.ordered = ordered
        self.link, self.depth = link, depth
        self.packet_flits, self.classes = packet_flits, classes
        self.send_layout = send_layout(link, packet_flits)
        self.recv_layout = recv_layout(link, packet_flits)
        super().__init__({
            "node": In(link.flit_layout["src"].shape),
            "send": In(stream.Signature(self.send_layout)).array(classes),
            "recv": Out(stream.Signature(self.recv_layout)).array(classes),
            "net_out": Out(link),
            "net_in": In(link),
        })

    def elaborate(self, platform):
        m = Module()
        V, D, F, B = self.link.vcs, self.depth, self.packet_flits, self.link.flit_bits
        C = self.classes
        per = V // C
        cols = self.link.cols
        ib = ceil_log2(F + 1)
        fl = self.link.flit_layout
        out = self.net_out

        # --- send: one engine per class, the link shared flit by flit ---
        cred = [Signal(range(D + 1), init=D, name=f"cred_v{v}") for v in range(V)]
        ready = []
        flits = []
        vcs = []
        lasts = []
        idxs = []
        heads = []
        for c in range(C):
            msg = self.send[c].payload
            vc = Signal(fl["vc"].shape, name=f"send{c}_vc")
            idx = Signal(ib, name=f"send{c}_idx")
            last = Signal(name=f"send{c}_last")
            m.d.comb += last.eq(idx + 1 >= msg.flits)
            ok = Signal(name=f"send{c}_ok")
            first = Signal(name=f"send{c}_first")     # this class's head flit goes out
            heads.append(first)
            if self.ordered:
                dest = msg.dest_y * cols + msg.dest_x
                m.d.comb += vc.eq(c * per + (dest % per if per > 1 else 0))
                m.d.comb += ok.eq(self.send[c].valid &
                                  Cat(*[(vc == v) & (cred[v] != 0) for v in range(V)]).any())
            else:
                # The head takes the next VC of the class with a credit; the body
                # flits follow on the VC the head took.
                cur = Signal(fl["vc"].shape, name=f"send{c}_cur")
                mine = range(c * per, (c + 1) * per)
                any_, g = rr_pick(m, [cred[v] != 0 for v in mine], first, f"send{c}_vcs")
                hvc = Signal(fl["vc"].shape, name=f"send{c}_hvc")
                for gv, v in zip(g, mine, strict=True):
                    with m.If(gv):
                        m.d.comb += hvc.eq(v)
                with m.If(first):
                    m.d.sync += cur.eq(hvc)
                m.d.comb += [
                    vc.eq(Mux(idx == 0, hvc, cur)),
                    ok.eq(self.send[c].valid & Mux(
                        idx == 0, any_, Cat(*[(cur == v) & (cred[v] != 0) for v in mine]).any())),
                ]
            pay = Signal(B, name=f"send{c}_payload")
            m.d.comb += pay.eq(msg.data[:B])
            for i in range(1, F):
                with m.If(idx == i):
                    m.d.comb += pay.eq(msg.data[i * B:(i + 1) * B])
            ready.append(ok)
            flits.append(pay)
            vcs.append(vc)
            lasts.append(last)
            idxs.append(idx)
        _, grant = rr_pick(m, ready, out.valid, "send")
        sent_vc = [Signal(name=f"sent_v{v}") for v in range(V)]
        for c in range(C):
            with m.If(grant[c]):
                msg = self.send[c].payload
                m.d.comb += [out.valid.eq(1), out.flit.payload.eq(flits[c]),
                             out.flit.vc.eq(vcs[c]), out.flit.head.eq(idxs[c] == 0),
                             out.flit.tail.eq(lasts[c]), out.flit.ordered.eq(self.ordered),
                             heads[c].eq(idxs[c] == 0), out.flit.dest_x.eq(msg.dest_x),
                             out.flit.dest_y.eq(msg.dest_y), out.flit.src.eq(self.node),
                             self.send[c].ready.eq(lasts[c])]
                m.d.sync += idxs[c].eq(Mux(lasts[c], 0, idxs[c] + 1))
                for v in range(V):
                    with m.If(vcs[c] == v):
                        m.d.comb += sent_vc[v].eq(1)
        for v in range(V):
            with m.If(out.credit[v] & ~sent_vc[v]):
                m.d.sync += cred[v].eq(cred[v] + 1)
            with m.Elif(~out.credit[v] & sent_vc[v]):
                m.d.sync += cred[v].eq(cred[v] - 1)

        # --- receive: a FIFO and a reassembly register per VC, a stream per class ---
        done = [Signal(name=f"done_v{v}") for v in range(V)]
        count = [Signal(ib, name=f"count_v{v}") for v in range(V)]
        buf = [Signal(F * B, name=f"buf_v{v}") for v in range(V)]
        src = [Signal(fl["src"].shape, name=f"src_v{v}") for v in range(V)]
        for v in range(V):
            f = SyncFIFO(width=fl.size, depth=D)
            m.submodules[f"rx_v{v}"] = f
            m.d.comb += [f.w_en.eq(self.net_in.valid & (self.net_in.flit.vc == v)),
                         f.w_data.eq(self.net_in.flit.as_value())]
            h = data.View(fl, f.r_data)
            take = Signal(name=f"take_v{v}")
            m.d.comb += [take.eq(f.r_rdy & ~done[v]), f.r_en.eq(take),
                         self.net_in.credit[v].eq(take)]
            with m.If(take):
                m.d.sync += [count[v].eq(count[v] + 1), src[v].eq(h.src)]
                for i in range(F):
                    with m.If(count[v] == i):
                        m.d.sync += buf[v][i * B:(i + 1) * B].eq(h.payload)
                with m.If(h.tail):
                    m.d.sync += done[v].eq(1)
        for c in range(C):
            recv = self.recv[c]
            mine = range(c * per, (c + 1) * per)
            fire = Signal(name=f"recv{c}_fire")
            any_, grant = rr_pick(m, [done[v] for v in mine], fire, f"recv{c}")
            m.d.comb += [recv.valid.eq(any_), fire.eq(recv.valid & recv.ready)]
            for g, v in zip(grant, mine, strict=True):
                with m.If(g):
                    m.d.comb += [recv.payload.src.eq(src[v]), recv.payload.flits.eq(count[v]),
                                 recv.payload.data.eq(buf[v])]
                    with m.If(fire):
                        m.d.sync += [done[v].eq(0), count[v].eq(0), buf[v].eq(0)]
        return m


def from_config(cfg) -> NetworkInterface:
    """The network interface of ``cfg.noc`` (its node number is an input)."""
    n = cfg.noc
    return NetworkInterface(
        link=NoCLink.Signature(rows=n.rows, cols=n.cols, vcs=n.vcs, flit_bits=n.flit_bits),
        depth=n.buffer_depth, packet_flits=n.packet_flits, classes=n.classes)
