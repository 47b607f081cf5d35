"""The fast PIM-Mapper against straightforward evaluations of the same search.

The mapper memoizes its costs by layer shape, LM sizes and the weights' sharing set
(:mod:`pimforge.sim.nicepim.mapcost`), its data movement by shapes, LMs and regions
(:mod:`pimforge.sim.nicepim.movement`), and runs Algorithm 2's DP on numpy arrays
(:mod:`pimforge.sim.nicepim.selection`). Here each shortcut is checked against the
plain computation: the DP against the loop over grid cells it replaced (ties
included), every memoized layer cost against a fresh model's, and whole mappings
against a run in which no two layers share a memo entry. The lower bound that lets the
LM search skip LMs (:func:`~pimforge.sim.nicepim.node_model.cycles_lower_bound`) is
checked never to exceed a random node part's cycles.

Random cases draw from ``random.Random(seed)`` with ``seed`` from ``PIMFORGE_SEED``
(default 1), logged.
"""

from __future__ import annotations

import logging
import math
import os
import random
from dataclasses import replace

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.gen.errors import CapacityError
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.rtl.nicepim.params import Layout, Op
from pimforge.sim.nicepim import (
    mapcost,
    mapper,
    mapspace,
    movement,
    node_model,
    selection,
    share_port,
)
from pimforge.sim.nicepim import networks as nets
from pimforge.sim.nicepim.dnn_run import scale_network
from pimforge.sim.nicepim.tiling import ConvPart, Tile, blocking, tile_fields, tiles

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "1"))


def _loop_select(segments, cap, steps=256):
    """Algorithm 2 as a loop over grid cells, candidates and splits (the mapper's DP
    before it ran on numpy arrays): first minimum wins every tie."""
    def largest(unit):
        return sum(max(max(sum(max(math.ceil(c.size / unit) for c in cands)
                               for cands in region) for region in sm) for sm in seg)
                   for seg in segments)

    most = largest(1)
    sized = sum(max(max(sum(any(c.size for c in cands) for cands in region) for region in sm)
                    for sm in seg) for seg in segments)
    steps = max(steps, 4 * sized)
    unit = max(1, math.ceil(min(cap, most) / steps))
    G = largest(unit) if most <= cap else cap // unit
    INF = math.inf
    F = [0.0] * (G + 1)
    trace = []
    for seg in segments:
        best_seg = [INF] * (G + 1)
        pick_seg: list = [None] * (G + 1)
        for si, sm in enumerate(seg):
            reg_tabs = []
            for region in sm:
                tab = [0.0] * (G + 1)
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
        raise CapacityError("does not fit")
    sm_choice, layer_choice, g = [], [], G
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


@pytest.mark.parametrize("case", range(40))
def test_numpy_dp_equals_the_loop_dp(case):
    """Same latency, SM and candidate choices, ties included (integer latencies from a
    small range make many), float latencies too, capacities that bind or not."""
    rng = random.Random(SEED * 1000 + case)
    log.info("seed %d case %d", SEED, case)
    ints = case % 2 == 0
    def cand():
        return selection.Candidate(rng.randint(1, 6) if ints else rng.uniform(1, 50),
                                   rng.choice((0, rng.randint(1, 40))))

    def region():
        return [[cand() for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(1, 3))]

    tree = [[[region() for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 2))]
            for _ in range(rng.randint(1, 4))]
    cap, steps = rng.randint(10, 120), rng.choice((4, 16, 64))
    try:
        want = _loop_select(tree, cap, steps)
    except CapacityError:
        with pytest.raises(CapacityError):
            selection.mapping_select(tree, cap, steps)
        return
    assert selection.mapping_select(tree, cap, steps) == want


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_memoized_layer_costs_equal_a_fresh_models(preset):
    """Every LM and WR of a few layers (one layer per shape class: plain, grouped,
    classifier, attention product, pool), costed through one model's memo (the WRs
    and layers sharing entries) and each by a model of its own."""
    cfg = load_config(preset)
    n = cfg.nicepim
    rng = random.Random(SEED)
    lays = [nets.network("resnet152").by_name[x] for x in ("res2_0_b", "fc")]
    lays += [next(lay for lay in nets.network("bert_base").layers if lay.kind == "matmul")]
    lays += [next(lay for lay in nets.network("vgg16").layers if lay.kind == "maxpool")]
    lays += [nets.Layer("dw", "conv", 1, 32, 14, 14, 32, 14, 14, 3, 3, 1, 1, groups=32)]
    # twins that differ from a layer in one field of the memo's shape key each
    base = nets.Layer("t", "conv", 2, 32, 14, 14, 32, 14, 14, 3, 3, 1, 1)
    lays += [base, *(replace(base, name=f"t_{f}", **{f: v}) for f, v in
                     (("pad", 0), ("stride", 2), ("r", 1), ("s", 1), ("groups", 2), ("n", 1),
                      ("h", 16), ("w", 16), ("kind", "fc"), ("preds", ("a", "b"))))]
    memo = mapcost.NodeModel(cfg)
    checked = 0
    for lay in lays:
        parts = mapspace.layer_partitions(lay, n.na_rows, n.na_cols)
        for part in random.Random(SEED).sample(parts, min(6, len(parts))):
            for alt in mapspace.orders(part)[:2]:
                for wr in (1, 2, n.na_rows * n.na_cols):
                    lo = rng.choice(mapspace.LAYOUTS)
                    try:
                        want = mapcost.NodeModel(cfg).layer_cost(lay, alt, wr, lo, Layout.NCHW)
                    except CapacityError:
                        with pytest.raises(CapacityError):
                            memo.layer_cost(lay, alt, wr, lo, Layout.NCHW)
                        continue
                    assert memo.layer_cost(lay, alt, wr, lo, Layout.NCHW) == want
                    checked += 1
    assert checked > 100


def _unshared(monkeypatch):
    """Memo keys that no two layers share (each layer's name in its shape key)."""
    plain = mapspace.layer_shape

    def by_name(lay):
        return (lay.name, *plain(lay))

    for mod in (mapspace, mapcost, movement, selection):
        if hasattr(mod, "layer_shape"):
            monkeypatch.setattr(mod, "layer_shape", by_name)


@pytest.mark.parametrize("name, scale, preset", [("resnet152", 8, "nicepim_small"),
                                                 ("googlenet", 8, "nicepim_small"),
                                                 ("bert_base", 8, "nicepim_4x4")])
def test_mapping_equals_one_without_shared_memo_entries(monkeypatch, name, scale, preset):
    """Repeated blocks (ResNet's bottlenecks, BERT's encoder layers, inception modules)
    share the memo's entries by shape; mapping with per-layer entries gives the same
    mapping, layer by layer, and the same latency and energy."""
    cfg = load_config(preset)
    net = scale_network(nets.network(name), scale, layers=40)
    fast = mapper.map_network(net, cfg).to_json()
    with monkeypatch.context() as m:
        _unshared(m)
        slow = mapper.map_network(net, cfg).to_json()
    assert fast == slow


def _every(model, lay, parts, wr, li, lo, *, share=True, keep=1):
    """:meth:`~mapcost.NodeModel.cheapest` without its bound: every LM costed, sorted
    (stably) by the goal."""
    costs = []
    for part in parts:
        try:
            c = model.layer_cost(lay, part, wr, li, lo)
        except CapacityError:
            continue
        costs.append((c, part))
    costs.sort(key=lambda t: t[0].cycles if share else t[0].compute + t[0].dram)
    return costs[:keep]


class _EveryRanked:
    """:meth:`~mapcost.NodeModel.ranked` without its bound: every LM costed and sorted,
    and no floor, so that :func:`~selection.layer_candidates` weighs all it keeps."""

    def __init__(self, model, lay, parts, wr, li, lo, *, share=True):
        self.items = _every(model, lay, parts, wr, li, lo, share=share, keep=len(parts))

    def item(self, j):
        return self.items[j] if j < len(self.items) else None

    def first(self, n):
        return self.items[:n]

    def floor(self, j):
        return -math.inf


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_bounded_search_equals_costing_every_lm(preset):
    """The bound never exceeds a cost, and the bounded search returns what costing every
    LM and sorting gives (ties in the LMs' order), for random layers of the networks,
    WRs, layouts, goals and numbers kept."""
    cfg = load_config(preset)
    n = cfg.nicepim
    rng = random.Random(SEED)
    log.info("seed %d", SEED)
    lays = [lay for name in ("vgg16", "resnet152", "googlenet", "bert_base")
            for lay in scale_network(nets.network(name), 4).layers if lay.kind != "input"]
    model = mapcost.NodeModel(cfg)
    for lay in rng.sample(lays, 12):
        parts = mapspace.layer_partitions(lay, n.na_rows, n.na_cols)
        wr = rng.choice((1, 2, n.na_rows * n.na_cols))
        li, lo = rng.choice(mapspace.LAYOUTS), rng.choice(mapspace.LAYOUTS)
        share, keep = rng.random() < 0.5, rng.choice((1, 3, 8))
        for part in parts:
            try:
                c = model.layer_cost(lay, part, wr, li, lo)
                b = model.cycles_bound(lay, part, wr, li, lo, share=share)
            except CapacityError:
                continue
            assert b <= (c.cycles if share else c.compute + c.dram) + 1e-6, (lay.name, part)
        want = _every(model, lay, parts, wr, li, lo, share=share, keep=keep)
        assert model.cheapest(lay, parts, wr, li, lo, share=share, keep=keep) == want, \
            (lay.name, wr, share, keep)
        # the ranking's floor from each place on never exceeds what follows there
        ranked = model.ranked(lay, parts, wr, li, lo, share=share)
        every = _every(model, lay, parts, wr, li, lo, share=share, keep=len(parts))
        for j in range(len(every)):
            assert ranked.floor(j) <= min(c.compute + c.dram for c, _ in every[j:]) + 1e-6
            assert ranked.item(j) == every[j], (lay.name, wr, share, j)


