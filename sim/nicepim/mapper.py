"""PIM-Mapper (Sec. III-B to III-E, VI; Algorithms 1-2) over an analytical per-node cost model.

The mapping of a network on the ``na_rows x na_cols`` PIM-node array:

* **SM** (segment mapping): the network is cut into segments (its smallest serial
  pieces, :meth:`~.networks.Network.segments`); a segment with branches may run
  them in parallel on rectangular regions of the array (1 to ``N_br`` regions,
  branches assigned to balance MACs, regions cut by a slicing tree in proportion
  to their MACs). A region runs its layers one after the other.
* **LM** (layer mapping): a layer on an ``h x w`` region is split over its samples
  B, output channels K, output rows P, output columns Q and input channels C, with
  ``Ph_B Ph_K Ph_P Ph_Q Ph_C = h`` and ``Pw_B Pw_K Pw_P Pw_Q Pw_C = w`` (Fig. 5), and
  laid onto the region in the spatial order ``P_order`` (a sequence of the five
  loops, outermost first: along each axis the parts of a later loop are neighbours,
  those of an earlier one are as far apart as the later loops' parts on that axis).
  The batch is the network's (:meth:`~.networks.Network.batched`); a node with
  ``b`` of its samples runs its part of the layer once per sample.
* **WR** (weight replication): nodes that need the same weights (those that
  differ only in their P/Q part) store ``1 / ceil(N_node / WR)`` of them each and
  share the rest over the NoC before the layer.
* **DL** (data layout): each activation tensor is kept in DRAM as NCHW, NHWC or
  NCHW[C8] (:class:`~pimforge.rtl.nicepim.params.Layout`); the producer and its
  consumers see the same layout (Sec. III-E).

The parts, each its own module, that the mappers compose (as ZigZag's stages):

* the **search space** (:mod:`.mapspace`): the LMs of a layer on a region, their
  spatial orders, the layouts;
* the **cost** (:mod:`.mapcost`): one node's cycles and energy for its part of a
  layer (compute, DRAM and the layer's own data sharing), memoized by layer shape;
* the **data movement** between layers (:mod:`.movement`): a layer's output stays in
  the DRAM of the nodes that made it; before a layer runs, each of its nodes gets
  the part of its input window it does not hold (:func:`redistribution`), which
  :func:`evaluate` adds to every layer of a mapping, PIM-Mapper's and the
  baseline's alike;
* the **selection** (:mod:`.selection`): the (WR, LM) candidates of a layer and
  Algorithm 2's dynamic program (:func:`mapping_select`).

PIM-Mapper (:func:`map_network`), the baseline (:func:`baseline_map`) and the
DDAM-style pipeline (:mod:`.ddam`) are compositions of these parts; this module
keeps the names of all of them importable from one place.

**Selection** (Algorithm 2): for every segment, SM candidate and region, the
candidates of each layer are (WR, best LM for that WR) pairs with their latency
(the movement of their inputs from where the previous iteration put the
predecessors included) and the DRAM capacity their weights take on a node; a
multiple-choice knapsack DP over a capacity grid picks one per layer so that the
whole network's weights fit a node's DRAM at the least total latency
(:func:`mapping_select`). Then the layouts are chosen (:func:`choose_layouts`)
and the selection is repeated with them (Algorithm 1's alternating iterations).

**The baseline** (:func:`baseline_map`, Sec. VIII-B): every layer on the whole
array, the LM a per-layer search of least node cycles gives (the paper's Timeloop
"Delay"), WR lowered from the largest layers until the weights fit, one layout.

Simplifications, stated: the node runs a part's samples one after the other with
the same task list (weights are read again per sample, as the node's lowering does);
the spatial orders searched are those of the 8 fastest LMs of each WR (every order
of their split loops that lays them out differently); the movement of inputs is
weighed for those LMs and those equal to a predecessor's, and
taken from the previous iteration's placements (exact in :func:`evaluate`); a
flatten before a classifier moves each node's share from every producer node in
proportion; the capacity grid rounds sizes up to ``CAP / cap_steps``; layers
without MACs (pools, additions, softmax, normalization) cost their DRAM traffic
and one element per PE column and cycle (they run on the host in ``pimforge run
dnn``; that part of the model is not checked against hardware).
"""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import dataclass, field
from operator import itemgetter

