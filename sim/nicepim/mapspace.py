"""PIM-Mapper's search space (Sec. III-C, III-E): the LMs of a layer on a region.

An LM (:class:`Partition`) splits a layer's samples B, output channels K, output rows
P, output columns Q and input channels C over the rows and columns of an ``h x w``
region of PIM-nodes (Fig. 5) and lays the parts out in a spatial order ``P_order``;
:func:`partitions` enumerates them (cached by the layer's loop bounds and the region,
so layers of one shape share one list), :func:`orders` the spatial orders of one
split, :func:`spacing` how far apart the nodes of a sharing set are, and
:data:`LAYOUTS` the data layouts (DL) a tensor may take. The text form of an LM is
:func:`parse_partition`'s.
"""

from __future__ import annotations

import functools
import itertools
import math
import weakref
from dataclasses import dataclass

from pimforge.rtl.nicepim.params import Layout

from .networks import Layer

__all__ = ["DIMS", "LAYOUTS", "WHOLE", "Partition", "layer_partitions", "layer_shape",
           "orders", "parse_partition", "partitions", "spacing"]

LAYOUTS = (Layout.NCHW, Layout.NHWC, Layout.NCHWC8)
DIMS = ("b", "k", "p", "q", "c")
_AT = {d: i for i, d in enumerate(DIMS)}


