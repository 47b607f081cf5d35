"""The on-chip SRAM leaf (``rtl/mem/sram.py``): its Amaranth form and its hand-written
Verilog against one cycle model, on random writes with lane enables and reads with and
without a read enable, and a Verilog text that does not grow with the depth."""

import logging
import os
import random

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pimforge.gen.elaborate import LINT_HEADER, Elaborated
from pimforge.rtl.describe import ports
from pimforge.rtl.hierarchy import leaf_scope
from pimforge.rtl.mem.sram import SRAM, sram_leaf, sram_verilog
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", random.randrange(2**32)))

#: (width, depth, lanes, read_en): lanes and a read enable, and a one-word memory.
SHAPES = [(64, 16, 4, True), (32, 1, 1, False)]


def stimulus(rng, n, width, depth, lanes, read_en):
    return {"w_en": rng.integers(0, 2**lanes, n), "w_addr": rng.integers(0, depth, n),
            "w_data": rng.integers(0, 2**width, n, dtype=np.uint64),
            "r_en": rng.integers(0, 2, n) if read_en else np.ones(n, dtype=int),
            "r_addr": rng.integers(0, depth, n)}


def model(st, width, depth, lanes):
    """``r_data`` after each clock edge (edge c takes the inputs of cycle c)."""
    g = width // lanes
    mem, q, out = [0] * depth, 0, []
    for c in range(len(st["w_en"])):
        nq = mem[int(st["r_addr"][c])] if st["r_en"][c] else q
        a = int(st["w_addr"][c])
        for i in range(lanes):
            if (int(st["w_en"][c]) >> i) & 1:
                m = ((1 << g) - 1) << (i * g)
                mem[a] = (mem[a] & ~m) | (int(st["w_data"][c]) & m)
        q = nq
        out.append(q)
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_amaranth_form_matches_the_model(shape):
    width, depth, lanes, read_en = shape
    rng = np.random.default_rng([SEED, *shape])
    log.info("seed %d (rerun with PIMFORGE_SEED=%d)", SEED, SEED)
    n = 400
    st = stimulus(rng, n, width, depth, lanes, read_en)
    dut = SRAM(width=width, depth=depth, lanes=lanes, read_en=read_en)
    got = []

    async def tb(ctx):
        for c in range(n):
            for k, v in st.items():
                if k != "r_en" or read_en:
                    ctx.set(getattr(dut, k), int(v[c]))
            await ctx.tick()
            got.append(ctx.get(dut.r_data))

    simulate(dut, tb)
    assert got == model(st, width, depth, lanes), f"seed {SEED}"


class _Wrap(wiring.Component):
    """The leaf with the stream driver's ``rst`` and ``out_valid``."""

    def __init__(self, width, depth, lanes, read_en):
        self.kw = dict(width=width, depth=depth, lanes=lanes, read_en=read_en)
        abits = max(1, (depth - 1).bit_length())
        super().__init__({"w_en": In(lanes), "w_addr": In(abits), "w_data": In(width),
                          "r_en": In(1), "r_addr": In(abits), "r_data": Out(width),
                          "out_valid": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ram = sram_leaf(**self.kw)
        for k in ("w_en", "w_addr", "w_data", "r_addr"):
            m.d.comb += getattr(ram, k).eq(getattr(self, k))
        if self.kw["read_en"]:
            m.d.comb += ram.r_en.eq(self.r_en)
        up = Signal()
        m.d.sync += up.eq(1)
        m.d.comb += [self.r_data.eq(ram.r_data), self.out_valid.eq(up)]
        return m


@pytest.mark.cocotb
@pytest.mark.parametrize("shape", SHAPES)
def test_verilog_matches_the_model_on_verilator(shape):
    """The leaf's own Verilog (not Amaranth's) on a native Verilator loop."""
    from pimforge.sim.stream import StreamDriver

    width, depth, lanes, read_en = shape
    with leaf_scope() as leaves:
        top = _Wrap(width, depth, lanes, read_en)
        text = verilog.convert(top, name="sram_wrap", emit_src=False)
    (name,) = leaves.order
    assert name.startswith("sram_") and "initial" in leaves.modules[name].verilog
    text = LINT_HEADER + text + leaves.modules[name].verilog
    drv = StreamDriver(Elaborated("sram_wrap", text, {"ports": ports(top)}),
                       name=f"sram-{width}-{depth}-{lanes}-{int(read_en)}")
    rng = np.random.default_rng([SEED, *shape, 1])
    log.info("seed %d (rerun with PIMFORGE_SEED=%d)", SEED, SEED)
    n = 2000
    st = stimulus(rng, n, width, depth, lanes, read_en)
    recs = drv.records(n)
    for k, v in st.items():
        recs[k] = v
    res = drv.run(recs, drain=1)
    # the outputs of cycle c show the state after c edges: edges 0..n
    want = model(st, width, depth, lanes)
    assert res.outputs["cycle"].tolist() == list(range(1, n + 1))
    assert res.outputs["r_data"].tolist() == want, f"seed {SEED}"


def test_verilog_does_not_grow_with_the_depth():
    small, big = (sram_verilog("m", width=128, depth=d, lanes=4) for d in (16, 1 << 16))
    assert len(small.splitlines()) == len(big.splitlines()) < 40
    assert "[0:65535]" in big


@pytest.mark.parametrize("kw, msg", [
    ({"width": 32, "depth": 0}, "depth must be a positive integer, not 0"),
    ({"width": 32, "depth": 8, "lanes": 3}, "lanes must divide its width 32, not 3"),
])
def test_bad_shape_is_one_line(kw, msg):
    for make in (sram_leaf, lambda **k: sram_verilog("m", **k)):   # checked before any block
        with pytest.raises(ValueError, match=msg):
            make(**kw)
