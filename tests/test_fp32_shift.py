"""The FP32 shifter: its golden model against an integer-only reference, and the RTL
(Amaranth simulator, and the native stream driver on Verilator) against the model."""

import random
from fractions import Fraction

import numpy as np
import pytest

from pimforge.rtl.fp.shift import FP32Shift, ShiftOp
from pimforge.verif.models import fp32_shift as model
from pimforge.verif.tb.amaranth_sim import simulate

MAGICS = dict(isqrt_magic=0x5F3759DF, recip_magic=0x7EF311C3)
CORNERS = [0x00000000, 0x80000000, 0x00000001, 0x80000003, 0x007FFFFF, 0x00400000, 0x00800000,
           0x3F800000, 0xBF800001, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
           0x437F0000, 0x437EFFFF, 0x42FE0000]
KS = [0, 1, -1, 23, -23, 24, -24, 25, -25, 126, -127, 149, -150, 254, 300, -300, 511, -512]


def _value(bits: int) -> Fraction:
    s, e, m = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    v = Fraction(m, 1 << 23) * Fraction(2) ** -126 if e == 0 else \
        (1 + Fraction(m, 1 << 23)) * Fraction(2) ** (e - 127)
    return -v if s else v


def _ref_ldexp(bits: int, k: int) -> int:
    """Integer-only RNE rounding of value(bits) * 2**k to binary32."""
    s, e, m = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if e == 0xFF:
        return 0x7FC00000 if m else bits
    v = abs(_value(bits)) * Fraction(2) ** k
    if v == 0:
        return bits
    exp = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** exp > v:
        exp -= 1
    exp = max(exp, -126)                      # subnormals share the exponent of 2**-126
    q = v / Fraction(2) ** (exp - 23)         # significand in units of the last place
    n, rem = divmod(q.numerator, q.denominator)
    if 2 * rem > q.denominator or (2 * rem == q.denominator and n & 1):
        n += 1
    if n == 1 << 24:
        n, exp = n >> 1, exp + 1
    if exp > 127:
        return (s << 31) | 0x7F800000
    if n < 1 << 23:                           # subnormal (or rounded up into 2**-126)
        return (s << 31) | n
    return (s << 31) | ((exp + 127) << 23) | (n - (1 << 23))


def _ref_fix(bits: int, k: int) -> int:
    e, m = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if e == 0xFF and m:
        return 0x7FC00000
    if e == 0xFF:
        return 0 if bits >> 31 else 0x7F800000
    v = _value(bits) * Fraction(2) ** k
    return 0 if v <= 0 else min(int(v), 0x7F800000)


def _random_cases(n, seed):
    r = random.Random(seed)
    cases = [(a, k) for a in CORNERS for k in KS]
    for _ in range(n):
        a = r.getrandbits(32)
        if r.random() < 0.3:
            a = (a & 0x80000000) | r.getrandbits(r.choice([4, 12, 23, 25]))
        cases.append((a, r.choice([r.randint(-512, 511), r.randint(-30, 30)])))
    return cases


def test_ldexp_model_matches_integer_reference():
    cases = _random_cases(1500, 11)
    a = np.array([c[0] for c in cases], dtype=np.uint32)
    k = np.array([c[1] for c in cases])
    got = model.ldexp(a, k)
    bad = [(hex(x), y, hex(int(g)), hex(_ref_ldexp(x, y))) for (x, y), g in zip(cases, got)
           if int(g) != _ref_ldexp(x, y)]
    assert not bad, bad[:10]


def test_fix_model_matches_integer_reference():
    cases = _random_cases(1500, 12) + [(int(np.float32(v).view(np.uint32)), 23)
                                       for v in (0.5, 1.0, 126.94, 254.999, 255.0, 300.0)]
    a = np.array([c[0] for c in cases], dtype=np.uint32)
    k = np.array([c[1] for c in cases])
    got = model.fix(a, k)
    bad = [(hex(x), y, hex(int(g)), hex(_ref_fix(x, y))) for (x, y), g in zip(cases, got)
           if int(g) != _ref_fix(x, y)]
    assert not bad, bad[:10]


