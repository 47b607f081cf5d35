"""A rows x cols mesh of routers whose local ports are the mesh's ports."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check, check_bool, check_int
from .flit import EAST, LOCAL, NORTH, SOUTH, WEST, NoCLink
from .router import BODY_CYCLES_PER_HOP, HEAD_CYCLES_PER_HOP, router_leaf

__all__ = ["Mesh", "from_config"]

_STEP = {EAST: (1, 0), WEST: (-1, 0), NORTH: (0, -1), SOUTH: (0, 1)}
_OPPOSITE = {EAST: WEST, WEST: EAST, NORTH: SOUTH, SOUTH: NORTH}


class Mesh(wiring.Component):
    """A 2D mesh of :class:`~pimforge.rtl.noc.router.Router` with XY routing.

    Node ``n = y * cols + x`` is the router at column ``x``, row ``y``; its
    local ports are ``local_in[n]`` (flits into the network, credits back) and
    ``local_out[n]`` (flits out of the network, credits from the node). The
    ports at the edge of the mesh are left unconnected: XY routing never uses
    them for a destination inside the mesh.

    Parameters
    ----------
    link : NoCLink.Signature
        Mesh size, VCs and flit width.
    depth : int
        Flits per input VC buffer.
    classes : int
        Message classes of the routers' VC allocation (see :class:`Router`).
    probes : bool
        Also publish every router-to-router link on ``probe`` (for monitors
        that check routes and credits; off in designs).

    Attributes
    ----------
    local_in : In(link).array(nodes)
    local_out : Out(link).array(nodes)
    overflow : Out(1)
        Some router received a flit for a full buffer (a credit-protocol error).
    probe : Out(probe_layout).array(len(probe_links)), only with ``probes``
        ``valid``, ``flit`` and ``credit`` of each link of :attr:`probe_links`.
    probe_links : list of (node, port)
        The links on ``probe``: output ``port`` of router ``node``.
    """

    def __init__(self, *, link: NoCLink.Signature, depth: int, classes: int = 1,
                 probes: bool = False):
        if not isinstance(link, NoCLink.Signature):
            raise TypeError(f"link must be a NoCLink.Signature, not {link!r}")
        check_int("depth", depth, 1, 64)
        check_int("classes", classes, 1, 2)
        check(link.vcs % classes == 0, "classes", classes,
              f"a divisor of the link's {link.vcs} VCs")
        check_bool("probes", probes)
        self.link, self.depth, self.probes = link, depth, probes
        self.classes = classes
        self.rows, self.cols = link.rows, link.cols
        self.nodes = link.rows * link.cols
        self.probe_links = [(y * self.cols + x, d) for y in range(self.rows)
                            for x in range(self.cols) for d in (EAST, WEST, NORTH, SOUTH)
                            if self._inside(x + _STEP[d][0], y + _STEP[d][1])]
        self.probe_layout = data.StructLayout({"valid": 1, "flit": link.flit_layout,
                                               "credit": link.vcs})
        self.latencies = {"head_cycles_per_hop": HEAD_CYCLES_PER_HOP,
                          "body_cycles_per_hop": BODY_CYCLES_PER_HOP}
        ports = {"local_in": In(link).array(self.nodes),
                 "local_out": Out(link).array(self.nodes),
                 "overflow": Out(1)}
        if probes:
            ports["probe"] = Out(self.probe_layout).array(len(self.probe_links))
        super().__init__(ports)

    def _inside(self, x: int, y: int) -> bool:
        return 0 <= x < self.cols and 0 <= y < self.rows

    def elaborate(self, platform):
        m = Module()
        xb, yb = max(1, ceil_log2(self.cols)), max(1, ceil_log2(self.rows))
        routers = []
        for n in range(self.nodes):
            y, x = divmod(n, self.cols)
            r = router_leaf(link=self.link, depth=self.depth, classes=self.classes)
            m.submodules[f"r{n}"] = r
            m.d.comb += [r.x.eq(Const(x, xb)), r.y.eq(Const(y, yb))]
            wiring.connect(m, wiring.flipped(self.local_in[n]), r.inp[LOCAL])
            wiring.connect(m, r.out[LOCAL], wiring.flipped(self.local_out[n]))
            routers.append(r)
        for n, d in self.probe_links:
            y, x = divmod(n, self.cols)
            nb = (y + _STEP[d][1]) * self.cols + x + _STEP[d][0]
            wiring.connect(m, routers[n].out[d], routers[nb].inp[_OPPOSITE[d]])
        if self.probes:
            for k, (n, d) in enumerate(self.probe_links):
                o = routers[n].out[d]
                m.d.comb += [self.probe[k].valid.eq(o.valid), self.probe[k].flit.eq(o.flit),
                             self.probe[k].credit.eq(o.credit)]
        m.d.comb += self.overflow.eq(Cat(*[r.overflow for r in routers]).any())
        return m


def from_config(cfg, *, probes: bool = False) -> Mesh:
    """The ``cfg.noc.rows`` x ``cfg.noc.cols`` mesh."""
    n = cfg.noc
    return Mesh(link=NoCLink.Signature(rows=n.rows, cols=n.cols, vcs=n.vcs,
                                       flit_bits=n.flit_bits),
                depth=n.buffer_depth, classes=n.classes, probes=probes)
