"""Leaf modules: one Verilog module per distinct block, same behaviour in simulation."""

import re

import pytest
from amaranth import Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pimforge.rtl.fp.add import FP32Add
from pimforge.rtl.hierarchy import Leaf, leaf_scope
from pimforge.sim.verilator import lint
from pimforge.verif.models.fp32 import fp32_add
from pimforge.verif.tb.amaranth_sim import simulate


class ThreeAdders(wiring.Component):
    """Sums four operands with three leaf adders (two levels)."""

    x: In(32).array(4)
    y: Out(32)

    def __init__(self, latency=2):
        self.lat = latency
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        units = [Leaf(f"fp32_add_l{self.lat}", lambda: FP32Add(latency=self.lat))
                 for _ in range(3)]
        for i, u in enumerate(units):
            m.submodules[f"u{i}"] = u
            m.d.comb += u.in_valid.eq(1)
        m.d.comb += [units[0].a.eq(self.x[0]), units[0].b.eq(self.x[1]),
                     units[1].a.eq(self.x[2]), units[1].b.eq(self.x[3]),
                     units[2].a.eq(units[0].result), units[2].b.eq(units[1].result),
                     self.y.eq(units[2].result)]
        return m


def test_leaf_is_emitted_once_and_lints(tmp_path):
    with leaf_scope() as scope:
        top = ThreeAdders()
        text = verilog.convert(top, name="three", emit_src=False)
    assert scope.order == ["fp32_add_l2"]
    assert len(re.findall(r"^\s*fp32_add_l2 \S+ \(", text, re.M)) == 3
    full = text + scope.modules["fp32_add_l2"].verilog
    assert len(re.findall(r"^module fp32_add_l2\(", full, re.M)) == 1
    (tmp_path / "three.v").write_text(full)
    lint(tmp_path / "three.v", "three")


def test_leaf_outside_scope_simulates_like_the_block():
    import numpy as np

    dut = ThreeAdders(latency=1)
    vals = np.array([1.5, -2.25, 1e-40, 3.0], dtype=np.float32).view(np.uint32)
    want = fp32_add(fp32_add(vals[0:1], vals[1:2]), fp32_add(vals[2:3], vals[3:4]))[0]

    async def tb(ctx):
        for i in range(4):
            ctx.set(dut.x[i], int(vals[i]))
        await ctx.tick().repeat(3)
        assert ctx.get(dut.y) == int(want)

    simulate(dut, tb, period=1e-8)


def test_one_name_two_blocks_is_an_error():
    with leaf_scope():
        Leaf("fp32_add_x", lambda: FP32Add(latency=1))
        with pytest.raises(ValueError, match="must encode every parameter"):
            Leaf("fp32_add_x", lambda: FP32Add(latency=2))
