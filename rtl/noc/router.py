"""Input-queued wormhole router with virtual channels, XY routing and credits."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..hierarchy import Leaf, leaf_name
from ..mem.crossbar import rr_pick
from ..params import check, check_int
from .flit import EAST, LOCAL, NORTH, PORTS, SOUTH, WEST, NoCLink

__all__ = ["BODY_CYCLES_PER_HOP", "HEAD_CYCLES_PER_HOP", "Router", "from_config", "router_leaf"]

#: Cycles a head flit spends in a router at zero load (route + VC allocation, then
#: switch allocation + switch and link traversal), and a body flit.
HEAD_CYCLES_PER_HOP, BODY_CYCLES_PER_HOP = 2, 1


class Router(wiring.Component):
    """A 5-port (local, east, west, north, south) mesh router.

    Switching is wormhole per virtual channel: a packet holds an output VC from
    the cycle its head wins it until its tail has left, and its flits follow
    one another through per-input, per-VC FIFOs of ``depth`` flits. VCs are
    allocated per packet and hop, as in BookSim's input-queued router: a packet
    may take any free VC of its output port within its message class (class
    ``c`` owns VCs ``c * vcs/classes`` up to the next class's), and the flit's
    ``vc`` field is rewritten on the way out. Dimension-order routing on a mesh
    has no cyclic channel dependence, so no VC ordering is needed for deadlock
    freedom; the classes keep request and reply traffic apart (protocol
    deadlock). A packet whose head has ``ordered`` set only takes the VC of its
    own index: the packets of a flow that its source sends ordered on one VC
    stay behind one another on every hop, so they arrive in order.

    Two pipeline stages per hop, each one cycle (BookSim's default router is
    not speculative either: ``speculative = 0``, VC allocation before switch
    allocation):

    1. a head flit at the front of its input VC computes its output port by
       dimension-order routing (X first, then Y) and requests that output; a
       round-robin arbiter per output port grants one requesting input VC per
       cycle, which takes the lowest free VC of its class whose downstream buffer
       is empty, else the lowest free one (or its own index if ordered). One
       grant per output and cycle matches the switch, which moves one flit per
       output and cycle.
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
    classes : int
        Message classes; ``link.vcs`` must be a multiple of it.

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

    def __init__(self, *, link: NoCLink.Signature, depth: int, classes: int = 1):
        if not isinstance(link, NoCLink.Signature):
            raise TypeError(f"link must be a NoCLink.Signature, not {link!r}")
        check_int("depth", depth, 1, 64)
        check_int("classes", classes, 1, 2)
        check(link.vcs % classes == 0, "classes", classes,
              f"a divisor of the link's {link.vcs} VCs")
        self.link, self.depth, self.classes = link, depth, classes
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
        per = V // self.classes
        lay = self.link.flit_layout
        vcw = lay["vc"].shape

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

        # Per input VC: the packet at its front holds output VC ovc of output port
        # oport (one-hot; 0 while it holds none). ovc_oh is ovc one-hot.
        oport = [[Signal(P, name=f"op_p{p}_v{v}") for v in range(V)] for p in range(P)]
        ovc = [[Signal(vcw, name=f"ovc_p{p}_v{v}") for v in range(V)] for p in range(P)]
        ovc_oh = [[Signal(V, name=f"ovcoh_p{p}_v{v}") for v in range(V)] for p in range(P)]
        active = [[Signal(name=f"act_p{p}_v{v}") for v in range(V)] for p in range(P)]
        for p in range(P):
            for v in range(V):
                m.d.comb += [active[p][v].eq(oport[p][v].any()),
                             ovc_oh[p][v].eq(1 << ovc[p][v])]
        # Per output port: VCs held by a packet (busy), VCs with a credit left.
        busy = [Signal(V, name=f"busy_o{o}") for o in range(P)]
        cred = [[Signal(range(D + 1), init=D, name=f"cred_o{o}_v{v}") for v in range(V)]
                for o in range(P)]
        cok = [Signal(V, name=f"cok_o{o}") for o in range(P)]
        for o in range(P):
            m.d.comb += cok[o].eq(Cat(*[c != 0 for c in cred[o]]))

        # VC allocation, one packet per output port and cycle (the switch moves at
        # most one flit per output and cycle, so this never limits throughput): a
        # round-robin arbiter per output port over the input VCs whose head flit
        # routes there and for which one of its VCs is free; the winner gets the
        # lowest free VC of its class (an empty one first), or, for an ordered
        # packet, the VC of its own index. vset[o]: the VC granted this cycle
        # (one-hot), to mark it busy.
        vset = [Signal(V, name=f"vset_o{o}") for o in range(P)]
        for o in range(P):
            free = Signal(V, name=f"free_o{o}")
            m.d.comb += free.eq(~busy[o])
            low = []            # per class: lowest free VC (one-hot), any free
            # A free VC whose downstream buffer is empty first: a packet given the VC
            # its predecessor's tail has just left would wait behind that tail in the
            # next router, a cycle per packet on a busy link.
            empty = Signal(V, name=f"empty_o{o}")
            m.d.comb += empty.eq(Cat(*[c == D for c in cred[o]]))
            for c in range(self.classes):
                fc = Signal(V, name=f"free_o{o}_c{c}")
                fe = Signal(V, name=f"freempty_o{o}_c{c}")
                m.d.comb += [fc.eq(free & (((1 << per) - 1) << (c * per))),
                             fe.eq(fc & empty)]
                lo = Signal(V, name=f"low_o{o}_c{c}")
                m.d.comb += lo.eq(Mux(fe.any(), fe & -fe, fc & -fc))
                low.append((lo, fc.any()))
            reqs, picks = [], []
            for p in range(P):
                for v in range(V):
                    lo, anyc = low[v // per]
                    ordered = head[p][v].ordered
                    ok = Mux(ordered, free[v], anyc)
                    rq = Signal(name=f"va_o{o}_p{p}_v{v}_rq")
                    m.d.comb += rq.eq(fifo[p][v].r_rdy & ~active[p][v] & route[p][v][o] & ok)
                    reqs.append(rq)
                    picks.append((p, v, Mux(ordered, 1 << v, lo)))
            _, grant = rr_pick(m, reqs, Const(1), f"va_o{o}")
            for g, (p, v, pick) in zip(grant, picks, strict=True):
                with m.If(g):
                    m.d.comb += vset[o].eq(pick)
                    m.d.sync += oport[p][v].eq(1 << o)
                    for w in range(V):
                        with m.If(pick[w]):
                            m.d.sync += ovc[p][v].eq(w)

        # Switch allocation, input stage: one VC per input port.
        won = [Signal(name=f"won_p{p}") for p in range(P)]
        in_g = []
        want = []
        sel = []
        sel_oh = []
        for p in range(P):
            cand = []
            for v in range(V):
                has_credit = Cat(*[oport[p][v][o] & (cok[o] & ovc_oh[p][v]).any()
                                   for o in range(P)]).any()
                cand.append(active[p][v] & fifo[p][v].r_rdy & has_credit)
            _, g = rr_pick(m, cand, won[p], f"sa_in_p{p}")
            in_g.append(g)
            w = Signal(P, name=f"want_p{p}")
            s = Signal(lay, name=f"sel_p{p}")
            soh = Signal(V, name=f"selvc_p{p}")
            for v in range(V):
                with m.If(g[v]):
                    m.d.comb += [w.eq(oport[p][v]), s.eq(head[p][v]), s.vc.eq(ovc[p][v]),
                                 soh.eq(ovc_oh[p][v])]
            want.append(w)
            sel.append(s)
            sel_oh.append(soh)

        # Switch allocation, output stage: one input port per output port.
        sent = [Signal(V, name=f"sent_o{o}") for o in range(P)]
        for o in range(P):
            out = self.out[o]
            any_, g = rr_pick(m, [want[p][o] for p in range(P)], Const(1), f"sa_out_o{o}")
            m.d.comb += out.valid.eq(any_)
            for p in range(P):
                with m.If(g[p]):
                    m.d.comb += [won[p].eq(1), out.flit.eq(sel[p]), sent[o].eq(sel_oh[p])]
            # A VC is free again the cycle after its packet's tail left (as BookSim
            # without wait_for_tail_credit); the next packet queues behind it downstream.
            rel = Signal(V, name=f"rel_o{o}")
            m.d.comb += rel.eq(Mux(out.valid & out.flit.tail, sent[o], 0))
            m.d.sync += busy[o].eq((busy[o] & ~rel) | vset[o])

        # Leaving flits: pop, return the credit upstream, release the input VC after a tail.
        for p in range(P):
            for v in range(V):
                pop = Signal(name=f"pop_p{p}_v{v}")
                m.d.comb += [pop.eq(won[p] & in_g[p][v]), fifo[p][v].r_en.eq(pop),
                             self.inp[p].credit[v].eq(pop)]
                with m.If(pop & head[p][v].tail):
                    m.d.sync += oport[p][v].eq(0)
        for o in range(P):
            for v in range(V):
                c = cred[o][v]
                back = self.out[o].credit[v]
                with m.If(back & ~sent[o][v]):
                    m.d.sync += c.eq(c + 1)
                with m.Elif(~back & sent[o][v]):
                    m.d.sync += c.eq(c - 1)
        return m


def router_leaf(*, link: NoCLink.Signature, depth: int, classes: int = 1) -> Leaf:
    """A :class:`Router` as one Verilog module that every router of a mesh instantiates."""
    name = leaf_name("noc_router", f"v{link.vcs}", f"d{depth}", f"c{classes}",
                     digest=(link.rows, link.cols, link.vcs, link.flit_bits, depth, classes))
    return Leaf(name, lambda: Router(link=link, depth=depth, classes=classes))


def from_config(cfg) -> Router:
    """One router of ``cfg.noc``'s mesh (its position is an input)."""
    n = cfg.noc
    return Router(link=NoCLink.Signature(rows=n.rows, cols=n.cols, vcs=n.vcs,
                                         flit_bits=n.flit_bits), depth=n.buffer_depth,
                  classes=n.classes)
