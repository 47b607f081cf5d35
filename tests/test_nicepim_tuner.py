"""PIM-Tuner (NicePIM Sec. V, Fig. 8-9): the models, the area, the loop and ``pimforge dse
nicepim``."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import load_config
from pimforge.sim.nicepim import area as A
from pimforge.sim.nicepim import surrogate as S
from pimforge.sim.nicepim import tuner as T

SEED = 20261125


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        d = np.zeros_like(x)
        d.flat[i] = eps
        g.flat[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def test_gp_marginal_likelihood_gradient_matches_finite_differences():
    rng = np.random.default_rng(SEED)
    x, y = rng.uniform(size=(12, 3)), rng.normal(size=12)
    for hyp in (np.r_[np.log([0.3, 0.7, 1.5]), 0.2, np.log(0.05)],     # ARD
                np.r_[np.log(0.4), -0.3, np.log(0.2)]):               # one length scale
        v, g, gx = S.gp_nll_grad(hyp, x, y)
        np.testing.assert_allclose(g, _fd(lambda h: S.gp_nll(h, x, y), hyp), rtol=1e-5,
                                   atol=1e-7)
        np.testing.assert_allclose(gx, _fd(lambda z: S.gp_nll(hyp, z, y), x), rtol=1e-4,
                                   atol=1e-6)
    # the value against a direct evaluation of -log N(y; 0, K)
    from scipy.stats import multivariate_normal

    hyp = np.r_[np.log([0.3, 0.7, 1.5]), 0.2, np.log(0.05)]
    k = np.exp(0.2) * np.exp(-0.5 * (((x[:, None] - x[None]) / np.exp(hyp[:3])) ** 2).sum(-1))
    k += (0.05 + S.NOISE_FLOOR) * np.eye(12)
    assert S.gp_nll(hyp, x, y) == pytest.approx(-multivariate_normal(np.zeros(12), k).logpdf(y))


def test_dkl_gradient_through_the_mlp_matches_finite_differences():
    rng = np.random.default_rng(SEED)
    x, y = rng.uniform(size=(10, 4)), rng.normal(size=10)
    m = S.DKL(rng, hidden=(8, 6, 3))
    net = S.mlp_init(rng, (4, 8, 6, 3))
    for b in net[1::2]:
        b += rng.normal(0, 0.1, b.shape)   # no ReLU exactly at its kink
    hyp = np.array([0.1, -0.2, np.log(0.03)])
    v, gw, gh = m.nll_grad(net, hyp, x, y)
    assert v == pytest.approx(m.nll(net, hyp, x, y))
    np.testing.assert_allclose(gh, _fd(lambda h: m.nll(net, h, x, y), hyp), rtol=1e-5,
                               atol=1e-7)
    for k in range(len(net)):
        def f(w, k=k):
            return m.nll([w if j == k else q for j, q in enumerate(net)], hyp, x, y)
        np.testing.assert_allclose(gw[k], _fd(f, net[k]), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", ["gp", "dkl"])
def test_models_recover_a_smooth_function_better_than_the_mean(kind):
    rng = np.random.default_rng(SEED)

    def f(x):
        return np.sin(3 * x[:, 0]) + (x[:, 1] - 0.5) ** 2 * 4 - x[:, 2]

    x, xt = rng.uniform(size=(60, 3)), rng.uniform(size=(300, 3))
    model = S.GP(rng) if kind == "gp" else S.DKL(rng, steps=400)
    model.fit(x, f(x))
    mu, sd = model.predict(xt)
    rmse = np.sqrt(np.mean((mu - f(xt)) ** 2))
    assert rmse < 0.25 * np.std(f(xt)), (kind, rmse, np.std(f(xt)))
    assert np.all(sd > 0)


def test_expected_improvement_matches_monte_carlo():
    rng = np.random.default_rng(SEED)
    mu, sd, best = np.array([0.3, -0.2, 1.5, 0.0]), np.array([0.5, 0.1, 0.7, 1e-3]), 0.1
    ei = S.expected_improvement(mu, sd, best)
    z = rng.normal(size=(400_000, 1))
    mc = np.maximum(best - (mu + sd * z), 0).mean(0)
    np.testing.assert_allclose(ei, mc, rtol=0.02, atol=2e-4)


def test_area_model_reproduces_the_synthesized_engines():
    """The structural model against every engine it was fitted to (a few percent: the
    fit has more points than coefficients per part) and the two presets' totals in the
    README's area table."""
    for r, c, row, arr, ctrl in A.SYNTHESIZED:
        total = r * row + arr + ctrl
        assert A.engine_nand2(r, c) == pytest.approx(total, rel=0.01)
    assert A.total_area_mm2(load_config("nicepim_4x4", {}).nicepim) == pytest.approx(27.864,
                                                                                     rel=1e-3)
    assert A.total_area_mm2(load_config("nicepim_gpu", {}).nicepim) == pytest.approx(69.617,
                                                                                     rel=1e-3)