def _eager_order(model, lay, parts, wr, li, lo, share):
    """The ranking's order as it was before the bounds were found lazily: every LM's
    :meth:`~mapcost.NodeModel.cycles_bound` (``-inf`` where its buffers do not fit)
    with its node bound, sorted by bound, then by index."""
    order = []
    for i, part in enumerate(parts):
        try:
            b = model.cycles_bound(lay, part, wr, li, lo, share=share)
            node = model.cycles_bound(lay, part, wr, li, lo, share=False)
        except CapacityError:
            b = node = -math.inf
        order.append((b, i, part, node))
    order.sort(key=lambda t: t[:2])
    return order


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_lazy_bounds_give_the_order_of_every_bound(preset):
    """The ranking that finds an LM's sharing only once its node bound is reached waits
    its LMs in the order that sorting every LM's bound gives (ties in the LMs' order),
    and its floor at every step, from any place, is the one computed from every node
    bound and every cost."""
    cfg = load_config(preset)
    n = cfg.nicepim
    rng = random.Random(SEED + 7)
    lays = [lay for name in ("vgg16", "resnet152", "googlenet", "bert_base")
            for lay in scale_network(nets.network(name), 4).layers if lay.kind != "input"]
    ref_model = mapcost.NodeModel(cfg)
    for lay in rng.sample(lays, 16):
        model = mapcost.NodeModel(cfg)
        h, w = rng.choice(((n.na_rows, n.na_cols), (1, n.na_cols), (2, 2)))
        parts = mapspace.layer_partitions(lay, h, w)
        wr = rng.choice((1, 2, h * w))
        li, lo = rng.choice(mapspace.LAYOUTS), rng.choice(mapspace.LAYOUTS)
        share = rng.random() < 0.7
        want = _eager_order(ref_model, lay, parts, wr, li, lo, share)
        ranked = model.ranked(lay, parts, wr, li, lo, share=share)
        for j in range(len(parts) + 1):
            waiting = min((o[3] for o in want[ranked._next:]), default=math.inf)
            # (and from other places than the next, before and past the ranked ones)
            for k in sorted({j, 0, rng.randrange(len(parts) + 2)}):
                floor = min([waiting - 1] + [c.compute + c.dram for c, _ in ranked._ranked[k:]]
                            + [c.compute + c.dram for _, _, c, _ in ranked._costed])
                assert ranked.floor(k) == floor, (lay.name, j, k)
            if ranked.item(j) is None:
                break
        got = []
        while (e := ranked._entry(len(got))) is not None:
            got.append(e[:4])
        assert got == want, (lay.name, h, w, wr, share)


def test_mapping_equals_one_that_costs_every_lm(monkeypatch):
    """PIM-Mapper and both baselines map a network as when every LM is costed (and every
    one of the fastest LMs weighed with its movement)."""
    cfg = load_config("nicepim_small")
    net = scale_network(nets.network("googlenet"), 8, layers=30)
    fast = [mapper.map_network(net, cfg).to_json(),
            *(mapper.baseline_map(net, cfg, lm_goal=g).to_json() for g in ("node", "full"))]
    monkeypatch.setattr(mapcost.NodeModel, "ranked",
                        lambda model, *args, **kw: _EveryRanked(model, *args, **kw))
    slow = [mapper.map_network(net, cfg).to_json(),
            *(mapper.baseline_map(net, cfg, lm_goal=g).to_json() for g in ("node", "full"))]
    assert fast == slow


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_short_walks_counted_in_python_equal_numpys_count(monkeypatch, preset):
    """The DMA's words, rows, groups and read-modify-writes of random tasks (any op,
    layout, window partly outside the tensor, power-of-two channel counts among them),
    counted with the short walks in Python and with every walk in numpy."""
    n = load_config(preset).nicepim
    rng = random.Random(SEED)
    log.info("seed %d", SEED)
    cases = []
    for _ in range(1500):
        op = rng.choice([Op.LOAD_I, Op.LOAD_W, Op.STORE])
        lay = rng.choice([Layout.NCHW, Layout.NHWC, Layout.NCHWC8]
                         + ([Layout.CHWN] if op == Op.LOAD_W else []))
        dims = (rng.randint(1, 40), rng.choice([rng.randint(1, 70), 8, 32, 64, 256]),
                rng.randint(1, 30), rng.randint(1, 40))
        cases.append((int(op), int(lay), dims, rng.randint(-2, dims[0]),
                      rng.randint(-3, dims[1]), rng.randint(-3, dims[2]),
                      rng.randint(-3, dims[3]), rng.randint(1, 3), rng.randint(1, 12),
                      rng.randint(1, 45)))

    def run():
        tm = node_model.NodeTiming(n)
        return [(tm.dma(*a), tm.store_rmw(a[1], a[2], *a[3:7], *a[8:10])) for a in cases]

    fast = run()
    monkeypatch.setattr(node_model, "PYTHON_RUNS", -1)
    assert fast == run()


