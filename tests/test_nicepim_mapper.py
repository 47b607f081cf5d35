"""PIM-Mapper: Algorithm 2 against enumeration, the engine model against the node's
lowering, and the mapper against the baseline on real networks.

Random cases draw from ``random.Random(seed)`` with ``seed`` from ``PIMFORGE_SEED``
(default 1), logged.
"""

import itertools
import logging
import math
import os
import random

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.engine import tile_cycles
from pimforge.rtl.nicepim.params import Layout
from pimforge.rtl.nicepim.share import MESSAGE_FLITS
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP
from pimforge.sim.nicepim import ddam, mapper, mapspace, movement
from pimforge.sim.nicepim import networks as nets
from pimforge.sim.nicepim.dnn_run import scale_network
from pimforge.sim.nicepim.rtl_run import conv_tasks

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "1"))


def _brute(tree, cap):
    best = math.inf
    for sms in itertools.product(*[range(len(seg)) for seg in tree]):
        layer_lists = [[cands for region in seg[s] for cands in region]
                       for seg, s in zip(tree, sms, strict=True)]
        flat = [c for lists in layer_lists for c in lists]
        for pick in itertools.product(*[range(len(c)) for c in flat]):
            it = iter(pick)
            lat = size = 0
            for seg, s in zip(tree, sms, strict=True):
                regs = [[cands[next(it)] for cands in region] for region in seg[s]]
                lat += max(sum(c.perf for c in r) for r in regs)
                size += max(sum(c.size for c in r) for r in regs)
            if size <= cap:
                best = min(best, lat)
    return best


@pytest.mark.parametrize("case", range(6))
def test_algorithm2_equals_enumeration(case):
    rng = random.Random(SEED * 100 + case)
    log.info("seed %d case %d", SEED, case)
    tree = []
    for _ in range(rng.randint(1, 3)):
        seg = []
        for _ in range(rng.randint(1, 2)):
            seg.append([[[mapper.Candidate(rng.randint(1, 50), rng.randint(0, 6))
                          for _ in range(rng.randint(1, 3))]
                         for _ in range(rng.randint(1, 2))]
                        for _ in range(rng.randint(1, 2))])
        tree.append(seg)
    cap = rng.randint(4, 16)
    want = _brute(tree, cap)
    if want == math.inf:
        with pytest.raises(CapacityError):
            mapper.mapping_select(tree, cap, steps=cap)
        return
    lat, sms, picks = mapper.mapping_select(tree, cap, steps=cap)
    assert lat == want
    # the traceback's choice has that latency and fits
    tot = size = 0
    for seg, s, regs in zip(tree, sms, picks, strict=True):
        tot += max(sum(cands[i].perf for cands, i in zip(region, idx, strict=True))
                   for region, idx in zip(seg[s], regs, strict=True))
        size += max(sum(cands[i].size for cands, i in zip(region, idx, strict=True))
                    for region, idx in zip(seg[s], regs, strict=True))
    assert tot == lat and size <= cap