def test_fix_is_the_exp_bit_pattern():
    # y' = 130.25 -> exponent field 130, fraction 0.25: 2**3 * 1.25 = 10
    y = np.float32(130.25).view(np.uint32)
    assert model.fix(y, 23).view(np.float32) == np.float32(10.0)


def test_shifts_and_seeds():
    a = np.array([0x80000001, 0x12345678], dtype=np.uint32)
    assert list(model.srl(a, 4)) == [0x08000000, 0x01234567]
    assert list(model.srl(a, -4)) == [0x00000010, 0x23456780]
    assert list(model.sll(a, 32)) == [0, 0]
    assert int(model.isqrt_seed(np.uint32(0x3F800000), 0x5F3759DF)) == 0x5F3759DF - 0x1FC00000
    assert int(model.recip_seed(np.uint32(0xBF800000), 0x7EF311C3)) == \
        (0x7EF311C3 - 0xBF800000) & 0xFFFFFFFF


@pytest.mark.parametrize("latency", [1, 2])
def test_rtl_matches_model_in_amaranth_sim(latency):
    dut = FP32Shift(latency=latency, **MAGICS)
    r = random.Random(3)
    cases = [(op, a, k) for op in ShiftOp for a, k in _random_cases(40, 5)[::7]]
    r.shuffle(cases)
    got = []

    async def tb(ctx):
        for i in range(len(cases) + latency + 1):
            if i < len(cases):
                op, a, k = cases[i]
                ctx.set(dut.op, op)
                ctx.set(dut.a, a)
                ctx.set(dut.k, k)
                ctx.set(dut.in_valid, 1)
            else:
                ctx.set(dut.in_valid, 0)
            await ctx.tick()
            if ctx.get(dut.out_valid):
                got.append((i, ctx.get(dut.result)))

    simulate(dut, tb)
    assert len(got) == len(cases)
    for (_i, res), (op, a, k) in zip(got, cases):
        assert res == int(model.shift(op, np.uint32(a), k, **MAGICS)), (op, hex(a), k)
    assert got[0][0] == latency - 1  # read after the edge that registers stage `latency`


@pytest.mark.cocotb
def test_stream_driver_runs_the_shifter(tmp_path):
    """The native driver: results, their cycles (input cycle + latency) and idle cycles."""
    from pimforge.gen.config import load_config
    from pimforge.gen.elaborate import elaborate
    from pimforge.rtl.capsnet.params import pe_constants
    from pimforge.sim.stream import StreamDriver

    cfg = load_config()
    el = elaborate("fp32_shift", cfg)
    c = pe_constants(cfg)
    drv = StreamDriver(el)
    r = np.random.default_rng(4)
    n = 5000
    recs = drv.records(n)
    recs["in_valid"] = r.random(n) < 0.7
    recs["op"] = r.integers(0, len(ShiftOp), n)
    recs["a"] = r.integers(0, 2**32, n, dtype=np.uint64)
    recs["k"] = r.integers(-512, 512, n) & 0x3FF
    res = drv.run(recs, drain=3)
    assert res.cycles == n + 3
    v = recs["in_valid"].astype(bool)
    assert np.array_equal(res.outputs["cycle"], np.flatnonzero(v) + 1)
    k = recs["k"].astype(np.int64)
    k = np.where(k >= 512, k - 1024, k)
    want = [int(model.shift(ShiftOp(int(o)), np.uint32(a), int(kk), isqrt_magic=c.isqrt_magic,
                            recip_magic=c.recip_magic))
            for o, a, kk in zip(recs["op"][v], recs["a"][v], k[v])]
    assert res.outputs["result"].tolist() == want
