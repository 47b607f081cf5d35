"""Unit tests of the binary32 adder and multiplier in Amaranth's simulator,
and of the golden model they are compared with."""

import dataclasses
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate
from pimforge.rtl.fp import add as fp_add
from pimforge.rtl.fp import mul as fp_mul
from pimforge.rtl.fp.add import FP32Add
from pimforge.rtl.fp.mul import FP32Mul
from pimforge.rtl.params import ParameterError
from pimforge.verif.models.fp32 import (
    QNAN,
    corner_pairs,
    corner_values,
    fp32_add,
    fp32_mul,
    is_nan,
    random_pairs,
    ref_add,
    ref_mul,
)
from pimforge.verif.tb.amaranth_sim import simulate

# Components built only to check their constructor are never elaborated.
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

SEED = 20261122
UNITS = {"add": (FP32Add, fp32_add, ref_add), "mul": (FP32Mul, fp32_mul, ref_mul)}


def _vectors(op: str, n_corner: int, n_random: int, seed: int):
    rng = random.Random(f"{seed}:{op}")
    ca, cb = corner_pairs()
    pick = rng.sample(range(len(ca)), n_corner)
    ra, rb = random_pairs(rng, n_random, op)
    return (np.concatenate([ca[pick], ra]).tolist(), np.concatenate([cb[pick], rb]).tolist())


def _simulate(dut, a_list, b_list, rng):
    """Stream the operands (with random idle cycles); return [(issue, seen, result)]."""
    issued, seen = [], []

    async def bench(ctx):
        cycle = 0
        i = 0
        while i < len(a_list) or len(seen) < len(a_list):
            if i < len(a_list) and rng.random() < 0.8:
                ctx.set(dut.a, a_list[i])
                ctx.set(dut.b, b_list[i])
                ctx.set(dut.in_valid, 1)
                issued.append(cycle)
                i += 1
            else:
                # Garbage on the data inputs while idle must not matter.
                ctx.set(dut.a, rng.getrandbits(32))
                ctx.set(dut.b, rng.getrandbits(32))
                ctx.set(dut.in_valid, 0)
            await ctx.tick()
            if ctx.get(dut.out_valid):
                seen.append((cycle, ctx.get(dut.result)))
            cycle += 1
            assert cycle < 4 * len(a_list) + 50, "results stopped coming"

    simulate(dut, bench, period=1e-8)
    return [(iss, cyc, res) for iss, (cyc, res) in zip(issued, seen, strict=True)]


@pytest.mark.parametrize("latency", [1, 3])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_unit_matches_golden(op, latency):
    cls, golden, _ = UNITS[op]
    a, b = _vectors(op, 200, 200, SEED + latency)
    rng = random.Random(f"{SEED}:{op}:{latency}:sim")
    out = _simulate(cls(latency=latency), a, b, rng)
    expect = golden(np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)).tolist()
    for (issue, seen, got), x, y, want in zip(out, a, b, expect, strict=True):
        # Sampled after the edge that closes cycle issue + latency - 1.
        assert seen == issue + latency - 1, f"result of cycle {issue} came at {seen}"
        assert got == want, f"{op}({x:#010x}, {y:#010x}) = {got:#010x}, expected {want:#010x}"


def test_latency_two_and_eight_are_exact():
    # Latency 2 and 8 place registers differently (one internal cut; extra output stages).
    for cls, golden, latency in ((FP32Add, fp32_add, 2), (FP32Mul, fp32_mul, 8)):
        a, b = _vectors("add" if cls is FP32Add else "mul", 40, 40, SEED)
        out = _simulate(cls(latency=latency), a, b, random.Random(SEED))
        expect = golden(np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)).tolist()
        assert [r for _, _, r in out] == expect
        assert all(seen - issue == latency - 1 for issue, seen, _ in out)


@pytest.mark.parametrize("cls", [FP32Add, FP32Mul])
@pytest.mark.parametrize("bad", [0, 9, 2.0, True])
def test_latency_is_validated(cls, bad):
    message = f"latency must be an integer between 1 and 8, not {bad!r}"
    # A generator's parameter error (the config's ConfigError is a subclass of it).
    with pytest.raises(ParameterError, match=message):
        cls(latency=bad)


def test_from_config_uses_fp_section(preset):
    cfg = preset("default")
    cfg = dataclasses.replace(cfg, fp=dataclasses.replace(cfg.fp, add_latency=5, mul_latency=2))
    assert fp_add.from_config(cfg).latencies == {"result": 5}
    assert fp_mul.from_config(cfg).latency == 2


@pytest.mark.parametrize("block", ["fp32_add", "fp32_mul"])
def test_manifest_ports_and_latency(block):
    el = elaborate(block, load_config("default"))
    ports = {(p["name"], p["dir"], p["width"]) for p in el.manifest["ports"]}
    assert ports == {("clk", "input", 1), ("rst", "input", 1), ("a", "input", 32),
                     ("b", "input", 32), ("in_valid", "input", 1), ("result", "output", 32),
                     ("out_valid", "output", 1)}
    assert el.manifest["latencies"] == {"result": 3}


