"""DESCNet design-space exploration of scratchpad organizations (Sec. V-C, Alg. 1-2).

Organizations: SMP (one shared 3-port memory, Eq. 1), SEP (separate data,
weight and accumulator memories, Eq. 2), HY (shared + separate, sizes from
Algorithm 1) and their power-gated variants (-PG, sector counts from
Algorithm 2), plus HY with a shared memory of ``PS`` ports (Sec. VI-C).
All memories have 16 banks. A HY configuration stores the part of each
operation's usage that exceeds a separate memory in the shared memory
(Appendix B), so SMP and SEP are the boundary cases of one energy model:

* dynamic energy: every read and write of the profile, split between the
  separate and the shared memory in proportion to the usage each holds;
* static energy: leakage x time; with power gating, per operation, the
  sectors holding the operation's usage are ON (the PMU wakes them ahead of
  time, Sec. V-B) and the others leak ``OFF_LEAK``; plus one wake-up energy
  per OFF->ON sector transition.

The search is exhaustive: every configuration Algorithms 1-2 produce is
evaluated. Because energy and area are sums over the four memories, the
per-memory terms are computed once per (size, sectors) and every
configuration's total is formed by broadcasting (numpy), which is what makes
the search take seconds.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from pimforge.gen.errors import UnknownNameError

from . import sram
from .profiles import Profile

__all__ = [
    "MAIN_ORGS",
    "MAX_SECTORS",
    "ORGANIZATIONS",
    "SIZES",
    "DSEResult",
    "Space",
    "algorithm1",
    "algorithm2",
    "explore",
    "memory_terms",
    "pareto_front",
    "round_down",
    "round_up",
    "run_dse",
    "sigma",
    "split_usage",
]

KIB = 1024
# Power-of-two sizes plus the four extra sizes of Sec. V-C (25, 108, 450, 460 KiB).
SIZES = np.array(sorted({KIB * 2 ** k for k in range(15)} | {25 * KIB, 108 * KIB, 450 * KIB,
                                                                   460 * KIB}), dtype=np.int64)
MEMS = ("S", "D", "W", "A")
ACC_BYTES_PER_VALUE = {"D": 1, "W": 1, "A": 4}

# name -> (uses shared, uses separate, power-gated, shared-memory ports)
ORGANIZATIONS: dict[str, tuple[bool, bool, bool, int]] = {
    "SMP": (True, False, False, 3),
    "SMP-PG": (True, False, True, 3),
    "SEP": (False, True, False, 0),
    "SEP-PG": (False, True, True, 0),
    "HY": (True, True, False, 3),
    "HY-PG": (True, True, True, 3),
    "HY-PS1": (True, True, False, 1),
    "HY-PG-PS1": (True, True, True, 1),
    "HY-PS2": (True, True, False, 2),
    "HY-PG-PS2": (True, True, True, 2),
}
MAIN_ORGS = ("SMP", "SMP-PG", "SEP", "SEP-PG", "HY", "HY-PG")
MAX_SECTORS = 16


def round_up(x, sizes: np.ndarray = SIZES) -> np.ndarray:
    """Lowest acceptable size >= x (footnote 12); 0 stays 0."""
    x = np.asarray(x)
    idx = np.searchsorted(sizes, x, side="left")
    if np.any(idx >= len(sizes)):
        raise ValueError(f"usage {int(np.max(x))} B exceeds the largest size {sizes[-1]} B")
    return np.where(x > 0, sizes[np.minimum(idx, len(sizes) - 1)], 0)


def round_down(x, sizes: np.ndarray = SIZES) -> np.ndarray:
    """Largest acceptable size <= x (the smallest size when x is below it)."""
    x = np.asarray(x)
    idx = np.searchsorted(sizes, x, side="right") - 1
    return sizes[np.maximum(idx, 0)]


def algorithm1(D, W, A, sizes: np.ndarray = SIZES) -> np.ndarray:
    """Algorithm 1: every (sz_s, sz_d, sz_w, sz_a) of the hybrid organization.

    ``sz_d`` runs over the acceptable sizes from ``min_i D_i`` to ``max_i D_i``
    (and likewise ``sz_w``, ``sz_a``); ``sz_s`` is the operation-wise worst
    case of what the three separate memories cannot hold, rounded up.
    """
    D, W, A = (np.asarray(v, dtype=np.int64) for v in (D, W, A))

    def rng(v):
        lo, hi = round_down(v.min()), round_up(v.max())
        return sizes[(sizes >= lo) & (sizes <= hi)]

    d, w, a = np.meshgrid(rng(D), rng(W), rng(A), indexing="ij")
    d, w, a = d.ravel(), w.ravel(), a.ravel()
    over = (np.maximum(0, D[None, :] - d[:, None]) + np.maximum(0, W[None, :] - w[:, None])
            + np.maximum(0, A[None, :] - a[:, None]))
    s = round_up(over.max(axis=1), sizes)
    return np.stack([s, d, w, a], axis=1)


def sigma(s: int, max_sectors: int | None = MAX_SECTORS) -> list[int]:
    """Sector counts of a memory of ``s`` bytes: powers of two in [2, s/128].

    ``max_sectors`` caps the range (default 16, the most any configuration of
    Tables I-II uses; ``None`` or 0 is the range exactly as written, whose
    sector counts go up to 65,536 for 8 MiB and multiply the space ~100-fold).
    """
    hi = s // 128
    if max_sectors:
        hi = min(hi, max_sectors)
    out, k = [], 2
    while k <= hi:
        out.append(k)
        k *= 2
    return out


def algorithm2(szs: int, szd: int, szw: int, sza: int,
               max_sectors: int | None = MAX_SECTORS) -> list[tuple[int, int, int, int]]:
    """Algorithm 2: every (sc_s, sc_d, sc_w, sc_a); an absent memory (size 0) has 1."""
    pools = [sigma(s, max_sectors) if s > 0 else [1] for s in (szs, szd, szw, sza)]
    return list(itertools.product(*pools))


def memory_terms(size: int, ports: int, usage: np.ndarray, access_bytes: np.ndarray,
                 sectors: np.ndarray, t_ms: np.ndarray) -> np.ndarray:
    """(len(sectors), 4): dynamic mJ, static mJ, wake-up mJ and area mm^2 of one memory.

    ``usage`` (bytes) and ``access_bytes`` (bytes moved) are per operation,
    ``t_ms`` the operations' durations. ``sectors == 1`` is a memory without
    power gating: it leaks for the whole inference.
    """
    sectors = np.asarray(sectors, dtype=float)
    out = np.zeros((len(sectors), 4))
    if size == 0:
        return out
    out[:, 0] = float(np.sum(access_bytes) * sram.access_pj(size, ports, 1)) * 1e-9
    leak = float(sram.leak_mw(size, ports))
    T = float(t_ms.sum())
    sc = sectors[:, None]
    on = np.ceil(usage[None, :] / (size / sc))                  # (n_sc, n_ops)
    frac = on / sc
    gated = (leak * (frac + sram.OFF_LEAK * (1 - frac)) * t_ms[None, :]).sum(axis=1)
    gated = gated + sram.pg_leak_mw(size, ports, sectors) * T
    out[:, 1] = np.where(sectors > 1, gated, leak * T) * 1e-3   # uJ -> mJ
    ups = np.maximum(0, np.diff(on, axis=1, prepend=0)).sum(axis=1)
    out[:, 2] = np.where(sectors > 1, ups * sram.wake_nj(size, ports, sectors), 0.0) * 1e-6
    out[:, 3] = sram.area_mm2(size, ports, sectors)
    return out


def split_usage(prof: Profile, sizes, shared_ports: int):
    """Per-operation usage (n_ops, 4: S, D, W, A) and bytes accessed in each memory.

    What a separate memory cannot hold goes to the shared memory; accesses
    follow the usage proportionally. Also returns whether a shared memory
    with ``shared_ports`` ports suffices (at most that many kinds of values
    spill into it in any operation).
    """
    X = prof.usage.astype(float)                      # D, W, A
    sep = np.array(sizes[1:], dtype=float)[None, :]
    held = np.minimum(X, sep)
    over = X - held
    usage = np.concatenate([over.sum(axis=1, keepdims=True), held], axis=1)
    frac_sep = np.divide(held, X, out=np.ones_like(X), where=X > 0)
    bpv = np.array([ACC_BYTES_PER_VALUE[k] for k in "DWA"], dtype=float)
    moved = (prof.reads + prof.writes).astype(float) * bpv
    acc_sep = moved * frac_sep
    access = np.concatenate([(moved - acc_sep).sum(axis=1, keepdims=True), acc_sep], axis=1)
    feasible = bool(np.all((over > 0).sum(axis=1) <= shared_ports))
    return usage, access, feasible


@dataclass
class Space:
    """All evaluated configurations, one entry per configuration.

    ``tuples[org][tuple_id]`` are the sizes (S, D, W, A) in bytes; the
    configuration's sector counts are in ``sectors``.
    """

    orgs: list[str]
    org: np.ndarray          # (n,) organization index into ``orgs``
    size: np.ndarray         # (n, 4) bytes: S, D, W, A (int64)
    sectors: np.ndarray      # (n, 4) int32
    area: np.ndarray         # (n,) mm^2
    energy: np.ndarray       # (n,) mJ: dynamic + static + wake-up
    parts: np.ndarray        # (n, 3) mJ: dynamic, static, wake-up

    def __len__(self) -> int:
        return len(self.energy)


def size_tuples(prof: Profile, org: str) -> np.ndarray:
    shared, separate, _, _ = ORGANIZATIONS[org]
    D, W, A = prof.usage.T
    if shared and not separate:          # Eq. 1
        return np.array([[int(round_up(prof.usage.sum(axis=1).max())), 0, 0, 0]])
    if separate and not shared:          # Eq. 2
        return np.array([[0, int(round_up(D.max())), int(round_up(W.max())),
                          int(round_up(A.max()))]])
    t = algorithm1(D, W, A)
    # A tuple whose shared size is 0 is exactly the SEP configuration (its
    # separate sizes are then the rounded maxima), evaluated there.
    return t[t[:, 0] > 0]


def explore(prof: Profile, orgs=MAIN_ORGS, *, max_sectors: int | None = MAX_SECTORS) -> Space:
    """Exhaustive evaluation of every configuration of ``orgs`` for ``prof``."""
    for o in orgs:
        if o not in ORGANIZATIONS:
            raise UnknownNameError(f"unknown organization {o!r}; allowed: "
                                   f"{', '.join(ORGANIZATIONS)}")
    t_ms = prof.seconds * 1e3
    cache: dict = {}
    blocks = []
    for oi, org in enumerate(orgs):
        shared, _, pg, ps = ORGANIZATIONS[org]
        ports = (ps if shared else 1, 1, 1, 1)
        for sizes in size_tuples(prof, org):
            sizes = tuple(int(v) for v in sizes)
            usage, access, feasible = split_usage(prof, sizes, ps if shared else 3)
            if not feasible:
                continue
            pools = [np.array(sigma(s, max_sectors) if (pg and s > 0) else [1]) for s in sizes]
            if any(len(p) == 0 for p in pools):
                continue
            terms = []
            for m in range(4):
                # A separate memory's terms depend only on its own size.
                key = (m, sizes[m], pg, ports[m]) if m > 0 else None
                if key is None or key not in cache:
                    val = memory_terms(sizes[m], ports[m], usage[:, m], access[:, m],
                                       pools[m], t_ms)
                    if key is not None:
                        cache[key] = val
                else:
                    val = cache[key]
                terms.append(val)
            # Broadcast the per-memory terms over the Algorithm 2 product.
            idx = [g.ravel() for g in np.meshgrid(*[np.arange(len(p)) for p in pools],
                                                   indexing="ij")]
            tot = terms[0][idx[0]] + terms[1][idx[1]] + terms[2][idx[2]] + terms[3][idx[3]]
            sc = np.stack([pools[m][idx[m]] for m in range(4)], axis=1).astype(np.int32)
            blocks.append((oi, sizes, sc, tot))
    n = sum(len(b[2]) for b in blocks)
    org_a = np.empty(n, dtype=np.int16)
    size_a = np.empty((n, 4), dtype=np.int64)
    sc_a = np.empty((n, 4), dtype=np.int32)
    tot_a = np.empty((n, 4))
    k = 0
    for oi, sizes, sc, tot in blocks:
        j = k + len(sc)
        org_a[k:j] = oi
        size_a[k:j] = sizes
        sc_a[k:j] = sc
        tot_a[k:j] = tot
        k = j
    parts = tot_a[:, :3]
    return Space(list(orgs), org_a, size_a, sc_a, tot_a[:, 3], parts.sum(axis=1), parts)


def pareto_front(area: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points (minimize both), sorted by area."""
    order = np.lexsort((energy, area))
    e_sorted = energy[order]
    best = np.minimum.accumulate(e_sorted)
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = e_sorted[1:] < best[:-1]
    return order[keep]


@dataclass
class DSEResult:
    net: str
    space: Space
    pareto: np.ndarray
    selected: dict[str, int]
    seconds: float


def run_dse(prof: Profile, orgs=MAIN_ORGS, *,
            max_sectors: int | None = MAX_SECTORS) -> DSEResult:
    """Explore, take the Pareto front and the lowest-energy configuration per organization."""
    t0 = time.perf_counter()
    space = explore(prof, orgs, max_sectors=max_sectors)
    front = pareto_front(space.area, space.energy)
    selected = {}
    for oi, org in enumerate(space.orgs):
        ids = np.flatnonzero(space.org == oi)
        if len(ids):
            best = ids[np.lexsort((space.area[ids], space.energy[ids]))[0]]
            selected[org] = int(best)
    return DSEResult(prof.net, space, front, selected, time.perf_counter() - t0)
