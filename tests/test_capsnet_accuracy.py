"""Sec. 5.2.2 approximations, the digits CapsNet and the Table 5 accuracy study."""

import dataclasses
import math

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.rtl.capsnet import params as pc
from pimforge.rtl.capsnet.params import EXP_AVG, LOG2E
from pimforge.sim.capsnet.accuracy import PAPER_TABLE5, WITH, WITHOUT, accuracy_table, evaluate
from pimforge.sim.capsnet.digits_net import (
    WEIGHTS_VERSION,
    DigitsCapsNet,
    load_digits_split,
    load_trained,
    margin_loss,
    trained_meta,
)
from pimforge.verif.models.capsnet.pe import PEModel
from pimforge.verif.models.capsnet.pe_ops import PEOps, lane_sum
from pimforge.verif.models.capsnet.routing import RoutingOps, route_f64, route_pim, sequential_sum

F32 = np.float32


def _ops(recovery=False, steps=1, la=3):
    cfg = load_config("default")
    cfg = cfg.replace(pe=dataclasses.replace(cfg.pe, newton_steps=steps),
                      fp=dataclasses.replace(cfg.fp, add_latency=la))
    return PEOps.from_config(cfg, recovery=recovery)


def test_pe_ops_exp_bit_construction_by_hand():
    # x = 0: z = 0 * log2e + (Avg + 126) = 126.9427 -> FIX(z, 23): exponent 126, mantissa .9427
    z = F32(EXP_AVG + 126)
    expect = np.array([math.floor(float(z) * 2 ** 23)], dtype=np.uint32).view(F32)[0]
    assert _ops().exp(np.array([0.0], dtype=F32))[0] == expect
    assert expect == pytest.approx(2 ** -1 * (1 + 0.9427), rel=1e-4)
    # the integer part of log2(e) x lands in the exponent field: exactly x2 per -ln 2 step
    xs, ks = [], []
    for k in range(1, 20):     # a float32 x near -k ln 2 with float32(log2(e) x) == -k
        x0 = F32(-k * math.log(2))
        cands, up, down = [x0], x0, x0
        for _ in range(8):
            up, down = np.nextafter(up, F32(0)), np.nextafter(down, F32(-100))
            cands += [up, down]
        hits = [c for c in cands if F32(c * F32(LOG2E)) == -k]
        if hits:
            xs.append(hits[0])
            ks.append(k)
    assert len(ks) >= 15
    r = _ops().exp(np.array(xs, dtype=F32))
    np.testing.assert_array_equal(r[:-1] / r[1:], F32(2.0) ** np.diff(ks).astype(F32))


def test_pe_ops_exp_error_specials_and_recovery():
    x = np.linspace(-20, 5, 200001).astype(F32)
    plain, rec = _ops(False), _ops(True)
    rel = plain.exp(x).astype(np.float64) / np.exp(x.astype(np.float64))
    assert 0.95 < rel.min() < 0.97 and 1.01 < rel.max() < 1.03      # Schraudolph-style, +-4%
    assert plain.exp(np.array([-200.0], F32))[0] == 0
    assert np.isinf(plain.exp(np.array([200.0], F32))[0])
    assert rec.factor != 1 and abs(rec.factor - 1) < 0.01 and plain.factor is None
    # recovery is one float32 multiply of the plain result by R
    np.testing.assert_array_equal(rec.exp(x), (plain.exp(x) * F32(rec.factor)).astype(F32))


@pytest.mark.parametrize("steps, bound_rsqrt, bound_recip", [(0, 0.035, 0.06), (1, 2e-3, 3e-3),
                                                              (2, 1e-5, 1e-5)])
def test_pe_ops_rsqrt_recip_accuracy(steps, bound_rsqrt, bound_recip):
    rng = np.random.default_rng(3)
    x = np.exp(rng.uniform(-30, 30, 50000)).astype(F32)
    ops = _ops(steps=steps)
    e1 = np.abs(ops.rsqrt(x) * np.sqrt(x.astype(np.float64)) - 1).max()
    e2 = np.abs(ops.recip(x) * x.astype(np.float64) - 1).max()
    assert e1 < bound_rsqrt and e2 < bound_recip
    if steps:   # Newton really refines
        prev = _ops(steps=steps - 1)
        assert e1 < np.abs(prev.rsqrt(x) * np.sqrt(x.astype(float)) - 1).max()


def test_pe_ops_seeds_use_the_pe_constants():
    ops = _ops(steps=0)
    one = np.array([1.0], dtype=F32)
    assert ops.rsqrt(one).view(np.uint32)[0] == pc.isqrt_magic(0) - (0x3F800000 >> 1)
    assert ops.recip(one).view(np.uint32)[0] == pc.recip_magic(0) - 0x3F800000


