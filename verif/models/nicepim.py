"""Golden model of the NicePIM PIM-node: int64 numpy convolution and matrix
multiplication, the NN engine's tile, its buffer contents and its cycle formula.

Inputs and weights are 16-bit signed, partial sums 32-bit: the hardware's sums
wrap at 32 bits, which :func:`wrap32` applies to the exact int64 results (equal
to them when no sum leaves the int32 range, as in the tests' data).
"""

from __future__ import annotations

import numpy as np

from pimforge.rtl.nicepim.engine import tile_cycles
from pimforge.rtl.nicepim.params import DATA_BITS, PSUM_BITS, ibuf_line

__all__ = ["ELEMENT_BITS", "conv2d", "engine_buffers", "engine_tile", "matmul", "tile_cycles",
           "wrap32"]


def wrap32(x: np.ndarray) -> np.ndarray:
    """*x* (integers) wrapped to int32 two's complement, as int64."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << (PSUM_BITS - 1))) % (1 << PSUM_BITS)) - (1 << (PSUM_BITS - 1))


def conv2d(x: np.ndarray, w: np.ndarray, *, stride: int = 1, pad: int = 0,
           groups: int = 1) -> np.ndarray:
    """Convolution of one image ``x[C, H, W]`` with ``w[CO, C / groups, KH, KW]``, int64.

    Returns ``[CO, OH, OW]`` with ``OH = (H + 2 pad - KH) // stride + 1``.
    """
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    C, H, W = x.shape
    CO, CG, KH, KW = w.shape
    if C != CG * groups or CO % groups:
        raise ValueError(f"channels {C} -> {CO} do not split into {groups} groups of "
                         f"{CG} input channels")
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    out = np.zeros((CO, OH, OW), dtype=np.int64)
    og = CO // groups
    for g in range(groups):
        xs = xp[g * CG:(g + 1) * CG]
        for u in range(KH):
            for v in range(KW):
                patch = xs[:, u:u + stride * (OH - 1) + 1:stride,
                           v:v + stride * (OW - 1) + 1:stride]            # [CG, OH, OW]
                out[g * og:(g + 1) * og] += np.einsum("oc,chw->ohw",
                                                      w[g * og:(g + 1) * og, :, u, v], patch)
    return out


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in int64."""
    return np.asarray(a, dtype=np.int64) @ np.asarray(b, dtype=np.int64)


def engine_tile(x: np.ndarray, w: np.ndarray, *, stride: int, pad: int, oh: int,
                ow: int) -> np.ndarray:
    """What one engine tile leaves in the output buffer: ``[oh * ow, CO]`` 32-bit sums of
    the window ``x[K, nh, nw]`` convolved with ``w[CO, K, kh, kw]`` (the first ``oh x ow``
    outputs, pixels outside the window reading 0)."""
    x = np.asarray(x, dtype=np.int64)
    K, nh, nw = x.shape
    kh, kw = w.shape[2:]
    # Pad generously so that every pixel the tile reads exists (zeros outside).
    ext = max(0, (oh - 1) * stride + kh - pad - nh, (ow - 1) * stride + kw - pad - nw)
    xp = np.pad(x, ((0, 0), (pad, pad + ext), (pad, pad + ext)))
    out = conv2d(xp, w, stride=stride)[:, :oh, :ow]
    return wrap32(out.reshape(out.shape[0], -1).T)


def engine_buffers(pe_rows: int, pe_cols: int, x: np.ndarray,
                   w: np.ndarray, ibuf_row: int = 1) -> tuple[list[int], list[int], int]:
    """The input- and weight-buffer lines of a tile (:class:`~pimforge.rtl.nicepim.engine.NNEngine`
    order, 16-bit lanes, channels padded with zeros to whole blocks) of the window
    ``x[K, nh, nw]`` and the weights ``w[CO, K, kh, kw]`` (``CO <= pe_cols``), and ``cb``;
    the input lines in the order of an input buffer whose rows hold *ibuf_row* lines
    (:func:`~pimforge.rtl.nicepim.params.ibuf_line`)."""
    R, C = pe_rows, pe_cols
    K, nh, nw = x.shape
    CO, _, kh, kw = w.shape
    cb = -(-K // R)
    xs = np.zeros((cb * R, nh, nw), dtype=np.int64)
    xs[:K] = x
    ws = np.zeros((C, cb * R, kh, kw), dtype=np.int64)
    ws[:CO, :K] = w

    def pack(values):
        return sum((int(v) & 0xFFFF) << (DATA_BITS * i) for i, v in enumerate(values))

    ilines = [0] * (cb * nh * nw)
    for b in range(cb):
        for p in range(nh * nw):
            ilines[ibuf_line(b, p, cb, nh * nw, ibuf_row)] = pack(xs[b * R:(b + 1) * R,
                                                                    p // nw, p % nw])
    wlines = [pack(ws[:, b * R + r, u, v])
              for b in range(cb) for u in range(kh) for v in range(kw) for r in range(R)]
    return ilines, wlines, cb


#: Bits of an input/weight element (re-exported for the drivers' packing).
ELEMENT_BITS = DATA_BITS
