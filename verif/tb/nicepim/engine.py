"""cocotb testbench of the NicePIM NN engine (``nn_engine``) against the int64 golden model.

Random convolution tiles (channel blocks, kernel, stride, padding, window) and a
matrix-multiplication tile are written into the engine's input and weight buffers
through its write ports, run, and read back from the output buffer: every output
must equal :func:`pimforge.verif.models.nicepim.engine_tile` bit for bit, and the
tile must take exactly :func:`~pimforge.verif.models.nicepim.tile_cycles` cycles.
A second run with ``acc`` adds onto the first.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from pimforge.rtl.nicepim.params import (
    DATA_BITS,
    PSUM_BITS,
    TASK_LAYOUT,
    Op,
    ibuf_row_lines,
    wbuf_row_lines,
)

from ...models.nicepim import engine_buffers, engine_tile, tile_cycles, wrap32
from ..common import bench, rng, start


def _geometry():
    n = bench()["config"]["nicepim"]
    return n["pe_rows"], n["pe_cols"]


def _wbuf_row_lines() -> int:
    """Weight lines per row of the weight buffer, as the engine of the config builds it."""
    n = bench()["config"]["nicepim"]
    C = n["pe_cols"]
    return wbuf_row_lines(n["pe_rows"], C, n["wbuf_bytes"] // (C * DATA_BITS // 8),
                          n["banks_per_node"] * n["bank_width_bits"])


def _ibuf_row_lines() -> int:
    """Input lines per row of the input buffer, as the engine of the config builds it."""
    n = bench()["config"]["nicepim"]
    R = n["pe_rows"]
    return ibuf_row_lines(R, n["ibuf_bytes"] // (R * DATA_BITS // 8),
                          n["banks_per_node"] * n["bank_width_bits"])


def _task(**fields) -> int:
    word = 0
    for name, f in TASK_LAYOUT:
        word |= (int(fields.get(name, 0)) & ((1 << f.width) - 1)) << f.offset
    return word


async def _write(dut, port, lines, lanes, per_row=1):
    """Line ``a`` into slot ``a % per_row`` of row ``a // per_row`` (its lanes enabled)."""
    for a, line in enumerate(lines):
        row, slot = divmod(a, per_row)
        getattr(dut, f"{port}__addr").value = row
        getattr(dut, f"{port}__data").value = line << (slot * lanes * DATA_BITS)
        getattr(dut, f"{port}__en").value = ((1 << lanes) - 1) << (slot * lanes)
        await RisingEdge(dut.clk)
    getattr(dut, f"{port}__en").value = 0


async def _run(dut, **geo) -> int:
    """Start a tile, return its busy cycles."""
    dut.task.value = _task(op=Op.COMPUTE, **geo)
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    cycles = 0
    await RisingEdge(dut.clk)
    while int(dut.busy.value):
        cycles += 1
        await RisingEdge(dut.clk)
    return cycles


async def _read(dut, lines, C):
    out = []
    for a in range(lines):
        dut.obuf_r__addr.value = a
        dut.obuf_r__en.value = 1
        await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
        word = int(dut.obuf_r__data.value)
        vals = [(word >> (PSUM_BITS * c)) & 0xFFFFFFFF for c in range(C)]
        out.append([v - (1 << 32) if v >> 31 else v for v in vals])
    return np.array(out, dtype=np.int64)


async def _tile(dut, x, w, stride, pad, oh, ow, acc_twice=False):
    R, C = _geometry()
    ilines, wlines, cb = engine_buffers(R, C, x, w, _ibuf_row_lines())
    await _write(dut, "ibuf_w", ilines, R, _ibuf_row_lines())
    await _write(dut, "wbuf_w", wlines, C, _wbuf_row_lines())
    kh, kw = w.shape[2:]
    geo = dict(cb=cb, nh=x.shape[1], nw=x.shape[2], kh=kh, kw=kw, stride=stride, pad=pad,
               oh=oh, ow=ow)
    want_cycles = tile_cycles(pe_rows=R, pe_cols=C, cb=cb, kh=kh, kw=kw, oh=oh, ow=ow)
    cycles = await _run(dut, **geo)
    assert cycles == want_cycles, f"tile took {cycles} cycles, the formula says {want_cycles}"
    if acc_twice:
        assert await _run(dut, acc=1, **geo) == want_cycles
    got = await _read(dut, oh * ow, C)
    want = engine_tile(x, w, stride=stride, pad=pad, oh=oh, ow=ow)
    if acc_twice:
        want = wrap32(2 * want)
    CO = w.shape[0]
    assert np.array_equal(got[:, :CO], want), f"outputs differ:\n{got[:, :CO]}\n{want}"


@cocotb.test()
async def conv_tiles(dut):
    """Random convolution tiles, bit-exact, in the formula's cycles."""
    R, C = _geometry()
    r = rng("conv")
    await start(dut)
    dut.obuf_r__en.value = 1
    n = bench()["config"]["nicepim"]
    ibuf = n["ibuf_bytes"] // (2 * R)
    for _ in range(6):
        while True:
            K, CO = r.randint(1, 2 * R), r.randint(1, C)
            kh, kw = r.randint(1, 3), r.randint(1, 3)
            stride, pad = r.randint(1, 3), r.randint(0, 2)
            nh, nw = r.randint(kh, kh + 5), r.randint(kw, kw + 5)
            oh = (nh + 2 * pad - kh) // stride + 1
            ow = (nw + 2 * pad - kw) // stride + 1
            # the inputs fit the input buffer and the outputs the output buffer
            if -(-K // R) * nh * nw <= ibuf and oh * ow <= 1 << len(dut.obuf_r__addr):
                break
        x = np.array([r.randint(-32768, 32767) for _ in range(K * nh * nw)]).reshape(K, nh, nw)
        w = np.array([r.randint(-32768, 32767) for _ in range(CO * K * kh * kw)]
                     ).reshape(CO, K, kh, kw)
        cocotb.log.info("tile x %s w %s stride %d pad %d -> %dx%d", x.shape, w.shape, stride,
                        pad, oh, ow)
        await _tile(dut, x, w, stride, pad, oh, ow)


@cocotb.test()
async def matmul_tile_accumulated(dut):
    """``A @ B`` as a 1 x M image with a 1 x 1 kernel, run twice with ``acc``."""
    R, C = _geometry()
    r = rng("matmul")
    await start(dut)
    dut.obuf_r__en.value = 1
    M, K, N = r.randint(1, 16), r.randint(1, 3 * R), r.randint(1, C)
    a = np.array([[r.randint(-32768, 32767) for _ in range(K)] for _ in range(M)])
    b = np.array([[r.randint(-32768, 32767) for _ in range(N)] for _ in range(K)])
    await _tile(dut, a.T.reshape(K, 1, M), b.T.reshape(N, K, 1, 1), 1, 0, 1, M,
                acc_twice=True)