def _random_part(rng, widest: int = 60) -> ConvPart:
    """A random node part of a random convolution: channel counts around the PE
    array's and the DMA's word (powers of two among them), kernels up to 7, strides up
    to 2, grouped ones, rows and columns anywhere in the layer, maps up to *widest*
    wide."""
    groups = rng.choice((1, 1, 1, 2, 4))
    c, k = (groups * rng.choice((rng.randint(1, 80), 8, 16, 32, 64, 128, 256))
            for _ in range(2))
    r = rng.choice((1, 3, 3, 5, 7))
    s = rng.choice((r, 1)) if r > 1 else 1
    stride = rng.choice((1, 1, 2))
    pad = rng.randint(0, r // 2)
    h, w = rng.randint(r, 60), rng.randint(s, widest)
    p, q = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    r0 = rng.randint(0, p - 1)
    c0 = rng.randint(0, q - 1)
    return ConvPart(c=c, k=k, h=h, w=w, r=r, s=s, stride=stride, pad=pad, groups=groups,
                    rows=(r0, rng.randint(r0 + 1, p)), cols=(c0, rng.randint(c0 + 1, q)))


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4", "nicepim_16x16"])
def test_node_bound_never_exceeds_the_task_lists_cycles(preset):
    """:func:`~node_model.cycles_lower_bound` of random node parts, each in a random
    pair of layouts, is at most the cycles of their task lists
    (:func:`~node_model.part_cost`), single buffering among them, and exceeds the
    engine's cycles (the bound it replaced) for a quarter of them at least."""
    n = load_config(preset).nicepim
    tm = node_model.NodeTiming(n)
    rng = random.Random(SEED)
    log.info("seed %d", SEED)
    checked = above = single = 0
    while checked < 400 or single < 20:
        # (wide maps: tiles that fill whole buffers, without double buffering)
        part = _random_part(rng, 60 if checked < 400 else 16 * n.obuf_lines)
        li, lo = rng.choice(mapspace.LAYOUTS), rng.choice(mapspace.LAYOUTS)
        try:
            b_ = blocking(n, part)
        except CapacityError:
            continue
        if (part.k * math.ceil(part.p / b_.per_rows) * math.ceil(b_.blocks / b_.cbs)
                * math.ceil(part.r / b_.kr)) > 300 * n.pe_cols:
            continue            # over 300 tiles: slow to cost, and no other kind of case
        if checked >= 400 and b_.double:
            continue
        c = node_model.part_cost(n, part, li, lo, tm)
        b = node_model.cycles_lower_bound(n, part, li, lo, tm)
        assert b <= c.cycles + 1e-6, (part, li, lo, b, c.cycles)
        checked += 1
        single += not b_.double
        above += b > c.engine + 1
    assert above > checked // 4


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4", "nicepim_16x16"])
def test_loads_held_over_counted_in_closed_form(preset):
    """The loads :func:`~tiling.tiles` leaves out (a buffer half that still holds the
    tile's weights or input) are the ones :func:`~tiling.loaded` counts for the lower
    bound, over random parts; every half is loaded before a tile uses it; and a tile's
    first load reads the tensor the load before it read last."""
    from pimforge.sim.nicepim.tiling import loaded, tiles

    n = load_config(preset).nicepim
    rng = random.Random(SEED + 7)
    log.info("seed %d", SEED + 7)
    checked = reused = 0
    while checked < 300:
        part = _random_part(rng, rng.choice([7, 60]))
        try:
            b = blocking(n, part)
        except CapacityError:
            continue
        ts = list(tiles(n, part))
        bands = math.ceil(part.p / b.per_rows)
        per_band = math.ceil(b.blocks / b.cbs) * math.ceil(part.r / b.kr)
        cos = math.ceil(part.k // part.groups / n.pe_cols)
        w_bands, i_cos = loaded(n, part)
        assert sum(t.load_w for t in ts) == part.groups * cos * w_bands * per_band, part
        if b.kr >= part.r:      # (kernel bands may read a window again: not counted)
            assert sum(t.load_i for t in ts) == part.groups * i_cos * bands * per_band, part
        held: dict = {}
        last = None
        for i, t in enumerate(ts):
            half = i % 2 if b.double else 0
            wkey = (t.g, t.co, t.b0, t.u0)
            ikey = (t.g, t.b0, t.o0 * part.stride + t.u0, (t.oh - 1) * part.stride + t.kh)
            assert t.load_w or held.get(("w", half)) == wkey, (part, i)
            assert t.load_i or held.get(("i", half)) == ikey, (part, i)
            held["w", half], held["i", half] = wkey, ikey
            order = (["i", "w"] if t.i_first else ["w", "i"])
            order = [k for k in order if (t.load_w if k == "w" else t.load_i)]
            if order and last is not None and len(order) == 2:
                assert order[0] == last, (part, i)
            last = order[-1] if order else last
        checked += 1
        reused += len(ts) > sum(t.load_i for t in ts)
    assert reused > 10


def _lane_by_lane_groups(tm, dims, n0, c0, h0, w0, cb, nh, nw):
    """The DMA's groups of an NHWC input into input-buffer rows of several lines: every
    lane's cuts (the group's start, a row's end, the tensor's channel 0 and end, a DRAM
    word's end) counted one by one."""
    R, NI, U = tm.n.pe_rows, tm.ibuf_row, tm.word_bits // 16
    dn, dc, dh, dw = dims
    ii, jj = np.divmod(np.arange(nh * nw), nw)
    h, w = h0 + ii, w0 + jj
    pin = ((0 <= n0 < dn) & (h >= 0) & (h < dh) & (w >= 0) & (w < dw))[:, None]
    total = 0
    for b in range(0, cb, NI):
        g = min(NI, cb - b)
        ln = np.arange(g * R)
        c = (c0 + b * R + ln)[None, :]
        flat = (b * nh * nw + np.arange(nh * nw)[:, None] * g) * R + ln
        a = ((n0 * dh + h[:, None]) * dw + w[:, None]) * dc + c
        cut = (flat % (NI * R) == 0) | (ln == 0)[None, :]
        cut |= pin & (((c == 0) & (c0 + b * R < 0)) | (c == dc)
                      | ((c >= 0) & (c < dc) & (a % U == 0)))
        total += int(cut.sum())
    return total


def test_input_row_groups_equal_a_lane_by_lane_count():
    """The DMA's groups of an NHWC input into input-buffer rows of several lines, counted
    pixel by pixel (:meth:`~node_model.NodeTiming._input_row_groups`), equal a count of
    every lane's cuts (:func:`_lane_by_lane_groups`) over random windows, channel offsets
    and group sizes."""
    rng = random.Random(SEED + 11)
    log.info("seed %d", SEED + 11)
    for preset in ("nicepim_small", "nicepim_4x4"):
        tm = node_model.NodeTiming(load_config(preset).nicepim)
        assert tm.ibuf_row > 1
        for _ in range(400):
            dc, dh, dw = rng.randint(1, 300), rng.randint(1, 9), rng.randint(1, 9)
            args = ((1, dc, dh, dw), rng.choice([0, 0, 1]), rng.randint(-20, dc),
                    rng.randint(-2, dh), rng.randint(-2, dw), rng.randint(1, 11),
                    rng.randint(1, 5), rng.randint(1, 5))
            assert tm._input_row_groups(*args) == _lane_by_lane_groups(tm, *args), \
                (preset, args)


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_row_groups_by_rows_equal_a_lane_by_lane_count(preset):
    """The closed form of the groups of an NHWC input whose channels are not a multiple
    of the DRAM word (:meth:`~node_model.NodeTiming._row_groups_by_rows`: floor sums
    along rows or columns, the whole pixel's run by rows) equals the lane-by-lane count
    wherever it answers, and it answers wherever each group of buffer-row blocks is a
    single block: random channel counts (below, around and above the word, the lanes a
    part or all of a pixel's channels), windows partly outside the tensor, samples
    outside the batch, wide and tall windows."""
    tm = node_model.NodeTiming(load_config(preset).nicepim)
    U = tm.word_bits // 8
    rng = random.Random(SEED + 14)
    log.info("seed %d", SEED + 14)
    answered = 0
    for i in range(500):
        dc = rng.choice([rng.randint(1, 2 * U + 5), rng.randint(1, 3 * tm.n.pe_rows)])
        if dc % U == 0:
            dc += 1
        dh, dw = rng.randint(1, 14), rng.randint(1, 14)
        cb = rng.choice([1, 1, 1 + tm.ibuf_row, rng.randint(1, 9)])
        nh, nw = rng.randint(1, 9), rng.randint(1, 9)
        if i % 3 == 0:
            nh, nw = nw, rng.randint(10, 20)
        c0 = rng.choice([0, 0, rng.randint(-20, dc), tm.n.pe_rows * rng.randint(0, 3)])
        args = ((1, dc, dh, dw), rng.choice([0, 0, 0, 1, -1]), c0,
                rng.randint(-3, dh), rng.randint(-3, dw), cb, nh, nw)
        got = tm._row_groups_by_rows(*args)
        if cb % tm.ibuf_row == 1 or tm.ibuf_row == 1:
            assert got is not None, args
        if got is not None:
            answered += 1
            assert got == _lane_by_lane_groups(tm, *args), args
        assert tm._input_row_groups(*args) == _lane_by_lane_groups(tm, *args), args
    assert answered > 250


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4", "nicepim_16x16"])
def test_aligned_row_groups_equal_a_lane_by_lane_count(preset):
    """Where the channels are a multiple of the DRAM word, the groups summed by the
    pixels' residues (:meth:`~node_model.NodeTiming._aligned_row_groups`) equal the
    lane-by-lane count: random windows (partly outside the tensor), channel offsets
    (below 0 and past the end), group sizes and samples outside the batch."""
    tm = node_model.NodeTiming(load_config(preset).nicepim)
    U = tm.word_bits // 16
    rng = random.Random(SEED + 13)
    log.info("seed %d", SEED + 13)
    for _ in range(300):
        dc, dh, dw = U * rng.randint(1, 4), rng.randint(1, 12), rng.randint(1, 12)
        args = ((1, dc, dh, dw), rng.choice([0, 0, 0, 1, -1]),
                rng.randint(-40, dc + 10), rng.randint(-3, dh), rng.randint(-3, dw),
                rng.randint(1, 11), rng.randint(1, 7), rng.randint(1, 7))
        assert tm._aligned_row_groups(*args) == _lane_by_lane_groups(tm, *args), args
        assert tm._input_row_groups(*args) == _lane_by_lane_groups(tm, *args), args


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_row_class_costs_what_its_window_costs(preset):
    """A task whose window is moved up by whole DRAM rows of its tensor's row stride
    (:meth:`~node_model.NodeTiming.row_class`, what the cost model caches by) costs the
    same words, rows, groups, cycles and partly covered words, over random loads and
    stores in every layout."""
    from pimforge.rtl.nicepim.params import Layout, Op

    n = load_config(preset).nicepim
    tm = node_model.NodeTiming(n)
    dma = node_model.NodeTiming.dma.__wrapped__
    rng = random.Random(SEED + 13)
    log.info("seed %d", SEED + 13)
    moved = 0
    while moved < 150:
        op = rng.choice([Op.LOAD_I, Op.STORE])
        lay = rng.choice([Layout.NCHW, Layout.NHWC, Layout.NCHWC8])
        dc, dh, dw = rng.choice([3, 8, 16, 24, 64, 128]), rng.randint(20, 300), rng.randint(1, 60)
        nh, nw = rng.randint(1, 8), rng.randint(1, dw + 1)
        h0 = rng.randint(1, dh - nh)
        c0, cb = rng.randint(0, dc - 1), (rng.randint(1, 4) if op == Op.LOAD_I else 1)
        w0 = rng.randint(-1, max(0, dw - nw))
        dims = (1, dc, dh, dw)
        h1 = tm.row_class(int(op), int(lay), dims, h0, nh)
        if h1 == h0:
            continue
        moved += 1
        a = (int(op), int(lay), dims, 0, c0)
        assert dma(tm, *a, h0, w0, cb, nh, nw) == dma(tm, *a, h1, w0, cb, nh, nw), (a, h0, h1)
        if op == Op.STORE:
            assert (tm.store_rmw(int(lay), dims, 0, c0, h0, w0, nh, nw)
                    == tm.store_rmw(int(lay), dims, 0, c0, h1, w0, nh, nw)), (a, h0, h1)


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4", "nicepim_16x16"])
def test_part_cost_equals_the_task_by_task_replay(preset):
    """:func:`~node_model._part_cost` (each distinct task made once, a run's held loads,
    open rows and dispatch replayed in one pass) equals
    :func:`~node_model._part_cost_replay` (the task list built and replayed task by
    task) to the last bit, over random parts in random layouts: double and single
    buffering, held loads, parts cut into several runs of the task memory."""
    n = load_config(preset).nicepim
    tm = node_model.NodeTiming(n)
    rng = random.Random(SEED + 17)
    log.info("seed %d", SEED + 17)
    checked = single = runs = 0
    while checked < 150 or single < 10:
        part = _random_part(rng, rng.choice([7, 60, 60 if checked < 150 else 16 * n.obuf_lines]))
        try:
            b = blocking(n, part)
        except CapacityError:
            continue
        if (part.k * math.ceil(part.p / b.per_rows) * math.ceil(b.blocks / b.cbs)
                * math.ceil(part.r / b.kr)) > 200 * n.pe_cols:
            continue            # slow to replay task by task
        if checked >= 150 and b.double:
            continue
        args = (tm, part, int(rng.choice(mapspace.LAYOUTS)), int(rng.choice(mapspace.LAYOUTS)),
                int(rng.choice([Layout.KBLOCK, Layout.CHWN, node_model.weight_layout(n)])))
        fast = node_model._part_cost.__wrapped__(*args)
        assert fast == node_model._part_cost_replay(*args), args
        checked += 1
        single += not b.double
        runs += fast.tasks > n.task_entries
    assert runs > 5


def test_window_rows_equal_a_band_by_band_sum():
    """The node bound's input rows (:func:`~node_model._window_rows`: the bands whose
    windows lie wholly inside the tensor counted at once) equal a sum band by band and
    kernel band by kernel band: random strides, offsets (windows above the tensor's
    first row and past its last), band sizes, tensors shorter than a window."""
    rng = random.Random(SEED + 23)
    log.info("seed %d", SEED + 23)
    for _ in range(3000):
        per_rows, st = rng.randint(1, 9), rng.randint(1, 4)
        full, last = rng.randint(0, 30), rng.randint(0, per_rows - 1)
        r = rng.randint(1, 11)
        kr = rng.randint(1, r)
        kbands = [(u0, min(kr, r - u0)) for u0 in range(0, r, kr)]
        lo, off, hi = rng.randint(0, 40), rng.randint(-25, 15), rng.randint(1, 150)
        bands = [(lo + i * per_rows, per_rows) for i in range(full)]
        if last:
            bands.append((lo + full * per_rows, last))
        total = count = 0
        for o0, oh in bands:
            for u0, kh in kbands:
                h0 = o0 * st + off + u0
                vh = min(h0 + (oh - 1) * st + kh, hi) - max(h0, 0)
                if vh > 0:
                    total += vh
                    count += 1
        args = (lo, per_rows, full, last, st, off, kbands, hi)
        assert node_model._window_rows(*args) == (total, count), args


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4", "nicepim_16x16"])
def test_kblock_weight_loads_equal_a_block_by_block_walk(preset):
    """A ``LOAD_W`` in KBLOCK (one run when the tile has the whole kernel, else a run a
    channel block, each counted in closed form; its groups inline) has the words, rows,
    groups and cycles of the walk block by block with runs joined where they meet:
    random weight tensors, channel offsets, blocks and kernel windows."""
    n = load_config(preset).nicepim
    tm = node_model.NodeTiming(n)
    R, C = n.pe_rows, n.pe_cols
    per = tm.word_bits // 16
    row_el = tm.row_words * per
    rng = random.Random(SEED + 43)
    log.info("seed %d", SEED + 43)
    for _ in range(400):
        dn, dc, dh, dw = (rng.randint(1, 4 * C), rng.randint(1, 4 * R), rng.randint(1, 7),
                          rng.randint(1, 7))
        n0, c0 = C * rng.randint(0, 3), R * rng.randint(0, 3)
        cb = rng.randint(1, 5)
        h0 = rng.randint(0, dh - 1)
        nh = rng.choice([dh - h0, rng.randint(1, dh - h0)])
        nw = rng.choice([dw, rng.randint(1, dw)])
        args = (int(Op.LOAD_W), int(Layout.KBLOCK), (dn, dc, dh, dw), n0, c0, h0, 0, cb,
                nh, nw)
        line, pos = R * C, dh * dw * R * C
        start = ((n0 // C) * -(-dc // R) + c0 // R) * pos + h0 * dw * line
        runs = []
        for b in range(cb):
            a = start + b * pos
            if runs and runs[-1][1] == a:
                runs[-1][1] = a + nh * nw * line
            else:
                runs.append([a, a + nh * nw * line])
        words = sum((e - 1) // per - a // per + 1 for a, e in runs)
        rows = sum((e - 1) // row_el - a // row_el + 1 for a, e in runs)
        groups = node_model.NodeTiming.groups.__wrapped__(tm, *args)
        cyc = (max(groups, tm.col_gap * words + max(0, rows - 1) * tm.row)
               + node_model.LOAD_START + tm.row - tm.first_row)
        elements = cb * nh * nw * R * C
        assert node_model.NodeTiming.dma.__wrapped__(tm, *args) == (
            cyc, float(words), float(rows), elements), args


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4", "nicepim_16x16"])
def test_nhwc_groups_by_floor_sums_equal_the_pixel_by_pixel_count(preset):
    """The DMA's groups of an NHWC store (and of an input load into buffer rows of one
    line) whose channels neither divide the word nor are divided by it, their runs' word
    ends summed along rows or columns (:func:`~node_model._straddles`), equal the count
    pixel by pixel: random channels, windows partly outside the tensor, channel offsets
    below 0 and past the end, tall and wide windows."""
    n = load_config(preset).nicepim
    tm = node_model.NodeTiming(n)
    R, C = n.pe_rows, n.pe_cols
    rng = random.Random(SEED + 47)
    log.info("seed %d", SEED + 47)
    ops = [Op.STORE] + ([Op.LOAD_I] if tm.ibuf_row == 1 else [])
    checked = 0
    for _ in range(600):
        op = rng.choice(ops)
        U = tm.word_bits // (32 if op == Op.STORE else 16)
        dc = rng.randint(1, 3 * U)
        if U % dc == 0 or dc % U == 0:
            continue
        dh, dw = rng.randint(1, 20), rng.randint(1, 20)
        n0, c0 = rng.choice([0, 0, 0, 1]), rng.randint(-10, dc + 5)
        cb, nh, nw = rng.randint(1, 3), rng.randint(1, 12), rng.randint(1, 12)
        h0, w0 = rng.randint(-3, dh), rng.randint(-3, dw)
        dims = (1, dc, dh, dw)
        n_l, step = (R, R) if op == Op.LOAD_I else (C, C)
        hs, vh = node_model._clip(h0, nh, dh)
        ws, vw = node_model._clip(w0, nw, dw)
        want = cb * nh * nw
        if 0 <= n0 < 1 and vh and vw:
            want -= cb * vh * vw
            pix = (n0 * dh * dw + np.arange(hs, hs + vh)[:, None] * dw
                   + np.arange(ws, ws + vw)[None, :]).ravel()
            for b in range(cb):
                cs = c0 + b * step
                lo, hi = max(cs, 0), min(cs + n_l, dc)
                want += vh * vw * (int(cs < 0) + int(cs + n_l > dc))
                if hi > lo:
                    a = pix * dc + lo
                    want += int(((a + hi - lo - 1) // U - a // U + 1).sum())
        got = node_model.NodeTiming.groups.__wrapped__(tm, int(op), int(Layout.NHWC), dims,
                                                       n0, c0, h0, w0, cb, nh, nw)
        assert got == want, (op, dims, n0, c0, h0, w0, cb, nh, nw)
        checked += 1
    assert checked > 300


def test_tile_fields_are_the_tiles_fields():
    """The cost model reads a part's tiles as plain tuples (:func:`~.tiling.tile_fields`):
    the fields of :func:`~.tiling.tiles`' named tuples, in order, tile by tile."""
    n = load_config("nicepim_4x4").nicepim
    rng = random.Random(SEED + 19)
    checked = 0
    while checked < 40:
        part = _random_part(rng, 60)
        try:
            got = list(tiles(n, part))
        except CapacityError:
            continue
        assert all(type(t) is Tile for t in got)
        assert [tuple(t) for t in got] == list(tile_fields(n, part))
        assert got[-1].store and len(got[0]) == len(Tile._fields)
        checked += 1


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_word_class_counts_what_its_window_counts(preset):
    """A task whose window is moved up by whole DRAM words of its tensor's row stride
    (:meth:`~node_model.NodeTiming.word_class`, what the groups and partly covered words
    are cached by) reads and writes the same words in as many groups and partly covered
    words, over random loads and stores in every layout (each count on a fresh model: no
    cache shared between the two windows)."""
    n = load_config(preset).nicepim
    dma = node_model.NodeTiming.dma.__wrapped__
    groups = node_model.NodeTiming.groups.__wrapped__
    store_rmw = node_model.NodeTiming.store_rmw.__wrapped__
    rng = random.Random(SEED + 19)
    log.info("seed %d", SEED + 19)
    moved = 0
    while moved < 200:
        tm = node_model.NodeTiming(n)
        op = rng.choice([Op.LOAD_I, Op.STORE])
        lay = rng.choice([Layout.NCHW, Layout.NHWC, Layout.NCHWC8])
        dc = rng.choice([3, 8, 16, 24, 40, 64, 128])
        dh, dw = rng.randint(20, 300), rng.randint(1, 60)
        nh, nw = rng.randint(1, 8), rng.randint(1, dw + 1)
        h0 = rng.randint(1, dh - nh)
        c0, cb = rng.randint(0, dc - 1), (rng.randint(1, 4) if op == Op.LOAD_I else 1)
        w0 = rng.randint(-1, max(0, dw - nw))
        dims = (1, dc, dh, dw)
        h1 = tm.word_class(int(op), int(lay), dims, h0, nh)
        if h1 == h0:
            continue
        moved += 1
        a = (int(op), int(lay), dims, 0, c0)
        assert (dma(tm, *a, h0, w0, cb, nh, nw)[1]
                == dma(node_model.NodeTiming(n), *a, h1, w0, cb, nh, nw)[1]), (a, h0, h1)
        assert (groups(tm, *a, h0, w0, cb, nh, nw)
                == groups(tm, *a, h1, w0, cb, nh, nw)), (a, h0, h1)
        if op == Op.STORE:
            assert (store_rmw(tm, int(lay), dims, 0, c0, h0, w0, nh, nw)
                    == store_rmw(tm, int(lay), dims, 0, c0, h1, w0, nh, nw)), (a, h0, h1)


def test_memoized_walk_counts_equal_the_run_by_run_count(monkeypatch):
    """:func:`~node_model._walk_units_memo` (a forward walk's first to last unit, a walk
    whose runs share no unit summed in closed form, else a count kept by the offsets
    modulo the unit) equals :func:`~node_model._walk_units`' run-by-run count for random
    walks: one or several, forward and restarting, short (counted in Python) and long
    (numpy), gaps around a unit, offsets anywhere, the same walks at many offsets
    sharing one memo."""
    sums = []
    floor_sum = node_model._floor_sum
    monkeypatch.setattr(node_model, "_floor_sum", lambda *a: sums.append(a) or floor_sum(*a))
    rng = random.Random(SEED + 23)
    log.info("seed %d", SEED + 23)
    for _ in range(2000):
        n, m, a, b = (rng.randint(0, 40), rng.randint(1, 200), rng.randint(0, 900),
                      rng.randint(-900, 3000))
        assert floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n)), (n, m, a, b)
    memo: dict = {}
    found = kept = 0
    shapes = []
    for _ in range(300):
        U = rng.choice([4, 8, 64, 128])
        walks = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            L = rng.randint(1, 2 * U)
            lv, ext = [], L
            for _ in range(rng.randint(0, 3)):
                cnt = rng.randint(2, 12)
                step = rng.choice([0, 1, U - 1, U, U + 1, rng.randint(-ext, 3 * U)])
                stride = max(1, ext + step)
                lv.append((cnt, stride))
                ext += (cnt - 1) * stride
            walks.append((L, tuple(lv), rng.randint(0, 5 * U)))
        shapes.append((U, walks))
    for U, walks in shapes * 3:
        shift = rng.randint(0, 40) * U + rng.choice([0, 0, rng.randint(0, U - 1)])
        walks = [(L, lv, off + shift) for L, lv, off in walks]
        V = U * rng.choice([1, 2, 8])
        want = node_model._walk_units(walks, U, V)
        before = len(memo)
        got = (node_model._walk_units_memo(walks, U, memo),
               node_model._walk_units_memo(walks, V, memo))
        assert got == want, (walks, U, V)
        found += len(memo) == before
        kept += len(memo) > before
    assert found > 50 and kept > 50 and len(sums) > 100


def _noc_transfer_rows(model, array, rows):
    """:func:`~movement.noc_transfer` as it was before small meshes summed their flits by
    node pair: the links' loads by difference arrays, the ports' by ``bincount``, row by
    row."""
    from pimforge.rtl.nicepim.share import MESSAGE_FLITS
    from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

    if len(rows) == 0:
        return 0, 0.0
    H, W = array
    ys, xs, yd, xd = (rows[:, i].astype(np.int64) for i in range(4))
    flits = np.ceil(rows[:, 4] / model.word_bytes) * MESSAGE_FLITS
    M = max(H, W) + 1
    line = np.concatenate((ys + H * (xd > xs), 2 * H + xd + W * (yd > ys)))
    lo = np.concatenate((np.minimum(xs, xd), np.minimum(ys, yd)))
    hi = np.concatenate((np.maximum(xs, xd), np.maximum(ys, yd)))
    both = np.concatenate((flits, flits))
    size = 2 * (H + W) * M
    diff = np.bincount(line * M + lo, both, size) - np.bincount(line * M + hi, both, size)
    load = float(np.cumsum(diff.reshape(-1, M), axis=1).max())
    per = np.bincount(np.concatenate((ys * W + xs, H * W + yd * W + xd)), both, 2 * H * W)
    port = float(per.max())
    sent, recv = per[:H * W] / MESSAGE_FLITS, per[H * W:] / MESSAGE_FLITS
    hops = np.abs(ys - yd) + np.abs(xs - xd)
    far = int(hops.max())
    unit = max(model.timing.share_busy(s, r, far) for s, r in zip(sent, recv, strict=True))
    pipe = HEAD_CYCLES_PER_HOP * (far + 1) - 1
    bit_hops = float((flits * model.flit_bytes * 8 * hops).sum())
    return math.ceil(max(max(load, port) + pipe, unit)), bit_hops


def _redistribution_rows(model, array, preds, dst):
    """:func:`~movement.redistribution` without its memos, its transfer made of
    :func:`~movement.traffic`'s rows and costed row by row (:func:`_noc_transfer_rows`)."""
    from pimforge.rtl.nicepim.params import DATA_BITS

    rows, offset = [], 0
    for src in preds:
        if not (src.layer.kind == "input" or src.layer.name == dst.layer.operand):
            t = movement.traffic(src, dst, offset)
            t[:, 4] *= DATA_BITS / 8
            rows.append(t)
        offset += src.layer.k
    if not rows:
        return 0, 0.0
    return _noc_transfer_rows(model, array, np.concatenate(rows))


def _random_region(rng, array):
    H, W = array
    h, w = rng.randint(1, H), rng.randint(1, W)
    return (rng.randint(0, H - h), rng.randint(0, W - w), h, w)


@pytest.mark.parametrize("array", [(2, 2), (4, 4), (3, 5), (4, 8), (6, 6), (8, 8)])
def test_pair_transfer_equals_the_row_by_row_transfer(array):
    """The movement between layers, its flits summed by node pair on small meshes
    (:func:`~movement._pair_redistribution`, :func:`~movement._pair_transfer`), costs
    what :func:`~movement.traffic`'s rows cost row by row, to the cycle and bit-hop:
    random LMs and regions of the real layers of three networks (concatenations,
    additions, a flatten, attention products among them), and random rows."""
    cfg = load_config("nicepim_4x4")
    rng = random.Random(SEED * 31 + array[0] * 8 + array[1])
    log.info("seed %d", SEED)
    cases = 0
    for name in ("googlenet", "vgg16", "bert_base"):
        net = scale_network(nets.network(name), 4)
        model = mapcost.NodeModel(cfg)
        lays = [x for x in net.layers if x.preds]
        for lay in rng.sample(lays, min(25, len(lays))):
            def place(x):
                region = _random_region(rng, array)
                parts = mapspace.layer_partitions(x, region[2], region[3])
                part = rng.choice(mapspace.orders(rng.choice(parts)))
                return movement.Placement(x, part, region)
            preds = [place(net.by_name[p]) for p in lay.preds]
            for _ in range(3):
                dst = place(lay)
                want = _redistribution_rows(model, array, preds, dst)
                assert movement.redistribution(model, array, preds, dst) == want, \
                    (name, lay.name, dst)
                cases += want[0] > 0
    assert cases > 100
    H, W = array
    model = mapcost.NodeModel(cfg)
    for _ in range(60):
        rows = np.array([[rng.randrange(H), rng.randrange(W), rng.randrange(H),
                          rng.randrange(W), rng.choice((0, 1, 2, 16, 17, 500, 4096))]
                         for _ in range(rng.randint(1, 40))], dtype=float)
        assert movement.noc_transfer(model, array, rows) == \
            _noc_transfer_rows(model, array, rows)


@pytest.mark.parametrize("array", [(2, 4), (4, 4), (8, 8)])
def test_redistributions_by_lm_equal_each_redistribution(monkeypatch, array):
    """:func:`~movement.redistributions`, the movement into one layer on one region as a
    function of its LM (the memo's key made once), gives what
    :func:`~movement.redistribution` gives for each LM on a fresh model, with one memo
    shared by several layers, regions and predecessors' placements (a key that missed
    the region, the layer or the predecessors would return another one's movement)."""
    cfg = load_config("nicepim_4x4")
    plain, calls = movement.redistribution, []
    monkeypatch.setattr(movement, "redistribution",
                        lambda *a: calls.append(a) or plain(*a))
    rng = random.Random(SEED * 37 + array[0] * 8 + array[1])
    log.info("seed %d", SEED)
    cases = 0
    for name in ("googlenet", "resnet152", "bert_base"):
        net = scale_network(nets.network(name), 4)
        model = mapcost.NodeModel(cfg)          # one memo for all of a network's cases
        lays = [x for x in net.layers if x.preds]
        for lay in rng.sample(lays, min(15, len(lays))):
            def place(x):
                while True:         # (a region with LMs for the layer)
                    region = _random_region(rng, array)
                    parts = mapspace.layer_partitions(x, region[2], region[3])
                    if parts:
                        return movement.Placement(
                            x, rng.choice(mapspace.orders(rng.choice(parts))), region)
            for _ in range(2):
                preds = [place(net.by_name[p]) for p in lay.preds]
                for region in (place(lay).region, place(lay).region):
                    move = movement.redistributions(model, array, preds, lay, region)
                    parts = mapspace.layer_partitions(lay, region[2], region[3])
                    for part in rng.sample(parts, min(4, len(parts))):
                        want = plain(mapcost.NodeModel(cfg), array, preds,
                                     movement.Placement(lay, part, region))
                        assert move(part) == want, (name, lay.name, region, part)
                        done = len(calls)
                        assert move(part) == want           # now from the memo
                        assert len(calls) == done, "the memo's entry was missed"
                        cases += want[0] > 0
    assert cases > 50


@pytest.mark.parametrize("array", [(2, 2), (4, 4), (3, 5), (5, 3), (6, 6)])
def test_pair_bins_equal_the_plain_node_pairs(array):
    """:func:`~movement._pair_bins`, the node pairs of two placements (cached by their
    LMs and regions), gives each sending node's and receiving node's pair index from
    :func:`~movement.placement_nodes` (``s * H W + d``, row by row), every node's pair
    with itself in the one bin past the last pair: random LMs and regions of a
    network's layers, on square and oblong meshes."""
    rng = random.Random(SEED * 37 + array[0] * 8 + array[1])
    log.info("seed %d", SEED)
    H, W = array
    lays = [x for x in scale_network(nets.network("googlenet"), 4).layers if x.preds]

    def place():
        lay = rng.choice(lays)
        region = _random_region(rng, array)
        part = rng.choice(mapspace.orders(rng.choice(
            mapspace.layer_partitions(lay, region[2], region[3]))))
        return movement.Placement(lay, part, region)

    same = 0
    for _ in range(150):
        src, dst = place(), place()
        ns, nd = movement.placement_nodes(src), movement.placement_nodes(dst)
        s_at, d_at = ns["y"] * W + ns["x"], nd["y"] * W + nd["x"]
        want = [H * W * H * W if a == b else a * H * W + b for a in s_at for b in d_at]
        got = movement._pair_bins(src.part, src.region, dst.part, dst.region, array)
        assert got.tolist() == want, (src, dst)
        same += (H * W) ** 2 in want
    assert same > 20


def _home_boxes_plain(pl, pred_k: int, offset: int):
    """:func:`~movement.home_boxes`' boxes as first written: every node's ranges
    computed from its part indices with numpy, column by column."""
    lay, part = pl.layer, pl.part
    nd = movement.placement_nodes(pl)

    def split(total, parts, idx):
        return idx * total // parts, (idx + 1) * total // parts

    n0, n1 = split(lay.n, part.parts("b"), nd["b"])
    p0, p1 = split(lay.p, part.parts("p"), nd["p"])
    q0, q1 = split(lay.q, part.parts("q"), nd["q"])
    r0 = np.clip(p0 * lay.stride - lay.pad, 0, lay.h)
    r1 = np.clip((p1 - 1) * lay.stride - lay.pad + lay.r, 0, lay.h)
    s0 = np.clip(q0 * lay.stride - lay.pad, 0, lay.w)
    s1 = np.clip((q1 - 1) * lay.stride - lay.pad + lay.s, 0, lay.w)
    r1, s1 = np.maximum(r1, r0), np.maximum(s1, s0)
    if lay.kind in ("conv", "fc", "matmul"):
        if lay.groups > 1:
            og, cg = lay.k // lay.groups, lay.c // lay.groups
            k0, k1 = split(lay.k, part.parts("k"), nd["k"])
            g0, g1 = k0 // og, -(-k1 // og)
            c0, c1 = g0 * cg, np.maximum(g1 * cg, g0 * cg)
            w_ = c1 - c0
            c0, c1 = (c0 + nd["c"] * w_ // part.parts("c"),
                      c0 + (nd["c"] + 1) * w_ // part.parts("c"))
        else:
            c0, c1 = split(lay.c, part.parts("c"), nd["c"])
            w_ = c1 - c0
            c0, c1 = (c0 + nd["k"] * w_ // part.parts("k"),
                      c0 + (nd["k"] + 1) * w_ // part.parts("k"))
    else:
        c0, c1 = split(lay.k, part.parts("k"), nd["k"])
        if lay.kind != "add":
            c0, c1 = c0 - offset, c1 - offset
        c0, c1 = np.clip(c0, 0, pred_k), np.clip(c1, 0, pred_k)
    return nd, np.stack((n0, n1, c0, c1, r0, r1, s0, s1), axis=1)


def test_movement_home_boxes_equal_the_plain_computation():
    """:func:`~movement.home_boxes`, each range found once per part index
    (:func:`~movement._home_ranges`, by the layer's shape), gives the boxes computed
    node by node with numpy: the same values, dtype and shape, and the corners
    :func:`~movement._amounts` broadcasts; random LMs in every spatial order on random
    regions of the five networks' layers (grouped attention products, concatenations
    at offsets, additions, poolings among them) and of grouped convolutions."""
    rng = random.Random(SEED + 29)
    log.info("seed %d", SEED + 29)
    layers = [(lay, net.by_name[p].k) for name in nets.network_names()
              for net in [scale_network(nets.network(name), 4)]
              for lay in net.layers if lay.kind != "input" for p in lay.preds]
    layers += [(nets.Layer(f"g{g}", "conv", n=2, c=g * 6, h=9, w=7, k=g * 10, p=5, q=4, r=3,
                           s=2, stride=2, pad=1, groups=g), g * 6) for g in (2, 3, 5)]
    cases = 0
    for lay, pred_k in rng.sample(layers, 150) + layers[-3:]:
        for _ in range(4):
            region = _random_region(rng, (rng.randint(1, 6), rng.randint(1, 6)))
            parts = mapspace.layer_partitions(lay, region[2], region[3])
            part = rng.choice(mapspace.orders(rng.choice(parts)))
            pl = movement.Placement(lay, part, region)
            offset = rng.choice((0, 0, 3, 64, pred_k))
            pred = nets.Layer("pred", "conv", 1, 1, 1, 1, pred_k, 1, 1)
            nd, boxes = movement.home_boxes(pl, pred, offset)
            want_nd, want = _home_boxes_plain(pl, pred_k, offset)
            assert (boxes.dtype, boxes.shape, boxes.tolist()) == \
                (want.dtype, want.shape, want.tolist()), (lay.name, part, region, offset)
            assert all(nd[d].tolist() == want_nd[d].tolist() for d in want_nd)
            _, _, lo, hi = movement._home_boxes(pl, pred_k, offset)
            assert lo.flags.c_contiguous and hi.flags.c_contiguous
            assert lo.tolist() == [want[:, 0::2].tolist()]
            assert hi.tolist() == [want[:, 1::2].tolist()]
            cases += 1
    assert cases >= 600


def test_movement_columns_equal_numpys_stack():
    """:func:`~movement._columns` (the boxes' columns) gives numpy's ``stack(..., axis=1)``:
    the same values, dtype, shape and bytes (C order), for ints and floats."""
    import numpy as np

    rng = random.Random(SEED + 31)
    log.info("seed %d", SEED + 31)
    for _ in range(200):
        n, dtype = rng.randint(1, 20), rng.choice([np.int64, np.float64])
        cols = [np.array([rng.randint(-60, 60) for _ in range(n)], dtype=dtype)
                for _ in range(8)]
        want, got = np.stack(cols, axis=1), movement._columns(*cols)
        assert (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape, want.tobytes())


def test_memoized_parse_partition_equals_a_fresh_parse():
    """:func:`~mapspace.parse_partition` (memoized) gives partitions equal to a fresh
    parse of the same text, with the same hash, sizes and text, for every LM of a few
    layers (the memo shares immutable objects only)."""
    lay = nets.network("resnet152").layers[5]
    for h, w in ((4, 4), (2, 4), (1, 1)):
        for part in mapspace.layer_partitions(lay, h, w):
            for alt in mapspace.orders(part):
                text = str(alt)
                got = mapspace.parse_partition(text)
                fresh = mapspace.parse_partition.__wrapped__(text)
                assert got is mapspace.parse_partition(text)
                assert (got == fresh and hash(got) == hash(fresh) and got.sizes == fresh.sizes
                        and str(got) == str(fresh) == text), text


@pytest.mark.parametrize("enabled", [True, False])
def test_mapping_with_the_collector_paused_equals_one_with_it_running(monkeypatch, enabled):
    """:func:`~mapper.map_network` pauses the cyclic garbage collector while it maps: the
    same mapping as with the collector running, no collection meanwhile, and the
    collector left as it was found (running or not), also when the mapping raises."""
    import gc

    cfg = load_config("nicepim_small")
    net = scale_network(nets.network("googlenet"), 8, layers=30)
    was = gc.isenabled()
    seen = []
    inside = [False]
    plain = mapper._map_network

    def mapping(*args):
        inside[0] = True
        try:
            return plain(*args)
        finally:
            inside[0] = False

    def cb(phase, info):
        if inside[0]:
            seen.append(phase)

    monkeypatch.setattr(mapper, "_map_network", mapping)
    try:
        gc.enable()
        gc.callbacks.append(cb)
        slow = mapping(net, cfg, 3, 128, 4, mapcost.NodeModel(cfg))
        assert seen                         # (it collects while mapping, unpaused)
        if not enabled:
            gc.disable()
        seen.clear()
        fast = mapper.map_network(net, cfg)
        assert not seen                     # none while it mapped
        gc.callbacks.remove(cb)
        assert fast.to_json() == slow.to_json()
        assert gc.isenabled() == enabled

        def fails(*args):
            raise CapacityError("does not fit")

        monkeypatch.setattr(mapper, "_initial_mapping", fails)
        with pytest.raises(CapacityError):
            mapper.map_network(net, cfg)
        assert gc.isenabled() == enabled
    finally:
        if cb in gc.callbacks:
            gc.callbacks.remove(cb)
        (gc.enable if was else gc.disable)()


def test_mapping_leaves_no_cyclic_garbage():
    """:func:`~mapper.map_network` drops the memos of the model it made
    (:meth:`~mapcost.NodeModel.forget`): they refer back to the model, and would
    otherwise wait for the cyclic collector; the mapping is the same, and a model the
    caller gives keeps its memos (a later mapping reuses them)."""
    import gc

    cfg = load_config("nicepim_small")
    net = scale_network(nets.network("googlenet"), 8, layers=30)
    was = gc.isenabled()
    try:
        gc.disable()
        gc.collect()
        got = mapper.map_network(net, cfg)
        left = gc.collect()                 # (a few recursive closures of the selection)
        model = mapcost.NodeModel(cfg)
        kept = mapper.map_network(net, cfg, model=model)
        assert model.memo and model._ranked and model._layer
        assert kept.to_json() == got.to_json()
        del model
        held = gc.collect()
        assert left < 100 < 20 * left < held, (left, held)
    finally:
        (gc.enable if was else gc.disable)()


def _first_baseline(net, cfg):
    """Algorithm 1's initial mapping as :func:`mapper.map_network` took it before it
    skipped layouts: both LM goals' baselines over every layout, the first of least
    latency (or the error the first failing one raises)."""
    return min((mapper.baseline_map(net, cfg, lm_goal=g, model=mapcost.NodeModel(cfg))
                for g in ("full", "node")), key=lambda b: b.latency_cycles)


@pytest.mark.parametrize("name, scale, preset", [("vgg16", 4, "nicepim_4x4"),
                                                 ("darknet53", 8, "nicepim_small"),
                                                 ("resnet152", 8, "nicepim_4x4"),
                                                 ("bert_base", 8, "nicepim_4x4")])
def test_initial_mapping_skips_no_layout_that_could_win(name, scale, preset):
    """The initial mapping, which maps only the (goal, layout) pairs whose latency floor
    leaves them a chance, is the baseline of least latency that mapping every pair
    gives (the first in the pairs' order on a tie), and each layout's floor is at most
    either goal's latency with it."""
    cfg = load_config(preset)
    n = cfg.nicepim
    net = scale_network(nets.network(name), scale, layers=40)
    want = _first_baseline(net, cfg)
    model = mapcost.NodeModel(cfg)
    assert mapper._initial_mapping(net, cfg, model).to_json() == want.to_json()
    for lo in mapspace.LAYOUTS:
        floor = mapper._baseline_floor(net, model, lo, n.na_rows, n.na_cols)
        partial = mapper._Floor(net, model, lo, n.na_rows, n.na_cols)
        while not partial.done:         # summed a layer at a time, it grows to the floor
            before = partial.value
            partial.extend()
            assert before <= partial.value <= floor + 1e-6
        assert math.isclose(partial.value, floor)
        for goal in ("full", "node"):
            got = mapper.baseline_map(net, cfg, lo, lm_goal=goal, model=model)
            assert floor <= got.latency_cycles, (lo, goal)


@pytest.mark.parametrize("bank_bytes", [2048, 4096, 8192])
def test_initial_mapping_where_the_weights_barely_fit(bank_bytes):
    """Where the weights might not fit a node's DRAM unreplicated, every pair is mapped:
    the initial mapping is the same as mapping every pair gives, or fails alike."""
    cfg = load_config("nicepim_small")
    cfg = replace(cfg, nicepim=replace(cfg.nicepim, bank_bytes=bank_bytes))
    n = cfg.nicepim
    net = scale_network(nets.network("googlenet"), 8, layers=40)
    model = mapcost.NodeModel(cfg)
    fits = mapper._weights_fit_unreplicated(net, model, n.na_rows, n.na_cols, n.node_bytes)
    try:
        want = _first_baseline(net, cfg).to_json()
    except CapacityError as e:
        assert not fits
        with pytest.raises(CapacityError, match=str(e)):
            mapper._initial_mapping(net, cfg, model)
        return
    assert mapper._initial_mapping(net, cfg, model).to_json() == want


def _port_cycles_plain(t, sent_rows: list[int], got_rows: list[int] | None, *,
                path: int, queue_depth: int, inflight: int, period: int,
                req_lat: int = share_port.REQ_LATENCY, resp_lat: int = share_port.RESP_LATENCY,
                arrivals: list[int] | None = None, pops: list[int] | None = None) -> int:
    """:func:`~share_port.port_cycles` as it was first written (the scan for a hit
    every cycle, ``max`` for every timing), the reference of the faster loop."""
    n = len(sent_rows)
    got = got_rows is not None
    n_got = len(got_rows) if got else 0
    rd_lat = t.rd_latency
    col_gap, wtr, rtw = t.col_gap, t.wr_to_rd, t.rd_to_wr
    wr_rec = t.tCWL + t.tBL + t.tWR
    tRTP, tRCD, tRAS, tRC, tRP = t.tRTP, t.tRCD, t.tRAS, t.tRC, t.tRP
    queue: list[tuple[int, int, int]] = []  # (we, row, visible from), oldest first
    open_row = -1
    # the cycles from which an ACT, PRE, column command (tRCD), any column command
    # (tCCD), a RD (after a WR) and a WR (after a RD) may issue
    ok_act = ok_pre = ok_col = ok_ccd = ok_rd = ok_wr = 0
    iss = pop = 0               # reads issued, messages sent
    ready_at: list[int] = []    # when each word read can be sent
    arrive: list[int] = list(arrivals or [])    # when each received word's write is requested
    wr_next = 0                 # next received word to request
    wr_done = 0
    send_free = 0               # the cycle the interface takes the next message
    last_tail = last_wr = arrive_last = 0
    rr = 0
    took = -period              # when the last received word's write was requested
    c = 0
    while pop < n or wr_done < n_got:
        # ---- the scheduler: the oldest legal hit, else the oldest request's ACT/PRE
        col = None
        any_hit = False
        if open_row >= 0:
            col_ok = c >= ok_col and c >= ok_ccd
            for i, (we, row, vis) in enumerate(queue):
                if row == open_row and vis <= c:
                    any_hit = True
                    if col_ok and c >= (ok_wr if we else ok_rd):
                        col = i
                        break
        if col is not None:
            we = queue.pop(col)[0]
            ok_ccd = c + col_gap
            if we:
                ok_rd = c + wtr
                ok_pre = max(ok_pre, c + wr_rec)
                wr_done += 1
                last_wr = c
            else:
                ok_wr = c + rtw
                ok_pre = max(ok_pre, c + tRTP)
                ready_at.append(c + rd_lat + resp_lat)
        elif queue and queue[0][2] <= c:
            row = queue[0][1]
            if open_row < 0:
                if c >= ok_act:
                    open_row = row
                    ok_col = c + tRCD
                    ok_pre = max(ok_pre, c + tRAS)
                    ok_act = c + tRC
            elif row != open_row and not any_hit and c >= ok_pre:
                open_row = -1
                ok_act = max(ok_act, c + tRP)
        # ---- requests into the queue: reads and received writes, round robin
        if len(queue) < queue_depth:
            want_rd = iss < n and iss - pop < inflight
            want_wr = (wr_next < len(arrive) and arrive[wr_next] <= c
                       and c >= took + period) if got else False
            if want_rd and (not want_wr or rr == 0):
                queue.append((0, sent_rows[iss], c + req_lat))
                iss += 1
                rr = 1
            elif want_wr:
                queue.append((1, got_rows[wr_next], c + req_lat))
                wr_next += 1
                took = c
                rr = 0
        # ---- the network interface: one message at a time, in order
        if pop < len(ready_at) and ready_at[pop] <= c and send_free <= c:
            send_free = c + period
            last_tail = c + share_port.MESSAGE_FLITS - 1
            if arrivals is None:
                arrive.append(c + path)
                arrive_last = c + path
            if pops is not None:
                pops.append(c)
            pop += 1
        c += 1
    return max(last_tail, last_wr, arrive_last + req_lat + 1)


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_port_cycles_equal_the_plain_loops(preset):
    """The sharing step's DRAM port played by :func:`~share_port.port_cycles` takes as
    many cycles, and sends its messages in the same cycles, as the plain loop, for
    random steps: sends alone, sends and receives (in rows near and far), gathers
    from given arrivals, queues of 1 to 8, reads in flight, paces and paths."""
    n = load_config(preset).nicepim
    t = resolve_timing(n.timing, n.tck_ns)
    rng = random.Random(SEED)
    log.info("seed %d", SEED)
    for _ in range(300):
        rw = rng.choice([4, 16, 64, n.row_words])
        words, sent_at = rng.randint(0, 200), rng.randint(0, 300)
        kw = {"path": rng.randint(3, 30), "queue_depth": rng.choice([1, 2, 4, 8]),
              "inflight": rng.choice([1, 4, 8]), "period": rng.randint(1, 8)}
        sent = [(sent_at + i) // rw for i in range(words)]
        got, arrivals = None, None
        mode = rng.randrange(3)
        if mode == 1:
            got_at = rng.randint(0, 300)
            got = [(got_at + i) // rw for i in range(words)]
        elif mode == 2:
            m = rng.randint(1, 100)
            got = [rng.randint(0, 5) for _ in range(m)]
            arrivals = sorted(rng.randint(0, 400) for _ in range(m))
            sent = sent if rng.random() < 0.5 else []
        pops, want_pops = [], []
        got_cycles = share_port.port_cycles(t, sent, got, arrivals=arrivals, pops=pops, **kw)
        want = _port_cycles_plain(t, sent, got, arrivals=arrivals, pops=want_pops, **kw)
        assert (got_cycles, pops) == (want, want_pops), (rw, words, sent_at, kw, mode)


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_port_cycles_taking_repeats_at_once_equal_the_plain_loop(monkeypatch, preset):
    """Where a step's state after a row activation repeats, :func:`~share_port.port_cycles`
    takes the repeats up to the next row or the last words at once: the same cycles as
    the plain loop, for random long steps (sends alone, sends and receives in the same
    rows, rows apart and rows that change at other words, rows in runs of random
    lengths), queues, reads in flight, paces, paths, request and response
    latencies; and it does take repeats."""
    n = load_config(preset).nicepim
    t = resolve_timing(n.timing, n.tck_ns)
    rng = random.Random(SEED + 41)
    log.info("seed %d", SEED + 41)
    plain, matched = share_port._same_state, []
    monkeypatch.setattr(share_port, "_same_state",
                        lambda *a: matched.append(plain(*a)) or matched[-1])
    for _ in range(400):
        rw = rng.choice([4, 16, 64, n.row_words])
        words, sent_at = rng.randint(0, 600), rng.randint(0, 300)
        kw = {"path": rng.randint(3, 30), "queue_depth": rng.choice([1, 2, 4, 8]),
              "inflight": rng.choice([1, 4, 8]), "period": rng.randint(1, 8),
              "req_lat": rng.choice([1, 1, 3, 9]), "resp_lat": rng.choice([2, 2, 5, 13])}
        if rng.random() < 0.2:              # rows in runs of random lengths
            sent, got = [], []
            while len(sent) < words:            # (rows one after the other)
                sent += [len(set(sent))] * rng.randint(1, 80)
            while len(got) < words:
                got += [len(set(got)) + 1] * rng.randint(1, 80)
            sent, got = sent[:words], got[:words]
        else:
            sent = [(sent_at + i) // rw for i in range(words)]
            got_at = rng.choice([sent_at, max(0, sent_at + rng.randint(-rw, rw)),
                                 rng.randint(0, 900)])     # (rows from 0: -1 is none)
            got = [(got_at + i) // rw for i in range(words)]
        if rng.random() < 0.25:
            got = None
        got_cycles = share_port.port_cycles(t, sent, got, **kw)
        want = _port_cycles_plain(t, sent, got, **kw)
        assert got_cycles == want, (rw, words, sent_at, kw, got is None)
    assert sum(matched) > 500


def test_candidates_find_the_predecessors_lms_as_a_scan_does():
    """:func:`~selection._places`, which finds the LMs of a layer's predecessors on its
    region among the layer's LMs by places kept in the mapper's memo, gives what a scan
    of every LM gives: those among them, in their order; LMs in another spatial order or
    of another layer's shape are not among them."""
    rng = random.Random(SEED + 37)
    log.info("seed %d", SEED + 37)
    net = scale_network(nets.network("googlenet"), 4)
    cache: dict = {}
    found = 0
    for lay in rng.sample([x for x in net.layers if x.kind != "input"], 20):
        other = rng.choice(net.layers[1:])
        for h, w in ((4, 4), (2, 3), (1, 1)):
            parts = mapspace.layer_partitions(lay, h, w)
            pool = [*parts, *(alt for p in rng.sample(parts, min(5, len(parts)))
                              for alt in mapspace.orders(p)[1:]),
                    *mapspace.layer_partitions(other, h, w)]
            for _ in range(5):
                lms = set(rng.sample(pool, rng.randint(0, min(6, len(pool)))))
                want = [(i, p) for i, p in enumerate(parts) if p in lms]
                got = selection._places(cache, mapspace.layer_shape(lay), h, w, parts, lms)
                assert got == want, (lay.name, h, w)
                found += len(want)
    assert found > 50


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4"])
def test_one_sharing_entry_serves_the_bound_and_every_layout_pair(preset):
    """An LM's data sharing, memoized by the layer's shape, the LM and its weights'
    sharing set (:meth:`~mapcost.NodeModel._shared`) and shared by its bound and its
    cost in every pair of layouts, is what :meth:`~mapcost.NodeModel._sharing` gives
    for that WR: its cycles, weight bytes, and the bound's cycles over the node bound;
    random LMs of convolutions, fully connected layers and attention products, each at
    several WRs and layouts, bound and cost asked in either order."""
    cfg = load_config(preset)
    n = cfg.nicepim
    rng = random.Random(SEED * 41 + n.na_rows)
    log.info("seed %d", SEED)
    model, plain = mapcost.NodeModel(cfg), mapcost.NodeModel(cfg)
    lays = [lay for name in ("googlenet", "bert_base")
            for lay in scale_network(nets.network(name), 4).layers
            if lay.kind in ("conv", "fc", "matmul")]
    wrs = sorted({1, 2, 4, n.na_rows * n.na_cols})
    checked = 0
    for lay in rng.sample(lays, 30):
        parts = mapspace.layer_partitions(lay, n.na_rows, n.na_cols)
        for part in rng.sample(parts, min(4, len(parts))):
            nb, c, k, p, q, g = plain._node_dims(lay, part.sizes)
            node_bytes = plain._node_bytes(lay, nb, c, k, p, q, g)
            for wr in rng.sample(wrs, len(wrs)):
                share, _, w_stored = plain._sharing(lay, part, wr, nb, *node_bytes)
                li, lo = rng.choice(mapspace.LAYOUTS), rng.choice(mapspace.LAYOUTS)
                first_bound = rng.random() < 0.5
                try:
                    if first_bound:
                        bound = model.cycles_bound(lay, part, wr, li, lo)
                    cost = model.layer_cost(lay, part, wr, li, lo)
                    if not first_bound:
                        bound = model.cycles_bound(lay, part, wr, li, lo)
                except CapacityError:
                    continue
                node = model.cycles_bound(lay, part, wr, li, lo, share=False)
                assert (cost.share, cost.weight_bytes) == (share, w_stored), (lay.name, part, wr)
                assert bound == float(node + share), (lay.name, part, wr)
                checked += 1
    assert checked > 200


def _layer_floor_plain(lay, model, lo, h, w):
    """:func:`~mapper._layer_floor` as first written: every LM's bound."""
    least = math.inf
    for part in mapspace.layer_partitions(lay, h, w):
        try:
            least = min(least, model.cycles_bound(lay, part, h * w, lo, lo, share=False))
        except CapacityError:
            return 0.0
    return max(0.0, least - 1) if least != math.inf else 0.0


@pytest.mark.parametrize("preset", ["nicepim_small", "nicepim_4x4", "nicepim_16x16"])
def test_layer_floor_bounding_lms_by_engine_first_equals_every_lms_bound(preset):
    """A layer's floor, its LMs bounded in the order of their engine cycles and only
    until those reach the least bound (:func:`~mapper._layer_floor`), equals the least
    bound of every LM: random layers of the five networks, at full size (whose LMs the
    buffers may not hold: the floor is then 0) and scaled, in every layout, on the
    whole array and a smaller region, with the node's model and with a what-if model."""
    cfg = load_config(preset)
    n = cfg.nicepim
    rng = random.Random(SEED * 43 + n.na_rows)
    log.info("seed %d", SEED)
    lays = [lay for name in nets.network_names()
            for net in (nets.network(name), scale_network(nets.network(name), 4))
            for lay in net.layers[1:]]
    zeros = checked = 0
    for model in (mapcost.NodeModel(cfg), mapcost.WhatIfNodeModel(cfg)):
        for lay in rng.sample(lays, 25):
            for h, w in ((n.na_rows, n.na_cols), (1, max(1, n.na_cols // 2))):
                for lo in mapspace.LAYOUTS:
                    want = _layer_floor_plain(lay, mapcost.NodeModel(cfg) if model.dma_bound
                                              else mapcost.WhatIfNodeModel(cfg), lo, h, w)
                    got = mapper._layer_floor(lay, model, lo, h, w)
                    assert got == want, (lay.name, h, w, lo)
                    zeros += want == 0
                    checked += 1
    assert zeros < checked


def test_most_weights_by_shape_equal_every_lms_count():
    """The most weight bytes a node keeps of a layer unreplicated, counted once per
    distinct LM sizes and memoized by the layer's shape (:func:`~mapper._most_weights`),
    are what counting every LM of the layer gives: the layers with weights of the five
    networks (repeated blocks among them, asked in turn through one model), on regions
    of several sizes, on two configs."""
    for preset in ("nicepim_small", "nicepim_4x4"):
        cfg = load_config(preset)
        n = cfg.nicepim
        model = mapcost.NodeModel(cfg)
        for name in nets.network_names():
            for lay in scale_network(nets.network(name), 4).layers[1:]:
                if lay.kind not in ("conv", "fc", "matmul") or lay.dynamic_weights:
                    continue
                for h, w in ((n.na_rows, n.na_cols), (1, n.na_cols), (2, 1)):
                    want = 0
                    for part in mapspace.layer_partitions(lay, h, w):
                        pb, _, pp, pq, _ = part.sizes
                        _, w_bytes, _ = model._node_bytes(lay, *model._node_dims(lay,
                                                                                 part.sizes))
                        want = max(want, math.ceil(w_bytes / (pb * pp * pq)) if lay.weights
                                   else w_bytes)
                    assert mapper._most_weights(lay, model, h, w) == want, (name, lay.name)


def test_partial_visits_memoized_by_offset_modulo_the_unit_equal_the_walk():
    """A store's partly covered words (:func:`~node_model._partial_visits`), memoized by
    the walk's offset modulo the unit, are what walking the runs at the offset itself
    counts: random walks (runs shorter and longer than a unit, strides that skip units
    or not, one to three levels) at offsets far apart."""
    rng = random.Random(SEED + 47)
    log.info("seed %d", SEED + 47)
    walk = node_model._partial_visits_at.__wrapped__
    partial = 0
    for _ in range(3000):
        U = rng.choice((4, 8, 16, 64))
        L = rng.randint(1, 2 * U)
        levels = tuple((rng.randint(1, 5), rng.randint(L, L + 3 * U))
                       for _ in range(rng.randint(1, 3)))
        off = rng.randrange(0, 50 * U)
        want = walk(L, levels, off, U)
        assert node_model._partial_visits(L, levels, off, U) == want, (L, levels, off, U)
        partial += want > 0
    assert partial > 1000


def test_apart_partial_visits_in_closed_form_equal_the_walk():
    """A store's partly covered words for walks whose consecutive runs share no unit
    (:func:`~node_model._apart`), summed in closed form
    (:func:`~node_model._apart_partial_visits`, the long walks a store's NHWC output
    makes), are what walking the runs counts: random walks of runs shorter, as long as
    and longer than a unit, one to three levels of up to 40, at random offsets."""
    rng = random.Random(SEED + 53)
    log.info("seed %d", SEED + 53)
    walk = node_model._partial_visits_at.__wrapped__
    cases, kinds = 0, set()
    while cases < 2000:
        U = rng.choice((4, 8, 16, 64))
        L = rng.choice((rng.randint(1, 2 * U), U, 2 * U))
        levels = tuple((rng.randint(1, 40), rng.randint(L, L + 3 * U))
                       for _ in range(rng.randint(1, 3)))
        off = rng.randrange(0, 50 * U)
        if not node_model._apart(L, levels, U):
            continue
        got = node_model._apart_partial_visits(L, levels, off, U)
        if got is None:             # (too many starts off the longest level)
            continue
        want = walk(L, levels, off % U, U)
        assert got == want, (L, levels, off, U)
        cases += 1
        runs = math.prod(c for c, _ in levels)
        kinds.add((L < U, min(want, 3 * runs) // runs if runs else 0))
    assert len(kinds) >= 4, kinds       # (no, one or two partial visits a run, or mixed)
