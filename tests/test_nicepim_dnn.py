"""NicePIM DNN runs on the array RTL: the mapper's per-node cost model against the node RTL
on sampled layer tiles, a reduced network with a residual block end to end bit-exact
against numpy, ``pimforge run dnn``'s dump and JSON, and bad input.

Random cases draw from ``random.Random(seed)`` with ``seed`` from ``PIMFORGE_SEED``
(default 1), logged. One Verilator build of nicepim_small's array serves every test
(the one tests/test_nicepim_array.py uses).
"""

import json
import logging
import os
import random

import numpy as np
import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import load_config
from pimforge.sim.nicepim import costmodel_check
from pimforge.sim.nicepim.costmodel_check import CASES, check_cases, random_cases
from pimforge.sim.nicepim.dnn_cli import DnnResult, array_driver
from pimforge.verif.models.nicepim import conv2d

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "1"))


@pytest.fixture(scope="module")
def cfg():
    return load_config("nicepim_small")


@pytest.fixture(scope="module")
def exe(cfg):
    return array_driver(cfg)            # the build the command line reuses in this process


def test_cost_model_within_5_percent_of_the_node_rtl(cfg, exe):
    """Sampled node parts (kernels 1 to 7, strides 1 and 2, borders and interior parts,
    groups, every layout in and out, tilings limited by each buffer): bit-exact outputs,
    the model's node cycles within 5% of the RTL's, its DRAM words within 2% and its row
    activations within 10% (+2)."""
    cases = list(CASES) + random_cases(cfg, random.Random(SEED), 4)
    rows = check_cases(cfg, cases, seed=SEED, exe=exe)
    for r in rows:
        log.info("seed %d %-20s %-40s %-14s rtl %7d model %9.0f (%+.2f%%) words %d/%.0f "
                 "acts %d/%.0f", SEED, r.name, r.shape, r.layouts, r.cycles_rtl,
                 r.cycles_model, 100 * r.error, r.words_rtl, r.words_model, r.acts_rtl,
                 r.acts_model)
        assert r.matches_reference, (SEED, r.name)
        assert abs(r.error) <= 0.05, (SEED, r.name, r.cycles_rtl, r.cycles_model)
        assert abs(r.words_model - r.words_rtl) <= 0.02 * r.words_rtl, (SEED, r.name)
        assert abs(r.acts_model - r.acts_rtl) <= 0.1 * r.acts_rtl + 2, (SEED, r.name)
    # the model does not fit a constant: its errors are small against the spread of the
    # cases' cycles (two orders of magnitude)
    cyc = [r.cycles_rtl for r in rows]
    assert max(cyc) > 50 * min(cyc)


def _post(y, ops):
    """Apply a layer.json's post-operations (the integer ones this workload uses)."""
    for op in ops:
        if op["op"] in ("relu", "gelu"):
            y = np.maximum(y, 0)
        elif op["op"] == "leaky":
            y = np.where(y < 0, y >> 3, y)
        elif op["op"] == "requantize":
            y = np.clip(y >> op["shift"], *op["clip"])
    return y