@dataclass(frozen=True)
class Partition:
    """An LM: partitions of B, K, P, Q, C along the region's rows (``ph``) and columns
    (``pw``), and the spatial order ``P_order`` (the five loops, outermost first).

    Only the order of the split loops matters; it is kept with the split loops first,
    in their order, and the others after them in the order of :data:`DIMS`, so two
    partitions that lay their nodes out alike are equal. The text form
    (``str``, :func:`parse_partition`) lists the split loops in that order."""

    ph: tuple[int, int, int, int, int]
    pw: tuple[int, int, int, int, int]
    order: tuple[str, ...] = DIMS

    def __post_init__(self):
        if len(self.ph) != len(DIMS) or len(self.pw) != len(DIMS):
            raise ValueError(f"a partition has {len(DIMS)} row and column parts "
                             f"({', '.join(DIMS)}), not {self.ph} and {self.pw}")
        if sorted(self.order) != sorted(DIMS):
            raise ValueError(f"P_order must be an order of {''.join(DIMS).upper()}, "
                             f"not {''.join(self.order).upper()}")
        # the parts of each loop, in the order of DIMS (not a field: derived)
        object.__setattr__(self, "sizes", tuple(a * b for a, b in zip(self.ph, self.pw,
                                                                      strict=True)))
        split = [d for d in self.order if self.parts(d) > 1]
        object.__setattr__(self, "order", tuple(split + [d for d in DIMS if d not in split]))
        # LMs key the mapper's memos: their hash is computed once
        object.__setattr__(self, "_hash", hash((self.ph, self.pw, self.order)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # rebuilt, not restored: string hashes differ between processes
        return Partition, (self.ph, self.pw, self.order)

    def __eq__(self, other) -> bool:
        return self is other or (type(other) is Partition and self._hash == other._hash
                                 and self.ph == other.ph and self.pw == other.pw
                                 and self.order == other.order)

    def parts(self, dim: str) -> int:
        return self.sizes[_AT[dim]]

    def split(self) -> tuple[str, ...]:
        """The split loops in ``P_order``."""
        return tuple(d for d in self.order if self.parts(d) > 1)

    def __str__(self) -> str:
        return " ".join(f"{d.upper()}{self.ph[DIMS.index(d)]}x{self.pw[DIMS.index(d)]}"
                        for d in self.split()) or "whole"


@functools.lru_cache(maxsize=1024)
def _factorizations(n: int, k: int) -> tuple[tuple[int, ...], ...]:
    """Ordered k-tuples of positive integers whose product is n."""
    if k == 1:
        return ((n,),)
    return tuple((d, *rest) for d in range(1, n + 1) if n % d == 0
                 for rest in _factorizations(n // d, k - 1))


def partitions(layer: Layer, h: int, w: int) -> list[Partition]:
    """Every LM of *layer* on an ``h x w`` region whose parts are non-empty, in the
    default spatial order (:func:`orders` gives the others)."""
    return list(_partitions(layer.n, layer.k, layer.p, layer.q, layer.c // layer.groups, h, w))


@functools.lru_cache(maxsize=4096)
def _partitions(n: int, k: int, p: int, q: int, c: int, h: int, w: int) -> tuple[Partition, ...]:
    limit = {"b": n, "k": k, "p": p, "q": q, "c": c}
    out = []
    for ph in _factorizations(h, len(DIMS)):
        for pw in _factorizations(w, len(DIMS)):
            if all(ph[i] * pw[i] <= limit[d] for i, d in enumerate(DIMS)):
                out.append(Partition(ph, pw))
    return tuple(out)


WHOLE = Partition((1,) * len(DIMS), (1,) * len(DIMS))


def orders(part: Partition) -> list[Partition]:
    """*part* in every spatial order that lays its nodes out differently: the orders
    of its split loops that differ in the order of the loops split along the rows or
    along the columns (*part*'s own order first)."""
    return list(_orders(part))


@functools.lru_cache(maxsize=65536)
def _orders(part: Partition) -> tuple[Partition, ...]:
    out, seen = [], set()
    for perm in itertools.permutations(part.split()):
        alt = Partition(part.ph, part.pw, perm + tuple(d for d in DIMS if d not in perm))
        key = tuple(tuple(d for d in alt.order if ax[DIMS.index(d)] > 1)
                    for ax in (alt.ph, alt.pw))
        if key not in seen:
            seen.add(key)
            out.append(alt)
    out.sort(key=lambda a: a != part)
    return tuple(out)


@functools.lru_cache(maxsize=65536)
def spacing(part: Partition, dims: str) -> int:
    """Hops between neighbouring nodes of a sharing set, whose nodes differ only in
    their parts of the loops *dims*: along an axis where one of them is split, the
    split loops after the last of them in ``P_order`` vary faster, so the set's nodes
    are their parts apart; the larger of the two axes' spacings."""
    out = 1
    for ax in (part.ph, part.pw):
        members = [i for i, d in enumerate(part.order) if d in dims and ax[DIMS.index(d)] > 1]
        if members:
            out = max(out, math.prod(ax[DIMS.index(d)] for d in part.order[members[-1] + 1:]))
    return out


def layer_partitions(lay: Layer, h: int, w: int) -> list[Partition]:
    """The LMs searched for *lay* on an ``h x w`` region: every partition of a layer with
    MACs; channels or rows and columns of the others (no input channel split)."""
    return list(_layer_partitions(lay.kind in ("conv", "fc", "matmul"), lay.n, lay.k, lay.p,
                                  lay.q, lay.c // lay.groups, h, w))


@functools.lru_cache(maxsize=4096)
def _layer_partitions(macs: bool, n: int, k: int, p: int, q: int, c: int, h: int,
                      w: int) -> tuple[Partition, ...]:
    every = _partitions(n, k, p, q, c, h, w)
    return every if macs else tuple(pt for pt in every if pt.parts("c") == 1)


@functools.lru_cache(maxsize=65536)
def parse_partition(text: str) -> Partition:
    """The :class:`Partition` of a mapping's ``partition`` text (``"K2x1 Q1x2"``: the
    split loops in ``P_order`` with their row and column parts, or ``"whole"``:
    nothing split), as :meth:`Mapping.to_json` writes it. Memoized (a partition is
    immutable): the mapper reads every layer's partition back in each iteration.

    Raises
    ------
    ValueError
        The text is not of that form."""
    ph, pw = [1] * len(DIMS), [1] * len(DIMS)
    order: list[str] = []
    if text != "whole":
        for tok in text.split():
            d = tok[:1].lower()
            a, _, b = tok[1:].partition("x")
            if d not in DIMS or d in order or not (a.isdigit() and b.isdigit()):
                raise ValueError(f"partition {text!r}: each part must be a loop of "
                                 f"{''.join(DIMS).upper()} once with its row and column "
                                 f"parts, like K2x1, not {tok!r}")
            i = DIMS.index(d)
            ph[i], pw[i] = int(a), int(b)
            order.append(d)
    return Partition(tuple(ph), tuple(pw), tuple(order) + tuple(d for d in DIMS
                                                                  if d not in order))


def layer_shape(lay: Layer) -> tuple:
    """What the mapper's costs of *lay* depend on (all but its name, its predecessors'
    names and its post-operations): layers of one shape cost the same on the same
    nodes, so the costs are memoized by this key."""
    got = _SHAPES.get(id(lay))
    if got is not None and got[0]() is lay:
        return got[1]
    shape = (lay.kind, lay.n, lay.c, lay.h, lay.w, lay.k, lay.p, lay.q, lay.r, lay.s,
             lay.stride, lay.pad, lay.groups, len(lay.preds))
    if len(_SHAPES) > 1 << 16:
        _SHAPES.clear()
    _SHAPES[id(lay)] = (weakref.ref(lay), shape)
    return shape


# layer_shape by the layer's identity (a Layer hashes all its fields, names included);
# the weak reference tells a live layer from a new one at a reused address
_SHAPES: dict[int, tuple] = {}