def test_space_validity_is_the_configs():
    """The space's validity rule accepts exactly the points the config accepts."""
    from pimforge.gen.errors import PimforgeError
    from pimforge.rtl.params import ParameterError

    sp = T.nicepim_space()
    rng = np.random.default_rng(SEED)
    idx = np.stack([rng.integers(0, len(v), 300) for v in sp.values], 1)
    idx[:40, 3], idx[:40, 6] = 8, rng.integers(0, 2, 40)   # 256 columns, 1-2 KiB obuf
    for i, ok in zip(idx, sp.valid(idx), strict=True):
        try:
            load_config("nicepim_4x4", T.overrides(sp.points(i[None])[0]))
            accepted = True
        except (PimforgeError, ParameterError):
            accepted = False
        assert accepted == ok, sp.points(i[None])[0]
    assert sp.size == 4 * 4 * 9 * 9 * 12 ** 3


def test_area_filter_agrees_with_the_area_model():
    sp = T.nicepim_space()
    rng = np.random.default_rng(SEED)
    train, test = sp.sample(rng, 2048), sp.sample(rng, 2000)
    filt = S.AreaFilter(rng).fit(sp.encode(train), sp.area(train), steps=2000, batch=128)
    pred, true = filt.predict(sp.encode(test)), sp.area(test)
    log_err = np.abs(np.log(pred / true))
    agree = np.mean((pred <= sp.constraint) == (true <= sp.constraint))
    print(f"area filter: median |log error| {np.median(log_err):.3f}, legal/illegal "
          f"agreement {agree:.3f} (seed {SEED})")
    assert np.median(log_err) < 0.15
    assert agree > 0.97


def _toy_space():
    """A small discrete space (8 x 8 x 8) with an area rule and one smooth optimum."""
    dims = {"a": range(8), "b": range(8), "c": range(8)}
    space = T.Space(dims, area=lambda p: 1.0 + p.sum(1), constraint=18.0)

    def cost(v):
        x = np.asarray(v) / 7.0
        return float(np.exp(3 * (x[0] - 0.7) ** 2 + 5 * (x[1] - 0.3) ** 2
                            + 2 * (x[2] - 0.55) ** 2))

    legal = [space.points(np.array([[a, b, c]]))[0] for a in range(8) for b in range(8)
             for c in range(8) if 1 + a + b + c <= 18]
    return space, cost, min(cost(v) for v in legal)


def test_tuner_finds_the_optimum_faster_than_random_search():
    """Evaluations until the optimum of a 512-point space (480 legal), over 3 seeds.
    Random search needs (480 + 1) / 2 on average; a run that misses it within the
    budget counts as budget + 1, which favours random search. Tolerance: each
    model-based method needs under 60 % of random search's (censored) total."""
    space, cost, opt = _toy_space()
    budget = 32
    found = {m: [] for m in T.METHODS}
    for seed in range(3):
        for m in T.METHODS:
            recs = T.run(m, space, cost, iterations=budget - 4, seed=seed, init=4,
                         candidates=256, area_samples=64, filter_steps=300,
                         filter_update_steps=10, dkl_steps=100, dkl_hidden=(32, 16, 4))
            hits = [k for k, r in enumerate(recs) if r.cost <= opt * (1 + 1e-9)]
            found[m].append(hits[0] + 1 if hits else budget + 1)
            assert all(r.area_mm2 <= space.constraint for r in recs)
            assert len({r.index for r in recs}) == len(recs)      # nothing evaluated twice
    print(found, f"(evaluations to the optimum, budget {budget})")
    for m in ("gp", "dkl"):
        assert sum(found[m]) < 0.6 * sum(found["random"]), found


def test_runs_are_reproducible():
    space, cost, _ = _toy_space()
    kw = dict(iterations=3, init=3, candidates=128, area_samples=32, filter_steps=50,
              dkl_steps=20, dkl_hidden=(8, 4))
    a = [r.index for r in T.run("dkl", space, cost, seed=5, **kw)]
    b = [r.index for r in T.run("dkl", space, cost, seed=5, **kw)]
    c = [r.index for r in T.run("gp", space, cost, seed=5, **kw)]
    assert a == b and a[:3] == c[:3]


def test_an_exhausted_space_is_a_clean_error():
    from pimforge.gen.errors import PimforgeError

    space = T.Space({"a": range(4), "b": range(4)}, area=lambda p: 1.0 + p.sum(1),
                    constraint=2.0)                      # 3 legal points
    recs = T.run("gp", space, lambda v: float(v.sum()), iterations=1, init=2, seed=0,
                 candidates=16, area_samples=16, filter_steps=20)
    assert sorted(r.index for r in recs) == [(0, 0), (0, 1), (1, 0)]
    with pytest.raises(PimforgeError, match="nearly exhausted"):
        T.run("random", space, lambda v: float(v.sum()), iterations=2, init=2, seed=0)


def test_top3_quality():
    q = T.top3_quality([4.0, float("inf"), 2.0, 1.0, 8.0])
    np.testing.assert_allclose(q, [0.25, 0.125, (0.25 + 0.5) / 3, (1 + 0.5 + 0.25) / 3,
                                   (1 + 0.5 + 0.25) / 3])


