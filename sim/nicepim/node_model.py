"""The cycles of one PIM-node's task list, from its tasks' fields (the node part of the
mapper's cost model, :class:`~pimforge.sim.nicepim.mapper.NodeModel`).

It follows the node's RTL (:mod:`pimforge.rtl.nicepim`) unit by unit:

* **controller**: a task costs 3 cycles of its own (fetch, dispatch, retire) besides
  its unit's busy cycles; ``END`` costs 2. Tasks run one after the other.
* **engine**: a ``COMPUTE`` tile is busy
  :func:`~pimforge.rtl.nicepim.engine.tile_cycles` cycles.
* **DMA** (:class:`~pimforge.rtl.nicepim.dma.TensorDMA`): every element of a task's loop
  nest takes 2 cycles (address, check), inside the tensor or not (padding and channel
  fill are written as 0 at the same pace). An element whose DRAM word is not the one
  the DMA holds adds a word read: ``tCL + tBL + 4`` cycles (the failed check, the
  request, the bank controller's queue and issue, the read latency). A store reads
  each word it writes into and writes it back when it moves on (``tCWL + tBL + tWTR``
  more: the write and the turnaround to the next read), the last one at the end
  (1 cycle). Every access to a DRAM row other than the open one adds ``tRP + tRCD``
  (the first of a run ``tRCD``: the bank starts closed).
* **refresh**: every ``tREFI`` the bank controller refreshes (``tRFC``) and the row is
  opened again (``tRCD``, one more activation); the DMA waits for it when it falls in
  the DMA's busy time (on average the DMA's share of ``tREFI`` periods).

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
from dataclasses import dataclass

import numpy as np

from pimforge.rtl.mem.timing import resolve_timing
from pimforge.rtl.nicepim.engine import tile_cycles
from pimforge.rtl.nicepim.params import C_BLOCK, DATA_BITS, PSUM_BITS, Layout, Op
from pimforge.rtl.nicepim.share import MESSAGE_FLITS
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

from .tiling import ConvPart, blocking

__all__ = ["TASK_OVERHEAD", "END_CYCLES", "NodeCost", "NodeTiming", "part_cost"]

#: Cycles of a task of its own (fetch, dispatch, retire) and of the final END.
TASK_OVERHEAD = 3
END_CYCLES = 2


@dataclass(frozen=True)
class NodeCost:
    """Modelled cycles of a node's task list, by unit, and its DRAM traffic."""

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

    @property
    def cycles(self) -> float:
        return self.engine + self.dma + self.overhead + self.refresh

    def __add__(self, o: NodeCost) -> NodeCost:
        return NodeCost(*(getattr(self, f) + getattr(o, f) for f in _FIELDS))

    def scaled(self, k: int) -> NodeCost:
        return NodeCost(*(getattr(self, f) * k for f in _FIELDS))


_FIELDS = ("engine", "dma", "overhead", "refresh", "words_rd", "words_wr", "rows",
           "refreshes", "elements", "tasks", "macs")


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


#: Output-channel blocks or row bands of a part costed one by one when there are at most
#: this many (else grouped into classes of equal shape, costed by their first member).
EXACT_CLASSES = 16
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


def _clip(lo: int, size: int, total: int) -> tuple[int, int]:
    """(first valid index, valid count) of ``[lo, lo + size)`` in ``[0, total)``."""
    a, b = max(lo, 0), min(lo + size, total)
    return a, max(0, b - a)


