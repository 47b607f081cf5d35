"""A sliding window down a PE's rows: values a trip computes that the next trip needs again.

A stencil's output row ``y`` reads input rows ``y + dy``; walking a column strip down the
rows, the next trip reads most of those rows again (a 3x3 blur: two of its three), and
its row sums (``blur_x`` at ``y + 1`` and ``y + 2``) are the ones this trip computed.
Halide's sliding-window schedules keep such values instead of recomputing them; so does
this plan, on the expression of one output vector:

* every node gets a structural key with its rows relative to the trip (:func:`row_key`);
  a node whose key, one row further down, is the key of another node of the expression
  is *carried*: at trip ``k + 1`` it is the value that other node (its *source*) had at
  trip ``k``, so it is kept in a register instead of being computed (and its loads are
  not made);
* the largest such nodes are taken, walking down from the output (a carried node's
  operands are not needed); a source that is itself carried joins, so each chain runs
  from the oldest carried value to a *fresh* one computed in every trip (a 3x3 blur:
  ``blur_x(y) <- blur_x(y + 1) <- blur_x(y + 2)``);
* at the end of a trip each chain moves one step (``comp add`` of zero, bit-exact), and
  ``depth`` warm-up trips before the first output (the fresh values and the moves only,
  no stores) fill the chains.

The lowering (:func:`~.lower._compute`) uses it for a kernel that runs as a loop: its
column strips in an outer loop, the strip's rows in a software-pipelined inner loop
(:meth:`~.emit.Builder._pipelined` runs the warm-up trips in its prologue).
"""

from __future__ import annotations

from dataclasses import dataclass

from .emit import ArrayRef, const_bits
from .lang import Bin, Cast, Const, Expr, Reinterpret, Select, children

__all__ = ["SlidePlan", "plan", "row_key"]


def row_key(e: Expr, shift: int, memo: dict | None = None):
    """The structure of *e* with every row offset less *shift* (``None``: *e* is not a
    node a sliding window handles: a gather, a table, a row stride other than one)."""
    memo = {} if memo is None else memo
    k = (id(e), shift)
    if k in memo:
        return memo[k]
    if isinstance(e, Const):
        r = ("c", e.dtype, const_bits(e))
    elif isinstance(e, ArrayRef):
        ya, yb, yd = e.ay
        r = ("a", id(e.arr), e.ax, yb - shift, e.lane) if ya == 1 and yd == 1 else None
    elif isinstance(e, Bin | Select | Cast | Reinterpret):
        kids = [row_key(c, shift, memo) for c in children(e)]
        if any(c is None for c in kids):
            r = None
        else:
            tag = e.op if isinstance(e, Bin) else \
                e.cond.op if isinstance(e, Select) else e.dtype
            r = (type(e).__name__, tag, *kids)
    else:
        r = None
    memo[k] = r
    return r


def _reads(e: Expr, memo: dict) -> bool:
    """Whether *e* reads an array (a constant expression is the same in every trip)."""
    if id(e) not in memo:
        memo[id(e)] = isinstance(e, ArrayRef) or any(_reads(c, memo) for c in children(e))
    return memo[id(e)]


@dataclass
class SlidePlan:
    """*carried*: the keys kept from trip to trip, each with its nodes (every node of
    that key shares the register); *chains*: each chain's keys from the oldest carried
    one to its fresh source (computed in every trip); *depth*: the warm-up trips."""

    carried: dict[tuple, list[Expr]]
    chains: list[list[tuple]]
    fresh: dict[tuple, Expr]
    depth: int

    def keep(self) -> set[int]:
        """Ids of the nodes whose values must stay intact (no mac into them)."""
        out = {id(n) for ns in self.carried.values() for n in ns}
        out |= {id(n) for n in self.fresh.values()}
        return out

    def loaded(self, body: Expr) -> list[ArrayRef]:
        """The array reads a trip of *body* makes: every one not under a carried node (a
        warm-up trip makes them all, so they all must stay within their arrays' halos)."""
        kept = {id(n) for ns in self.carried.values() for n in ns}
        out, seen, stack = [], set(), [body]
        while stack:
            n = stack.pop()
            if id(n) in seen or id(n) in kept:
                continue
            seen.add(id(n))
            if isinstance(n, ArrayRef):
                out.append(n)
            stack.extend(children(n))
        return out


def plan(body: Expr) -> SlidePlan | None:
    """The sliding window of *body* (``None`` where nothing carries or a node is not one
    the window handles)."""
    memo: dict = {}
    by_key: dict[tuple, list[Expr]] = {}
    seen: set[int] = set()
    stack = [body]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        k0 = row_key(n, 0, memo)
        if k0 is None:
            return None
        by_key.setdefault(k0, []).append(n)
        stack.extend(children(n))
    rd: dict = {}

    def source(n: Expr):
        """The key whose value, a trip earlier, this node's is."""
        if not _reads(n, rd):
            return None
        s = row_key(n, -1, memo)
        return s if s in by_key else None

    if source(body) is not None:
        return None
    carried: dict[tuple, None] = {}     # in the walk's order, as every set below
    seen = set()
    stack = [body]
    while stack:        # the largest carried nodes, from the output down
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n is not body and source(n) is not None:
            carried[row_key(n, 0, memo)] = None
            continue
        stack.extend(children(n))
    if not carried:
        return None
    src: dict[tuple, tuple] = {}
    todo = list(carried)
    while todo:         # a source that is itself carried joins the chain
        c = todo.pop()
        s = source(by_key[c][0])
        src[c] = s
        if source(by_key[s][0]) is not None and s not in carried:
            carried[s] = None
            todo.append(s)
    fresh = {s: by_key[s][0] for c, s in src.items() if s not in carried}
    # a fresh value's operands must not be carried (a warm-up trip computes it first)
    for f in fresh.values():
        stack, seen = [f], set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if row_key(n, 0, memo) in carried:
                return None
            stack.extend(children(n))
    srcs = set(src.values())
    chains = []
    for h in (c for c in carried if c not in srcs):
        ch = [h]
        while ch[-1] in carried:
            ch.append(src[ch[-1]])
        chains.append(ch)
    if sum(len(ch) - 1 for ch in chains) != len(carried):
        return None         # a carried value outside the chains (a cycle): not handled
    depth = max(len(ch) - 1 for ch in chains)
    return SlidePlan({c: by_key[c] for c in carried}, chains, fresh, depth)
