"""The CapsNet PE: derived constants, approximation error bounds, the golden model's
op order, and the RTL against the golden model in the Amaranth simulator."""

import dataclasses
import random
import subprocess
import sys

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.rtl.capsnet import params as pc
from pimforge.rtl.capsnet.pe import Flow, from_config
from pimforge.verif.models.capsnet.approx_error import characterize
from pimforge.verif.models.capsnet.pe import PEModel, Record, f32_add
from pimforge.verif.tb.amaranth_sim import simulate


def _cfg(la=3, lm=3, steps=1, recovery=True):
    cfg = load_config()
    return cfg.replace(fp=dataclasses.replace(cfg.fp, add_latency=la, mul_latency=lm),
                       pe=dataclasses.replace(cfg.pe, newton_steps=steps,
                                              exp_recovery=recovery))


def _f(x):
    return int(np.float32(x).view(np.uint32))


def test_magic_constants_reproduce_lomont():
    # The search reproduces the constants of Lomont's analysis (seed alone; after
    # one Newton step), which it was not given.
    assert pc.isqrt_magic(0) == 0x5F37642F
    assert pc.isqrt_magic(1) == pc.isqrt_magic(3) == 0x5F375A86
    assert 0x7EF31100 <= pc.recip_magic(1) <= 0x7EF31200


def test_exp_avg_is_the_integral():
    f = np.linspace(0.0, 1.0, 200_001)
    assert abs(np.trapezoid(2.0 ** f - f, f) - pc.EXP_AVG) < 1e-9
    assert pc.EXP_BIAS == float(np.float32(pc.EXP_AVG + 126))


def test_recovery_factor_is_reproducible_and_seed_dependent():
    r = pc.exp_recovery_factor(10_000, 2019)
    assert r == pc.exp_recovery_factor(10_000, 2019)
    assert r != pc.exp_recovery_factor(10_000, 1)
    assert 0.99 < r < 1.01


@pytest.fixture(scope="module")
def table():
    rows = characterize(load_config(), samples=50_000, seed=3, steps=(0, 1, 2))
    return {(r.flow, r.variant.split(" R=")[0]): r for r in rows}


def test_isqrt_error_bounds(table):
    assert table["isqrt", "0 Newton"].max_rel < 0.035          # Lomont: 3.42%
    assert table["isqrt", "1 Newton"].max_rel < 0.002          # Lomont: 0.175%
    assert table["isqrt", "2 Newton"].max_rel < 1e-5


def test_recip_and_div_error_bounds(table):
    assert table["recip", "0 Newton"].max_rel < 0.06
    assert table["recip", "1 Newton"].max_rel < 0.003
    assert table["recip", "2 Newton"].max_rel < 1e-5
    assert table["div", "1 Newton"].max_rel < 0.003


def test_exp_error_and_recovery(table):
    plain, rec = table["exp", "no recovery"], table["exp", "recovery"]
    # 2**f ~ 1 + f + (Avg - 1): worst case a few percent, on average about 1.5%
    assert plain.max_rel < 0.045 and plain.mean_rel < 0.02
    assert rec.mean_rel < plain.mean_rel
    assert abs(rec.mean_signed) < abs(plain.mean_signed)


def test_mac_order_is_interleaved_lanes():
    r = np.random.default_rng(0)
    a = r.normal(size=23).astype(np.float32)
    b = r.normal(size=23).astype(np.float32)
    p = a * b
    for la in (1, 3, 4):
        lanes = [np.float32(-0.0)] * la
        for j, x in enumerate(p):
            lanes[j % la] = np.float32(lanes[j % la] + x)
        want = lanes[0]
        for s in lanes[1:]:
            want = np.float32(want + s)
        got = PEModel(_cfg(la=la)).mac(a.view(np.uint32), b.view(np.uint32))
        assert got == int(want.view(np.uint32)), la


def test_isqrt_model_op_order():
    c = pc.pe_constants(_cfg(steps=2))
    x = np.float32([0.3, 2.0, 1e-20, 7e12])
    y = ((c.isqrt_magic - (x.view(np.uint32).astype(np.int64) >> 1)) & 0xFFFFFFFF) \
        .astype(np.uint32).view(np.float32)
    h = x * np.float32(0.5)
    for _ in range(2):
        y = y * (np.float32(1.5) - (h * y) * y)
    assert np.array_equal(PEModel(_cfg(steps=2)).isqrt(x.view(np.uint32)), y.view(np.uint32))


