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

import pytest

from pimforge.gen.config import load_config
from pimforge.gen.errors import CapacityError
from pimforge.rtl.nn.engine import tile_cycles
from pimforge.rtl.nn.params import Layout
from pimforge.sim.nicepim import mapper
from pimforge.sim.nicepim import networks as nets
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


@pytest.mark.parametrize("shape", [(64, 64, 14, 14, 3, 1, 1), (48, 96, 9, 9, 1, 1, 1),
                                   (32, 32, 10, 7, 3, 2, 1), (64, 64, 7, 7, 3, 1, 8)])
def test_engine_cycles_follow_the_nodes_lowering(shape):
    """The model's engine cycles are the tiles :func:`conv_tasks` lowers the same
    convolution to, each at the engine's tile formula."""
    c, k, h, w, r, stride, groups = shape
    cfg = load_config("nicepim_4x4")
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
def test_mapper_no_worse_than_the_baseline(name):
    cfg = load_config("nicepim_4x4")
    net = nets.network(name)
    base = mapper.baseline_map(net, cfg)
    m = mapper.map_network(net, cfg)
    log.info("%s: baseline %.4g cycles %.4g pJ, mapper %.4g cycles %.4g pJ", name,
             base.latency_cycles, base.energy_pj, m.latency_cycles, m.energy_pj)
    assert m.latency_cycles <= base.latency_cycles
    assert m.weight_bytes_per_node <= cfg.nicepim.node_bytes
    assert set(m.layers) == {lay.name for lay in net.layers}


def test_what_does_not_fit_is_a_capacity_error():
    # VGG16's 16-bit weights need 17.3 MB per node unreplicated on 4x4 nodes
    cfg = load_config("nicepim_4x4", {"nicepim.bank_bytes": 1 << 20})
    for run in (mapper.baseline_map, mapper.map_network):
        with pytest.raises(CapacityError, match="do not fit"):
            run(nets.network("vgg16"), cfg)
    # 4x4 PEs with 1 KiB buffers: a 224-pixel output row exceeds the output buffer
    with pytest.raises(CapacityError, match="conv1_1 fits no partition"):
        mapper.baseline_map(nets.network("vgg16"), load_config("default"))
