"""Dynamic-routing golden models (verif/models/capsnet/routing.py): Algorithm 1, Eq. 1-5."""

import logging
import random

import numpy as np
import pytest

from pimforge.verif.models.capsnet.routing import (
    ExactFloat32Ops,
    RoutingOps,
    route_f32,
    route_f64,
    route_naive,
    route_pim,
    sequential_sum,
    squash_f64,
)

log = logging.getLogger(__name__)


def _inputs(seed, b, nl, nh, ch=16, cl=8, scale=0.3):
    log.info("routing seed %d", seed)
    rng = np.random.default_rng(seed)
    u = squash_f64(rng.normal(0, 1, (b, nl, cl)))
    W = rng.normal(0, scale, (nl, nh, ch, cl))
    return u, W


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vectorized_matches_naive_loops(seed):
    r = random.Random(seed)
    b, nl, nh, it = r.randint(1, 3), r.randint(1, 5), r.randint(1, 4), r.randint(1, 3)
    u, W = _inputs(seed, b, nl, nh, ch=3, cl=2, scale=1.0)
    ref = route_naive(u, W, it)
    got = route_f64(u, W, it)
    for f in ("u_hat", "c", "s", "v", "b"):
        np.testing.assert_allclose(getattr(got, f), getattr(ref, f), rtol=1e-12, atol=1e-12,
                                   err_msg=f)


@pytest.mark.parametrize("seed, shape", [(11, (4, 24, 5, 3)), (12, (2, 40, 10, 2)),
                                         (13, (8, 16, 3, 6))])
def test_float32_agrees_with_float64(seed, shape):
    b, nl, nh, it = shape
    u, W = _inputs(seed, b, nl, nh)
    r64 = route_f64(u, W, it)
    r32 = route_f32(u, W, it)
    assert r32.v.dtype == np.float32 and r32.b.dtype == np.float32
    np.testing.assert_allclose(r32.u_hat, r64.u_hat, rtol=0, atol=2e-6)
    np.testing.assert_allclose(r32.v, r64.v, rtol=0, atol=2e-5)
    np.testing.assert_allclose(r32.c, r64.c, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(r32.b, r64.b, rtol=1e-4, atol=1e-4 * np.abs(r64.b).max())


@pytest.mark.parametrize("model", [route_f64, route_f32])
def test_routing_invariants(model):
    u, W = _inputs(21, 5, 30, 6)
    r = model(u, W, 3)
    np.testing.assert_allclose(r.c.sum(axis=1), 1.0, rtol=1e-6)
    assert np.all(r.c > 0)
    norm_v = np.linalg.norm(r.v.astype(np.float64), axis=-1)
    assert np.all(norm_v < 1.0)
    s = r.s.astype(np.float64)
    v = r.v.astype(np.float64)
    cos = np.sum(s * v, -1) / (np.linalg.norm(s, axis=-1) * norm_v)
    np.testing.assert_allclose(cos, 1.0, rtol=1e-5)
    ns = np.linalg.norm(s, axis=-1)
    np.testing.assert_allclose(norm_v, ns ** 2 / (1 + ns ** 2), rtol=1e-5)


def test_first_iteration_uses_uniform_coefficients():
    u, W = _inputs(31, 3, 7, 4)
    r = route_f64(u, W, 1)
    np.testing.assert_allclose(r.c, 0.25)
    np.testing.assert_allclose(r.s, r.u_hat.sum(axis=1) / 4)


def test_b_is_shared_by_the_batch():
    u, W = _inputs(41, 1, 12, 5)
    uu = np.concatenate([u, u])
    one, dup = route_f64(u, W, 1), route_f64(uu, W, 1)
    np.testing.assert_allclose(dup.b, 2 * one.b, rtol=1e-12)      # Eq. 4 sums over k
    np.testing.assert_allclose(dup.v[0], one.v[0], rtol=1e-12)
    one3, dup3 = route_f64(u, W, 3), route_f64(uu, W, 3)
    # later iterations see the doubled logits, so the routing differs from B = 1
    assert np.max(np.abs(dup3.c - one3.c)) > 1e-3
    np.testing.assert_allclose(dup3.v[0], dup3.v[1], rtol=1e-12)
    # a different second sample changes the first sample's result (batch-shared b)
    u2, _ = _inputs(42, 1, 12, 5)
    mixed = route_f64(np.concatenate([u, u2]), W, 3)
    assert np.max(np.abs(mixed.v[0] - one3.v[0])) > 1e-4


def test_zero_vector_squashes_to_zero():
    assert np.all(squash_f64(np.zeros((2, 3))) == 0)
    u = np.zeros((2, 4, 8))
    W = np.ones((4, 3, 16, 8))
    for model in (route_f64, route_f32):
        r = model(u, W, 2)
        assert np.all(r.v == 0) and not np.any(np.isnan(r.v))


def test_large_logits_do_not_overflow_float32():
    # batch-summed agreements exceed exp's float32 range; the max shift keeps it finite
    u, W = _inputs(51, 64, 20, 4, scale=3.0)
    r = route_f32(u, W, 4)
    assert np.abs(r.b).max() > 100
    assert np.all(np.isfinite(r.v)) and np.all(np.isfinite(r.c))
    np.testing.assert_allclose(r.v, route_f64(u, W, 4).v, atol=1e-4)


def test_sequential_sum_order():
    x = np.array([1e8, 1.0, -1e8, 1.0], dtype=np.float32)
    # ((1e8 + 1) - 1e8) + 1 = 1 in float32 (the first 1 is absorbed); pairwise would differ
    assert sequential_sum(x, 0) == np.float32(1.0)
    assert sequential_sum(np.zeros((0, 3)), 0).shape == (3,)


def test_ops_are_pluggable():
    calls = []

    class Counting(ExactFloat32Ops):
        name = "counting"

        def exp(self, x):
            calls.append("exp")
            return super().exp(x)

        def rsqrt(self, x):
            calls.append("rsqrt")
            return super().rsqrt(x)

        def recip(self, x):
            calls.append("recip")
            return super().recip(x)

    ops = Counting()
    assert isinstance(ops, RoutingOps)
    u, W = _inputs(61, 2, 6, 3)
    r = route_pim(u, W, 2, ops)
    assert calls.count("exp") == 2 and calls.count("rsqrt") == 2 and calls.count("recip") == 4
    np.testing.assert_array_equal(r.v, route_f32(u, W, 2).v)


def test_bad_shapes_are_reported():
    with pytest.raises(ValueError, match="W shape"):
        route_f64(np.zeros((1, 4, 8)), np.zeros((5, 2, 16, 8)), 1)
    with pytest.raises(ValueError, match="iterations"):
        route_f64(np.zeros((1, 4, 8)), np.zeros((4, 2, 16, 8)), 0)
