"""PIM-Mapper's selection (Algorithm 2, Sec. III-D): the candidates of each layer and
the dynamic program that picks one SM per segment and one (WR, LM) per layer.

* :func:`pieces` cuts a network into the pieces the mapper schedules (a segment's
  head branches side by side, then the rest); :func:`segment_sms` lists a piece's SM
  candidates (the branches one after the other on the whole array, or in balanced
  groups on :func:`branch_regions`' slicing-tree regions).
* :func:`layer_candidates`: for every WR, the LM of least latency on a region (the
  cost model's, :mod:`.mapcost`, plus the movement of the layer's inputs,
  :mod:`.movement`, weighed for the fastest LMs and those equal to a predecessor's).
* :func:`mapping_select`: a multiple-choice knapsack over a capacity grid, so that
  the whole network's weights fit a node's DRAM at the least total latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.params import Layout

from .mapcost import NodeModel
from .mapspace import WHOLE, Partition, layer_partitions, layer_shape, orders
from .movement import Placement, redistributions
from .networks import Layer, Network

__all__ = ["Candidate", "branch_regions", "layer_candidates", "mapping_select", "pieces",
           "segment_sms"]


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
    # each is built from non-increasing tables (the empty one is all zeros). Ties go to
    # the first candidate, SM and split, as a loop over them in order would give.
    F = np.zeros(G + 1)
    trace = []
    for seg in segments:
        best_seg = np.full(G + 1, INF)
        pick_si = np.full(G + 1, -1)
        sm_tabs = []
        for si, sm in enumerate(seg):
            reg_tabs = []
            for region in sm:
                tab = np.zeros(G + 1)            # multiple-choice knapsack of the layers
                picks = []
                for cands in region:
                    new = np.full(G + 1, INF)
                    pick = np.full(G + 1, -1)
                    for ci, cand in enumerate(cands):
                        u = math.ceil(cand.size / unit)
                        if u > G:
                            continue
                        v = tab[:G + 1 - u] + cand.perf
                        better = v < new[u:]
                        new[u:][better] = v[better]
                        pick[u:][better] = ci
                    tab = new
                    picks.append(pick)
                reg_tabs.append((tab, picks))
            sm_tabs.append(reg_tabs)
            v = np.max([t for t, _ in reg_tabs], axis=0)
            better = v < best_seg
            best_seg[better] = v[better]
            pick_si[better] = si
        # newF[g] = min over gs <= g of F[g - gs] + best_seg[gs], the least gs on ties:
        # only the gs where best_seg drops can be the least (F is non-increasing)
        drops = np.flatnonzero(np.concatenate(([True], best_seg[1:] < best_seg[:-1])))
        g_all = np.arange(G + 1)
        rest = g_all[:, None] - drops[None, :]
        tot = np.where(rest >= 0, F[np.maximum(rest, 0)] + best_seg[drops][None, :], INF)
        arg = np.argmin(tot, axis=1)
        F = tot[g_all, arg]
        split = np.where(np.isfinite(F), drops[arg], 0)
        trace.append((pick_si, sm_tabs, split))
    if F[G] == INF:
        raise CapacityError(f"the weights do not fit a node's {cap} bytes of DRAM with any "
                            "weight replication; use more nodes or banks per node")
    sm_choice: list[int] = []
    layer_choice: list[list[list[int]]] = []
    g = G
    for (pick_si, sm_tabs, split), seg in zip(reversed(trace), reversed(segments), strict=True):
        gs = int(split[g])
        si = int(pick_si[gs])
        regions = []
        for (_, picks), region in zip(sm_tabs[si], seg[si], strict=True):
            gg, idx = gs, []
            for cands, pick in zip(reversed(region), reversed(picks), strict=True):
                ci = int(pick[gg])
                idx.append(ci)
                gg -= math.ceil(cands[ci].size / unit)
            regions.append(idx[::-1])
        sm_choice.append(si)
        layer_choice.append(regions)
        g -= gs
    return float(F[G]), sm_choice[::-1], layer_choice[::-1]


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


def layer_candidates(model: NodeModel, lay: Layer, region: tuple[int, int, int, int],
                      wrs: Sequence[int], layouts: dict[str, int], cache: dict,
                      preds: Sequence[Placement] = (), array: tuple[int, int] = (0, 0),
                      keep: int = 8) -> list[Candidate]:
    """The (WR, LM) candidates of *lay* on *region*: for each WR the LM of least latency.
    With *preds* (where the predecessors ran in the previous iteration of Algorithm 1)
    a candidate's latency includes moving their outputs to its nodes
    (:func:`redistribution`), weighed for the *keep* fastest LMs of each WR (in every
    spatial order) and for those equal to a predecessor's on the same region.

    The fastest LMs are taken one at a time from the cost model's ranking
    (:meth:`.mapcost.NodeModel.ranked`) and only while one of the rest could still be
    faster than the best found, movement included (:meth:`.mapcost.RankedLMs.floor`):
    what weighing all *keep* of them would give, since a movement is never negative.
    *cache* keeps the rankings, keyed by the layer's shape
    (:func:`.mapspace.layer_shape`), the region's size, the layouts and *wrs*, so
    that they may be shared by the layers of one shape, the iterations of Algorithm 1
    and the networks mapped with one *model*."""
    _, _, h, w = region
    if lay.kind == "input":              # already in DRAM where its readers need it
        return [Candidate(0.0, 0, 1, WHOLE)]
    li = layouts.get(lay.preds[0], Layout.NCHW) if lay.preds else Layout.NCHW
    lo = layouts.get(lay.name, Layout.NCHW)
    key = ("candidates", layer_shape(lay), h, w, int(li), int(lo), tuple(wrs))
    parts = layer_partitions(lay, h, w)
    if key not in cache:
        per_wr = []
        for wr in wrs:
            ranked = model.ranked(lay, parts, wr, li, lo)
            if ranked.item(0) is not None:
                per_wr.append((wr, ranked))
            if lay.weights == 0 or lay.dynamic_weights:
                break
        if not per_wr:
            raise CapacityError(f"layer {lay.name} fits no partition of a {h}x{w} region")
        cache[key] = per_wr
    preds = [p for p in preds if p.layer.kind != "input"]
    same = _places(cache, key[1], h, w, parts, {p.part for p in preds
                                                 if p.region == tuple(region)})
    moves: dict[Partition, int] = {}    # the movement into each LM, the same for every WR
    move_into = redistributions(model, array, preds, lay, region) if preds else None

    def weigh(c, part, best):
        """*best* (latency, movement, cost, LM) or the LM *part* of cost *c*, whichever
        is faster (*best* on a tie)."""
        if best is not None and c.cycles >= best[0]:
            return best         # a movement (never negative) cannot make it faster
        move = 0
        if preds:               # memoized by the model (:func:`.movement.redistribution`)
            move = moves.get(part)
            if move is None:
                move = moves[part] = move_into(part)[0]
        if best is None or c.cycles + move < best[0]:
            return (c.cycles + move, move, c, part)
        return best

    cands = []
    for wr, ranked in cache[key]:
        best = None
        fastest = set()
        for j in range(keep):
            if best is not None and ranked.floor(j) >= best[0]:
                break           # none of the rest is faster, in any spatial order
            got = ranked.item(j)
            if got is None:
                break
            c, part = got
            fastest.add(part)
            best = weigh(c, part, best)
            # its other spatial orders (the node part is the same)
            ok = ("orders", key, wr, part)
            if ok not in cache:
                cache[ok] = [(model.layer_cost(lay, alt, wr, li, lo), alt)
                             for alt in orders(part)[1:]]
            for alt_cost, alt in cache[ok]:
                best = weigh(alt_cost, alt, best)
        # a predecessor's LM on the same region, not among those: by cycles, then in
        # the order of the LMs
        rest = []
        for i, part in same:
            if part not in fastest:
                try:
                    c = model.layer_cost(lay, part, wr, li, lo)
                except CapacityError:
                    continue
                rest.append((c.cycles, i, c, part))
        for _, _, c, part in sorted(rest, key=lambda t: t[:2]):
            best = weigh(c, part, best)
        _, move, c, part = best
        cands.append(Candidate(c.cycles + move, c.weight_bytes, wr, part, c.energy_pj, move))
    return cands


def _places(cache: dict, shape: tuple, h: int, w: int, parts: Sequence[Partition],
            lms: set[Partition]) -> list[tuple[int, Partition]]:
    """``(place, LM)`` of those of *lms* that are among *parts* (the LMs of a layer of
    *shape* on an ``h x w`` region, each once), in their order: the place of every LM is
    kept in *cache*, so that finding a few costs no scan of them all."""
    if not lms:
        return []
    at = cache.get(("places", shape, h, w))
    if at is None:
        at = cache["places", shape, h, w] = {part: i for i, part in enumerate(parts)}
    return sorted((at[part], part) for part in lms if part in at)


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


def segment_sms(branches: list[list[Layer]], array: tuple[int, int],
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
