"""Measure Halide's GPU schedules of iPIM's ten image pipelines (Table II) on a real GPU.

    python scripts/gpu/halide_gpu.py --json OUT.json [--size 7680x4320] [--bench NAME ...]
                                     [--target host-cuda|host] [--repeats 20]

Fig. 6 of the iPIM paper compares iPIM against a V100 running Halide's manually tuned
GPU schedules on 8K images (7680x4320). The project so far only had a V100 model (a
roofline over the input and output bytes, ``scripts/ipim_eval.py``); this script runs
the pipelines themselves through Halide's JIT on whatever CUDA GPU it finds.

It needs the ``halide`` Python bindings and numpy, and nothing from pimforge: the ten
algorithms are written here again, with the same parameters and the same float32
operation order as the project's golden models (``verif/models/.../image.py``): every
stage of a pyramid or of the stencil chain clamps its reads to its own edge, pyramid
level ``l`` has ``ceil(n / 2**l)`` pixels, a division by a constant is a product with
its float32 reciprocal. Where the project differs from Halide's ``apps/`` (no colour
step in the local Laplacian, premultiplied RGBA into interpolate, float32 data in the
stencil chain, a host-computed remapping table) the project's definition wins; the
schedules follow the apps' manual GPU schedules where an app exists (bilateral_grid,
interpolate, local_laplacian, blur) and are written in the same style otherwise.

For every benchmark:

* the pipeline is JIT-compiled for ``--target`` (default ``host-cuda`` with the
  highest CUDA capability this Halide knows, 8.6); some benchmarks have a few schedule
  variants, each timed, the fastest reported as the benchmark's time;
* each variant is checked at ``--check-size`` (default 512x512) against the same
  algorithm compiled for the CPU (``host``, a CPU schedule) and against a numpy
  reference of the project's definition (max abs error; NaN where both are NaN counts
  as equal);
* it is timed at ``--size`` after warm-up runs: the input stays on the device, the
  output is a buffer that stays on the device (``copy_to_host`` only for the check),
  each timed call is ``realize`` + ``device_sync``; the median and minimum of
  ``--repeats`` calls, and the mean of a batch of back-to-back calls with one sync at
  the end (launch overhead hidden). Intermediates' device memory is reused between
  calls (``halide_reuse_device_allocations``, as Halide's own benchmarks do; the time
  without reuse is reported too). Host-to-device copy of the input and device-to-host
  copy of the output are timed separately.

Each benchmark runs in a child process (``--no-isolate`` runs them in this one), so
that one that fails to compile or crashes loses only itself; the JSON is written
after each benchmark, atomically, so a run stopped at a time limit keeps what it has.
``--deadline-s`` skips the benchmarks that would start after that many seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

SCHEMA = "pimforge.halide_gpu"
SCHEMA_VERSION = 1
F32 = np.float32
BENCHES = ["brighten", "blur", "downsample", "upsample", "shift", "histogram",
           "bilateral_grid", "interpolate", "local_laplacian", "stencil_chain"]
# the project's parameters (Table II): brighten a, shift, bilateral grid, stencils
BRIGHTEN_A = 1.5
SHIFT_DX = SHIFT_DY = 4
BG_S_SIGMA, BG_R_SIGMA = 8, 0.1
STENCILS = 32
LL_LEVELS, LL_ALPHA, LL_BETA = 8, 1 / 7, 1.0
# the project's tolerances (verif models' ``atol``) for a result computed in another
# legal float32 order; exact benchmarks 0
ATOL = {"brighten": 0.0, "blur": 1e-6, "downsample": 1e-6, "upsample": 1e-6, "shift": 0.0,
        "histogram": 0.0, "bilateral_grid": 1e-4, "interpolate": 1e-5,
        "local_laplacian": 1e-4, "stencil_chain": 1e-5}


class UsageError(Exception):
    """An argument the user gave that cannot be used."""


# --------------------------------------------------------------------------------------
# numpy references (the project's golden models, float32, same operation order)
# --------------------------------------------------------------------------------------

def _inv(k: float) -> np.float32:
    return F32(1.0 / k)


def _cols(a, idx):
    return a[:, np.clip(idx, 0, a.shape[1] - 1)]


def _rows(a, idx):
    return a[np.clip(idx, 0, a.shape[0] - 1)]


def _half(n: int) -> int:
    return (n + 1) // 2


def interpolate_levels(h: int, w: int) -> int:
    return min(10, int(math.log2(min(h, w))) + 1)


def laplacian_depth(h: int, w: int) -> int:
    return min(8, int(math.log2(min(h, w))) + 1)


def remap_lut(levels: int = 8, alpha: float = 1 / 7) -> np.ndarray:
    n = (levels - 1) * 256
    fx = np.arange(-n, n + 1).astype(F32) * _inv(256)
    return (F32(alpha) * fx) * np.exp((-(fx * fx)) * F32(0.5))


def stencil_weights() -> np.ndarray:
    o = np.arange(1, 6)
    return np.outer(o, o).astype(F32)


def np_brighten(img):
    return img * F32(BRIGHTEN_A)


def np_blur(img):
    h, w = img.shape
    k = _inv(3)
    bx = ((img[:, 0:w - 2] + img[:, 1:w - 1]) + img[:, 2:w]) * k
    return ((bx[0:h - 2] + bx[1:h - 1]) + bx[2:h]) * k


def _down121(a, axis):
    take = _cols if axis == 1 else _rows
    i = np.arange(a.shape[axis] // 2)
    return ((take(a, 2 * i - 1) + F32(2) * take(a, 2 * i)) + take(a, 2 * i + 1)) * F32(0.25)


def np_downsample(img):
    return _down121(_down121(img, 1), 0)


def np_upsample(img):
    h, w = img.shape
    x = np.arange(2 * w)
    u = (_cols(img, x // 2) + _cols(img, (x + 1) // 2)) * F32(0.5)
    y = np.arange(2 * h)
    return (_rows(u, y // 2) + _rows(u, (y + 1) // 2)) * F32(0.5)


def np_shift(img):
    h, w = img.shape
    return _cols(_rows(img, np.arange(h) - SHIFT_DY), np.arange(w) - SHIFT_DX)


def np_histogram(img):
    return np.bincount(img.reshape(-1), minlength=256).astype(np.int32)


def _blur5_np(a, axis):
    n = a.shape[axis] - 4

    def s(o):
        return np.take(a, np.arange(o, o + n), axis=axis)

    return (((s(0) + s(1) * F32(4)) + s(2) * F32(6)) + s(3) * F32(4)) + s(4)


def np_bilateral_grid(img, s_sigma=BG_S_SIGMA, r_sigma=BG_R_SIGMA):
    h, w = img.shape
    s = int(s_sigma)
    inv_r = F32(1.0) / F32(r_sigma)
    zmax = int(inv_r + F32(0.5))
    gh, gw, nz = (h - 1) // s + 2, (w - 1) // s + 2, zmax + 2
    grid = np.zeros((gh + 4, gw + 4, nz + 4, 2), F32)
    gy = np.arange(-2, gh + 2)
    gx = np.arange(-2, gw + 2)
    ii, jj = np.meshgrid(np.arange(gh + 4), np.arange(gw + 4), indexing="ij")
    for ry in range(s):
        rows = _rows(img, gy * s + ry - s // 2)
        for rx in range(s):
            val = np.clip(_cols(rows, gx * s + rx - s // 2), F32(0), F32(1))
            zi = (val * inv_r + F32(0.5)).astype(np.int32)
            grid[ii, jj, zi + 2, 0] += val
            grid[ii, jj, zi + 2, 1] += F32(1)
    b = _blur5_np(_blur5_np(_blur5_np(grid, 2), 1), 0)
    val = np.clip(img, F32(0), F32(1))
    zv = val * inv_r
    zi = zv.astype(np.int32)
    zf = (zv - zi.astype(F32))[..., None]
    x, y = np.arange(w), np.arange(h)
    xi, yi = x // s, y // s
    xf = ((x % s).astype(F32) * _inv(s))[None, :, None]
    yf = ((y % s).astype(F32) * _inv(s))[:, None, None]
    Y, X = np.meshgrid(yi, xi, indexing="ij")

    def B(dx, dy, dz):
        return b[Y + dy, X + dx, zi + dz]

    def lerp(a, c, t):
        return a + (c - a) * t

    def plane(dz):
        return lerp(lerp(B(0, 0, dz), B(1, 0, dz), xf), lerp(B(0, 1, dz), B(1, 1, dz), xf), yf)

    interp = lerp(plane(0), plane(1), zf)
    return interp[..., 0] / interp[..., 1]


def np_interpolate(img, levels=None):
    """*img*: premultiplied RGBA ``(H, W, 4)``."""
    L = interpolate_levels(*img.shape[:2]) if levels is None else levels
    d = [img]
    for _ in range(1, L):
        p = d[-1]
        x = np.arange(_half(p.shape[1]))
        dx = ((_cols(p, 2 * x - 1) + F32(2) * _cols(p, 2 * x)) + _cols(p, 2 * x + 1)) * F32(0.25)
        y = np.arange(_half(p.shape[0]))
        d.append(((_rows(dx, 2 * y - 1) + F32(2) * _rows(dx, 2 * y)) + _rows(dx, 2 * y + 1))
                 * F32(0.25))
    interp = d[-1]
    for lv in range(L - 2, -1, -1):
        h, w = d[lv].shape[:2]
        x = np.arange(w)
        ux = (_cols(interp, x // 2) + _cols(interp, (x + 1) // 2)) * F32(0.5)
        y = np.arange(h)
        up = (_rows(ux, y // 2) + _rows(ux, (y + 1) // 2)) * F32(0.5)
        interp = d[lv] + (F32(1) - d[lv][..., 3:4]) * up
    with np.errstate(invalid="ignore", divide="ignore"):
        return interp / interp[..., 3:4]


def _ll_down_np(a):
    x = np.arange(_half(a.shape[1]))
    dx = ((_cols(a, 2 * x - 1) + F32(3) * (_cols(a, 2 * x) + _cols(a, 2 * x + 1)))
          + _cols(a, 2 * x + 2)) * F32(0.125)
    y = np.arange(_half(a.shape[0]))
    return ((_rows(dx, 2 * y - 1) + F32(3) * (_rows(dx, 2 * y) + _rows(dx, 2 * y + 1)))
            + _rows(dx, 2 * y + 2)) * F32(0.125)


def _ll_up_np(a, h, w):
    x = np.arange(w)
    ux = F32(0.25) * _cols(a, x // 2 - 1 + 2 * (x % 2)) + F32(0.75) * _cols(a, x // 2)
    y = np.arange(h)
    return F32(0.25) * _rows(ux, y // 2 - 1 + 2 * (y % 2)) + F32(0.75) * _rows(ux, y // 2)


def np_local_laplacian(img, levels=LL_LEVELS, alpha=LL_ALPHA, beta=LL_BETA, depth=None):
    K = levels
    J = laplacian_depth(*img.shape) if depth is None else depth
    lut = remap_lut(K, alpha)
    n = (K - 1) * 256
    g = img
    idx = np.clip(((g * F32(K - 1)) * F32(256)).astype(np.int32), 0, n)
    k = np.arange(K)
    lvl = k.astype(F32) * _inv(K - 1)
    gp = [((F32(beta) * (g[..., None] - lvl)) + lvl) + lut[idx[..., None] - 256 * k + n]]
    ing = [g]
    for _ in range(1, J):
        gp.append(_ll_down_np(gp[-1]))
        ing.append(_ll_down_np(ing[-1]))
    lp = [gp[j] - _ll_up_np(gp[j + 1], *gp[j].shape[:2]) for j in range(J - 1)] + [gp[-1]]
    out = None
    for j in range(J - 1, -1, -1):
        lev = ing[j] * F32(K - 1)
        li = np.clip(lev.astype(np.int32), 0, K - 2)
        lf = lev - li.astype(F32)
        a = np.take_along_axis(lp[j], li[..., None], axis=2)[..., 0]
        c = np.take_along_axis(lp[j], li[..., None] + 1, axis=2)[..., 0]
        ol = ((F32(1) - lf) * a) + (lf * c)
        out = ol if out is None else _ll_up_np(out, *ol.shape) + ol
    return np.clip(out, F32(0), F32(1))


def np_stencil_chain(img, stencils=STENCILS):
    h, w = img.shape
    wts = stencil_weights()
    y, x = np.arange(h), np.arange(w)
    s = img
    for _ in range(stencils):
        rows = [_rows(s, y + j) for j in range(-2, 3)]
        e = np.zeros_like(s)
        for i in range(-2, 3):
            cols = np.clip(x + i, 0, w - 1)
            for j in range(-2, 3):
                e = e + wts[j + 2, i + 2] * rows[j + 2][:, cols]
        s = e * _inv(225)
    return s


NUMPY_REF = {"brighten": np_brighten, "blur": np_blur, "downsample": np_downsample,
             "upsample": np_upsample, "shift": np_shift, "histogram": np_histogram,
             "bilateral_grid": np_bilateral_grid, "interpolate": np_interpolate,
             "local_laplacian": np_local_laplacian, "stencil_chain": np_stencil_chain}


# --------------------------------------------------------------------------------------
# inputs: a synthetic photograph-like image (smooth shading, edges, fine texture)
# --------------------------------------------------------------------------------------

def gray_image(w: int, h: int, seed: int = 0) -> np.ndarray:
    """float32 ``(h, w)`` in [0, 1]: low-frequency shading, a few hard-edged discs and
    noise, so that a histogram or a bilateral grid sees a photograph's uneven value
    distribution rather than uniform noise."""
    rng = np.random.default_rng(seed)
    yy = np.linspace(0.0, 1.0, h, dtype=F32)[:, None]
    xx = np.linspace(0.0, 1.0, w, dtype=F32)[None, :]
    img = 0.45 + 0.25 * np.sin(6.0 * xx + 1.0) * np.cos(4.0 * yy) + 0.1 * xx
    img = np.broadcast_to(img, (h, w)).astype(F32)
    for _ in range(6):
        cx, cy, r = rng.random(), rng.random(), 0.05 + 0.2 * rng.random()
        m = (xx - cx) ** 2 + ((yy - cy) * (h / w)) ** 2 < r * r
        img = np.where(m, F32(rng.random()), img)
    img = img + rng.normal(0.0, 0.04, (h, w)).astype(F32)
    return np.clip(img, 0.0, 1.0).astype(F32)


def make_input(bench: str, w: int, h: int, seed: int = 0) -> dict:
    """The benchmark's inputs as numpy arrays, by ImageParam name."""
    g = gray_image(w, h, seed)
    if bench == "histogram":
        return {"in": np.round(g * 255.0).astype(np.uint8)}
    if bench == "interpolate":
        # premultiplied RGBA, mostly transparent with opaque speckles (the app fills holes)
        rng = np.random.default_rng(seed + 1)
        a = np.where(rng.random((h, w)) < 0.3, rng.random((h, w)), 0.0).astype(F32)
        rgb = np.stack([g, g[::-1], g[:, ::-1]], axis=-1)
        rgba = np.concatenate([rgb * a[..., None], a[..., None]], axis=-1).astype(F32)
        return {"in": rgba}
    if bench == "local_laplacian":
        return {"in": g, "lut": remap_lut(LL_LEVELS, LL_ALPHA)}
    return {"in": g}