def test_negative_zero_is_the_lane_identity():
    for v in (0x00000000, 0x80000000, 0x3F800000, 0x00000001, 0xFF800000):
        assert int(f32_add(0x80000000, v)) == v


def _stimulus(seed, n):
    r = random.Random(seed)
    recs, stim = [], []
    for i in range(n):
        if r.random() < 0.2:
            stim.append(None)
            continue
        flow = Flow.MAC if r.random() < 0.6 else Flow(r.randrange(1, 5))
        if flow is Flow.EXP:
            a = _f(r.uniform(-30, 30))
        elif flow is Flow.MAC:
            a = _f(r.gauss(0, 1))
        else:
            a = _f(10 ** r.uniform(-6, 6))
        rec = Record(flow, a, _f(r.gauss(0, 3)) if flow is not Flow.DIV else _f(r.uniform(.1, 9)),
                     r.random() < 0.1, r.random() < 0.2, i)
        recs.append(rec)
        stim.append(rec)
    return recs, stim


@pytest.mark.parametrize("la,lm,steps,recovery", [(3, 3, 1, True), (4, 1, 2, True),
                                                 (1, 2, 0, False), (2, 3, 3, True)])
def test_rtl_matches_model_in_amaranth_sim(la, lm, steps, recovery):
    cfg = _cfg(la, lm, steps, recovery)
    dut = from_config(cfg)
    recs, stim = _stimulus(la * 10 + steps, 250)
    want = PEModel(cfg).stream(recs)
    issued = {rec.tag: i for i, rec in enumerate(stim) if rec is not None}
    got = []

    async def tb(ctx):
        for i in range(len(stim) + dut.latency + 2):
            rec = stim[i] if i < len(stim) else None
            ctx.set(dut.in_valid, rec is not None)
            if rec is not None:
                ctx.set(dut.op, rec.op)
                ctx.set(dut.a, rec.a)
                ctx.set(dut.b, rec.b)
                ctx.set(dut.first, rec.first)
                ctx.set(dut.last, rec.last)
                ctx.set(dut.tag, rec.tag)
            await ctx.tick()
            if ctx.get(dut.out_valid):
                got.append((i, ctx.get(dut.out_tag), ctx.get(dut.result)))

    simulate(dut, tb)
    assert sum(1 for _, _, t in want if recs[[r.tag for r in recs].index(t)].op is Flow.MAC) > 5
    assert [(t, b) for _, b, t in want] == [(t, b) for _, t, b in got]
    for cyc, t, _ in got:
        assert cyc == issued[t] + dut.latency - 1
    assert dut.latencies["pe"] == max(dut.chain_latency, dut.mac_latency)


def test_bad_parameters_are_named():
    from pimforge.rtl.capsnet.pe import CapsNetPE
    with pytest.raises(ValueError, match="newton_steps must be an integer between 0 and 3, not 5"):
        CapsNetPE(add_latency=3, mul_latency=3, newton_steps=5, exp_recovery=True,
                  constants=pc.pe_constants(load_config()))


def test_approx_cli_prints_the_table(tmp_path):
    out = tmp_path / "a.json"
    r = subprocess.run([sys.executable, "-m", "pimforge.gen.cli", "approx", "--samples", "2000",
                        "--json", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "isqrt  1 Newton" in r.stdout and "exp    recovery" in r.stdout
    assert out.read_text().count('"flow"') == 11


@pytest.mark.parametrize("samples, seed", [(10_000, 2019), (5_000, 7)])
def test_calibration_path_is_bit_exact_with_the_golden_exp(samples, seed):
    """The constant R is derived in rtl/capsnet/params.py with plain IEEE float32 steps; on
    the calibration draw they must equal the golden exponential flow bit for bit."""
    from pimforge.verif.models.capsnet.pe import exp_approx

    x = pc.calibration_inputs(samples, seed)
    golden = exp_approx(x.view(np.uint32), recovery=None)
    assert np.array_equal(pc.exp_without_recovery(x).view(np.uint32), golden)
