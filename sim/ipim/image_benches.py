"""The Table II benchmarks written in the front end (:mod:`pimforge.sim.ipim.lang`): the
algorithms of :mod:`pimforge.verif.models.image`, operation for operation, with their
iPIM schedules (Listing 1's: ``compute_root``, ``ipim_tile``, ``load_pgs``,
``vectorize(xi, 4)``).

Each builder returns ``(out, layout, crop)``: the output func, the ``(W, H)`` the
compiler computes it over (the bands and lanes need ``W`` a multiple of 16 and ``H``
of the PEs), and the ``(rows, cols)`` of it that is the benchmark's output (the
blur's valid region is smaller than the image it is computed on).
"""

from __future__ import annotations

from collections.abc import Callable

from ...verif.models.image import stencil_weights
from .lang import FP32, INT32, CompileError, Func, ImageParam, RDom, Var

__all__ = ["PIPELINES", "build"]

_X, _Y, _XI, _YI = Var("x"), Var("y"), Var("xi"), Var("yi")


def _schedule(f: Func, tile=(8, 8)) -> Func:
    return f.compute_root().ipim_tile(_X, _Y, _XI, _YI, *tile).load_pgs().vectorize(_XI, 4)


def brighten(H: int, W: int, a: float = 1.5):
    x, y = _X, _Y
    inp = ImageParam("in", FP32)
    out = Func("out")
    out[x, y] = inp[x, y] * a
    return _schedule(out), (W, H), (H, W)


def blur(H: int, W: int):
    """Listing 1: ``blur_x`` inlined into ``out``; computed over the whole image, of which
    the valid ``(H-2, W-2)`` region (no clamped read) is the output."""
    x, y = _X, _Y
    inp = ImageParam("in", FP32)
    bx = Func("blur_x")
    bx[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3.0
    out = Func("out")
    out[x, y] = (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) / 3.0
    return _schedule(out), (W, H), (H - 2, W - 2)


def downsample(H: int, W: int):
    x, y = _X, _Y
    inp = ImageParam("in", FP32)
    d = Func("d")
    d[x, y] = (inp[2 * x - 1, y] + 2.0 * inp[2 * x, y] + inp[2 * x + 1, y]) * 0.25
    out = Func("out")
    out[x, y] = (d[x, 2 * y - 1] + 2.0 * d[x, 2 * y] + d[x, 2 * y + 1]) * 0.25
    return _schedule(out), (W // 2, H // 2), (H // 2, W // 2)


def upsample(H: int, W: int):
    x, y = _X, _Y
    inp = ImageParam("in", FP32)
    u = Func("u")
    u[x, y] = (inp[x // 2, y] + inp[(x + 1) // 2, y]) * 0.5
    _schedule(u)
    out = Func("out")
    out[x, y] = (u[x, y // 2] + u[x, (y + 1) // 2]) * 0.5
    return _schedule(out), (2 * W, 2 * H), (2 * H, 2 * W)


def shift(H: int, W: int, dx: int = 4, dy: int = 4):
    x, y = _X, _Y
    inp = ImageParam("in", FP32)
    out = Func("out")
    out[x, y] = inp[x - dx, y - dy]
    return _schedule(out), (W, H), (H, W)


def stencil_chain(H: int, W: int, stencils: int = 32):
    """Every stage ``compute_root``: its halo rows cross the PEs (PGSM, VSM, ``req``)."""
    x, y = _X, _Y
    wts = stencil_weights()
    inp = ImageParam("in", FP32)
    prev = inp
    out = None
    for t in range(stencils):
        s = Func(f"s{t + 1}")
        e = None
        for i in range(-2, 3):
            for j in range(-2, 3):
                term = float(wts[j + 2, i + 2]) * prev[x + i, y + j]
                e = (0.0 + term) if e is None else e + term
        s[x, y] = e / 225.0
        _schedule(s)
        prev = out = s
    return out, (W, H), (H, W)


def histogram(H: int, W: int):
    """``hist[x] = 0; hist[in(r.x, r.y)] += 1`` over an 8-bit image (held as INT32)."""
    x = _X
    inp = ImageParam("in", INT32)
    r = RDom(inp)
    hist = Func("hist")
    hist[x] = 0
    hist[inp[r.x, r.y]] += 1
    hist.bound(x, 0, 256)
    return hist, (W, H), (256,)


#: Benchmark name -> builder ``(H, W, **params) -> (out, layout (W, H), crop (rows, cols))``.
PIPELINES: dict[str, Callable] = {
    "brighten": brighten, "blur": blur, "downsample": downsample, "upsample": upsample,
    "shift": shift, "histogram": histogram, "stencil_chain": stencil_chain,
}


def build(name: str, H: int, W: int, **params):
    """``(out, layout, crop)`` of benchmark *name* for an ``(H, W)`` input."""
    try:
        fn = PIPELINES[name]
    except KeyError:
        raise CompileError(f"the compiler has no pipeline for {name!r} yet; it has "
                           f"{', '.join(sorted(PIPELINES))}") from None
    return fn(H, W, **params)

