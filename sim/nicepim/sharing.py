"""The Data-Scheduler (Sec. VII): Hamilton-cycle data sharing and the ILP that balances the NoC.

A *sharing set* is a set of PIM-nodes that each hold one part of a piece of
data and must all end up with the whole of it (Definition 1). With
Hamilton-cycle sharing the nodes of a set are put on a directed cycle; in each
of ``N - 1`` steps every node sends the part it received last (its own, in the
first step) to its successor, so every node sends and receives the same amount.
The route from a node to its successor is the mesh's XY route, so the cycle
decides which links each step loads. The ILP of Sec. VII chooses the cycles of
all the sets that share at the same time so that the busiest router-to-router
link carries the fewest cycle edges:

* binary ``C[s, a, b]``: node ``b`` follows node ``a`` on the cycle of set ``s``;
* degree constraints (2): one successor and one predecessor per node;
* Miller-Tucker-Zemlin subtour elimination (3) with order variables
  ``U[s, a]`` in ``[1, N - 1]`` for every node but the set's first;
* the objective: minimize ``z`` with ``sum Ps(a, b, link) C[s, a, b] <= z`` for
  every link, ``Ps`` being 1 where the XY route from ``a`` to ``b`` uses it.

It is solved with HiGHS (:mod:`highspy`), single-threaded and seeded, from a warm
start (the TSP cycles improved by a seeded local search that flips cycle directions
and reverses cycle segments, and on big models by seeded annealing runs). What ends
the search is counted work, not time: a fixed number of annealing runs and moves, and
a limit on the solver's branch-and-bound nodes (:data:`MIP_NODES`), so the same
inputs and seed give the same schedule however loaded the machine is; the remaining
optimality gap is reported. The time limit (model building included) is a cap on
the wall time only: a search it stops early is marked ``time_limited`` (its result
then depends on the machine's speed).

The baselines of Fig. 12: **TSP** puts each set on its minimum-hop Hamilton cycle
(solved exactly, per set, without looking at the other sets; congruent sets get
the same cycle, as the same solver returns the same tour for the same instance),
and **SHP** sends every node's part to every other node of its set along the
shortest (XY) path, with no forwarding.

Loads are counted in flits: a node's part is ``ceil(8 B / flit_bits)`` flits;
a Hamilton schedule puts ``(N - 1)`` parts on a link per cycle edge routed
through it, SHP one part per (source, destination) pair routed through it.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.errors import PimforgeError, ToolMissingError
from pimforge.rtl.noc.flit import EAST, NORTH, SOUTH, WEST
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

__all__ = ["ANNEAL_MOVES", "ANNEAL_RUNS", "METHODS", "MIP_NODES", "SNAKE_NODES", "Mesh",
           "Schedule", "SetLoads", "SharingError", "check_ilp_size", "hamilton_edges",
           "ilp_size", "link_loads", "schedule", "schedule_ilp", "schedule_shp",
           "schedule_tsp", "set_loads", "set_shape", "sharing_sets", "size_warning",
           "snake_cycle", "valid_cycle"]

METHODS = ("ilp", "tsp", "shp")


class SharingError(PimforgeError):
    """A data-sharing problem that cannot be laid out (mesh, set size, stride)."""


@dataclass(frozen=True)
class Mesh:
    """A ``rows x cols`` mesh with XY routing; node ``y * cols + x`` is at column x, row y.

    A directed router-to-router link is ``(node, direction)`` with the directions of
    :mod:`pimforge.rtl.noc.flit` (the port it leaves by).
    """

    rows: int
    cols: int

    def __post_init__(self):
        if not (1 <= self.rows <= 64 and 1 <= self.cols <= 64 and self.rows * self.cols >= 2):
            raise SharingError(f"the mesh must have 1 to 64 rows and columns and at least 2 "
                               f"nodes, not {self.rows}x{self.cols}")

    @property
    def nodes(self) -> int:
        return self.rows * self.cols

    def xy(self, node: int) -> tuple[int, int]:
        return node % self.cols, node // self.cols

    def hops(self, a: int, b: int) -> int:
        """Manhattan distance: the links of the XY route."""
        (ax, ay), (bx, by) = self.xy(a), self.xy(b)
        return abs(ax - bx) + abs(ay - by)

    def route(self, a: int, b: int) -> list[tuple[int, int]]:
        """The links of the XY route from *a* to *b* (X first, then Y)."""
        x, y = self.xy(a)
        tx, ty = self.xy(b)
        out = []
        while x != tx:
            d = EAST if tx > x else WEST
            out.append((y * self.cols + x, d))
            x += 1 if d == EAST else -1
        while y != ty:
            d = SOUTH if ty > y else NORTH
            out.append((y * self.cols + x, d))
            y += 1 if d == SOUTH else -1
        return out

    def links(self) -> list[tuple[int, int]]:
        """Every directed router-to-router link."""
        out = []
        for n in range(self.nodes):
            x, y = self.xy(n)
            if x + 1 < self.cols:
                out.append((n, EAST))
            if x > 0:
                out.append((n, WEST))
            if y > 0:
                out.append((n, NORTH))
            if y + 1 < self.rows:
                out.append((n, SOUTH))
        return out


def set_shape(set_size: int, rows: int, cols: int, stride: int) -> tuple[int, int]:
    """The ``h x w`` grid of a sharing set: ``h w = set_size``, as square as possible,
    with ``h * stride`` dividing *rows* and ``w * stride`` dividing *cols*."""
    if set_size < 2:
        raise SharingError(f"--set-size must be at least 2, not {set_size}")
    if stride < 1:
        raise SharingError(f"--stride must be at least 1, not {stride}")
    shapes = [(h, set_size // h) for h in range(1, set_size + 1) if set_size % h == 0]
    fits = [(h, w) for h, w in shapes if rows % (h * stride) == 0 and cols % (w * stride) == 0]
    if not fits:
        raise SharingError(
            f"sets of {set_size} nodes at stride {stride} do not tile a {rows}x{cols} mesh: "
            f"need h x w = {set_size} with h*{stride} dividing {rows} and w*{stride} "
            f"dividing {cols}")
    return min(fits, key=lambda hw: (abs(hw[0] - hw[1]), -hw[1]))


def sharing_sets(mesh: Mesh, set_size: int, stride: int) -> list[tuple[int, ...]]:
    """The sharing sets of Fig. 12's layout: ``h x w`` grids of nodes *stride* apart,
    interleaved (``stride^2`` sets per ``h*stride x w*stride`` block) and tiling the
    mesh. Each set lists its nodes row by row."""
    h, w = set_shape(set_size, mesh.rows, mesh.cols, stride)
    out = []
    for by in range(0, mesh.rows, h * stride):
        for bx in range(0, mesh.cols, w * stride):
            for oy in range(stride):
                for ox in range(stride):
                    out.append(tuple((by + oy + stride * i) * mesh.cols + bx + ox + stride * j
                                     for i in range(h) for j in range(w)))
    return out


def valid_cycle(cycle: Sequence[int], members: Sequence[int]) -> bool:
    """*cycle* visits every node of *members* exactly once (a Hamilton cycle of the set)."""
    return len(cycle) == len(members) and sorted(cycle) == sorted(members)


def hamilton_edges(cycle: Sequence[int]) -> list[tuple[int, int]]:
    """The directed edges ``(a, successor of a)`` of a cycle given as its node order."""
    return [(cycle[i], cycle[(i + 1) % len(cycle)]) for i in range(len(cycle))]


def link_loads(mesh: Mesh, pairs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Per link, how many of the (source, destination) *pairs* are routed over it."""
    load: dict[tuple[int, int], int] = {}
    for a, b in pairs:
        for lnk in mesh.route(a, b):
            load[lnk] = load.get(lnk, 0) + 1
    return load