def test_reduced_resnet_block_end_to_end_bit_exact(tmp_path, cfg, exe, capsys):
    """ResNet152 scaled by 8, its first 7 layers (conv1, the max pool and the first
    bottleneck with its down-sampling branch and residual addition) mapped by PIM-Mapper
    onto the 2x2 array: every layer with MACs bit-exact on the RTL, the model within 5% of
    each layer's RTL cycles, and the dump consistent with itself (each output is the
    convolution of its input and weights; each next input is its producer's output
    after the recorded post-operations; the addition adds its two branches)."""
    out, dump = tmp_path / "r.json", tmp_path / "dump"
    rc = main(["run", "dnn", "--net", "resnet152", "--scale", "8", "--layers", "7",
               "--seed", str(SEED), "--dump", str(dump), "--json", str(out)])
    text = capsys.readouterr().out
    log.info("seed %d\n%s", SEED, text)
    assert rc == 0
    res = DnnResult.from_json(json.loads(out.read_text()))
    assert res.engine == "rtl" and res.scale == 8 and res.ok
    rtl = [x for x in res.layers if x["runs_on"] == "rtl"]
    assert [x["name"] for x in rtl] == ["conv1", "res2_0_a", "res2_0_b", "res2_0_c",
                                       "res2_0_down"]
    for x in rtl:
        assert x["matches_reference"] is True, x["name"]
        assert abs(x["model_error"]) <= 0.05, (x["name"], x["cycles_rtl"], x["cycles_model"])
        assert x["cycles_rtl"] == max(nd["cycles_rtl"] for nd in x["nodes"]) > 0
    assert {x["name"] for x in res.layers if x["runs_on"] == "host"} == {"pool1", "res2_0_add"}
    t = res.totals
    assert t["all_match_reference"] and abs(t["cycles_model"] / t["cycles_rtl"] - 1) <= 0.05
    assert t["energy_pj_rtl"] > 0
    # the dump
    meta = {d.name: json.loads((d / "layer.json").read_text()) for d in dump.iterdir()}
    assert set(meta) == {x["name"] for x in res.layers}
    arrays = {}
    for name, m in meta.items():
        x, y = np.load(dump / name / "input.npy"), np.load(dump / name / "output.npy")
        assert x.dtype == np.int16 and y.dtype == np.int32
        assert list(x.shape) == m["input_shape"] and list(y.shape) == m["output_shape"]
        assert {"kind", "stride", "padding", "groups", "post"} <= set(m)
        if m["runs_on"] == "rtl":
            w = np.load(dump / name / "weight.npy")
            assert w.dtype == np.int16 and list(w.shape) == m["weight_shape"]
            want = conv2d(x[0], w, stride=m["stride"], pad=m["padding"], groups=m["groups"])
            assert np.array_equal(y[0], want), name
        else:
            assert not (dump / name / "weight.npy").exists()
        arrays[name] = (x[0].astype(np.int64), y[0].astype(np.int64))
    nxt = {"conv1": "pool1", "res2_0_a": "res2_0_b", "res2_0_b": "res2_0_c"}
    for a, b in nxt.items():
        assert np.array_equal(_post(arrays[a][1], meta[a]["post"]), arrays[b][0]), (a, b)
    assert meta["res2_0_add"]["inputs"] == ["res2_0_c", "res2_0_down"]
    branches = _post(arrays["res2_0_c"][1], meta["res2_0_c"]["post"]) + \
        _post(arrays["res2_0_down"][1], meta["res2_0_down"]["post"])
    assert np.array_equal(arrays["res2_0_add"][1], branches)


