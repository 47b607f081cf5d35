"""``pimforge dse nicepim``: PIM-Tuner over Table I's hardware parameters (Sec. V, Fig. 9).

Runs the exploration of :mod:`pimforge.sim.nicepim.tuner` with each ``--method``
(``dkl``: NicePIM's deep-kernel-learning suggestion model; ``gp``: scikit-learn's
Gaussian process; ``random``: random search; ``sa``: simulated annealing), every
architecture evaluated by PIM-Mapper on the ``--nets`` (Eq. 1's summed energy-delay
product), and writes into ``--out``:

* ``points.csv`` -- every evaluated architecture: method, iteration, the Table I
  parameters, banks per node, area (model and filter's prediction), whether it
  is feasible, its cost and per-network latency and energy;
* ``results.json`` -- the settings, the best three architectures of each method,
  Fig. 9's curve (mean design quality of the best three so far, per evaluation)
  and the seconds spent;
* ``convergence.png`` -- that curve for every method (Fig. 9).

While it runs, ``points.partial.csv`` in ``--out`` holds every architecture evaluated
so far, rewritten atomically after each one; it is removed when the results are
published, and kept (with a message) when the run stops early (Ctrl-C, an error).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import time
from pathlib import Path

from tqdm import tqdm

from pimforge.gen.args import AppendUnique, int_range, number_range, out_dir, seed
from pimforge.gen.errors import UnknownNameError
from pimforge.gen.output import FileSet, check_output_dir, write_text
from pimforge.gen.provenance import csv_comment, stamp

from .area import AREA_CONSTRAINT_MM2
from .networks import network_names
from .tuner import BANKS, METHODS, TABLE_I, Evaluator, Record, nicepim_space, top3_quality
from .tuner import run as explore

__all__ = ["add_arguments", "plot", "run", "write_points"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nets", action=AppendUnique,
                   help="workload networks, repeatable or comma-separated (default: all "
                        "five, as in the paper: " + ", ".join(network_names()) + ")")
    p.add_argument("--iterations", type=int_range(1, 100000), default=20,
                   help="suggested architectures per method after the initial ones "
                        "(default 20)")
    p.add_argument("--init", type=int_range(1, 10000), default=8,
                   help="initial random legal architectures, shared by the methods "
                        "(default 8)")
    p.add_argument("--method", choices=(*METHODS, "all"), default="all",
                   help="dkl (NicePIM), gp (scikit-learn's Gaussian process), random, sa "
                        "(simulated annealing), or all (default)")
    p.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    p.add_argument("--candidates", type=int_range(16, 1 << 20), default=16384,
                   help="candidates the filter passes per iteration (default 16384, "
                        "Sec. VIII-B)")
    p.add_argument("--area-samples", type=int_range(16, 1 << 20), default=4096,
                   help="random architectures whose area trains the filter model before "
                        "the first iteration (default 4096)")
    p.add_argument("--area-limit", type=number_range(0.0, 1e6, lo_open=True),
                   default=AREA_CONSTRAINT_MM2,
                   help=f"area constraint of the NN engines, mm^2 (default "
                        f"{AREA_CONSTRAINT_MM2:g}, Table II)")
    p.add_argument("--out", type=out_dir, required=True, help="output folder")


def _nets(args) -> list[str]:
    if not args.nets:
        return list(network_names())
    bad = [n for n in args.nets if n not in network_names()]
    if bad:
        raise UnknownNameError(f"unknown --nets {bad[0]!r}; allowed: "
                               f"{', '.join(network_names())}")
    return list(args.nets)


def write_points(path: Path, records: list[Record], evaluator: Evaluator, nets, limit,
                 header: str = "") -> None:
    with open(path, "w", newline="") as f:
        f.write(points_csv(records, evaluator, nets, limit, header))


def points_csv(records: list[Record], evaluator: Evaluator, nets, limit,
               header: str = "") -> str:
    """The text of ``points.csv``: a header comment line, then one row per record."""
    with io.StringIO(newline="") as f:
        f.write(header)         # the provenance comment line
        w = csv.writer(f)
        w.writerow(["method", "seed", "iteration", *TABLE_I, "banks_per_node", "area_mm2",
                    "filter_area_mm2", "feasible", "cost_edp_js", "quality",
                    *(f"latency_s_{n}" for n in nets), *(f"energy_j_{n}" for n in nets),
                    "area_checks", "eval_s", "error"])
        for seed_, r in records:
            ev = evaluator.cache[tuple(int(v) for v in r.values)]
            nodes = int(r.values[0] * r.values[1])
            w.writerow([r.method, seed_, r.iteration, *(int(v) for v in r.values),
                        BANKS // nodes, f"{r.area_mm2:.6g}",
                        "" if r.predicted_area_mm2 is None else f"{r.predicted_area_mm2:.6g}",
                        int(r.area_mm2 <= limit and math.isfinite(r.cost)),
                        f"{r.cost:.6g}", f"{r.quality:.6g}",
                        *(f"{ev.latency_s.get(n, math.nan):.6g}" for n in nets),
                        *(f"{ev.energy_j.get(n, math.nan):.6g}" for n in nets),
                        r.area_checks, f"{ev.seconds:.3f}", r.error])
        return f.getvalue()


def _arch(r: Record) -> dict:
    d = {k: int(v) for k, v in zip(TABLE_I, r.values, strict=True)}
    d["banks_per_node"] = BANKS // (d["na_rows"] * d["na_cols"])
    return {"parameters": d, "area_mm2": round(r.area_mm2, 4), "cost_edp_js": r.cost,
            "quality": r.quality, "iteration": r.iteration}


def plot(path: Path, curves: dict[str, list[float]], init: int, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"dkl": "NicePIM (DKL)", "gp": "GaussianProcess", "random": "Random",
              "sa": "Simulated annealing"}
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for m, q in curves.items():
        ax.plot(range(1, len(q) + 1), q, marker=".", label=labels.get(m, m))
    ax.axvline(init + 0.5, color="0.7", lw=0.8, ls="--")
    ax.set_xlabel("evaluated architectures (initial random ones left of the line)")
    ax.set_ylabel("design quality: mean 1/EDP of the best three [1/(J s)]")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(args) -> int:
    nets = _nets(args)
    methods = list(METHODS) if args.method == "all" else [args.method]
    out = check_output_dir(args.out, "--out")
    space = nicepim_space(args.area_limit)
    evaluator = Evaluator(nets, base_config=args.config)
    records: list[tuple[int, Record]] = []
    seconds: dict[str, float] = {}
    curves: dict[str, list[float]] = {}

    done: list[Record] = []
    bar = None
    partial = out / "points.partial.csv"

    def progress(r: Record) -> None:
        done.append(r)
        write_text(partial, points_csv([(args.seed, x) for x in done], evaluator, nets,
                                       args.area_limit))
        best = min(x.cost for x in done if x.method == r.method)
        line = (f"  {r.method:6s} {r.iteration:4d}  area {r.area_mm2:7.2f} mm^2  EDP "
                f"{r.cost:.4g} J s  best {best:.4g}" + (f"  ({r.error})" if r.error else ""))
        if bar.disable:
            print(line, flush=True)
        else:
            bar.write(line)
        bar.update()

    for m in methods:
        print(f"{m}: {args.init} initial + {args.iterations} suggested architectures, nets "
              f"{', '.join(nets)}", flush=True)
        t = time.perf_counter()
        # A bar of the evaluations on a terminal's stderr (disable=None: none in logs)
        bar = tqdm(total=args.init + args.iterations, desc=m, unit="eval", leave=False,
                   disable=None)
        try:
            recs = explore(m, space, evaluator, iterations=args.iterations, seed=args.seed,
                           init=args.init, candidates=args.candidates,
                           area_samples=args.area_samples, progress=progress)
        except BaseException:
            if done:
                print(f"stopped: the {len(done)} architectures evaluated are kept in "
                      f"{partial}", flush=True)
            raise
        finally:
            bar.close()
        seconds[m] = round(time.perf_counter() - t, 3)
        records += [(args.seed, r) for r in recs]
        curves[m] = top3_quality([r.cost for r in recs]).tolist()
    best = {}
    for m in methods:
        rs = sorted((r for _, r in records if r.method == m), key=lambda r: r.cost)
        best[m] = [_arch(r) for r in rs[:3] if math.isfinite(r.cost)]
    n = args.config.nicepim
    results = {
        "settings": {"nets": nets, "methods": methods, "iterations": args.iterations,
                     "init": args.init, "seed": args.seed, "candidates": args.candidates,
                     "area_samples": args.area_samples,
                     "area_limit_mm2": args.area_limit, "base_config": args.config.name,
                     "objective": "sum over nets of energy [J] x latency [s] (Eq. 1, "
                                  "alpha = beta = gamma = 1)",
                     "space": {k: list(v) for k, v in TABLE_I.items()},
                     "space_size": space.size,
                     "constants": {"banks": BANKS, "bank_bytes": n.bank_bytes,
                                   "freq_mhz": n.freq_mhz, "noc_vcs": n.noc_vcs}},
        "seconds": seconds,
        "evaluations": len(evaluator.cache),
        "eval_seconds": round(sum(e.seconds for e in evaluator.cache.values()), 3),
        "best": best,
        "quality_top3": curves,
    }
    results = stamp(results, "pimforge.dse.nicepim", 1, args.config)
    with FileSet(out, marker="results.json") as files:
        write_points(files.path("points.csv"), records, evaluator, nets, args.area_limit,
                     csv_comment(stamp({}, "pimforge.dse.nicepim.points", 1, args.config)))
        plot(files.path("convergence.png"), curves, args.init,
             f"PIM-Tuner on {', '.join(nets)} (seed {args.seed}, {args.area_limit:g} mm^2)")
        files.path("results.json").write_text(json.dumps(results, indent=2) + "\n")
    partial.unlink(missing_ok=True)
    print(f"{'method':8s} {'best EDP [J s]':>15s} {'top-3 quality':>14s}  best architecture")
    for m in methods:
        b = best[m][0] if best[m] else None
        desc = ("-" if b is None else ", ".join(f"{k}={v}" for k, v in
                                                b["parameters"].items()))
        print(f"{m:8s} {b['cost_edp_js'] if b else math.inf:15.5g} {curves[m][-1]:14.5g}  "
              f"{desc}")
    print(f"wrote {out / 'points.csv'}, {out / 'results.json'}, {out / 'convergence.png'}")
    return 0