@dataclass
class Schedule:
    """A data-sharing schedule and its model figures.

    Attributes
    ----------
    method : str
        ``ilp``, ``tsp`` or ``shp``.
    mesh : Mesh
    sets : list of tuple of int
        The sharing sets.
    cycles : list of list of int
        The Hamilton cycle of each set (node order); empty for SHP.
    part_flits : int
        Flits of one node's part.
    edge_load : dict
        Per link, the cycle edges (Hamilton) or pairs (SHP) routed over it.
    solve_s : float
        Seconds to find the schedule (the solver's, for ILP and TSP).
    packet_flits : int
        Flits per packet on the network (a part is cut into packets).
    vcs : int
        VCs per router link (one VC costs a link a cycle per packet, see
        :attr:`part_cycles`).
    optimal : bool or None
        ILP: the solver proved the schedule optimal.
    gap : float or None
        ILP: relative gap between the schedule and the solver's lower bound.
    bound : float or None
        ILP: the solver's lower bound on the busiest link's cycle edges.
    notes : list of str
        How the schedule was found (warm start, solver status).
    time_limited : bool
        ILP: the time limit stopped the search before its work limits (annealing
        runs, solver nodes) did, so the schedule depends on the machine's speed.
    """

    method: str
    mesh: Mesh
    sets: list[tuple[int, ...]]
    cycles: list[list[int]]
    part_flits: int
    edge_load: dict[tuple[int, int], int]
    solve_s: float
    packet_flits: int = 16
    vcs: int = 1
    optimal: bool | None = None
    gap: float | None = None
    bound: float | None = None
    notes: list[str] = field(default_factory=list)
    time_limited: bool = False

    @property
    def set_size(self) -> int:
        return len(self.sets[0])

    @property
    def max_edge_load(self) -> int:
        """Cycle edges (Hamilton) or pairs (SHP) on the busiest link."""
        return max(self.edge_load.values(), default=0)

    @property
    def parts_per_edge(self) -> int:
        """Parts a cycle edge (Hamilton: one per step) or a pair (SHP: one) carries."""
        return 1 if self.method == "shp" else self.set_size - 1

    @property
    def link_flits(self) -> dict[tuple[int, int], int]:
        """Flits each link carries over the whole sharing."""
        k = self.parts_per_edge * self.part_flits
        return {lnk: v * k for lnk, v in self.edge_load.items()}

    @property
    def max_link_load(self) -> int:
        """Flits on the busiest router-to-router link."""
        return self.max_edge_load * self.parts_per_edge * self.part_flits

    def pairs(self) -> list[tuple[int, int]]:
        """The (source, destination) transfers: cycle edges, or every ordered pair (SHP)."""
        if self.method == "shp":
            return [(a, b) for s in self.sets for a in s for b in s if a != b]
        return [e for c in self.cycles for e in hamilton_edges(c)]

    @property
    def max_hops(self) -> int:
        return max(self.mesh.hops(a, b) for a, b in self.pairs())

    @property
    def part_cycles(self) -> int:
        """Cycles a link is busy with one part: a flit per cycle, and with one VC one
        more cycle per packet (a head flit spends ``HEAD_CYCLES_PER_HOP`` = 2 cycles in
        a router, and waits for the packet before it to leave the VC). With two or more
        VCs the routers give the next packet another free VC, whose head is allocated
        while the packet before it still streams: no idle cycle between packets."""
        if self.vcs > 1:
            return self.part_flits
        packets = -(-self.part_flits // self.packet_flits)
        return self.part_flits + packets * (HEAD_CYCLES_PER_HOP - 1)

    @property
    def latency_cycles(self) -> int:
        """Model of the sharing's duration in router cycles.

        Hamilton: ``N - 1`` steps; a node sends its step-``t`` part once the part of
        step ``t - 1`` has arrived from its predecessor (and its previous part has
        left). A part crosses the route to the successor in ``l x``
        :attr:`part_cycles` (``l``: the most cycle edges on a link of the route,
        which share it) plus the pipeline ``HEAD_CYCLES_PER_HOP (H + 1) - 1`` of
        its ``H`` hops. The duration is the last arrival of step ``N - 1``.
        SHP: every part leaves at once, so this is a lower bound: the busiest of
        the router links and of each node's injection and ejection port (``N - 1``
        parts) plus the longest pipeline; the RTL adds the head-of-line blocking of
        wormhole packets of many flows on few VCs.
        """
        pc = self.part_cycles

        def pipe(h: int) -> int:
            return HEAD_CYCLES_PER_HOP * (h + 1) - 1

        if self.method == "shp":
            return max(self.max_edge_load, self.set_size - 1) * pc + pipe(self.max_hops)
        cost = {}
        for a, b in self.pairs():
            share = max(self.edge_load[lnk] for lnk in self.mesh.route(a, b))
            cost[a] = (b, share * pc + pipe(self.mesh.hops(a, b)))
        arrive = dict.fromkeys(cost, 0)
        start = dict.fromkeys(cost, -pc)
        for _ in range(self.set_size - 1):
            nxt = {}
            for a, (b, t) in cost.items():
                start[a] = max(arrive[a], start[a] + pc)
                nxt[b] = start[a] + t
            arrive = nxt
        return max(arrive.values())

    def to_json(self) -> dict:
        loads = sorted(self.edge_load.values())
        return {
            "method": self.method, "mesh": f"{self.mesh.rows}x{self.mesh.cols}",
            "set_size": self.set_size, "sets": len(self.sets), "part_flits": self.part_flits,
            "packet_flits": self.packet_flits,
            "max_link_load": self.max_link_load, "max_edge_load": self.max_edge_load,
            "latency_cycles": self.latency_cycles, "solve_s": round(self.solve_s, 4),
            "optimal": self.optimal, "gap": self.gap, "bound": self.bound,
            "time_limited": self.time_limited,
            "total_link_flits": sum(loads) * self.parts_per_edge * self.part_flits,
            "links_used": len(loads), "max_hops": self.max_hops,
            "set_nodes": [list(s) for s in self.sets],
            "cycles": self.cycles,
            "notes": self.notes,
        }


def _part_flits(nbytes: int, flit_bits: int) -> int:
    if nbytes < 1:
        raise SharingError(f"--bytes must be at least 1, not {nbytes}")
    if flit_bits < 8 or flit_bits % 8:
        raise SharingError(f"flit bits must be a multiple of 8, not {flit_bits}")
    return -(-nbytes * 8 // flit_bits)


# ---- the MTZ model ---------------------------------------------------------------------------

def _highs():
    """A silent HiGHS instance (its constructor prints a banner on the first call: the
    banner goes to the null device, as the solver's log does)."""
    try:
        import highspy
    except ImportError:
        raise ToolMissingError("the ILP needs HiGHS: pip install highspy") from None
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.silent()
    return highspy, h


class _Model:
    """Column and row bookkeeping for HiGHS: add variables, rows of (index, coefficient)."""

    def __init__(self):
        self.highspy, self.h = _highs()
        self.cost: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.integer: list[int] = []
        self.rows: list[tuple[float, float, list[int], list[float]]] = []

    def var(self, lo: float, hi: float, cost: float = 0.0, integer: bool = True) -> int:
        self.cost.append(cost)
        self.lo.append(lo)
        self.hi.append(hi)
        if integer:
            self.integer.append(len(self.cost) - 1)
        return len(self.cost) - 1

    def row(self, lo: float, hi: float, idx: list[int], val: list[float]) -> None:
        self.rows.append((lo, hi, idx, val))

    def solve(self, *, time_limit: float | None, start: dict[int, float] | None = None,
              seed: int = 0, nodes: int | None = None) -> tuple[np.ndarray | None, dict]:
        """Solve; *nodes* limits the branch-and-bound nodes (a limit on work, so the
        result does not depend on the machine's speed), *time_limit* the wall time."""
        h, hs = self.h, self.highspy
        n = len(self.cost)
        h.addCols(n, np.array(self.cost), np.array(self.lo), np.array(self.hi), 0,
                  np.zeros(n, np.int32), np.zeros(0, np.int32), np.zeros(0))
        starts, idx, val = [], [], []
        for _, _, i, v in self.rows:
            starts.append(len(idx))
            idx += i
            val += v
        h.addRows(len(self.rows), np.array([r[0] for r in self.rows]),
                  np.array([r[1] for r in self.rows]), len(idx), np.array(starts, np.int32),
                  np.array(idx, np.int32), np.array(val, np.float64))
        ints = np.array(self.integer, np.int32)
        h.changeColsIntegrality(len(ints), ints,
                                np.full(len(ints), hs.HighsVarType.kInteger))
        h.setOptionValue("random_seed", seed)
        h.setOptionValue("threads", 1)
        if time_limit is not None:
            h.setOptionValue("time_limit", float(time_limit))
        if nodes is not None:
            h.setOptionValue("mip_max_nodes", int(nodes))
        if start:
            k = np.array(sorted(start), np.int32)
            h.setSolution(len(k), k, np.array([start[i] for i in k], np.float64))
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        has = info.primal_solution_status == hs.kSolutionStatusFeasible
        x = np.array(h.getSolution().col_value) if has else None
        return x, {"optimal": status == hs.HighsModelStatus.kOptimal,
                   "status": h.modelStatusToString(status),
                   "time_limited": status == hs.HighsModelStatus.kTimeLimit,
                   "nodes": int(info.mip_node_count),
                   "objective": info.objective_function_value if has else None,
                   "bound": info.mip_dual_bound, "gap": info.mip_gap}


def _cycle_vars(m: _Model, members: Sequence[int]) -> tuple[dict, dict]:
    """Binary successor variables, the MTZ order variables and the constraints (2), (3)
    of one set; the first node of *members* is the cycle's root."""
    N = len(members)
    x = {(a, b): m.var(0, 1) for a in range(N) for b in range(N) if a != b}
    u = {a: m.var(1, N - 1) for a in range(1, N)}
    for a in range(N):
        m.row(1, 1, [x[a, b] for b in range(N) if b != a], [1.0] * (N - 1))
        m.row(1, 1, [x[b, a] for b in range(N) if b != a], [1.0] * (N - 1))
    if N > 2:
        for a, b in itertools.combinations(range(N), 2):
            m.row(-math.inf, 1, [x[a, b], x[b, a]], [1.0, 1.0])
        for a in range(1, N):
            for b in range(1, N):
                if a != b:
                    m.row(-math.inf, N - 2, [u[a], u[b], x[a, b]], [1.0, -1.0, N - 1.0])
    return x, u


def _read_cycle(sol: np.ndarray, x: dict, members: Sequence[int]) -> list[int]:
    succ = {a: b for (a, b), i in x.items() if sol[i] > 0.5}
    order, a = [], 0
    for _ in range(len(members)):
        order.append(members[a])
        a = succ[a]
    if a != 0 or len(set(order)) != len(members):
        raise RuntimeError("the solver's successor variables do not form one cycle")
    return order


def _start_values(x: dict, u: dict, members: Sequence[int], cycle: Sequence[int]) -> dict:
    pos = {n: i for i, n in enumerate(members)}
    order = [pos[n] for n in cycle]
    r = order.index(0)
    order = order[r:] + order[:r]
    vals = {i: 0.0 for i in x.values()}
    for a, b in hamilton_edges(order):
        vals[x[a, b]] = 1.0
    for k, a in enumerate(order[1:], 1):
        vals[u[a]] = float(k)
    return vals


# ---- TSP: the minimum-hop Hamilton cycle of each set -------------------------------------------

def _min_hop_cycle(mesh: Mesh, members: Sequence[int], seed: int) -> tuple[list[int], dict]:
    N = len(members)
    if N == 2:
        return list(members), {"optimal": True}
    m = _Model()
    x, _ = _cycle_vars(m, members)
    for (a, b), i in x.items():
        m.cost[i] = mesh.hops(members[a], members[b])
    sol, info = m.solve(time_limit=None, seed=seed)
    if sol is None or not info["optimal"]:
        raise RuntimeError(f"HiGHS found no minimum-hop cycle: {info['status']}")
    return _read_cycle(sol, x, members), info


def _left(deadline: float, what: str) -> float:
    """Seconds left before *deadline*; past it, a :class:`SharingError` naming *what*
    (the time limit covers building the model, not only solving it)."""
    left = deadline - time.perf_counter()
    if left <= 0:
        raise SharingError(f"{what}: --time-limit ran out while building the model; raise "
                           "it, give a smaller --set-size, or use --method shp")
    return left


def schedule_tsp(mesh: Mesh, sets: list[tuple[int, ...]], part_flits: int, *,
                 seed: int = 0) -> Schedule:
    """Each set on its own minimum-hop Hamilton cycle (the TSP baseline of Fig. 12)."""
    t0 = time.perf_counter()
    seen: set[tuple] = set()
    cycles = []
    for s in sets:
        # the instance relative to the set's first node: congruent sets are one instance
        x0, y0 = mesh.xy(s[0])
        key = tuple((mesh.xy(n)[0] - x0, mesh.xy(n)[1] - y0) for n in s)
        seen.add(key)
        cycles.append([s[i] for i in _min_hop_order(key, seed)])
    return _hamilton("tsp", mesh, sets, cycles, part_flits, time.perf_counter() - t0,
                     notes=[f"{len(seen)} distinct set geometries solved"])


@functools.lru_cache(maxsize=4096)
def _min_hop_order(key: tuple[tuple[int, int], ...], seed: int) -> tuple[int, ...]:
    """The minimum-hop Hamilton cycle (:func:`_min_hop_cycle`) of a set as indices into
    it, by the set's geometry *key* (each node's ``(x, y)`` from the first node's). A
    set's model depends on nothing but its nodes' hops, so congruent sets anywhere on
    any mesh are one instance: solved once per process (``set_loads``' ILP and TSP
    schedules start from the same cycles)."""
    xs, ys = [x for x, _ in key], [y for _, y in key]
    x0, y0 = min(xs), min(ys)
    mesh = Mesh(max(ys) - y0 + 1, max(xs) - x0 + 1)
    members = [(y - y0) * mesh.cols + x - x0 for x, y in key]
    cyc, _ = _min_hop_cycle(mesh, members, seed)
    return tuple(members.index(n) for n in cyc)


def _hamilton(method: str, mesh: Mesh, sets: list[tuple[int, ...]], cycles: list[list[int]],
              part_flits: int, solve_s: float, **kw) -> Schedule:
    """The Hamilton schedule of *cycles* (one per set), its link loads counted."""
    loads = link_loads(mesh, [e for c in cycles for e in hamilton_edges(c)])
    return Schedule(method, mesh, sets, cycles, part_flits, loads, solve_s, **kw)


# ---- SHP: shortest paths from every node to every other -----------------------------------------

def schedule_shp(mesh: Mesh, sets: list[tuple[int, ...]], part_flits: int) -> Schedule:
    """Every node's part to every other node of its set along the XY route (Fig. 12's SHP)."""
    t0 = time.perf_counter()
    loads = link_loads(mesh, [(a, b) for s in sets for a in s for b in s if a != b])
    return Schedule("shp", mesh, sets, [], part_flits, loads, time.perf_counter() - t0)


# ---- the local search used as the ILP's warm start -----------------------------------------

def _moves(c: list[int]) -> list[list[int]]:
    """Neighbours of a directed cycle: reversed, a segment reversed (2-opt), a node moved
    elsewhere (or-opt), two nodes swapped."""
    N = len(c)
    out = [c[::-1]]
    out += [c[:i] + c[i:j][::-1] + c[j:] for i in range(1, N - 1) for j in range(i + 2, N + 1)]
    for i in range(1, N):
        rest = c[:i] + c[i + 1:]
        out += [rest[:j] + [c[i]] + rest[j:] for j in range(1, N) if j != i]
    for i, j in itertools.combinations(range(1, N), 2):
        d = list(c)
        d[i], d[j] = d[j], d[i]
        out.append(d)
    return out


def _improve(mesh: Mesh, cycles: list[list[int]], rng: random.Random,
             passes: int = 8) -> list[list[int]]:
    """Lower ``(max load, links at the max, sum of squared loads)`` by local moves of
    one set's cycle at a time (:func:`_moves`), first improvement, sets in random
    order; a heuristic, not a proof (the ILP's warm start)."""
    cycles = [list(c) for c in cycles]
    routes: dict[tuple[int, int], list] = {}
    load: dict = {}
    hist: dict[int, int] = {}            # load value -> links with that load
    state = [0]                          # sum of squared loads

    def add(c: list[int], sign: int) -> None:
        for e in hamilton_edges(c):
            r = routes.get(e)
            if r is None:
                r = routes[e] = mesh.route(*e)
            for lnk in r:
                v = load.get(lnk, 0)
                hist[v] = hist.get(v, 0) - 1
                load[lnk] = v + sign
                hist[v + sign] = hist.get(v + sign, 0) + 1
                state[0] += (v + sign) ** 2 - v * v

    def cost() -> tuple[int, int, int]:
        top = max((v for v, n in hist.items() if n > 0 and v > 0), default=0)
        return top, hist.get(top, 0), state[0]

    for c in cycles:
        add(c, +1)
    best = cost()
    for _ in range(passes):
        improved = False
        order = list(range(len(cycles)))
        rng.shuffle(order)
        for si in order:
            c = cycles[si]
            add(c, -1)
            for cand in _moves(c):
                add(cand, +1)
                k = cost()
                add(cand, -1)
                if k < best:
                    best, c, improved = k, cand, True
                    break
            add(c, +1)
            cycles[si] = c
        if not improved:
            break
    return cycles


def _anneal(mesh: Mesh, cycles: list[list[int]], rng: random.Random, iterations: int,
            target: int, deadline: float = math.inf) -> tuple[list[list[int]], bool]:
    """Simulated annealing over segment reversals and node moves of one cycle at a time,
    on ``(max load, links at the max, sum of squared loads)``; stops at *target* (a lower
    bound) or after *iterations*, or at *deadline* (a wall-time cap). Returns the best
    cycles seen and whether the deadline stopped it."""
    cycles = [list(c) for c in cycles]
    routes: dict[tuple[int, int], list] = {}
    load: dict = {}

    def add(c: list[int], sign: int) -> None:
        for e in hamilton_edges(c):
            r = routes.get(e)
            if r is None:
                r = routes[e] = mesh.route(*e)
            for lnk in r:
                load[lnk] = load.get(lnk, 0) + sign

    def cost() -> float:
        vals = load.values()
        top = max(vals)
        return top * 10_000 + sum(v == top for v in vals) * 10 + 0.001 * sum(v * v
                                                                            for v in vals)

    for c in cycles:
        add(c, +1)
    cur = best = cost()
    best_cycles = [list(c) for c in cycles]
    temp = 20.0
    cool = (0.5 / temp) ** (1 / max(1, iterations))    # down to 0.5 at the end
    for it in range(iterations):
        if max(load.values()) <= target:
            break
        if it % 1024 == 0 and time.perf_counter() > deadline:
            return best_cycles, True
        si = rng.randrange(len(cycles))
        c = cycles[si]
        N = len(c)
        if N < 3:
            continue
        if rng.random() < 0.5:
            i, j = sorted(rng.sample(range(1, N + 1), 2))
            d = c[:i] + c[i:j][::-1] + c[j:]
        else:
            a, b = rng.sample(range(1, N), 2)
            d = list(c)
            d.insert(b, d.pop(a))
        add(c, -1)
        add(d, +1)
        new = cost()
        if new <= cur or rng.random() < math.exp((cur - new) / temp):
            cycles[si], cur = d, new
            if cur < best:
                best, best_cycles = cur, [list(x) for x in cycles]
        else:
            add(d, -1)
            add(c, +1)
        temp *= cool
    return best_cycles, False


def _count_bound(mesh: Mesh, tsp: Schedule) -> int:
    """A lower bound on the busiest link's cycle edges: the fewest link crossings of all
    the cycles (the TSP tours have the fewest hops) spread evenly over every link."""
    hops = sum(mesh.hops(a, b) for a, b in tsp.pairs())
    return max(1, math.ceil(hops / len(mesh.links())))


# ---- the ILP ------------------------------------------------------------------------------------

#: Branch-and-bound nodes HiGHS may explore after the warm start (a work limit, so the
#: schedule does not depend on the machine's load). Fig. 12's meshes up to 8x8 are
#: proved optimal well within it; on 16x16 the warm start usually meets the counting
#: bound already.
MIP_NODES = 2000
#: Annealing runs from fresh local optima on big models (more than 1000 binaries), and
#: moves per set in each: 16x16's Fig. 12 sets reach the counting bound in the first
#: few; where the bound cannot be reached, more runs only spend time before HiGHS proves
#: the warm start optimal.
ANNEAL_RUNS = 8
ANNEAL_MOVES = 4000


def schedule_ilp(mesh: Mesh, sets: list[tuple[int, ...]], part_flits: int, *,
                 time_limit: float | None = 60.0, seed: int = 0,
                 warm_start: bool = True, nodes: int | None = MIP_NODES,
                 anneal_runs: int = ANNEAL_RUNS, anneal_moves: int = ANNEAL_MOVES) -> Schedule:
    """The cycles of all sets at once, minimizing the busiest link's cycle edges (Sec. VII).

    With *warm_start* the solver starts from the TSP cycles improved by :func:`_improve`
    (and, on big models, the best of *anneal_runs* seeded annealing runs of
    *anneal_moves* moves per set); HiGHS then explores at most *nodes* branch-and-bound
    nodes (``None``: no limit). Both limits count work, so the schedule is the same for
    the same inputs and *seed* on any machine at any load. *time_limit* caps the wall
    time, building the model included: past it while building, a :class:`SharingError`;
    past it while searching, the best schedule found, with ``time_limited = True``. A
    schedule not proved optimal comes with the gap to the solver's bound.
    """
    t0 = time.perf_counter()
    deadline = math.inf if time_limit is None else t0 + time_limit
    notes = []
    time_limited = False
    m = _Model()
    z = m.var(0, math.inf, cost=1.0)
    xs, us = [], []
    on_link: dict[tuple[int, int], list[int]] = {}
    for k, s in enumerate(sets):
        _left(deadline, f"the ILP ({k} of {len(sets)} sets built)")
        x, u = _cycle_vars(m, s)
        xs.append(x)
        us.append(u)
        for (a, b), i in x.items():
            for lnk in mesh.route(s[a], s[b]):
                on_link.setdefault(lnk, []).append(i)
    for lnk in sorted(on_link):
        idx = on_link[lnk]
        m.row(-math.inf, 0, idx + [z], [1.0] * len(idx) + [-1.0])
    _left(deadline, "the ILP (all sets built)")
    start = None
    if warm_start:
        tsp = schedule_tsp(mesh, sets, part_flits, seed=seed)
        rng = random.Random(seed)
        cyc = _improve(mesh, tsp.cycles, rng)
        low = _count_bound(mesh, tsp)

        def worst(cs: list[list[int]]) -> int:
            return max(link_loads(mesh, [e for c in cs for e in hamilton_edges(c)]).values())

        # On big models (HiGHS alone stalls on 16x16's 3840 binaries) short annealing
        # runs from fresh local optima, each with its own stream, until one reaches the
        # counting bound (many get stuck); the time limit caps them at half of it.
        big = sum(len(st) * (len(st) - 1) for st in sets) > 1000
        half = t0 + (time_limit / 2 if time_limit is not None else math.inf)
        runs = 0
        for attempt in range(anneal_runs if big else 0):
            if worst(cyc) <= low:
                break
            if time.perf_counter() > half:
                time_limited = True
                break
            r = random.Random(seed * 1009 + attempt)
            alt, stopped = _anneal(mesh, _improve(mesh, tsp.cycles, r), r, anneal_moves * len(sets),
                                   low, half)
            runs += 1
            if stopped:
                time_limited = True
                break
            if worst(alt) < worst(cyc):
                cyc = alt
        start = {}
        for s, x, u, c in zip(sets, xs, us, cyc, strict=True):
            start |= _start_values(x, u, s, c)
        start[z] = float(max(link_loads(mesh, [e for c in cyc for e in hamilton_edges(c)])
                             .values()))
        notes.append(f"warm start: TSP cycles after local search and {runs} annealing "
                     f"run(s), max edge load {int(start[z])} (TSP {tsp.max_edge_load}, "
                     f"counting bound {low})")
    left = None if time_limit is None else max(0.1, time_limit - (time.perf_counter() - t0))
    sol, info = m.solve(time_limit=left, start=start, seed=seed, nodes=nodes)
    time_limited |= bool(info["time_limited"])
    if sol is None:
        limit = (f"--time-limit {time_limit} s" if time_limited else
                 f"--nodes {nodes}, without a warm start")
        raise SharingError(f"HiGHS found no schedule within {limit} ({info['status']}); "
                           "give it more")
    cycles = [_read_cycle(sol, x, s) for s, x in zip(sets, xs, strict=True)]
    loads = link_loads(mesh, [e for c in cycles for e in hamilton_edges(c)])
    best = max(loads.values())
    bound = max(info["bound"], 0.0)
    # the loads are integers: a bound within 1 of the schedule proves it optimal
    optimal = bool(info["optimal"]) or math.ceil(bound - 1e-6) >= best
    gap = 0.0 if optimal else (best - bound) / best
    notes.append(f"HiGHS: {info['status']} after {info['nodes']} node(s) (limit "
                 f"{'none' if nodes is None else nodes})")
    if time_limited:
        notes.append(f"stopped by the time limit ({time_limit:g} s) before the work limits: "
                     "this schedule depends on the machine's speed and load")
    return Schedule("ilp", mesh, sets, cycles, part_flits, loads, time.perf_counter() - t0,
                    optimal=optimal, gap=gap, bound=bound, notes=notes,
                    time_limited=time_limited)


#: Measured cost of building the ILP (16x16 to 64x64 meshes, sets of 16 to 64): about
#: 1.9 us and 190 bytes per route entry (a successor variable on one link).
BUILD_S_PER_ENTRY = 1.9e-6
BUILD_BYTES_PER_ENTRY = 190


def ilp_size(mesh: Mesh, sets: Sequence[Sequence[int]]) -> tuple[int, int]:
    """``(binaries, route entries)`` of the ILP of *sets*: a successor variable per
    ordered pair of a set, entered once per link its route crosses."""
    binaries = sum(len(s) * (len(s) - 1) for s in sets)
    entries = sum(mesh.hops(a, b) for s in sets for a in s for b in s if a != b)
    return binaries, entries


#: Largest set whose exact minimum-hop cycle (the TSP baseline, and the ILP's warm
#: start) is found in seconds here: about 12 s at 32 nodes, over a minute at 48.
TSP_SET_NODES = 32


def size_warning(method: str, set_size: int) -> str | None:
    """A warning, given before the work, when *method* solves exact minimum-hop cycles
    of sets too big to finish in minutes (no time limit bounds that solver)."""
    if method in ("ilp", "tsp") and set_size > TSP_SET_NODES:
        return (f"the exact minimum-hop cycle of a set of {set_size} nodes (the TSP "
                f"baseline{', the ILP warm start' if method == 'ilp' else ''}) may take far "
                f"longer than --time-limit: about 12 s at {TSP_SET_NODES} nodes here and "
                "growing steeply; --method shp, or a smaller --set-size, finishes")
    return None


def check_ilp_size(mesh: Mesh, sets: Sequence[Sequence[int]], time_limit: float,
                   memory: int | None = None) -> None:
    """Refuse, before building it, an ILP whose building alone would take longer than
    *time_limit* seconds or more than half of *memory* bytes (default: this machine's
    RAM), with the estimate."""
    binaries, entries = ilp_size(mesh, sets)
    build_s = entries * BUILD_S_PER_ENTRY
    need = entries * BUILD_BYTES_PER_ENTRY
    if memory is None:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if build_s > time_limit or need > memory // 2:
        raise SharingError(
            f"the ILP of {len(sets)} set(s) of {len(sets[0])} nodes on a {mesh.rows}x"
            f"{mesh.cols} mesh has {binaries:,} binaries and {entries:,} route entries: "
            f"building it alone takes about {build_s:.0f} s and {need / 2**30:.1f} GiB "
            f"(--time-limit {time_limit:g} s); give a smaller --set-size, --method shp, or "
            "a longer --time-limit")


def schedule(method: str, mesh: Mesh, set_size: int, stride: int, nbytes: int,
             flit_bits: int, *, packet_flits: int = 16, time_limit: float | None = 60.0,
             seed: int = 0, nodes: int | None = MIP_NODES, vcs: int = 1) -> Schedule:
    """The schedule of *method* for Fig. 12's layout: sets of *set_size* nodes, *stride*
    apart, each node sharing *nbytes* in packets of *packet_flits* flits over routers
    of *vcs* VCs (the ILP's limits as :func:`schedule_ilp` takes them)."""
    if method not in METHODS:
        raise SharingError(f"--method must be one of {', '.join(METHODS)}, not {method!r}")
    if packet_flits < 1:
        raise SharingError(f"--packet-flits must be at least 1, not {packet_flits}")
    F = _part_flits(nbytes, flit_bits)
    sets = sharing_sets(mesh, set_size, stride)
    if method == "ilp" and time_limit is not None:
        check_ilp_size(mesh, sets, time_limit)
    if method == "shp":
        sched = schedule_shp(mesh, sets, F)
    elif method == "tsp":
        sched = schedule_tsp(mesh, sets, F, seed=seed)
    else:
        sched = schedule_ilp(mesh, sets, F, time_limit=time_limit, seed=seed, nodes=nodes)
    sched.packet_flits = packet_flits
    sched.vcs = vcs
    return sched


@dataclass(frozen=True)
class SetLoads:
    """What a schedule of Fig. 12's layout puts on the mesh, for the mapper's cost.

    Attributes
    ----------
    method : str
    edges : int
        Cycle edges (Hamilton) or pairs (SHP) on the busiest link.
    hops : int
        The most hops of one transfer (a cycle edge or a pair).
    set_hops : float
        Hops of all of one set's transfers (a cycle's edges or every pair), the mean
        over the sets.
    """

    method: str
    edges: int
    hops: int
    set_hops: float


#: Sets larger than this are put on a snake cycle in :func:`set_loads` instead of the
#: exact TSP solver (whose time grows fast with the set: 0.3 s at 16 nodes, 7 s at 32).
SNAKE_NODES = 16


def snake_cycle(members: Sequence[int], h: int, w: int) -> list[int] | None:
    """A Hamilton cycle of an ``h x w`` grid set (*members* row by row, as
    :func:`sharing_sets` lists them) whose every edge joins grid neighbours: along the
    first row, back and forth over the other columns, up the first column. It exists
    when ``h`` or ``w`` is even (and both are at least 2), and then has the fewest hops
    any cycle can have (every edge the spacing of the grid), so it is a TSP optimum."""
    if h < 2 or w < 2 or (h % 2 and w % 2):
        return None
    if h % 2:                                       # w even: the transposed snake
        return snake_cycle([members[i * w + j] for j in range(w) for i in range(h)], w, h)
    path = [(0, j) for j in range(w)]
    for i in range(1, h):
        cols = range(w - 1, 0, -1) if i % 2 else range(1, w)
        path += [(i, j) for j in cols]
    path += [(i, 0) for i in range(h - 1, 0, -1)]
    return [members[i * w + j] for i, j in path]


@functools.lru_cache(maxsize=4096)
def set_loads(rows: int, cols: int, set_size: int, stride: int, method: str,
              seed: int = 0) -> SetLoads | None:
    """The busiest link of *method*'s schedule for sets of *set_size* nodes *stride* apart
    tiling a ``rows x cols`` mesh (:func:`sharing_sets`), or None where they do not tile
    it; memoized per process. The schedules are found by counted work, never by time,
    so the mapper that uses them gives the same mapping on any machine:

    * ``tsp``: :func:`schedule_tsp`; sets of more than :data:`SNAKE_NODES` nodes with
      an even side on their :func:`snake_cycle` (also a minimum-hop cycle);
    * ``ilp``: :func:`schedule_ilp` with its node and annealing limits where the model
      is small (up to 1000 successor variables, where HiGHS proves it in well under a
      second); on bigger ones its warm start alone (the TSP cycles after
      :func:`_improve`'s local search, which may stay above the ILP's optimum: 2 edges
      against 1 for sets of 8 nodes 2 apart on 16x16), and for sets of more than
      :data:`SNAKE_NODES` nodes the TSP cycles themselves (the local search takes 20 s
      on 64-node sets and finds nothing better there); the TSP cycles wherever they meet
      the counting bound already;
    * ``shp``: :func:`schedule_shp`."""
    mesh = Mesh(rows, cols)
    try:
        sets = sharing_sets(mesh, set_size, stride)
    except SharingError:
        return None
    if method == "shp":
        sched = schedule_shp(mesh, sets, 1)
    else:
        h, w = set_shape(set_size, rows, cols, stride)
        snakes = [snake_cycle(st, h, w) for st in sets] if set_size > SNAKE_NODES else None
        if snakes and all(snakes):
            tsp = _hamilton("tsp", mesh, sets, snakes, 1, 0.0)
        else:
            tsp = schedule_tsp(mesh, sets, 1, seed=seed)
        if method == "tsp" or tsp.max_edge_load <= _count_bound(mesh, tsp):
            sched = tsp                 # (for the ILP: TSP meets the bound, so it is optimal)
        elif sum(len(st) * (len(st) - 1) for st in sets) <= 1000:
            sched = schedule_ilp(mesh, sets, 1, time_limit=None, seed=seed)
        else:
            cyc = (tsp.cycles if set_size > SNAKE_NODES
                   else _improve(mesh, tsp.cycles, random.Random(seed)))
            sched = _hamilton("ilp", mesh, sets, cyc, 1, 0.0)
    pairs = sched.pairs()
    return SetLoads(method, sched.max_edge_load, max(mesh.hops(a, b) for a, b in pairs),
                    sum(mesh.hops(a, b) for a, b in pairs) / len(sets))


# ---- the schedule as NoC traffic, run on the mesh RTL ------------------------------------------

def messages(sched: Schedule) -> list[tuple[int, int, int, int]]:
    """The schedule as packets ``(src, dest, flits, dep)`` for the NoC driver's trace mode.

    A node's part is cut into packets of at most ``packet_flits`` flits. Hamilton: in
    step ``t`` every node sends a part to its successor; the first packet of its
    step ``t`` waits for the last packet of the part its predecessor sent it in step
    ``t - 1`` (a node forwards what it has received). SHP: every node sends its part
    to every other node of its set at once, one packet per destination in turn.
    """
    F, packet_flits = sched.part_flits, sched.packet_flits
    sizes = [packet_flits] * (F // packet_flits) + ([F % packet_flits] if F % packet_flits
                                                     else [])
    out: list[tuple[int, int, int, int]] = []
    if sched.method == "shp":
        for s in sched.sets:
            for a in s:
                dests = [b for b in s if b != a]
                for size in sizes:
                    out += [(a, b, size, -1) for b in dests]
        return out
    pred = {b: a for c in sched.cycles for a, b in hamilton_edges(c)}
    succ = {a: b for c in sched.cycles for a, b in hamilton_edges(c)}
    last_in: dict[int, int] = {}         # node -> id of the last packet it received
    for _ in range(sched.set_size - 1):
        step_last: dict[int, int] = {}
        for c in sched.cycles:
            for a in c:
                dep = last_in.get(a, -1) if a in pred else -1
                for i, size in enumerate(sizes):
                    out.append((a, succ[a], size, dep if i == 0 else -1))
                step_last[succ[a]] = len(out) - 1
        last_in = step_last
    return out


def run_rtl(sched: Schedule, cfg, *, exe=None) -> dict:
    """Run *sched* on the mesh RTL (*cfg*'s ``noc`` with the schedule's mesh size);
    the measured cycles beside the model's, and the busiest link's flits as counted
    by the driver's probes on every router-to-router link.

    Raises
    ------
    SimulationError
        If the network loses, corrupts or misroutes a packet, or does not finish
        within twenty times the model's latency.
    """
    from dataclasses import replace

    from .. import noc

    n = cfg.noc
    if (n.rows, n.cols) != (sched.mesh.rows, sched.mesh.cols):
        cfg = cfg.replace(noc=replace(n, rows=sched.mesh.rows, cols=sched.mesh.cols))
    msgs = messages(sched)
    r = noc.run_trace(cfg, msgs, limit=20 * sched.latency_cycles + 10_000, exe=exe)
    measured = max(r["link_flits"].values(), default=0)
    return {"rtl_cycles": r["cycles"], "model_cycles": sched.latency_cycles,
            "rtl_over_model": r["cycles"] / sched.latency_cycles,
            "rtl_max_link_flits": measured, "packets": r["messages"],
            "packet_flits": sched.packet_flits, "link_flits": r["link_flits"],
            "vcs": cfg.noc.vcs, "buffer_depth": cfg.noc.buffer_depth}
