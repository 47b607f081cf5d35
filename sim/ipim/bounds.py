"""Bounds inference: the rows of each PE's band and the halo of every root array.

The compiler's ``bounds`` pass (:mod:`pimforge.sim.ipim.passes`). From the pipeline graph
(:class:`~pimforge.sim.ipim.lower.Graph`: the root arrays, producers first, with their
bodies' reads as :class:`~pimforge.sim.ipim.emit.ArrayRef` s) it computes

- the rows ``R`` a tiled array keeps per PE: an output's ``ceil(H / PEs)`` (made even
  where its kernel makes two rows a step), a producer's its consumers' scaled by the
  resampling between them, so that a consumer's band reads its producers' band of the
  same PE;
- the halo of every array: how many vectors left and right and rows above and below
  its consumers read beyond its ``R x S`` block.

It returns them as a :class:`Bounds` and edits nothing; the ``layout`` pass
(:func:`pimforge.sim.ipim.lower.lay_out`) writes them into the arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .emit import ByParity, array_refs
from .lang import CompileError, Expr, nodes
from .layout import Array

__all__ = ["Bounds", "Halo", "infer_bounds", "needs_even", "tiled"]


class Halo(NamedTuple):
    """Vectors left and right, rows above and below, that consumers read beyond a band."""

    left: int = 0
    right: int = 0
    top: int = 0
    bottom: int = 0


@dataclass(frozen=True)
class Bounds:
    """The result of bounds inference.

    Attributes
    ----------
    rows : dict
        Rows per PE (``R``) of every array (a replicated array's are its own).
    halos : dict
        The :class:`Halo` of every array.
    """

    rows: dict[Array, int] = field(default_factory=dict)
    halos: dict[Array, Halo] = field(default_factory=dict)


def tiled(a: Array) -> bool:
    """Whether *a* is spread over the PEs in bands (not replicated, not a grid or table)."""
    return not a.rep and a.kind in ("func", "input", "coord", "extract")


def needs_even(body: Expr) -> tuple[bool, bool]:
    """Whether a kernel of *body* makes two columns (rows) per step: it upsamples or
    picks by parity along x (y)."""
    refs = array_refs(body)
    par = [n.axis for n in nodes(body) if isinstance(n, ByParity)]
    return (any(r.ax[2] == 2 for r in refs) or 0 in par,
            any(r.ay[2] == 2 for r in refs) or 1 in par)


def _bands(a: Array, R: int) -> int:
    return 1 if a.rep else -(-a.H // R)


def band_rows(g, npe: int) -> dict[Array, int]:
    """Every array's rows per PE over *npe* PEs (tiled arrays' as the module says, the
    others' as the graph made them).

    Raises
    ------
    CompileError
        The bands of two consumers disagree, or a height does not split over the PEs.
    """
    rows = {a: a.R for a in g.order}
    want: dict[Array, int] = {}
    for a in reversed(g.order):     # consumers before their producers
        body = g.bodies.get(id(a))
        if tiled(a):
            if a in want:
                rows[a] = want[a]
            else:                   # an output, or a func read by replicated ones only
                rows[a] = -(-a.H // npe)
                if body is not None and needs_even(body)[1]:
                    rows[a] += rows[a] % 2
            if _bands(a, rows[a]) > npe:
                raise CompileError(f"{a.name} is {a.H} rows in bands of {rows[a]}: "
                                   f"{_bands(a, rows[a])} bands for {npe} PEs; choose a "
                                   "height whose resampled levels split evenly over the PEs")
        elif a.kind == "gather":
            for p in a.srcs:
                if p.H % npe:
                    raise CompileError(f"{a.name}: a replicated copy of the tiled {p.name} "
                                       f"needs its height ({p.H}) a multiple of the {npe} "
                                       "PEs; choose such a size")
        if body is None or not tiled(a):
            continue
        for r in array_refs(body):
            p = r.arr
            if not tiled(p):
                continue
            ya, _, yd = r.ay
            if rows[a] * ya % yd:
                raise CompileError(f"{a.name} has {rows[a]} rows per PE and reads {p.name} "
                                   f"at ({ya}y + b) // {yd}: choose a height that gives an "
                                   "even number of rows per PE")
            R = rows[a] * ya // yd
            if want.setdefault(p, R) != R:
                raise CompileError(f"{p.name} is read in bands of {want[p]} and of {R} "
                                   "rows; choose a height that the PEs divide")
    return rows


def halos(g, rows: dict[Array, int]) -> dict[Array, Halo]:
    """How far each consumer of the graph *g* reads beyond its producers' bands of
    *rows* rows (a read ``(a*x + b) // d`` of a consumer ``S`` vectors wide reaches
    ``-(b // d)`` left and ``(a*(S - 1) + b) // d - (S' - 1)`` right of a producer
    ``S'`` wide; rows alike)."""
    out = {a: Halo(a.hxl, a.hxr, a.hyt, a.hyb) for a in g.order}
    for a in g.order:
        body = g.bodies.get(id(a))
        if body is None:
            continue
        for r in array_refs(body):
            p = r.arr
            xa, xb, xd = r.ax
            ya, yb, yd = r.ay
            h = out.get(p, Halo())
            out[p] = Halo(max(h.left, -(xb // xd)),
                          max(h.right, (xa * (a.S - 1) + xb) // xd - (p.S - 1)),
                          max(h.top, -(yb // yd)),
                          max(h.bottom, (ya * (rows[a] - 1) + yb) // yd - (rows.get(p, p.R) - 1)))
    return out


def infer_bounds(g, npe: int) -> Bounds:
    """The rows per PE and halos of every array of the graph *g* on *npe* PEs; *g* is
    left as it is.

    Raises
    ------
    CompileError
        See :func:`band_rows`.
    """
    rows = band_rows(g, npe)
    return Bounds(rows, halos(g, rows))
