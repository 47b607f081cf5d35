"""The Table II benchmarks written in the front end (:mod:`pimforge.sim.ipim.lang`): the
algorithms of :mod:`pimforge.verif.models.ipim.image`, operation for operation, with their
iPIM schedules (Listing 1's: ``compute_root``, ``ipim_tile``, ``load_pgs``,
``vectorize(xi, 4)``).

Each builder returns ``(out, layout, crop)``: the output func, the ``(W, H)`` the
compiler computes it over (the lanes need ``W`` a multiple of 4; the bands take any
``H``, the last one shorter), and the ``(rows, cols[, channels])`` of it that is the
benchmark's output (the blur's valid region is smaller than the image it is computed
on). A builder with a ``pes`` argument gets the machine's PE count: a pyramid's schedule
tiles the levels the bands can hold and replicates the smaller ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from pimforge.rtl.ipim.isa import LANES
from pimforge.verif.models.ipim.image import (
    interpolate_levels,
    laplacian_depth,
    remap_lut,
    stencil_weights,
)

from .lang import (
    FP32,
    INT32,
    CompileError,
    Expr,
    Func,
    ImageParam,
    RBox,
    RDom,
    Table,
    Var,
    by_parity,
    cast,
    clamp,
    coord,
    reinterpret,
    select,
    stack,
)

__all__ = ["PIPELINES", "build"]

_X, _Y, _XI, _YI, _C, _Z = Var("x"), Var("y"), Var("xi"), Var("yi"), Var("c"), Var("z")


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


def _replicate(f: Func) -> Func:
    return f.compute_root().ipim_replicate()


#: ``0x7EF311C3 - bits(a)``, read as a float, is within 12.5% of ``1/a`` for normal ``a``
_RECIP_MAGIC = 0x7EF311C3


def divide(n: Expr, d: Expr) -> Expr:
    """``n / d`` for ``d > 0`` without a divide instruction (Table I has none): a first
    guess of ``1/d`` from its bits, three Newton-Raphson steps ``r = r * (2 - d*r)``
    (relative error 0.125 -> 1.6e-2 -> 2.4e-4 -> 6e-8, then float32 rounding), the
    quotient ``q = n * r`` and one residual correction ``q + (n - q*d) * r``: within a
    few ulp of the correctly rounded quotient. ``d = 0`` gives NaN (as 0/0 does)."""
    r = reinterpret(FP32, _RECIP_MAGIC - reinterpret(INT32, d))
    for _ in range(3):
        r = r * (2.0 - d * r)
    q = n * r
    return q + (n - q * d) * r


def _tiled_levels(H: int, W: int, L: int, pes: int) -> int:
    """The last pyramid level ``m`` that is tiled: levels ``0..m`` halve exactly into
    widths that are multiples of 16 and heights that are multiples of the PEs, and the
    levels below ``m`` have an even number of rows per PE (an upsampling kernel makes two
    rows per step); the smaller levels are replicated."""
    m = 0
    for lv in range(1, L):
        w, h = W >> lv, H >> lv
        ok = (w << lv, h << lv) == (W, H) and w % 16 == 0 and h % pes == 0
        if not ok or (H >> (lv - 1)) // pes % 2:
            break
        m = lv
    return m


def interpolate(H: int, W: int, levels: int | None = None, *, pes: int = 1):
    """Halide's ``apps/interpolate`` on premultiplied RGBA: funcs ``f[x, y, c]`` of four
    channels.

    ``D_l = down(D_{l-1})`` (``dx`` in x, then y, inlined: one stage reads 3x3 taps at
    stride 2), ``I_l = D_l + (1 - D_l.a) * up(I_{l+1})`` (``ux`` and ``up`` inlined),
    ``out = I_0 / I_0.a`` (:func:`divide`). The levels down to ``m``
    (:func:`_tiled_levels`) are tiled over the PEs, a plane per channel; the smaller
    ones are replicated in every PE with the channels in the lanes, and so is level
    ``m``'s upsampling ``up_m``, so that ``I_m`` reads it at its own size."""
    x, y, c = _X, _Y, _C
    L = interpolate_levels(H, W) if levels is None else levels
    m = _tiled_levels(H, W, L, pes)
    inp = ImageParam("in", FP32, channels=4)

    def sched(f: Func, lv: int) -> Func:
        f.bound(c, 0, 4)
        return _schedule(f) if lv <= m else _replicate(f)

    d0 = Func("d0")
    d0[x, y, c] = inp[x, y, c]
    d0.bound(c, 0, 4)
    down = [d0]
    for lv in range(1, L):
        p = down[-1]
        dx = Func(f"dx{lv}")
        dx[x, y, c] = (p[2 * x - 1, y, c] + 2.0 * p[2 * x, y, c] + p[2 * x + 1, y, c]) * 0.25
        dx.bound(c, 0, 4)
        d = Func(f"d{lv}")
        d[x, y, c] = (dx[x, 2 * y - 1, c] + 2.0 * dx[x, 2 * y, c] + dx[x, 2 * y + 1, c]) * 0.25
        down.append(sched(d, lv))
    interp = down[L - 1]
    for lv in range(L - 2, -1, -1):
        ux = Func(f"ux{lv}")
        ux[x, y, c] = (interp[x // 2, y, c] + interp[(x + 1) // 2, y, c]) * 0.5
        ux.bound(c, 0, 4)
        up = Func(f"up{lv}")
        up[x, y, c] = (ux[x, y // 2, c] + ux[x, (y + 1) // 2, c]) * 0.5
        up.bound(c, 0, 4)
        if lv == m:
            _replicate(up)
        d = down[lv]
        i = Func(f"i{lv}")
        i[x, y, c] = d[x, y, c] + (1.0 - d[x, y, 3]) * up[x, y, c]
        interp = sched(i, lv)
    out = Func("out")
    out[x, y, c] = divide(interp[x, y, c], interp[x, y, 3])
    out.bound(c, 0, 4)
    return _schedule(out), (W, H), (H, W, 4)


def _blur5(g: Func, name: str, axis: int) -> Func:
    """``(((g(i-2) + g(i-1)*4) + g(i)*6) + g(i+1)*4) + g(i+2)`` along *axis* (0 x, 1 y,
    2 z) of the grid *g*."""
    x, y, z, c = _X, _Y, _Z, _C

    def tap(o: int):
        d = [0, 0, 0]
        d[axis] = o
        return g[x + d[0], y + d[1], z + d[2], c]

    b = Func(name)
    b[x, y, z, c] = (((tap(-2) + tap(-1) * 4.0) + tap(0) * 6.0) + tap(1) * 4.0) + tap(2)
    return b


def bilateral_grid(H: int, W: int, s_sigma: int = 8, r_sigma: float = 0.1):
    """Halide's ``apps/bilateral_grid`` (:func:`pimforge.verif.models.ipim.image.bilateral_grid`).

    The grid ``g[x, y, z, c]`` (cells ``x`` in ``[-2, GW+2)``, ``y`` in ``[-2, GH+2)``,
    bins ``z`` in ``[-2, Z+2)``, channels value and count) is a scatter over an
    ``s x s`` :class:`RBox` of each cell's window of the input, clamped to the image;
    its blurs in z, x and y are grids too (each over the cells the next one reads), all
    replicated in every PE; the slice is a tiled func that reads the blurred grid at the
    eight cells around each pixel, whose bin comes from the pixel's value (a gather),
    and divides (:func:`divide`). The reference's ``clamp(val, 0, 1)`` is left out: it
    is the identity on the inputs ``check_input`` accepts."""
    s = int(s_sigma)
    if s < 1 or s & (s - 1):
        raise CompileError(f"bilateral_grid: the compiled grid needs s_sigma a power of two "
                           f"(its window rows tile the image), not {s_sigma}")
    x, y, z, c = _X, _Y, _Z, _C
    inv_r = float(np.float32(1.0) / np.float32(r_sigma))
    zmax = int(np.float32(inv_r) + np.float32(0.5))
    gh, gw, nz = (H - 1) // s + 2, (W - 1) // s + 2, zmax + 2
    inp = ImageParam("in", FP32)
    r = RBox(s, s)
    val = inp[x * s + r.x - s // 2, y * s + r.y - s // 2]
    grid = Func("grid")
    grid[x, y, z, c] = 0.0
    grid[x, y, cast(INT32, val * inv_r + 0.5)] += (val, 1.0)
    grid.bound(x, -2, gw + 4).bound(y, -2, gh + 4).bound(z, -2, nz + 4).bound(c, 0, 2)
    boxes = [(-2, gw + 4, -2, gh + 4), (0, gw, -2, gh + 4), (0, gw, 0, gh)]
    g = _replicate(grid)
    for axis, name, (xlo, nx, ylo, ny) in zip((2, 0, 1), ("blurz", "blurx", "blury"), boxes,
                                              strict=True):
        g = _blur5(g, name, axis)
        g.bound(x, xlo, nx).bound(y, ylo, ny).bound(z, -2, nz + 4).bound(c, 0, 2)
        _replicate(g)
    # slicing: the pixel's cell (x // s, y // s, its bin) and the weights within it
    sh = s.bit_length() - 1
    v = inp[x, y]
    zv = v * inv_r
    zi = cast(INT32, zv)
    zf = zv - cast(FP32, zi)
    X, Y = coord(x), coord(y)
    xi, yi = X >> sh, Y >> sh
    xf = cast(FP32, X & (s - 1)) * (1.0 / s)
    yf = cast(FP32, Y & (s - 1)) * (1.0 / s)
    ix, iy, iz = [xi, xi + 1], [yi, yi + 1], [zi, zi + 1]

    def lerp(a, b, t):
        return a + (b - a) * t

    def interp(ch: int) -> Expr:
        def B(dx, dy, dz):
            return g[ix[dx], iy[dy], iz[dz], ch]

        def plane(dz):
            return lerp(lerp(B(0, 0, dz), B(1, 0, dz), xf), lerp(B(0, 1, dz), B(1, 1, dz), xf),
                        yf)

        return lerp(plane(0), plane(1), zf)

    out = Func("out")
    out[x, y] = divide(interp(0), interp(1))
    return _schedule(out), (W, H), (H, W)


def _at(f, ch, xx, yy) -> Expr:
    return f[xx, yy] if ch is None else f[xx, yy, ch]


def _ll_down(f, ch, name: str) -> Func:
    """``((f(2x-1) + 3*(f(2x) + f(2x+1))) + f(2x+2)) * 0.125`` in x (``dx``, inlined), then
    in y: the local Laplacian's 1-3-3-1 downsampling of channel *ch* of *f*."""
    x, y, c = _X, _Y, _C
    dx = Func(f"{name}x")
    v = (((_at(f, ch, 2 * x - 1, y) + 3.0 * (_at(f, ch, 2 * x, y) + _at(f, ch, 2 * x + 1, y)))
          + _at(f, ch, 2 * x + 2, y)) * 0.125)
    d = Func(name)
    if ch is None:
        dx[x, y] = v
        d[x, y] = ((dx[x, 2 * y - 1] + 3.0 * (dx[x, 2 * y] + dx[x, 2 * y + 1]))
                   + dx[x, 2 * y + 2]) * 0.125
        return d
    dx[x, y, c] = v
    dx.bound(c, 0, f.channels)
    d[x, y, c] = ((dx[x, 2 * y - 1, c] + 3.0 * (dx[x, 2 * y, c] + dx[x, 2 * y + 1, c]))
                  + dx[x, 2 * y + 2, c]) * 0.125
    d.bound(c, 0, f.channels)
    return d


def _ll_up(f, ch, name: str) -> Func:
    """``0.25*f(x//2 - 1 + 2*(x%2)) + 0.75*f(x//2)`` in x (``ux``, inlined), then in y:
    the far tap is ``(x-2)//2`` at even and ``(x+2)//2`` at odd ``x`` (:func:`by_parity`)."""
    x, y, c = _X, _Y, _C
    ux = Func(f"{name}x")
    v = (0.25 * by_parity(x, _at(f, ch, (x - 2) // 2, y), _at(f, ch, (x + 2) // 2, y))
         + 0.75 * _at(f, ch, x // 2, y))
    u = Func(name)
    if ch is None:
        ux[x, y] = v
        u[x, y] = (0.25 * by_parity(y, ux[x, (y - 2) // 2], ux[x, (y + 2) // 2])
                   + 0.75 * ux[x, y // 2])
        return u
    ux[x, y, c] = v
    ux.bound(c, 0, f.channels)
    u[x, y, c] = (0.25 * by_parity(y, ux[x, (y - 2) // 2, c], ux[x, (y + 2) // 2, c])
                  + 0.75 * ux[x, y // 2, c])
    u.bound(c, 0, f.channels)
    return u


def _pick(vals: list[Expr], i: Expr, lo: int = 0) -> Expr:
    """``vals[i - lo]`` for an INT32 *i* in range: a binary tree of selects."""
    if len(vals) == 1:
        return vals[0]
    h = (len(vals) + 1) // 2
    return select(i < lo + h, _pick(vals[:h], i, lo), _pick(vals[h:], i, lo + h))


def local_laplacian(H: int, W: int, levels: int = 8, alpha: float = 1 / 7, beta: float = 1.0,
                    depth: int | None = None, *, pes: int = 1):
    """Halide's ``apps/local_laplacian`` on a gray image
    (:func:`pimforge.verif.models.ipim.image.local_laplacian`, operation for operation).

    ``K = levels`` intensity levels, each a plane: level 0's ``G_0(k) = ((beta*(g -
    lvl_k)) + lvl_k) + remap[idx - 256k]`` is a tiled func per ``k`` whose remapping is
    a lookup in the host's table (:class:`~pimforge.sim.ipim.lang.Table`; ``idx`` a
    tiled INT32 func); they are stacked four to a func (:func:`~pimforge.sim.ipim.lang.stack`)
    so that a replicated level holds four planes in the lanes of a vector. Every level
    ``j`` of the Gaussian pyramid of the planes and of the input (``down``, 1-3-3-1) is a
    root func; the output pyramid ``oG_j = up(oG_{j+1}) + oL_j`` is one root func per
    level, with the Laplacian ``L_j = G_j - up(G_{j+1})`` and the blend of the two
    planes around the pixel's level (a tree of selects on ``li``) inlined. The levels
    down to ``m`` (as interpolate's) are tiled and the smaller ones replicated; level
    ``m``'s two upsamplings are replicated stages of level ``m``'s size."""
    K = int(levels)
    if not 2 <= K <= 64:
        raise CompileError(f"local_laplacian: levels must be 2 to 64, not {levels}")
    J = laplacian_depth(H, W) if depth is None else int(depth)
    x, y, c = _X, _Y, _C
    m = _tiled_levels(H, W, J, pes)
    n = (K - 1) * 256
    lut = Table("remap", remap_lut(K, alpha))
    inp = ImageParam("in", FP32)

    def sched(f: Func, lv: int) -> Func:
        return _schedule(f) if lv <= m else _replicate(f)

    idx = Func("idx")
    idx[x, y] = clamp(cast(INT32, (inp[x, y] * float(K - 1)) * 256.0), 0, n)
    _schedule(idx)
    g0 = []
    for k in range(K):
        lvl = float(np.float32(k) * np.float32(1.0 / (K - 1)))
        f = Func(f"g0_{k}")
        f[x, y] = ((beta * (inp[x, y] - lvl)) + lvl) + lut.lookup(idx[x, y], n - 256 * k)
        g0.append(_schedule(f))
    groups = [range(h, min(h + LANES, K)) for h in range(0, K, LANES)]
    G = [[stack(f"g0h{i}", [g0[k] for k in ks]) for i, ks in enumerate(groups)]]
    ing: list = [inp]
    for j in range(1, J):
        G.append([sched(_ll_down(p, c, f"g{j}h{i}"), j) for i, p in enumerate(G[-1])])
        ing.append(sched(_ll_down(ing[-1], None, f"in{j}"), j))

    def plane(j: int, k: int, ups: list) -> Expr:     # L_j(k)
        i, ch = divmod(k, LANES)
        if j > m and j < J - 1:     # replicated: four planes a vector, as a root func
            return ups[i][x, y, ch]
        gk = G[j][i][x, y, ch]
        return gk if j == J - 1 else gk - ups[i][x, y, ch]

    out = None
    for j in range(J - 1, -1, -1):
        ups = []
        if j < J - 1:
            for i, p in enumerate(G[j + 1]):
                u = _ll_up(p, c, f"upg{j}h{i}")
                if j > m:
                    lap = Func(f"lap{j}h{i}")
                    lap[x, y, c] = G[j][i][x, y, c] - u[x, y, c]
                    u = _replicate(lap.bound(c, 0, p.channels))
                # level m's reads the replicated level m+1: a replicated stage of its size;
                # a finer tiled level's, a stage of its own (its nine taps a plane would
                # need a pointer each in the blend's kernel)
                ups.append(_replicate(u) if j == m else _schedule(u) if j < m else u)
        lev = _at(ing[j], None, x, y) * float(K - 1)
        li = clamp(cast(INT32, lev), 0, K - 2)
        lf = lev - cast(FP32, li)
        Ls = [plane(j, k, ups) for k in range(K)]
        a, b = _pick(Ls, li), _pick(Ls[1:] + Ls[-1:], li)
        body = ((1.0 - lf) * a) + (lf * b)
        if out is not None:
            u = _ll_up(out, None, f"upo{j}")
            body = (_replicate(u) if j == m else _schedule(u) if j < m else u)[x, y] + body
        o = Func(f"out{j}" if j else "out")
        o[x, y] = clamp(body, 0.0, 1.0) if j == 0 else body
        out = sched(o, j)
    return out, (W, H), (H, W)


#: Benchmark name -> builder ``(H, W, **params) -> (out, layout (W, H), crop (rows, cols))``.
PIPELINES: dict[str, Callable] = {
    "brighten": brighten, "blur": blur, "downsample": downsample, "upsample": upsample,
    "shift": shift, "histogram": histogram, "stencil_chain": stencil_chain,
    "interpolate": interpolate, "bilateral_grid": bilateral_grid,
    "local_laplacian": local_laplacian,
}


def build(name: str, H: int, W: int, pes: int = 1, **params):
    """``(out, layout, crop)`` of benchmark *name* for an ``(H, W)`` input on a machine
    of *pes* PEs (the pyramids' schedules depend on it: which levels are tiled)."""
    try:
        fn = PIPELINES[name]
    except KeyError:
        raise CompileError(f"the compiler has no pipeline for {name!r} yet; it has "
                           f"{', '.join(sorted(PIPELINES))}") from None
    if "pes" in inspect.signature(fn).parameters:
        params["pes"] = pes
    return fn(H, W, **params)

