"""Host layers in numpy, host/PE contention on the HMC RTL, pipelining, Sec. 6.3 scenarios."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError, UnknownNameError
from pimforge.sim.capsnet import host as H
from pimforge.sim.capsnet.networks import NETWORKS, network
from pimforge.sim.capsnet.pipeline import (
    SCENARIOS,
    pipeline_time,
    routing_from_run,
    stage_time,
    whole_network,
)

log = logging.getLogger(__name__)
SEED = 20240611


def _rng(tag: str) -> np.random.Generator:
    seed = random.Random(f"{SEED}-{tag}").randrange(2**32)
    log.info("seed %s = %d", tag, seed)
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------- numpy layers

@pytest.mark.parametrize("stride, k, c, co, hw", [(1, 3, 2, 3, 7), (2, 3, 3, 2, 9),
                                                  (2, 5, 1, 4, 11), (1, 1, 4, 2, 5)])
def test_conv2d_matches_loop_reference(stride, k, c, co, hw):
    r = _rng(f"conv{stride}{k}{c}{co}{hw}")
    x = r.normal(size=(3, c, hw, hw)).astype(np.float32)
    w = r.normal(size=(co, c, k, k)).astype(np.float32)
    b = r.normal(size=co).astype(np.float32)
    got = H.conv2d(x, w, b, stride=stride, chunk=2)      # chunking across the batch
    ref = H.conv2d_loop(x, w, b, stride=stride)
    assert got.dtype == np.float32 and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)


def test_conv2d_rejects_mismatched_weights():
    with pytest.raises(PimforgeError, match="do not fit"):
        H.conv2d(np.zeros((1, 2, 5, 5)), np.zeros((3, 4, 3, 3)), np.zeros(3))


def _primary_loop(x, wts, hn):
    """Direct-loop PrimaryCaps: conv loops, ReLU, capsule gather and squash in float64."""
    a1 = np.maximum(H.conv2d_loop(x, wts["conv1_w"], wts["conv1_b"]), 0.0)
    h2 = H.conv2d_loop(a1, wts["prim_w"], wts["prim_b"], stride=hn.prim_stride)
    g = hn.grid
    u = np.zeros((x.shape[0], hn.n_l, hn.c_l))
    for i in range(x.shape[0]):
        for t in range(hn.types):
            for y in range(g):
                for z in range(g):
                    s = h2[i, t * hn.c_l:(t + 1) * hn.c_l, y, z]
                    n2 = float(s @ s)
                    u[i, t * g * g + y * g + z] = s * np.sqrt(n2) / (1 + n2)
    return u


def test_primary_capsules_tiny_table1_structure_matches_loops():
    hn = H.HostNet(name="tiny", batch=2, in_channels=2, in_size=11, conv_kernel=3,
                   conv_channels=4, prim_kernel=3, prim_stride=2, types=2, c_l=4, n_h=3, c_h=5,
                   decoder=(6, 7))
    assert (hn.conv_out, hn.grid, hn.n_l) == (9, 4, 32)
    wts = H.init_weights(hn, seed=3)
    x = _rng("tiny").random((2, 2, 11, 11)).astype(np.float32)
    u = H.primary_capsules(x, wts, hn)
    assert u.shape == (2, 32, 4) and u.dtype == np.float32
    np.testing.assert_allclose(u, _primary_loop(x, wts, hn), rtol=1e-4, atol=1e-6)
    assert np.all(np.linalg.norm(u, axis=-1) < 1.0)


def test_digits_host_layers_reproduce_the_trained_network():
    from pimforge.sim.capsnet.digits_net import load_trained

    hn = H.HostNet.digits()
    x = _rng("digits").random((7, 1, 8, 8))
    u = H.primary_capsules(x, H.digits_weights(), hn)
    ref = load_trained().primary_capsules(x)
    assert u.shape == ref.shape == (7, 64, 8)
    np.testing.assert_allclose(u, ref, atol=1e-5)


def test_table1_shapes_and_input_check():
    hn = H.HostNet.from_spec(network("Caps-SV1"), batch=2)
    assert (hn.in_channels, hn.grid, hn.types, hn.n_l) == (3, 6, 16, 576)
    wts = H.init_weights(hn, seed=1)
    u = H.primary_capsules(_rng("sv1").random((2, 3, 28, 28)), wts, hn)
    assert u.shape == (2, 576, 8) and np.isfinite(u).all()
    with pytest.raises(PimforgeError, match="input must be"):
        H.primary_capsules(np.zeros((2, 1, 28, 28)), wts, hn)
    for n in NETWORKS:
        assert H.HostNet.from_spec(n).n_l == n.n_l
    small = network("Caps-MN1").scaled(5)                 # N_L = 231: 7 types of 36
    assert (H.HostNet.from_spec(small).types, H.HostNet.from_spec(small).batch) == (7, 20)


def test_decoder_masks_all_but_the_chosen_capsule():
    hn = H.HostNet(name="tiny", batch=4, in_channels=1, in_size=6, conv_kernel=3,
                   conv_channels=2, prim_kernel=3, prim_stride=1, types=1, c_l=4, n_h=3, c_h=5,
                   decoder=(8, 9))
    wts = H.init_weights(hn, seed=5)
    v = _rng("dec").normal(size=(4, 3, 5)).astype(np.float32) * 0.3
    v[:, 1] *= 5                                          # capsule 1 is the longest
    rec = H.decoder_forward(v, wts, hn)
    assert rec.shape == (4, hn.pixels) and np.all((rec > 0) & (rec < 1))
    v2 = v.copy()
    v2[:, 0] += 0.1                                       # not the chosen capsule
    np.testing.assert_array_equal(H.decoder_forward(v2, wts, hn), rec)
    assert not np.array_equal(H.decoder_forward(v, wts, hn, labels=np.zeros(4, int)), rec)
    with pytest.raises(PimforgeError, match="no decoder"):
        H.decoder_forward(v, wts, H.HostNet.digits())


def test_layer_costs_equal_the_roofline_kernels():
    from pimforge.sim.capsnet.gpu_roofline import P100, network_kernels

    for n in NETWORKS:
        ks = [k for k in network_kernels(n) if not k.routing]
        ls = H.host_layers(n)
        assert [(k.flops, k.bytes) for k in ks] == [(la.flops, la.bytes) for la in ls], n.name
        t = H.host_times(n)
        assert t["pre_s"] + t["post_s"] == pytest.approx(sum(k.time_s(P100) for k in ks))
    conv = H.host_layers(network("Caps-MN1"))[0]
    assert conv.macs == 81 * 256 * 400 * 100 and conv.flops == 2 * conv.macs
    assert conv.act_write_bytes == 4 * 100 * 256 * 400


# ----------------------------------------------------------------------------- pipeline

def test_stage_time_hand_cases():
    assert stage_time(2.0, 3.0) == 3.0 and stage_time(4.0, 3.0) == 4.0
    assert stage_time(0.0, 3.0, 2.0, 2.0) == 3.0                 # no overlap, no slowdown
    # host 2 s at 1.5x -> done at 3 s; routing did 3/1.2 = 2.5 s of its 3 s, 0.5 s left
    assert stage_time(2.0, 3.0, 1.5, 1.2) == pytest.approx(3.5)
    # routing 1 s at 2x -> done at 2 s; host did 2/1.25 = 1.6 s of its 4 s, 2.4 s left
    assert stage_time(4.0, 1.0, 1.25, 2.0) == pytest.approx(4.4)
    with pytest.raises(PimforgeError, match="host_slowdown must be >= 1"):
        stage_time(1.0, 1.0, 0.5, 1.0)


def test_pipeline_time_hand_cases():
    assert pipeline_time(1.0, 0.5, 2.0, 1)["total_s"] == pytest.approx(3.5)   # sequential
    r = pipeline_time(1.0, 0.5, 2.0, 3)          # 1 + (2 + 2 + 2) + 0.5
    assert r["total_s"] == pytest.approx(7.5) and r["bound"] == "routing"
    r = pipeline_time(3.0, 1.0, 1.0, 3)          # 3 + (3 + 4 + 1) + 1
    assert r["total_s"] == pytest.approx(12.0) and r["bound"] == "host"
    # contention stretches the steady steps: 1 + 3 * stage(1.5, 2, 1.2, 1.1) + 0.5 at N=4 ends
    r = pipeline_time(1.0, 0.5, 2.0, 4, 1.2, 1.1)
    expect = (1.0 + stage_time(1.0, 2.0, 1.2, 1.1) + 2 * stage_time(1.5, 2.0, 1.2, 1.1)
              + stage_time(0.5, 2.0, 1.2, 1.1) + 0.5)
    assert r["total_s"] == pytest.approx(expect) and r["total_s"] > 1.0 + 4 * 2.0 + 0.5 - 1e-12
    with pytest.raises(PimforgeError, match="batches must be"):
        pipeline_time(1.0, 1.0, 1.0, 0)


def test_unknown_scenario_and_incomplete_routing_are_errors():
    routing = {"time_s": 1e-3, "cycles": 312500, "reads": [1], "writes": [1], "vaults": 1}
    with pytest.raises(UnknownNameError, match="unknown scenario 'all-in-gpu'"):
        whole_network("Caps-MN1", load_config(), routing, scenarios=["all-in-gpu"])
    with pytest.raises(PimforgeError, match="lacks 'reads'"):
        whole_network("Caps-MN1", load_config(), {"time_s": 1e-3, "cycles": 1, "vaults": 1})


def test_routing_from_run_splits_totals_when_per_vault_counts_are_missing():
    res = {"time_s": 2e-3, "cycles": 625000, "vaults": 4, "active_vaults": 2,
           "events": {"rd_bytes": 8000, "wr_bytes": 400}}
    r = routing_from_run(res)
    assert r["reads"] == [500.0, 500.0] and r["writes"] == [50.0, 50.0]
    assert r["per_vault"] == "even split of totals"
    r = routing_from_run({**res, "reads": [1, 2], "writes": [3, 4]})
    assert r["reads"] == [1, 2] and r["per_vault"] == "run"


# ----------------------------------------------------------------------------- RTL replay

@pytest.fixture(scope="module")
def replay_exe():
    from pimforge.sim.capsnet.contention import replay_config
    from pimforge.sim.membench import build_driver

    return build_driver(replay_config(load_config()))


@pytest.mark.cocotb
def test_gap_column_paces_a_master(replay_exe):
    from pimforge.rtl.mem.address_map import AddressMap
    from pimforge.sim.capsnet.contention import replay_config
    from pimforge.sim.membench import array_address, replay

    cfg = replay_config(load_config())
    amap = AddressMap.from_config(cfg.hmc)
    reqs = []
    for i in range(40):
        a = amap.with_subpage(i * 16, 1)
        d = amap.decode(a)
        reqs.append((0, 0, a, d.vault, array_address(cfg.hmc, d), 25))
    paced = replay(cfg, reqs, exe=replay_exe)
    free = replay(cfg, [r[:5] for r in reqs], exe=replay_exe)    # the old 5-column format
    assert paced["errors"] == free["errors"] == 0 and paced["done"] == free["done"] == 40
    assert paced["m0_last"] >= 40 * 25 > 4 * free["m0_last"]
    # an in-flight cap of 1 serializes the requests: each waits for the previous response
    capped = replay(cfg, [r[:5] for r in reqs], max_inflight_host=1, exe=replay_exe)
    assert capped["m0_last"] >= 40 * 10 > free["m0_last"]


@pytest.mark.cocotb
def test_contention_policies_order_the_slowdowns(replay_exe):
    from pimforge.sim.capsnet.contention import contention

    # A host stream against two busy vaults: demand about 85 % of the replayed cube's peak.
    kw = dict(host_bytes_per_s_per_vault=1.2e9, host_write_fraction=0.3,
              pe_read_bytes_per_s=[2.5e9, 2.4e9], pe_write_bytes_per_s=[0.6e9, 0.6e9],
              window_requests=2000, exe=replay_exe)
    r = contention(load_config(), **kw)
    a = r["alone"]
    # alone, a rate-paced stream ends about when its window ends
    assert r["window_cycles"] <= a["host"]["finish"] < 1.1 * r["window_cycles"]
    assert r["host_requests"] + r["pe_requests"] == pytest.approx(2000, rel=0.02)
    p = r["policies"]
    for x in p.values():
        assert x["host_slowdown"] >= 1.0 and x["pe_slowdown"] >= 1.0
    assert p["host-first"]["pe_slowdown"] > p["pim-first"]["pe_slowdown"]
    assert p["pim-first"]["host_slowdown"] > p["host-first"]["host_slowdown"]
    assert p["host-first"]["pe_extra_cycles"] > 0 and p["pim-first"]["host_extra_cycles"] > 0

    # With full PE queues (Q = 16 >> n_max) Eq. 15 grants the host almost nothing at
    # gamma_v = gamma_h: RMAS sits at the pim-first end for the host.
    assert p["rmas"]["host_slowdown"] > p["host-first"]["host_slowdown"] + 0.05
    # gamma_v = 0 makes every targeted vault serve the host first: RMAS turns into
    # host-first (up to its one-cycle registered grant and untargeted vaults).
    g = contention(load_config(), policies=["rmas"], gamma_v=0, gamma_h=1, **kw)["policies"]
    assert abs(g["rmas"]["host_slowdown"] - p["host-first"]["host_slowdown"]) < 0.03
    assert abs(g["rmas"]["pe_slowdown"] - p["host-first"]["pe_slowdown"]) < 0.03
    assert g["rmas"]["host_slowdown"] < p["pim-first"]["host_slowdown"] - 0.05
    # every policy serves every request exactly once
    for x in (*p.values(), g["rmas"]):
        assert x["commands"]["RD"] + x["commands"]["WR"] == r["host_requests"] + r["pe_requests"]


@pytest.mark.cocotb
def test_whole_network_scenarios(replay_exe):
    from pimforge.sim.capsnet.gpu_roofline import roofline

    net = network("Caps-SV1")
    cfg = load_config()
    # one routing batch: 0.5 ms on 2 vaults, vault 0 the busier
    routing = {"time_s": 5e-4, "cycles": 156250, "reads": [150_000, 120_000],
               "writes": [40_000, 30_000], "vaults": 2, "energy_j": {"total": 1e-4}}
    res = whole_network(net, cfg, routing, policy_windows=1500, exe=replay_exe, batches=8)
    sc = res["scenarios"]
    assert set(sc) == set(SCENARIOS)
    assert sc["baseline"]["time_s"] == pytest.approx(8 * roofline(net).total_s)
    ideal = res["ideal_pipeline_s"]
    for s in ("rmas-pim", "rmas-gpu", "pim-capsnet", "pim-arrival"):
        assert sc[s]["time_s"] >= ideal * (1 - 1e-12)
        assert sc[s]["policy"] in res["contention"]["policies"]
    # 2 vaults x 16 PEs cannot run the convolutions as fast as the GPU model
    assert sc["all-in-pim"]["time_s"] > sc["pim-capsnet"]["time_s"]
    for s, r in sc.items():
        for o, x in r["speedup_vs"].items():
            assert x * sc[o]["speedup_vs"][s] == pytest.approx(1.0)
        assert r["energy_j"] > 0
    assert res["host"]["pre_s"] > 0 and len(res["host"]["layers"]) == 3
