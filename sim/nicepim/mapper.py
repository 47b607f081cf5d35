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

The **cost model** of one node's part of a layer follows the node's hardware
(:mod:`pimforge.rtl.nicepim`): the node's task list, tiled as the node's lowering tiles
it (:mod:`.tiling`: output channels ``pe_cols`` at a time, output-row bands,
input-channel chunks and kernel-row bands as large as the buffers hold), costed
task by task by :mod:`.node_model` (the engine's
:func:`~pimforge.rtl.nicepim.engine.tile_cycles`, the tensor DMA's two cycles per
element and its DRAM word reads, write-backs and row activations in the tensor's
layout, the controller's cycles per task, refresh) and checked against the node
RTL on sampled layer tiles (:mod:`.costmodel_check`: within 5%); the data
sharing of Sec. VII as Hamilton cycles of one link per edge (:mod:`.sharing`'s
model), each step costed as the node's data-sharing unit moves it (one DRAM word in
flight, received words written through the same DRAM port; checked against the RTL
on a 2x2 ring, :func:`.costmodel_check.sharing_ring`). Node tasks run one after the other (the node
controller is in order), so a layer's latency on a node is the sum; the layer's
latency is its slowest node's. Energy: MACs, buffer accesses, DRAM bits and NoC
bit-hops at the config's ``dram_pj_per_bit`` and ``noc_pj_per_bit_hop`` and the
constants below.

