"""The cycles of one PIM-node's task list, from its tasks' fields (the node part of the
mapper's cost model, :class:`~pimforge.sim.nicepim.mapper.NodeModel`).

It follows the node's RTL (:mod:`pimforge.rtl.nicepim`) unit by unit:

* **controller**: a task costs 2 cycles of its own (fetch, dispatch) when it can start
  at once; it starts when its unit is idle and no running task uses its buffer halves
  in conflict (:class:`~pimforge.rtl.nicepim.node_ctrl.NodeController`), so with
  double buffering a tile's loads and a band's store run beside the engine. The
  model replays the task list's dispatch, unit by unit (:func:`schedule`); ``SEND``
  and ``WAIT`` cost 3 (they wait for the unit), ``END`` 2.
* **engine**: a ``COMPUTE`` tile is busy
  :func:`~pimforge.rtl.nicepim.engine.tile_cycles` cycles.
* **DMA** (:class:`~pimforge.rtl.nicepim.dma.TensorDMA`): a *group* a cycle (the lanes
  of a line in one DRAM word: one element in NCHW and for weights in NCHW, up to a
  line in NHWC, NCHW[C8] and for weights in CHWN, one for a line or the rest of it
  outside the tensor; a whole DRAM word of weight lines in KBLOCK, the layout the
  networks keep weights in where a weight-buffer row holds several lines:
  :func:`weight_layout`), unless the
  bank is slower: a load is busy ``max(groups, col_gap * words + (tRP + tRCD) *
  (rows - 1)) + LOAD_START + tRP`` (several reads in flight; the first word's
  latency, its row's activation included, after the precharge of the row the task
  before left open; only ``groups`` when it reads nothing), a store
  ``max(groups, col_gap * words) + STORE_START + rmw * STORE_RMW`` (words written
  whole; the ``rmw`` visits that cover only part of a word read it first, the walk
  held meanwhile). A load right after a store waits ``tCWL + tBL + tWR + 3`` more for
  the store's last write to land before its row closes; a load whose first row is the
  one the DMA's last access left open (the tensor the load before read, in the same
  row: :attr:`~.tiling.Tile.i_first`) saves the precharge and the activation
  (``tRP + tRCD``), and back to back its first word follows the last one's by
  ``col_gap``. NHWC inputs into an input buffer whose rows hold a word of lines
  (:func:`~pimforge.rtl.nicepim.params.ibuf_row_lines`) are walked a pixel's group of
  blocks at a time (one run of lanes, cut at words and rows). Loads a buffer half
  already holds are left out run by run (:func:`~.tiling.drop_held`).
* **refresh**: every ``tREFI`` the bank controller refreshes (``tRFC``) and the row is
  opened again (``tRCD``); the DMA's busy time stretches by that share.

The words and rows a task touches follow from its loop order and its tensor's
layout (:class:`~pimforge.rtl.nicepim.params.Layout`): the loop visits runs of consecutive
elements; a run touches ``1 + (L - 1) / U`` units (words or rows of ``U`` elements) on
average over where it starts (runs start at multiples of the gcd of the tensor's strides,
which is what the average is taken over), and consecutive runs share a unit when the
gap between them falls inside one. For a monotonic walk this is exact on average; a
walk that restarts (the channel blocks of an NHWC load, the 8-channel blocks of an
NCHW[C8] pixel wider than 8 lanes, the weights of each channel block) counts each
restart as a new sequence.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pimforge.gen.errors import CapacityError
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.rtl.nicepim.engine import tile_cycles
from pimforge.rtl.nicepim.node import DMA_INFLIGHT, QUEUE_DEPTH
from pimforge.rtl.nicepim.params import (
    C_BLOCK,
    DATA_BITS,
    PSUM_BITS,
    Layout,
    Op,
    element_address,
    ibuf_row_lines,
    wbuf_row_lines,
)
from pimforge.rtl.nicepim.share import MESSAGE_FLITS
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

from . import share_port
from .tiling import ConvPart, blocking, drop_held, loaded, tile_fields, tiles

__all__ = ["DISPATCH_CYCLES", "END_CYCLES", "LOAD_START", "SHARE_FIXED", "STORE_RMW",
           "STORE_START", "TASK_OVERHEAD", "NodeCost", "NodeTiming", "cut_pieces",
           "cycles_lower_bound", "part_cost", "schedule", "weight_layout"]

#: Cycles of a SEND or WAIT task of its own (fetch, dispatch, the end seen) and of the
#: final END.
TASK_OVERHEAD = 3
END_CYCLES = 2
#: Cycles of a sharing step besides its unit's busy time: the ``SEND``'s dispatch before
#: the unit starts (2) and the ``WAIT`` seeing the last word written (1), read off the
#: RTL's waves.
SHARE_FIXED = 3
#: Cycles of a DMA or engine task of its own when it starts at once (fetch, dispatch).
DISPATCH_CYCLES = 2
#: A load's cycles besides its groups: the first word's request, the bank controller's
#: queue, ACT and RD, the read latency and the reorder buffer (measured on the RTL,
#: :mod:`.costmodel_check`, not derived).
LOAD_START = 17
#: A store's cycles besides its groups: the output buffer's read and the last word's
#: write (measured likewise).
STORE_START = 4
#: Cycles a partly covered word's read-modify-write holds a store (request, latency,
#: merge; measured likewise).
STORE_RMW = 18


def weight_layout(n) -> Layout:
    """The layout a node of ``cfg.nicepim`` *n* keeps a layer's weights in: KBLOCK (the
    engine's order, a DRAM word of weights a cycle) where a row of its weight buffer
    holds several lines (:func:`~pimforge.rtl.nicepim.params.wbuf_row_lines`), else CHWN
    (a line a cycle, which then is a word or more)."""
    rows = wbuf_row_lines(n.pe_rows, n.pe_cols, n.wbuf_lines, n.node_bank_bits)
    return Layout.KBLOCK if rows > 1 else Layout.CHWN


class _Task(NamedTuple):
    """One task of a node's task list as the cost model replays it (:func:`schedule`
    reads the first seven fields): its unit (``"e"`` the engine, ``"d"`` the DMA), busy
    cycles, buffer halves, whether it is a load, its :class:`Op`, and for the DMA's
    tasks what the replay needs besides: ``pipe`` (a load that reads,
    :meth:`NodeTiming.pipe`), ``span`` (its tensor and the rows of its first and last
    element, :meth:`NodeTiming.span_rows`), ``held`` (a load's identity, what
    :func:`~.tiling.drop_held` compares), ``counts`` (a load's words, rows and
    elements) and ``rmw`` (a store's partly covered words)."""

    unit: str
    dur: float
    buf: int
    obuf: int
    is_load: bool
    op: int
    pipe: tuple | None = None
    span: tuple = ("", None)
    held: tuple | None = None
    counts: tuple = (0, 0, 0)
    rmw: int = 0


@dataclass(frozen=True)
class NodeCost:
    """Modelled cycles of a node's task list and its DRAM traffic. The cycles split
    into those with the engine busy (``engine``), with only the DMA busy (``dma``:
    refresh included, ``refresh`` stays 0), and the controller's own (``overhead``);
    ``dma_busy`` is all the DMA's busy cycles (``dma_busy - dma`` of them beside the
    engine)."""

    engine: float = 0.0
    dma: float = 0.0
    overhead: float = 0.0
    refresh: float = 0.0
    words_rd: float = 0.0
    words_wr: float = 0.0
    rows: float = 0.0
    refreshes: float = 0.0
    elements: float = 0.0
    tasks: int = 0
    macs: int = 0
    dma_busy: float = 0.0

    @property
    def cycles(self) -> float:
        return self.engine + self.dma + self.overhead + self.refresh

    def __add__(self, o: NodeCost) -> NodeCost:
        return NodeCost(*(getattr(self, f) + getattr(o, f) for f in _FIELDS))

    def scaled(self, k: int) -> NodeCost:
        return NodeCost(*(getattr(self, f) * k for f in _FIELDS))


_FIELDS = ("engine", "dma", "overhead", "refresh", "words_rd", "words_wr", "rows",
           "refreshes", "elements", "tasks", "macs", "dma_busy")


def _first(L: int, U: int, g: int) -> float:
    """Expected units of ``U`` elements a run of ``L`` touches, its start uniform over the
    multiples of ``g`` (a divisor of ``U``)."""
    m = U // g
    q0, r0 = divmod(L - 1, U)
    return q0 + 1 + max(0, m - -(-(U - r0) // g)) / m


def _units(L: int, levels: tuple, U: int, g: int) -> float:
    """Expected units touched, consecutively distinct, by a walk of runs of ``L``
    elements repeated by ``levels`` ``((count, stride), ...)`` inner first, every run
    starting at a multiple of ``g``."""
    g = math.gcd(g, U) or U
    m = U // g
    u, span, contiguous = _first(L, U, g), L, True
    for cnt, stride in levels:
        if cnt <= 1:
            continue
        if contiguous and stride == span:
            span *= cnt
            u = _first(span, U, g)
            continue
        contiguous = False
        gap = stride - span + 1            # last element of a group to the next start
        r1 = (span - 1) % g
        share = min(m, max(0, -(-(U - gap - r1) // g))) / m if gap < U else 0.0
        u = cnt * u - (cnt - 1) * share
        span = (cnt - 1) * stride + span
    return u


#: Walks of at most this many runs are counted run by run; longer ones by the average.
EXACT_RUNS = 4096


def _starts(L: int, levels: tuple, off: int) -> np.ndarray:
    """Start elements of a walk's runs, in walk order."""
    starts = np.array([off], dtype=np.int64)
    for cnt, stride in levels:           # inner first: the inner index varies fastest
        if cnt > 1:
            starts = (np.arange(cnt, dtype=np.int64)[None, :] * stride
                      + starts[:, None]).T.reshape(-1)
    return starts


def _exact(starts: np.ndarray, lengths: np.ndarray, U: int) -> int:
    """Units of ``U`` elements touched, consecutively distinct, by runs from *starts* of
    *lengths* (counted)."""
    first, last = starts // U, (starts + lengths - 1) // U
    return int((last - first + 1).sum() - (first[1:] == last[:-1]).sum())


#: Walks of at most this many runs (contiguous ones folded) are counted in Python, the
#: others with numpy (the same count; numpy's calls cost more than a short loop).
PYTHON_RUNS = 64


def _fold(L: int, levels: tuple) -> tuple[int, tuple]:
    """A walk's runs and levels with the inner levels that continue a run (a stride equal
    to the run's length) folded into the run: the same elements in the same order."""
    lv = []
    for cnt, stride in levels:
        if cnt <= 1:
            continue
        if not lv and stride == L:
            L *= cnt
            continue
        lv.append((cnt, stride))
    return L, tuple(lv)


def _walk_units(walks: list[tuple[int, tuple, int]], U: int, V: int) -> tuple[int, int]:
    """Units of ``U`` and of ``V`` elements touched, consecutively distinct, by the
    walks ``(L, levels, offset)`` one after the other (:func:`_exact` over all their
    runs)."""
    if sum(math.prod(c for c, _ in lv) for _, lv, _ in walks) > PYTHON_RUNS:
        starts = [_starts(L, lv, off) for L, lv, off in walks]
        lengths = np.concatenate([np.full(len(st), L) for st, (L, _, _) in
                                  zip(starts, walks, strict=True)])
        starts = np.concatenate(starts)
        return _exact(starts, lengths, U), _exact(starts, lengths, V)
    nu = nv = 0
    pu = pv = None
    for L, lv, off in walks:
        starts = [off]
        for cnt, stride in lv:          # inner first: the inner index varies fastest
            starts = [s + i * stride for i in range(cnt) for s in starts]
        for st in starts:
            end = st + L - 1
            fu, lu, fv, lv_ = st // U, end // U, st // V, end // V
            nu += lu - fu + (fu != pu)
            nv += lv_ - fv + (fv != pv)
            pu, pv = lu, lv_
    return nu, nv


def _walk_count(walks: tuple, U: int) -> int:
    """:func:`_walk_units`' count for units of ``U`` elements alone."""
    if sum(math.prod(c for c, _ in lv) for _, lv, _ in walks) > PYTHON_RUNS:
        starts = [_starts(L, lv, off) for L, lv, off in walks]
        lengths = np.concatenate([np.full(len(st), L) for st, (L, _, _) in
                                  zip(starts, walks, strict=True)])
        return _exact(np.concatenate(starts), lengths, U)
    nu = 0
    pu = None
    for L, lv, off in walks:
        starts = [off]
        for cnt, stride in lv:          # inner first: the inner index varies fastest
            starts = [s + i * stride for i in range(cnt) for s in starts]
        for st in starts:
            fu, lu = st // U, (st + L - 1) // U
            nu += lu - fu + (fu != pu)
            pu = lu
    return nu


#: A walk whose runs share no unit is counted in closed form along one level when its
#: other levels make at most this many starts.
FOLD_BASES = 16


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum(floor((a * i + b) / m) for i in range(n))`` for ``a >= 0``, ``m > 0``, in
    O(log m) steps (the Euclidean-like reduction)."""
    q, b = divmod(b, m)
    total = n * q
    while n:
        if a >= m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y = a * n + b
        if y < m:
            break
        n, b = divmod(y, m)
        m, a = a, m
    return total


def _walk_units_memo(walks: list[tuple[int, tuple, int]], U: int, memo: dict) -> int:
    """:func:`_walk_units`' count for units of ``U`` elements, the same number found with
    less work: a single walk that only moves forward and skips less than a unit at each
    step touches every unit from its first element's to its last one's; else the count
    depends on the offsets only modulo ``U`` (all moved by whole units, every unit index
    moves alike), and *memo* keeps it by the walks moved to the first one's unit (the
    closed form's count too: the same walks recur in other tasks)."""
    if len(walks) == 1:
        L, lv, off = walks[0]
        ext, k = L, 0                   # elements from the first run's start to the end
        while k < len(lv) and 0 <= lv[k][1] - ext < U:
            ext += (lv[k][0] - 1) * lv[k][1]
            k += 1
        if k == len(lv):
            return (off + ext - 1) // U - off // U + 1
    base = walks[0][2] // U * U
    key = (U, tuple((L, lv, off - base) for L, lv, off in walks))
    got = memo.get(key)
    if got is not None:
        return got
    if len(walks) == 1:
        # the levels folded so far touch every unit from their first element to their
        # last, like one run of ext elements; where no two consecutive such runs can
        # share a unit (:func:`_apart`), the count is each run's units, summed over
        # the runs in closed form along the longest level
        outer = lv[k:]
        if _apart(ext, outer, U):
            i = max(range(len(outer)), key=lambda j: outer[j][0])
            cnt, stride = outer[i]
            bases = [off]
            for c, st in outer[:i] + outer[i + 1:]:
                bases = [b + j * st for j in range(c) for b in bases]
            if len(bases) <= FOLD_BASES:
                got = sum(_floor_sum(cnt, U, stride, b + ext - 1)
                          - _floor_sum(cnt, U, stride, b) + cnt for b in bases)
    if got is None:
        got = _walk_count(key[1], U)
    memo[key] = got
    return got


def _partial_visits(L: int, levels: tuple, off: int, U: int) -> int:
    """Visits to a unit of ``U`` elements (consecutive elements of the walk in one unit)
    that cover fewer than ``U`` elements, by the walk of runs of ``L`` at ``off`` repeated
    by *levels* (inner first). They depend on ``off`` only modulo ``U`` (moved by whole
    units, every unit index moves alike), and are memoized so (the stores of a part's
    output-channel blocks and bands recur there)."""
    return _partial_visits_at(L, levels, off % U, U)


@functools.lru_cache(maxsize=65536)
def _partial_visits_at(L: int, levels: tuple, off: int, U: int) -> int:
    starts = [off]
    for cnt, stride in levels:
        starts = [s + i * stride for i in range(cnt) for s in starts]
    partial = 0
    prev_u, prev_len = None, 0          # the visit still open: its unit and length
    for st in starts:
        end = st + L - 1
        fu, lu = st // U, end // U
        head = (min(end, fu * U + U - 1) - st + 1)
        if fu == prev_u:                # the run goes on with the open visit
            head += prev_len
        elif prev_u is not None:
            partial += prev_len < U
        if fu == lu:
            prev_u, prev_len = fu, head
            continue
        partial += head < U             # the middle units are covered whole
        prev_u, prev_len = lu, end % U + 1
    return partial + (prev_len < U)


def _apart_partial_visits(L: int, levels: tuple, off: int, U: int) -> int | None:
    """:func:`_partial_visits` of a walk whose consecutive runs never share a unit
    (:func:`_apart`), in closed form: each run is then visits of its own, partial where
    it starts or ends inside a unit (a run shorter than a unit: one partial visit, two
    where it straddles a unit's end), so the count is sums of ``floor((start + k) / U)``
    over the runs' starts, summed along the longest level (:func:`_floor_sum`) for each
    start of the others. None when those are more than :data:`FOLD_BASES`."""
    lv = [(c, st) for c, st in levels if c > 1]
    if not lv:
        lv = [(1, 0)]
    i = max(range(len(lv)), key=lambda j: lv[j][0])
    cnt, stride = lv[i]
    bases = [off]
    for c, st in lv[:i] + lv[i + 1:]:
        bases = [b + j * st for j in range(c) for b in bases]
        if len(bases) > FOLD_BASES:
            return None

    def floors(k: int) -> int:          # sum of floor((start + k) / U) over the runs
        return sum(_floor_sum(cnt, U, stride, b + k) for b in bases)

    runs = cnt * len(bases)
    if L < U:       # one partial visit a run, and one more where it crosses a unit's end
        return runs + floors(L - 1) - floors(0)
    # a partial visit where a run starts inside a unit and where it ends inside one:
    # start s is a unit's start iff floor(s / U) - floor((s - 1) / U) is 1
    return 2 * runs - (floors(0) - floors(-1)) - (floors(L) - floors(L - 1))


def _prefix(L: int, levels: tuple, off: int, U: int) -> float:
    """Units a long walk touches, counted on the first outer indices that make
    :data:`EXACT_RUNS` runs and scaled to all of them."""
    lv, factor = list(levels), 1.0
    for i in reversed(range(len(lv))):
        inner = math.prod(c for c, _ in lv[:i])
        if inner * lv[i][0] <= EXACT_RUNS:
            break
        keep = max(1, EXACT_RUNS // inner)
        factor *= lv[i][0] / keep
        lv[i] = (keep, lv[i][1])
    starts = _starts(L, tuple(lv), off)
    return factor * _exact(starts, np.full(len(starts), L), U)


def _pixels(base: int, hs: int, vh: int, ws: int, vw: int, dw: int) -> np.ndarray:
    """Indices ``base + h * dw + w`` of a ``vh x vw`` window at ``(hs, ws)`` of a map
    *dw* wide, row by row."""
    return (base + np.arange(hs, hs + vh, dtype=np.int64)[:, None] * dw
            + np.arange(ws, ws + vw, dtype=np.int64)[None, :]).ravel()


def _residues(lo: int, hi: int, m: int) -> list[int]:
    """How many integers of ``[lo, hi)`` there are of each residue modulo *m*."""
    return [(hi - 1 - r) // m - (lo - 1 - r) // m for r in range(m)]


def _straddles(q0: int, dw: int, dc: int, vh: int, vw: int, lo: int, hi: int, U: int) -> int:
    """The word ends strictly inside the channels ``[lo, hi)`` of the pixels ``q0 + i * dw
    + j`` (``i < vh``, ``j < vw``) of an NHWC tensor of *dc* channels, in units of ``U``
    elements: ``floor((q * dc + hi - 1) / U) - floor((q * dc + lo) / U)`` summed, as floor
    sums (:func:`_floor_sum`) along the window's rows or, where it is taller than wide,
    its columns."""
    total = 0
    if vh <= vw:
        for i in range(vh):
            s = (q0 + i * dw) * dc
            total += _floor_sum(vw, U, dc, s + hi - 1) - _floor_sum(vw, U, dc, s + lo)
    else:
        for j in range(vw):
            s = (q0 + j) * dc
            total += (_floor_sum(vh, U, dw * dc, s + hi - 1)
                      - _floor_sum(vh, U, dw * dc, s + lo))
    return total


def _clip(lo: int, size: int, total: int) -> tuple[int, int]:
    """(first valid index, valid count) of ``[lo, lo + size)`` in ``[0, total)``."""
    a, b = max(lo, 0), min(lo + size, total)
    return a, max(0, b - a)


class NodeTiming:
    """The per-event cycle costs of a config's node (see the module docstring)."""

    def __init__(self, n):
        self.n = n
        self._walks: dict = {}      # walks' unit counts (:func:`_walk_units_memo`)
        t = resolve_timing(n.timing, n.tck_ns)
        self.word = t.rd_latency + 4
        self.write = t.tCWL + t.tBL + t.tWTR
        self.row = t.tRP + t.tRCD
        self.first_row = t.tRCD
        self.refresh_cycles = t.tRFC + t.tRCD
        self.tREFI = t.tREFI
        self.t = t
        self.word_bits = n.node_bank_bits
        self.wbuf_row = wbuf_row_lines(n.pe_rows, n.pe_cols, n.wbuf_lines, n.node_bank_bits)
        self.ibuf_row = ibuf_row_lines(n.pe_rows, n.ibuf_lines, n.node_bank_bits)
        self.row_words = n.row_words
        self.col_gap = t.col_gap
        # a load after a store: the store's last write lands and its row is closed
        # (tCWL + tBL + tWR) before the load's row opens; 3 more measured on the RTL
        self.after_store = t.tCWL + t.tBL + t.tWR + 3
        self.stretch = 1 + self.refresh_cycles / self.tREFI
        # the data-sharing unit (see :meth:`share_step`): a message leaves every
        # MESSAGE_FLITS cycles into the interface, and every HEAD_CYCLES_PER_HOP - 1 more
        # at the next router, whose head flit takes that long per packet
        self.share_period = MESSAGE_FLITS + HEAD_CYCLES_PER_HOP - 1

    def _port(self, hops: int) -> dict:
        """The node's side of :mod:`.share_port`: a message's path to a node *hops* away
        (``HEAD_CYCLES_PER_HOP`` a hop, one more into the node, its flits after the
        head), the bank controller's queue, the unit's reads in flight and its pace."""
        return {"path": HEAD_CYCLES_PER_HOP * (hops + 1) + MESSAGE_FLITS,
                "queue_depth": QUEUE_DEPTH, "inflight": DMA_INFLIGHT,
                "period": self.share_period}

    def share_step(self, words: int, hops: int, sent_at: int = 0,
                   got_at: int | None = None) -> float:
        """Cycles of one sharing step on a node: a ``SEND`` of *words* DRAM words from
        word *sent_at* to a node *hops* away and the ``WAIT`` for the *words* another
        node sends it into word *got_at* (None: it receives nothing), every node of the
        set doing the same at once (:class:`~pimforge.rtl.nicepim.share.DataShare`).

        The unit keeps reads in flight and sends a message as soon as the one before
        has gone, so the step is bound by the node's DRAM port, which carries the reads
        and the received words' writes: its queue, row switches and read/write
        turnarounds are played cycle by cycle (:func:`.share_port.step_cycles`, with
        :meth:`_port`'s path and pace). Besides: the two tasks' own cycles and the
        controller's start and end (:data:`SHARE_FIXED`); refresh as for the DMA."""
        if words <= 0:
            return 0.0
        busy = share_port.step_cycles(self.t, int(words), self.row_words, int(sent_at),
                                      None if got_at is None else int(got_at),
                                      **self._port(hops))
        return SHARE_FIXED + busy * self.stretch

    def gather_step(self, words: int, hops: int, got_at: tuple[int, ...]) -> float:
        """Cycles of a gather on its receiver: ``len(got_at)`` nodes, the farthest *hops*
        away, each send it *words* words, sender ``s``'s written from DRAM word
        ``got_at[s]`` on (:func:`.share_port.gather_cycles`), plus the ``WAIT``'s own
        cycles (:data:`SHARE_FIXED`); refresh as for the DMA."""
        if words <= 0 or not got_at:
            return 0.0
        busy = share_port.gather_cycles(self.t, int(words), self.row_words,
                                        tuple(int(a) for a in got_at), **self._port(hops))
        return SHARE_FIXED + busy * self.stretch

    def share_busy(self, sent: float, received: float, hops: int = 1) -> float:
        """The unit's cycles for a node that sends *sent* words (to nodes up to *hops*
        away) and receives *received* words meanwhile, until its last word is written
        at either end, refresh included: the words it both sends and receives played as
        a step with the two chunks in different rows (the usual case: the sharing sets'
        chunks lie side by side, a chunk or more apart) and the rest at a message a
        :attr:`share_period`; a node that only sends plays its reads alone, one that
        only receives writes a word as each message arrives."""
        s, r = math.ceil(sent), math.ceil(received)
        both = min(s, r)
        kw = self._port(hops)
        if both:
            apart = self.row_words * -(-both // self.row_words)
            busy = (share_port.step_cycles(self.t, both, self.row_words, 0, apart, **kw)
                    + (max(s, r) - both) * self.share_period)
        elif s:
            busy = share_port.step_cycles(self.t, s, self.row_words, 0, None, **kw)
        else:
            busy = r * self.share_period
        return busy * self.stretch

    def pipe(self, words: float, rows: float) -> tuple[float, float, float, float] | None:
        """``(latency, gap, bank, tRC)`` of a load that reads *words* in *rows* (None: it
        reads nothing), for running back to back behind another load
        (:func:`schedule`): the first word's latency its cycles include
        (:data:`LOAD_START`, the precharge); the gap from the load before's last word to
        its own first, a row switch (``tRP + tRCD``; the RTL measures 7-13 cycles for
        weight and input loads in turn, ``scripts/nicepim/nicepim_dma_bw.py``, where
        ``tRTP + tRP + tRCD`` would overcount the networks' layers by 0.5-8 % more); the
        bank's cycles for its words (``col_gap`` a word, ``tRP + tRCD`` a further row);
        and ``tRC``, the least time from one row's activation to the next one's, which
        binds behind a load of a word or two."""
        if not words:
            return None
        return ((LOAD_START + self.row - self.first_row) * self.stretch,
                self.row * self.stretch,
                (self.col_gap * words + max(0, rows - 1) * self.row) * self.stretch,
                self.t.tRC * self.stretch)

    @functools.lru_cache(maxsize=65536)  # noqa: B019 (one per config, a handful alive)
    def dma(self, op: int, layout: int, dims: tuple[int, int, int, int], n0: int, c0: int,
            h0: int, w0: int, cb: int, nh: int, nw: int) -> tuple[float, float, float, int]:
        """(cycles, words, rows, elements) of one ``LOAD_I``/``LOAD_W``/``STORE``."""
        n = self.n
        R, C = n.pe_rows, n.pe_cols
        bits = PSUM_BITS if op == Op.STORE else DATA_BITS
        per = self.word_bits // bits
        row_el = self.row_words * per
        dn, dc, dh, dw = dims
        n_r = R if op == Op.LOAD_W else 1
        n_l = R if op == Op.LOAD_I else C
        elements = cb * nh * nw * n_r * n_l
        hs, vh = _clip(h0, nh, dh)
        ws, vw = _clip(w0, nw, dw)
        seqs: list[tuple[int, tuple, int, bool]] = []   # (L, levels, offset, monotonic)
        if op == Op.LOAD_W and layout == Layout.KBLOCK:
            # the tile's blocks: one run per channel block (one run in all when the tile
            # has the whole kernel), the tensor's first element at a DRAM row's start
            line = R * C
            pos = dh * dw * line
            start = ((n0 // C) * -(-dc // R) + c0 // R) * pos + h0 * dw * line
            size = nh * nw * line
            if size == pos and cb:      # the blocks follow one another: one run
                words = (start + cb * pos - 1) // per - start // per + 1
                rows = (start + cb * pos - 1) // row_el - start // row_el + 1
            else:                       # a run a block
                words = rows = 0
                for a in range(start, start + cb * pos, pos):
                    words += (a + size - 1) // per - a // per + 1
                    rows += (a + size - 1) // row_el - a // row_el + 1
            # (:meth:`groups`, inline)
            lines = cb * nh * nw * R
            groups = (lines // self.wbuf_row if self.wbuf_row > 1
                      else lines * -(-C // (self.word_bits // DATA_BITS)))
            cyc = (max(groups, self.col_gap * words + max(0, rows - 1) * self.row)
                   + LOAD_START + self.row - self.first_row)
            return cyc, float(words), float(rows), elements
        if vh and vw:
            if op == Op.LOAD_W and layout == Layout.CHWN:
                ns, vn = _clip(n0, C, dn)
                for b in range(cb):
                    cs, vr = _clip(c0 + b * R, R, dc)
                    if vr and vn:        # lanes innermost, then w, h, input channels
                        seqs.append((vn, ((vw, dn), (vh, dw * dn), (vr, dh * dw * dn)),
                                     ((cs * dh + hs) * dw + ws) * dn + ns, True))
            elif op == Op.LOAD_W:
                vn = _clip(n0, C, dn)[1]
                for b in range(cb):
                    cs, vr = _clip(c0 + b * R, R, dc)
                    if not (vr and vn):
                        continue
                    if vh == dh and vw == dw:
                        seqs.append((vr * dh * dw, ((vn, dc * dh * dw),),
                                     ((n0 * dc + cs) * dh + hs) * dw + ws, True))
                    else:
                        seqs.append((vw, ((vh, dw), (vr, dh * dw), (vn, dc * dh * dw)),
                                     ((n0 * dc + cs) * dh + hs) * dw + ws, True))
            else:
                if op == Op.LOAD_I and layout == Layout.NHWC and self.ibuf_row > 1:
                    # the walk takes a pixel's blocks of a group of ibuf_row together
                    ni = self.ibuf_row
                    lanes = [_clip(c0 + b * R, min(ni, cb - b) * R, dc)
                             for b in range(0, cb, ni)]
                else:
                    lanes = [(_clip(c0 + b * (R if op == Op.LOAD_I else C), n_l, dc))
                             for b in range(cb)]
                lanes = [(cs, v) for cs, v in lanes if v]
                if layout == Layout.NCHW:
                    v = sum(x for _, x in lanes)
                    if lanes:
                        seqs.append((vw, ((vh, dw), (v, dh * dw)),
                                     (lanes[0][0] * dh + hs) * dw + ws, True))
                elif layout == Layout.NHWC:
                    for cs, v in lanes:
                        seqs.append((v, ((vw, dc), (vh, dw * dc)), (hs * dw + ws) * dc + cs,
                                     True))
                else:
                    plane = dh * dw * C_BLOCK
                    for cs, v in lanes:
                        first, last = cs // C_BLOCK, (cs + v - 1) // C_BLOCK
                        pix = (hs * dw + ws) * C_BLOCK
                        if first == last:
                            seqs.append((v, ((vw, C_BLOCK), (vh, dw * C_BLOCK)),
                                         first * plane + pix + cs % C_BLOCK, True))
                        else:   # each pixel walks its lanes' 8-channel blocks, then restarts
                            seqs.append((C_BLOCK, ((last - first + 1, plane), (vw, C_BLOCK),
                                                   (vh, dw * C_BLOCK)),
                                         first * plane + pix, False))
        words = rows = 0.0
        runs = sum(math.prod(c for c, _ in lv) for _, lv, _, _ in seqs)
        if seqs and runs <= EXACT_RUNS:
            walks = [(*_fold(L, lv), off) for L, lv, off, _ in seqs]
            words = _walk_units_memo(walks, per, self._walks)
            rows = _walk_units_memo(walks, row_el, self._walks)
        else:
            for L, levels, off, monotonic in seqs:
                if monotonic:
                    g = math.gcd(off, *(st for _, st in levels))
                    words += _units(L, levels, per, math.gcd(g, per) or per)
                    rows += _units(L, levels, row_el, math.gcd(g, row_el) or row_el)
                else:   # a walk that restarts: counted on its first outer indices
                    words += _prefix(L, levels, off, per)
                    rows += _prefix(L, levels, off, row_el)
        restarts = max((lv[0][0] for _, lv, _, mono in seqs if not mono), default=0)
        if restarts > 1 and op != Op.STORE:
            # a pixel's lanes in several 8-channel planes (NCHW[C8]): the reads switch
            # planes, and so rows, every few words, but the bank controller serves the
            # reads in flight row by row (FR-FCFS): a row per plane each DMA_INFLIGHT reads
            rows = min(rows, -(-words // DMA_INFLIGHT) * restarts)
        # (groups and partly covered words count words: the same in every word class)
        hw = self.word_class(op, layout, dims, h0, nh) if op != Op.LOAD_W else h0
        groups = self.groups(op, layout, dims, n0, c0, hw, w0, cb, nh, nw)
        if op == Op.STORE:
            rmw = self.store_rmw(layout, dims, n0, c0, hw, w0, nh, nw)
            cyc = max(groups, self.col_gap * words) + STORE_START + rmw * STORE_RMW
        else:
            # (the row the task before left open is precharged first)
            cyc = (max(groups, self.col_gap * words + max(0, rows - 1) * self.row) + LOAD_START
                   + self.row - self.first_row if words else groups)
        return cyc, words, rows, elements

    def row_class(self, op: int, layout: int, dims: tuple[int, int, int, int], h0: int,
                  nh: int) -> int:
        """The first row *h0* of a window that lies inside its tensor's rows, moved up by
        whole periods of the tensor's row stride that are whole DRAM rows: the words,
        rows, groups and partly covered words of a task depend on its addresses only
        modulo a DRAM row, so the window of the returned row costs exactly the same (the
        cost model's caches then hit for the bands of a part that differ only there)."""
        if h0 <= 0 or h0 + nh > dims[2]:
            return h0
        _, dc, _, dw = dims
        stride = dw * (dc if layout == Layout.NHWC else C_BLOCK if layout == Layout.NCHWC8
                       else 1)
        row_el = self.row_words * (self.word_bits // (PSUM_BITS if op == Op.STORE
                                                      else DATA_BITS))
        return h0 % (row_el // math.gcd(row_el, stride))

    def word_class(self, op: int, layout: int, dims: tuple[int, int, int, int], h0: int,
                   nh: int) -> int:
        """:meth:`row_class` for what counts DRAM words alone (a task's words, groups and
        partly covered words): the first row *h0* of a window inside its tensor's rows,
        moved up by whole periods of the row stride that are whole DRAM words."""
        if h0 <= 0 or h0 + nh > dims[2]:
            return h0
        _, dc, _, dw = dims
        stride = dw * (dc if layout == Layout.NHWC else C_BLOCK if layout == Layout.NCHWC8
                       else 1)
        per = self.word_bits // (PSUM_BITS if op == Op.STORE else DATA_BITS)
        return h0 % (per // math.gcd(per, stride))

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def span_rows(self, op: int, layout: int, dims: tuple[int, int, int, int], n0: int,
                  c0: int, h0: int, w0: int, cb: int, nh: int,
                  nw: int) -> tuple[int, int] | None:
        """The DRAM rows (counted from the tensor's first element, at a row's start) of the
        first and the last element a task reads or writes, the corners of its window
        clipped to the tensor (None: it touches none)."""
        R, C = self.n.pe_rows, self.n.pe_cols
        row_el = self.row_words * (self.word_bits // (PSUM_BITS if op == Op.STORE
                                                      else DATA_BITS))
        dn, dc, dh, dw = dims
        if op == Op.LOAD_W and layout == Layout.KBLOCK:
            line = R * C
            pos = dh * dw * line
            a = ((n0 // C) * -(-dc // R) + c0 // R) * pos + h0 * dw * line
            return a // row_el, (a + (cb - 1) * pos + nh * nw * line - 1) // row_el
        hs, vh = _clip(h0, nh, dh)
        ws, vw = _clip(w0, nw, dw)
        if op == Op.LOAD_W:
            (ns, vn), (cs, vc) = _clip(n0, C, dn), _clip(c0, cb * R, dc)
        else:
            (ns, vn), (cs, vc) = _clip(n0, 1, dn), _clip(c0, cb * (C if op == Op.STORE
                                                                 else R), dc)
        if not (vh and vw and vn and vc):
            return None
        a = element_address(layout, dims, ns, cs, hs, ws)
        e = element_address(layout, dims, ns + vn - 1, cs + vc - 1, hs + vh - 1, ws + vw - 1)
        return a // row_el, e // row_el

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def groups(self, op: int, layout: int, dims: tuple[int, int, int, int], n0: int, c0: int,
               h0: int, w0: int, cb: int, nh: int, nw: int) -> int:
        """The DMA's groups (cycles when nothing waits) of one task (module docstring)."""
        n = self.n
        R, C = n.pe_rows, n.pe_cols
        n_r = R if op == Op.LOAD_W else 1
        n_l = R if op == Op.LOAD_I else C
        dn, dc, dh, dw = dims
        if op == Op.LOAD_W and layout == Layout.CHWN:
            return self._weight_groups(dims, n0, c0, h0, w0, cb, nh, nw)
        if op == Op.LOAD_W and layout == Layout.KBLOCK:
            # rows of wbuf_row lines a cycle; else a line, cut at the words' ends
            lines = cb * nh * nw * R
            if self.wbuf_row > 1:
                return lines // self.wbuf_row
            return lines * -(-C // (self.word_bits // DATA_BITS))
        if layout not in (Layout.NHWC, Layout.NCHWC8) or op == Op.LOAD_W:
            return cb * nh * nw * n_r * n_l
        if op == Op.LOAD_I and layout == Layout.NHWC and self.ibuf_row > 1:
            return self._input_row_groups(dims, n0, c0, h0, w0, cb, nh, nw)
        U = self.word_bits // (PSUM_BITS if op == Op.STORE else DATA_BITS)
        hs, vh = _clip(h0, nh, dh)
        ws, vw = _clip(w0, nw, dw)
        lines = cb * nh * nw
        if not (0 <= n0 < dn and vh and vw):
            return lines
        pix = None                              # the pixels' indices, made when needed
        total = lines - cb * vh * vw            # lines of pixels outside: one group each
        step = R if op == Op.LOAD_I else C
        for b in range(cb):
            cs = c0 + b * step
            lo, hi = max(cs, 0), min(cs + n_l, dc)
            total += vh * vw * (int(cs < 0) + int(cs + n_l > dc))
            if hi <= lo:
                continue
            if layout == Layout.NHWC:
                if U % dc == 0:         # a pixel's channels never straddle a word
                    total += vh * vw
                elif dc % U == 0:       # every pixel's run starts alike in its word
                    total += vh * vw * ((lo % U + hi - lo - 1) // U + 1)
                else:   # each pixel's run, its words summed along rows or columns
                    total += vh * vw + _straddles((n0 * dh + hs) * dw + ws, dw, dc, vh, vw,
                                                  lo, hi, U)
            else:
                blocks = -(-dc // C_BLOCK)
                for blk in range(lo // C_BLOCK, (hi - 1) // C_BLOCK + 1):
                    x, y = max(lo, blk * C_BLOCK), min(hi, (blk + 1) * C_BLOCK)
                    if U % C_BLOCK == 0:    # a pixel's block never straddles a word
                        total += vh * vw
                        continue
                    if pix is None:
                        pix = _pixels(n0 * dh * dw, hs, vh, ws, vw, dw)
                    a = ((n0 * blocks + blk) * dh * dw + pix - n0 * dh * dw) * C_BLOCK \
                        + x % C_BLOCK
                    total += int(((a + y - x - 1) // U - a // U + 1).sum())
        return total

    def _input_row_groups(self, dims, n0, c0, h0, w0, cb, nh, nw) -> int:
        """Groups of a ``LOAD_I`` in NHWC into an input buffer whose rows hold
        ``ibuf_row`` lines (:func:`~pimforge.rtl.nicepim.params.ibuf_row_lines`): per
        pixel and group of ``ibuf_row`` channel blocks, the group's lanes (one run of the
        buffer's lanes) cut where the channels enter or leave the tensor, at the DRAM
        words' ends and at the rows' ends: one group and a group per cut, the cuts counted
        pixel by pixel (a row's end falls inside a pixel's lanes at most once)."""
        R, NI = self.n.pe_rows, self.ibuf_row
        U = self.word_bits // DATA_BITS
        dn, dc, dh, dw = dims
        if dc % U == 0:
            return self._aligned_row_groups(dims, n0, c0, h0, w0, cb, nh, nw)
        got = self._row_groups_by_rows(dims, n0, c0, h0, w0, cb, nh, nw)
        if got is not None:
            return got
        p = np.arange(nh * nw, dtype=np.int64)
        ii, jj = np.divmod(p, nw)
        h, w = h0 + ii, w0 + jj
        pin = (0 <= n0 < dn) & (h >= 0) & (h < dh) & (w >= 0) & (w < dw)
        base = ((n0 * dh + h) * dw + w) * dc       # each pixel's channel 0
        total = 0
        for b in range(0, cb, NI):
            g = min(NI, cb - b)
            n_l, cs = g * R, c0 + b * R
            lo, hi = max(cs, 0), min(cs + n_l, dc)          # the lanes inside: [lo, hi)
            cuts = np.ones(nh * nw, dtype=np.int64)
            # a row's end inside the pixel's lanes, unless another cut falls there
            first = (b * nh * nw + p * g) * R
            lr = (-first) % (NI * R)
            row = (lr > 0) & (lr < n_l)
            if hi > lo:
                ch = int(cs < 0 < cs + n_l) + int(cs < dc < cs + n_l)
                a_lo, a_hi = base + lo, base + hi
                words = (a_hi - 1) // U - a_lo // U       # word ends strictly inside
                cuts += np.where(pin, ch + words, 0)
                c_r = cs + lr
                other = ((c_r == 0) | (c_r == dc)
                         | ((c_r > lo) & (c_r < hi) & ((base + c_r) % U == 0)))
                row &= ~(pin & other)
            cuts += row
            total += int(cuts.sum())
        return total

    def _row_groups_by_rows(self, dims, n0, c0, h0, w0, cb, nh, nw) -> int | None:
        """:meth:`_input_row_groups` in closed form where no buffer row's end can fall
        inside a pixel's lanes (each group of ``ibuf_row`` blocks a single block: a row
        then ends only at a pixel's lanes' ends), None elsewhere. A pixel's cuts are
        then one, one per channel end inside its lanes and one per DRAM word end strictly
        inside its channels ``[lo, hi)`` at ``base = pixel * channels``: ``floor((base +
        hi - 1) / U) - floor((base + lo) / U)``, summed over the window's pixels inside
        the tensor as floor sums (:func:`_floor_sum`) along its rows or columns. Where a
        pixel's lanes are all its channels, a row of pixels is one run of addresses, and
        its word ends strictly inside pixels are the run's word ends less those at a
        pixel's start (the multiples of ``lcm(U, channels)``): four floor sums along the
        rows. The same count."""
        R, NI = self.n.pe_rows, self.ibuf_row
        U = self.word_bits // DATA_BITS
        dn, dc, dh, dw = dims
        P = nh * nw
        for b in range(0, cb, NI):
            g = min(NI, cb - b)
            if g > 1 and any(0 < (-(b * P + r * g) * R) % (NI * R) < g * R
                             for r in range(NI)):
                return None
        hs, vh = _clip(h0, nh, dh)
        ws, vw = _clip(w0, nw, dw)
        inside = 0 <= n0 < dn and vh and vw
        q0 = (n0 * dh + hs) * dw + ws           # the first pixel inside
        total = 0
        for b in range(0, cb, NI):
            g = min(NI, cb - b)
            n_l, cs = g * R, c0 + b * R
            lo, hi = max(cs, 0), min(cs + n_l, dc)
            total += P
            if hi <= lo or not inside:
                continue
            total += (int(cs < 0 < cs + n_l) + int(cs < dc < cs + n_l)) * vh * vw
            if lo == 0 and hi == dc:
                L = U * dc // math.gcd(U, dc)
                a, s, e = dw * dc, q0 * dc, q0 * dc + vw * dc - 1
                total += (_floor_sum(vh, U, a, e) - _floor_sum(vh, U, a, s)
                          - _floor_sum(vh, L, a, e) + _floor_sum(vh, L, a, s))
            else:
                total += _straddles(q0, dw, dc, vh, vw, lo, hi, U)
        return total

    def _aligned_row_groups(self, dims, n0, c0, h0, w0, cb, nh, nw) -> int:
        """:meth:`_input_row_groups` where every pixel's channels start at a DRAM word's
        start (channels a multiple of the word): a pixel's cuts then depend only on
        whether it lies inside the tensor and on its index modulo ``ibuf_row`` (where
        the buffer's rows end), so they are summed by those residues, not pixel by
        pixel. The same count."""
        R, NI = self.n.pe_rows, self.ibuf_row
        U = self.word_bits // DATA_BITS
        dn, dc, dh, dw = dims
        P = nh * nw
        every = _residues(0, P, NI)             # the pixels by index modulo NI
        inside = [0] * NI                       # ... those inside the tensor
        hs, vh = _clip(h0, nh, dh)
        ws, vw = _clip(w0, nw, dw)
        if 0 <= n0 < dn and vh and vw:
            cols = _residues(ws - w0, ws - w0 + vw, NI)
            for ri, rows in enumerate(_residues(hs - h0, hs - h0 + vh, NI)):
                if rows:
                    a = ri * nw
                    for rj, n in enumerate(cols):
                        inside[(a + rj) % NI] += rows * n
        n_in = sum(inside)
        total = 0
        for b in range(0, cb, NI):
            g = min(NI, cb - b)
            n_l, cs = g * R, c0 + b * R
            lo, hi = max(cs, 0), min(cs + n_l, dc)
            total += P
            ch = int(cs < 0 < cs + n_l) + int(cs < dc < cs + n_l)
            if hi > lo:
                total += (ch + (hi - 1) // U - lo // U) * n_in
            for r in range(NI):
                lr = (-(b * P + r * g) * R) % (NI * R)      # a row's end in its lanes
                if not 0 < lr < n_l:
                    continue
                total += every[r]
                c_r = cs + lr
                if hi > lo and (c_r == 0 or c_r == dc or (lo < c_r < hi and c_r % U == 0)):
                    total -= inside[r]          # another cut falls there
        return total

    def _weight_groups(self, dims, n0, c0, h0, w0, cb, nh, nw) -> int:
        """Groups of a ``LOAD_W`` in CHWN: per line (input channel, kernel position) the
        output-channel lanes below 0 and beyond the tensor one group each, the ones
        inside cut at word ends."""
        R, C = self.n.pe_rows, self.n.pe_cols
        U = self.word_bits // DATA_BITS
        dn, dc, dh, dw = dims
        hs, vh = _clip(h0, nh, dh)
        ws, vw = _clip(w0, nw, dw)
        lines = cb * nh * nw * R
        lo, hi = max(n0, 0), min(n0 + C, dn)
        total = lines
        if not (vh and vw and hi > lo):
            return total
        per_line = int(n0 < 0) + int(n0 + C > dn)
        pix = None
        for b in range(cb):
            cs, vr = _clip(c0 + b * R, R, dc)
            if not vr:
                continue
            if U % dn == 0:         # a line's lanes never straddle a word
                segs = vr * vh * vw
            elif dn % U == 0:       # every line's lanes start alike in their word
                segs = vr * vh * vw * ((lo % U + hi - lo - 1) // U + 1)
            else:
                if pix is None:
                    pix = _pixels(0, hs, vh, ws, vw, dw)
                a = ((np.arange(cs, cs + vr)[:, None] * dh * dw + pix[None, :]) * dn
                     + lo).ravel()
                segs = int(((a + hi - lo - 1) // U - a // U + 1).sum())
            total += vr * vh * vw * (per_line - 1) + segs
        return total

    @functools.lru_cache(maxsize=65536)  # noqa: B019
    def store_rmw(self, layout: int, dims: tuple[int, int, int, int], n0: int, c0: int,
                  h0: int, w0: int, nh: int, nw: int) -> int:
        """Visits of a ``STORE`` to words it covers only in part (read first)."""
        C = self.n.pe_cols
        U = self.word_bits // PSUM_BITS
        dn, dc, dh, dw = dims
        if not 0 <= n0 < dn:
            return 0
        hs, vh = _clip(h0, nh, dh)
        ws, vw = _clip(w0, nw, dw)
        cs, vc = _clip(c0, C, dc)
        if not (vh and vw and vc):
            return 0
        # the walk as runs of consecutive addresses, where it is regular
        walk = None
        if layout == Layout.NCHW:         # lanes outermost, then rows, then pixels
            walk = _fold(vw, ((vh, dw), (vc, dh * dw)))
            off = ((n0 * dc + cs) * dh + hs) * dw + ws
        elif layout == Layout.NHWC:       # rows, pixels, lanes innermost
            walk = _fold(vc, ((vw, dc), (vh, dw * dc)))
            off = ((n0 * dh + hs) * dw + ws) * dc + cs
        elif cs // C_BLOCK == (cs + vc - 1) // C_BLOCK:     # the lanes in one block
            walk = _fold(vc, ((vw, C_BLOCK), (vh, dw * C_BLOCK)))
            blocks = -(-dc // C_BLOCK)
            off = (((n0 * blocks + cs // C_BLOCK) * dh + hs) * dw + ws) * C_BLOCK \
                + cs % C_BLOCK
        if walk is not None and math.prod(c for c, _ in walk[1]) <= PYTHON_RUNS:
            return _partial_visits(*walk, off, U)
        if walk is not None and _apart(*walk, U):
            got = _apart_partial_visits(*walk, off, U)
            if got is not None:
                return got
        c = np.arange(cs, cs + vc, dtype=np.int64)
        h = np.arange(hs, hs + vh, dtype=np.int64)
        w = np.arange(ws, ws + vw, dtype=np.int64)
        # the walk's addresses, in its order (broadcast, then flattened)
        if layout == Layout.NCHW:         # lanes outermost, then rows, then pixels
            a = (((n0 * dc + c[:, None, None]) * dh + h[None, :, None]) * dw
                 + w[None, None, :])
        elif layout == Layout.NHWC:       # rows, pixels, lanes innermost
            a = ((n0 * dh + h[:, None, None]) * dw + w[None, :, None]) * dc + c[None, None, :]
        else:
            blocks = -(-dc // C_BLOCK)
            a = ((((n0 * blocks + c[None, None, :] // C_BLOCK) * dh + h[:, None, None]) * dw
                  + w[None, :, None]) * C_BLOCK + c[None, None, :] % C_BLOCK)
        u = a.ravel() // U
        cut = np.flatnonzero(u[1:] != u[:-1]) + 1
        counts = np.diff(np.concatenate(([0], cut, [len(u)])))
        return int((counts < U).sum())


def part_cost(n, part: ConvPart, x_layout: int = Layout.NCHW, o_layout: int = Layout.NCHW,
              timing: NodeTiming | None = None, w_layout: int | None = None) -> NodeCost:
    """The modelled cost of *part* on a node of *n* (:func:`_part_cost`); the weights in
    *w_layout*, by default the node's own (:func:`weight_layout`)."""
    w_layout = weight_layout(n) if w_layout is None else w_layout
    return _part_cost(timing or NodeTiming(n), part, int(x_layout), int(o_layout),
                      int(w_layout))


def _part_cost_replay(tm: NodeTiming, part: ConvPart, x_layout: int, o_layout: int,
                      w_layout: int) -> NodeCost:
    """The modelled cost of the task list :func:`~pimforge.sim.nicepim.rtl_run.part_tasks`
    lowers *part* to (its input sub-tensor in *x_layout*, its output in *o_layout*): its
    tasks in the lowering's order, replayed through the controller's dispatch
    (:func:`schedule`), task by task as the model describes it. :func:`_part_cost`
    computes the same numbers faster (and the tests check it against this)."""
    n = tm.n
    R, C = n.pe_rows, n.pe_cols
    b = blocking(n, part)
    cg, og = part.c // part.groups, part.k // part.groups
    ci, hi, wi = part.x_dims
    xr, xc = part.x_rows[0], part.x_cols[0]
    st, pad = part.stride, part.pad
    P, Q = part.p, part.q
    lo = part.rows[0]
    w0 = part.cols[0] * st - pad - xc

    wrd = wwr = rows = el = 0.0
    tasks: list[_Task] = []     # in list order
    band = 0
    loads, computes, stores = [], [], []
    # (the ops as plain ints: an IntEnum hashes slowly, and the DMA's caches hash them)
    op_w, op_i, op_s, op_c = int(Op.LOAD_W), int(Op.LOAD_I), int(Op.STORE), int(Op.COMPUTE)
    dims_w, dims_i, dims_o = (og, cg, part.r, part.s), (1, ci, hi, wi), (1, og, P, Q)
    dma, span, stretch, row_class = tm.dma, tm.span_rows, tm.stretch, tm.row_class
    engine: dict = {}       # tile_cycles by (cb, kh, oh)
    for i, t in enumerate(tiles(n, part)):
        buf, obuf = (i % 2, band % 2) if b.double else (0, 0)
        nh = (t.oh - 1) * st + t.kh
        # (every load, with its words, rows and elements; a run leaves out the ones its
        # buffer halves hold, :func:`drop_held`)
        wt = (op_w, w_layout, dims_w, t.co, t.b0 * R, t.u0, 0, t.cb, t.kh, part.s)
        cw, ww, rw, ew = dma(*wt)
        it = (op_i, x_layout, dims_i, 0, t.g * cg + t.b0 * R, t.o0 * st - pad + t.u0 - xr,
              w0, t.cb, nh, b.nw)
        ck, wk, rk, ek = dma(*it[:5], row_class(op_i, x_layout, dims_i, it[5], nh), *it[6:])
        ld = [_Task("d", cw * stretch, buf, obuf, True, op_w, tm.pipe(ww, rw),
                    ("w", span(*wt)), (t.g, wt), (ww, rw, ew)),
              _Task("d", ck * stretch, buf, obuf, True, op_i, tm.pipe(wk, rk),
                    ("x", span(*it)), it, (wk, rk, ek))]
        loads.append(ld[::-1] if t.i_first else ld)
        ekey = (t.cb, t.kh, t.oh)
        cyc = engine.get(ekey)
        if cyc is None:
            cyc = engine[ekey] = tile_cycles(pe_rows=R, pe_cols=C, cb=t.cb, kh=t.kh,
                                             kw=part.s, oh=t.oh, ow=Q)
        computes.append(_Task("e", cyc, buf, obuf, False, op_c))
        if t.store:
            st_ = (op_s, o_layout, dims_o, 0, t.co, t.o0 - lo, 0, 1, t.oh, Q)
            h0s = row_class(op_s, o_layout, dims_o, t.o0 - lo, t.oh)
            cs, ws_, rs, es = dma(*st_[:5], h0s, *st_[6:])
            rmw = tm.store_rmw(o_layout, dims_o, 0, t.co, h0s, 0, t.oh, Q)
            stores.append([_Task("d", cs * stretch, buf, obuf, False, op_s,
                                 span=("o", span(*st_)), rmw=rmw)])
            wrd += rmw
            wwr += ws_
            rows += rs
            el += es
            band += 1
        else:
            stores.append([])
    if b.double:
        tasks += loads[0] if loads else []
        for k, c in enumerate(computes):
            tasks += [c] + (loads[k + 1] if k + 1 < len(loads) else []) + stores[k]
    else:
        for ld, c, sto in zip(loads, computes, stores, strict=True):
            tasks += ld + [c] + sto
    cycles = eng_busy = dma_busy = overlap = 0.0
    n_tasks = 0
    # the runs the task memory cuts the list into (:func:`cut_pieces`), one after another
    for piece in cut_pieces(tasks, n.task_entries - 1, lambda x: x.op, strict=False):
        piece = drop_held(piece, lambda x: (x.op, x.buf, x.held) if x.held else None)
        n_tasks += len(piece)
        for x in piece:
            wrd, rows, el = wrd + x.counts[0], rows + x.counts[1], el + x.counts[2]
        prev = None
        open_row = None     # (tensor, row) the DMA's last access left open
        for k, x in enumerate(piece):
            if x.unit != "d":
                continue
            tensor, rows_ = x.span
            if x.is_load and prev == op_s:  # a load after a store waits for its writes
                wait = tm.after_store * tm.stretch      # (its first word that much later)
                piece[k] = x._replace(dur=x.dur + wait,
                                      pipe=x.pipe and (x.pipe[0] + wait, *x.pipe[1:]))
            elif not x.is_load and x.rmw and rows_ and open_row == (tensor, rows_[0]):
                # a store that reads a word first, in the row the store before left open:
                # no activation (the store's start constants are measured with the bank
                # closed, so the precharge is not in them)
                piece[k] = x._replace(dur=x.dur - tm.first_row * tm.stretch)
                rows -= 1
            elif x.is_load and x.pipe and rows_ and open_row == (tensor, rows_[0]):
                # its first row is open: no precharge or activation, and back to back its
                # first word follows the last one's by a column gap
                hit = tm.row * tm.stretch
                rows -= 1                   # (the row is not activated again)
                lat, _, bank, _ = x.pipe
                piece[k] = x._replace(dur=x.dur - hit,
                                      pipe=(lat - hit, tm.col_gap * tm.stretch, bank, 0.0))
            prev = x.op
            if rows_:
                open_row = (tensor, rows_[1])
        c_, e_, d_, o_ = schedule(piece)
        if rows:        # a run starts with the bank closed: its first load precharges nothing
            c_, d_ = c_ - tm.t.tRP, d_ - tm.t.tRP
        cycles, eng_busy, dma_busy, overlap = (cycles + c_, eng_busy + e_, dma_busy + d_,
                                               overlap + o_)
    macs = part.k * cg * part.r * part.s * P * Q
    dma_only = dma_busy - overlap
    refreshes = dma_busy / tm.stretch / tm.tREFI
    return NodeCost(engine=eng_busy, dma=dma_only, overhead=cycles - eng_busy - dma_only,
                    refresh=0.0, words_rd=wrd, words_wr=wwr, rows=rows, refreshes=refreshes,
                    elements=el, tasks=n_tasks + 1, macs=macs, dma_busy=dma_busy)


@functools.lru_cache(maxsize=65536)
def _part_cost(tm: NodeTiming, part: ConvPart, x_layout: int, o_layout: int,
               w_layout: int) -> NodeCost:
    """:func:`_part_cost_replay`'s cost of *part*, the same numbers computed with less
    work a task: each distinct load, store and tile of the part is made into a task
    once (by what it depends on besides its buffer halves), the task list is cut into
    the task memory's runs (:func:`cut_pieces`), and each run's held loads are left
    out (:func:`~.tiling.drop_held`) and its open rows and dispatch replayed in one pass
    (:func:`_replay`). Every sum is taken in the same order as there, so the result is
    equal to the last bit."""
    n = tm.n
    R, C = n.pe_rows, n.pe_cols
    b = blocking(n, part)
    cg, og = part.c // part.groups, part.k // part.groups
    ci, hi, wi = part.x_dims
    xr = part.x_rows[0]
    st, pad = part.stride, part.pad
    P, Q, S = part.p, part.q, part.s
    lo = part.rows[0]
    w0 = part.cols[0] * st - pad - part.x_cols[0]
    nw = b.nw
    double = b.double
    op_w, op_i, op_s, op_c = int(Op.LOAD_W), int(Op.LOAD_I), int(Op.STORE), int(Op.COMPUTE)
    dims_w, dims_i, dims_o = (og, cg, part.r, part.s), (1, ci, hi, wi), (1, og, P, Q)
    dma, span, stretch, row_class = tm.dma, tm.span_rows, tm.stretch, tm.row_class
    wrd = wwr = rows = el = 0.0
    # a task: (unit, cycles, buf, obuf, is_load, op, pipe, tensor, its first and last
    # rows (None: it touches none), held (a load's identity), words, rows, elements,
    # partly covered words), made once per distinct one
    w_tasks: dict = {}
    i_tasks: dict = {}
    s_tasks: dict = {}
    c_tasks: dict = {}
    engine: dict = {}
    tasks: list = []
    last_store = None       # (double buffering) the band's store after the next loads
    band = 0
    for i, (g, co, o0, oh, b0, cb, u0, kh, store, _, _, i_first) in enumerate(tile_fields(n, part)):
        if double:
            buf, obuf = i % 2, band % 2
        else:
            buf = obuf = 0
        key = (g, co, b0, cb, u0, kh, buf, obuf)
        tw = w_tasks.get(key)
        if tw is None:
            wt = (op_w, w_layout, dims_w, co, b0 * R, u0, 0, cb, kh, S)
            cw, ww, rw, ew = dma(*wt)
            tw = w_tasks[key] = ("d", cw * stretch, buf, obuf, True, op_w, tm.pipe(ww, rw),
                                 "w", span(*wt), key[:6], ww, rw, ew, 0)
        nh = (oh - 1) * st + kh
        h0 = o0 * st - pad + u0 - xr
        key = (g, b0, cb, h0, nh, buf, obuf)
        ti = i_tasks.get(key)
        if ti is None:
            it = (op_i, x_layout, dims_i, 0, g * cg + b0 * R, h0, w0, cb, nh, nw)
            ck, wk, rk, ek = dma(op_i, x_layout, dims_i, 0, it[4],
                                 row_class(op_i, x_layout, dims_i, h0, nh), w0, cb, nh, nw)
            ti = i_tasks[key] = ("d", ck * stretch, buf, obuf, True, op_i, tm.pipe(wk, rk),
                                 "x", span(*it), key[:5], wk, rk, ek, 0)
        key = (cb, kh, oh, buf, obuf)
        tc = c_tasks.get(key)
        if tc is None:
            ekey = key[:3]
            cyc = engine.get(ekey)
            if cyc is None:
                cyc = engine[ekey] = tile_cycles(pe_rows=R, pe_cols=C, cb=cb, kh=kh, kw=S,
                                                 oh=oh, ow=Q)
            tc = c_tasks[key] = ("e", cyc, buf, obuf, False, op_c, None, "", None, None,
                                 0, 0, 0, 0)
        if i_first:
            tasks += (ti, tw)
        else:
            tasks += (tw, ti)
        if double and last_store is not None:   # the band before's store, behind them
            tasks.append(last_store)
            last_store = None
        tasks.append(tc)
        if store:
            key = (co, o0, oh, buf, obuf)
            ts = s_tasks.get(key)
            if ts is None:
                h0s = row_class(op_s, o_layout, dims_o, o0 - lo, oh)
                cs, ws_, rs, es = dma(op_s, o_layout, dims_o, 0, co, h0s, 0, 1, oh, Q)
                rmw = tm.store_rmw(o_layout, dims_o, 0, co,
                                   tm.word_class(op_s, o_layout, dims_o, o0 - lo, oh), 0, oh, Q)
                ts = s_tasks[key] = ("d", cs * stretch, buf, obuf, False, op_s, None, "o",
                                     span(op_s, o_layout, dims_o, 0, co, o0 - lo, 0, 1, oh,
                                          Q), None, ws_, rs, es, rmw)
            wrd += ts[13]
            wwr += ts[10]
            rows += ts[11]
            el += ts[12]
            band += 1
            if double:
                last_store = ts
            else:
                tasks.append(ts)
    if last_store is not None:
        tasks.append(last_store)
    cycles = eng_busy = dma_busy = overlap = 0.0
    n_tasks = 0
    for piece in cut_pieces(tasks, n.task_entries - 1, _op, strict=False):
        held: dict = {}
        kept = []
        for x in piece:
            h = x[9]
            if h is not None:
                hk = (x[5], x[2])
                if held.get(hk) == h:
                    continue
                held[hk] = h
                wrd, rows, el = wrd + x[10], rows + x[11], el + x[12]
            kept.append(x)
        n_tasks += len(kept)
        c_, e_, d_, o_, hits = _replay(tm, kept)
        for _ in range(hits):
            rows -= 1
        if rows:        # a run starts with the bank closed: its first load precharges nothing
            c_, d_ = c_ - tm.t.tRP, d_ - tm.t.tRP
        cycles, eng_busy, dma_busy, overlap = (cycles + c_, eng_busy + e_, dma_busy + d_,
                                               overlap + o_)
    macs = part.k * cg * part.r * part.s * P * Q
    dma_only = dma_busy - overlap
    refreshes = dma_busy / tm.stretch / tm.tREFI
    return NodeCost(engine=eng_busy, dma=dma_only, overhead=cycles - eng_busy - dma_only,
                    refresh=0.0, words_rd=wrd, words_wr=wwr, rows=rows, refreshes=refreshes,
                    elements=el, tasks=n_tasks + 1, macs=macs, dma_busy=dma_busy)


#: A task's op (:func:`_part_cost`'s tuples).
_op = operator.itemgetter(5)


def _replay(tm: NodeTiming, tasks: list) -> tuple[float, float, float, float, int]:
    """:func:`schedule` of one run of :func:`_part_cost`'s tasks, each DMA task first
    adjusted for what the one before it left (as :func:`_part_cost_replay` does: a load
    after a store waits for its writes, a load or a read-modify-writing store that finds
    its first row open neither precharges nor activates it), and the number of row
    activations so saved."""
    op_s = int(Op.STORE)
    wait = tm.after_store * tm.stretch
    hit_rmw = tm.first_row * tm.stretch
    hit = tm.row * tm.stretch
    hit_gap = tm.col_gap * tm.stretch
    hits = 0
    prev = None
    open_tensor = open_row = None   # the row the DMA's last access left open
    t = 0.0                 # the cycle the next task is fetched in
    eng_free = dma_free = 0.0
    eng_buf = eng_obuf = dma_obuf = -1
    dma_load = False
    dma_pipe = None         # the running load's (latency, gap, bank, tRC), if it reads
    dma_words = 0.0         # the cycle the running load's last word comes
    dma_first = 0.0         # ... and its first
    dma_issued = 0.0        # the cycle its issue walk is done
    e_spans: list = []
    d_spans: list = []
    e_busy: list = []       # each span's length, for the sums (in the same order)
    d_busy: list = []
    for unit, dur, buf, obuf, is_load, op, pipe, tensor, rows_, _, _, _, _, rmw in tasks:
        d = t + 1
        if unit == "d":
            if is_load and prev == op_s:        # (see _part_cost_replay)
                dur = dur + wait
                pipe = pipe and (pipe[0] + wait, *pipe[1:])
            elif (not is_load and rmw and rows_ and open_tensor == tensor
                  and open_row == rows_[0]):
                dur = dur - hit_rmw
                hits += 1
            elif (is_load and pipe and rows_ and open_tensor == tensor
                  and open_row == rows_[0]):
                hits += 1
                dur = dur - hit
                pipe = (pipe[0] - hit, hit_gap, pipe[2], 0.0)
            prev = op
            if rows_:
                open_tensor, open_row = tensor, rows_[1]
            back = is_load and dma_pipe is not None and pipe is not None
            # (max and min written out, each keeping the first of equals as they do)
            x = dma_issued if back else dma_free
            if x > d:
                d = x
            if ((eng_buf == buf) if is_load else (eng_obuf == obuf)) and eng_free > d:
                d = eng_free
            if back and d + 1 < dma_free:
                lat, gap, bank, rc = pipe
                first = dma_words + gap
                if dma_first + rc > first:
                    first = dma_first + rc
                if d + 1 + lat > first:
                    first = d + 1 + lat
                start, end = dma_free, (first if first > dma_free else dma_free) + dur - lat
                dma_first, dma_words = first, first + bank
            else:
                start, end = d + 1, d + 1 + dur
                if pipe is not None:
                    dma_first = d + 1 + pipe[0]
                    dma_words = dma_first + pipe[2]
            dma_free, dma_obuf, dma_load = end, obuf, is_load
            dma_pipe = pipe if is_load else None
            if pipe is not None:    # its issue walk, from its dispatch at its stream's pace
                dma_issued = d + 1 + dur - pipe[0]
            d_spans.append((start, end))
            d_busy.append(end - start)
        else:
            if eng_free > d:
                d = eng_free
            if (dma_load or dma_obuf == obuf) and dma_free > d:
                d = dma_free
            eng_free, eng_buf, eng_obuf = d + 1 + dur, buf, obuf
            a = d + 1
            b_ = a + dur
            e_spans.append((a, b_))
            e_busy.append(b_ - a)
        t = d + 1
    end = max(t + 1, eng_free, dma_free)
    # both busy: the overlap of the engine's and the DMA's (ordered, disjoint) spans
    both, k = 0.0, 0
    n_d = len(d_spans)
    for a, b_ in e_spans:
        while k < n_d and d_spans[k][1] <= a:
            k += 1
        j = k
        while j < n_d:
            s_, e_ = d_spans[j]
            if s_ >= b_:
                break
            both += (e_ if e_ < b_ else b_) - (s_ if s_ > a else a)
            j += 1
    return end + 1, sum(e_busy), sum(d_busy), both, hits


def cut_pieces(tasks: list, most: int, kind, node: int = 0, *,
               strict: bool = True) -> list[list]:
    """*tasks* cut after STOREs (``kind(task)`` gives a task's :class:`Op`) into pieces
    of at most *most* tasks, each run from an empty node. A software-pipelined list
    (:func:`~.rtl_run.part_tasks`) puts the next tile's loads before a band's STORE;
    at a cut they move to the next piece.

    Raises
    ------
    CapacityError
        One band's tasks exceed the task memory (with *strict*; else such a band is a
        piece of its own, as if the task memory were refilled).
    """
    bands: list[list] = []
    cur: list = []
    store, loads = int(Op.STORE), (int(Op.LOAD_I), int(Op.LOAD_W))
    for t in tasks:
        cur.append(t)
        if kind(t) == store:
            bands.append(cur)
            cur = []
    if cur:
        bands.append(cur)
    out: list[list] = [[]]
    reserve = 2         # room for the loads a cut moves into a piece
    for band in bands:
        if len(band) + reserve > most and strict:
            raise CapacityError(f"node {node}: a band of {len(band)} tasks exceeds the task "
                                f"memory's {most + 1 - reserve}; raise nicepim.task_entries "
                                "or the buffers")
        if out[-1] and len(out[-1]) + len(band) + reserve > most:
            prev = out[-1]
            k = len(prev) - 1           # prev ends with a STORE; loads before it move on
            while k > 0 and kind(prev[k - 1]) in loads:
                k -= 1
            out[-1] = prev[:k] + prev[-1:]
            out.append(prev[k:-1])
        out[-1] += band
    return [p for p in out if p]


def schedule(tasks) -> tuple[float, float, float, float]:
    """(cycles, engine busy, DMA busy, both busy) of a task list of ``(unit, busy cycles,
    buf, obuf, is a load, op, pipe)`` entries (unit ``"e"``: a ``COMPUTE``, ``"d"``: a
    DMA task; ``pipe``, for a load that reads, ``(latency, gap, bank, tRC)``:
    :meth:`NodeTiming.pipe`) and its ``END``, dispatched as the node controller does:
    in order, each task fetched and dispatched (:data:`DISPATCH_CYCLES`) as soon as its
    unit is ready and the running task of the other unit does not use its buffer halves
    in conflict; a unit is busy from the cycle after its dispatch.

    A load after a load that reads runs back to back with it (the DMA's ``ready``): it
    is dispatched once the running load's issue walk is done (from its own dispatch, at
    its stream's pace: the bank's, or its writes' for a load bound by them), and its
    first word comes a row
    switch (``gap``) after the running load's last word or its own latency after its
    dispatch, whichever is later, and at least ``tRC`` after the running load's first
    word (one row's activation to the next); its writes follow the running load's last
    write. So behind a load bound by its writes (a line a cycle) the next one's latency
    is hidden whole, behind one bound by the bank all but the row switch."""
    t = 0.0                 # the cycle the next task is fetched in
    eng_free = dma_free = 0.0
    eng_buf = eng_obuf = dma_obuf = -1
    dma_load = False
    dma_pipe = None         # the running load's (latency, gap, bank, tRC), if it reads
    dma_words = 0.0         # the cycle the running load's last word comes
    dma_first = 0.0         # ... and its first
    dma_issued = 0.0        # the cycle its issue walk is done
    spans = {"e": [], "d": []}
    for unit, dur, buf, obuf, is_load, *rest in tasks:
        pipe = rest[1] if len(rest) > 1 else None
        d = t + 1
        if unit == "d":
            back = is_load and dma_pipe is not None and pipe is not None
            d = max(d, dma_issued if back else dma_free)
            if (eng_buf == buf) if is_load else (eng_obuf == obuf):
                d = max(d, eng_free)
            if back and d + 1 < dma_free:
                lat, gap, bank, rc = pipe
                first = max(dma_words + gap, dma_first + rc, d + 1 + lat)
                start, end = dma_free, max(dma_free, first) + dur - lat
                dma_first, dma_words = first, first + bank
            else:
                start, end = d + 1, d + 1 + dur
                if pipe is not None:
                    dma_first = d + 1 + pipe[0]
                    dma_words = dma_first + pipe[2]
            dma_free, dma_obuf, dma_load = end, obuf, is_load
            dma_pipe = pipe if is_load else None
            if pipe is not None:    # its issue walk, from its dispatch at its stream's pace
                dma_issued = d + 1 + dur - pipe[0]
        else:
            d = max(d, eng_free)
            if dma_load or dma_obuf == obuf:
                d = max(d, dma_free)
            eng_free, eng_buf, eng_obuf = d + 1 + dur, buf, obuf
            start, end = d + 1, d + 1 + dur
        spans[unit].append((start, end))
        t = d + 1
    end = max(t + 1, eng_free, dma_free)
    # both busy: the overlap of the engine's and the DMA's (ordered, disjoint) spans
    both, k = 0.0, 0
    dspans = spans["d"]
    for a, b_ in spans["e"]:
        while k < len(dspans) and dspans[k][1] <= a:
            k += 1
        j = k
        while j < len(dspans) and dspans[j][0] < b_:
            both += min(b_, dspans[j][1]) - max(a, dspans[j][0])
            j += 1
    return end + 1, sum(b_ - a for a, b_ in spans["e"]), sum(b_ - a for a, b_ in dspans), both


@functools.lru_cache(maxsize=65536)
def _apart(L: int, levels: tuple, U: int, off: int | None = None) -> bool:
    """Whether no two consecutive runs of a walk (runs of *L* elements repeated by
    *levels* ``((count, stride), ...)``, inner first) can end and start in one unit of
    ``U`` elements, wherever the walk starts: every step from one run's start to the
    next's is at least ``U + L - 1`` forward, or back to at least ``U`` before the
    last run's end. Or else, with the walk's first element *off*: every stride is a
    multiple of ``U``, no step is 0 and the run at *off* lies in one unit (then every
    run lies in a unit of its own). Then the walk touches at least one unit a run,
    consecutively distinct, and (``L < U``) covers each unit it visits only in part.
    Forward steps hold as well for runs of at most *L*; back steps need *L* exact."""
    steps, back = [], 0
    for cnt, stride in levels:
        if cnt > 1:
            steps.append((stride - back, stride))
            back += (cnt - 1) * stride
    if all(d <= L - 1 - U or d >= U + L - 1 for d, _ in steps):
        return True
    return (off is not None and off % U + L <= U
            and all(d != 0 and stride % U == 0 for d, stride in steps))


def cycles_lower_bound(n, part: ConvPart, x_layout: int = Layout.NCHW,
                       o_layout: int = Layout.NCHW, timing: NodeTiming | None = None,
                       w_layout: int | None = None) -> float:
    """A lower bound of :func:`part_cost`'s ``cycles`` that builds no task list and
    counts no DRAM word one by one: from the tiles' sizes (:func:`~.tiling.blocking`)
    and their windows' rows and lanes, a loop over bands and chunks, not tiles.

    Two chains of tasks that each run one after the other bound the node's cycles:

    * the DMA's tasks. A load is at least its groups (:meth:`NodeTiming.groups`: an
      element in NCHW, at least a line otherwise; weights in CHWN at least a line)
      and, when it reads, its ``col_gap`` a word and ``tRP + tRCD`` for every row
      after the first, plus, for a tile's weight load (its input load runs back to
      back behind it), :data:`LOAD_START` and the precharge; a store at least
      its groups, :data:`STORE_START` and :data:`STORE_RMW` for each word it covers
      only in part. Words, rows and partly covered words are counted only where they
      are certain: where no two consecutive runs of a walk can share a unit
      (:func:`_apart`: one unit a run at least), and where no step of a walk skips a
      unit (it touches every unit from its first element's to its last one's: an
      NCHW[C8] pixel's channel blocks, counted exactly or on whole pixels, and the
      weights' walks counted exactly); a task's walks, counted together, share at
      most one unit where one walk ends and the next begins. All is
      stretched by refresh; each run of the task memory (:func:`cut_pieces`, at
      most one per band) gives back a precharge.
    * the engine's tiles, the first only once the first tile's loads are in and the
      last band's store only once the last tile is done; and so in every run of the
      task memory, of which there are at least as many as its size goes into the
      tasks when no band fills it.

    Without double buffering every task waits for both units, and the two chains are
    one.
    """
    w_layout = weight_layout(n) if w_layout is None else w_layout
    return _bound(timing or NodeTiming(n), part, int(x_layout), int(o_layout), int(w_layout))


def _window_rows(lo: int, per_rows: int, full: int, last: int, st: int, off: int,
                 kbands: list[tuple[int, int]], hi: int) -> tuple[int, int]:
    """Over the bands of output rows (*full* of *per_rows* rows from row *lo*, then one of
    *last* rows) and the kernel's bands ``(u0, kh)``: the input rows inside ``[0, hi)``
    of every window ``[h0, h0 + (oh - 1) * st + kh)``, ``h0 = o0 * st + off + u0``,
    summed, and the windows with any. The full bands whose windows lie wholly inside,
    a run of them, are counted at once; the others (the edges) one by one."""
    total = count = 0
    step = per_rows * st
    for u0, kh in kbands:
        a = lo * st + off + u0              # the first band's window start
        length = (per_rows - 1) * st + kh
        inner0 = min(-(a // step) if a < 0 else 0, full)     # the first wholly inside
        inner1 = max(inner0, min((hi - length - a) // step, full - 1) + 1)
        total += (inner1 - inner0) * length
        count += inner1 - inner0
        for i in (*range(inner0), *range(inner1, full)):
            h0 = a + i * step
            vh = (h0 + length if h0 + length < hi else hi) - (h0 if h0 > 0 else 0)
            if vh > 0:
                total += vh
                count += 1
        if last:
            h0 = a + full * step
            end = h0 + (last - 1) * st + kh
            vh = (end if end < hi else hi) - (h0 if h0 > 0 else 0)
            if vh > 0:
                total += vh
                count += 1
    return total, count


@functools.lru_cache(maxsize=65536)
def _bound(tm: NodeTiming, part: ConvPart, x_layout: int, o_layout: int,
           w_layout: int) -> float:
    n = tm.n
    R, C = n.pe_rows, n.pe_cols
    b = blocking(n, part)
    st, s, q, pad = part.stride, part.s, part.q, part.pad
    cg, og = part.c // part.groups, part.k // part.groups
    ci, hi, wi = part.x_dims
    xr, xc = part.x_rows[0], part.x_cols[0]
    lo = part.rows[0]
    full, last = divmod(part.p, b.per_rows)
    bands = [(lo + i * b.per_rows, b.per_rows) for i in range(full)]
    if last:
        bands.append((lo + full * b.per_rows, last))
    chunks = [(b0, min(b.cbs, b.blocks - b0)) for b0 in range(0, b.blocks, b.cbs)]
    kbands = [(u0, min(b.kr, part.r - u0)) for u0 in range(0, part.r, b.kr)]
    cos = range(0, og, C)
    per_band = len(chunks) * len(kbands)
    n_tiles = part.groups * len(cos) * len(bands) * per_band
    n_stores = part.groups * len(cos) * len(bands)
    trp = tm.t.tRP
    per_i = tm.word_bits // DATA_BITS
    per_o = tm.word_bits // PSUM_BITS
    row_i = tm.row_words * per_i
    # -- the weights (the same for every band and group): groups, words, rows
    # groups a kernel position of a channel block: its lines (CHWN), its rows of the
    # weight buffer (KBLOCK), its elements (NCHW)
    if w_layout == Layout.KBLOCK:
        w_lanes = tm.groups(Op.LOAD_W, Layout.KBLOCK, (C, R, 1, 1), 0, 0, 0, 0, 1, 1, 1)
    else:
        w_lanes = R if w_layout == Layout.CHWN else R * C
    # the bands whose weight tiles each output-channel block loads, and the blocks each
    # group loads its input tiles for (a buffer half that still holds them is not
    # loaded again: :func:`~.tiling.loaded`)
    w_bands, i_cos = loaded(n, part)
    if len(kbands) > 1:     # inputs held beyond loaded()'s count: none counted
        i_cos = 0
    w_groups = b.blocks * part.r * s * w_lanes * w_bands * len(cos)
    w_words = w_rows = 0
    if w_layout == Layout.CHWN:
        # a run a kept input channel and kernel position; every step at least ``og``
        runs = cg * part.r * s * w_bands
        joins = w_bands * len(kbands) * sum(cb - 1 for _, cb in chunks)
        # (a task's count is exact, which the aligned case needs, when it has at most
        # EXACT_RUNS runs)
        exact = max(cb for _, cb in chunks) * R * b.kr * s <= EXACT_RUNS
        vrs = [min(R, cg - i * R) for i in range(b.blocks)]
        dense: dict = {}
        for co in cos:
            vn = min(C, og - co)
            lv = ((s, og), (2, s * og), (2, part.r * s * og))
            for U, is_row in ((per_i, False), (row_i, True)):
                if _apart(vn, lv, U, co if exact else None):
                    units = runs * -(-vn // U)
                elif exact and og * (s * (part.r - 1) + 1) - vn + 1 <= U:
                    # no step skips a unit: a walk touches every unit from its first
                    # element to its last
                    units = dense.get((vn, U))
                    if units is None:
                        units = dense[vn, U] = w_bands * sum(
                            -(-((s - 1) * og + (kh - 1) * s * og + (vr - 1) * part.r * s * og
                                + vn) // U) for _, kh in kbands for vr in vrs)
                else:
                    continue
                if is_row:
                    w_rows += units - joins
                else:
                    w_words += units - joins
    n_w = part.groups * len(cos) * w_bands * per_band
    n_i = part.groups * i_cos * len(bands) * per_band
    # weight loads that may find their row open (behind a weight load: every other tile's
    # when each tile loads both, :attr:`~.tiling.Tile.i_first`; any when inputs are held)
    w_hits = n_w if n_i < n_tiles else -(-n_w // 2)
    w_dur = (max(w_groups * part.groups,
                 (tm.col_gap * w_words + tm.row * w_rows) * part.groups - tm.row * n_w)
             + n_w * (LOAD_START + trp) - w_hits * tm.row)
    # -- the input: the rows of each (band, kernel band) inside the sub-tensor
    nw = b.nw
    w0 = part.cols[0] * st - pad - xc
    vw = _clip(w0, nw, wi)[1]
    vh_sum, n_read = _window_rows(lo, b.per_rows, full, last, st, -pad - xr, kbands, hi)
    if not vw:
        n_read = 0
    # groups a pixel and channel block: its elements (NCHW), else at least one a line,
    # or in NHWC one a group of ibuf_row blocks (the lines of a row of the input buffer)
    i_lanes = R if x_layout == Layout.NCHW else 1
    ni = tm.ibuf_row if x_layout == Layout.NHWC else 1

    def i_blocks(cb: int) -> int:
        return -(-cb // ni)

    i_groups = i_cos * nw * i_lanes * sum(i_blocks(cb) for _, cb in chunks) * sum(
        len(kbands) * (oh - 1) * st + part.r for _, oh in bands)
    i_words = i_rows = 0
    if vw and x_layout != Layout.NCHW:
        plane = hi * wi * C_BLOCK
        i_exact = b.cbs * vw * ((b.per_rows - 1) * st + b.kr) <= EXACT_RUNS
        for g in range(part.groups):
            for b0, cb in chunks:
                seqs = 0
                rw = [0, 0]
                for k in range(0, cb, ni):      # (a pixel's group of blocks: one run)
                    cs, v = _clip(g * cg + (b0 + k) * R, min(ni, cb - k) * R, ci)
                    if not v:
                        continue
                    seqs += 1
                    if x_layout == Layout.NHWC:
                        L, lv, per_pix, off = v, ((vw, ci), (2, wi * ci)), 1, cs
                    else:
                        first, last_ = cs // C_BLOCK, (cs + v - 1) // C_BLOCK
                        off = None
                        if first == last_:
                            L, lv = v, ((vw, C_BLOCK), (2, wi * C_BLOCK))
                        else:
                            L, lv = C_BLOCK, ((last_ - first + 1, plane), (vw, C_BLOCK),
                                              (2, wi * C_BLOCK))
                        per_pix = 1 if first == last_ else last_ - first + 1
                    for j, U in enumerate((per_i, row_i)):
                        if j == 1 and per_pix > 1:
                            continue    # (rows across planes: served row by row, FR-FCFS)
                        if _apart(L, lv, U, off if i_exact else None):
                            rw[j] += per_pix * vw * -(-L // U)
                        elif per_pix > 1 and plane < U + L - 1:
                            # a pixel's blocks skip no unit: they touch every unit from
                            # the first block's to the last one's (counted exactly or
                            # on whole pixels, :func:`_prefix`)
                            span = (per_pix - 1) * plane + L
                            if _apart(span, lv[1:], U):
                                rw[j] += vw * -(-span // U)
                # every tile of this chunk: its rows inside, less the joins of its walks
                for j in range(2):
                    if rw[j]:
                        add = i_cos * (rw[j] * vh_sum - max(0, seqs - 1) * n_read)
                        if j == 0:
                            i_words += add
                        else:
                            i_rows += add
    # (an input load runs back to back behind its tile's weight load, which pays the
    # first word's latency for both: :func:`schedule`)
    i_dur = max(i_groups * part.groups, tm.col_gap * i_words + tm.row * i_rows - tm.row * n_i)
    # -- the stores: one a band and output-channel block
    o_lanes = C if o_layout == Layout.NCHW else 1
    o_groups = part.groups * len(cos) * part.p * q * o_lanes
    rmw = 0
    ohs = [(b.per_rows, full)] + ([(last, 1)] if last else [])
    for co in cos:
        vc = min(C, og - co)
        for oh, times in ohs:
            off = None           # (a store's partly written words are counted exactly)
            if o_layout == Layout.NCHW:
                L, lv, runs = q * oh, ((vc, part.p * q),), vc
            elif o_layout == Layout.NHWC:
                L, lv, runs, off = vc, ((q, og), (oh, q * og)), q * oh, co
            else:
                # a pixel's lanes, block by block (8 a run at most: the first and last
                # block may hold fewer, the first starting inside its block), then the
                # next pixel's: apart when the blocks are a unit apart and the step
                # back, from a block's start to 15 elements past the first block's
                # start, a unit
                first, last_ = co // C_BLOCK, (co + vc - 1) // C_BLOCK
                plane = part.p * q * C_BLOCK
                if (last_ > first and C_BLOCK < per_o and plane >= per_o + C_BLOCK - 1
                        and (last_ - first) * plane >= per_o + 2 * C_BLOCK - 1):
                    rmw += times * (last_ - first + 1) * q * oh
                continue
            if L < per_o and _apart(L, lv, per_o, off):
                rmw += times * runs
    s_dur = o_groups + n_stores * STORE_START + part.groups * rmw * STORE_RMW
    dma = (tm.stretch * (w_dur + i_dur + s_dur) + n_w + n_i + n_stores
           - n_stores * max(0, trp - 2))
    # -- the engine between the first loads and the last store
    eng = part.groups * len(cos) * sum(
        times * sum(tile_cycles(pe_rows=R, pe_cols=C, cb=cb, kh=kh, kw=s, oh=oh, ow=q) + 1
                    for _, cb in chunks for _, kh in kbands) for oh, times in ohs)
    if not b.double:            # every task waits for both units: one chain of all
        return eng + dma
    cb0, kh0, oh0 = chunks[0][1], kbands[0][1], bands[0][1]
    first = tm.stretch * (cb0 * kh0 * s * w_lanes + LOAD_START + trp
                          + i_blocks(cb0) * ((oh0 - 1) * st + kh0) * nw * i_lanes)
    store = tm.stretch * (bands[-1][1] * q * o_lanes + STORE_START)
    chain = eng + first - trp + store - (n_stores - 1) * max(0, trp - 3)
    most = n.task_entries - 1
    if 3 * per_band + 5 <= most:
        # no band fills the task memory: at least ceil(tasks / most) runs, each with
        # a tile's loads before its first tile (unless a half may still hold them) and a
        # band's store after its last
        cb1, kh1 = min(cb for _, cb in chunks), min(kh for _, kh in kbands)
        oh1 = min(oh for _, oh in bands)
        loads = (tm.stretch * (cb1 * kh1 * s * w_lanes + LOAD_START + trp
                               + i_blocks(cb1) * ((oh1 - 1) * st + kh1) * nw * i_lanes) - trp
                 if n_w == n_i == n_tiles else 0)
        ends = loads + tm.stretch * (oh1 * q * o_lanes + STORE_START)
        chain = max(chain, eng + -(-(n_tiles + n_w + n_i + n_stores) // most) * ends)
    return max(dma, chain)