def test_full_size_is_the_model_only(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["run", "dnn", "--net", "darknet53", "--scale", "1", "--layers", "8",
               "--config", "nicepim_4x4", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "MODEL ONLY" in text
    res = DnnResult.from_json(json.loads(out.read_text()))
    assert res.engine == "model"
    conv = [x for x in res.layers if x["kind"] == "conv"]
    assert conv and all(x["cycles_rtl"] is None and x["cycles_model"] > 0 for x in conv)
    assert res.totals["mapper_latency_cycles_model"] > 0


@pytest.mark.parametrize("argv, match", [
    (["--net", "alexnet"], "unknown network 'alexnet'"),
    (["--net", "vgg16", "--scale", "16"], "pool4: its 2x2 window does not fit"),
    (["--net", "resnet152", "--scale", "1", "--dump", "DUMP"], "--dump needs a run on the RTL"),
    (["--net", "darknet53", "--scale", "2", "--layers", "1"],
     "layer conv0: node 0's part needs 282624 bytes of DRAM but a node has 131072"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, match):
    out = tmp_path / "r.json"
    argv = [a.replace("DUMP", str(tmp_path / "d")) for a in argv]
    rc = main(["run", "dnn", *argv, "--json", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


def test_reduced_bert_attention_bit_exact(tmp_path, exe):
    """BERT-base scaled by 32 (sequence 4, hidden 24, 12 heads of 2) through its first
    attention: the Q/K/V projections, Q K^T and softmax(.) V as grouped 1x1 convolutions
    whose weights are the other operand, bit-exact, the model within 5%."""
    out = tmp_path / "r.json"
    assert main(["run", "dnn", "--net", "bert_base", "--scale", "32", "--layers", "8",
                 "--seed", str(SEED), "--json", str(out)]) == 0
    res = DnnResult.from_json(json.loads(out.read_text()))
    kinds = {x["name"]: x for x in res.layers}
    assert kinds["enc0_qk"]["groups"] == kinds["enc0_av"]["groups"] == 12
    assert kinds["enc0_qk"]["output_shape"] == [1, 48, 4, 1]       # 12 heads x 4 keys
    for x in res.layers:
        if x["runs_on"] == "rtl":
            assert x["matches_reference"] is True, x["name"]
            assert abs(x["model_error"]) <= 0.05, x["name"]


def test_long_walks_averaged_as_counted(monkeypatch):
    """The model counts a task's DRAM words and rows run by run up to EXACT_RUNS runs (the
    path the RTL check above covers) and averages longer walks; on nicepim_4x4's larger
    tasks, averaged from 1,024 runs on, every task's cycles stay within 3% of the counted."""
    from pimforge.rtl.nicepim.params import Layout, Op
    from pimforge.sim.nicepim import node_model as nm

    n = load_config("nicepim_4x4").nicepim
    rng = random.Random(SEED)
    for _ in range(150):
        op = rng.choice([Op.LOAD_I, Op.LOAD_W, Op.STORE])
        if op == Op.LOAD_W:
            k, c, r = rng.randint(1, 128), rng.randint(1, 256), rng.choice([1, 3, 5])
            task = (op, Layout.NCHW, (k, c, r, r), rng.randrange(k), rng.randrange(c), 0, 0,
                    rng.randint(1, 4), r, r)
        else:
            c, h, w = rng.randint(1, 300), rng.randint(1, 60), rng.randint(1, 60)
            nh, nw = rng.randint(1, h + 2), rng.randint(1, w + 2)
            lay = rng.choice([Layout.NCHW, Layout.NHWC, Layout.NCHWC8])
            task = (op, lay, (1, c, h, w), 0, rng.randrange(c),
                    rng.randint(-1, h - 1), rng.randint(-1, max(-1, w - nw)),
                    rng.randint(1, 4) if op == Op.LOAD_I else 1, nh, nw)
        monkeypatch.setattr(nm, "EXACT_RUNS", 1 << 30)
        counted = nm.NodeTiming(n).dma(*task)
        monkeypatch.setattr(nm, "EXACT_RUNS", 1024)
        averaged = nm.NodeTiming(n).dma(*task)
        assert abs(averaged[0] - counted[0]) <= 0.03 * counted[0], (SEED, task)


def test_c_split_partial_sums_gathered_over_the_noc(cfg, exe):
    """A 3x3 convolution split over its input channels on nodes 1, 2 and 3: each
    computes its partial sums, nodes 2 and 3 send theirs over the NoC into node 1's DRAM,
    and the three read from node 1's DRAM add up to numpy's result."""
    from pimforge.sim.nicepim.node_jobs import NodeJob, run_jobs
    from pimforge.sim.nicepim.tiling import ConvPart
    from pimforge.verif.models.nicepim import wrap32

    rng = np.random.default_rng(SEED)
    x = rng.integers(-2000, 2000, (12, 9, 9))
    w = rng.integers(-2000, 2000, (6, 12, 3, 3))
    jobs = {}
    for node, (c0, c1) in zip((1, 2, 3), ((0, 4), (4, 8), (8, 12)), strict=True):
        part = ConvPart(c=c1 - c0, k=6, h=9, w=9, r=3, s=3, stride=1, pad=1, groups=1,
                        rows=(0, 9), cols=(0, 9))
        jobs[node] = NodeJob(part, x[c0:c1], w[:, c0:c1])
    res = run_jobs(cfg, jobs, exe=exe, gather={1: [2, 3]})
    total = wrap32(sum(r.out for r in res.values()))
    assert np.array_equal(total, wrap32(conv2d(x, w, pad=1))), SEED
    words = -(-6 * 9 * 9 * 32 // cfg.nicepim.node_bank_bits)      # the output, whole words
    assert [res[k].gather_perf["sent"] for k in (2, 3)] == [words, words]
    assert res[1].gather_perf["received"] == 2 * words
    assert res[1].gather_perf["waiting"] > 0
    # the senders read only; the receiver writes each sender's words from the row after
    # its own output on, the two regions row-aligned one after the other
    from pimforge.sim.nicepim.node_model import NodeTiming
    row = cfg.nicepim.row_words
    first = -(-words // row) * row
    step = NodeTiming(cfg.nicepim).gather_step(words, 2, (first, first + first))
    assert abs(step / res[1].gather_perf["cycles"] - 1) <= 0.05


def test_share_unit_sends_a_message_per_link_slot(cfg, exe):
    """One node sends 200 words to its neighbour, which only receives: the data-sharing
    unit keeps reads in flight, so after the first read's latency a message leaves
    every MESSAGE_FLITS + HEAD_CYCLES_PER_HOP - 1 cycles (the next router's pace per
    packet), not a read latency per word; every word lands where it was sent, and
    NodeTiming.share_step is within 5% of the sender's cycles."""
    from pimforge.rtl.nicepim.params import Op
    from pimforge.sim.nicepim.node_model import NodeTiming
    from pimforge.sim.nicepim.rtl_run import run_array, task

    n = cfg.nicepim
    rng = random.Random(SEED)
    words = 200
    src = {a: rng.getrandbits(n.node_bank_bits) | 1 for a in range(words)}
    dest = 3 * n.row_words
    tasks = {2: [task(Op.SEND, base=0, dest=dest, count=words, node=1 | 1 << 4),
                 task(Op.END)],
             3: [task(Op.WAIT, dest=words), task(Op.END)]}
    run = run_array(cfg, tasks, {2: src}, exe=exe)
    assert all(run.dram[3].get(dest + a) == v for a, v in src.items()), SEED
    tm = NodeTiming(n)
    busy = run.perf["share_busy"][2]
    first = tm.word + tm.first_row                   # the first read, its row opened
    assert words * tm.share_period <= busy <= words * tm.share_period + first + 8, busy
    model = tm.share_step(words, 1)
    assert abs(model / max(run.perf["cycles"][k] for k in (2, 3)) - 1) <= 0.05


@pytest.mark.parametrize("method, size, words", [("ilp", 4, 100), ("shp", 4, 64),
                                                  ("tsp", 2, 40)])
def test_schedules_run_through_the_sharing_units(cfg, exe, method, size, words):
    """A Data-Scheduler schedule over the 2x2 array, run as SEND/WAIT tasks through the
    nodes' data-sharing units: every node ends with its set's data, and the mapper's
    sharing cost for that method is within 5% of the RTL's cycles."""
    from pimforge.sim.nicepim.sharing import Mesh, schedule

    sched = schedule(method, Mesh(2, 2), size, 1, 16, cfg.nicepim.flit_bits, time_limit=None)
    s = costmodel_check.schedule_on_array(cfg, sched, words, seed=SEED, exe=exe)
    assert s["delivered"], SEED
    assert abs(s["error"]) <= 0.05, s


@pytest.mark.parametrize("ring, words, spacing", costmodel_check.RINGS)
def test_sharing_ring_within_5_percent_of_the_rtl(cfg, exe, ring, words, spacing):
    """Hamilton-cycle sharing through the data-sharing units (SEND/WAIT) on the 2x2
    array: every chunk delivered, and NodeTiming.share_step's cycles within 5% --
    chunks in one DRAM row and in different rows, rings of 2 and 4, one and two hops."""
    s = costmodel_check.sharing_ring(cfg, words, ring=ring, spacing=spacing, exe=exe)
    assert s["delivered"]
    assert abs(s["error"]) <= 0.05, s
