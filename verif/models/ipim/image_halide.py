"""The ten image pipelines of :mod:`.image` written in Halide, a third-party cross-check.

Each pipeline is written from the definitions in :mod:`.image` (stage by stage,
with the same boundary rules and float32 operation order) with the ``halide``
PyPI package, every stage ``compute_root`` and JIT-compiled for the host CPU with
``strict_float`` (no fused multiply-add, no reassociation). What the numpy
references and these share is only the written definition: Halide's own
bounds inference, reductions, integer division and casts check the numpy
indexing, pyramid sizes and clamping. Outputs agree within each benchmark's
``atol``: bit for bit except the local Laplacian, whose remap table uses
Halide's ``exp`` (about 1.5e-7 apart); without ``strict_float`` (fused
multiply-adds allowed) the differences stay below 3e-7.

``halide`` is a test extra (``pip install -e '.[test]'``), imported only when a
pipeline is run.
"""

from __future__ import annotations

import numpy as np

from pimforge.gen.errors import ToolMissingError

from .image import check_input, resolve_params

__all__ = ["halide_reference", "HALIDE_PIPELINES"]


def _hl():
    try:
        import halide
    except ImportError as e:
        raise ToolMissingError("the Halide cross-check needs the halide package: "
                               ".venv/bin/pip install -e '.[test]' (or pip install halide)"
                               ) from e
    return halide


class _Ctx:
    """Halide handles shared by one pipeline: the module, vars, constants, clamps."""

    def __init__(self, strict: bool = True):
        hl = self.hl = _hl()
        self.x, self.y, self.z, self.c, self.k = (hl.Var(n) for n in "xyzck")
        self.target = hl.get_jit_target_from_environment()
        if strict:
            self.target = self.target.with_feature(hl.TargetFeature.StrictFloat)
        self._n = 0

    def f32(self, v) -> object:
        """A float32 constant (the value rounded to float32 first)."""
        return self.hl.f32(float(np.float32(v)))

    def clamp(self, e, n: int):
        return self.hl.clamp(e, 0, n - 1)

    def func(self, name: str):
        self._n += 1
        return self.hl.Func(f"{name}_{self._n}")

    def root(self, *fs):
        for f in fs:
            f.compute_root()

    def realize(self, f, sizes) -> np.ndarray:
        return np.array(f.realize(list(sizes), self.target))


def _gray(ctx: _Ctx, img: np.ndarray):
    return ctx.hl.Buffer(np.ascontiguousarray(img))      # numpy (H, W) -> Halide (x, y)


def _brighten(ctx, img, a):
    inp, (x, y) = _gray(ctx, img), (ctx.x, ctx.y)
    out = ctx.func("brighten")
    out[x, y] = inp[x, y] * ctx.f32(a)
    return ctx.realize(out, img.shape[::-1])


def _blur(ctx, img):
    inp, (x, y) = _gray(ctx, img), (ctx.x, ctx.y)
    third = ctx.f32(1 / 3)
    bx, out = ctx.func("blur_x"), ctx.func("blur_y")
    bx[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) * third
    out[x, y] = (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) * third
    ctx.root(bx)
    h, w = img.shape
    return ctx.realize(out, (w - 2, h - 2))


