"""Input-queued wormhole router with virtual channels, XY routing and credits."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..hierarchy import Leaf, leaf_name
from ..mem.crossbar import rr_pick
from ..params import check_int
from .flit import EAST, LOCAL, NORTH, PORTS, SOUTH, WEST, NoCLink

__all__ = ["BODY_CYCLES_PER_HOP", "HEAD_CYCLES_PER_HOP", "Router", "from_config", "router_leaf"]

#: Cycles a head flit spends in a router at zero load (route + VC allocation, then
#: switch allocation + switch and link traversal), and a body flit.
HEAD_CYCLES_PER_HOP, BODY_CYCLES_PER_HOP = 2, 1


class Router(wiring.Component):
    """A 5-port (local, east, west, north, south) mesh router.

    Switching is wormhole per virtual channel: a packet holds an output VC from
    the cycle its head wins it until its tail has left, and its flits follow
    one another through per-input, per-VC FIFOs of ``depth`` flits. A packet
    keeps the VC its source gave it on every hop (static VC assignment): the
    VC allocator only arbitrates between the inputs whose head flits want the
    same VC of the same output, so the packets of one flow (one source, one
    destination, one VC) stay in order, and the source chooses the VC (by
    message class and flow).

    Two pipeline stages per hop, each one cycle:

    1. a head flit at the front of its input VC computes its output port by
       dimension-order routing (X first, then Y) and requests that output's VC
       of the same index; a round-robin arbiter per output VC grants one input.
    2. separable switch allocation, input first: each input port picks one of
       its VCs that holds an allocated packet, a flit and a credit for its
       output VC (round robin), then each output port picks one of the inputs
       that want it (round robin). The winner leaves its FIFO and crosses the
       switch and the link in the same cycle, into the next router's buffer;
       its credit goes back to the upstream sender in that cycle too.

    A head flit thus spends two cycles per router at zero load, body flits one.
    Each output VC keeps a credit counter (``depth`` at reset) that a sent flit
    decrements and a returned credit increments; a credit returns one cycle
    after the flit left, so ``depth`` >= 2 sustains one flit per cycle per VC.

    The router's position comes in on the ``x``/``y`` inputs (constants in a
    mesh), so that every router of a mesh is the same Verilog module.

    Parameters
    ----------
    link : NoCLink.Signature
        The links (mesh size, VCs, flit width).
    depth : int
        Flits per input VC buffer (= credits per output VC).

    Attributes
    ----------
    x, y : In
        Column and row of this router.
    inp : In(link).array(5)
        Input ports, indexed by ``LOCAL, EAST, WEST, NORTH, SOUTH`` (the port
        that faces that neighbour).
    out : Out(link).array(5)
        Output ports, same indices.
    overflow : Out(1)
        Sticky: a flit arrived for a full buffer (its sender broke the credit
        protocol); the flit was dropped.
    """

    def __init__(self, *, link: NoCLink.Signature, depth: int):
        if not isinstance(link, NoCLink.Signature):
            raise TypeError(f"link must be a NoCLink.Signature, not {link!r}")
        check_int("depth", depth, 1, 64)
        self.link, self.depth = link, depth
        self.vcs = link.vcs
        self.latencies = {"head_cycles_per_hop": HEAD_CYCLES_PER_HOP,
                          "body_cycles_per_hop": BODY_CYCLES_PER_HOP}
        super().__init__({
            "x": In(max(1, ceil_log2(link.cols))),
            "y": In(max(1, ceil_log2(link.rows))),
            "inp": In(link).array(PORTS),
            "out": Out(link).array(PORTS),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        P, V, D = PORTS, self.vcs, self.depth
        lay = self.link.flit_layout

        # Input buffers, one FIFO per input port and VC.
        head = [[None] * V for _ in range(P)]
        fifo = [[None] * V for _ in range(P)]
        overflow = Signal()
        for p in range(P):
            inp = self.inp[p]
            for v in range(V):
                f = fifo[p][v] = SyncFIFO(width=lay.size, depth=D)
                m.submodules[f"fifo_p{p}_v{v}"] = f
                w = Signal(name=f"w_p{p}_v{v}")
                m.d.comb += [w.eq(inp.valid & (inp.flit.vc == v)),
                             f.w_en.eq(w), f.w_data.eq(inp.flit.as_value())]
                with m.If(w & ~f.w_rdy):
                    m.d.sync += overflow.eq(1)
                head[p][v] = data.View(lay, f.r_data)
        m.d.comb += self.overflow.eq(overflow)

        # Route computation: one-hot output port of each input VC's head flit.
        route = [[None] * V for _ in range(P)]
        for p in range(P):
            for v in range(V):
                h = head[p][v]
                east, west = h.dest_x > self.x, h.dest_x < self.x
                north, south = h.dest_y < self.y, h.dest_y > self.y
                r = [Signal(name=f"rt_p{p}_v{v}_o{o}") for o in range(P)]
                m.d.comb += [
                    r[EAST].eq(east), r[WEST].eq(west),
                    r[NORTH].eq(~east & ~west & north), r[SOUTH].eq(~east & ~west & south),
                    r[LOCAL].eq(~east & ~west & ~north & ~south),
                ]
                route[p][v] = r

        # Per input VC: a packet holds an output VC (active) on output port oport.
        active = [[Signal(name=f"act_p{p}_v{v}") for v in range(V)] for p in range(P)]
        oport = [[Signal(P, name=f"op_p{p}_v{v}") for v in range(V)] for p in range(P)]
        busy = [[Signal(name=f"busy_o{o}_v{v}") for v in range(V)] for o in range(P)]
        cred = [[Signal(range(D + 1), init=D, name=f"cred_o{o}_v{v}") for v in range(V)]
                for o in range(P)]

        # VC allocation: per output port and VC, round robin over the input ports.
        for o in range(P):
            for v in range(V):
                reqs = [fifo[p][v].r_rdy & ~active[p][v] & route[p][v][o] & ~busy[o][v]
                        for p in range(P)]
                any_, grant = rr_pick(m, reqs, Const(1), f"va_o{o}_v{v}")
                with m.If(any_):
                    m.d.sync += busy[o][v].eq(1)
                for p in range(P):
                    with m.If(grant[p]):
                        m.d.sync += [active[p][v].eq(1), oport[p][v].eq(1 << o)]

        # Switch allocation, input stage: one VC per input port.
        won = [Signal(name=f"won_p{p}") for p in range(P)]
        in_g = []
        want = []
        sel = []
        for p in range(P):
            cand = []
            for v in range(V):
                has_credit = Cat(*[oport[p][v][o] & (cred[o][v] != 0) for o in range(P)]).any()
                cand.append(active[p][v] & fifo[p][v].r_rdy & has_credit)
            _, g = rr_pick(m, cand, won[p], f"sa_in_p{p}")
            in_g.append(g)
            w = Signal(P, name=f"want_p{p}")
            s = Signal(lay, name=f"sel_p{p}")
            for v in range(V):
                with m.If(g[v]):
                    m.d.comb += [w.eq(oport[p][v]), s.eq(head[p][v])]
            want.append(w)
            sel.append(s)

        # Switch allocation, output stage: one input port per output port.
        sent = [[Signal(name=f"sent_o{o}_v{v}") for v in range(V)] for o in range(P)]
        for o in range(P):
            out = self.out[o]
            any_, g = rr_pick(m, [want[p][o] for p in range(P)], Const(1), f"sa_out_o{o}")
            m.d.comb += out.valid.eq(any_)
            for p in range(P):
                with m.If(g[p]):
                    m.d.comb += [won[p].eq(1), out.flit.eq(sel[p])]
                    for v in range(V):
                        m.d.comb += sent[o][v].eq(in_g[p][v])

        # Leaving flits: pop, return the credit upstream, release the VC after a tail.
        for p in range(P):
            for v in range(V):
                pop = Signal(name=f"pop_p{p}_v{v}")
                m.d.comb += [pop.eq(won[p] & in_g[p][v]), fifo[p][v].r_en.eq(pop),
                             self.inp[p].credit[v].eq(pop)]
                with m.If(pop & head[p][v].tail):
                    m.d.sync += active[p][v].eq(0)
                    for o in range(P):
                        with m.If(oport[p][v][o]):
                            m.d.sync += busy[o][v].eq(0)
        for o in range(P):
            for v in range(V):
                c = cred[o][v]
                back = self.out[o].credit[v]
                with m.If(back & ~sent[o][v]):
                    m.d.sync += c.eq(c + 1)
                with m.Elif(~back & sent[o][v]):
                    m.d.sync += c.eq(c - 1)
        return m


def router_leaf(*, link: NoCLink.Signature, depth: int) -> Leaf:
    """A :class:`Router` as one Verilog module that every router of a mesh instantiates."""
    name = leaf_name("noc_router", f"v{link.vcs}", f"d{depth}",
                     digest=(link.rows, link.cols, link.vcs, link.flit_bits, depth))
    return Leaf(name, lambda: Router(link=link, depth=depth))


def from_config(cfg) -> Router:
    """One router of ``cfg.noc``'s mesh (its position is an input)."""
    n = cfg.noc
    return Router(link=NoCLink.Signature(rows=n.rows, cols=n.cols, vcs=n.vcs,
                                         flit_bits=n.flit_bits), depth=n.buffer_depth)