from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.params import Layout

from .mapcost import (
    E_BUF_PJ_PER_BIT,
    E_MAC_PJ,
    WHAT_IF,
    LayerCost,
    NodeModel,
    WhatIfNodeModel,
    node_model,
)
from .mapspace import (
    LAYOUTS,
    WHOLE,
    Partition,
    layer_partitions,
    layer_shape,
    orders,
    parse_partition,
    partitions,
)
from .movement import Placement, noc_transfer, node_index, redistribution
from .networks import Layer, Network
from .selection import (
    Candidate,
    branch_regions,
    layer_candidates,
    mapping_select,
    pieces,
    segment_sms,
)

__all__ = ["E_BUF_PJ_PER_BIT", "E_MAC_PJ", "LAYOUTS", "WHAT_IF", "Candidate", "LayerCost",
           "Mapping", "NodeModel", "Partition", "Placement", "WhatIfNodeModel",
           "baseline_map", "branch_regions", "choose_layouts", "evaluate",
           "layer_candidates", "map_network", "mapping_select", "noc_transfer",
           "node_index", "node_model", "orders", "parse_partition", "partitions", "pieces",
           "placements", "redistribution"]


@dataclass
class Mapping:
    """A network's mapping and its modelled latency and energy."""

    network: str
    mapper: str
    latency_cycles: float
    energy_pj: float
    layers: dict[str, dict] = field(default_factory=dict)
    segments: list[dict] = field(default_factory=list)
    weight_bytes_per_node: int = 0
    layouts: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"network": self.network, "mapper": self.mapper,
                "latency_cycles": self.latency_cycles, "energy_pj": self.energy_pj,
                "weight_bytes_per_node": self.weight_bytes_per_node,
                "segments": self.segments, "layers": self.layers, "layouts": self.layouts}


def map_network(net: Network, cfg, *, iterations: int = 3, cap_steps: int = 128,
                max_regions: int = 4, model: NodeModel | None = None) -> Mapping:
    """PIM-Mapper (Algorithm 1): SM/LM/WR by Algorithm 2, then DL, repeated
    (``MAX_OPTIM_ITER`` = 3, Sec. VIII-B). Algorithm 1's initial mapping (its line 4)
    is every layer on the whole array with its fastest LM and one layout for all (the
    faster of :func:`baseline_map`'s two LM goals, both points of the mapper's space); the
    first iteration weighs the movement of each layer's inputs from where that mapping
    puts its predecessors, each later one from where the previous iteration put them.
    The result is the mapping of least :func:`evaluate`d latency visited, the initial
    one included. *model* replaces the config's node model (for what-if studies).

    The cyclic garbage collector is paused meanwhile (:func:`_collector_paused`)."""
    own = model is None
    model = model or NodeModel(cfg)
    with _collector_paused():
        try:
            return _map_network(net, cfg, iterations, cap_steps, max_regions, model)
        finally:
            if own:         # its memos freed now, by reference counts (NodeModel.forget)
                model.forget()