class NodeTiming:
    """The per-event cycle costs of a config's node (see the module docstring)."""

    def __init__(self, n):
        self.n = n
        t = resolve_timing(n.timing, n.tck_ns)
        self.word = t.rd_latency + 4
        self.write = t.tCWL + t.tBL + t.tWTR
        self.row = t.tRP + t.tRCD
        self.first_row = t.tRCD
        self.refresh_cycles = t.tRFC + t.tRCD
        self.tREFI = t.tREFI
        self.word_bits = n.node_bank_bits
        self.row_words = n.row_words
        # the data-sharing unit (see :meth:`share_step`)
        self.share_word = self.word + MESSAGE_FLITS
        self.share_switch = self.row + MESSAGE_FLITS

    def share_step(self, words: int, switches: float, hops: int) -> float:
        """Cycles of one sharing step on a node: a ``SEND`` of *words* DRAM words to a
        node *hops* away and the ``WAIT`` for the *words* another node sends it, every
        node of the set doing the same at once
        (:class:`~pimforge.rtl.nicepim.share.DataShare`).

        The unit keeps one word in flight: a word read (``tCL + tBL + 4``, as the
        DMA's) then its message's :data:`~pimforge.rtl.nicepim.share.MESSAGE_FLITS` flits
        (address, two halves) into the network interface, one a cycle:
        :attr:`share_word` a word. The words arriving meanwhile are written through the
        same DRAM port; a write to the open row slips in between the reads for free,
        but a read that follows a received write to another row finds its row closed
        and waits ``tRP + tRCD`` and the 3 cycles the displaced write's own turn takes
        (:attr:`share_switch`; the 3 are measured on the RTL,
        :func:`~.costmodel_check.sharing_ring`, not derived). *switches* is how many of
        the words do: with the sent and the received word in different rows, all but
        the first (read before anything arrives) and the last (whose received word
        lands after it) -- ``words - 2``. Besides: the two tasks' own cycles
        (:data:`TASK_OVERHEAD` each), the unit's start and end states (2), the last
        message's path (``HEAD_CYCLES_PER_HOP`` a hop and one more into the node)
        and its write's request (2); refresh as for the DMA."""
        if words <= 0:
            return 0.0
        return (2 * TASK_OVERHEAD + 2 + HEAD_CYCLES_PER_HOP * (hops + 1) - 1 + 2
                + self.share_busy(words, switches))

    def share_busy(self, words: float, switches: float) -> float:
        """The unit's cycles for *words* words, *switches* of them after a received
        write to another row (:meth:`share_step`), refresh included."""
        return ((words * self.share_word + switches * self.share_switch)
                * (1 + self.refresh_cycles / self.tREFI))

    def share_switches(self, words: int, apart: int) -> float:
        """Expected :meth:`share_step` switches of a step whose sent and received
        chunks are *apart* words apart in DRAM (side by side: the chunk size), over
        where the chunks start in a row: word ``k`` of the two shares a row with
        probability ``1 - apart / row_words``."""
        return max(0, words - 2) * min(1.0, abs(apart) / self.row_words)

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
        if vh and vw:
            if op == Op.LOAD_W:
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
            starts = [_starts(L, lv, off) for L, lv, off, _ in seqs]
            lengths = np.concatenate([np.full(len(st), L) for st, (L, *_) in
                                      zip(starts, seqs, strict=True)])
            starts = np.concatenate(starts)
            words, rows = _exact(starts, lengths, per), _exact(starts, lengths, row_el)
        else:
            for L, levels, off, monotonic in seqs:
                if monotonic:
                    g = math.gcd(off, *(st for _, st in levels))
                    words += _units(L, levels, per, math.gcd(g, per) or per)
                    rows += _units(L, levels, row_el, math.gcd(g, row_el) or row_el)
                else:   # a walk that restarts: counted on its first outer indices
                    words += _prefix(L, levels, off, per)
                    rows += _prefix(L, levels, off, row_el)
        cyc = 2 * elements + words * self.word + rows * self.row
        if op == Op.STORE and words:
            cyc += words * self.write - self.write + 1
        return cyc, words, rows, elements


def part_cost(n, part: ConvPart, x_layout: int = Layout.NCHW, o_layout: int = Layout.NCHW,
              timing: NodeTiming | None = None) -> NodeCost:
    return _part_cost(timing or NodeTiming(n), part, int(x_layout), int(o_layout))