# -- The golden model against the integer-only reference --------------------------

@pytest.mark.parametrize("op", ["add", "mul"])
def test_numpy_model_matches_integer_reference(op):
    _, golden, ref = UNITS[op]
    ca, cb = corner_pairs()
    ra, rb = random_pairs(random.Random(f"{SEED}:ref:{op}"), 5000, op)
    a, b = np.concatenate([ca, ra]), np.concatenate([cb, rb])
    got = golden(a, b).tolist()
    bad = [(x, y, g) for x, y, g in zip(a.tolist(), b.tolist(), got, strict=True)
           if ref(x, y) != g]
    assert not bad, [f"{x:#010x} {op} {y:#010x}: numpy {g:#010x}, exact {ref(x, y):#010x}"
                     for x, y, g in bad[:5]]
    # The stimulus must reach subnormal results (or numpy's own FTZ would go unnoticed).
    res = np.array(got, dtype=np.uint32)
    assert np.count_nonzero(((res & 0x7F800000) == 0) & ((res & 0x7FFFFF) != 0)) > 100


def test_reference_ieee_rules():
    one, tie, three_tie = 0x3F800000, 0x33800000, 0x34400000
    assert ref_add(one, tie) == one                      # tie to even: down
    assert ref_add(one, three_tie) == 0x3F800002         # tie to even: up
    assert ref_add(0x80000000, 0x80000000) == 0x80000000  # (-0) + (-0) = -0
    assert ref_add(0x3FC00000, 0xBFC00000) == 0          # x + (-x) = +0
    assert ref_add(0x7F800000, 0xFF800000) == QNAN       # inf - inf
    assert ref_add(0x7F7FFFFF, 0x7F7FFFFF) == 0x7F800000  # overflow to inf
    assert ref_add(0x00000001, 0x007FFFFF) == 0x00800000  # subnormals sum to the min normal
    assert ref_mul(0x00000000, 0xFF800000) == QNAN       # 0 * inf
    assert ref_mul(0x80000000, 0x3F800000) == 0x80000000  # sign of zero product
    assert ref_mul(0x3F800800, 0x3F800800) == 0x3F801000  # (1+2**-12)**2: tie to even
    assert ref_mul(0x00000001, 0x3F000000) == 0          # 2**-150: tie to even (zero)
    assert ref_mul(0x00000001, 0x3F400000) == 1          # 0.75 * 2**-149 rounds up
    assert ref_mul(0x1F800000, 0x1F800000) == 0x00200000  # 2**-128 is subnormal


def test_golden_canonical_nan_and_scalars():
    assert fp32_add(0x7F800001, 0x3F800000) == QNAN
    assert fp32_mul(0xFFC12345, 0) == QNAN
    assert isinstance(fp32_add(1, 2), int)
    assert is_nan(np.array([0x7F800001, 0x7F800000], dtype=np.uint32)).tolist() == [True, False]
    assert len(set(corner_values())) == len(corner_values())


@pytest.mark.parametrize("latency", [1, 2, 3, 8])
@pytest.mark.parametrize("block", ["fp32_add", "fp32_mul"])
def test_verilog_lints_at_every_stage_placement(tmp_path, block, latency, preset):
    from pimforge.sim.verilator import lint

    cfg = preset("default")
    cfg = dataclasses.replace(cfg, fp=dataclasses.replace(cfg.fp, add_latency=latency,
                                                          mul_latency=latency))
    el = elaborate(block, cfg)
    verilog, _ = el.write(tmp_path)
    lint(verilog, block)  # default Verilator warnings are fatal
    assert el.manifest["latencies"] == {"result": latency}


# -- Shared helpers (also used by other FP blocks) ----------------------------------

def test_lzc_and_shifters():
    from amaranth.hdl import Module, Signal

    from pimforge.rtl.fp.ieee import lzc, shift_left, shift_right_sticky

    m = Module()
    v28, v48, amt = Signal(28), Signal(48), Signal(7)
    z28, z48 = lzc(m, v28, "z28"), lzc(m, v48, "z48")
    left = shift_left(m, v28, amt[:5], "l")
    right, sticky = shift_right_sticky(m, v48, amt, "r")
    rng = random.Random(SEED)

    async def bench(ctx):
        for _ in range(300):
            a = rng.getrandbits(28) >> rng.randrange(29)
            b = rng.getrandbits(48) >> rng.randrange(49)
            n = rng.randrange(128)
            ctx.set(v28, a)
            ctx.set(v48, b)
            ctx.set(amt, n)
            assert ctx.get(z28) == 28 - a.bit_length()
            assert ctx.get(z48) == 48 - b.bit_length()
            assert ctx.get(left) == (a << (n % 32)) & (2**28 - 1)
            assert ctx.get(right) == b >> n
            assert ctx.get(sticky) == int(b & ((1 << n) - 1) != 0)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
