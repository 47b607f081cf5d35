"""PIM-Tuner (Sec. IV-V, Fig. 7-8): hardware parameters by Bayesian optimization under
the area constraint, with random search and a plain GP as the baselines of Fig. 9.

The space (Table I over Table II's ranges, discrete): ``NA_row, NA_col`` in
{2, 4, 8, 16} (they must divide the 16 x 16 bank array, Sec. III-A; each node
gets ``256 / (NA_row NA_col)`` banks), ``PEA_row, PEA_col`` in {1, 2, ..., 256}
and ``Size_ibuf, Size_wbuf, Size_obuf`` in {1, 2, ..., 2048} KiB, powers of two
(:data:`TABLE_I`): 2,239,488 points, less those whose output buffer holds fewer
than two lines of partial sums (the engine's constraint, 256 PE columns need 2 KiB).

One iteration (Fig. 8): draw random points until ``candidates`` of them pass the
filter model (predicted area at most the constraint); fit the suggestion model to
the evaluated points (``log`` of the cost of Eq. 1); sort the candidates by
expected improvement; check their area with the area model ("the simulator")
one by one until one is legal; evaluate it (PIM-Mapper on every workload
network); add the area checks to the filter's data and the result to the
suggestion model's. Methods: ``dkl`` (NicePIM: DKL suggestion model), ``gp``
(the GaussianProcess comparison: the same flow with scikit-learn's Gaussian process,
:class:`~.surrogate.SklearnGP`), ``random`` (a random legal architecture each
iteration) and ``sa`` (simulated annealing: a random legal neighbour of the current
architecture each iteration, one parameter one or two grid steps away, accepted by the
Metropolis rule on the log cost at a temperature cooled geometrically from
:data:`SA_T0` to :data:`SA_T1`). All start from the same ``init`` random legal
architectures (seeded), so that they differ only in the search.

The objective (Sec. VIII-C): Eq. 1 with ``alpha = beta = gamma = 1``, the summed
energy-delay product of the workload networks (J s); design quality is its
reciprocal, and Fig. 9 plots the mean quality of the best three architectures
evaluated so far (:func:`top3_quality`). An architecture the mapper cannot map
(a layer that fits no partition of its buffers or DRAM) has infinite cost; the
suggestion model sees it at the worst cost observed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from pimforge.gen.config import load_config
from pimforge.gen.errors import CapacityError, PimforgeError

from .area import AREA_CONSTRAINT_MM2, engine_area_mm2
from .networks import network

__all__ = ["METHODS", "SA_T0", "SA_T1", "TABLE_I", "Evaluator", "Record", "Space",
           "nicepim_space", "run", "top3_quality"]

_KIB = 1024
#: Table I's parameters and the discrete values explored (Table II's ranges).
TABLE_I: dict[str, tuple[int, ...]] = {
    "na_rows": (2, 4, 8, 16),
    "na_cols": (2, 4, 8, 16),
    "pe_rows": tuple(2 ** i for i in range(9)),
    "pe_cols": tuple(2 ** i for i in range(9)),
    "ibuf_bytes": tuple(2 ** i * _KIB for i in range(12)),
    "wbuf_bytes": tuple(2 ** i * _KIB for i in range(12)),
    "obuf_bytes": tuple(2 ** i * _KIB for i in range(12)),
}
#: Table II: 16 x 16 DRAM banks shared by the nodes.
BANKS = 256
METHODS = ("dkl", "gp", "random", "sa")
#: Simulated annealing's temperatures (in units of the log cost, whose spread over the
#: space is several e-folds): the first accepts a 2.7x worse neighbour with probability
#: 1/e, the last practically none.
SA_T0 = 1.0
SA_T1 = 0.02


class Space:
    """A discrete design space: a grid of named dimensions, a validity rule and an area.

    Parameters
    ----------
    dims : mapping
        Name -> increasing values.
    area : callable
        ``area(values) -> array`` of the area of rows of values (``n x d``).
    constraint : float
        The largest legal area.
    valid : callable, optional
        ``valid(values) -> bool array``: the rows that are architectures at all.
    """

    def __init__(self, dims: dict[str, Sequence[float]], area: Callable, constraint: float,
                 valid: Callable | None = None):
        self.names = tuple(dims)
        self.values = [np.asarray(v, dtype=float) for v in dims.values()]
        self.area_fn = area
        self.constraint = constraint
        self.valid_fn = valid

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values)

    def points(self, idx: np.ndarray) -> np.ndarray:
        """Grid indices (``n x d``) -> parameter values."""
        idx = np.atleast_2d(idx)
        return np.stack([v[idx[:, k]] for k, v in enumerate(self.values)], 1)

    def encode(self, idx: np.ndarray) -> np.ndarray:
        """Grid indices -> the models' inputs: the index along each dimension in [0, 1]
        (the parameters are geometric, so this is their normalized logarithm)."""
        idx = np.atleast_2d(idx)
        return idx / np.array([max(len(v) - 1, 1) for v in self.values], dtype=float)

    def valid(self, idx: np.ndarray) -> np.ndarray:
        if self.valid_fn is None:
            return np.ones(len(np.atleast_2d(idx)), bool)
        return self.valid_fn(self.points(idx))

    def area(self, idx: np.ndarray) -> np.ndarray:
        return np.asarray(self.area_fn(self.points(idx)), dtype=float)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """*n* uniformly random valid points (grid indices)."""
        out = []
        while sum(len(o) for o in out) < n:
            idx = np.stack([rng.integers(0, len(v), 2 * n + 16) for v in self.values], 1)
            out.append(idx[self.valid(idx)])
        return np.concatenate(out)[:n]


def _nicepim_valid(p: np.ndarray) -> np.ndarray:
    # the engine's buffers hold at least two lines (gen/config/nicepim.py): a line of
    # ibuf is pe_rows inputs, of wbuf pe_cols weights, of obuf pe_cols partial sums
    from pimforge.rtl.nicepim.params import DATA_BITS, PSUM_BITS

    r, c = p[:, 2], p[:, 3]
    return ((p[:, 4] >= 2 * r * DATA_BITS / 8) & (p[:, 5] >= 2 * c * DATA_BITS / 8)
            & (p[:, 6] >= 2 * c * PSUM_BITS / 8))


def _nicepim_area(p: np.ndarray) -> np.ndarray:
    return p[:, 0] * p[:, 1] * engine_area_mm2(p[:, 2], p[:, 3], p[:, 4], p[:, 5], p[:, 6])


def nicepim_space(constraint: float = AREA_CONSTRAINT_MM2) -> Space:
    """Table I's space with the engines' area (:mod:`.area`) under *constraint* mm^2."""
    return Space(TABLE_I, _nicepim_area, constraint, _nicepim_valid)


def overrides(point: np.ndarray) -> dict[str, int]:
    """``--set`` overrides of the nicepim section for one point of :data:`TABLE_I`."""
    d = {f"nicepim.{k}": int(v) for k, v in zip(TABLE_I, point, strict=True)}
    d["nicepim.banks_per_node"] = BANKS // (d["nicepim.na_rows"] * d["nicepim.na_cols"])
    return d


@dataclass
class Evaluation:
    cost: float
    latency_s: dict[str, float]
    energy_j: dict[str, float]
    seconds: float
    error: str = ""


class Evaluator:
    """Eq. 1's cost of an architecture: PIM-Mapper on every network, summed EDP (J s).

    Parameters
    ----------
    nets : sequence of str
        Workload networks (:func:`~.networks.network_names`).
    base : str
        Config preset the points override (Table II's constants: 8 MiB banks,
        400 MHz, 8 VCs).
    """

    def __init__(self, nets: Sequence[str], base: str = "nicepim_4x4", base_config=None):
        self.nets = [network(n) for n in nets]
        self.base = base
        self.base_config = base_config
        self.cache: dict[tuple, Evaluation] = {}

    def config(self, point: np.ndarray):
        from dataclasses import replace

        ov = overrides(point)
        if self.base_config is None:
            return load_config(self.base, ov)
        n = replace(self.base_config.nicepim, **{k.split(".")[1]: v for k, v in ov.items()})
        return replace(self.base_config, nicepim=n)

    def __call__(self, point: np.ndarray) -> Evaluation:
        from .mapper import map_network  # the evaluations' module, loaded when one is made

        key = tuple(int(v) for v in point)
        if key in self.cache:
            return self.cache[key]
        t = time.perf_counter()
        cfg = self.config(point)
        lat, en, err = {}, {}, ""
        for net in self.nets:
            try:
                m = map_network(net, cfg)
            except CapacityError as e:
                err = f"{net.name}: {e}"
                break
            lat[net.name] = m.latency_cycles * cfg.nicepim.tck_ns * 1e-9
            en[net.name] = m.energy_pj * 1e-12
        cost = math.inf if err else sum(en[n] * lat[n] for n in lat)
        ev = Evaluation(cost, lat, en, time.perf_counter() - t, err)
        self.cache[key] = ev
        return ev


@dataclass
class Record:
    """One evaluated architecture."""

    method: str
    iteration: int          # 0 .. init-1: the initial random points
    index: tuple[int, ...]
    values: tuple[float, ...]
    area_mm2: float
    predicted_area_mm2: float | None
    cost: float
    area_checks: int
    seconds: float
    error: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def quality(self) -> float:
        return 0.0 if not math.isfinite(self.cost) or self.cost <= 0 else 1.0 / self.cost


def top3_quality(costs: Sequence[float]) -> np.ndarray:
    """Fig. 9's design quality after each evaluation: the mean of ``1 / cost`` over the
    best three architectures so far (fewer at the start)."""
    out, best = [], []
    for c in costs:
        q = 0.0 if not math.isfinite(c) or c <= 0 else 1.0 / c
        best = sorted([*best, q], reverse=True)[:3]
        out.append(float(np.mean(best)))
    return np.array(out)


def _legal(space: Space, rng, n: int, exclude: set) -> tuple[np.ndarray, np.ndarray, int]:
    """Random points, area-checked one by one until *n* legal ones; (points, areas,
    checks)."""
    pts, areas, checks = [], [], 0
    while len(pts) < n:
        if checks > 100_000:
            raise PimforgeError(f"found {len(pts)} of {n} new legal architectures in "
                                f"{checks:,} random draws: the space (under "
                                f"{space.constraint:g}) is nearly exhausted or nearly "
                                "all illegal; ask for fewer evaluations or a larger limit")
        for i in space.sample(rng, 64):
            checks += 1
            if tuple(i) in exclude:
                continue
            a = float(space.area(i[None])[0])
            if a <= space.constraint:
                pts.append(i)
                areas.append(a)
                exclude.add(tuple(i))
                if len(pts) == n:
                    break
    return np.array(pts), np.array(areas), checks


def run(method: str, space: Space, objective: Callable[[np.ndarray], object], *,
        iterations: int, seed: int = 0, init: int = 8, candidates: int = 16384,
        area_samples: int = 4096, filter_steps: int | None = None, dkl_steps: int = 300,
        dkl_hidden: tuple[int, ...] = (256, 64, 16), filter_update_steps: int = 100,
        progress: Callable[[Record], None] | None = None) -> list[Record]:
    """One exploration (Fig. 7-8) of *space* with *method* (``dkl``, ``gp`` or
    ``random``): *init* random legal architectures, then *iterations* suggested ones.

    *objective(values)* returns a float cost or an object with ``cost`` (and
    optionally ``error``). The filter model starts from *area_samples* random points
    whose area was checked, trained for *filter_steps* mini-batches (default: about 100
    passes over them, at least 200 steps); ``dkl`` and ``gp`` share everything but the
    suggestion model.
    """
    if filter_steps is None:
        filter_steps = max(200, 3 * area_samples // 4)
    if method not in METHODS:
        raise PimforgeError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    # the models' matrices are small: one BLAS thread is many times faster than a pool
    # competing for the cores (and the mapper's evaluations are single-threaded)
    with threadpool_limits(1):
        return _run(method, space, objective, iterations, seed, init, candidates,
                    area_samples, filter_steps, dkl_steps, dkl_hidden,
                    filter_update_steps, progress)


def _run(method, space, objective, iterations, seed, init, candidates, area_samples,
         filter_steps, dkl_steps, dkl_hidden, filter_update_steps, progress) -> list[Record]:
    # scipy (the surrogate models) is loaded by the exploration, not by the command line
    from .surrogate import DKL, AreaFilter, SklearnGP, expected_improvement

    init_rng = np.random.default_rng([seed, 0])     # the same first points for every method
    rng = np.random.default_rng([seed, 1 + METHODS.index(method)])
    seen: set = set()
    records: list[Record] = []

    def evaluate(i, it, area, pred, checks):
        t = time.perf_counter()
        out = objective(space.points(i[None])[0])
        cost = float(getattr(out, "cost", out))
        rec = Record(method, it, tuple(int(v) for v in i),
                     tuple(float(v) for v in space.points(i[None])[0]), float(area),
                     None if pred is None else float(pred), cost, checks,
                     time.perf_counter() - t, getattr(out, "error", ""))
        records.append(rec)
        if progress:
            progress(rec)

    pts, areas, checks = _legal(space, init_rng, init, seen)
    for k, (i, a) in enumerate(zip(pts, areas, strict=True)):
        evaluate(i, k, a, None, checks if k == 0 else 0)
    if method == "random":
        for it in range(iterations):
            p, a, c = _legal(space, rng, 1, seen)
            evaluate(p[0], init + it, a[0], None, c)
        return records
    if method == "sa":
        _anneal(space, rng, records, seen, iterations, init, evaluate)
        return records

    # the filter's data: every area check so far
    ax = space.sample(init_rng, area_samples)
    filt_x, filt_a = list(space.encode(ax)), list(space.area(ax))
    filt = AreaFilter(np.random.default_rng([seed, 9])).fit(filt_x, filt_a, steps=filter_steps)
    model = DKL(rng, hidden=dkl_hidden, steps=dkl_steps) if method == "dkl" else SklearnGP(rng)
    for it in range(iterations):
        # (1) candidates that the filter predicts legal
        # (a small space may hold fewer: stop when three draws add nothing new)
        pool: dict[tuple, np.ndarray] = {}
        stale = 0
        while len(pool) < candidates and stale < 3:
            s = space.sample(rng, candidates)
            before = len(pool)
            for c in s[filt.predict(space.encode(s)) <= space.constraint]:
                key = tuple(c)
                if key not in seen and len(pool) < candidates:
                    pool.setdefault(key, c)
            stale = stale + 1 if len(pool) == before else 0
        cand = np.array(list(pool.values()))
        if not len(cand):           # the filter passes nothing new: a random legal one
            p, a, c = _legal(space, rng, 1, seen)
            evaluate(p[0], init + it, a[0], None, c)
            continue
        # (2) the suggestion model on the evaluated points
        x = space.encode(np.array([r.index for r in records]))
        costs = np.array([r.cost for r in records])
        finite = costs[np.isfinite(costs)]
        y = np.log(np.where(np.isfinite(costs), costs, finite.max() if len(finite) else 1.0))
        model.fit(x, y)
        mu, sd = model.predict(space.encode(cand))
        ei = expected_improvement(mu, sd, float(y.min()))
        order = np.argsort(-ei, kind="stable")
        # (3) area checks one by one until a legal one
        pred = filt.predict(space.encode(cand[order[:64]]))
        chosen, checks = None, 0
        for j, o in enumerate(order):
            checks += 1
            a = float(space.area(cand[o][None])[0])
            filt_x.append(space.encode(cand[o][None])[0])
            filt_a.append(a)
            if a <= space.constraint:
                chosen = (cand[o], a, pred[j] if j < len(pred) else None)
                break
        if chosen is None:          # nothing legal among the candidates: a random one
            p, a, c = _legal(space, rng, 1, seen)
            chosen, checks = (p[0], a[0], None), checks + c
        seen.add(tuple(chosen[0]))
        evaluate(chosen[0], init + it, chosen[1], chosen[2], checks)
        records[-1].extra = {"ei": float(ei[order[0]]), "predicted_log_cost":
                             float(mu[order[0]])}
        # (5) the filter learns from the new area checks
        filt.fit(filt_x, filt_a, steps=filter_update_steps)
    return records


def _neighbour(space: Space, rng, point: np.ndarray, seen: set,
               tries: int = 1000) -> tuple[np.ndarray | None, float, int]:
    """A random legal, valid, unevaluated grid neighbour of *point*: one parameter moved
    one or two steps; (point or None, area, area checks)."""
    checks = 0
    for _ in range(tries):
        d = int(rng.integers(len(space.values)))
        step = int(rng.choice((-2, -1, 1, 2)))
        q = point.copy()
        q[d] = q[d] + step
        if not 0 <= q[d] < len(space.values[d]) or tuple(q) in seen:
            continue
        if not space.valid(q[None])[0]:
            continue
        checks += 1
        a = float(space.area(q[None])[0])
        if a <= space.constraint:
            return q, a, checks
    return None, math.nan, checks


def _anneal(space: Space, rng, records: list, seen: set, iterations: int, init: int,
            evaluate) -> None:
    """Simulated annealing from the best initial architecture (see the module docstring);
    a neighbourhood with nothing legal left restarts from a random legal point."""
    def log_cost(c: float) -> float:
        return math.log(c) if math.isfinite(c) and c > 0 else math.inf

    cur = min(records, key=lambda r: r.cost)
    cur_idx, cur_e = np.array(cur.index), log_cost(cur.cost)
    for it in range(iterations):
        temp = SA_T0 * (SA_T1 / SA_T0) ** (it / max(1, iterations - 1))
        q, a, checks = _neighbour(space, rng, cur_idx, seen)
        if q is None:
            p, aa, c = _legal(space, rng, 1, seen)
            q, a, checks = p[0], aa[0], checks + c
        else:
            seen.add(tuple(q))
        evaluate(q, init + it, a, None, checks)
        e = log_cost(records[-1].cost)
        if e <= cur_e or (math.isfinite(e) and rng.random() < math.exp((cur_e - e) / temp)):
            cur_idx, cur_e = q, e