@contextlib.contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector, and resume it as it was. The mapper's
    memos keep hundreds of thousands of small tuples, dicts and arrays alive as long as
    its model, and each of the collector's passes over the older generations walks them
    all again: a seventh of a cold mapping's time. What the collector would free of a
    mapping is its model with those memos, which becomes garbage only once the mapping
    returns (the rest goes by reference counts), so pausing it meanwhile keeps nothing
    longer: the five networks' peak memory is the same. (A model made for the mapping
    drops its memos at the end, so that they go by reference counts too, not in the
    collector's first pass after it.)"""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _map_network(net: Network, cfg, iterations: int, cap_steps: int, max_regions: int,
                 model: NodeModel) -> Mapping:
    """:func:`map_network`, the collector aside."""
    n = cfg.nicepim
    array = (n.na_rows, n.na_cols)
    sms_per_seg = [segment_sms(brs, array, max_regions) for brs in pieces(net)]
    base = _initial_mapping(net, cfg, model)
    uniform = Layout[base.mapper.split("(")[1].rstrip(")")]
    layouts: dict[str, int] = {lay.name: uniform for lay in net.layers}
    prev = placements(net, base)
    base.mapper = "nicepim"
    result = base
    cache = model.memo          # shared with every mapping made with this model
    for _ in range(iterations):
        tree = []
        for sms in sms_per_seg:
            seg_c = []
            for sm in sms:
                reg_c = []
                for region, lays in sm:
                    _, _, h, w = region
                    wrs = sorted({1, 2, 4, h * w} | {2 ** i for i in range(8) if 2 ** i <= h * w})
                    reg_c.append([layer_candidates(model, lay, region, wrs, layouts, cache,
                                                    [prev[p] for p in lay.preds], array)
                                  for lay in lays])
                seg_c.append(reg_c)
            tree.append(seg_c)
        lat, sm_pick, lay_pick = mapping_select(tree, n.node_bytes, cap_steps)
        m = _assemble(net, "nicepim", tree, sms_per_seg, sm_pick, lay_pick, lat)
        m.layouts = {k: Layout(v).name for k, v in layouts.items()}
        m = evaluate(net, cfg, m, model)
        if m.latency_cycles < result.latency_cycles:
            result = m
        layouts = layouts | choose_layouts(net, model, m, array)
        prev = placements(net, m)
    return result


def _assemble(net, name, tree, sms_per_seg, sm_pick, lay_pick, lat) -> Mapping:
    m = Mapping(net.name, name, lat, 0.0)
    size = 0
    for seg_c, sms, si, regs in zip(tree, sms_per_seg, sm_pick, lay_pick, strict=True):
        sm = sms[si]
        m.segments.append({"regions": [list(r) for r, _ in sm],
                           "layers": [[lay.name for lay in lays] for _, lays in sm]})
        seg_size = 0
        for (region, lays), cands, idx in zip(sm, seg_c[si], regs, strict=True):
            rs = 0
            for lay, cs, ci in zip(lays, cands, idx, strict=True):
                c = cs[ci]
                nodes = region[2] * region[3]
                m.layers[lay.name] = {"region": list(region), "wr": c.wr,
                                      "partition": str(c.part), "cycles": c.perf - c.redist,
                                      "weight_bytes": c.size, "energy_pj": c.energy * nodes}
                rs += c.size
            seg_size = max(seg_size, rs)
        size += seg_size
    m.weight_bytes_per_node = size
    return m


def placements(net: Network, mapping: Mapping) -> dict[str, Placement]:
    """Where each layer of *mapping* runs."""
    out = {}
    for lay in net.layers:
        info = mapping.layers.get(lay.name)
        region = tuple(info["region"]) if info else (0, 0, 1, 1)
        part = parse_partition(info["partition"]) if info else WHOLE
        out[lay.name] = Placement(lay, part, region)
    return out


