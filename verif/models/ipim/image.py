"""Golden models of the ten image pipelines of iPIM's Table II, in float32 numpy.

Each benchmark is defined here once, with the exact float32 operation order that
the iPIM compiler mirrors, so that a program run on the SIMB hardware can be
compared bit for bit where it follows that order, and within the benchmark's
``atol`` where it legally does not (another association of a sum, a reciprocal
iteration for a division, a fused multiply-add on another machine).

Conventions shared by all benchmarks
------------------------------------
- Images are numpy arrays in ``(rows, cols[, channels])`` order; a pixel at
  column ``x`` and row ``y`` is ``img[y, x]``. Formulas below are written
  ``f(x, y)`` as in Halide.
- Inputs: ``"gray"`` is float32 ``(H, W)`` in [0, 1]; ``"rgba"`` is float32
  ``(H, W, 4)`` of *premultiplied* RGBA (``0 <= r, g, b <= a <= 1``); ``"u8"`` is
  uint8 ``(H, W)``. :func:`check_input` enforces this.
- Every stage is a finite array over its own domain, and a read outside that
  domain clamps the coordinate to the edge (Halide's ``repeat_edge``), stage by
  stage (pyramid levels and the stencil chain's stages included). The one
  exception is the bilateral grid, whose grid is exactly Halide's (see there).
- Arithmetic is float32, each operation rounded once (no fused multiply-add): a
  parenthesis in a formula is the order of evaluation, ``a + b + c`` means
  ``(a + b) + c``, and a division by a constant ``k`` is a multiplication by
  ``float32(1/k)``. ``a / b`` between two computed values is the correctly
  rounded float32 quotient. ``int(v)`` truncates toward zero (``v >= 0`` here).
  ``k*v`` with an integer-valued constant ``k`` is ``float32(k) * v``.
- ``atol`` covers another order of the continuous arithmetic only. The steps that
  turn a float into an integer (the bilateral grid's bin ``int(val * inv_r +
  0.5)``, the local Laplacian's table index) are discontinuous: an implementation
  computes them exactly as written (a product rounded, then the sum), or a pixel
  near a bin edge may land in the neighbouring bin.
- Pyramid level ``l`` of an ``n``-pixel axis has ``ceil(n / 2**l)`` pixels.

The benchmarks
--------------
brighten        ``out = in * 1.5`` (``a`` = 1.5).
blur            ``bx(x, y) = (in(x, y) + in(x+1, y) + in(x+2, y)) * float32(1/3)``,
                ``out(x, y) = (bx(x, y) + bx(x, y+1) + bx(x, y+2)) * float32(1/3)``;
                valid region only: ``(H-2, W-2)``, no clamping.
downsample      ``d(x, y) = (in(2x-1, y) + 2*in(2x, y) + in(2x+1, y)) * 0.25`` on ``(H, W//2)``,
                ``out(x, y) = (d(x, 2y-1) + 2*d(x, 2y) + d(x, 2y+1)) * 0.25`` on ``(H//2, W//2)``.
upsample        ``u(x, y) = (in(x//2, y) + in((x+1)//2, y)) * 0.5`` on ``(H, 2W)``,
                ``out(x, y) = (u(x, y//2) + u(x, (y+1)//2)) * 0.5`` on ``(2H, 2W)``.
shift           ``out(x, y) = in(x - dx, y - dy)``, ``dx = dy = 4``, shape ``(H, W)``.
histogram       256 int32 bins: ``hist[v]`` = number of pixels equal to ``v``.
bilateral_grid  see :func:`bilateral_grid`.
interpolate     see :func:`interpolate`.
local_laplacian see :func:`local_laplacian` (gray in, gray out).
stencil_chain   see :func:`stencil_chain` (weights ``(i+3)*(j+3) / 225``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from pimforge.gen.errors import PimforgeError, UnknownNameError

__all__ = ["BENCHES", "PARAM_RANGES", "ImageBench", "ImageInputError", "bilateral_grid",
           "blur", "brighten", "check_input", "check_param", "downsample", "histogram",
           "interpolate", "interpolate_levels",
           "laplacian_depth", "local_laplacian", "reference", "remap_lut", "resolve_params",
           "shift", "stencil_chain", "stencil_weights", "upsample"]

F32 = np.float32


class ImageInputError(PimforgeError, ValueError):
    """An image or a parameter that a benchmark cannot take (dtype, shape, range, size)."""


def _f(v: float) -> np.float32:
    return F32(v)


def _inv(k: float) -> np.float32:
    """``float32(1/k)``: what a division by the constant ``k`` multiplies by."""
    return F32(1.0 / k)


def _cols(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Columns ``idx`` of ``a``, clamped to its width (axis 1)."""
    return a[:, np.clip(idx, 0, a.shape[1] - 1)]