def _downsample(ctx, img):
    inp, (x, y) = _gray(ctx, img), (ctx.x, ctx.y)
    h, w = img.shape
    cx, cy = (lambda e: ctx.clamp(e, w)), (lambda e: ctx.clamp(e, h))
    two, q = ctx.f32(2), ctx.f32(0.25)
    d, out = ctx.func("down_x"), ctx.func("down_y")
    d[x, y] = (inp[cx(2 * x - 1), y] + two * inp[cx(2 * x), y] + inp[cx(2 * x + 1), y]) * q
    out[x, y] = (d[x, cy(2 * y - 1)] + two * d[x, cy(2 * y)] + d[x, cy(2 * y + 1)]) * q
    ctx.root(d)
    return ctx.realize(out, (w // 2, h // 2))


def _upsample(ctx, img):
    inp, (x, y) = _gray(ctx, img), (ctx.x, ctx.y)
    h, w = img.shape
    cx, cy = (lambda e: ctx.clamp(e, w)), (lambda e: ctx.clamp(e, h))
    half = ctx.f32(0.5)
    u, out = ctx.func("up_x"), ctx.func("up_y")
    u[x, y] = (inp[cx(x / 2), y] + inp[cx((x + 1) / 2), y]) * half
    out[x, y] = (u[x, cy(y / 2)] + u[x, cy((y + 1) / 2)]) * half
    ctx.root(u)
    return ctx.realize(out, (2 * w, 2 * h))


def _shift(ctx, img, dx, dy):
    inp, (x, y) = _gray(ctx, img), (ctx.x, ctx.y)
    h, w = img.shape
    out = ctx.func("shift")
    out[x, y] = inp[ctx.clamp(x - dx, w), ctx.clamp(y - dy, h)]
    return ctx.realize(out, (w, h))


def _histogram(ctx, img):
    hl, inp, x = ctx.hl, _gray(ctx, img), ctx.x
    h, w = img.shape
    hist = ctx.func("hist")
    r = hl.RDom([(0, w), (0, h)])
    hist[x] = 0
    hist[hl.i32(inp[r.x, r.y])] += 1
    return ctx.realize(hist, (256,)).astype(np.int32)


def _bilateral_grid(ctx, img, s_sigma, r_sigma):
    hl, inp = ctx.hl, _gray(ctx, img)
    x, y, z, c = ctx.x, ctx.y, ctx.z, ctx.c
    h, w = img.shape
    s = int(s_sigma)
    inv_r = ctx.f32(np.float32(1) / np.float32(r_sigma))
    one, zero = ctx.f32(1), ctx.f32(0)

    def clamped(xe, ye):
        return inp[ctx.clamp(xe, w), ctx.clamp(ye, h)]

    r = hl.RDom([(0, s), (0, s)])
    val = hl.clamp(clamped(x * s + r.x - s // 2, y * s + r.y - s // 2), zero, one)
    zi = hl.i32(val * inv_r + ctx.f32(0.5))
    grid = ctx.func("grid")
    grid[x, y, z, c] = zero
    grid[x, y, zi, c] += hl.select(c == 0, val, one)

    def five(f, at):
        return (f(at(-2)) + f(at(-1)) * ctx.f32(4) + f(at(0)) * ctx.f32(6)
                + f(at(1)) * ctx.f32(4) + f(at(2)))

    bz, bx, by = ctx.func("blur_z"), ctx.func("blur_x"), ctx.func("blur_y")
    bz[x, y, z, c] = five(lambda a: grid[a], lambda o: (x, y, z + o, c))
    bx[x, y, z, c] = five(lambda a: bz[a], lambda o: (x + o, y, z, c))
    by[x, y, z, c] = five(lambda a: bx[a], lambda o: (x, y + o, z, c))

    v = hl.clamp(inp[x, y], zero, one)
    zv = v * inv_r
    zc = hl.i32(zv)
    zf = zv - hl.f32(zc)
    xf = hl.f32(x % s) * ctx.f32(1 / s)
    yf = hl.f32(y % s) * ctx.f32(1 / s)
    xi, yi = x / s, y / s

    def lerp(a, b, t):
        return a + (b - a) * t

    def plane(dz):
        return lerp(lerp(by[xi, yi, zc + dz, c], by[xi + 1, yi, zc + dz, c], xf),
                    lerp(by[xi, yi + 1, zc + dz, c], by[xi + 1, yi + 1, zc + dz, c], xf), yf)

    interp, out = ctx.func("interpolated"), ctx.func("bilateral_grid")
    interp[x, y, c] = lerp(plane(0), plane(1), zf)
    out[x, y] = interp[x, y, 0] / interp[x, y, 1]
    ctx.root(grid, bz, bx, by, interp)
    return ctx.realize(out, (w, h))


def _interpolate(ctx, img, levels):
    x, y, c = ctx.x, ctx.y, ctx.c
    inp = ctx.hl.Buffer(np.ascontiguousarray(img.transpose(2, 0, 1)))   # Halide (x, y, c)
    h, w = img.shape[:2]
    sizes = [(w, h)]
    for _ in range(1, levels):
        sizes.append(((sizes[-1][0] + 1) // 2, (sizes[-1][1] + 1) // 2))
    two, q, half, one = ctx.f32(2), ctx.f32(0.25), ctx.f32(0.5), ctx.f32(1)
    d0 = ctx.func("down")
    d0[x, y, c] = inp[x, y, c]
    down = [d0]
    for lv in range(1, levels):
        p, (pw, ph) = down[-1], sizes[lv - 1]
        dx, dy = ctx.func("downx"), ctx.func("down")
        dx[x, y, c] = (p[ctx.clamp(2 * x - 1, pw), y, c] + two * p[ctx.clamp(2 * x, pw), y, c]
                       + p[ctx.clamp(2 * x + 1, pw), y, c]) * q
        dy[x, y, c] = (dx[x, ctx.clamp(2 * y - 1, ph), c] + two * dx[x, ctx.clamp(2 * y, ph), c]
                       + dx[x, ctx.clamp(2 * y + 1, ph), c]) * q
        ctx.root(dx, dy)
        down.append(dy)
    interp = down[-1]
    for lv in range(levels - 2, -1, -1):
        cw, ch = sizes[lv + 1]
        ux, up, it = ctx.func("upx"), ctx.func("up"), ctx.func("interp")
        ux[x, y, c] = (interp[ctx.clamp(x / 2, cw), y, c]
                       + interp[ctx.clamp((x + 1) / 2, cw), y, c]) * half
        up[x, y, c] = (ux[x, ctx.clamp(y / 2, ch), c] + ux[x, ctx.clamp((y + 1) / 2, ch), c]) * half
        it[x, y, c] = down[lv][x, y, c] + (one - down[lv][x, y, 3]) * up[x, y, c]
        ctx.root(ux, up, it)
        interp = it
    out = ctx.func("normalize")
    out[x, y, c] = interp[x, y, c] / interp[x, y, 3]
    return ctx.realize(out, (w, h, 4)).transpose(1, 2, 0)


def _local_laplacian(ctx, img, levels, alpha, beta, depth):
    hl, inp = ctx.hl, _gray(ctx, img)
    x, y, k = ctx.x, ctx.y, ctx.k
    h, w = img.shape
    K, J = levels, depth
    sizes = [(w, h)]
    for _ in range(1, J):
        sizes.append(((sizes[-1][0] + 1) // 2, (sizes[-1][1] + 1) // 2))

    remap = ctx.func("remap")
    fx = hl.f32(x) * ctx.f32(1 / 256)
    remap[x] = (ctx.f32(alpha) * fx) * hl.exp((-(fx * fx)) * ctx.f32(0.5))

    def at(f, xe, ye, rest):
        return f[(xe, ye, *rest)]

    def down(f, pw, ph, rest):
        dx, dy = ctx.func("downx"), ctx.func("downy")
        v = (x, y, *rest)
        three, e = ctx.f32(3), ctx.f32(0.125)
        dx[v] = (at(f, ctx.clamp(2 * x - 1, pw), y, rest)
                 + three * (at(f, ctx.clamp(2 * x, pw), y, rest)
                            + at(f, ctx.clamp(2 * x + 1, pw), y, rest))
                 + at(f, ctx.clamp(2 * x + 2, pw), y, rest)) * e
        dy[v] = (at(dx, x, ctx.clamp(2 * y - 1, ph), rest)
                 + three * (at(dx, x, ctx.clamp(2 * y, ph), rest)
                            + at(dx, x, ctx.clamp(2 * y + 1, ph), rest))
                 + at(dx, x, ctx.clamp(2 * y + 2, ph), rest)) * e
        ctx.root(dx, dy)
        return dy

    def up(f, cw, ch, rest):
        ux, uy = ctx.func("upx"), ctx.func("upy")
        v = (x, y, *rest)
        a, b = ctx.f32(0.25), ctx.f32(0.75)
        ux[v] = (a * at(f, ctx.clamp(x / 2 - 1 + 2 * (x % 2), cw), y, rest)
                 + b * at(f, ctx.clamp(x / 2, cw), y, rest))
        uy[v] = (a * at(ux, x, ctx.clamp(y / 2 - 1 + 2 * (y % 2), ch), rest)
                 + b * at(ux, x, ctx.clamp(y / 2, ch), rest))
        ctx.root(ux, uy)
        return uy

    g = ctx.func("gray")
    g[x, y] = inp[x, y]
    n = (K - 1) * 256
    lvl = hl.f32(k) * ctx.f32(1 / (K - 1))
    idx = hl.clamp(hl.i32((g[x, y] * ctx.f32(K - 1)) * ctx.f32(256)), 0, n)
    g0 = ctx.func("gPyramid")
    g0[x, y, k] = ((ctx.f32(beta) * (g[x, y] - lvl)) + lvl) + remap[idx - 256 * k]
    ctx.root(remap, g, g0)
    gp, ing = [g0], [g]
    for j in range(1, J):
        gp.append(down(gp[-1], *sizes[j - 1], (k,)))
        ing.append(down(ing[-1], *sizes[j - 1], ()))
    lp = []
    for j in range(J - 1):
        lj = ctx.func("lPyramid")
        lj[x, y, k] = gp[j][x, y, k] - up(gp[j + 1], *sizes[j + 1], (k,))[x, y, k]
        ctx.root(lj)
        lp.append(lj)
    lp.append(gp[-1])
    og = None
    for j in range(J - 1, -1, -1):
        lev = ing[j][x, y] * ctx.f32(K - 1)
        li = hl.clamp(hl.i32(lev), 0, K - 2)
        lf = lev - hl.f32(li)
        ol = ctx.func("outLPyramid")
        ol[x, y] = ((ctx.f32(1) - lf) * lp[j][x, y, li]) + (lf * lp[j][x, y, li + 1])
        ctx.root(ol)
        if og is None:
            og = ol
        else:
            nxt = ctx.func("outGPyramid")
            nxt[x, y] = up(og, *sizes[j + 1], ())[x, y] + ol[x, y]
            ctx.root(nxt)
            og = nxt
    out = ctx.func("local_laplacian")
    out[x, y] = hl.clamp(og[x, y], ctx.f32(0), ctx.f32(1))
    return ctx.realize(out, (w, h))


def _stencil_chain(ctx, img, stencils):
    inp, (x, y) = _gray(ctx, img), (ctx.x, ctx.y)
    h, w = img.shape
    prev = ctx.func("stage")
    prev[x, y] = inp[x, y]
    ctx.root(prev)
    for _ in range(stencils):
        e = ctx.f32(0)
        for i in range(-2, 3):
            for j in range(-2, 3):
                e = e + ctx.f32((i + 3) * (j + 3)) * prev[ctx.clamp(x + i, w), ctx.clamp(y + j, h)]
        st = ctx.func("stage")
        st[x, y] = e * ctx.f32(1 / 225)
        ctx.root(st)
        prev = st
    return ctx.realize(prev, (w, h))


#: Name -> Halide implementation ``fn(ctx, img, **resolved_params)``.
HALIDE_PIPELINES = {
    "brighten": _brighten, "blur": _blur, "downsample": _downsample, "upsample": _upsample,
    "shift": _shift, "histogram": _histogram, "bilateral_grid": _bilateral_grid,
    "interpolate": _interpolate, "local_laplacian": _local_laplacian,
    "stencil_chain": _stencil_chain,
}


def halide_reference(name: str, img: np.ndarray, *, strict_float: bool = True,
                     **params) -> np.ndarray:
    """Run benchmark *name* on *img* with Halide (JIT, host CPU), parameters as in numpy.

    With ``strict_float=False`` Halide may fuse multiply-adds (on a CPU that has
    them): the same algorithm in another legal float32 order, which stays within
    the benchmark's ``atol`` of the numpy reference.

    Raises
    ------
    ToolMissingError
        The ``halide`` package is not installed.
    ImageInputError
        *img* or *params* is not a valid input of *name*.
    """
    check_input(name, img, **params)
    p = resolve_params(name, img, **params)
    return HALIDE_PIPELINES[name](_Ctx(strict_float), img, **p)