def evaluate(net: Network, cfg, mapping: Mapping, model: NodeModel | None = None) -> Mapping:
    """*mapping* with the movement of every layer's inputs from its predecessors'
    nodes to its own (:func:`redistribution`) added: each layer's ``redist_cycles`` and
    ``redist_pj``, and the latency (per segment its slowest region's layers one after
    the other; a mapping without segments runs its layers one after the other on the
    whole array) and energy (the layers' and the movements')."""
    model = model or NodeModel(cfg)
    n = cfg.nicepim
    array = (n.na_rows, n.na_cols)
    pl = placements(net, mapping)
    energy = 0.0
    for lay in net.layers:
        info = mapping.layers.get(lay.name)
        if info is None:
            continue
        cyc, bh = redistribution(model, array, [pl[p] for p in lay.preds], pl[lay.name])
        info["redist_cycles"] = cyc
        info["redist_pj"] = bh * n.noc_pj_per_bit_hop
        energy += info["energy_pj"] + info["redist_pj"]
    segs = mapping.segments or [{"regions": [info["region"]], "layers": [[name]]}
                                for name, info in mapping.layers.items()]
    mapping.latency_cycles = float(sum(
        max(sum(mapping.layers[x]["cycles"] + mapping.layers[x]["redist_cycles"] for x in lays)
            for lays in seg["layers"]) for seg in segs))
    mapping.energy_pj = energy
    return mapping


def choose_layouts(net: Network, model: NodeModel, mapping: Mapping,
                   array: tuple[int, int]) -> dict[str, int]:
    """DL (Sec. VI-C): per activation tensor, the layout with the least DRAM cycles over
    its producer's store and its consumers' loads under their chosen mappings (which
    makes a consumer's input layout its producer's output layout)."""
    out = {}
    for lay in net.layers:
        info = mapping.layers.get(lay.name)
        users = [net.by_name[s] for s in net.succs[lay.name]]
        if info is None or not users:
            continue
        best = None
        for lo in LAYOUTS:
            total = 0
            for u in [lay, *users]:
                ui = mapping.layers.get(u.name)
                if ui is None:
                    continue
                part = parse_partition(ui["partition"])
                try:
                    c = model.layer_cost(u, part, ui["wr"], lo if u is not lay else Layout.NCHW,
                                         lo if u is lay else Layout.NCHW)
                except CapacityError:
                    total = math.inf
                    break
                total += c.dram
            if best is None or total < best[0]:
                best = (total, lo)
        out[lay.name] = best[1]
    return out


def baseline_map(net: Network, cfg, layout: int | None = None, *, lm_goal: str = "node",
                 model: NodeModel | None = None) -> Mapping:
    """The baseline of Sec. VIII-B: every layer on the whole array in turn, WR at its
    maximum and lowered from the layers with the most weights until the weights fit a
    node's DRAM, one DL for all layers (the best of NCHW, NHWC, NCHW[C8] by the
    :func:`evaluate`d latency).

    The paper takes each layer's LM from Timeloop with the goal "Delay", a per-layer
    search that sees the node's engine, buffers and DRAM but neither the NoC's data
    sharing nor the neighbouring layers, and keeps it when WR is lowered. With
    ``lm_goal="node"`` (the default) the LM is likewise the one of least engine and
    DRAM cycles on a node, chosen once; ``lm_goal="full"`` instead picks, for each WR,
    the LM of least latency including the layer's own data sharing (a stronger
    baseline than the paper's, kept for comparison)."""
    if lm_goal not in ("node", "full"):
        raise ValueError(f"lm_goal must be 'node' or 'full', not {lm_goal!r}")
    model = model or NodeModel(cfg)
    best = None
    for lo in ([layout] if layout is not None else LAYOUTS):
        m = _baseline_layout(net, cfg, lo, lm_goal, model)
        if best is None or m.latency_cycles < best.latency_cycles:
            best = m
    assert best is not None
    return best