def test_algorithm2_grid_fits_many_small_layers():
    """A network of many layers with little weight each (ResNet152 has 155): rounding
    each up to the default grid of ``cap / 128`` would claim 200 units of 128; the
    grid takes at least 4 steps a layer, so half the capacity fits."""
    cap = 64 << 20
    region = [[mapper.Candidate(10.0, cap // 400), mapper.Candidate(5.0, cap // 100)]
              for _ in range(200)]
    lat, _, picks = mapper.mapping_select([[[region]]], cap, steps=128)   # map_network's
    assert lat <= 200 * 10.0
    used = sum(region[i][j].size for i, j in enumerate(picks[0][0]))
    assert used <= cap


@pytest.mark.parametrize("shape", [(64, 64, 14, 14, 3, 1, 1), (48, 96, 9, 9, 1, 1, 1),
                                   (32, 32, 10, 7, 3, 2, 1), (64, 64, 7, 7, 3, 1, 8)])
def test_engine_cycles_follow_the_nodes_lowering(shape, preset):
    """The model's engine cycles are the tiles :func:`conv_tasks` lowers the same
    convolution to, each at the engine's tile formula."""
    c, k, h, w, r, stride, groups = shape
    cfg = preset("nicepim_4x4")
    pad = r // 2
    plan = conv_tasks(cfg, x_dims=(c, h, w), w_dims=(k, c // groups, r, r), stride=stride,
                      pad=pad, groups=groups, x_layout=Layout.NCHW, x_base=0, w_base=0,
                      o_base=0)
    n = cfg.nicepim
    want = sum(tile_cycles(pe_rows=n.pe_rows, pe_cols=n.pe_cols, **t) for t in plan.tiles)
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - r) // stride + 1
    got, _, _ = mapper.NodeModel(cfg).compute_cycles(c, k, p, q, r, r, stride, groups)
    assert got == want


def test_partitions_cover_the_region():
    lay = nets.network("vgg16").by_name["conv5_1"]
    parts = mapper.partitions(lay, 4, 4)
    assert parts and all(math.prod(p.ph) == 4 and math.prod(p.pw) == 4 for p in parts)
    assert len({(p.ph, p.pw) for p in parts}) == len(parts)
    fc = nets.network("vgg16").by_name["fc8"]          # 1x1 output: only K and C split
    assert all(p.parts("p") == p.parts("q") == 1 for p in mapper.partitions(fc, 4, 4))


@pytest.mark.parametrize("case", range(6))
def test_partition_text_and_node_layout_follow_p_order(case):
    """A partition's text gives it back, spatial order included; every node of the
    region gets a distinct part of each split loop; and the members of a one-loop
    sharing set that follow each other are :func:`mapspace.spacing` apart along the
    axis where that loop is split, whatever the order."""
    rng = random.Random(SEED * 31 + case)
    log.info("seed %d case %d", SEED, case)
    lay = _layer("a", "conv", 64, 64, 16, 16, r=3, pad=1, n=4)
    h, w = rng.choice([(2, 4), (4, 4), (4, 2), (8, 2), (3, 4)])
    checked = 0
    for base in rng.sample(mapper.partitions(lay, h, w), 6):
        for part in mapper.orders(base):
            assert mapper.parse_partition(str(part)) == part
            nd = mapper.node_index(part, h, w)
            keys = set(zip(*(nd[d].tolist() for d in "bkpqc"), strict=True))
            assert len(keys) == h * w
            for d in part.split():
                i = "bkpqc".index(d)
                for ax, along, across in (("y", part.ph, part.pw), ("x", part.pw, part.ph)):
                    if along[i] == 1 or across[i] > 1:      # split on this axis only
                        continue
                    # nodes equal in every other loop, ordered by their index in d
                    rest = [e for e in "bkpqc" if e != d]
                    groups = {}
                    for j in range(h * w):
                        groups.setdefault(tuple(int(nd[e][j]) for e in rest), []).append(j)
                    for js in groups.values():
                        js.sort(key=lambda j: nd[d][j])
                        gaps = {int(abs(nd[ax][a] - nd[ax][b])) for a, b in zip(js, js[1:])}
                        assert gaps == {mapspace.spacing(part, d)}, (str(part), d, gaps)
                        checked += len(js) > 1
    assert checked
    assert str(mapper.parse_partition("Q1x2 K2x1")) == "Q1x2 K2x1"
    assert mapper.parse_partition("K2x1 Q1x2") != mapper.parse_partition("Q1x2 K2x1")
    for bad in ("K2", "Z2x1", "K2x1 K1x2", "Kax1"):
        with pytest.raises(ValueError, match="each part must be a loop"):
            mapper.parse_partition(bad)


def test_batch_split_runs_each_sample_part_once(preset):
    """A node runs its samples' parts one after the other: a layer on 4 samples costs a
    node 4 times the compute and DRAM cycles of one; split over the 4 samples (B2x2),
    each node computes one, and keeps a quarter of the weights (WR 1), sharing the rest
    with the other three; unsplit, the batch changes no sharing set."""
    cfg = preset("nicepim_16x16")
    model = mapper.NodeModel(cfg)
    one = _layer("a", "conv", 32, 32, 12, 12, r=3, pad=1)
    four = _layer("a", "conv", 32, 32, 12, 12, r=3, pad=1, n=4)
    whole = _part()
    c1, c4 = model.layer_cost(one, whole, 1), model.layer_cost(four, whole, 1)
    assert (c4.compute, c4.dram) == (4 * c1.compute, 4 * c1.dram)
    assert c4.share == c1.share == 0
    b = model.layer_cost(four, _part(b=(2, 2)), 1)
    assert (b.compute, b.dram) == (c1.compute, c1.dram)
    assert b.weight_bytes == math.ceil(c1.weight_bytes / 4) and b.share > 0
    assert model.layer_cost(four, _part(b=(2, 2)), 4).share == 0     # full replication
    assert any(pt.parts("b") > 1 for pt in mapper.partitions(four, 2, 2))
    assert not any(pt.parts("b") > 1 for pt in mapper.partitions(one, 2, 2))
    with pytest.raises(nets.NetworkError, match="batch must be"):
        nets.network("vgg16").batched(0)


def test_mapper_at_batch_4_no_slower_than_four_single_runs(preset):
    cfg = preset("nicepim_4x4")
    net = scale_network(nets.network("googlenet"), 4, layers=24)
    m1 = mapper.map_network(net, cfg)
    m4 = mapper.map_network(net.batched(4), cfg)
    log.info("batch 1: %.4g cycles, batch 4: %.4g", m1.latency_cycles, m4.latency_cycles)
    assert m4.latency_cycles <= 4 * m1.latency_cycles
    assert all(lay.n == 4 for lay in net.batched(4).layers)


def test_pieces_put_inception_branches_side_by_side():
    g = nets.network("googlenet")
    ps = mapper.pieces(g)
    inc = next(p for p in ps if any(lay.name == "inc3a_1x1" for b in p for lay in b))
    assert len(inc) == 4                     # the four branches; the concat comes next
    nxt = ps[ps.index(inc) + 1]
    assert [lay.name for lay in nxt[0]] == ["inc3a_concat"]
    flat = [lay.name for p in ps for b in p for lay in b]
    assert sorted(flat) == sorted(lay.name for lay in g.layers)


@pytest.mark.parametrize("name", ["googlenet", "vgg16"])
def test_mapper_no_worse_than_the_baseline(name, preset):
    cfg = preset("nicepim_4x4")
    net = nets.network(name)
    base = mapper.baseline_map(net, cfg)
    m = mapper.map_network(net, cfg)
    log.info("%s: baseline %.4g cycles %.4g pJ, mapper %.4g cycles %.4g pJ", name,
             base.latency_cycles, base.energy_pj, m.latency_cycles, m.energy_pj)
    assert m.latency_cycles <= base.latency_cycles
    assert m.weight_bytes_per_node <= cfg.nicepim.node_bytes
    # every layer but the input (already in DRAM; the baseline, which the mapper returns
    # when nothing it visits is faster, does not list it)
    assert {lay.name for lay in net.layers[1:]} <= set(m.layers)


def test_what_does_not_fit_is_a_capacity_error():
    # VGG16's 16-bit weights need 17.3 MB per node unreplicated on 4x4 nodes
    cfg = load_config("nicepim_4x4", {"nicepim.bank_bytes": 1 << 20})
    for run in (mapper.baseline_map, mapper.map_network):
        with pytest.raises(CapacityError, match="do not fit"):
            run(nets.network("vgg16"), cfg)
    # 4x4 PEs with 1 KiB buffers: a 298-pixel output row exceeds the output buffer, and on
    # one node no partition shortens it (VGG16's conv1_1 now fits the whole array: its
    # columns split over the nodes, its kernel rows banded for the input buffer)
    lay = _layer("wide", "conv", 3, 4, 3, 300, r=3)
    with pytest.raises(CapacityError, match="layer wide fits no partition of a 1x1 region"):
        mapper.layer_candidates(mapper.NodeModel(load_config("default")), lay,
                                 (0, 0, 1, 1), [1], {}, {})
    mapper.baseline_map(scale_network(nets.network("vgg16"), 1, layers=2),
                        load_config("default"))


# ---- inter-layer movement, the baseline's definition, the DDAM-style pipeline ----------------

def _layer(name, kind, c, k, h, w, r=1, stride=1, pad=0, preds=(), n=1):
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - r) // stride + 1
    return nets.Layer(name, kind, n, c, h, w, k, p, q, r, r, stride, pad, preds=preds)


def _part(**dims):
    ph = tuple(dims.get(d, (1, 1))[0] for d in "bkpqc")
    pw = tuple(dims.get(d, (1, 1))[1] for d in "bkpqc")
    return mapper.Partition(ph, pw)


def test_redistribution_hand_count():
    """A 4-channel 2x2 map made split by channels over two nodes side by side, read
    split by rows: each node sends the other half of its channels of the other row,
    4 elements (8 bytes), one hop, one DRAM word each way: one message of 3 flits
    (address, two halves), sent by the data-sharing unit in one word time (the read,
    the message and the write at the other end, :meth:`NodeTiming.share_busy`)."""
    cfg = load_config("nicepim_16x16")                   # 16-byte words, 8-byte flits
    model = mapper.NodeModel(cfg)
    tm = model.timing
    prod = _layer("a", "conv", 4, 4, 2, 2)
    cons = _layer("b", "maxpool", 4, 4, 2, 2, preds=("a",))
    src = mapper.Placement(prod, _part(k=(1, 2)), (3, 5, 1, 2))
    dst = mapper.Placement(cons, _part(p=(1, 2)), (3, 5, 1, 2))
    cyc, bit_hops = mapper.redistribution(model, (16, 16), [src], dst)
    word = tm.share_busy(1, 1, 1)        # a read, a message, the received word's write
    assert cyc == math.ceil(max(MESSAGE_FLITS + HEAD_CYCLES_PER_HOP * 2 - 1, word))
    assert bit_hops == 2 * MESSAGE_FLITS * 8 * 8
    # the same split on both sides moves nothing
    same = mapper.Placement(cons, _part(k=(1, 2)), (3, 5, 1, 2))
    assert mapper.redistribution(model, (16, 16), [src], same) == (0, 0.0)
    # two columns on (no node of both): each source sends a word to each destination,
    # up to 3 hops; the link between the two pairs carries all four messages; a node
    # only sends or only receives, so no unit switches rows between its reads and writes
    far = mapper.Placement(cons, _part(p=(1, 2)), (3, 7, 1, 2))
    cyc2, bh2 = mapper.redistribution(model, (16, 16), [src], far)
    assert bh2 > bit_hops
    assert cyc2 == math.ceil(max(4 * MESSAGE_FLITS + HEAD_CYCLES_PER_HOP * 4 - 1,
                                 tm.share_busy(2, 0, 3), tm.share_busy(0, 2, 3)))


@pytest.mark.parametrize("case", range(8))
def test_every_needed_element_has_one_owner(case):
    """The producers' boxes tile the output, so the elements a consumer node takes from
    all producer nodes (local ones included) are exactly its home box."""
    rng = random.Random(SEED * 1000 + case)
    log.info("seed %d case %d", SEED, case)
    c, h = rng.choice([4, 8, 16, 24]), rng.choice([4, 6, 8, 12])
    k = rng.choice([4, 8, 16, 32])
    r = rng.choice([1, 3])
    n = rng.choice([1, 2, 3])
    prod = _layer("a", "conv", 8, c, h, h, n=n)
    cons = _layer("b", rng.choice(["conv", "maxpool"]), c, k if r else c, h, h, r=r,
                  stride=rng.choice([1, 2]), pad=r // 2, preds=("a",), n=n)
    if cons.kind == "maxpool":
        cons = _layer("b", "maxpool", c, c, h, h, r=r, stride=cons.stride, pad=r // 2,
                      preds=("a",), n=n)
    rh, rw = rng.choice([(2, 2), (1, 4), (4, 2), (2, 3)])
    src_part = rng.choice(mapper.orders(rng.choice(mapper.partitions(prod, rh, rw))))
    src = mapper.Placement(prod, src_part, (0, 0, rh, rw))
    parts = [pt for pt in mapper.partitions(cons, rh, rw)
             if cons.kind == "conv" or pt.parts("c") == 1]
    dst = mapper.Placement(cons, rng.choice(mapper.orders(rng.choice(parts))), (0, 0, rh, rw))
    log.info("batch %d: %s -> %s", n, src.part, dst.part)
    _, own = movement.owned_boxes(src)
    _, home = movement.home_boxes(dst, prod, 0)
    vol = np.prod(own[:, 1::2] - own[:, 0::2], axis=1)
    assert vol.sum() == prod.n * prod.k * prod.p * prod.q
    lo = np.maximum(own[:, None, 0::2], home[None, :, 0::2])
    hi = np.minimum(own[:, None, 1::2], home[None, :, 1::2])
    got = np.prod(np.maximum(hi - lo, 0), axis=2).sum(axis=0)
    assert (got == np.prod(home[:, 1::2] - home[:, 0::2], axis=1)).all()


@pytest.mark.parametrize("case", range(4))
def test_noc_transfer_loads_equal_a_walk_of_the_xy_routes(case, preset):
    rng = random.Random(SEED * 7 + case)
    log.info("seed %d case %d", SEED, case)
    H, W = rng.randint(2, 5), rng.randint(2, 5)
    cfg = preset("nicepim_16x16")
    model = mapper.NodeModel(cfg)
    rows = []
    for _ in range(rng.randint(1, 12)):
        a = (rng.randrange(H), rng.randrange(W))
        b = (rng.randrange(H), rng.randrange(W))
        if a != b:
            rows.append((*a, *b, rng.randint(1, 200)))
    rows.append((0, 0, H - 1, W - 1, 40))

    def flits(nbytes):                       # one message of 3 flits a DRAM word
        return math.ceil(nbytes / model.word_bytes) * MESSAGE_FLITS

    links: dict = {}
    ports: dict = {}
    sent: dict = {}
    got: dict = {}
    hops = 0
    for ys, xs, yd, xd, nb in rows:
        f = flits(nb)
        sent[ys, xs] = sent.get((ys, xs), 0) + f // MESSAGE_FLITS
        got[yd, xd] = got.get((yd, xd), 0) + f // MESSAGE_FLITS
        ports[("in", ys, xs)] = ports.get(("in", ys, xs), 0) + f
        ports[("out", yd, xd)] = ports.get(("out", yd, xd), 0) + f
        y, x = ys, xs
        while x != xd:                       # X first, then Y
            nx = x + (1 if xd > x else -1)
            links[(y, x, y, nx)] = links.get((y, x, y, nx), 0) + f
            x = nx
        while y != yd:
            ny = y + (1 if yd > y else -1)
            links[(y, x, ny, x)] = links.get((y, x, ny, x), 0) + f
            y = ny
        hops = max(hops, abs(ys - yd) + abs(xs - xd))
    tm = model.timing                        # the busiest sender's data-sharing unit
    unit = max(tm.share_busy(sent.get(nd, 0), got.get(nd, 0), hops)
               for nd in set(sent) | set(got))
    want = math.ceil(max(max(max(links.values()), max(ports.values()))
                         + HEAD_CYCLES_PER_HOP * (hops + 1) - 1, unit))
    cyc, _ = mapper.noc_transfer(model, (H, W), np.array(rows, dtype=float))
    assert cyc == pytest.approx(want)


def test_share_cost_follows_the_schedules_busiest_link():
    """Sets of 4 nodes 4 apart on the 16x16 array: TSP's cycles put 4 cycle edges on a
    link, the ILP's 2, so with chunks large enough for the links to bind, sharing costs
    more with TSP's schedule; ``best`` takes the ILP's; bit-hops follow the cycles'
    hops. An unknown method is refused."""
    from pimforge.sim.nicepim.sharing import set_loads

    cfg = load_config("nicepim_16x16")
    models = {m: mapper.NodeModel(cfg, sharing=m) for m in ("ilp", "tsp", "best")}
    lt, li = (set_loads(16, 16, 4, 4, m) for m in ("tsp", "ilp"))
    assert lt.edges == 2 * li.edges
    cost = {m: md.share_cycles(4, 64 << 10, 4) for m, md in models.items()}
    assert cost["tsp"][0] > 1.2 * cost["ilp"][0]
    assert cost["best"] == cost["ilp"]
    words = (64 << 10) // models["ilp"].word_bytes
    link = li.edges * words * models["ilp"].link_message
    assert cost["ilp"][0] >= 3 * link                   # three steps, each link-bound
    assert cost["ilp"][1] == li.set_hops * 3 * words * MESSAGE_FLITS * 64
    with pytest.raises(ValueError, match="sharing"):
        mapper.NodeModel(cfg, sharing="ring")


def test_baseline_follows_sec_viii_b():
    """Whole array for every layer, one layout, WR lowered from the heaviest layers
    first, and each LM the one of least node cycles (engine and DRAM), kept when WR
    drops."""
    net = nets.network("googlenet")
    # 1 MiB a node: GoogLeNet's LMs need 1.16 MiB at full replication, 0.83 unreplicated
    cfg = load_config("nicepim_4x4", {"nicepim.bank_bytes": 1 << 16})
    b = mapper.baseline_map(net, cfg)
    n = cfg.nicepim
    assert b.weight_bytes_per_node <= n.node_bytes
    assert all(info["region"] == [0, 0, 4, 4] for info in b.layers.values())
    assert len(set(b.layouts.values())) == 1
    heavy = sorted((lay for lay in net.layers if lay.weights), key=lambda lay: -lay.weights)
    lowered = [lay.name for lay in heavy if b.layers[lay.name]["wr"] < 16]
    assert lowered, "the capacity should bind here"
    assert lowered == [lay.name for lay in heavy[:len(lowered)]]
    assert all(b.layers[x]["wr"] == 1 for x in lowered[:-1])
    model = mapper.NodeModel(cfg)
    lo = Layout[b.layouts["conv1"]]
    for name in ("inc4a_3x3", lowered[0], lowered[-1]):
        lay = net.by_name[name]
        _, pt = min(((model.layer_cost(lay, pt, 16, lo, lo), pt)
                     for pt in mapper.partitions(lay, 4, 4)
                     if not _raises(model, lay, pt, lo)),
                    key=lambda t: t[0].compute + t[0].dram)
        assert b.layers[name]["partition"] == str(pt)
    # the latency is the layers' and their inputs' movements, one after the other
    assert b.latency_cycles == pytest.approx(sum(i["cycles"] + i["redist_cycles"]
                                                 for i in b.layers.values()))


def _raises(model, lay, pt, lo):
    try:
        model.layer_cost(lay, pt, 16, lo, lo)
    except CapacityError:
        return True
    return False


def test_mapper_no_worse_than_the_stronger_baseline(preset):
    cfg = preset("nicepim_4x4")
    net = nets.network("darknet53")
    full = mapper.baseline_map(net, cfg, lm_goal="full")
    m = mapper.map_network(net, cfg)
    assert m.latency_cycles <= full.latency_cycles
    with pytest.raises(ValueError, match="lm_goal"):
        mapper.baseline_map(net, cfg, lm_goal="timeloop")


@pytest.mark.parametrize("case", range(6))
def test_min_max_split_equals_enumeration(case):
    rng = random.Random(SEED * 31 + case)
    log.info("seed %d case %d", SEED, case)
    loads = [rng.randint(1, 20) for _ in range(rng.randint(1, 9))]
    parts = rng.randint(1, 4)
    best = math.inf
    for cuts in range(min(parts, len(loads))):
        for pos in itertools.combinations(range(1, len(loads)), cuts):
            b = [0, *pos, len(loads)]
            best = min(best, max(sum(loads[x:y]) for x, y in itertools.pairwise(b)))
    starts = ddam.min_max_split(loads, parts)
    b = [*starts, len(loads)]
    assert starts[0] == 0 and len(starts) <= parts
    assert max(sum(loads[x:y]) for x, y in itertools.pairwise(b)) == pytest.approx(best)


def test_ddam_pipeline_covers_the_network_on_disjoint_regions(preset):
    cfg = preset("nicepim_4x4")
    net = nets.network("vgg16")
    d = ddam.ddam_map(net, cfg, stages=[3])
    assert len(d.stages) >= 2
    layers = [x for s in d.stages for x in s["layers"]]
    assert layers == [lay.name for lay in net.layers if lay.kind != "input"]
    cells = [(y, x) for s in d.stages for y in range(s["region"][0], s["region"][0]
                                                       + s["region"][2])
             for x in range(s["region"][1], s["region"][1] + s["region"][3])]
    assert len(cells) == len(set(cells)) and all(0 <= y < 4 and 0 <= x < 4 for y, x in cells)
    assert d.period_cycles == max(s["cycles"] for s in d.stages)
    assert d.latency_cycles == pytest.approx(sum(s["cycles"] for s in d.stages))
    assert d.throughput(1) == pytest.approx(1 / (len(d.stages) * d.period_cycles))
    assert d.throughput(16) > d.throughput(1)


def test_what_if_node_models(preset):
    """The what-ifs change only their term: the ideal engine is the MAC count over the PE
    array (quantized), the word-rate DMA is never slower than the node's DMA."""
    cfg = preset("nicepim_4x4")
    rtl = mapper.node_model(cfg, "rtl")
    eng = mapper.node_model(cfg, "ideal-engine")
    dma = mapper.node_model(cfg, "ideal-dma")
    cyc, bands, blocks = eng.compute_cycles(48, 40, 9, 7, 3, 3, 1, 1)
    assert cyc == 2 * 2 * 9 * 9 * 7               # ceil(40/32) ceil(48/32) R S P Q
    assert (bands, blocks) == rtl.compute_cycles(48, 40, 9, 7, 3, 3, 1, 1)[1:]
    lay = nets.network("vgg16").by_name["conv3_2"]
    pt = mapper.partitions(lay, 4, 4)[5]
    a = rtl.layer_cost(lay, pt, 16, Layout.NCHW, Layout.NCHW)
    b = dma.layer_cost(lay, pt, 16, Layout.NCHW, Layout.NCHW)
    # (the controller's own cycles move a little: what waits for what changes with the DMA)
    assert b.dram < a.dram and abs(b.compute - a.compute) <= 0.01 * a.compute
    assert b.share == a.share
    with pytest.raises(ValueError, match="node model"):
        mapper.node_model(cfg, "timeloop")
