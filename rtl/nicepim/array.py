"""The NicePIM accelerator (Fig. 3): NA_row x NA_col PIM-nodes on a 2D mesh."""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ..noc.flit import PORT_NAMES
from ..noc.mesh import Mesh
from ..params import check
from .node import PIMNode, node_kwargs, node_leaf
from .params import TASK_LAYOUT

__all__ = ["NicePIMArray", "from_config"]


class NicePIMArray(wiring.Component):
    """PIM-nodes on a mesh of XY-routed routers, with a flit counter on every link.

    Node ``n`` is at column ``n % cols``, row ``n // cols`` and is the router
    ``n`` of the mesh. Every node is the same Verilog module (its index is an
    input). The host side is each node's task-memory backdoor, its ``start`` and
    ``done``; the DRAM banks are simulation models on ``arr``.

    Parameters
    ----------
    nodes : list of :class:`~pimforge.rtl.nicepim.node.PIMNode` (or leaves of one)
        In node order.
    mesh : Mesh
        ``len(nodes)`` routers, with ``probes`` (the link counters read them).

    Attributes
    ----------
    prog : Out(WritePort.Signature)
        The task memory of node ``prog_node``.
    prog_node : In
    start : In(nodes)
        Bit ``n`` starts node ``n``'s task list.
    done : Out(nodes)
        Bit ``n``: node ``n`` reached its ``END``.
    arr : Out(DRAMArraySignature).array(nodes)
    perf : Out(PIMNode.PerfSignature).array(nodes)
    link_flits : Out(32).array(links)
        Flits that crossed each router-to-router link, in :attr:`links` order.
    links : list of (node, direction)
        The mesh's links: output ``direction`` (``"east"``...) of router ``node``.
    overflow : Out(1)
        A router received a flit for a full buffer (a credit-protocol error).
    """

    def __init__(self, *, nodes: list, mesh: Mesh):
        check(len(nodes) == mesh.nodes and mesh.probes, "mesh", mesh,
              f"a mesh of {len(nodes)} routers with probes")
        self._nodes, self._mesh = list(nodes), mesh
        self.links = [(n, PORT_NAMES[d]) for n, d in mesh.probe_links]
        N = len(nodes)
        proto = nodes[0]
        super().__init__({
            # One task-memory port for all nodes: per-node ports of a 16x16 array would
            # exceed the 65,536 input bits an Amaranth top may have.
            "prog": Out(WritePort.Signature(addr_width=len(proto.prog.addr),
                                            shape=TASK_LAYOUT)),
            "prog_node": In(range(max(2, N))),
            "start": In(N), "done": Out(N),
            "arr": Out(proto.signature.members["arr"].signature).array(N),
            "perf": Out(PIMNode.PerfSignature()).array(N),
            "link_flits": Out(32).array(max(1, len(self.links))),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        mesh = m.submodules.mesh = self._mesh
        done = []
        for n, node in enumerate(self._nodes):
            m.submodules[f"node{n}"] = node
            m.d.comb += [node.node_id.eq(n), node.start.eq(self.start[n])]
            done.append(node.done)
            m.d.comb += [node.prog.en.eq(self.prog.en & (self.prog_node == n)),
                         node.prog.addr.eq(self.prog.addr), node.prog.data.eq(self.prog.data)]
            wiring.connect(m, node.arr, wiring.flipped(self.arr[n]))
            wiring.connect(m, node.perf, wiring.flipped(self.perf[n]))
            wiring.connect(m, node.net_out, mesh.local_in[n])
            wiring.connect(m, mesh.local_out[n], node.net_in)
        m.d.comb += [self.done.eq(Cat(*done)), self.overflow.eq(mesh.overflow)]
        for k in range(len(self.links)):
            cnt = self.link_flits[k]
            with m.If(mesh.probe[k].valid):
                m.d.sync += cnt.eq(cnt + 1)
        return m


def from_config(cfg) -> NicePIMArray:
    """The ``nicepim.na_rows x nicepim.na_cols`` array of ``cfg.nicepim``."""
    kw = node_kwargs(cfg)
    n = cfg.nicepim
    return NicePIMArray(nodes=[node_leaf(**kw) for _ in range(n.nodes)],
                        mesh=Mesh(link=kw["link"], depth=n.noc_buffer_depth, probes=True))