def _baseline_layout(net: Network, cfg, lo: int, lm_goal: str, model: NodeModel) -> Mapping:
    """:func:`baseline_map` with the one layout *lo* (evaluated)."""
    n = cfg.nicepim
    h, w = n.na_rows, n.na_cols
    wr = {lay.name: h * w for lay in net.layers}
    fixed: dict[str, Partition] = {}
    costs: dict[str, tuple[LayerCost, Partition]] = {}

    def cost(lay: Layer) -> tuple[LayerCost, Partition]:
        if lay.name in fixed:
            part = fixed[lay.name]
            return model.layer_cost(lay, part, wr[lay.name], lo, lo), part
        found = model.cheapest(lay, layer_partitions(lay, h, w), wr[lay.name], lo, lo,
                               share=lm_goal == "full")
        if not found:
            raise CapacityError(f"layer {lay.name} fits no partition of the array")
        c, part = found[0]
        if lm_goal == "node":
            fixed[lay.name] = part
        return c, part

    for lay in net.layers[1:]:
        costs[lay.name] = cost(lay)
    heavy = sorted((lay for lay in net.layers if lay.weights and not lay.dynamic_weights),
                   key=lambda lay: -lay.weights)
    while sum(c.weight_bytes for c, _ in costs.values()) > n.node_bytes:
        for lay in heavy:
            if wr[lay.name] > 1:
                wr[lay.name] //= 2
                costs[lay.name] = cost(lay)
                break
        else:
            raise CapacityError("the weights do not fit the nodes' DRAM even unreplicated")
    m = Mapping(net.name, f"baseline ({Layout(lo).name})", 0.0, 0.0)
    m.weight_bytes_per_node = sum(c.weight_bytes for c, _ in costs.values())
    m.layouts = {lay.name: Layout(lo).name for lay in net.layers}
    for name, (c, part) in costs.items():
        m.layers[name] = {"region": [0, 0, h, w], "wr": wr[name], "partition": str(part),
                          "cycles": c.cycles, "weight_bytes": c.weight_bytes,
                          "energy_pj": c.energy_pj * h * w, "compute": c.compute,
                          "dram": c.dram, "share": c.share}
    return evaluate(net, cfg, m, model)


def _initial_mapping(net: Network, cfg, model: NodeModel) -> Mapping:
    """Algorithm 1's initial mapping: ``min((baseline_map(net, cfg, lm_goal=goal,
    model=model) for goal in ("full", "node")), key=latency)``, the first of least
    latency in the order of the goals and, within one, of :data:`LAYOUTS`, found with
    less work. The layout of least floor of its latency (:func:`_baseline_floor`) is
    mapped first, with both goals; then a (goal, layout) pair whose floor shows that it
    cannot be that first one is not mapped at all, its floor summed only as far as it
    takes to show it (:class:`_Floor`). (Where the weights might not fit a node's DRAM
    even unreplicated, every pair is mapped, so that one that fails still raises.)"""
    n = cfg.nicepim
    h, w = n.na_rows, n.na_cols
    runs = [(goal, lo) for goal in ("full", "node") for lo in LAYOUTS]
    floors = None
    order = list(range(len(runs)))
    if _weights_fit_unreplicated(net, model, h, w, n.node_bytes):
        floors = {lo: _Floor(net, model, lo, h, w) for lo in LAYOUTS}
        while True:     # the least whole floor: extend the least partial one until whole
            least = min(floors.values(), key=lambda f: f.value)
            if least.done:
                break
            least.extend()
        order.sort(key=lambda i: runs[i][1] != least.layout)
    best, best_i = None, -1
    for i in order:
        goal, lo = runs[i]
        if best is not None and floors is not None:
            f = floors[lo]
            f.extend_past(best.latency_cycles)
            if f.value > best.latency_cycles or (f.value == best.latency_cycles and i > best_i):
                continue    # its latency is at least the best's, and it comes later
        m = _baseline_layout(net, cfg, lo, goal, model)
        if (best is None or m.latency_cycles < best.latency_cycles
                or (m.latency_cycles == best.latency_cycles and i < best_i)):
            best, best_i = m, i
    assert best is not None
    return best