**Between layers**: a layer's output stays in the DRAM of the nodes that made it
(the C parts of a split reduction each keep a slice of its channels); before a
layer runs, each of its nodes gets the part of its input window it does not hold
from the nodes that hold it (:func:`redistribution`: the boxes intersected, the
transfers routed XY at once by the nodes' data-sharing units, the slower of the busiest
sender's unit and the busiest link or port in flits). Its K set then
shares the window as the node model counts. :func:`evaluate` adds this to every
layer of a mapping, PIM-Mapper's and the baseline's alike.

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

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.engine import tile_cycles
from pimforge.rtl.nicepim.params import C_BLOCK, DATA_BITS, PSUM_BITS, Layout
from pimforge.rtl.nicepim.share import MESSAGE_FLITS
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

from .networks import Layer, Network
from .node_model import NodeTiming, part_cost
from .tiling import ConvPart, blocking

__all__ = ["E_BUF_PJ_PER_BIT", "E_MAC_PJ", "WHAT_IF", "Candidate", "LayerCost",
           "Mapping", "NodeModel", "Partition", "Placement", "baseline_map", "choose_layouts",
           "evaluate", "map_network", "mapping_select", "noc_transfer", "node_index",
           "node_model", "orders", "parse_partition", "partitions", "pieces", "placements",
           "redistribution", "WhatIfNodeModel"]

#: Energy of one 16-bit multiply-accumulate, pJ (an assumption of this model: a 16-bit
#: integer multiplier and 32-bit adder in a 28 nm class process).
E_MAC_PJ = 0.2
#: Energy of one bit read from or written to a node's SRAM buffers, pJ (assumed).
E_BUF_PJ_PER_BIT = 0.02

LAYOUTS = (Layout.NCHW, Layout.NHWC, Layout.NCHWC8)
_DIMS = ("b", "k", "p", "q", "c")
_AT = {d: i for i, d in enumerate(_DIMS)}


@dataclass(frozen=True)
class Partition:
    """An LM: partitions of B, K, P, Q, C along the region's rows (``ph``) and columns
    (``pw``), and the spatial order ``P_order`` (the five loops, outermost first).

    Only the order of the split loops matters; it is kept with the split loops first,
    in their order, and the others after them in the order of :data:`_DIMS`, so two
    partitions that lay their nodes out alike are equal. The text form
    (``str``, :func:`parse_partition`) lists the split loops in that order."""

    ph: tuple[int, int, int, int, int]
    pw: tuple[int, int, int, int, int]
    order: tuple[str, ...] = _DIMS

    def __post_init__(self):
        if len(self.ph) != len(_DIMS) or len(self.pw) != len(_DIMS):
            raise ValueError(f"a partition has {len(_DIMS)} row and column parts "
                             f"({', '.join(_DIMS)}), not {self.ph} and {self.pw}")
        if sorted(self.order) != sorted(_DIMS):
            raise ValueError(f"P_order must be an order of {''.join(_DIMS).upper()}, "
                             f"not {''.join(self.order).upper()}")
        split = [d for d in self.order if self.parts(d) > 1]
        object.__setattr__(self, "order", tuple(split + [d for d in _DIMS if d not in split]))

    def parts(self, dim: str) -> int:
        i = _AT[dim]
        return self.ph[i] * self.pw[i]

    def split(self) -> tuple[str, ...]:
        """The split loops in ``P_order``."""
        return tuple(d for d in self.order if self.parts(d) > 1)

    def __str__(self) -> str:
        return " ".join(f"{d.upper()}{self.ph[_DIMS.index(d)]}x{self.pw[_DIMS.index(d)]}"
                        for d in self.split()) or "whole"


def _factorizations(n: int, k: int) -> list[tuple[int, ...]]:
    """Ordered k-tuples of positive integers whose product is n."""
    if k == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0
            for rest in _factorizations(n // d, k - 1)]


def partitions(layer: Layer, h: int, w: int) -> list[Partition]:
    """Every LM of *layer* on an ``h x w`` region whose parts are non-empty, in the
    default spatial order (:func:`orders` gives the others)."""
    return list(_partitions(layer.n, layer.k, layer.p, layer.q, layer.c // layer.groups, h, w))


@functools.lru_cache(maxsize=4096)
def _partitions(n: int, k: int, p: int, q: int, c: int, h: int, w: int) -> tuple[Partition, ...]:
    limit = {"b": n, "k": k, "p": p, "q": q, "c": c}
    out = []
    for ph in _factorizations(h, len(_DIMS)):
        for pw in _factorizations(w, len(_DIMS)):
            if all(ph[i] * pw[i] <= limit[d] for i, d in enumerate(_DIMS)):
                out.append(Partition(ph, pw))
    return tuple(out)


_WHOLE = Partition((1,) * len(_DIMS), (1,) * len(_DIMS))


def orders(part: Partition) -> list[Partition]:
    """*part* in every spatial order that lays its nodes out differently: the orders
    of its split loops that differ in the order of the loops split along the rows or
    along the columns (*part*'s own order first)."""
    out, seen = [], set()
    for perm in itertools.permutations(part.split()):
        alt = Partition(part.ph, part.pw, perm + tuple(d for d in _DIMS if d not in perm))
        key = tuple(tuple(d for d in alt.order if ax[_DIMS.index(d)] > 1)
                    for ax in (alt.ph, alt.pw))
        if key not in seen:
            seen.add(key)
            out.append(alt)
    out.sort(key=lambda a: a != part)
    return out


@dataclass(frozen=True)
class LayerCost:
    """One node's share of a layer under one mapping: cycles and energy by part."""

    compute: int
    dram: int
    share: int
    energy_pj: float
    weight_bytes: int          # DRAM a node keeps for the layer's weights

    @property
    def cycles(self) -> int:
        return self.compute + self.dram + self.share


class NodeModel:
    """The per-node cost model of a config's ``nicepim`` section (see the module docstring)."""

    def __init__(self, cfg):
        n = cfg.nicepim
        self.n = n
        self.R, self.C = n.pe_rows, n.pe_cols
        self.word_bytes = n.word_bytes
        self.row_bytes = n.row_bytes * n.banks_per_node   # the banks open a row together
        t = n.timing
        self.act_cycles = math.ceil((t.tRP + t.tRCD) / n.tck_ns)
        self.flit_bytes = n.flit_bits // 8
        self.packet_flits = n.noc_packet_flits
        self.timing = NodeTiming(n)
        self._engine: dict = {}             # compute_cycles by its arguments

    # ---- the engine ---------------------------------------------------------------------
    def compute_cycles(self, c: int, k: int, p: int, q: int, r: int, s: int, stride: int,
                       groups: int) -> tuple[int, int, int]:
        """Engine cycles, output-row bands and output-channel blocks of a convolution
        ``c -> k`` channels onto ``p x q`` outputs on one node, tiled as the node's
        lowering tiles it (:mod:`.tiling`)."""
        key = (c, k, p, q, r, s, stride, groups)
        if key in self._engine:
            return self._engine[key]
        part = ConvPart(c=c, k=k, h=(p - 1) * stride + r, w=(q - 1) * stride + s, r=r, s=s,
                        stride=stride, pad=0, groups=groups, rows=(0, p), cols=(0, q))
        b = blocking(self.n, part)
        co_blocks = math.ceil(k // groups / self.C)
        full, last = divmod(p, b.per_rows)
        cyc = 0
        for oh, times in ((b.per_rows, full), (last, 1 if last else 0)):
            for b0 in range(0, b.blocks, b.cbs):
                for u0 in range(0, r, b.kr):
                    cyc += times * tile_cycles(pe_rows=self.R, pe_cols=self.C,
                                               cb=min(b.cbs, b.blocks - b0),
                                               kh=min(b.kr, r - u0), kw=s, oh=oh, ow=q)
        self._engine[key] = groups * co_blocks * cyc, math.ceil(p / b.per_rows), co_blocks
        return self._engine[key]

    # ---- DRAM ---------------------------------------------------------------------------
    def _runs(self, layout: int, ch: int, rows: int, cols: int, full_w: int) -> tuple[int, int]:
        """(contiguous runs, elements per run) to read *ch* channels of a ``rows x cols``
        window of a map *full_w* wide in *layout*."""
        if layout == Layout.NCHW:
            return (ch * rows, cols) if cols < full_w else (ch, rows * cols)
        if layout == Layout.NHWC:
            return (rows * cols, ch)
        blocks = math.ceil(ch / C_BLOCK)
        return (blocks * rows, cols * C_BLOCK) if cols < full_w else (blocks, rows * cols
                                                                       * C_BLOCK)

    def dram_cycles(self, layout: int, ch: int, rows: int, cols: int, full_w: int,
                    bits: int = DATA_BITS) -> tuple[int, int]:
        """(cycles, bits moved) to move a window between DRAM and a buffer: the DRAM words
        of each contiguous run, and a row activation per run that starts in another row
        (every run when runs are a row or more apart, else one per row of data)."""
        runs, elems = self._runs(layout, ch, rows, cols, full_w)
        run_bytes = elems * bits // 8
        words = runs * (math.ceil(run_bytes / self.word_bytes) + (run_bytes % self.word_bytes
                                                                  > 0))
        total = runs * run_bytes
        acts = max(math.ceil(total / self.row_bytes), runs if run_bytes < self.row_bytes
                   and full_w * ch * bits // 8 > self.row_bytes else 0)
        return words + acts * self.act_cycles, words * self.word_bytes * 8

    # ---- data sharing -------------------------------------------------------------------
    def share_cycles(self, set_size: int, part_bytes: int, hops: int) -> tuple[int, int]:
        """(cycles, bit-hops) of Hamilton-cycle sharing in a set of *set_size* nodes
        *hops* apart, each with *part_bytes*, one cycle edge per link (the Data-Scheduler's
        ILP reaches one on the interleaved sets; :mod:`.sharing`): ``set_size - 1`` steps
        in which every node sends the chunk it got last to the next one through its
        data-sharing unit (:meth:`.node_model.NodeTiming.share_step`: one DRAM word in
        flight, the received words written through the same DRAM port, the chunks side
        by side in DRAM). The unit's word (a read and 3 flits) is slower than a link's
        flits, so the links are not the bound. Bit-hops count every message's 3 flits."""
        if set_size <= 1 or part_bytes <= 0:
            return 0, 0
        tm = self.timing
        words = math.ceil(part_bytes / self.word_bytes)
        step = tm.share_step(words, tm.share_switches(words, words), hops)
        bits = words * MESSAGE_FLITS * self.flit_bytes * 8
        return math.ceil((set_size - 1) * step), set_size * (set_size - 1) * bits * hops

    # ---- a layer ------------------------------------------------------------------------
    def layer_cost(self, lay: Layer, part: Partition, wr: int, layout_in: int = Layout.NCHW,
                   layout_out: int = Layout.NCHW) -> LayerCost:
        """One node's cost of *lay* split by *part* with weight replication *wr*: its
        samples' parts one after the other (compute, DRAM, energy), its data sharing
        (each sharing set's data of all its samples at once)."""
        pb, pk, pp, pq, pc = (part.parts(d) for d in _DIMS)
        nb = math.ceil(lay.n / pb)
        k = math.ceil(lay.k / pk)
        p, q = math.ceil(lay.p / pp), math.ceil(lay.q / pq)
        c = math.ceil(lay.c / pc)
        groups = max(1, math.ceil(lay.groups / pk)) if lay.groups > 1 else 1
        if lay.groups > 1:       # a node's output channels are whole groups: their inputs
            c = math.ceil(lay.c // lay.groups * groups / pc)
        if lay.kind == "input":          # the network's input is already in DRAM
            return LayerCost(0, 0, 0, 0.0, 0)
        if lay.kind not in ("conv", "fc", "matmul"):
            one = self._plain_cost(lay, k, p, q, layout_in, layout_out, part)
            return LayerCost(nb * one.compute, nb * one.dram, 0, nb * one.energy_pj, 0)
        r, s, st = lay.r, lay.s, lay.stride
        if groups > 1:           # whole groups, each with its share of the group's channels
            c = groups * math.ceil(lay.c // lay.groups / pc)
            k = groups * (lay.k // lay.groups)
        # the node's task list (:mod:`.node_model`), for the largest part (the last of
        # each split), its engine tiles from compute_cycles
        node = part_cost(self.n, ConvPart(c=c, k=k, h=lay.h, w=lay.w, r=r, s=s, stride=st,
                                          pad=lay.pad, groups=groups,
                                          rows=(lay.p - p, lay.p), cols=(lay.q - q, lay.q)),
                         layout_in, layout_out, self.timing)
        eng, _, _ = self.compute_cycles(c, k, p, q, r, s, st, groups)
        cyc = nb * (eng + node.overhead)
        dram = nb * (node.dma + node.refresh)
        rows_in = (p - 1) * st + r
        cols_in = (q - 1) * st + s
        w_elems = k * (c // groups if groups > 1 else c) * r * s
        w_bytes = w_elems * DATA_BITS // 8
        # sharing: inputs among the K parts, weights among the B/P/Q parts (WR; an
        # attention product's second operand, one per sample, among the P/Q parts),
        # partial sums among the C parts; hops: the spacing of the sharing set in the
        # region. The bit-hops of one set are spread over its nodes.
        in_bytes = nb * c * rows_in * cols_in * DATA_BITS // 8
        cyc_i, bh_i = self.share_cycles(pk, in_bytes // pk, _spacing(part, "k"))
        if lay.dynamic_weights:
            w_stored = 0
            set_w = pp * pq
            cyc_w, bh_w = self.share_cycles(set_w, nb * w_bytes // max(1, set_w),
                                            _spacing(part, "pq"))
        else:
            set_w = math.ceil(pb * pp * pq / max(1, wr))
            w_stored = math.ceil(w_bytes / set_w)
            cyc_w, bh_w = self.share_cycles(set_w, w_stored, _spacing(part, "bpq"))
        out_bytes = nb * k * p * q * PSUM_BITS // 8
        cyc_c, bh_c = self.share_cycles(pc, out_bytes // pc, _spacing(part, "c"))
        share = cyc_i + cyc_w + cyc_c
        bits_hops = bh_i / pk + bh_w / max(1, set_w) + bh_c / pc
        macs = nb * k * (c // groups if groups > 1 else c) * r * s * p * q
        n = self.n
        dram_bits = nb * (node.words_rd + node.words_wr) * self.word_bytes * 8
        energy = (macs * E_MAC_PJ + dram_bits * n.dram_pj_per_bit
                  + bits_hops * n.noc_pj_per_bit_hop
                  + (macs * 2 * DATA_BITS + nb * k * p * q * PSUM_BITS) * E_BUF_PJ_PER_BIT)
        return LayerCost(cyc, dram, share, energy, w_stored)

    def _plain_cost(self, lay: Layer, k: int, p: int, q: int, layout_in: int, layout_out: int,
                    part: Partition) -> LayerCost:
        reads = max(1, len(lay.preds))
        cin, bits_in = self.dram_cycles(layout_in, min(lay.c, k), lay.r * p if lay.r > 1 else p,
                                        q, lay.w)
        cout, bits_out = self.dram_cycles(layout_out, k, p, q, lay.q)
        compute = math.ceil(k * p * q * max(1, lay.r * lay.s) / self.C)
        energy = (reads * bits_in + bits_out) * self.n.dram_pj_per_bit
        return LayerCost(compute, reads * cin + cout, 0, energy, 0)


class _WordRateTiming(NodeTiming):
    """The node's DRAM events with a DMA that moves one DRAM word (all the node's banks'
    width) a cycle instead of one element per two cycles, the row activations kept."""

    def dma(self, op, layout, dims, n0, c0, h0, w0, cb, nh, nw):
        _, words, rows, elements = super().dma(op, layout, dims, n0, c0, h0, w0, cb, nh, nw)
        return words + rows * self.row, words, rows, elements


class WhatIfNodeModel(NodeModel):
    """A what-if node model for studies of the mapping's headroom, :class:`NodeModel`
    with one or both of its dominant terms replaced by what a simulator of the paper's
    kind counts (Timeloop for the engine, a DRAM simulator at the banks' width):

    * ``engine``: every engine tile streams its outputs without the PE array's fill
      and drain, ``ceil(K/PE_col) ceil(C/PE_row) R S P Q`` cycles a node (the PE
      quantization kept);
    * ``dma``: the tensor DMA moves one DRAM word (``banks_per_node x 128`` bits) a
      cycle, plus ``tRP + tRCD`` per row switch, instead of two cycles per element and
      a read latency per word.

    The tiling, buffers, controller and NoC are :class:`NodeModel`'s."""

    def __init__(self, cfg, *, engine: bool = True, dma: bool = True):
        super().__init__(cfg)
        self.ideal_engine = engine
        if dma:
            self.timing = _WordRateTiming(cfg.nicepim)

    def compute_cycles(self, c: int, k: int, p: int, q: int, r: int, s: int, stride: int,
                       groups: int) -> tuple[int, int, int]:
        cyc, bands, co_blocks = super().compute_cycles(c, k, p, q, r, s, stride, groups)
        if not self.ideal_engine:
            return cyc, bands, co_blocks
        cg, og = c // groups, k // groups
        return (groups * math.ceil(og / self.C) * math.ceil(cg / self.R) * r * s * p * q,
                bands, co_blocks)


WHAT_IF = {"rtl": {}, "ideal-engine": {"engine": True, "dma": False},
           "ideal-dma": {"engine": False, "dma": True}, "ideal": {"engine": True, "dma": True}}


def node_model(cfg, kind: str = "rtl") -> NodeModel:
    """The node model *kind*: ``rtl`` (:class:`NodeModel`) or a :data:`WHAT_IF` of
    :class:`WhatIfNodeModel`."""
    if kind not in WHAT_IF:
        raise ValueError(f"node model must be one of {', '.join(WHAT_IF)}, not {kind!r}")
    return NodeModel(cfg) if kind == "rtl" else WhatIfNodeModel(cfg, **WHAT_IF[kind])


@functools.lru_cache(maxsize=65536)
def _spacing(part: Partition, dims: str) -> int:
    """Hops between neighbouring nodes of a sharing set, whose nodes differ only in
    their parts of the loops *dims*: along an axis where one of them is split, the
    split loops after the last of them in ``P_order`` vary faster, so the set's nodes
    are their parts apart; the larger of the two axes' spacings."""
    out = 1
    for ax in (part.ph, part.pw):
        members = [i for i, d in enumerate(part.order) if d in dims and ax[_DIMS.index(d)] > 1]
        if members:
            out = max(out, math.prod(ax[_DIMS.index(d)] for d in part.order[members[-1] + 1:]))
    return out


# ---- inter-layer redistribution: a producer's partitions to a consumer's ----------------------

@dataclass(frozen=True)
class Placement:
    """Where a layer runs: its LM on a region ``(y, x, h, w)`` of the array."""

    layer: Layer
    part: Partition
    region: tuple[int, int, int, int]


def _split(total: int, parts: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranges ``[lo, hi)`` of part *idx* when *total* is cut into *parts* near-equal parts."""
    return idx * total // parts, (idx + 1) * total // parts


def node_index(part: Partition, h: int, w: int) -> dict[str, np.ndarray]:
    """Each node of an ``h x w`` region, row by row: its row ``y`` and column ``x`` in
    the region and its part index along B, K, P, Q and C. Along each axis the split
    loops follow ``P_order``, the last fastest (as :func:`_spacing` assumes); a loop's
    index is its row part times its column parts plus its column part. The one
    source of where a part runs, for the model and for the runs on the RTL."""
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    ys, xs = ys.ravel(), xs.ravel()
    out = {"y": ys, "x": xs}
    ry, rx = ys.copy(), xs.copy()
    for d in reversed(part.order):
        i = _DIMS.index(d)
        hi_, wi_ = ry % part.ph[i], rx % part.pw[i]
        ry, rx = ry // part.ph[i], rx // part.pw[i]
        out[d] = hi_ * part.pw[i] + wi_
    return out


def _nodes(pl: Placement) -> dict[str, np.ndarray]:
    """:func:`node_index` of *pl*'s region, ``y`` and ``x`` absolute in the array."""
    y0, x0, h, w = pl.region
    out = node_index(pl.part, h, w)
    out["y"], out["x"] = out["y"] + y0, out["x"] + x0
    return out


def _owned(pl: Placement) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The output box ``[lo, hi)`` in samples, channels, rows and columns each node of
    *pl* keeps in its DRAM after the layer: its B, K, P and Q part; the C parts of one
    output split its channels among them (the partial sums are reduced onto the
    owners)."""
    lay, part = pl.layer, pl.part
    nd = _nodes(pl)
    n0, n1 = _split(lay.n, part.parts("b"), nd["b"])
    k0, k1 = _split(lay.k, part.parts("k"), nd["k"])
    pc = part.parts("c")
    width = k1 - k0
    c0, c1 = k0 + nd["c"] * width // pc, k0 + (nd["c"] + 1) * width // pc
    p0, p1 = _split(lay.p, part.parts("p"), nd["p"])
    q0, q1 = _split(lay.q, part.parts("q"), nd["q"])
    return nd, np.stack([n0, n1, c0, c1, p0, p1, q0, q1], axis=1)


def _home(pl: Placement, pred: Layer, offset: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The input box of *pred*'s output each node of *pl* must hold in its own DRAM
    before the layer: its window (output rows and columns back through the stride,
    padding and kernel), its input channels (its C part; for a grouped layer its groups;
    for a layer without MACs its output channels, less *offset* for a concatenation's
    later inputs). The nodes of a K set of a layer with MACs each hold one slice of the
    set's channels; the layer's own sharing (:meth:`NodeModel.layer_cost`) gathers the
    rest."""
    lay, part = pl.layer, pl.part
    nd = _nodes(pl)
    n0, n1 = _split(lay.n, part.parts("b"), nd["b"])
    p0, p1 = _split(lay.p, part.parts("p"), nd["p"])
    q0, q1 = _split(lay.q, part.parts("q"), nd["q"])
    r0 = np.clip(p0 * lay.stride - lay.pad, 0, lay.h)
    r1 = np.clip((p1 - 1) * lay.stride - lay.pad + lay.r, 0, lay.h)
    s0 = np.clip(q0 * lay.stride - lay.pad, 0, lay.w)
    s1 = np.clip((q1 - 1) * lay.stride - lay.pad + lay.s, 0, lay.w)
    r1, s1 = np.maximum(r1, r0), np.maximum(s1, s0)
    if lay.kind in ("conv", "fc", "matmul"):
        if lay.groups > 1:
            og, cg = lay.k // lay.groups, lay.c // lay.groups
            k0, k1 = _split(lay.k, part.parts("k"), nd["k"])
            g0, g1 = k0 // og, -(-k1 // og)
            c0, c1 = g0 * cg, np.maximum(g1 * cg, g0 * cg)
            w_ = c1 - c0
            c0, c1 = c0 + nd["c"] * w_ // part.parts("c"), c0 + (nd["c"] + 1) * w_ \
                // part.parts("c")
        else:
            c0, c1 = _split(lay.c, part.parts("c"), nd["c"])
            pk = part.parts("k")
            w_ = c1 - c0
            c0, c1 = c0 + nd["k"] * w_ // pk, c0 + (nd["k"] + 1) * w_ // pk
    else:
        c0, c1 = _split(lay.k, part.parts("k"), nd["k"])
        if lay.kind != "add":
            c0, c1 = c0 - offset, c1 - offset
        c0, c1 = np.clip(c0, 0, pred.k), np.clip(c1, 0, pred.k)
    return nd, np.stack([n0, n1, c0, c1, r0, r1, s0, s1], axis=1)


def _traffic(src: Placement, dst: Placement, offset: int) -> np.ndarray:
    """Rows ``(ys, xs, yd, xd, elements)`` of *src*'s output moved to *dst*'s nodes."""
    ns, own = _owned(src)
    nd, home = _home(dst, src.layer, offset)
    lay = dst.layer
    if (lay.kind not in ("concat", "add") and lay.kind in ("conv", "fc", "matmul")
            and (lay.c, lay.h, lay.w) != (src.layer.k, src.layer.p, src.layer.q)):
        # a reshape (a flatten before a classifier): the consumer's channels are the
        # producer's elements of a sample in another order; each node's home is taken,
        # sample by sample, from every producer node of that sample in proportion to
        # what that node keeps
        samples = np.maximum(np.minimum(own[:, None, 1], home[None, :, 1])
                             - np.maximum(own[:, None, 0], home[None, :, 0]), 0)
        size = np.prod(np.maximum(home[:, 3::2] - home[:, 2::2], 0), axis=1)
        per = src.layer.k * src.layer.p * src.layer.q
        share = np.prod(own[:, 3::2] - own[:, 2::2], axis=1) / max(1, per)
        amount = samples * share[:, None] * size[None, :] * per / max(
            1, lay.c * lay.h * lay.w)
    else:
        lo = np.maximum(own[:, None, 0::2], home[None, :, 0::2])
        hi = np.minimum(own[:, None, 1::2], home[None, :, 1::2])
        amount = np.prod(np.maximum(hi - lo, 0), axis=2).astype(float)
    ys, yd = np.meshgrid(ns["y"], nd["y"], indexing="ij")
    xs, xd = np.meshgrid(ns["x"], nd["x"], indexing="ij")
    keep = (amount > 0) & ((ys != yd) | (xs != xd))
    return np.stack([ys[keep], xs[keep], yd[keep], xd[keep], np.ceil(amount[keep])], axis=1)


def noc_transfer(model: NodeModel, array: tuple[int, int], rows: np.ndarray) -> tuple[int, float]:
    """(cycles, bit-hops) of moving ``rows`` = ``(ys, xs, yd, xd, bytes)`` at once over
    the mesh with XY routing by the nodes' data-sharing units (``SEND`` tasks, one DRAM
    word a message of :data:`~pimforge.rtl.nicepim.share.MESSAGE_FLITS` flits): the slower
    of the busiest sender's unit (its words one at a time,
    :meth:`.node_model.NodeTiming.share_step`; the words it receives meanwhile are
    written to other rows, so all but two of ``min(sent, received)`` reads switch rows)
    and the busiest link, injection or ejection port in flits, plus the pipeline of the
    longest path."""
    if len(rows) == 0:
        return 0, 0.0
    H, W = array
    ys, xs, yd, xd = (rows[:, i].astype(np.int64) for i in range(4))
    words = np.ceil(rows[:, 4] / model.word_bytes)
    flits = words * MESSAGE_FLITS
    # link loads by difference arrays: east/west links of row ys between xs and xd, then
    # north/south links of column xd between ys and yd; link i joins i and i + 1
    load = 0.0
    for a, b, fixed, n_fix, n_run in ((xs, xd, ys, H, W), (ys, yd, xd, W, H)):
        for sign in (1, -1):
            sel = (b - a) * sign > 0
            lo = np.where(sign > 0, a, b)[sel]
            hi = np.where(sign > 0, b, a)[sel]
            diff = np.zeros((n_fix, n_run + 1))
            np.add.at(diff, (fixed[sel], lo), flits[sel])
            np.add.at(diff, (fixed[sel], hi), -flits[sel])
            load = max(load, float(np.cumsum(diff, axis=1).max(initial=0.0)))
    port = 0.0
    per_node = []
    for y, x in ((ys, xs), (yd, xd)):
        per = np.zeros(H * W)
        np.add.at(per, y * W + x, flits)
        port = max(port, float(per.max()))
        per_node.append(per / MESSAGE_FLITS)
    sent, recv = per_node
    tm = model.timing
    unit = max(tm.share_busy(s, max(0.0, min(s, r) - 2))
               for s, r in zip(sent, recv, strict=True))
    hops = np.abs(ys - yd) + np.abs(xs - xd)
    pipe = HEAD_CYCLES_PER_HOP * (int(hops.max()) + 1) - 1
    bit_hops = float((flits * model.flit_bytes * 8 * hops).sum())
    return math.ceil(max(load, port, unit)) + pipe, bit_hops


def redistribution(model: NodeModel, array: tuple[int, int], preds: Sequence[Placement],
                   dst: Placement) -> tuple[int, float]:
    """(cycles, bit-hops) of bringing the outputs of *preds* from where their LMs left
    them to where *dst*'s LM needs them (all predecessors' transfers at once); the
    second operand of an attention product is shared by the layer's own model, and the
    network's input is placed where the first layer needs it."""
    lay = dst.layer
    rows = []
    offset = 0
    for src in preds:
        if src.layer.kind == "input" or src.layer.name == lay.operand:
            offset += src.layer.k
            continue
        t = _traffic(src, dst, offset)
        t[:, 4] *= DATA_BITS / 8
        rows.append(t)
        offset += src.layer.k
    if not rows:
        return 0, 0.0
    return noc_transfer(model, array, np.concatenate(rows))


# ---- Algorithm 2: the DP over segments, SM candidates, regions and layer candidates -----------

@dataclass(frozen=True)
class Candidate:
    """One (WR, LM) pair of a layer: its latency and the DRAM capacity it needs per node."""

    perf: float
    size: int
    wr: int = 1
    part: Partition | None = None
    energy: float = 0.0
    redist: float = 0.0        # the part of perf that moves the inputs into place


def mapping_select(segments: Sequence[Sequence[Sequence[Sequence[Candidate]]]], cap: int,
                   steps: int = 256) -> tuple[float, list[int], list[list[list[int]]]]:
    """Algorithm 2: one SM per segment and one candidate per layer, least total latency
    with the capacity used on a node (the sum over segments of the largest region's
    sizes) at most *cap*.

    Parameters
    ----------
    segments : nested sequences
        ``segments[seg][sm][region][layer]`` is the candidate list of a layer.
    cap : int
        Capacity of a node.
    steps : int
        Capacity grid: sizes are rounded up to multiples of ``cap / steps`` (of what
        the largest candidates need, when that is less than *cap*); at least 4 steps
        per layer that stores weights, so the rounding takes less than a quarter of
        the capacity however many layers the network has.

    Returns
    -------
    (latency, sm choice per segment, candidate index per segment / region / layer)

    Raises
    ------
    CapacityError
        No choice fits.
    """
    # the grid spans the capacity, or what the largest choices could use when less
    def largest(unit: int) -> int:
        return sum(max(max(sum(max(math.ceil(c.size / unit) for c in cands)
                               for cands in region) for region in sm) for sm in seg)
                   for seg in segments)

    most = largest(1)
    sized = sum(max(max(sum(any(c.size for c in cands) for cands in region) for region in sm)
                    for sm in seg) for seg in segments)
    steps = max(steps, 4 * sized)
    unit = max(1, math.ceil(min(cap, most) / steps))
    # when even the largest choices fit, the capacity binds nothing: a grid they fit
    G = largest(unit) if most <= cap else cap // unit
    INF = math.inf
    # Every table below is "least latency within g units": non-increasing in g, since
    # each is built from non-increasing tables (the empty one is all zeros).
    F = [0.0] * (G + 1)
    trace = []
    for seg in segments:
        best_seg = [INF] * (G + 1)
        pick_seg: list = [None] * (G + 1)
        for si, sm in enumerate(seg):
            reg_tabs = []
            for region in sm:
                tab = [0.0] * (G + 1)            # multiple-choice knapsack of the layers
                picks = []
                for cands in region:
                    new = [INF] * (G + 1)
                    pick = [-1] * (G + 1)
                    for ci, cand in enumerate(cands):
                        u = math.ceil(cand.size / unit)
                        for g in range(u, G + 1):
                            v = tab[g - u] + cand.perf
                            if v < new[g]:
                                new[g], pick[g] = v, ci
                    tab = new
                    picks.append(pick)
                reg_tabs.append((tab, picks))
            for g in range(G + 1):
                v = max(t[g] for t, _ in reg_tabs)
                if v < best_seg[g]:
                    best_seg[g], pick_seg[g] = v, (si, reg_tabs)
        newF = [INF] * (G + 1)
        split = [0] * (G + 1)
        for g in range(G + 1):
            for gs in range(g + 1):
                v = F[g - gs] + best_seg[gs]
                if v < newF[g]:
                    newF[g], split[g] = v, gs
        F = newF
        trace.append((pick_seg, split))
    if F[G] == INF:
        raise CapacityError(f"the weights do not fit a node's {cap} bytes of DRAM with any "
                            "weight replication; use more nodes or banks per node")
    sm_choice: list[int] = []
    layer_choice: list[list[list[int]]] = []
    g = G
    for (pick_seg, split), seg in zip(reversed(trace), reversed(segments), strict=True):
        gs = split[g]
        si, reg_tabs = pick_seg[gs]
        regions = []
        for (_, picks), region in zip(reg_tabs, seg[si], strict=True):
            gg, idx = gs, []
            for cands, pick in zip(reversed(region), reversed(picks), strict=True):
                ci = pick[gg]
                idx.append(ci)
                gg -= math.ceil(cands[ci].size / unit)
            regions.append(idx[::-1])
        sm_choice.append(si)
        layer_choice.append(regions)
        g -= gs
    return F[G], sm_choice[::-1], layer_choice[::-1]


# ---- candidates and the whole mapper -----------------------------------------------------------

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


def branch_regions(shape: tuple[int, int],
                   loads: Sequence[float]) -> list[tuple[int, int, int, int]]:
    """Slicing tree: cut an ``h x w`` array (at the origin) into ``len(loads)`` rectangles
    ``(y, x, h, w)`` with areas roughly proportional to *loads*, halving the longer side."""
    def cut(y, x, h, w, items):
        if len(items) == 1:
            return [(y, x, h, w, items[0][0])]
        half = len(items) // 2
        a, b = items[:half], items[half:]
        la, lb = sum(v for _, v in a), sum(v for _, v in b)
        if h >= w:
            ha = min(h - 1, max(1, round(h * la / (la + lb))))
            return cut(y, x, ha, w, a) + cut(y + ha, x, h - ha, w, b)
        wa = min(w - 1, max(1, round(w * la / (la + lb))))
        return cut(y, x, h, wa, a) + cut(y, x + wa, h, w - wa, b)

    h, w = shape
    items = sorted(enumerate(loads), key=lambda t: -t[1])
    out = cut(0, 0, h, w, items)
    return [r[:4] for r in sorted(out, key=lambda r: r[4])]


def _parts(lay: Layer, h: int, w: int) -> list[Partition]:
    """The LMs searched for *lay* on an ``h x w`` region: every partition of a layer with
    MACs; channels or rows and columns of the others (no input channel split)."""
    if lay.kind in ("conv", "fc", "matmul"):
        return partitions(lay, h, w)
    return [pt for pt in partitions(lay, h, w) if pt.parts("c") == 1]


def layer_candidates(model: NodeModel, lay: Layer, region: tuple[int, int, int, int],
                      wrs: Sequence[int], layouts: dict[str, int], cache: dict,
                      preds: Sequence[Placement] = (), array: tuple[int, int] = (0, 0),
                      keep: int = 8) -> list[Candidate]:
    """The (WR, LM) candidates of *lay* on *region*: for each WR the LM of least latency.
    With *preds* (where the predecessors ran in the previous iteration of Algorithm 1)
    a candidate's latency includes moving their outputs to its nodes
    (:func:`redistribution`), weighed for the *keep* fastest LMs of each WR and for
    those equal to a predecessor's on the same region."""
    _, _, h, w = region
    if lay.kind == "input":              # already in DRAM where its readers need it
        return [Candidate(0.0, 0, 1, _WHOLE)]
    li = layouts.get(lay.preds[0], Layout.NCHW) if lay.preds else Layout.NCHW
    lo = layouts.get(lay.name, Layout.NCHW)
    key = (lay.name, h, w, li, lo)
    if key not in cache:
        per_wr = []
        parts = _parts(lay, h, w)
        for wr in wrs:
            costs = []
            for part in parts:
                try:
                    costs.append((model.layer_cost(lay, part, wr, li, lo), part))
                except CapacityError:
                    continue
            if costs:
                costs.sort(key=lambda t: t[0].cycles)
                per_wr.append((wr, costs))
            if lay.weights == 0 or lay.dynamic_weights:
                break
        if not per_wr:
            raise CapacityError(f"layer {lay.name} fits no partition of a {h}x{w} region")
        cache[key] = per_wr
    preds = [p for p in preds if p.layer.kind != "input"]
    same = {p.part for p in preds if p.region == tuple(region)}
    cands = []
    for wr, costs in cache[key]:
        best = None
        tries = []
        for i, (c, part) in enumerate(costs):
            if i < keep:
                # the spatial orders of the fastest LMs (the node part is the same)
                ok = ("orders", key, wr, part)
                if ok not in cache:
                    cache[ok] = [(model.layer_cost(lay, alt, wr, li, lo), alt)
                                 for alt in orders(part)[1:]]
                tries += [(c, part), *cache[ok]]
            elif part in same:
                tries.append((c, part))
        for c, part in tries:
            move = 0
            if preds:
                rk = ("redist", lay.name, tuple(region), part, tuple(preds))
                if rk not in cache:
                    cache[rk] = redistribution(model, array, preds,
                                               Placement(lay, part, tuple(region)))[0]
                move = cache[rk]
            if best is None or c.cycles + move < best[0]:
                best = (c.cycles + move, move, c, part)
        _, move, c, part = best
        cands.append(Candidate(c.cycles + move, c.weight_bytes, wr, part, c.energy_pj, move))
    return cands


def pieces(net: Network) -> list[list[list[Layer]]]:
    """The segments as the mapper schedules them, each a list of branches that may run in
    parallel: a segment's *head* branches (those that read nothing of the segment) form
    one, and the rest of the segment (the joins and what depends on them), run in order
    on the whole array, the next; a chain segment is one branch."""
    out = []
    for seg in net.segments():
        names = {lay.name for lay in seg}
        if len(seg) > 1 and sum(s in names for s in net.succs[seg[0].name]) > 1:
            out.append([[seg[0]]])               # the fork, before its branches
            names.discard(seg[0].name)
            seg = seg[1:]
        brs = net.branches(seg)
        heads = [b for b in brs if not any(p in names for p in b[0].preds)]
        if len(brs) == 1 or len(heads) <= 1:
            out.append([seg])
            continue
        out.append(heads)
        in_heads = {lay.name for b in heads for lay in b}
        tail = [lay for lay in seg if lay.name not in in_heads]
        if tail:
            out.append([tail])
    return out


def _segment_sms(branches: list[list[Layer]], array: tuple[int, int],
                 max_regions: int) -> list[list[tuple[tuple[int, int, int, int], list[Layer]]]]:
    """SM candidates of a piece: the branches one after the other on the whole array, or
    in 2 .. N_br balanced groups (largest MACs first onto the least loaded group) on
    slicing-tree regions."""
    order = {lay.name: i for i, lay in enumerate(lay for b in branches for lay in b)}
    sms = [[((0, 0, *array), [lay for b in branches for lay in b])]]
    for n_reg in range(2, min(len(branches), max_regions, array[0] * array[1]) + 1):
        loads = [0.0] * n_reg
        groups: list[list[Layer]] = [[] for _ in range(n_reg)]
        for b in sorted(branches, key=lambda b: -sum(lay.macs + 1 for lay in b)):
            i = loads.index(min(loads))
            groups[i] += b
            loads[i] += sum(lay.macs + 1 for lay in b)
        for g in groups:
            g.sort(key=lambda lay: order[lay.name])
        regs = branch_regions(array, loads)
        if any(h < 1 or w < 1 for _, _, h, w in regs):
            continue
        sms.append(list(zip(regs, groups, strict=True)))
    return sms


def map_network(net: Network, cfg, *, iterations: int = 3, cap_steps: int = 128,
                max_regions: int = 4, model: NodeModel | None = None) -> Mapping:
    """PIM-Mapper (Algorithm 1): SM/LM/WR by Algorithm 2, then DL, repeated
    (``MAX_OPTIM_ITER`` = 3, Sec. VIII-B). Algorithm 1's initial mapping (its line 4)
    is every layer on the whole array with its fastest LM and one layout for all (the
    faster of :func:`baseline_map`'s two LM goals, both points of the mapper's space); the
    first iteration weighs the movement of each layer's inputs from where that mapping
    puts its predecessors, each later one from where the previous iteration put them.
    The result is the mapping of least :func:`evaluate`d latency visited, the initial
    one included. *model* replaces the config's node model (for what-if studies)."""
    model = model or NodeModel(cfg)
    n = cfg.nicepim
    array = (n.na_rows, n.na_cols)
    sms_per_seg = [_segment_sms(brs, array, max_regions) for brs in pieces(net)]
    base = min((baseline_map(net, cfg, lm_goal=goal, model=model) for goal in ("full", "node")),
               key=lambda b: b.latency_cycles)
    uniform = Layout[base.mapper.split("(")[1].rstrip(")")]
    layouts: dict[str, int] = {lay.name: uniform for lay in net.layers}
    prev = placements(net, base)
    base.mapper = "nicepim"
    result = base
    cache: dict = {}
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
        part = parse_partition(info["partition"]) if info else _WHOLE
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


def parse_partition(text: str) -> Partition:
    """The :class:`Partition` of a mapping's ``partition`` text (``"K2x1 Q1x2"``: the
    split loops in ``P_order`` with their row and column parts, or ``"whole"``:
    nothing split), as :meth:`Mapping.to_json` writes it.

    Raises
    ------
    ValueError
        The text is not of that form."""
    ph, pw = [1] * len(_DIMS), [1] * len(_DIMS)
    order: list[str] = []
    if text != "whole":
        for tok in text.split():
            d = tok[:1].lower()
            a, _, b = tok[1:].partition("x")
            if d not in _DIMS or d in order or not (a.isdigit() and b.isdigit()):
                raise ValueError(f"partition {text!r}: each part must be a loop of "
                                 f"{''.join(_DIMS).upper()} once with its row and column "
                                 f"parts, like K2x1, not {tok!r}")
            i = _DIMS.index(d)
            ph[i], pw[i] = int(a), int(b)
            order.append(d)
    return Partition(tuple(ph), tuple(pw), tuple(order) + tuple(d for d in _DIMS
                                                                  if d not in order))


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
    n = cfg.nicepim
    h, w = n.na_rows, n.na_cols
    best = None
    for lo in ([layout] if layout is not None else LAYOUTS):
        wr = {lay.name: h * w for lay in net.layers}
        fixed: dict[str, Partition] = {}
        costs: dict[str, tuple[LayerCost, Partition]] = {}

        def cost(lay: Layer, lo=lo, wr=wr, fixed=fixed) -> tuple[LayerCost, Partition]:
            if lay.name in fixed:
                part = fixed[lay.name]
                return model.layer_cost(lay, part, wr[lay.name], lo, lo), part
            found = None
            for part in _parts(lay, h, w):
                try:
                    c = model.layer_cost(lay, part, wr[lay.name], lo, lo)
                except CapacityError:
                    continue
                goal = c.compute + c.dram if lm_goal == "node" else c.cycles
                if found is None or goal < found[0]:
                    found = (goal, c, part)
            if found is None:
                raise CapacityError(f"layer {lay.name} fits no partition of the array")
            if lm_goal == "node":
                fixed[lay.name] = found[2]
            return found[1], found[2]

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
        m = evaluate(net, cfg, m, model)
        if best is None or m.latency_cycles < best.latency_cycles:
            best = m
    assert best is not None
    return best
