"""PIM-Mapper's cost model: one node's cycles and energy for its part of a layer.

The cost of one node's part of a layer follows the node's hardware
(:mod:`pimforge.rtl.nicepim`): the node's task list, tiled as the node's lowering tiles
it (:mod:`.tiling`: output channels ``pe_cols`` at a time, output-row bands,
input-channel chunks and kernel-row bands as large as the buffers hold), costed
task by task by :mod:`.node_model` (the engine's
:func:`~pimforge.rtl.nicepim.engine.tile_cycles`, the tensor DMA, its DRAM word reads,
write-backs and row activations in the tensor's layout, the controller's cycles per
task, refresh) and checked against the node RTL on sampled layer tiles
(:mod:`.costmodel_check`); the data sharing of Sec. VII as Hamilton cycles of one
link per edge (:mod:`.sharing`'s model), each step costed as the node's data-sharing
unit moves it (:meth:`.node_model.NodeTiming.share_step`). Node tasks run one after
the other (the node controller is in order), so a layer's latency on a node is the
sum; the layer's latency is its slowest node's. Energy: MACs, buffer accesses, DRAM
bits and NoC bit-hops at the config's ``dram_pj_per_bit`` and ``noc_pj_per_bit_hop``
and the constants below.

Layers without MACs (pools, additions, softmax, normalization) cost their DRAM
traffic and one element per PE column and cycle (they run on the host in ``pimforge
run dnn``; that part of the model is not checked against hardware).
:class:`WhatIfNodeModel` replaces the engine or the DMA by what a simulator of the
paper's kind counts, for studies of the mapping's headroom.
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass
from operator import itemgetter

from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.engine import tile_cycles
from pimforge.rtl.nicepim.params import C_BLOCK, DATA_BITS, PSUM_BITS, Layout
from pimforge.rtl.nicepim.share import MESSAGE_FLITS
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

from .mapspace import Partition, layer_shape, spacing
from .networks import Layer
from .node_model import NodeTiming, cycles_lower_bound, part_cost
from .share_port import same_row_words
from .sharing import METHODS as SHARE_METHODS
from .sharing import set_loads
from .tiling import ConvPart, blocking

#: The schedules ``NodeModel(sharing="best")`` chooses among.
BEST_SHARING = ("ilp", "tsp")

__all__ = ["BEST_SHARING", "E_BUF_PJ_PER_BIT", "E_MAC_PJ", "WHAT_IF", "LayerCost", "NodeModel",
           "RankedLMs", "WhatIfNodeModel", "node_model"]

#: Energy of one 16-bit multiply-accumulate, pJ (an assumption of this model: a 16-bit
#: integer multiplier and 32-bit adder in a 28 nm class process).
E_MAC_PJ = 0.2
#: Energy of one bit read from or written to a node's SRAM buffers, pJ (assumed).
E_BUF_PJ_PER_BIT = 0.02


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


class RankedLMs:
    """A layer's LMs for one WR and pair of layouts in the order of their cost
    (:meth:`NodeModel.layer_cost`'s ``compute + dram``, plus ``share`` with *share*;
    ties in the order of the LMs), LMs that raise :class:`CapacityError` left out, costed
    only as far as they are asked for (:meth:`item`).

    The LMs wait in the order of :meth:`NodeModel.cycles_bound`; the next in cost is
    the least of those costed once the bound of the next waiting one exceeds it (a
    bound may sit a rounding error above its cost: a cycle of margin), so an LM is
    costed only when its bound is within a cycle of the cost of the one asked for.
    :meth:`NodeModel.cheapest` takes the first few; :func:`.selection.layer_candidates`
    takes them one at a time until :meth:`floor` shows that the rest cannot matter.

    The bounds themselves are found lazily: the LMs wait first in the order of their
    node bound (the bound without the sharing, which only adds to it), and an LM's
    sharing is found only once its node bound is reached (:meth:`_entry`): the order is
    the one sorting every bound gives, without the sharing of the LMs never reached."""

    def __init__(self, model: NodeModel, lay: Layer, wr: int, layout_in: int,
                 layout_out: int, share: bool, pending: list, bound=None):
        self._cost = lambda part: model.layer_cost(lay, part, wr, layout_in, layout_out)
        self._share = share
        #: (node bound, index, LM), least first: the LMs whose bound is not known yet
        #: (the bound is at least the node bound: it adds the sharing's cycles)
        self._pending = pending
        self._bound = bound         # an LM's bound (None: its node bound)
        self._pend = 0              # the first of them
        #: (bound, index, LM, node bound, place in *pending*) known, not yet ordered
        self._heap: list = []
        #: (bound, index, LM, bound of its compute + dram, place in *pending*), least bound
        #: first, as far as it has been asked for (:meth:`_entry`)
        self._order: list = []
        self._next = 0                                  # the first still waiting
        # the LMs taken from the waiting ones (by place in *pending*), and the first
        # place not taken: the least node bound still waiting is that place's
        self._taken = bytearray(len(pending))
        self._low = 0
        self._costed: list = []     # a heap of (goal, index, cost, LM) not yet ranked
        self._ranked: list[tuple[LayerCost, Partition]] = []
        self._ranked_at: list[int] = []     # the index of each ranked LM
        #: (compute + dram, index) of every LM costed, least first (:meth:`floor`)
        self._least: list[tuple[float, int]] = []

    def _entry(self, k: int) -> tuple | None:
        """The *k*-th LM in the order of the bounds (ties in the LMs' order), None past
        the last: an LM's bound (its sharing) is found only once no LM with a lesser node
        bound is still pending, which gives the order sorting every bound gives."""
        order, heap, pending = self._order, self._heap, self._pending
        while len(order) <= k:
            while self._pend < len(pending):
                node, i, part = pending[self._pend]
                if heap and (heap[0][0], heap[0][1]) < (node, i):
                    break       # every pending bound is at least (node, i)
                self._pend += 1
                b = node if self._bound is None or node == -math.inf else \
                    self._bound(part)
                heapq.heappush(heap, (b, i, part, node, self._pend - 1))
            if not heap:
                return None
            order.append(heapq.heappop(heap))
        return order[k]

    def item(self, j: int) -> tuple[LayerCost, Partition] | None:
        """The (cost, LM) of the *j*-th least cost, None if fewer LMs fit."""
        while len(self._ranked) <= j:
            while (entry := self._entry(self._next)) is not None:
                b, i, part, _, at = entry
                if self._costed:
                    least, at_c = self._costed[0][:2]
                    if b - 1 > least or (b - 1 == least and i > at_c):
                        break       # no waiting LM can come before the least costed
                self._next += 1
                self._taken[at] = 1
                while self._low < len(self._taken) and self._taken[self._low]:
                    self._low += 1
                try:
                    c = self._cost(part)
                except CapacityError:
                    continue
                heapq.heappush(self._costed, (c.cycles if self._share else c.compute + c.dram,
                                              i, c, part))
                bisect.insort(self._least, (c.compute + c.dram, i))
            if not self._costed:
                return None
            _, i, c, part = heapq.heappop(self._costed)
            self._ranked.append((c, part))
            self._ranked_at.append(i)
        return self._ranked[j]

    def first(self, n: int) -> list[tuple[LayerCost, Partition]]:
        """The (cost, LM) of the *n* least costs (fewer if fewer LMs fit)."""
        out = []
        while len(out) < n and (got := self.item(len(out))) is not None:
            out.append(got)
        return out

    def floor(self, j: int) -> float:
        """A lower bound of the ``compute + dram`` of every LM from the *j*-th least
        cost on, and so of its cycles in any spatial order: the exact one of those
        costed, the bound of those waiting (less a cycle of margin for a bound's
        rounding)."""
        # (the pending LMs are in the order of their node bounds)
        waiting = self._pending[self._low][0] if self._low < len(self._pending) else math.inf
        # an LM costed is ranked from the j-th on or not ranked yet, unless it is one of
        # the first j ranked: the least of the others, of all costed in order
        first = set(self._ranked_at[:j])
        costed = next((cost for cost, i in self._least if i not in first), math.inf)
        return min(waiting - 1, costed)


class NodeModel:
    """The per-node cost model of a config's ``nicepim`` section (see the module docstring)."""

    #: Whether :meth:`cycles_bound` may use the node's DMA and controller
    #: (:func:`~.node_model.cycles_lower_bound`, which holds for this model's timing and
    #: engine only).
    dma_bound = True

    def __init__(self, cfg, *, sharing: str = "best"):
        n = cfg.nicepim
        self.n = n
        if sharing != "best" and sharing not in SHARE_METHODS:
            raise ValueError(f"sharing must be 'best' or one of {SHARE_METHODS}, not "
                             f"{sharing!r}")
        #: The Data-Scheduler's methods a sharing set may use (the fastest is taken).
        #: ``best`` leaves SHP out: its many flows per link block one another's packets
        #: on the routers' VCs, which the link count misses (a 16-node SHP set ran 2.2x
        #: its model on the RTL, :func:`.costmodel_check.schedule_on_array`), so its model
        #: is too fast to be chosen by; its links always carry at least a Hamilton
        #: cycle's.
        self.share_methods = BEST_SHARING if sharing == "best" else (sharing,)
        #: A link's cycles for one message: a flit a cycle, and with one VC the head's
        #: extra cycle per packet in each router.
        self.link_message = MESSAGE_FLITS + (HEAD_CYCLES_PER_HOP - 1 if n.noc_vcs == 1
                                             else 0)
        self.R, self.C = n.pe_rows, n.pe_cols
        self.word_bytes = n.word_bytes
        self.row_bytes = n.row_bytes * n.banks_per_node   # the banks open a row together
        t = n.timing
        self.act_cycles = math.ceil((t.tRP + t.tRCD) / n.tck_ns)
        self.flit_bytes = n.flit_bits // 8
        self.packet_flits = n.noc_packet_flits
        self.timing = NodeTiming(n)
        self._engine: dict = {}             # compute_cycles by its arguments
        self._layer: dict = {}              # layer_cost by the layer's shape and its LM
        self._node: dict = {}               # its node terms by the shape and the LM's sizes
        self._share: dict = {}              # share_cycles by its arguments
        self._bound: dict = {}              # cycles_bound's node terms by shape, layouts
        self._shares: dict = {}             # _sharing by shape, LM and weights' set
        self._ranked: dict = {}             # ranked's rankings by their arguments
        self.memo: dict = {}                # the mapper's other results on this model

    def forget(self) -> None:
        """Drop every memo. Its rankings refer back to the model (:class:`RankedLMs`
        costs through it), so a model that is no longer used would otherwise wait, with
        its memos' hundreds of thousands of objects, for a pass of the cyclic garbage
        collector that walks them all."""
        for memo in (self._engine, self._layer, self._node, self._share, self._bound,
                     self._shares, self._ranked, self.memo):
            memo.clear()

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
        """(cycles, bit-hops) of sharing in sets of *set_size* nodes *hops* apart, each
        with *part_bytes*, by the Data-Scheduler's schedule that is fastest for them
        among :attr:`share_methods` (:func:`.sharing.set_loads`: Fig. 12's interleaved
        sets on the array):

        * Hamilton cycles (``ilp``, ``tsp``): ``set_size - 1`` steps in which every node
          sends the chunk it got last to the next one through its data-sharing unit, as
          slow as the unit (:meth:`_share_unit_step`: the chunks side by side in DRAM)
          or the busiest link, whose cycle edges take turns a message at a
          time (:attr:`link_message` cycles each), whichever is slower;
        * ``shp``: every node sends its chunk to every other, one destination after the
          other (``set_size - 1`` unit steps without waits between them) or the busiest
          link over the whole sharing, whichever is slower.

        Where the sets do not tile the array, a Hamilton cycle with one edge a link.
        Bit-hops count every message's 3 flits over its route."""
        if set_size <= 1 or part_bytes <= 0:
            return 0, 0
        key = (set_size, part_bytes, hops)
        got = self._share.get(key)
        if got is None:
            got = self._share[key] = self._share_cycles(set_size, part_bytes, hops)
        return got

    def _share_cycles(self, set_size: int, part_bytes: int, stride: int) -> tuple[int, int]:
        N = set_size
        words = math.ceil(part_bytes / self.word_bytes)
        bits = words * MESSAGE_FLITS * self.flit_bytes * 8
        best = None
        for method in self.share_methods:
            loads = set_loads(self.n.na_rows, self.n.na_cols, N, stride, method)
            if loads is None:
                continue
            pipe = HEAD_CYCLES_PER_HOP * (loads.hops + 1) - 1
            unit = self._share_unit_step(N, words, loads.hops)
            if method == "shp":
                link = loads.edges * words * self.link_message + pipe
                got = (math.ceil(max((N - 1) * unit, link)), loads.set_hops * bits)
            else:
                step = max(unit, loads.edges * words * self.link_message + pipe)
                got = (math.ceil((N - 1) * step), loads.set_hops * (N - 1) * bits)
            if best is None or got[0] < best[0]:
                best = got
        if best is None:
            step = self._share_unit_step(N, words, stride)
            best = (math.ceil((N - 1) * step), N * (N - 1) * bits * stride)
        return best

    #: Chunk positions :meth:`_share_unit_step` plays at most (evenly spread over the
    #: distinct ones, the one with most row switches among them).
    SHARE_POSITIONS = 8

    def _share_unit_step(self, N: int, words: int, hops: int) -> float:
        """The data-sharing units' step of a set of *N* nodes whose chunks of *words*
        words lie side by side in DRAM: a node sends the chunk at some position and
        receives the one before it, and the step lasts as long as its slowest node,
        i.e. the slowest of the positions (the rows the two chunks fall in differ). At
        most :data:`SHARE_POSITIONS` distinct positions are played, to bound the
        mapper's time. On the RTL (:func:`.costmodel_check.schedule_on_array`) this is
        within 5 % for Hamilton schedules of 2 to 16 nodes at link loads of one edge; the
        mean over the positions would be up to 32 % low on sets of 8 and 16."""
        row = self.timing.row_words
        keys: dict = {}
        for k in range(min(N, row)):
            sent, got = k * words, (k - 1) % N * words
            base = min(sent, got) // row * row
            keys.setdefault((sent - base, got - base),
                            same_row_words(0, words, sent, got, row))
        pos = list(keys)
        if len(pos) > self.SHARE_POSITIONS:
            most = min(pos, key=keys.get)
            step = len(pos) / (self.SHARE_POSITIONS - 1)
            pos = list(dict.fromkeys([most] + [pos[int(i * step)]
                                               for i in range(self.SHARE_POSITIONS - 1)]))
        return max(self.timing.share_step(words, hops, s, g) for s, g in pos)

    # ---- a layer ------------------------------------------------------------------------
    def layer_cost(self, lay: Layer, part: Partition, wr: int, layout_in: int = Layout.NCHW,
                   layout_out: int = Layout.NCHW) -> LayerCost:
        """One node's cost of *lay* split by *part* with weight replication *wr*: its
        samples' parts one after the other (compute, DRAM, energy), its data sharing
        (each sharing set's data of all its samples at once).

        Memoized by the layer's shape (:func:`.mapspace.layer_shape`), the LM, the size
        of its weights' sharing set (what the WR changes) and the layouts, and the
        node's part by the shape, the sizes of the LM's parts and the layouts: the
        layers of a repeated block, the WRs and spatial orders of one split and the
        later iterations of the mapper cost nothing again.

        Raises
        ------
        CapacityError
            A node's buffers cannot hold the LM's tiles."""
        shape = layer_shape(lay)
        # the WR matters only through the size of the weights' sharing set
        pb, _, pp, pq, _ = part.sizes
        key = (shape, part, math.ceil(pb * pp * pq / max(1, wr)) if lay.kind in ("conv", "fc")
               else 0, int(layout_in), int(layout_out))
        got = self._layer.get(key)
        if got is None:
            try:
                got = self._layer_cost(lay, shape, part, wr, layout_in, layout_out)
            except CapacityError as e:
                got = e
            self._layer[key] = got
        if isinstance(got, CapacityError):
            raise type(got)(*got.args)
        return got

    def _layer_cost(self, lay: Layer, shape: tuple, part: Partition, wr: int, layout_in: int,
                    layout_out: int) -> LayerCost:
        sizes = part.sizes
        key = (shape, sizes, int(layout_in), int(layout_out))
        node = self._node.get(key)
        if node is None:
            try:
                node = self._node_terms(lay, sizes, layout_in, layout_out)
            except CapacityError as e:
                node = e
            self._node[key] = node
        if isinstance(node, CapacityError):
            raise type(node)(*node.args)
        if isinstance(node, LayerCost):
            return node
        nb, cyc, dram, in_bytes, w_bytes, out_bytes, e_node, e_buf = node
        share, bits_hops, w_stored = self._shared(lay, part, wr, nb,
                                                  (in_bytes, w_bytes, out_bytes),
                                                  self._shares.setdefault(shape, {}))
        energy = e_node + bits_hops * self.n.noc_pj_per_bit_hop + e_buf
        return LayerCost(cyc, dram, share, energy, w_stored)

    def _sharing(self, lay: Layer, part: Partition, wr: int, nb: int, in_bytes: int,
                 w_bytes: int, out_bytes: int) -> tuple[int, float, int]:
        """(cycles, bit-hops per node, weight bytes a node keeps) of a layer's data
        sharing: inputs among the K parts, weights among the B/P/Q parts (WR; an
        attention product's second operand, one per sample, among the P/Q parts),
        partial sums among the C parts; hops: the spacing of the sharing set in the
        region. The bit-hops of one set are spread over its nodes."""
        pb, pk, pp, pq, pc = part.sizes
        cyc_i, bh_i = self.share_cycles(pk, in_bytes // pk, spacing(part, "k"))
        if lay.dynamic_weights:
            w_stored = 0
            set_w = pp * pq
            cyc_w, bh_w = self.share_cycles(set_w, nb * w_bytes // max(1, set_w),
                                            spacing(part, "pq"))
        else:
            set_w = math.ceil(pb * pp * pq / max(1, wr))
            w_stored = math.ceil(w_bytes / set_w)
            cyc_w, bh_w = self.share_cycles(set_w, w_stored, spacing(part, "bpq"))
        cyc_c, bh_c = self.share_cycles(pc, out_bytes // pc, spacing(part, "c"))
        return (cyc_i + cyc_w + cyc_c, bh_i / pk + bh_w / max(1, set_w) + bh_c / pc,
                w_stored)

    def _node_dims(self, lay: Layer, sizes: tuple[int, ...]) -> tuple[int, ...]:
        """(samples, input channels, output channels, output rows and columns, groups) of
        a node's part of a layer with MACs split into *sizes*."""
        pb, pk, pp, pq, pc = sizes
        nb = math.ceil(lay.n / pb)
        p, q = math.ceil(lay.p / pp), math.ceil(lay.q / pq)
        groups = max(1, math.ceil(lay.groups / pk)) if lay.groups > 1 else 1
        if groups > 1:           # whole groups, each with its share of the group's channels
            c = groups * math.ceil(lay.c // lay.groups / pc)
            k = groups * (lay.k // lay.groups)
        elif lay.groups > 1:     # a node's output channels are whole groups: their inputs
            c = math.ceil(lay.c // lay.groups * groups / pc)
            k = math.ceil(lay.k / pk)
        else:
            c, k = math.ceil(lay.c / pc), math.ceil(lay.k / pk)
        return nb, c, k, p, q, groups

    def _node_bytes(self, lay: Layer, nb: int, c: int, k: int, p: int, q: int,
                    groups: int) -> tuple[int, int, int]:
        """(input, weight, output) bytes of a node's part (:meth:`_node_dims`)."""
        rows_in = (p - 1) * lay.stride + lay.r
        cols_in = (q - 1) * lay.stride + lay.s
        w_elems = k * (c // groups if groups > 1 else c) * lay.r * lay.s
        return (nb * c * rows_in * cols_in * DATA_BITS // 8, w_elems * DATA_BITS // 8,
                nb * k * p * q * PSUM_BITS // 8)

    def cycles_bound(self, lay: Layer, part: Partition, wr: int, layout_in: int | None = None,
                     layout_out: int | None = None, *, share: bool = True) -> float:
        """A lower bound of :meth:`layer_cost`'s ``compute + dram`` (plus its ``share``
        with *share*) that costs no task list: the engine's busy cycles (the node's
        controller and DMA only add to them) and the exact data sharing; with the
        layouts, the larger of that and the node's
        :func:`~.node_model.cycles_lower_bound` (the DMA's tasks in a chain, and the
        engine's between the first loads and the last store). Layers without MACs are
        cheap to cost, and bound at 0.

        Raises
        ------
        CapacityError
            The buffers cannot hold the LM's tiles (:meth:`compute_cycles`)."""
        if lay.kind not in ("conv", "fc", "matmul"):
            return 0.0
        shape = layer_shape(lay)
        return self._bounded(lay, part, wr, layout_in, layout_out,
                             self._bound.setdefault((shape, layout_in, layout_out), {}),
                             self._shares.setdefault(shape, {}) if share else None)[1]

    def _bounded(self, lay: Layer, part: Partition, wr: int, layout_in: int | None,
                 layout_out: int | None, nodes: dict,
                 shares: dict | None) -> tuple[float, float]:
        """:meth:`cycles_bound` of a layer with MACs without and with the sharing (the
        same twice with *shares* ``None``), through its memo's entries for the layer's
        shape and layouts (*nodes*, by the LM's sizes) and for its shape (*shares*, by
        the LM and its weights' sharing set)."""
        got = self._node_bound_memo(lay, part.sizes, layout_in, layout_out, nodes)
        if isinstance(got, CapacityError):
            raise type(got)(*got.args)
        if shares is None:
            return got[0], got[0]
        return got[0], self._with_sharing(lay, part, wr, got, shares)

    def _with_sharing(self, lay: Layer, part: Partition, wr: int, got: tuple,
                      shares: dict) -> float:
        """:meth:`cycles_bound` with the sharing from the node's bound *got*
        (:meth:`_node_bound`), through the memo *shares* of the layer's shape."""
        node, nb, node_bytes = got
        return float(node + self._shared(lay, part, wr, nb, node_bytes, shares)[0])

    def _shared(self, lay: Layer, part: Partition, wr: int, nb: int,
                node_bytes: tuple[int, int, int], shares: dict) -> tuple[int, float, int]:
        """:meth:`_sharing` through the memo *shares* of the layer's shape, by the LM and
        the size of its weights' sharing set (all the WR changes): the node's samples
        and bytes (*nb*, *node_bytes*) follow from the LM's sizes. One entry serves the
        bound and the cost of the LM in every pair of layouts."""
        pb, _, pp, pq, _ = part.sizes
        key = (part, math.ceil(pb * pp * pq / max(1, wr)))
        got = shares.get(key)
        if got is None:
            got = shares[key] = self._sharing(lay, part, wr, nb, *node_bytes)
        return got

    def engine_bound(self, lay: Layer, part: Partition) -> int:
        """The engine's busy cycles of a node's part of *lay* (a layer with MACs) split
        by *part*: a lower bound of its :meth:`cycles_bound` in any layouts, which needs
        no DMA bound. :meth:`cycles_bound` raises :class:`CapacityError` for the LM if
        and only if this does (both tile the part alike, :func:`~.tiling.blocking`)."""
        nb, c, k, p, q, groups = self._node_dims(lay, part.sizes)
        return nb * self.compute_cycles(c, k, p, q, lay.r, lay.s, lay.stride, groups)[0]

    def _node_bound_memo(self, lay: Layer, sizes: tuple[int, ...], layout_in: int | None,
                         layout_out: int | None, nodes: dict) -> tuple | CapacityError:
        """:meth:`_node_bound` of a node's part of *sizes*, through *nodes*, the memo's
        entries for the layer's shape and layouts (by the sizes); the
        :class:`CapacityError` it raised where the buffers cannot hold the LM's tiles
        (returned, not raised: a ranking only leaves such an LM to its task list)."""
        got = nodes.get(sizes)
        if got is None:
            try:
                got = self._node_bound(lay, sizes, layout_in, layout_out)
            except CapacityError as e:
                got = e
            nodes[sizes] = got
        return got

    def _node_bound(self, lay: Layer, sizes: tuple[int, ...], layout_in: int | None,
                    layout_out: int | None) -> tuple[float, int, tuple[int, int, int]]:
        """(:meth:`cycles_bound` without the sharing, samples, the node's input, weight
        and output bytes) of a node's part, which depend on the LM only through its
        parts' sizes."""
        nb, c, k, p, q, groups = self._node_dims(lay, sizes)
        eng = self.compute_cycles(c, k, p, q, lay.r, lay.s, lay.stride, groups)[0]
        if self.dma_bound and layout_in is not None and layout_out is not None:
            eng = max(eng, cycles_lower_bound(
                self.n, self._conv_part(lay, c, k, p, q, groups), layout_in, layout_out,
                self.timing))
        return float(nb * eng), nb, self._node_bytes(lay, nb, c, k, p, q, groups)

    def cheapest(self, lay: Layer, parts, wr: int, layout_in: int, layout_out: int, *,
                 share: bool = True, keep: int = 1) -> list[tuple[LayerCost, Partition]]:
        """The *keep* (cost, LM) of *parts* with the least ``compute + dram`` (plus
        ``share`` with *share*), least first and, among equal ones, in the order of
        *parts*: what sorting every LM's :meth:`layer_cost` would give, LMs that raise
        :class:`CapacityError` left out (the first *keep* of :meth:`ranked`)."""
        return self.ranked(lay, parts, wr, layout_in, layout_out, share=share).first(keep)

    def ranked(self, lay: Layer, parts, wr: int, layout_in: int, layout_out: int, *,
               share: bool = True) -> RankedLMs:
        """*parts* in the order of their cost, costed as far as they are asked for
        (:class:`RankedLMs`); one ranking per layer shape, LMs, WR, layouts and goal,
        shared by the layers of one shape and by whoever asks again."""
        shape = layer_shape(lay)
        parts = tuple(parts)
        key = (shape, parts, wr, int(layout_in), int(layout_out), share)
        got = self._ranked.get(key)
        if got is not None:
            return got
        macs = lay.kind in ("conv", "fc", "matmul")
        bound = None
        pending = []
        if macs:                # (cycles_bound, its memo's entries looked up once)
            nodes = self._bound.setdefault((shape, layout_in, layout_out), {})
            terms: dict = {}    # each LM's samples and node bytes, for its sharing
            for i, part in enumerate(parts):
                got = self._node_bound_memo(lay, part.sizes, layout_in, layout_out, nodes)
                if isinstance(got, CapacityError):
                    node = -math.inf        # the task list decides (it may still fit)
                else:
                    node = got[0]
                    terms[part] = got
                pending.append((node, i, part))
            if share:           # the sharing's cycles, found only for the LMs asked for
                shares = self._shares.setdefault(shape, {})

                def bound(part: Partition) -> float:
                    return self._with_sharing(lay, part, wr, terms[part], shares)
        else:                   # layers without MACs are cheap to cost: bound at 0
            pending = [(0.0, i, part) for i, part in enumerate(parts)]
        pending.sort(key=itemgetter(0, 1))
        got = self._ranked[key] = RankedLMs(self, lay, wr, layout_in, layout_out, share,
                                            pending, bound)
        return got

    def _conv_part(self, lay: Layer, c: int, k: int, p: int, q: int,
                   groups: int) -> ConvPart:
        """The node part :meth:`_node_terms` costs: the largest of each split (the
        last)."""
        return ConvPart(c=c, k=k, h=lay.h, w=lay.w, r=lay.r, s=lay.s, stride=lay.stride,
                        pad=lay.pad, groups=groups, rows=(lay.p - p, lay.p),
                        cols=(lay.q - q, lay.q))

    def _node_terms(self, lay: Layer, sizes: tuple[int, ...], layout_in: int,
                    layout_out: int) -> LayerCost | tuple:
        """What a node's part of *lay* costs that depends on the LM only through its
        parts' sizes (not on its spatial order or the WR): the layer's whole cost for
        a layer without MACs, else ``(samples, compute cycles, DRAM cycles, input,
        weight and output bytes, energy of the MACs and DRAM, energy of the
        buffers)``."""
        if lay.kind == "input":          # the network's input is already in DRAM
            return LayerCost(0, 0, 0, 0.0, 0)
        if lay.kind not in ("conv", "fc", "matmul"):
            pb, pk, pp, pq, _ = sizes
            nb = math.ceil(lay.n / pb)
            one = self._plain_cost(lay, math.ceil(lay.k / pk), math.ceil(lay.p / pp),
                                   math.ceil(lay.q / pq), layout_in, layout_out)
            return LayerCost(nb * one.compute, nb * one.dram, 0, nb * one.energy_pj, 0)
        nb, c, k, p, q, groups = self._node_dims(lay, sizes)
        r, s, st = lay.r, lay.s, lay.stride
        # the node's task list (:mod:`.node_model`), for the largest part (the last of
        # each split), its engine tiles from compute_cycles
        node = part_cost(self.n, self._conv_part(lay, c, k, p, q, groups), layout_in,
                         layout_out, self.timing)
        eng, _, _ = self.compute_cycles(c, k, p, q, r, s, st, groups)
        cyc = nb * (eng + node.overhead)
        dram = nb * (node.dma + node.refresh)
        in_bytes, w_bytes, out_bytes = self._node_bytes(lay, nb, c, k, p, q, groups)
        macs = nb * k * (c // groups if groups > 1 else c) * r * s * p * q
        dram_bits = nb * (node.words_rd + node.words_wr) * self.word_bytes * 8
        # the energy's terms in the order they are summed (the NoC's comes between)
        e_node = macs * E_MAC_PJ + dram_bits * self.n.dram_pj_per_bit
        e_buf = (macs * 2 * DATA_BITS + nb * k * p * q * PSUM_BITS) * E_BUF_PJ_PER_BIT
        return nb, cyc, dram, in_bytes, w_bytes, out_bytes, e_node, e_buf

    def _plain_cost(self, lay: Layer, k: int, p: int, q: int, layout_in: int,
                    layout_out: int) -> LayerCost:
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

    dma_bound = False

    def __init__(self, cfg, *, engine: bool = True, dma: bool = True,
                 sharing: str = "best"):
        super().__init__(cfg, sharing=sharing)
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


def node_model(cfg, kind: str = "rtl", sharing: str = "best") -> NodeModel:
    """The node model *kind*: ``rtl`` (:class:`NodeModel`) or a :data:`WHAT_IF` of
    :class:`WhatIfNodeModel`, pricing data sharing on *sharing*'s schedules."""
    if kind not in WHAT_IF:
        raise ValueError(f"node model must be one of {', '.join(WHAT_IF)}, not {kind!r}")
    if kind == "rtl":
        return NodeModel(cfg, sharing=sharing)
    return WhatIfNodeModel(cfg, sharing=sharing, **WHAT_IF[kind])