@pytest.mark.parametrize("la", [1, 2, 3, 5])
def test_lane_sum_is_the_pe_mac_order(la, preset):
    """Against the golden PE's stream model, element for element, incl. short groups."""
    cfg = preset("default")
    cfg = cfg.replace(fp=dataclasses.replace(cfg.fp, add_latency=la))
    model = PEModel(cfg)
    rng = np.random.default_rng(11 + la)
    for n in (1, 2, la, la + 1, 17):
        x = (rng.normal(0, 1, n) * 10.0 ** rng.integers(-6, 7, n)).astype(F32)
        want = model.mac(x.view(np.uint32), np.full(n, pc.f32_bits(1.0), np.uint32))
        assert lane_sum(x[:, None], 0, la).view(np.uint32)[0] == want, (la, n)
    # order matters: 1e8 + 1 - 1e8 with three lanes is not the sequential sum
    x = np.array([1e8, 1, -1e8, 1], dtype=F32)
    assert lane_sum(x, 0, 3) != sequential_sum(x, 0)


def test_pe_ops_plug_into_routing():
    ops = PEOps.from_config(load_config("default"))
    assert isinstance(ops, RoutingOps) and ops.recovery and ops.newton_steps == 1
    rng = np.random.default_rng(8)
    u = rng.normal(0, 0.3, (6, 20, 8))
    W = rng.normal(0, 0.3, (20, 5, 16, 8))
    ref = route_f64(u, W, 3)
    for rec in (False, True):
        r = route_pim(u, W, 3, _ops(recovery=rec))
        np.testing.assert_allclose(r.c.sum(axis=1), 1, atol=1e-2)
        np.testing.assert_allclose(r.v, ref.v, atol=3e-2)
        assert np.max(np.abs(r.v - ref.v)) > 1e-6          # it is really approximate


def test_margin_loss_by_hand():
    v = np.zeros((1, 2, 16))
    v[0, 0, 0] = 0.5     # true class, length 0.5 -> (0.9-0.5)^2
    v[0, 1, 0] = 0.3     # other class, length 0.3 -> 0.5*(0.3-0.1)^2
    loss, g = margin_loss(v, np.array([0]))
    assert loss == pytest.approx(0.16 + 0.02)
    assert g[0, 0, 0] == pytest.approx(-0.8) and g[0, 1, 0] == pytest.approx(0.2)


def test_gradients_match_finite_differences():
    """Backward pass check with c held fixed (1 routing iteration: c is uniform and constant)."""
    import pimforge.sim.capsnet.digits_net as dn

    rng = np.random.default_rng(4)
    net = DigitsCapsNet.init(rng, w_std=0.3)
    x = rng.uniform(0, 1, (3, 1, 8, 8))
    y = np.array([1, 4, 7])
    old = dn.ITERATIONS
    dn.ITERATIONS = 1
    try:
        _, grads = net.loss_and_grads(x, y)
        for name in DigitsCapsNet.NAMES:
            p = getattr(net, name)
            for _ in range(4):
                idx = tuple(rng.integers(0, s) for s in p.shape)
                keep = p[idx]
                p[idx] = keep + 1e-6
                lp, _ = net.loss_and_grads(x, y)
                p[idx] = keep - 1e-6
                lm, _ = net.loss_and_grads(x, y)
                p[idx] = keep
                num = (lp - lm) / 2e-6
                assert grads[name][idx] == pytest.approx(num, rel=1e-4, abs=1e-9), name
    finally:
        dn.ITERATIONS = old


def test_shipped_weights_small_and_loadable():
    from importlib import resources
    res = resources.files("pimforge.sim.capsnet") / "weights" / "digits_capsnet.npz"
    assert res.is_file() and len(res.read_bytes()) < 1 << 20
    net = load_trained()
    assert net.W.shape == (64, 10, 16, 8)
    meta = trained_meta()
    assert meta["version"] == WEIGHTS_VERSION and meta["seed"] == 1
    _, _, xte, yte = load_digits_split()
    assert np.mean(net.predict(xte) == yte) == pytest.approx(meta["test_accuracy"], abs=1e-4)


def test_table5_study_on_digits():
    rows = {r.variant: r for r in evaluate()}
    acc = {k: r.accuracy for k, r in rows.items()}
    assert acc["float64"] > 0.90                      # a sensible trained network
    assert rows["float32"].max_abs_v_err < 1e-5
    for k in ("float32", WITHOUT, WITH):
        assert abs(acc[k] - acc["float64"]) <= 0.01, k
        assert rows[k].agree_with_f64 >= 0.99
    assert 1e-5 < rows[WITHOUT].max_abs_v_err < 0.05
    # the recovery multiply cancels in the softmax up to rounding: tiny, but real, differences
    assert 0 < rows[WITH].max_abs_v_diff_vs_without < 1e-5
    assert rows[WITH].bits_differ_vs_without > 0
    text = accuracy_table(list(rows.values()))
    assert WITH in text
    _, _, xte, _ = load_digits_split()
    assert len(xte) == 450
    assert set(PAPER_TABLE5) == {f"Caps-{d}{i}" for d in ("MN", "CF", "EN", "SV")
                                 for i in (1, 2, 3)}
