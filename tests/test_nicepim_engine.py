"""The NicePIM NN engine in the Amaranth simulator: convolution and matmul tiles bit-exact
against numpy int64 (random shapes, strides, padding), and the tile cycle formula of the
engine's docstring against the RTL."""

import logging
import os
import random

import numpy as np
import pytest

from pimforge.rtl.nicepim.engine import NNEngine
from pimforge.rtl.nicepim.params import Op
from pimforge.rtl.nicepim.pe_array import PEArray
from pimforge.rtl.params import ParameterError
from pimforge.verif.models.nicepim import engine_buffers, engine_tile, tile_cycles
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "1"))


def _unpack_signed(word, n, bits):
    vals = [(word >> (bits * i)) & ((1 << bits) - 1) for i in range(n)]
    return [v - (1 << bits) if v >> (bits - 1) else v for v in vals]


def run_tile(R, C, x, w, *, stride, pad, oh, ow, acc_from=None, nb=1, ni=1):
    """Run one tile on an engine of R x C PEs whose weight buffer has rows of *nb* lines
    and whose input buffer rows of *ni* (each line written into its slot); (output
    [oh*ow, C], cycles)."""
    _, nh, nw = x.shape
    _, _, kh, kw = w.shape
    ilines, wlines, cb = engine_buffers(R, C, x, w, ni)
    wdepth = -(-max(R, 2, len(wlines)) // (2 * nb)) * 2 * nb
    idepth = -(-max(2, len(ilines)) // (2 * ni)) * 2 * ni
    dut = NNEngine(pe_rows=R, pe_cols=C, ibuf_lines=idepth, wbuf_lines=wdepth,
                   obuf_lines=max(2, oh * ow), wbuf_row_lines=nb, ibuf_row_lines=ni)
    out = {}

    async def bench(ctx):
        for a, line in enumerate(ilines):
            row, slot = divmod(a, ni)
            ctx.set(dut.ibuf_w.addr, row)
            ctx.set(dut.ibuf_w.data, line << (slot * R * 16))
            ctx.set(dut.ibuf_w.en, ((1 << R) - 1) << (slot * R))
            await ctx.tick()
        ctx.set(dut.ibuf_w.en, 0)
        for a, line in enumerate(wlines):
            row, slot = divmod(a, nb)
            ctx.set(dut.wbuf_w.addr, row)
            ctx.set(dut.wbuf_w.data, line << (slot * C * 16))
            ctx.set(dut.wbuf_w.en, ((1 << C) - 1) << (slot * C))
            await ctx.tick()
        ctx.set(dut.wbuf_w.en, 0)
        t = dut.task
        for name, val in (("op", Op.COMPUTE), ("cb", cb), ("nh", nh), ("nw", nw), ("kh", kh),
                          ("kw", kw), ("stride", stride), ("pad", pad), ("oh", oh),
                          ("ow", ow), ("acc", 0)):
            ctx.set(getattr(t, name), val)
        passes = []
        for acc in ([0] if acc_from is None else [0, 1]):
            ctx.set(t.acc, acc)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            cycles = 0
            while ctx.get(dut.busy):
                cycles += 1
                await ctx.tick()
            passes.append(cycles)
        res = []
        for a in range(oh * ow):
            ctx.set(dut.obuf_r.addr, a)
            await ctx.tick()
            res.append(_unpack_signed(ctx.get(dut.obuf_r.data), C, 32))
        out["y"] = np.array(res, dtype=np.int64)
        out["cycles"] = passes

    simulate(dut, bench)
    return out["y"], out["cycles"]


def _random_tile(r, R, C):
    K = r.randint(1, 2 * R)
    CO = r.randint(1, C)
    kh, kw = r.randint(1, 3), r.randint(1, 3)
    stride, pad = r.randint(1, 2), r.randint(0, 2)
    nh, nw = r.randint(kh, kh + 4), r.randint(kw, kw + 4)
    oh = (nh + 2 * pad - kh) // stride + 1
    ow = (nw + 2 * pad - kw) // stride + 1
    x = np.array([[[r.randint(-2000, 2000) for _ in range(nw)] for _ in range(nh)]
                  for _ in range(K)])
    w = np.array([[[[r.randint(-2000, 2000) for _ in range(kw)] for _ in range(kh)]
                   for _ in range(K)] for _ in range(CO)])
    return x, w, dict(stride=stride, pad=pad, oh=oh, ow=ow)


@pytest.mark.parametrize("R, C, k", [(4, 4, 0), (3, 2, 1), (2, 5, 2), (1, 1, 3), (4, 4, 4),
                                     (2, 8, 5), (8, 2, 6), (3, 6, 7), (6, 3, 8), (1, 4, 9),
                                     (5, 1, 10), (4, 7, 11)])
def test_conv_tile_bit_exact_and_cycles(R, C, k):
    seed = SEED * 1000 + k
    r = random.Random(seed)
    x, w, geo = _random_tile(r, R, C)
    log.info("seed %d: R %d C %d x %s w %s %s", seed, R, C, x.shape, w.shape, geo)
    y, (cycles,) = run_tile(R, C, x, w, **geo)
    want = engine_tile(x, w, **geo)
    assert np.array_equal(y[:, :w.shape[0]], want), f"seed {seed}"
    assert not y[:, w.shape[0]:].any(), f"seed {seed}: unused columns must stay 0"
    cb = -(-x.shape[0] // R)
    f = tile_cycles(pe_rows=R, pe_cols=C, cb=cb, kh=w.shape[2], kw=w.shape[3],
                    oh=geo["oh"], ow=geo["ow"])
    log.info("cycles: RTL %d, formula %d", cycles, f)
    assert cycles == f, f"seed {seed}: RTL {cycles} vs formula {f}"


@pytest.mark.parametrize("R, C, nb, k", [(4, 4, 4, 0), (4, 2, 2, 1), (8, 2, 4, 2),
                                         (2, 8, 2, 3)])
def test_weight_rows_of_several_lines(R, C, nb, k):
    """A weight buffer whose SRAM rows hold *nb* lines (a DRAM word of weights): every
    pass reads its own lines out of the rows, bit-exact and at the formula's cycles."""
    seed = SEED * 1000 + 700 + k
    r = random.Random(seed)
    x, w, geo = _random_tile(r, R, C)
    log.info("seed %d: R %d C %d nb %d x %s w %s %s", seed, R, C, nb, x.shape, w.shape, geo)
    y, (cycles,) = run_tile(R, C, x, w, nb=nb, **geo)
    assert np.array_equal(y[:, :w.shape[0]], engine_tile(x, w, **geo)), f"seed {seed}"
    assert cycles == tile_cycles(pe_rows=R, pe_cols=C, cb=-(-x.shape[0] // R), kh=w.shape[2],
                                 kw=w.shape[3], oh=geo["oh"], ow=geo["ow"]), f"seed {seed}"


@pytest.mark.parametrize("R, C, ni, k", [(4, 4, 4, 0), (2, 3, 2, 1), (4, 2, 8, 2),
                                         (1, 4, 4, 3), (2, 2, 4, 4)])
def test_input_rows_of_several_lines(R, C, ni, k):
    """An input buffer whose SRAM rows hold *ni* lines (a DRAM word of inputs), a pixel's
    channel blocks of a group of *ni* consecutive (the last group smaller): every pass
    reads its block of its pixel, bit-exact and at the formula's cycles."""
    seed = SEED * 1000 + 800 + k
    r = random.Random(seed)
    x, w, geo = _random_tile(r, R, C)
    # channels for several groups, the last one partial
    K = r.randint(ni * R + 1, 3 * ni * R - 1)
    x = np.array([[[r.randint(-2000, 2000) for _ in range(x.shape[2])]
                   for _ in range(x.shape[1])] for _ in range(K)])
    w = np.array([[[[r.randint(-2000, 2000) for _ in range(w.shape[3])]
                    for _ in range(w.shape[2])] for _ in range(K)] for _ in range(w.shape[0])])
    log.info("seed %d: R %d C %d ni %d x %s w %s %s", seed, R, C, ni, x.shape, w.shape, geo)
    y, (cycles,) = run_tile(R, C, x, w, ni=ni, **geo)
    assert np.array_equal(y[:, :w.shape[0]], engine_tile(x, w, **geo)), f"seed {seed}"
    assert cycles == tile_cycles(pe_rows=R, pe_cols=C, cb=-(-K // R), kh=w.shape[2],
                                 kw=w.shape[3], oh=geo["oh"], ow=geo["ow"]), f"seed {seed}"


def test_background_weights_at_the_pass_gap():
    """Passes shorter than, equal to and just longer than the weight loading's pace
    (:func:`pass_gap`), with several passes each: every sum uses its own pass's weights
    and the tile takes exactly the formula's cycles."""
    from pimforge.rtl.nicepim.engine import pass_gap

    seed = SEED * 1000 + 500
    r = random.Random(seed)
    for i in range(24):
        R, C = r.randint(1, 6), r.randint(1, 8)
        g = pass_gap(R, C)
        n = r.choice([1, g - 1, g, g + 1]) or 1
        K, CO = r.randint(1, 2 * R), r.randint(1, C)
        kw = r.randint(1, 3)
        x = np.array([[[r.randint(-2000, 2000) for _ in range(n + kw - 1)]] for _ in range(K)])
        w = np.array([[[[r.randint(-2000, 2000) for _ in range(kw)]] for _ in range(K)]
                      for _ in range(CO)])
        geo = dict(stride=1, pad=0, oh=1, ow=n)
        log.info("seed %d case %d: R %d C %d gap %d N %d K %d kw %d", seed, i, R, C, g, n, K, kw)
        y, (cycles,) = run_tile(R, C, x, w, **geo)
        assert np.array_equal(y[:, :CO], engine_tile(x, w, **geo)), f"seed {seed} case {i}"
        want = tile_cycles(pe_rows=R, pe_cols=C, cb=-(-K // R), kh=1, kw=kw, oh=1, ow=n)
        assert cycles == want, f"seed {seed} case {i}: RTL {cycles} vs formula {want}"


def test_matmul_tile_and_accumulate():
    r = random.Random(SEED * 1000 + 77)
    R, C, M, K, N = 4, 4, 7, 6, 3
    a = np.array([[r.randint(-30000, 30000) for _ in range(K)] for _ in range(M)])
    b = np.array([[r.randint(-30000, 30000) for _ in range(N)] for _ in range(K)])
    # A matmul tile is a 1 x M image of K channels and a 1 x 1 kernel.
    x = a.T.reshape(K, 1, M)
    w = b.T.reshape(N, K, 1, 1)
    y, cycles = run_tile(R, C, x, w, stride=1, pad=0, oh=1, ow=M, acc_from=1)
    # Run twice, the second with acc: the output buffer holds twice the product
    # (wrapping at 32 bits: these products leave the int32 range).
    want = (2 * (a.astype(np.int64) @ b)).astype(np.int64)
    want = ((want + 2**31) % 2**32) - 2**31
    assert np.array_equal(y[:, :N], want)
    assert cycles[0] == cycles[1] == tile_cycles(pe_rows=R, pe_cols=C, cb=2, kh=1, kw=1,
                                                 oh=1, ow=M)


def test_parameters_checked():
    with pytest.raises(ParameterError, match="rows must be an integer between 1 and 256, "
                                             "not 300"):
        PEArray(rows=300, cols=4)
    with pytest.raises(ParameterError, match="wbuf_lines must be at least pe_rows"):
        NNEngine(pe_rows=8, pe_cols=2, ibuf_lines=4, wbuf_lines=4, obuf_lines=4)


def test_output_stationary_is_refused_in_one_line():
    from pimforge.gen.config import load_config
    from pimforge.rtl.nicepim.engine import from_config

    cfg = load_config("nicepim_small", {"nicepim.dataflow": "os"})
    with pytest.raises(ParameterError, match=r"^nicepim.dataflow must be 'ws' .*, not 'os'$"):
        from_config(cfg)