def _layer_floor(lay: Layer, model: NodeModel, lo: int, h: int, w: int) -> float:
    """A lower bound of a layer's cycles in :func:`baseline_map` with the layout *lo*,
    for either LM goal: they are at least its ``compute + dram``, which is at least the
    least :meth:`~.mapcost.NodeModel.cycles_bound` (without the sharing) of its LMs,
    less a cycle for the bound's rounding.

    The LMs are bounded in the order of their engine cycles
    (:meth:`~.mapcost.NodeModel.engine_bound`, at most their bound): once those reach
    the least bound found, no later LM can lower it, and its DMA is not bounded."""
    if lay.kind not in ("conv", "fc", "matmul"):
        return 0.0              # (bound at 0)
    engines = []
    for i, part in enumerate(layer_partitions(lay, h, w)):
        try:
            engines.append((model.engine_bound(lay, part), i, part))
        except CapacityError:
            return 0.0          # its task list decides
    least = math.inf
    for eng, _, part in sorted(engines, key=itemgetter(0, 1)):
        if eng >= least:
            break
        least = min(least, model.cycles_bound(lay, part, h * w, lo, lo, share=False))
    return max(0.0, least - 1) if least != math.inf else 0.0


def _baseline_floor(net: Network, model: NodeModel, lo: int, h: int, w: int) -> float:
    """A lower bound of :func:`baseline_map`'s latency with the layout *lo*, for either
    LM goal: its layers' floors (:func:`_layer_floor`); the movements add to them."""
    return sum(_layer_floor(lay, model, lo, h, w) for lay in net.layers[1:])


class _Floor:
    """:func:`_baseline_floor` summed a layer at a time, the layers with most MACs
    first (layers without MACs bound at 0): :attr:`value`, a lower bound of the whole
    floor at every step, grows to it."""

    def __init__(self, net: Network, model: NodeModel, layout: int, h: int, w: int):
        self.layout, self._args = layout, (model, layout, h, w)
        self._lays = sorted((lay for lay in net.layers[1:]
                             if lay.kind in ("conv", "fc", "matmul")), key=lambda lay: -lay.macs)
        self._next = 0
        self.value = 0.0

    @property
    def done(self) -> bool:
        return self._next == len(self._lays)

    def extend(self) -> None:
        """Add the next layer's floor."""
        self.value += _layer_floor(self._lays[self._next], *self._args)
        self._next += 1

    def extend_past(self, limit: float) -> None:
        """Add layers' floors until the value exceeds *limit* or is whole."""
        while self.value <= limit and not self.done:
            self.extend()


def _weights_fit_unreplicated(net: Network, model: NodeModel, h: int, w: int,
                              node_bytes: int) -> bool:
    """Whether the weights a node keeps fit its *node_bytes* with every layer whose WR
    :func:`baseline_map` lowers unreplicated (WR 1), each in the LM that keeps the most
    of them: then no layout of it can fail for want of DRAM."""
    total = 0
    for lay in net.layers[1:]:
        if lay.kind not in ("conv", "fc", "matmul") or lay.dynamic_weights:
            continue            # (no weights a node keeps)
        total += _most_weights(lay, model, h, w)
    return total <= node_bytes


def _most_weights(lay: Layer, model: NodeModel, h: int, w: int) -> int:
    """The most weight bytes a node keeps of *lay* (with weights a node keeps)
    unreplicated in any of its LMs on an ``h x w`` region. They depend on an LM only
    through its parts' sizes, so each distinct sizes is counted once; memoized in
    ``model.memo`` by the layer's shape and the region's size."""
    key = ("most_weights", layer_shape(lay), h, w)
    most = model.memo.get(key)
    if most is None:
        most = 0
        for sizes in dict.fromkeys(part.sizes for part in layer_partitions(lay, h, w)):
            pb, _, pp, pq, _ = sizes
            _, w_bytes, _ = model._node_bytes(lay, *model._node_dims(lay, sizes))
            # (a layer without weights to lower keeps its WR: a node keeps them all)
            most = max(most, math.ceil(w_bytes / (pb * pp * pq)) if lay.weights else w_bytes)
        model.memo[key] = most
    return most