def to_halide_layout(bench: str, name: str, arr: np.ndarray) -> np.ndarray:
    """numpy ``(H, W[, C])`` to the array whose reversed axes are Halide's ``(x, y[, c])``:
    interpolate's RGBA goes planar, ``(C, H, W)``."""
    if bench == "interpolate" and name == "in":
        return np.ascontiguousarray(np.moveaxis(arr, -1, 0))
    return np.ascontiguousarray(arr)


def from_halide_layout(bench: str, arr: np.ndarray) -> np.ndarray:
    if bench == "interpolate":
        return np.moveaxis(arr, 0, -1)
    return arr


def output_shape(bench: str, w: int, h: int) -> list[int]:
    """Halide extents of the output, ``[x, y(, c)]``."""
    return {"blur": [w - 2, h - 2], "downsample": [w // 2, h // 2],
            "upsample": [2 * w, 2 * h], "histogram": [256],
            "interpolate": [w, h, 4]}.get(bench, [w, h])


def io_bytes(bench: str, w: int, h: int) -> int:
    """Input + output bytes, each moved once (what the project's V100 model charges)."""
    px = w * h
    inb = px * (1 if bench == "histogram" else 16 if bench == "interpolate" else 4)
    outb = math.prod(output_shape(bench, w, h)) * 4
    if bench == "local_laplacian":
        inb += remap_lut(LL_LEVELS, LL_ALPHA).nbytes
    return inb + outb


# --------------------------------------------------------------------------------------
# the Halide pipelines
# --------------------------------------------------------------------------------------

def _hl():
    import halide as hl
    return hl


def build(bench: str, gpu: bool, variant: str | None = None):
    """``(pipeline, {name: ImageParam}, schedule description)`` of *bench*, scheduled
    for a GPU (*variant* of its GPU schedules) or for the CPU."""
    hl = _hl()
    fn = globals()[f"_build_{bench}"]
    return fn(hl, gpu, variant)


def _c(hl, v: float):
    """A float32 constant: the float32 nearest *v* (as the project's models round)."""
    return hl.f32(float(F32(v)))


def _cpu_2d(hl, f, x, y, vec=8):
    f.compute_root().parallel(y).vectorize(x, vec)


def _elementwise_gpu(hl, f, x, y, variant):
    xi, yi = hl.Var("xi"), hl.Var("yi")
    if variant == "tile32x8":
        f.gpu_tile(x, y, xi, yi, 32, 8)
        return "gpu_tile(x, y, 32, 8)"
    if variant == "vec4":
        # four adjacent pixels per thread: 128-bit loads and stores
        f.vectorize(x, 4).gpu_tile(x, y, xi, yi, 32, 8)
        return "vectorize(x, 4).gpu_tile(x, y, 32, 8)"
    if variant == "unroll_y4":
        yy = hl.Var("yy")
        f.split(y, y, yy, 4).unroll(yy).gpu_tile(x, y, xi, yi, 32, 8)
        return "split(y, 4).unroll.gpu_tile(x, y, 32, 8): four rows per thread"
    raise UsageError(f"unknown variant {variant!r}")


ELEMENTWISE_VARIANTS = ["tile32x8", "vec4", "unroll_y4"]


def _gray_param(hl, name="in"):
    return hl.ImageParam(hl.Float(32), 2, name)


def _clamp_x(hl, v, w):
    return hl.clamp(v, 0, w - 1)


def _build_brighten(hl, gpu, variant):
    x, y = hl.Var("x"), hl.Var("y")
    inp = _gray_param(hl)
    out = hl.Func("out")
    out[x, y] = inp[x, y] * _c(hl, BRIGHTEN_A)
    if gpu:
        desc = _elementwise_gpu(hl, out, x, y, variant or "tile32x8")
    else:
        _cpu_2d(hl, out, x, y)
        desc = "cpu"
    return hl.Pipeline(out), {"in": inp}, desc


def _build_shift(hl, gpu, variant):
    x, y = hl.Var("x"), hl.Var("y")
    inp = _gray_param(hl)
    W, H = inp.width(), inp.height()
    out = hl.Func("out")
    out[x, y] = inp[hl.clamp(x - SHIFT_DX, 0, W - 1), hl.clamp(y - SHIFT_DY, 0, H - 1)]
    if gpu:
        desc = _elementwise_gpu(hl, out, x, y, variant or "tile32x8")
    else:
        _cpu_2d(hl, out, x, y)
        desc = "cpu"
    return hl.Pipeline(out), {"in": inp}, desc


def _build_blur(hl, gpu, variant):
    """apps/blur on float32: ``blur_x`` inlined (the app's "inline" schedule), or the
    app's sliding-window schedule (each thread makes a column of rows, reusing
    ``blur_x`` rows through registers), or ``blur_x`` cached per tile in shared memory
    (the app's "cache")."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = _gray_param(hl)
    k = _c(hl, 1 / 3)
    bx = hl.Func("blur_x")
    bx[x, y] = ((inp[x, y] + inp[x + 1, y]) + inp[x + 2, y]) * k
    out = hl.Func("out")
    out[x, y] = ((bx[x, y] + bx[x, y + 1]) + bx[x, y + 2]) * k
    xi, yi = hl.Var("xi"), hl.Var("yi")
    if not gpu:
        yo = hl.Var("yo")
        out.compute_root().split(y, yo, y, 32).parallel(yo).vectorize(x, 8)
        bx.store_at(out, yo).compute_at(out, y).vectorize(x, 8)
        return hl.Pipeline(out), {"in": inp}, "cpu"
    variant = variant or "inline"
    if variant == "inline":
        out.gpu_tile(x, y, xi, yi, 32, 8)
        desc = "blur_x inlined; out.gpu_tile(x, y, 32, 8)"
    elif variant == "slide":
        yin = hl.Var("y_inner")
        out.split(y, y, yin, 8).reorder(yin, x).unroll(yin).gpu_tile(x, y, xi, yi, 32, 1)
        desc = "out.split(y, 8).unroll.gpu_tile(x, y, 32, 1): sliding window per thread"
    elif variant == "cache":
        out.gpu_tile(x, y, xi, yi, 32, 8)
        bx.compute_at(out, x).gpu_threads(x, y)
        desc = "out.gpu_tile(x, y, 32, 8); blur_x.compute_at(out, x).gpu_threads (shared)"
    else:
        raise UsageError(f"unknown variant {variant!r}")
    return hl.Pipeline(out), {"in": inp}, desc


def _build_downsample(hl, gpu, variant):
    x, y = hl.Var("x"), hl.Var("y")
    inp = _gray_param(hl)
    W, H = inp.width(), inp.height()
    d = hl.Func("d")
    two, q = _c(hl, 2), _c(hl, 0.25)
    d[x, y] = ((inp[_clamp_x(hl, 2 * x - 1, W), y] + two * inp[_clamp_x(hl, 2 * x, W), y])
               + inp[_clamp_x(hl, 2 * x + 1, W), y]) * q
    out = hl.Func("out")
    out[x, y] = ((d[x, hl.clamp(2 * y - 1, 0, H - 1)] + two * d[x, hl.clamp(2 * y, 0, H - 1)])
                 + d[x, hl.clamp(2 * y + 1, 0, H - 1)]) * q
    if gpu:
        desc = "d inlined; " + _elementwise_gpu(hl, out, x, y, variant or "tile32x8")
    else:
        _cpu_2d(hl, out, x, y)
        desc = "cpu"
    return hl.Pipeline(out), {"in": inp}, desc


def _build_upsample(hl, gpu, variant):
    x, y = hl.Var("x"), hl.Var("y")
    inp = _gray_param(hl)
    W, H = inp.width(), inp.height()
    h = _c(hl, 0.5)
    u = hl.Func("u")
    u[x, y] = (inp[_clamp_x(hl, x // 2, W), y] + inp[_clamp_x(hl, (x + 1) // 2, W), y]) * h
    out = hl.Func("out")
    out[x, y] = (u[x, hl.clamp(y // 2, 0, H - 1)] + u[x, hl.clamp((y + 1) // 2, 0, H - 1)]) * h
    if gpu:
        desc = "u inlined; " + _elementwise_gpu(hl, out, x, y, variant or "tile32x8")
    else:
        _cpu_2d(hl, out, x, y)
        desc = "cpu"
    return hl.Pipeline(out), {"in": inp}, desc


HIST_ROWS = 8


def _build_histogram(hl, gpu, variant):
    """``hist[x] = 0; hist[in(r.x, r.y)] += 1`` over a uint8 image, 256 int32 bins.

    GPU variants: ``rfactor_shared`` splits the rows into strips of HIST_ROWS, one
    thread block per strip builds the strip's histogram in shared memory with atomics
    (``rfactor`` + ``atomic``), and the strips' histograms are added into the output
    with global atomics; ``global_atomic`` is the straightforward schedule, every pixel
    an atomic add on one of the 256 global bins."""
    x = hl.Var("x")
    inp = hl.ImageParam(hl.UInt(8), 2, "in")
    r = hl.RDom([hl.Range(0, inp.width()), hl.Range(0, inp.height())], "r")
    hist = hl.Func("hist")
    hist[x] = 0
    hist[hl.cast(hl.Int(32), inp[r.x, r.y])] += 1
    if not gpu:
        ryo, ryi = hl.RVar("ryo"), hl.RVar("ryi")
        u = hl.Var("u")
        hist.compute_root()
        hist.update().split(r.y, ryo, ryi, 64)
        intm = hist.update().rfactor(ryo, u)
        intm.compute_root().vectorize(x, 8).update().parallel(u)
        return hl.Pipeline(hist), {"in": inp}, "cpu"
    variant = variant or "rfactor_shared"
    xi = hl.Var("xi")
    if variant == "rfactor_shared":
        ryo, ryi = hl.RVar("ryo"), hl.RVar("ryi")
        rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
        u = hl.Var("u")
        hist.compute_root().gpu_tile(x, xi, 256)
        hist.update().split(r.y, ryo, ryi, HIST_ROWS)
        intm = hist.update().rfactor(ryo, u)
        # the strips' sums into the output: a block per strip, a thread per bin
        hist.update().atomic().reorder(x, ryo).gpu_blocks(ryo).gpu_threads(x)
        intm.compute_at(hist, ryo).gpu_threads(x)
        (intm.update().atomic().split(r.x, rxo, rxi, 256)
         .reorder(rxi, rxo, ryi, u).gpu_threads(rxi))
        desc = (f"rfactor over strips of {HIST_ROWS} rows: per-block histogram in shared "
                "memory with atomics (256 threads), then atomic adds of the strips into "
                "the 256 global bins")
    elif variant == "global_atomic":
        rxo, rxi = hl.RVar("rxo"), hl.RVar("rxi")
        hist.compute_root().gpu_tile(x, xi, 256)
        (hist.update().atomic().split(r.x, rxo, rxi, 256).reorder(rxi, rxo, r.y)
         .gpu_blocks(r.y).gpu_threads(rxi))
        desc = "every pixel an atomic add on the global bins (a block per row, 256 threads)"
    else:
        raise UsageError(f"unknown variant {variant!r}")
    return hl.Pipeline(hist), {"in": inp}, desc


def _build_bilateral_grid(hl, gpu, variant):
    """apps/bilateral_grid, s_sigma 8, r_sigma 0.1, with the app's GPU schedule
    (grid construction in shared memory per 8x8 tile of grid cells, fused with the z
    blur; x and y blurs and the slice as separate kernels)."""
    s = BG_S_SIGMA
    inv_r = float(F32(1.0) / F32(BG_R_SIGMA))
    x, y, z, c = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("c")
    inp = _gray_param(hl)
    clamped = hl.BoundaryConditions.repeat_edge(inp)
    r = hl.RDom([hl.Range(0, s), hl.Range(0, s)], "r")
    val = clamped[x * s + r.x - s // 2, y * s + r.y - s // 2]
    val = hl.clamp(val, _c(hl, 0), _c(hl, 1))
    # the bin is computed as written (product rounded, then the sum: no fma)
    zi = hl.cast(hl.Int(32), hl.strict_float(val * hl.f32(inv_r) + _c(hl, 0.5)))
    grid = hl.Func("histogram")
    grid[x, y, z, c] = _c(hl, 0)
    grid[x, y, zi, c] += hl.mux(c, [val, _c(hl, 1)])

    def blur5(g, name, d):
        def tap(o):
            a = [x, y, z]
            a[d] = a[d] + o
            return g[a[0], a[1], a[2], c]
        f = hl.Func(name)
        f[x, y, z, c] = ((((tap(-2) + tap(-1) * _c(hl, 4)) + tap(0) * _c(hl, 6))
                          + tap(1) * _c(hl, 4)) + tap(2))
        return f

    blurz = blur5(grid, "blurz", 2)
    blurx = blur5(blurz, "blurx", 0)
    blury = blur5(blurx, "blury", 1)
    v = hl.clamp(inp[x, y], _c(hl, 0), _c(hl, 1))
    zv = v * hl.f32(inv_r)
    zi2 = hl.cast(hl.Int(32), zv)
    zf = zv - hl.cast(hl.Float(32), zi2)
    xf = hl.cast(hl.Float(32), x % s) * _c(hl, 1 / s)
    yf = hl.cast(hl.Float(32), y % s) * _c(hl, 1 / s)
    xi, yi = x // s, y // s

    def lerp(a, b, t):
        return a + (b - a) * t

    def B(dx, dy, dz):
        return blury[xi + dx, yi + dy, zi2 + dz, c]

    def plane(dz):
        return lerp(lerp(B(0, 0, dz), B(1, 0, dz), xf), lerp(B(0, 1, dz), B(1, 1, dz), xf), yf)

    interpolated = hl.Func("interpolated")
    interpolated[x, y, c] = lerp(plane(0), plane(1), zf)
    out = hl.Func("bilateral_grid")
    out[x, y] = interpolated[x, y, 0] / interpolated[x, y, 1]
    if gpu:
        if (variant or "app") != "app":
            raise UsageError(f"unknown variant {variant!r}")
        vxi, vyi, vzi = hl.Var("xi"), hl.Var("yi"), hl.Var("zi")
        blurz.compute_root().reorder(c, z, x, y).gpu_tile(x, y, vxi, vyi, 8, 8)
        grid.reorder(c, z, x, y).compute_at(blurz, x).gpu_threads(x, y)
        grid.update().reorder(c, r.x, r.y, x, y).gpu_threads(x, y).unroll(c)
        for f in (blurx, blury):
            (f.compute_root().reorder(c, x, y, z).reorder_storage(c, x, y, z).vectorize(c)
             .unroll(y, 2, hl.TailStrategy.RoundUp)
             .gpu_tile(x, y, z, vxi, vyi, vzi, 32, 8, 1, hl.TailStrategy.RoundUp))
        out.compute_root().gpu_tile(x, y, vxi, vyi, 32, 8)
        interpolated.compute_at(out, vxi).vectorize(c)
        desc = ("apps/bilateral_grid GPU schedule: blurz root gpu_tile 8x8 cells with the "
                "grid built per tile (shared memory); blurx, blury root gpu_tile 32x8x1 "
                "(c vectorized, y unrolled 2); slice gpu_tile 32x8")
    else:
        blurz.compute_at(blurx, y).reorder(c, z, x, y).vectorize(x, 8).unroll(c)
        grid.compute_at(blurz, y)
        grid.update().reorder(c, r.x, r.y, x, y).unroll(c)
        blurx.compute_root().reorder(c, x, z, y).parallel(y).vectorize(x, 8).unroll(c)
        blury.compute_root().reorder(c, x, y, z).parallel(z).vectorize(x, 8).unroll(c)
        out.compute_root().parallel(y, 8).vectorize(x, 8)
        desc = "cpu"
    return hl.Pipeline(out), {"in": inp}, desc


def _lvl(hl, n, j):
    """Pyramid level *j*'s size ``ceil(n / 2**j)`` of an ``n``-pixel axis (an Expr)."""
    return (n + ((1 << j) - 1)) // (1 << j) if j else n


def _build_interpolate(hl, gpu, variant):
    """apps/interpolate on premultiplied RGBA (planar ``x, y, c``, four channels out),
    every level clamped to its own edge; GPU schedule after the app's: every
    downsampled level and the interpolated levels from 1 up compute_root, 16x16 (32x32
    with 2x2 per thread for the interpolated levels, as the app), the last level
    (``interpolated_0`` and the normalization) fused in one kernel."""
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    inp = hl.ImageParam(hl.Float(32), 3, "in")
    W, H = inp.width(), inp.height()
    L = _INTERP_LEVELS
    ws = [_lvl(hl, W, j) for j in range(L)]
    hs = [_lvl(hl, H, j) for j in range(L)]
    two, q, half = _c(hl, 2), _c(hl, 0.25), _c(hl, 0.5)
    down = [None] * L
    d0 = hl.Func("downsampled_0")
    d0[x, y, c] = inp[x, y, c]
    down[0] = d0
    downx = [None] * L
    for lv in range(1, L):
        p, wp, hp = down[lv - 1], ws[lv - 1], hs[lv - 1]
        dx = hl.Func(f"downx_{lv}")
        dx[x, y, c] = ((p[hl.clamp(2 * x - 1, 0, wp - 1), y, c]
                        + two * p[hl.clamp(2 * x, 0, wp - 1), y, c])
                       + p[hl.clamp(2 * x + 1, 0, wp - 1), y, c]) * q
        d = hl.Func(f"downsampled_{lv}")
        d[x, y, c] = ((dx[x, hl.clamp(2 * y - 1, 0, hp - 1), c]
                       + two * dx[x, hl.clamp(2 * y, 0, hp - 1), c])
                      + dx[x, hl.clamp(2 * y + 1, 0, hp - 1), c]) * q
        down[lv], downx[lv] = d, dx
    interp = [None] * L
    interp[L - 1] = down[L - 1]
    for lv in range(L - 2, -1, -1):
        nxt, wn, hn = interp[lv + 1], ws[lv + 1], hs[lv + 1]
        ux = hl.Func(f"upsampledx_{lv}")
        ux[x, y, c] = (nxt[hl.clamp(x // 2, 0, wn - 1), y, c]
                       + nxt[hl.clamp((x + 1) // 2, 0, wn - 1), y, c]) * half
        up = hl.Func(f"upsampled_{lv}")
        up[x, y, c] = (ux[x, hl.clamp(y // 2, 0, hn - 1), c]
                       + ux[x, hl.clamp((y + 1) // 2, 0, hn - 1), c]) * half
        d = down[lv]
        i = hl.Func(f"interpolated_{lv}")
        i[x, y, c] = d[x, y, c] + (_c(hl, 1) - d[x, y, 3]) * up[x, y, c]
        interp[lv] = i
    out = hl.Func("normalize")
    out[x, y, c] = interp[0][x, y, c] / interp[0][x, y, 3]
    xi, yi, xii, yii = hl.Var("xi"), hl.Var("yi"), hl.Var("xii"), hl.Var("yii")
    out.bound(c, 0, 4)
    if gpu:
        if (variant or "app") != "app":
            raise UsageError(f"unknown variant {variant!r}")
        (out.reorder(c, x, y).tile(x, y, xi, yi, 32, 32).tile(xi, yi, xii, yii, 2, 2)
         .gpu_blocks(x, y).gpu_threads(xi, yi).unroll(xii).unroll(yii).unroll(c))
        for lv in range(1, L):
            down[lv].compute_root().bound(c, 0, 4).reorder(c, x, y).unroll(c).gpu_tile(
                x, y, xi, yi, 16, 16)
        for lv in range(1, L - 1):
            (interp[lv].compute_root().bound(c, 0, 4).reorder(c, x, y)
             .tile(x, y, xi, yi, 32, 32, hl.TailStrategy.RoundUp)
             .tile(xi, yi, xii, yii, 2, 2).gpu_blocks(x, y).gpu_threads(xi, yi)
             .unroll(xii).unroll(yii).unroll(c))
        desc = ("after apps/interpolate's GPU schedule: downsampled_l root gpu_tile 16x16 "
                "(c unrolled), interpolated_l (l >= 1) root in 32x32 tiles of 2x2 per "
                "thread, interpolated_0 fused into the normalization (32x32 tiles, 2x2 per "
                f"thread); {L} levels, each clamped to its edge")
    else:
        for lv in range(1, L):
            down[lv].compute_root().bound(c, 0, 4).reorder(x, c, y).parallel(y).vectorize(x, 8)
        for lv in range(1, L - 1):
            interp[lv].compute_root().bound(c, 0, 4).reorder(x, c, y).parallel(y).vectorize(x, 8)
        out.compute_root().reorder(x, c, y).parallel(y).vectorize(x, 8)
        desc = "cpu"
    return hl.Pipeline(out), {"in": inp}, desc


_INTERP_LEVELS = 10
_LL_DEPTH = 8


def _build_local_laplacian(hl, gpu, variant):
    """apps/local_laplacian on a gray image (8 intensity levels, alpha 1/7, beta 1,
    pyramid depth 8 at 8K), every pyramid level clamped to its own edge, the remapping
    table an input (computed by numpy as the project does), no colour step. GPU
    schedule: the app's (every level of the input and processed pyramids and of the
    output pyramid compute_root, 16x8 tiles down to level 3 and 2x2 below; the
    processed level 0 inlined), the output (clamp of output level 0) fused with its
    level."""
    K, J = LL_LEVELS, _LL_DEPTH
    x, y, k = hl.Var("x"), hl.Var("y"), hl.Var("k")
    inp = _gray_param(hl)
    lut = hl.ImageParam(hl.Float(32), 1, "lut")
    W, H = inp.width(), inp.height()
    ws = [_lvl(hl, W, j) for j in range(J)]
    hs = [_lvl(hl, H, j) for j in range(J)]
    n = (K - 1) * 256
    three, eighth, q, tq = _c(hl, 3), _c(hl, 0.125), _c(hl, 0.25), _c(hl, 0.75)

    def cx(v, j):
        return hl.clamp(v, 0, ws[j] - 1)

    def cy(v, j):
        return hl.clamp(v, 0, hs[j] - 1)

    def down(f, j, name, three_d):
        """1-3-3-1 downsampling of level ``j-1`` func *f* to level *j*."""
        a = [k] if three_d else []
        dx = hl.Func(name + "_x")
        dx[[x, y] + a] = ((f[[cx(2 * x - 1, j - 1), y] + a]
                           + three * (f[[cx(2 * x, j - 1), y] + a]
                                      + f[[cx(2 * x + 1, j - 1), y] + a]))
                          + f[[cx(2 * x + 2, j - 1), y] + a]) * eighth
        d = hl.Func(name)
        d[[x, y] + a] = ((dx[[x, cy(2 * y - 1, j - 1)] + a]
                          + three * (dx[[x, cy(2 * y, j - 1)] + a]
                                     + dx[[x, cy(2 * y + 1, j - 1)] + a]))
                         + dx[[x, cy(2 * y + 2, j - 1)] + a]) * eighth
        return d

    def up(f, j, name, three_d):
        """Bilinear upsampling of level ``j+1`` func *f* onto level *j*."""
        a = [k] if three_d else []
        ux = hl.Func(name + "_x")
        ux[[x, y] + a] = (q * f[[cx(x // 2 - 1 + 2 * (x % 2), j + 1), y] + a]
                          + tq * f[[cx(x // 2, j + 1), y] + a])
        u = hl.Func(name)
        u[[x, y] + a] = (q * ux[[x, cy(y // 2 - 1 + 2 * (y % 2), j + 1)] + a]
                         + tq * ux[[x, cy(y // 2, j + 1)] + a])
        return u

    g = inp
    idx = hl.clamp(hl.cast(hl.Int(32), (g[x, y] * _c(hl, K - 1)) * _c(hl, 256)), 0, n)
    lvl = hl.cast(hl.Float(32), k) * _c(hl, 1 / (K - 1))
    G = [hl.Func("gPyramid_0")]
    G[0][x, y, k] = ((_c(hl, LL_BETA) * (g[x, y] - lvl)) + lvl) + lut[idx - 256 * k + n]
    inG = [hl.Func("inGPyramid_0")]
    inG[0][x, y] = g[x, y]
    for j in range(1, J):
        G.append(down(G[-1], j, f"gPyramid_{j}", True))
        inG.append(down(inG[-1], j, f"inGPyramid_{j}", False))

    upG = [up(G[j + 1], j, f"upG_{j}", True) for j in range(J - 1)]

    def Lap(j, kk):
        """Laplacian level *j* at plane *kk* (an Expr), at ``(x, y)``."""
        if j == J - 1:
            return G[j][x, y, kk]
        return G[j][x, y, kk] - upG[j][x, y, kk]

    oG = [None] * J
    for j in range(J - 1, -1, -1):
        lev = inG[j][x, y] * _c(hl, K - 1)
        li = hl.clamp(hl.cast(hl.Int(32), lev), 0, K - 2)
        lf = lev - hl.cast(hl.Float(32), li)
        ol = ((_c(hl, 1) - lf) * Lap(j, li)) + (lf * Lap(j, li + 1))
        f = hl.Func(f"outGPyramid_{j}" if j else "output")
        if j == J - 1:
            f[x, y] = ol
        else:
            body = up(oG[j + 1], j, f"upO_{j}", False)[x, y] + ol
            f[x, y] = hl.clamp(body, _c(hl, 0), _c(hl, 1)) if j == 0 else body
        oG[j] = f
    out = oG[0]
    xi, yi = hl.Var("xi"), hl.Var("yi")
    if gpu:
        if (variant or "app") != "app":
            raise UsageError(f"unknown variant {variant!r}")
        out.compute_root().gpu_tile(x, y, xi, yi, 16, 8)
        for j in range(1, J):
            bw, bh = (16, 8) if j <= 3 else (2, 2)
            inG[j].compute_root().gpu_tile(x, y, xi, yi, bw, bh)
            G[j].compute_root().bound(k, 0, K).reorder(k, x, y).gpu_tile(x, y, xi, yi, bw, bh)
            oG[j].compute_root().gpu_tile(x, y, xi, yi, bw, bh)
        desc = ("apps/local_laplacian GPU schedule: inGPyramid_j, gPyramid_j (k innermost), "
                "outGPyramid_j root for j >= 1, gpu_tile 16x8 to level 3 and 2x2 below; "
                "gPyramid_0 inlined; the output (level 0) one 16x8 kernel; "
                f"{K} intensity levels, depth {J}, every level clamped to its edge")
    else:
        for j in range(1, J):
            inG[j].compute_root().parallel(y).vectorize(x, 8)
            G[j].compute_root().bound(k, 0, K).reorder(x, y, k).parallel(k).vectorize(x, 8)
            oG[j].compute_root().parallel(y).vectorize(x, 8)
        out.compute_root().parallel(y).vectorize(x, 8)
        desc = "cpu"
    return hl.Pipeline(out), {"in": inp, "lut": lut}, desc


def _build_stencil_chain(hl, gpu, variant):
    """apps/stencil_chain's 32 5x5 stages on float32 [0, 1] data (weights
    ``(i+3)*(j+3)``, divided by 225), each stage clamped to the image edge (``clamped_t``,
    the previous stage read at clamped coordinates, inlined unless scheduled). The app
    has no manual GPU schedule; variants:

    * ``root``: every stage a kernel, gpu_tile 32x8;
    * ``root_unroll_y4``: the same, each thread making four rows (unrolled: the rows'
      common taps are loaded once);
    * ``smem``: every stage a kernel in 32x32 tiles of 32x8 threads, four rows per thread,
      its clamped input tile with the halo (36x36) staged in shared memory first;
    * ``fuse2``, ``fuse4``: stages in groups, the earlier stages of a group computed per
      32x8 tile of the last in shared memory, with their halos."""
    x, y = hl.Var("x"), hl.Var("y")
    inp = _gray_param(hl)
    W, H = inp.width(), inp.height()
    wts = stencil_weights()
    prev = inp
    stages, clamps = [], []
    for t in range(STENCILS):
        cl = hl.Func(f"clamped_{t}")
        cl[x, y] = prev[hl.clamp(x, 0, W - 1), hl.clamp(y, 0, H - 1)]
        f = hl.Func(f"stage_{t + 1}")
        e = None
        for i in range(-2, 3):
            for j in range(-2, 3):
                term = _c(hl, float(wts[j + 2, i + 2])) * cl[x + i, y + j]
                e = term if e is None else e + term
        f[x, y] = e * _c(hl, 1 / 225)
        stages.append(f)
        clamps.append(cl)
        prev = f
    out = stages[-1]
    xi, yi = hl.Var("xi"), hl.Var("yi")
    if not gpu:
        for f in stages:
            f.compute_root().parallel(y).vectorize(x, 8)
        return hl.Pipeline(out), {"in": inp}, "cpu"
    variant = variant or "root"
    if variant == "root":
        for f in stages:
            f.compute_root().gpu_tile(x, y, xi, yi, 32, 8)
        desc = f"every stage compute_root, gpu_tile(x, y, 32, 8): {STENCILS} kernels"
    elif variant == "root_unroll_y4":
        yy = hl.Var("yy")
        for f in stages:
            f.compute_root().split(y, y, yy, 4).unroll(yy).gpu_tile(x, y, xi, yi, 32, 8)
        desc = (f"every stage compute_root, split(y, 4).unroll.gpu_tile(x, y, 32, 8): four "
                f"rows per thread; {STENCILS} kernels")
    elif variant == "smem":
        xo, yo, yii = hl.Var("xo"), hl.Var("yo"), hl.Var("yii")
        cxo, cyo, cxi, cyi = hl.Var("cxo"), hl.Var("cyo"), hl.Var("cxi"), hl.Var("cyi")
        for f, cl in zip(stages, clamps):
            (f.compute_root().tile(x, y, xo, yo, xi, yi, 32, 32).split(yi, yi, yii, 4)
             .reorder(yii, xi, yi, xo, yo).unroll(yii).gpu_blocks(xo, yo).gpu_threads(xi, yi))
            (cl.compute_at(f, xo).tile(x, y, cxo, cyo, cxi, cyi, 32, 8, hl.TailStrategy.RoundUp)
             .gpu_threads(cxi, cyi))
        desc = ("every stage compute_root in 32x32 tiles (32x8 threads, four rows each, "
                "unrolled), its clamped input tile with the halo (36x36) loaded into shared "
                f"memory first; {STENCILS} kernels")
    elif variant.startswith("fuse"):
        g = int(variant[4:])
        for start in range(0, len(stages), g):
            group = stages[start:start + g]
            root = group[-1]
            root.compute_root().gpu_tile(x, y, xi, yi, 32, 8)
            for d, f in enumerate(reversed(group[:-1]), start=1):
                # a constant-size tile with its halo (2 per stage each side): the
                # clamped reads at the image edge otherwise make Halide size the shared
                # memory by a host loop over all blocks before every launch
                (f.compute_at(root, x).bound_extent(x, 32 + 4 * d).bound_extent(y, 8 + 4 * d)
                 .gpu_threads(x, y))
        desc = (f"stages in groups of {g}: the last of a group compute_root gpu_tile(32, 8), "
                "the others computed per tile in shared memory (gpu_threads)")
    else:
        raise UsageError(f"unknown variant {variant!r}")
    return hl.Pipeline(out), {"in": inp}, desc


GPU_VARIANTS = {
    "brighten": ELEMENTWISE_VARIANTS, "shift": ELEMENTWISE_VARIANTS,
    "downsample": ELEMENTWISE_VARIANTS, "upsample": ELEMENTWISE_VARIANTS,
    "blur": ["inline", "slide", "cache"],
    "histogram": ["rfactor_shared", "global_atomic"],
    "bilateral_grid": ["app"], "interpolate": ["app"], "local_laplacian": ["app"],
    "stencil_chain": ["root", "root_unroll_y4", "smem", "fuse2", "fuse4"],
}


# --------------------------------------------------------------------------------------
# running and timing
# --------------------------------------------------------------------------------------

def _preload_libcuda() -> str | None:
    """Load the CUDA driver library into the process (global symbols): Halide's CUDA
    runtime looks for ``libcuda.so``, which driver-only installs may not have, but it
    first takes the symbols from the process where they are already there."""
    import ctypes
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            return name
        except OSError:
            continue
    return None


def make_target(name: str):
    hl = _hl()
    host = hl.get_host_target()
    if name == "host":
        return host, False
    if name == "host-cuda":
        return (host.with_feature(hl.TargetFeature.CUDA)
                .with_feature(hl.TargetFeature.CUDACapability86)), True
    try:
        t = hl.Target(name)
    except Exception as e:   # noqa: BLE001 - Halide raises its own error types
        raise UsageError(f"--target: Halide does not know the target {name!r} "
                         f"({str(e).splitlines()[0]})") from None
    return t, t.has_gpu_feature()


def _set_levels(w: int, h: int):
    """The pyramid depths follow the image size (the project's defaults); a pipeline is
    built for one depth, so the check size and the timed size may differ in depth."""
    global _INTERP_LEVELS, _LL_DEPTH
    _INTERP_LEVELS = interpolate_levels(h, w)
    _LL_DEPTH = laplacian_depth(h, w)


def _buffers(hl, bench: str, inputs: dict, params: dict):
    bufs = {}
    for name, arr in inputs.items():
        a = to_halide_layout(bench, name, arr)
        b = hl.Buffer(a)
        params[name].set(b)
        bufs[name] = (b, a)
    return bufs


def _out_buffer(hl, bench: str, w: int, h: int):
    t = hl.Int(32) if bench == "histogram" else hl.Float(32)
    return hl.Buffer(t, output_shape(bench, w, h))


def _to_numpy(bench, buf) -> np.ndarray:
    return from_halide_layout(bench, np.array(buf, copy=True))


def max_abs_err(a: np.ndarray, b: np.ndarray) -> float | None:
    if a.shape != b.shape:
        return None
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    d = np.abs(a - b)
    d[both_nan] = 0.0
    if np.isnan(d).any():
        return float("inf")
    return float(d.max()) if d.size else 0.0


def _realize(p, out, target):
    p.realize(out, target)


def _set_reuse(target, flag: bool) -> bool:
    """``halide_reuse_device_allocations(flag)`` in the JIT runtime, through a one-stage
    extern pipeline (the call is not in the Python bindings). True where it ran."""
    hl = _hl()
    f = hl.Func("set_reuse_device_allocations")
    f.define_extern("halide_reuse_device_allocations",
                    [hl.ExternFuncArgument(hl.cast(hl.UInt(64), 0)),
                     hl.ExternFuncArgument(hl.cast(hl.Int(32), 1 if flag else 0))],
                    hl.Int(32), 1)
    p = hl.Pipeline(f)
    p.compile_jit(target)
    b = hl.Buffer(hl.Int(32), [1])
    p.realize(b, target)
    return True


def time_calls(p, out, target, repeats, warmup, budget_s):
    """Times of ``realize`` + ``device_sync``, after *warmup* calls; at least 10 and at
    most *repeats* calls, fewer than *repeats* only when *budget_s* runs out. Returns
    ``(times_ms, batch_ms)``: the per-call times and the mean of a batch of calls with
    one sync at the end."""
    for _ in range(warmup):
        _realize(p, out, target)
        out.device_sync()
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < repeats and (len(times) < 10 or time.perf_counter() < t_end):
        t0 = time.perf_counter()
        _realize(p, out, target)
        out.device_sync()
        times.append((time.perf_counter() - t0) * 1e3)
    nb = max(5, min(repeats, int(0.5 * budget_s / max(statistics.median(times) / 1e3, 1e-6))))
    nb = min(nb, 4 * repeats)
    t0 = time.perf_counter()
    for _ in range(nb):
        _realize(p, out, target)
    out.device_sync()
    batch = (time.perf_counter() - t0) * 1e3 / nb
    return times, batch


def _levels_key(w: int, h: int) -> tuple[int, int]:
    return interpolate_levels(h, w), laplacian_depth(h, w)


def _compiled(cache: dict, bench, var, is_gpu, target, w, h, vr, key):
    """The pipeline of *var* built for a ``w x h`` image's pyramid depths, compiled for
    *target*; one compile serves both sizes where their depths agree."""
    ck = (var, _levels_key(w, h))
    if ck not in cache:
        _set_levels(w, h)
        p, params, desc = build(bench, gpu=is_gpu, variant=None if var == "cpu" else var)
        t0 = time.perf_counter()
        p.compile_jit(target)
        vr[key] = time.perf_counter() - t0
        cache[ck] = (p, params, desc)
    return cache[ck]


def _check_variant(hl, bench, var, is_gpu, target, check_in, ref, cpu_out, cw, ch, vr, log,
                   cache):
    p, params, _ = _compiled(cache, bench, var, is_gpu, target, cw, ch, vr, "compile_s")
    keep = _buffers(hl, bench, check_in, params)
    ob = _out_buffer(hl, bench, cw, ch)
    p.realize(ob, target)
    if is_gpu:
        ob.copy_to_host()
    got = _to_numpy(bench, ob)
    vr["vs_numpy_max_abs_err"] = max_abs_err(got, ref)
    if cpu_out is not None:
        vr["vs_cpu_max_abs_err"] = max_abs_err(got, cpu_out)
    tol = 4 * ATOL[bench] + 1e-6
    errs = [vr["vs_numpy_max_abs_err"]] + ([vr["vs_cpu_max_abs_err"]]
                                           if "vs_cpu_max_abs_err" in vr else [])
    vr["check_tolerance"] = tol
    vr["check_ok"] = all(e is not None and e <= tol for e in errs)
    if is_gpu:
        ob.device_free()
        for b, _arr in keep.values():
            b.device_free()
    del keep
    log(f"  {var}: check {cw}x{ch}: |-numpy| {vr['vs_numpy_max_abs_err']:.3g}"
        f", |-cpu| {vr.get('vs_cpu_max_abs_err', float('nan')):.3g}"
        f"{'' if vr['check_ok'] else '  (OVER TOLERANCE)'}")


def run_bench(bench: str, a, log) -> dict:
    """Everything measured for one benchmark, as a dict (errors recorded, not raised).

    On a GPU, each variant is first timed with Halide's default allocation policy
    (intermediates allocated and freed on the device in every call), then, after
    ``halide_reuse_device_allocations(true)``, again: the second is the reported time,
    as Halide's own benchmarks measure."""
    hl = _hl()
    target, is_gpu = make_target(a.target)
    cpu_target = hl.get_host_target()
    w, h = a.size
    cw, ch = a.check_size
    if is_gpu and target.has_feature(hl.TargetFeature.CUDA):
        _preload_libcuda()
    res = {"bench": bench, "target": str(target), "size": [w, h],
           "megapixels": w * h / 1e6, "bytes_io": io_bytes(bench, w, h),
           "check_size": [cw, ch], "atol": ATOL[bench], "variants": {}}
    if bench in ("interpolate", "local_laplacian"):
        lv = interpolate_levels if bench == "interpolate" else laplacian_depth
        res["levels"] = {"timed": lv(h, w), "check": lv(ch, cw)}
    variants = GPU_VARIANTS[bench] if is_gpu else ["cpu"]
    if a.variant and is_gpu:
        variants = [v for v in variants if v in a.variant] or variants[:1]
    # --- references at the check size
    check_in = make_input(bench, cw, ch, seed=1)
    ref = cpu_out = None
    if not a.no_check:
        t0 = time.perf_counter()
        ref = NUMPY_REF[bench](check_in["in"])
        res["numpy_ref_s"] = time.perf_counter() - t0
        try:
            _set_levels(cw, ch)
            t0 = time.perf_counter()
            p, params, _ = build(bench, gpu=False)
            p.compile_jit(cpu_target)
            res["cpu_compile_s"] = time.perf_counter() - t0
            keep = _buffers(hl, bench, check_in, params)
            ob = _out_buffer(hl, bench, cw, ch)
            p.realize(ob, cpu_target)
            cpu_out = _to_numpy(bench, ob)
            del keep
            res["cpu_vs_numpy_max_abs_err"] = max_abs_err(cpu_out, ref)
            log(f"  cpu check {cw}x{ch}: max |cpu - numpy| = "
                f"{res['cpu_vs_numpy_max_abs_err']:.3g}")
        except Exception as e:  # noqa: BLE001
            res["cpu_error"] = f"{type(e).__name__}: {e}"
            log(f"  cpu check failed: {res['cpu_error']}")
    full_in = make_input(bench, w, h, seed=0)
    live = []      # (variant, pipeline, buffers, output) kept for the second timing
    cache = {}
    for var in variants:
        vr = {}
        res["variants"][var] = vr
        try:
            if not a.no_check:
                _check_variant(hl, bench, var, is_gpu, target, check_in, ref, cpu_out, cw, ch,
                               vr, log, cache)
            p, params, desc = _compiled(cache, bench, var, is_gpu, target, w, h, vr,
                                        "compile_s" if a.no_check else "compile_timed_s")
            vr["schedule"] = desc
            bufs = _buffers(hl, bench, full_in, params)
            out = _out_buffer(hl, bench, w, h)
            t0 = time.perf_counter()
            p.realize(out, target)
            out.device_sync()
            vr["first_call_ms"] = (time.perf_counter() - t0) * 1e3
            times, batch = time_calls(p, out, target, a.repeats, a.warmup, a.time_budget_s)
            sfx = "_no_reuse" if is_gpu else ""
            vr.update({f"ms_median{sfx}": statistics.median(times),
                       f"ms_min{sfx}": min(times), f"ms_batch_mean{sfx}": batch})
            if is_gpu:
                live.append((var, p, bufs, out))
                log(f"  {var}: {w}x{h} (allocations not reused): median "
                    f"{statistics.median(times):.3f} ms, batch {batch:.3f} ms")
            else:
                vr["runs"] = len(times)
        except Exception as e:  # noqa: BLE001
            vr["error"] = f"{type(e).__name__}: {e}".strip()[:4000]
            log(f"  {var}: FAILED: {vr['error'].splitlines()[0] if vr['error'] else ''}")
    if is_gpu and live:
        try:
            _set_reuse(target, True)
            res["reuse_device_allocations"] = True
        except Exception as e:  # noqa: BLE001
            res["reuse_device_allocations"] = False
            res["reuse_error"] = f"{type(e).__name__}: {e}"
            log(f"  could not enable halide_reuse_device_allocations: {res['reuse_error']}")
        for var, p, bufs, out in live:
            vr = res["variants"][var]
            try:
                times, batch = time_calls(p, out, target, a.repeats, a.warmup,
                                          a.time_budget_s)
                vr.update(ms_median=statistics.median(times), ms_min=min(times),
                          ms_batch_mean=batch, runs=len(times))
                h2d = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    for b, _arr in bufs.values():
                        b.set_host_dirty(True)
                        rc = b.copy_to_device(target)
                        if rc:
                            raise RuntimeError(f"copy_to_device returned {rc}")
                        b.device_sync()
                    h2d.append((time.perf_counter() - t0) * 1e3)
                d2h = []
                for _ in range(5):
                    out.set_device_dirty(True)
                    t0 = time.perf_counter()
                    rc = out.copy_to_host()
                    if rc:
                        raise RuntimeError(f"copy_to_host returned {rc}")
                    d2h.append((time.perf_counter() - t0) * 1e3)
                vr["h2d_ms"] = statistics.median(h2d)
                vr["d2h_ms"] = statistics.median(d2h)
            except Exception as e:  # noqa: BLE001
                vr["error"] = f"{type(e).__name__}: {e}".strip()[:4000]
                log(f"  {var}: FAILED: {vr['error'].splitlines()[0] if vr['error'] else ''}")
            try:
                out.device_free()
                for b, _arr in bufs.values():
                    b.device_free()
            except Exception:  # noqa: BLE001
                pass
        del live
    for var, vr in res["variants"].items():
        if "ms_median" in vr:
            vr["ms_per_megapixel"] = vr["ms_median"] / res["megapixels"]
            vr["io_gb_per_s"] = res["bytes_io"] / (vr["ms_median"] * 1e-3) / 1e9
            log(f"  {var}: {w}x{h}: median {vr['ms_median']:.3f} ms, min {vr['ms_min']:.3f}, "
                f"batch {vr['ms_batch_mean']:.3f} ms ({vr['ms_per_megapixel']:.4f} ms/MP, "
                f"{vr['io_gb_per_s']:.1f} GB/s of input+output)"
                + (f", h2d {vr['h2d_ms']:.2f} ms, d2h {vr['d2h_ms']:.2f} ms"
                   if "h2d_ms" in vr else ""))
    ok = {k: v for k, v in res["variants"].items() if "ms_median" in v
          and v.get("check_ok", True)}
    if ok:
        best = min(ok, key=lambda k: ok[k]["ms_median"])
        b = ok[best]
        res.update(best_variant=best, ms_median=b["ms_median"], ms_min=b["ms_min"],
                   ms_batch_mean=b["ms_batch_mean"], ms_per_megapixel=b["ms_per_megapixel"],
                   io_gb_per_s=b["io_gb_per_s"], check_ok=b.get("check_ok"),
                   max_abs_err_vs_numpy=b.get("vs_numpy_max_abs_err"),
                   max_abs_err_vs_cpu=b.get("vs_cpu_max_abs_err"))
        for key in ("ms_median_no_reuse", "h2d_ms", "d2h_ms"):
            if key in b:
                res[key] = b[key]
    else:
        res["error"] = "no variant compiled, ran and passed its check"
    return res


# --------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------

def _wh(text: str, flag: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"{flag}: a size is WxH, like 7680x4320, not {text!r}") from None
    if w < 16 or h < 16:
        raise UsageError(f"{flag}: the pipelines need at least 16x16, not {text!r}")
    return w, h


def _finite(obj):
    """The object with non-finite floats as strings ("inf", "nan"): strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json_atomic(path: str, obj) -> None:
    obj = _finite(obj)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".halide_gpu.", suffix=".json", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def device_name() -> str | None:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=20)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def halide_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("halide")
    except Exception:  # noqa: BLE001
        pass
    try:
        hl = _hl()
        return getattr(hl, "__version__", None)
    except Exception:  # noqa: BLE001
        return None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the results here (atomically, after each benchmark)")
    p.add_argument("--size", default="7680x4320", help="timed image size WxH (default 8K)")
    p.add_argument("--check-size", default="512x512",
                   help="size of the CPU and numpy checks (default 512x512)")
    p.add_argument("--bench", action="append", help="only this benchmark (repeatable)")
    p.add_argument("--variant", action="append",
                   help="only this GPU schedule variant (repeatable; default all)")
    p.add_argument("--target", default="host-cuda",
                   help="Halide target: host-cuda (default), host, or a Halide target string")
    p.add_argument("--repeats", type=int, default=20, help="timed calls (>= 10, default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    p.add_argument("--time-budget-s", type=float, default=5.0,
                   help="seconds of timing per variant beyond the first 10 calls")
    p.add_argument("--no-check", action="store_true", help="skip the CPU and numpy checks")
    p.add_argument("--bench-timeout-s", type=float, default=240.0,
                   help="a benchmark's child process is stopped after this long")
    p.add_argument("--deadline-s", type=float, default=None,
                   help="start no benchmark after this many seconds; stop the running one then")
    p.add_argument("--no-isolate", action="store_true",
                   help="run the benchmarks in this process, not one child each")
    p.add_argument("--merge", metavar="OLD_JSON",
                   help="start from the benchmarks of an earlier --json file and replace "
                        "those run now (a long measurement made in parts)")
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.size = _wh(a.size, "--size")
    a.check_size = _wh(a.check_size, "--check-size")
    if a.repeats < 10:
        raise UsageError(f"--repeats: at least 10, not {a.repeats}")
    if a.warmup < 1:
        raise UsageError(f"--warmup: at least 1, not {a.warmup}")
    benches = a.bench or BENCHES
    unknown = [b for b in benches if b not in BENCHES]
    if unknown:
        raise UsageError(f"--bench: unknown {', '.join(unknown)}; choose from "
                         f"{', '.join(BENCHES)}")
    a.bench = list(dict.fromkeys(benches))
    a.merged = None
    if a.merge and not a.child_out:
        try:
            with open(a.merge) as f:
                old = json.load(f)
        except (OSError, ValueError) as e:
            raise UsageError(f"--merge: cannot read {a.merge} ({e})") from None
        if not isinstance(old, dict) or old.get("schema") != SCHEMA:
            raise UsageError(f"--merge: {a.merge} is not a {SCHEMA} file")
        a.merged = old
    if a.json:
        d = os.path.dirname(os.path.abspath(a.json))
        if not os.path.isdir(d):
            raise UsageError(f"--json: the folder {d} does not exist")
    return a


def _log(msg: str) -> None:
    print(msg, flush=True)


def _child(a) -> int:
    bench = a.bench[0]
    try:
        res = run_bench(bench, a, _log)
    except Exception as e:  # noqa: BLE001
        res = {"bench": bench, "error": f"{type(e).__name__}: {e}",
               "traceback": traceback.format_exc()[-4000:]}
    res["halide_version"] = halide_version()
    write_json_atomic(a.child_out, res)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        a = parse_args(argv)
        if a.child_out:
            return _child(a)
        import halide  # noqa: F401 - fail early, with one line, where it is missing
        make_target(a.target)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"error: the halide Python bindings are needed ({e})", file=sys.stderr)
        return 2
    t_start = time.time()
    doc = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "device": device_name(),
           "halide_version": halide_version(), "target": a.target,
           "size": list(a.size), "check_size": list(a.check_size), "repeats": a.repeats,
           "python": sys.version.split()[0], "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "timing": ("realize into a device-resident output + device_sync, wall clock; "
                      "median/min of the timed calls after warm-up; batch = mean of "
                      "back-to-back calls with one sync; copies excluded and timed apart"),
           "benchmarks": {}}
    if a.merged is not None:
        old = a.merged
        kept = [b for b in old.get("benchmarks", {}) if b not in a.bench]
        doc["benchmarks"] = {b: old["benchmarks"][b] for b in kept}
        doc["merged_from"] = {"file": os.path.basename(a.merge), "started": old.get("started"),
                              "device": old.get("device"), "target": old.get("target"),
                              "size": old.get("size"), "benchmarks_kept": kept}
    _log(f"halide {doc['halide_version']}, target {a.target}, device {doc['device']}, "
         f"size {a.size[0]}x{a.size[1]}, check {a.check_size[0]}x{a.check_size[1]}")
    if a.json:
        write_json_atomic(a.json, doc)
    for bench in a.bench:
        elapsed = time.time() - t_start
        if a.deadline_s is not None and elapsed > a.deadline_s - 5:
            doc["benchmarks"][bench] = {"bench": bench, "error": "skipped: deadline reached"}
            _log(f"{bench}: skipped (deadline)")
            continue
        _log(f"{bench}:")
        t0 = time.time()
        if a.no_isolate:
            try:
                res = run_bench(bench, a, _log)
            except Exception as e:  # noqa: BLE001
                res = {"bench": bench, "error": f"{type(e).__name__}: {e}"}
        else:
            timeout = a.bench_timeout_s
            if a.deadline_s is not None:
                timeout = min(timeout, a.deadline_s - elapsed)
            fd, child_json = tempfile.mkstemp(prefix=f".halide_gpu_{bench}.", suffix=".json")
            os.close(fd)
            os.unlink(child_json)
            cmd = [sys.executable, os.path.abspath(__file__), "--bench", bench,
                   "--child-out", child_json, "--target", a.target,
                   "--size", f"{a.size[0]}x{a.size[1]}",
                   "--check-size", f"{a.check_size[0]}x{a.check_size[1]}",
                   "--repeats", str(a.repeats), "--warmup", str(a.warmup),
                   "--time-budget-s", str(a.time_budget_s)]
            cmd += ["--no-check"] if a.no_check else []
            for v in a.variant or []:
                cmd += ["--variant", v]
            try:
                r = subprocess.run(cmd, timeout=max(timeout, 1.0))
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            if os.path.exists(child_json):
                with open(child_json) as f:
                    res = json.load(f)
                os.unlink(child_json)
                if rc not in (0,):
                    res["child_exit"] = rc
            else:
                res = {"bench": bench, "error": f"child process ended without a result "
                                                f"(exit {rc}) after {time.time() - t0:.0f} s"}
        res["wall_s"] = time.time() - t0
        doc["benchmarks"][bench] = res
        if doc["halide_version"] is None and res.get("halide_version"):
            doc["halide_version"] = res["halide_version"]
        msg = (f"{bench}: {res['ms_median']:.3f} ms ({res['ms_per_megapixel']:.4f} ms/MP), "
               f"best {res['best_variant']}" if "ms_median" in res
               else f"{bench}: no time ({res.get('error', '?')})")
        _log(msg)
        if a.json:
            doc["wall_s"] = time.time() - t_start
            write_json_atomic(a.json, doc)
    doc["wall_s"] = time.time() - t_start
    if a.json:
        write_json_atomic(a.json, doc)
        _log(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