def _rows(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of ``a``, clamped to its height (axis 0)."""
    return a[np.clip(idx, 0, a.shape[0] - 1)]


def _half(n: int) -> int:
    return (n + 1) // 2


# --- the single-stage and two-stage kernels ---------------------------------------------------

def brighten(img: np.ndarray, a: float = 1.5) -> np.ndarray:
    """``out = in * float32(a)``: one multiplication per pixel (``a`` = 1.5, Table II).

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)`` in [0, 1].
    a : float
        The brightening factor.

    Returns
    -------
    ndarray
        float32 ``(H, W)``; not clamped (values reach ``a``).
    """
    return img * _f(a)


def blur(img: np.ndarray) -> np.ndarray:
    """3x3 box blur, separable, over the valid region.

    ``bx(x, y) = ((in(x, y) + in(x+1, y)) + in(x+2, y)) * float32(1/3)`` for
    ``x < W-2``, then ``out(x, y) = ((bx(x, y) + bx(x, y+1)) + bx(x, y+2)) *
    float32(1/3)`` for ``y < H-2``.

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)``, ``H, W >= 3``.

    Returns
    -------
    ndarray
        float32 ``(H-2, W-2)``.
    """
    h, w = img.shape
    k = _inv(3)
    bx = ((img[:, 0:w - 2] + img[:, 1:w - 1]) + img[:, 2:w]) * k
    return ((bx[0:h - 2] + bx[1:h - 1]) + bx[2:h]) * k


def _down121(a: np.ndarray, axis: int) -> np.ndarray:
    """``((a(2i-1) + 2*a(2i)) + a(2i+1)) * 0.25`` along *axis* (clamped), ``n//2`` outputs."""
    take = _cols if axis == 1 else _rows
    i = np.arange(a.shape[axis] // 2)
    return ((take(a, 2 * i - 1) + _f(2) * take(a, 2 * i)) + take(a, 2 * i + 1)) * _f(0.25)


def downsample(img: np.ndarray) -> np.ndarray:
    """Halve each axis with 1-2-1 taps, in x then in y.

    ``d(x, y) = ((in(2x-1, y) + 2*in(2x, y)) + in(2x+1, y)) * 0.25`` on ``(H, W//2)``,
    ``out(x, y) = ((d(x, 2y-1) + 2*d(x, 2y)) + d(x, 2y+1)) * 0.25`` on ``(H//2, W//2)``;
    ``2*v`` is ``float32(2) * v``; reads clamp to the edge (only ``2x-1 = -1``
    and, for odd sizes, nothing beyond).

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)``, ``H, W >= 2``.

    Returns
    -------
    ndarray
        float32 ``(H//2, W//2)``.
    """
    return _down121(_down121(img, 1), 0)


def upsample(img: np.ndarray) -> np.ndarray:
    """Double each axis by averaging the two nearest source pixels (integer division).

    ``u(x, y) = (in(x//2, y) + in((x+1)//2, y)) * 0.5`` on ``(H, 2W)``, then
    ``out(x, y) = (u(x, y//2) + u(x, (y+1)//2)) * 0.5`` on ``(2H, 2W)``; the read
    ``(2W)//2 = W`` clamps to ``W-1``.

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)``.

    Returns
    -------
    ndarray
        float32 ``(2H, 2W)``.
    """
    h, w = img.shape
    x = np.arange(2 * w)
    u = (_cols(img, x // 2) + _cols(img, (x + 1) // 2)) * _f(0.5)
    y = np.arange(2 * h)
    return (_rows(u, y // 2) + _rows(u, (y + 1) // 2)) * _f(0.5)


def shift(img: np.ndarray, dx: int = 4, dy: int = 4) -> np.ndarray:
    """``out(x, y) = in(x - dx, y - dy)``, clamped to the edge; a pure data movement.

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)``.
    dx, dy : int
        The displacement (4 and 4 in Table II).

    Returns
    -------
    ndarray
        float32 ``(H, W)``.
    """
    h, w = img.shape
    return _cols(_rows(img, np.arange(h) - dy), np.arange(w) - dx)


def histogram(img: np.ndarray) -> np.ndarray:
    """``hist[img(x, y)] += 1`` over every pixel: 256 int32 bins (exact, any order).

    Parameters
    ----------
    img : ndarray
        uint8 ``(H, W)``.

    Returns
    -------
    ndarray
        int32 ``(256,)``, summing to ``H*W``.
    """
    hist = np.zeros(256, np.int32)
    np.add.at(hist, img.reshape(-1), np.int32(1))
    return hist


# --- bilateral grid ----------------------------------------------------------------------------

def _blur5(a: np.ndarray, axis: int) -> np.ndarray:
    """``(((a(i-2) + a(i-1)*4) + a(i)*6) + a(i+1)*4) + a(i+2)`` for the interior of *axis*.

    The result is 4 shorter along *axis* (it needs two cells on each side).
    """
    n = a.shape[axis] - 4

    def s(o: int) -> np.ndarray:
        return np.take(a, np.arange(o, o + n), axis=axis)

    return (((s(0) + s(1) * _f(4)) + s(2) * _f(6)) + s(3) * _f(4)) + s(4)


def bilateral_grid(img: np.ndarray, s_sigma: int = 8, r_sigma: float = 0.1) -> np.ndarray:
    """Bilateral filter through a bilateral grid, as Halide's ``apps/bilateral_grid``.

    With ``inv_r = float32(1) / float32(r_sigma)`` (10 for 0.1), ``s = s_sigma`` and
    ``in`` clamped to the edge:

    1. Grid construction. For every grid cell ``(gx, gy)`` and every ``(rx, ry)`` in
       ``[0, s)^2``, ``ry`` outer and ``rx`` inner, ``val = clamp(in(gx*s + rx - s//2,
       gy*s + ry - s//2), 0, 1)`` (the clamp is the identity on checked inputs),
       ``zi = int(val * inv_r + 0.5)``, and ``grid[gx, gy, zi] += (val, 1)``: channel
       0 accumulates ``val`` in float32 in that order from 0, channel 1 counts.
       Cells exist for ``gx`` in ``[-2, GW+2)``, ``gy`` in ``[-2, GH+2)``, ``z`` in
       ``[-2, Z+2)`` with ``GW = (W-1)//s + 2``, ``GH = (H-1)//s + 2``, ``Z =
       int(inv_r + 0.5) + 2``; cells outside the image are built from clamped
       reads like any other (Halide's grid is unbounded), and bins that no
       pixel falls into hold 0 (so z outside ``[0, Z-2]`` is empty).
    2. Blurs, unnormalized (the ratio in step 4 cancels the 16**3): in z, then x,
       then y, each ``(((g(i-2) + g(i-1)*4) + g(i)*6) + g(i+1)*4) + g(i+2)``.
    3. Trilinear slicing at each pixel: ``val = clamp(in(x, y), 0, 1)``, ``zv = val *
       inv_r``, ``zi = int(zv)``, ``zf = zv - float32(zi)``, ``xi = x // s``, ``xf =
       float32(x % s) * float32(1/s)``, ``yi``, ``yf`` alike, and with ``lerp(a, b, t)
       = a + (b - a) * t``, for each channel ``c``: ``lerp(lerp(lerp(B(xi, yi, zi),
       B(xi+1, yi, zi), xf), lerp(B(xi, yi+1, zi), B(xi+1, yi+1, zi), xf), yf), (the
       same at zi+1), zf)``.
    4. ``out = interpolated_0 / interpolated_1`` (a true float32 division; the
       weight is positive: the pixel's own cell is in the 2x2x2 neighbourhood).

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)`` in [0, 1].
    s_sigma : int
        Spatial cell size in pixels (8).
    r_sigma : float
        Range cell size in intensity (0.1).

    Returns
    -------
    ndarray
        float32 ``(H, W)``.
    """
    h, w = img.shape
    s = int(s_sigma)
    inv_r = F32(1.0) / F32(r_sigma)
    zmax = int(inv_r + F32(0.5))
    gh, gw, nz = (h - 1) // s + 2, (w - 1) // s + 2, zmax + 2
    # grid index g holds cell g - 2 (and z index k holds bin k - 2)
    grid = np.zeros((gh + 4, gw + 4, nz + 4, 2), F32)
    gy = np.arange(-2, gh + 2)
    gx = np.arange(-2, gw + 2)
    ii, jj = np.meshgrid(np.arange(gh + 4), np.arange(gw + 4), indexing="ij")
    for ry in range(s):
        rows = _rows(img, gy * s + ry - s // 2)
        for rx in range(s):
            val = np.clip(_cols(rows, gx * s + rx - s // 2), F32(0), F32(1))
            zi = (val * inv_r + F32(0.5)).astype(np.int32)
            # every (gy, gx) appears once per offset, so += does not drop repeats
            grid[ii, jj, zi + 2, 0] += val
            grid[ii, jj, zi + 2, 1] += F32(1)
    b = _blur5(_blur5(_blur5(grid, 2), 1), 0)       # z, x, y: now cells [0,GH) x [0,GW) x [0,Z)

    val = np.clip(img, F32(0), F32(1))
    zv = val * inv_r
    zi = zv.astype(np.int32)
    zf = (zv - zi.astype(F32))[..., None]
    x, y = np.arange(w), np.arange(h)
    xi, yi = x // s, y // s
    xf = ((x % s).astype(F32) * _inv(s))[None, :, None]
    yf = ((y % s).astype(F32) * _inv(s))[:, None, None]
    Y, X = np.meshgrid(yi, xi, indexing="ij")

    def B(dx: int, dy: int, dz: int) -> np.ndarray:
        return b[Y + dy, X + dx, zi + dz]

    def lerp(a, c, t):
        return a + (c - a) * t

    def plane(dz: int) -> np.ndarray:
        return lerp(lerp(B(0, 0, dz), B(1, 0, dz), xf), lerp(B(0, 1, dz), B(1, 1, dz), xf), yf)

    interp = lerp(plane(0), plane(1), zf)
    return interp[..., 0] / interp[..., 1]


# --- interpolate -------------------------------------------------------------------------------

def interpolate_levels(h: int, w: int) -> int:
    """Pyramid levels of :func:`interpolate` by default: ``min(10, floor(log2(min(H, W))) + 1)``."""
    return min(10, int(math.log2(min(h, w))) + 1)


def interpolate(img: np.ndarray, levels: int | None = None) -> np.ndarray:
    """Fill transparent pixels from a pyramid, as Halide's ``apps/interpolate``.

    The input is already premultiplied (Halide's app premultiplies first), so
    ``D_0 = in``. Each level ``l`` has ``ceil`` half the size of level ``l-1``
    and reads of any level clamp to its edge:

    - ``dx_l(x, y) = ((D_{l-1}(2x-1, y) + 2*D_{l-1}(2x, y)) + D_{l-1}(2x+1, y)) * 0.25``,
      ``D_l(x, y) = ((dx_l(x, 2y-1) + 2*dx_l(x, 2y)) + dx_l(x, 2y+1)) * 0.25``, all four
      channels alike, for ``l = 1 .. L-1``.
    - ``I_{L-1} = D_{L-1}``; for ``l = L-2 .. 0``: ``ux(x, y) = (I_{l+1}(x//2, y) +
      I_{l+1}((x+1)//2, y)) * 0.5``, ``up(x, y) = (ux(x, y//2) + ux(x, (y+1)//2)) * 0.5``
      (on level ``l``'s size), ``I_l = D_l + (1 - D_l.a) * up``.
    - ``out(x, y, c) = I_0(x, y, c) / I_0(x, y, 3)`` for all four channels (alpha
      comes out 1; kept so a pixel stays one 4-lane vector). Where no opaque
      pixel reaches a pixel through the pyramid the quotient is 0/0.

    Parameters
    ----------
    img : ndarray
        Premultiplied RGBA float32 ``(H, W, 4)``.
    levels : int, optional
        Pyramid levels ``L`` (default :func:`interpolate_levels`); needs
        ``min(H, W) >= 2**(L-1)``.

    Returns
    -------
    ndarray
        float32 ``(H, W, 4)``.
    """
    L = levels
    d = [img]
    for _ in range(1, L):
        p = d[-1]
        x = np.arange(_half(p.shape[1]))
        dx = ((_cols(p, 2 * x - 1) + _f(2) * _cols(p, 2 * x)) + _cols(p, 2 * x + 1)) * _f(0.25)
        y = np.arange(_half(p.shape[0]))
        d.append(((_rows(dx, 2 * y - 1) + _f(2) * _rows(dx, 2 * y)) + _rows(dx, 2 * y + 1))
                 * _f(0.25))
    interp = d[-1]
    for lv in range(L - 2, -1, -1):
        h, w = d[lv].shape[:2]
        x = np.arange(w)
        ux = (_cols(interp, x // 2) + _cols(interp, (x + 1) // 2)) * _f(0.5)
        y = np.arange(h)
        up = (_rows(ux, y // 2) + _rows(ux, (y + 1) // 2)) * _f(0.5)
        interp = d[lv] + (F32(1) - d[lv][..., 3:4]) * up
    with np.errstate(invalid="ignore", divide="ignore"):
        return interp / interp[..., 3:4]


# --- local Laplacian ---------------------------------------------------------------------------

def laplacian_depth(h: int, w: int) -> int:
    """Default depth ``J`` of :func:`local_laplacian`: ``min(8, floor(log2(min(H, W))) + 1)``."""
    return min(8, int(math.log2(min(h, w))) + 1)


def remap_lut(levels: int = 8, alpha: float = 1 / 7) -> np.ndarray:
    """The remapping table of the local Laplacian filter, float32.

    Entry ``i + (levels-1)*256`` for ``i`` in ``[-(levels-1)*256, (levels-1)*256]`` is
    ``(float32(alpha) * fx) * exp((-(fx * fx)) * 0.5)`` with ``fx = float32(i) *
    float32(1/256)`` and numpy's float32 ``exp``: a table the host computes once
    and the compiler loads, so the hardware needs no exponential.
    """
    n = (levels - 1) * 256
    fx = np.arange(-n, n + 1).astype(F32) * _inv(256)
    return (_f(alpha) * fx) * np.exp((-(fx * fx)) * _f(0.5))


def _ll_down(a: np.ndarray) -> np.ndarray:
    """``((f(2i-1) + 3*(f(2i) + f(2i+1))) + f(2i+2)) * 0.125`` in x then y (1-3-3-1 taps)."""
    x = np.arange(_half(a.shape[1]))
    dx = ((_cols(a, 2 * x - 1) + _f(3) * (_cols(a, 2 * x) + _cols(a, 2 * x + 1)))
          + _cols(a, 2 * x + 2)) * _f(0.125)
    y = np.arange(_half(a.shape[0]))
    return ((_rows(dx, 2 * y - 1) + _f(3) * (_rows(dx, 2 * y) + _rows(dx, 2 * y + 1)))
            + _rows(dx, 2 * y + 2)) * _f(0.125)


def _ll_up(a: np.ndarray, h: int, w: int) -> np.ndarray:
    """``0.25*f(i//2 - 1 + 2*(i%2)) + 0.75*f(i//2)`` in x then y, onto ``(h, w)``."""
    x = np.arange(w)
    ux = _f(0.25) * _cols(a, x // 2 - 1 + 2 * (x % 2)) + _f(0.75) * _cols(a, x // 2)
    y = np.arange(h)
    return _f(0.25) * _rows(ux, y // 2 - 1 + 2 * (y % 2)) + _f(0.75) * _rows(ux, y // 2)


def local_laplacian(img: np.ndarray, levels: int = 8, alpha: float = 1 / 7, beta: float = 1.0,
                    depth: int | None = None) -> np.ndarray:
    """Local Laplacian filter on a gray image, as Halide's ``apps/local_laplacian``.

    ``K = levels`` intensity levels (8), pyramid depth ``J`` (default
    :func:`laplacian_depth`), level ``j`` of ``ceil(n / 2**j)`` pixels, reads of
    every level clamped to its edge. ``down`` is the 1-3-3-1 filter
    ``((f(2x-1) + 3*(f(2x) + f(2x+1))) + f(2x+2)) * 0.125`` in x then y; ``up`` is
    ``0.25*f(x//2 - 1 + 2*(x%2)) + 0.75*f(x//2)`` in x then y, onto the finer size.

    1. ``lvl_k = float32(k) * float32(1/(K-1))``; ``idx = clamp(int((g * float32(K-1)) *
       256), 0, (K-1)*256)``; ``G_0(k) = ((beta * (g - lvl_k)) + lvl_k) +
       remap[idx - 256k]`` for ``k`` in ``[0, K)`` (``remap``: :func:`remap_lut`).
    2. ``G_j = down(G_{j-1})``; ``L_{J-1} = G_{J-1}``, ``L_j = G_j - up(G_{j+1})``.
    3. ``inG_0 = g``, ``inG_j = down(inG_{j-1})``.
    4. ``lev = inG_j * float32(K-1)``, ``li = clamp(int(lev), 0, K-2)``, ``lf = lev -
       float32(li)``, ``oL_j = ((1 - lf) * L_j(li)) + (lf * L_j(li+1))``.
    5. ``oG_{J-1} = oL_{J-1}``, ``oG_j = up(oG_{j+1}) + oL_j``.
    6. ``out = clamp(oG_0, 0, 1)``: the output is gray (the app's colour step,
       ``oG_0 * (c + eps) / (g + eps)``, is the identity on a gray image).

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)`` in [0, 1].
    levels : int
        Intensity levels ``K`` (8).
    alpha : float
        Detail gain of the remap (1/7, i.e. the app's alpha 1 over ``K-1``).
    beta : float
        Tone gain (1).
    depth : int, optional
        Pyramid depth ``J``; needs ``min(H, W) >= 2**(J-1)``.

    Returns
    -------
    ndarray
        float32 ``(H, W)`` in [0, 1].
    """
    K, J = levels, depth
    lut = remap_lut(K, alpha)
    n = (K - 1) * 256
    g = img
    idx = np.clip(((g * _f(K - 1)) * _f(256)).astype(np.int32), 0, n)
    k = np.arange(K)
    lvl = k.astype(F32) * _inv(K - 1)
    gp = [((_f(beta) * (g[..., None] - lvl)) + lvl) + lut[idx[..., None] - 256 * k + n]]
    ing = [g]
    for _ in range(1, J):
        gp.append(_ll_down(gp[-1]))
        ing.append(_ll_down(ing[-1]))
    lp = [gp[j] - _ll_up(gp[j + 1], *gp[j].shape[:2]) for j in range(J - 1)] + [gp[-1]]
    out = None
    for j in range(J - 1, -1, -1):
        lev = ing[j] * _f(K - 1)
        li = np.clip(lev.astype(np.int32), 0, K - 2)
        lf = lev - li.astype(F32)
        a = np.take_along_axis(lp[j], li[..., None], axis=2)[..., 0]
        c = np.take_along_axis(lp[j], li[..., None] + 1, axis=2)[..., 0]
        ol = ((F32(1) - lf) * a) + (lf * c)
        out = ol if out is None else _ll_up(out, *ol.shape) + ol
    return np.clip(out, F32(0), F32(1))


# --- stencil chain -----------------------------------------------------------------------------

def stencil_weights() -> np.ndarray:
    """The 5x5 weights ``w[j+2, i+2] = (i+3)*(j+3)`` (x offset ``i``, y offset ``j``), sum 225."""
    o = np.arange(1, 6)
    return np.outer(o, o).astype(F32)


def stencil_chain(img: np.ndarray, stencils: int = 32) -> np.ndarray:
    """A chain of 5x5 stencils, as Halide's ``apps/stencil_chain``, normalized for [0, 1] data.

    Each stage ``s_{t+1}(x, y)``: ``e = 0``; for ``i`` in -2..2 (outer), ``j`` in
    -2..2 (inner): ``e = e + float32((i+3)*(j+3)) * s_t(x+i, y+j)`` (a product then
    a sum, the SIMB ``mac``); then ``s_{t+1} = e * float32(1/225)``. Each stage is
    ``(H, W)`` and its reads clamp to the edge. The app's weights are the same; it
    sums uint16 values with wraparound instead of dividing by 225.

    Parameters
    ----------
    img : ndarray
        Gray float32 ``(H, W)`` in [0, 1].
    stencils : int
        Number of stages (32).

    Returns
    -------
    ndarray
        float32 ``(H, W)``.
    """
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


# --- the table ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ImageBench:
    """One benchmark of Table II.

    Attributes
    ----------
    name : str
        Benchmark name (the key of :data:`BENCHES`).
    doc : str
        One-line description.
    input_kind : str
        ``"gray"``, ``"rgba"`` (premultiplied) or ``"u8"``.
    params : Mapping
        Default parameters; ``None`` means derived from the image size.
    out_shape : callable
        ``(h, w) -> shape`` of the output for an ``(h, w)`` input (default params).
    stages : int
        Pipeline stages (Halide Funcs) at the default parameters and the
        largest pyramid (interpolate 10 levels, local Laplacian depth 8).
    atol : float
        Absolute tolerance when comparing with a float32 result computed in
        another legal order; 0 for exact benchmarks.
    fn : callable
        The reference, ``fn(img, **params)``.
    min_size : int
        Smallest height and width accepted.
    """

    name: str
    doc: str
    input_kind: str
    params: Mapping
    out_shape: Callable[[int, int], tuple]
    stages: int
    atol: float
    fn: Callable[..., np.ndarray] = field(repr=False)
    min_size: int = 1

    def reference(self, img: np.ndarray, **params) -> np.ndarray:
        """Check *img*, resolve *params* and run the reference."""
        return reference(self.name, img, **params)


def _bench(name, doc, kind, params, out_shape, stages, atol, fn, min_size=1):
    return ImageBench(name, doc, kind, MappingProxyType(dict(params)), out_shape, stages, atol,
                      fn, min_size)


_INTERP_STAGES = 2 * 9 + 3 * 9 + 1
_LL_STAGES = 1 + 1 + 2 * 7 + 3 * 7 + 2 * 7 + 8 + 3 * 7 + 1

BENCHES: dict[str, ImageBench] = {b.name: b for b in [
    _bench("brighten", "out = 1.5 * in", "gray", {"a": 1.5}, lambda h, w: (h, w), 1, 0.0,
           brighten),
    _bench("blur", "3x3 separable box blur, valid region", "gray", {},
           lambda h, w: (h - 2, w - 2), 2, 1e-6, blur, 3),
    _bench("downsample", "1-2-1 taps, half size in x then y", "gray", {},
           lambda h, w: (h // 2, w // 2), 2, 1e-6, downsample, 2),
    _bench("upsample", "double size, averaging the two nearest pixels", "gray", {},
           lambda h, w: (2 * h, 2 * w), 2, 1e-6, upsample),
    _bench("shift", "out(x, y) = in(x-4, y-4)", "gray", {"dx": 4, "dy": 4},
           lambda h, w: (h, w), 1, 0.0, shift),
    _bench("histogram", "256-bin histogram of an 8-bit image", "u8", {},
           lambda h, w: (256,), 1, 0.0, histogram),
    _bench("bilateral_grid", "bilateral filter on a grid (s_sigma 8, r_sigma 0.1)", "gray",
           {"s_sigma": 8, "r_sigma": 0.1}, lambda h, w: (h, w), 5, 1e-4, bilateral_grid),
    _bench("interpolate", "pyramid fill of transparent pixels (premultiplied RGBA)", "rgba",
           {"levels": None}, lambda h, w: (h, w, 4), _INTERP_STAGES, 1e-5, interpolate),
    _bench("local_laplacian", "local Laplacian filter, 8 intensity levels, gray", "gray",
           {"levels": 8, "alpha": 1 / 7, "beta": 1.0, "depth": None}, lambda h, w: (h, w),
           _LL_STAGES, 1e-4, local_laplacian),
    _bench("stencil_chain", "32 chained 5x5 stencils", "gray", {"stencils": 32},
           lambda h, w: (h, w), 32, 1e-5, stencil_chain),
]}


def _bench_of(name: str) -> ImageBench:
    try:
        return BENCHES[name]
    except KeyError:
        raise UnknownNameError(f"unknown image benchmark {name!r}; choose one of "
                               f"{', '.join(BENCHES)}") from None


def _check_levels(b: ImageBench, key: str, value, img: np.ndarray, cap: int) -> int:
    h, w = img.shape[:2]
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or not 1 <= value <= cap:
        raise ImageInputError(f"{b.name}: {key} must be an integer between 1 and {cap}, "
                              f"not {value!r}")
    if min(h, w) < 2 ** (value - 1):
        raise ImageInputError(f"{b.name}: {key}={value} needs an image of at least "
                              f"{2 ** (value - 1)}x{2 ** (value - 1)} pixels, not {w}x{h}")
    return int(value)


#: The range of each real-valued parameter, ``(bench, name) -> (lo, hi)``: beyond it
#: the FP32 pipeline overflows or loses the result, and a run would report a mismatch
#: as if the hardware were wrong.
PARAM_RANGES: Mapping[tuple[str, str], tuple[float, float]] = MappingProxyType({
    ("brighten", "a"): (-1000.0, 1000.0),
    ("local_laplacian", "alpha"): (0.0, 10.0),
    ("local_laplacian", "beta"): (0.0, 10.0),
    ("bilateral_grid", "r_sigma"): (0.001, 1.0),
})


def check_param(name: str, key: str, value) -> None:
    """Raise :class:`ImageInputError` unless *value* of parameter *key* of *name* is a
    finite number in :data:`PARAM_RANGES` (a real-valued one), checked with the inputs,
    before any run."""
    rng = PARAM_RANGES.get((name, key))
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ImageInputError(f"{name}: {key} must be a number, not {value!r}")
    if not math.isfinite(value):
        raise ImageInputError(f"{name}: {key} must be a finite number, not {value!r}")
    if rng is not None and not rng[0] <= value <= rng[1]:
        raise ImageInputError(f"{name}: {key} must be between {rng[0]:g} and {rng[1]:g}, "
                              f"not {value!r}")


def resolve_params(name: str, img: np.ndarray, **params) -> dict:
    """The parameters a run of *name* on *img* uses: defaults, overrides and size-derived values.

    Raises
    ------
    ImageInputError
        An unknown parameter, or a value the benchmark cannot take.
    """
    b = _bench_of(name)
    unknown = sorted(set(params) - set(b.params))
    if unknown:
        known = ", ".join(b.params) or "none"
        raise ImageInputError(f"{name}: unknown parameter {', '.join(unknown)} "
                              f"(parameters: {known})")
    for k, v in params.items():
        if v is not None:
            check_param(name, k, v)
    p = {**b.params, **params}
    h, w = img.shape[:2]
    if name == "interpolate":
        p["levels"] = _check_levels(b, "levels", interpolate_levels(h, w) if p["levels"] is None
                                    else p["levels"], img, 10)
    elif name == "local_laplacian":
        p["depth"] = _check_levels(b, "depth", laplacian_depth(h, w) if p["depth"] is None
                                   else p["depth"], img, 16)
        if not isinstance(p["levels"], int) or not 2 <= p["levels"] <= 256:
            raise ImageInputError(f"local_laplacian: levels must be an integer between 2 and "
                                  f"256, not {p['levels']!r}")
    elif name == "bilateral_grid":
        if not isinstance(p["s_sigma"], int) or not 1 <= p["s_sigma"] <= 64:
            raise ImageInputError(f"bilateral_grid: s_sigma must be an integer between 1 and "
                                  f"64, not {p['s_sigma']!r}")
        if not 0.001 <= float(p["r_sigma"]) <= 1.0:
            raise ImageInputError(f"bilateral_grid: r_sigma must be between 0.001 and 1, "
                                  f"not {p['r_sigma']!r}")
    elif name == "stencil_chain":
        if not isinstance(p["stencils"], int) or not 1 <= p["stencils"] <= 1000:
            raise ImageInputError(f"stencil_chain: stencils must be an integer between 1 and "
                                  f"1000, not {p['stencils']!r}")
    elif name == "shift":
        for k in ("dx", "dy"):
            if not isinstance(p[k], int):
                raise ImageInputError(f"shift: {k} must be an integer, not {p[k]!r}")
    return p


def check_input(name: str, img: np.ndarray, **params) -> None:
    """Raise :class:`ImageInputError` (one line) unless *img* is a valid input of *name*.

    Checks the type, dtype, shape, value range (finite, in [0, 1]; RGBA
    premultiplied), the smallest size, and that *params* fit the image.
    """
    b = _bench_of(name)
    if not isinstance(img, np.ndarray):
        raise ImageInputError(f"{name}: the image must be a numpy array, not "
                              f"{type(img).__name__}")
    want = {"gray": ("float32", "(H, W)"), "rgba": ("float32", "(H, W, 4)"),
            "u8": ("uint8", "(H, W)")}[b.input_kind]
    if img.dtype != np.dtype(want[0]):
        raise ImageInputError(f"{name}: the image must be {want[0]} {want[1]}, not {img.dtype}")
    ok_shape = (img.ndim == 3 and img.shape[2] == 4) if b.input_kind == "rgba" else img.ndim == 2
    if not ok_shape:
        raise ImageInputError(f"{name}: the image must be {want[0]} {want[1]}, not shape "
                              f"{img.shape}")
    h, w = img.shape[:2]
    if min(h, w) < b.min_size:
        raise ImageInputError(f"{name}: the image must be at least {b.min_size}x{b.min_size} "
                              f"pixels, not {w}x{h}")
    if b.input_kind != "u8":
        bad = int((~np.isfinite(img)).sum())
        if bad:
            raise ImageInputError(f"{name}: pixel values must be finite and in [0, 1] "
                                  f"(found {bad} NaN or infinite)")
        if img.min() < 0 or img.max() > 1:
            raise ImageInputError(f"{name}: pixel values must be finite and in [0, 1] "
                                  f"(found {img.min():.4g} .. {img.max():.4g})")
        if b.input_kind == "rgba" and (img[..., :3] > img[..., 3:4]).any():
            raise ImageInputError(f"{name}: RGBA must be premultiplied (each of r, g, b at "
                                  f"most alpha)")
    resolve_params(name, img, **params)


def reference(name: str, img: np.ndarray, **params) -> np.ndarray:
    """Run benchmark *name* on *img* after :func:`check_input`; see the module docstring.

    Parameters
    ----------
    name : str
        A key of :data:`BENCHES`.
    img : ndarray
        The input, of the benchmark's ``input_kind``.
    **params
        Overrides of the benchmark's parameters.

    Returns
    -------
    ndarray
        The output (float32, or int32 for the histogram).
    """
    check_input(name, img, **params)
    return BENCHES[name].fn(img, **resolve_params(name, img, **params))