@functools.lru_cache(maxsize=65536)
def _part_cost(tm: NodeTiming, part: ConvPart, x_layout: int, o_layout: int) -> NodeCost:
    """The modelled cost of the task list :func:`~pimforge.sim.nicepim.rtl_run.part_tasks`
    lowers *part* to (its input sub-tensor in *x_layout*, its output in *o_layout*), the
    tiles grouped into classes of equal cost (the bands away from the image's border,
    the full blocks of output channels) when there are many."""
    n = tm.n
    R, C = n.pe_rows, n.pe_cols
    b = blocking(n, part)
    cg, og = part.c // part.groups, part.k // part.groups
    ci, hi, wi = part.x_dims
    xr, xc = part.x_rows[0], part.x_cols[0]
    st, pad = part.stride, part.pad
    P, Q = part.p, part.q
    lo, hi_ = part.rows
    w0 = part.cols[0] * st - pad - xc

    def classes(items, key):
        items = list(items)
        if len(items) <= EXACT_CLASSES:          # few: each its own (alignment differs)
            return [[it, 1] for it in items]
        out: dict = {}
        for it in items:
            k = key(it)
            if k in out:
                out[k][1] += 1
            else:
                out[k] = [it, 1]
        return list(out.values())

    cos = classes(range(0, og, C), lambda co: min(C, og - co))
    bands = classes(range(lo, hi_, b.per_rows),
                    lambda o0: tuple(_clip(o0 * st - pad - xr, (min(b.per_rows, hi_ - o0) - 1)
                                           * st + part.r, hi)[1:]) + (
                        min(b.per_rows, hi_ - o0), o0 * st - pad - xr < 0))
    chunks = [(b0, min(b.cbs, b.blocks - b0)) for b0 in range(0, b.blocks, b.cbs)]
    kbands = [(u0, min(b.kr, part.r - u0)) for u0 in range(0, part.r, b.kr)]
    eng = dma = wrd = wwr = rows = el = 0.0
    tasks = 0
    for g in range(part.groups):
        for co, nco in cos:
            for o0, nb in bands:
                m = nb * nco
                oh = min(b.per_rows, hi_ - o0)
                for b0, cb in chunks:
                    for u0, kh in kbands:
                        nh = (oh - 1) * st + kh
                        cw, ww, rw, ew = tm.dma(Op.LOAD_W, Layout.NCHW, (og, cg, part.r, part.s),
                                                co, b0 * R, u0, 0, cb, kh, part.s)
                        ck, wk, rk, ek = tm.dma(Op.LOAD_I, x_layout, (1, ci, hi, wi), 0,
                                                g * cg + b0 * R, o0 * st - pad + u0 - xr, w0,
                                                cb, nh, b.nw)
                        eng += m * tile_cycles(pe_rows=R, pe_cols=C, cb=cb, kh=kh, kw=part.s,
                                               oh=oh, ow=Q)
                        dma += m * (cw + ck)
                        wrd += m * (ww + wk)
                        rows += m * (rw + rk)
                        el += m * (ew + ek)
                        tasks += 3 * m
                cs, ws_, rs, es = tm.dma(Op.STORE, o_layout, (1, og, P, Q), 0, co, o0 - lo, 0,
                                         1, oh, Q)
                dma += m * cs
                wrd += m * ws_
                wwr += m * ws_
                rows += m * rs
                el += m * es
                tasks += m
    over = TASK_OVERHEAD * tasks + END_CYCLES
    macs = part.k * cg * part.r * part.s * P * Q
    first = tm.row - tm.first_row if rows else 0
    refreshes = dma / tm.tREFI          # those that hold up the DMA
    return NodeCost(engine=eng, dma=dma - first, overhead=over,
                    refresh=refreshes * tm.refresh_cycles, words_rd=wrd, words_wr=wwr,
                    rows=rows, refreshes=refreshes, elements=el, tasks=tasks + 1, macs=macs)