def test_evaluator_is_eq1_over_the_mapper(monkeypatch):
    """The cost of a point is the summed EDP of PIM-Mapper's mapping of its config (one
    real mapping of VGG16 on 2 x 2 nodes of 8 x 8 PEs)."""
    from pimforge.sim.nicepim import mapper

    seen = []
    real = mapper.map_network

    def spy(net, cfg, **kw):
        seen.append((cfg, real(net, cfg, **kw)))
        return seen[-1][1]

    monkeypatch.setattr(mapper, "map_network", spy)
    point = np.array([2, 2, 8, 8, 8192, 8192, 8192])
    ev = T.Evaluator(["vgg16"])
    got = ev(point)
    ((cfg, m),) = seen
    assert (cfg.nicepim.na_rows, cfg.nicepim.pe_cols, cfg.nicepim.banks_per_node,
            cfg.nicepim.bank_bytes) == (2, 8, 64, 8 << 20)
    lat, en = m.latency_cycles / (cfg.nicepim.freq_mhz * 1e6), m.energy_pj * 1e-12
    assert got.cost == pytest.approx(lat * en, rel=1e-9) and got.error == ""
    assert ev(point) is got and len(seen) == 1                  # cached


@pytest.fixture
def cheap_mapper(monkeypatch):
    """A stand-in for PIM-Mapper (seconds per network) in the command-line tests: latency
    falls with the PE count and energy grows with the buffers; one shape is unmappable."""
    from pimforge.gen.errors import CapacityError
    from pimforge.sim.nicepim import mapper

    def fake(net, cfg, **_):
        n = cfg.nicepim
        if n.pe_rows == 1 and n.pe_cols == 1:
            raise CapacityError("layer x fits no partition of the array")
        pes = n.nodes * n.pe_rows * n.pe_cols
        buf = n.ibuf_bytes + n.wbuf_bytes + n.obuf_bytes
        return mapper.Mapping(net.name, "fake", 1e9 / pes + 1e4 * n.nodes, 1e10 + buf * 1e3)

    monkeypatch.setattr(mapper, "map_network", fake)


def test_dse_nicepim_end_to_end(tmp_path, capsys, cheap_mapper):
    out = tmp_path / "dse"
    assert main(["dse", "nicepim", "--nets", "vgg16", "--iterations", "2", "--init", "2",
                 "--candidates", "64", "--area-samples", "128", "--seed", "3",
                 "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["settings"]["nets"] == ["vgg16"] and res["settings"]["methods"] == list(
        T.METHODS)
    with open(out / "points.csv") as f:
        assert f.readline().startswith('# {"schema": "pimforge.dse.nicepim.points"')
        rows = list(csv.DictReader(f))
    assert len(rows) == len(T.METHODS) * 4
    for r in rows:
        assert float(r["area_mm2"]) <= 48.0
        assert int(r["na_rows"]) * int(r["na_cols"]) * int(r["banks_per_node"]) == 256
    # the methods start from the same architectures
    first = {m: [tuple(r[k] for k in T.TABLE_I) for r in rows if r["method"] == m][:2]
             for m in T.METHODS}
    assert first["dkl"] == first["gp"] == first["random"] == first["sa"]
    for m in T.METHODS:
        q = res["quality_top3"][m]
        assert len(q) == 4 and q[2:] == sorted(q[2:])   # monotone once three are in
    assert (out / "convergence.png").read_bytes()[:4] == b"\x89PNG"
    assert "wrote" in capsys.readouterr().out
    assert not (out / "points.partial.csv").exists()      # published: the partial is gone


def test_dse_nicepim_stopped_keeps_what_it_evaluated(tmp_path, capsys, monkeypatch,
                                                     cheap_mapper):
    """Ctrl-C during the fifth evaluation: the four before it are in
    points.partial.csv (written atomically after each), and nothing is published."""
    from pimforge.sim.nicepim import mapper

    calls = []
    fake = mapper.map_network

    def stop_at_fifth(net, cfg, **kw):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return fake(net, cfg, **kw)

    monkeypatch.setattr(mapper, "map_network", stop_at_fifth)
    out = tmp_path / "dse"
    assert main(["dse", "nicepim", "--nets", "vgg16", "--iterations", "4", "--init", "2",
                 "--method", "random", "--seed", "3", "--out", str(out)]) != 0
    with open(out / "points.partial.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2, 3]
    assert not (out / "results.json").exists()
    got = capsys.readouterr()
    assert "4 architectures evaluated are kept" in got.out and "interrupted" in got.err


@pytest.mark.parametrize("argv, msg", [
    (["--nets", "lenet"], "unknown --nets 'lenet'; allowed: vgg16"),
    (["--nets", "vgg16,vgg16"], "'vgg16' is given twice"),
    (["--iterations", "0"], "must be between 1 and"),
    (["--method", "xgboost"], "invalid choice: 'xgboost'"),
    (["--area-limit", "-3"], "must be above 0"),
    (["--set", "nicepim.pe_rows=0"], "nicepim.pe_rows"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, msg):
    out = tmp_path / "o"
    assert main(["dse", "nicepim", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()
