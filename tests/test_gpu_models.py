"""GPU baseline MODELS: the eager-PyTorch kernel model against hand counts, its
relation to the roofline, the launch overhead, the paper checks and the JSON
section ``gpu_models`` of a capsnet run (ISA model only, a few seconds)."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from pimforge.sim.capsnet.gpu_eager import (
    LAUNCH_S,
    EagerKernel,
    Tensor,
    eager,
    eager_network_kernels,
    eager_routing_kernels,
)
from pimforge.sim.capsnet.gpu_models import (
    FIG6_ON_CHIP_BYTES,
    GPUModelTime,
    KernelTime,
    gpu_models,
    gpu_models_table,
    paper_checks,
    paper_checks_table,
)
from pimforge.sim.capsnet.gpu_roofline import (
    GPUS,
    P100,
    P100_HBM2,
    V100,
    network_kernels,
    roofline,
    routing_kernels,
)
from pimforge.sim.capsnet.networks import NETWORKS, CapsNetSpec
from pimforge.sim.capsnet.workload import CapsNetRun, CapsNetRunOptions, run_capsnet

# B=2, N_L=3, N_H=2, I=2, C_L=2, C_H=4
TINY = CapsNetSpec("tiny", "none", batch=2, n_l=3, n_h=2, iterations=2, c_l=2, c_h=4)


def _by_name(ks):
    return {k.name: k for k in ks}


def test_gpu_variants_share_one_description():
    assert [g.name for g in GPUS] == ["P100-320", "P100-732", "V100"]
    assert P100.bandwidth == 320e9 and P100_HBM2.bandwidth == 732e9
    assert P100_HBM2.peak_flops == P100.peak_flops
    # the eager model's default GPU is the roofline's P100 object itself
    assert eager(TINY).gpu == roofline(TINY).gpu == "P100-320"
    assert V100 in GPUS


def test_eager_routing_counts_by_hand():
    k = _by_name(eager_routing_kernels(TINY))
    # W (3*2*4*2 = 48 words) copied over the batch: 96 words written
    w = k["Eq.1 expand W over batch (copy)"]
    assert (w.flops, w.bytes, w.count) == (0, 4 * (48 + 96), 1)
    # u (2*3*2 = 12) copied over N_H: 24
    assert k["Eq.1 expand u over N_H (copy)"].bytes == 4 * (12 + 24)
    # bmm: reads 96 + 24, writes u_hat 2*3*2*4 = 48; FLOPs 48 * (2*2 - 1)
    m = k["Eq.1 u_hat = W @ u (bmm)"]
    assert (m.flops, m.bytes) == (144, 4 * (96 + 24 + 48))
    # softmax of the shared b (3x2): 3 rows of 5*2-2 FLOPs; reads 6, writes 6
    sm = k["Eq.5 c = softmax(b)"]
    assert (sm.flops, sm.bytes, sm.count) == (24, 4 * 12, 2)
    assert k["Eq.5 expand c over batch (copy)"].bytes == 4 * (6 + 12)
    # c * u_hat: reads c expanded 12 + u_hat 48, writes 48
    assert (k["Eq.2 c * u_hat"].flops, k["Eq.2 c * u_hat"].bytes) == (48, 4 * 108)
    # sum over N_L: 2*2*4*(3-1) FLOPs; reads 48, writes s 16
    su = k["Eq.2 s = sum over N_L"]
    assert (su.flops, su.bytes) == (32, 4 * 64)
    # squash on 4 vectors of 4: s**2 (16 FLOPs, 16 + 16 words) ... divide
    assert k["Eq.3 squash s**2"].bytes == 4 * 32
    assert k["Eq.3 squash sum"].flops == 4 * 3 and k["Eq.3 squash sum"].bytes == 4 * 20
    assert k["Eq.3 squash divide"].bytes == 4 * (16 + 4 + 16)
    # v (16) copied over N_L (48); agreement bmm 12 * (2*4 - 1) FLOPs, 48 + 48 + 12 words
    assert k["Eq.4 expand v over N_L (copy)"].bytes == 4 * 64
    a = k["Eq.4 a = u_hat . v (bmm)"]
    assert (a.flops, a.bytes) == (84, 4 * 108)
    assert (k["Eq.4 mean of a over batch"].flops, k["Eq.4 mean of a over batch"].bytes) == (
        12, 4 * (12 + 6))
    assert k["Eq.4 b = b + a"].bytes == 4 * 18 and k["Eq.4 b = b + a"].flops == 6
    # 3 once (W, u copies, bmm) + zeros + per iteration: softmax, c copy, mul, sum,
    # 7 squash, v copy, bmm, mean, add = 15
    assert len(k) == 4 + 15
    assert sum(x.count for x in k.values()) == 4 + 2 * 15


def test_eager_routing_unshared_b():
    k = _by_name(eager_routing_kernels(TINY, shared_b=False))
    assert "Eq.5 expand c over batch (copy)" not in k and "Eq.4 mean of a over batch" not in k
    # b is (B, N_L, N_H) = 12 words: softmax over 6 rows
    assert k["Eq.5 c = softmax(b)"].flops == 6 * 8
    assert k["Eq.4 b = b + a"].bytes == 4 * 36


def test_eager_layers_by_hand():
    k = _by_name(eager_network_kernels(TINY))
    # N_L = 3 gives 3*2//36 = 0 PrimeCaps channels; the conv: 2*81*256*400*B FLOPs
    c = k["Conv1 9x9x256 (cuDNN)"]
    assert c.flops == 2 * 81 * 256 * 400 * 2
    assert c.bytes == 4 * (2 * 784 + 81 * 256 + 2 * 256 * 400)
    assert k["Conv1 ReLU"].bytes == 4 * 2 * 2 * 256 * 400
    # decoder FC0: C_H*N_H = 8 -> 512 for 2 images
    f = k["decoder FC0 8x512 (GEMM + bias)"]
    assert f.flops == 2 * 2 * 8 * 512 + 2 * 512
    assert f.bytes == 4 * (2 * 8 + 8 * 512 + 512 + 2 * 512)
    # masking: |v| of 4 capsules, argmax over N_H = 2, one-hot from a 2x2 identity
    assert k["decoder mask argmax"].flops == 2 * 1
    assert k["decoder mask one-hot"].bytes == 4 * (2 + 4 + 4)
    assert k["decoder FC2 sigmoid"].flops == 4 * 2 * 784


def test_kernel_time_counts_launches():
    k = EagerKernel("x", (Tensor("a", 10 ** 6),), (Tensor("b", 10 ** 6),), flops=0, count=3)
    mem = 8e6 / P100.bandwidth
    assert k.time_s(P100, launch_s=0) == pytest.approx(3 * mem)
    assert k.time_s(P100, launch_s=1e-3) == pytest.approx(3 * (mem + 1e-3))
    # the whole model: one launch overhead per launch, nothing else
    e0, e1 = eager(TINY, launch_s=0.0), eager(TINY, launch_s=2e-6)
    assert e1.launches == sum(k.count for k in eager_network_kernels(TINY))
    assert e1.total_s - e0.total_s == pytest.approx(2e-6 * e1.launches, rel=1e-9)
    assert e1.routing_s - e0.routing_s == pytest.approx(2e-6 * e1.routing_launches, rel=1e-9)
    assert e1.routing_launches == 4 + 2 * 15


def test_on_chip_keeps_only_intermediates_that_fit():
    k = EagerKernel("x", (Tensor("w", 100, "param"), Tensor("t", 100)),
                    (Tensor("big", 1000),), flops=0)
    assert k.dram_bytes(0) == 4 * 1200
    assert k.dram_bytes(400) == 4 * 1100            # t fits; params are always charged
    assert k.dram_bytes(4000) == 4 * 100
    with pytest.raises(ValueError, match="tensor kind must be"):
        Tensor("z", 1, "weights")
    # more on-chip storage never costs time
    sizes = (0, *FIG6_ON_CHIP_BYTES.values())
    ts = [eager("Caps-MN2", P100, on_chip_bytes=c).routing_s for c in sizes]
    assert ts == sorted(ts, reverse=True) and ts[-1] < ts[0]


def test_eager_is_never_faster_than_the_roofline():
    seed = 20261123
    rng = random.Random(seed)
    seed_nets = list(NETWORKS) + [TINY]
    for _ in range(40):
        seed_nets.append(CapsNetSpec("r", "x", batch=rng.randint(1, 64), n_l=rng.randint(1, 300),
                                     n_h=rng.randint(1, 40), iterations=rng.randint(1, 9),
                                     c_l=rng.randint(1, 16), c_h=rng.randint(1, 32),
                                     in_channels=rng.choice((1, 3))))
    for net in seed_nets:
        for g in GPUS:
            for launch in (0.0, LAUNCH_S):
                for shared in (True, False):
                    e = eager(net, g, launch_s=launch, shared_b=shared)
                    r = roofline(net, g)
                    assert e.routing_s >= r.routing_s * (1 - 1e-12), (seed, net, g.name)
                    assert e.total_s >= r.total_s * (1 - 1e-12), (seed, net, g.name)
                    assert e.routing_flops >= r.routing_flops
                    assert e.routing_bytes >= r.routing_bytes


def test_gpu_models_records_add_up():
    m = gpu_models("Caps-SV3")
    assert set(m) == {"roofline", "eager"}
    for model in m.values():
        assert set(model) == {g.name for g in GPUS}
    r, e = m["roofline"]["P100-320"], m["eager"]["P100-320"]
    assert r.routing_s == pytest.approx(roofline("Caps-SV3").routing_s)
    assert r.total_s == pytest.approx(roofline("Caps-SV3").total_s)
    assert e.routing_s == pytest.approx(eager("Caps-SV3").routing_s)
    assert e.launches == eager("Caps-SV3").launches
    assert len(r.kernels) == len(network_kernels(NETWORKS[-1]))
    assert len(e.kernels) == len(eager_network_kernels(NETWORKS[-1]))
    assert r.launch_s == 0 and e.launch_s == LAUNCH_S
    assert e.routing_s == pytest.approx(sum(k.time_s for k in e.kernels if k.routing))
    # per-iteration kernels are one row of count = iterations, totals over them
    sm = next(k for k in e.kernels if k.name == "Eq.5 c = softmax(b)")
    assert sm.count == 9 and sm.bytes == 9 * 4 * 2 * 576 * 10
    eq5 = next(k for k in r.kernels if k.name.startswith("Eq.5"))
    assert eq5.count == 9 and eq5.bytes == 9 * routing_kernels(NETWORKS[-1])[1].bytes
    assert 0 < e.routing_share < 1


def test_paper_checks_and_tables():
    c = paper_checks()
    mean = c["mean"]
    # the eager model lands near Fig. 4's 74.62 %, the roofline far below it
    assert 0.6 < mean["routing_share_eager"] < 0.8
    assert mean["routing_share_roofline"] < 0.45
    assert mean["dram_busy"] > 0.85 and mean["fp32_busy"] < 0.05
    assert 0 <= mean["on_chip_gain_vs_P100"] <= mean["on_chip_gain_vs_K40m"] < 0.14
    assert mean["bw_gain_288_to_897"] > 1.0
    t = paper_checks_table(c)
    assert "74.6 %" in t and "Fig. 6b" in t
    t = gpu_models_table()
    assert len(t.splitlines()) == 2 + len(NETWORKS) and "| Caps-SV3 |" in t


@pytest.fixture(scope="module")
def model_run() -> CapsNetRun:
    return run_capsnet("Caps-SV1", None, CapsNetRunOptions(scale=64, model_only=True))


def test_run_json_carries_both_models(model_run):
    d = model_run.to_json()
    gm = d["gpu_models"]
    assert set(gm) == {"roofline", "eager"} and set(gm["eager"]) == {g.name for g in GPUS}
    rec = gm["eager"]["P100-320"]
    assert set(rec) == {f.name for f in dataclasses.fields(GPUModelTime)}
    assert set(rec["kernels"][0]) == {f.name for f in dataclasses.fields(KernelTime)}
    # the old fields still hold the P100 roofline of the routing
    assert d["gpu_model"]["routing_s"] == gm["roofline"]["P100-320"]["routing_s"]
    assert d["speedup_vs_gpu_model"] == pytest.approx(
        gm["roofline"]["P100-320"]["routing_s"] / d["time_s"])
    back = CapsNetRun.from_json(json.loads(json.dumps(d)))
    assert back == model_run and back.to_json() == d
    assert isinstance(back.gpu_models["eager"]["V100"], GPUModelTime)
    assert isinstance(back.gpu_models["roofline"]["P100-732"].kernels[0], KernelTime)
    # a result written before the section existed reads back without it
    old = {k: v for k, v in d.items() if k != "gpu_models"}
    assert CapsNetRun.from_json(old).gpu_models is None
    assert "(eager " in model_run.summary().splitlines()[-1]
    assert "(eager " not in CapsNetRun.from_json(old).summary()
