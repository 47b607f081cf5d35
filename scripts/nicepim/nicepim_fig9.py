"""NicePIM Fig. 9: PIM-Tuner's design quality per iteration against scikit-learn's
Gaussian process, random search and simulated annealing, over several seeds.

Each seed runs the four methods of :mod:`pimforge.sim.nicepim.tuner` (``dkl``:
NicePIM's deep-kernel-learning suggestion model; ``gp``: the same flow with
scikit-learn's ``GaussianProcessRegressor``; ``random``; ``sa``: simulated annealing)
from the same initial random legal architectures; every architecture is evaluated by
PIM-Mapper on ``--nets`` (Eq. 1 with alpha = beta = gamma = 1: the summed EDP). The
design quality after each evaluation is the mean ``1 / EDP`` of the best three
architectures so far (the paper's Fig. 9 definition). Prints, for a few points of the
run, the mean over seeds and its spread (standard deviation, min-max), and writes
``fig9.json`` (every curve, the best architectures, the settings) and ``fig9.png``
(mean and min-max band) into ``--out`` after every seed. Every evaluation is appended
to ``--out``/``fig9_points.json`` as it finishes (written atomically), so a run that is
stopped (Ctrl-C) keeps what it evaluated; a bar shows the evaluations of each method.

    python scripts/nicepim/nicepim_fig9.py [--nets vgg16,googlenet] [--seeds 3] [--iterations 24]
                                   [--init 8] [--candidates 16384] [--out build/fig9]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pimforge.gen.args import int_range, out_dir
from pimforge.gen.output import FileSet, check_output_dir
from pimforge.gen.output import write_json as write_json_atomic
from pimforge.sim.nicepim.networks import network_names
from pimforge.sim.nicepim.tuner import METHODS, TABLE_I, Evaluator, nicepim_space, run, top3_quality

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row, write_json  # noqa: E402

LABELS = {"dkl": "NicePIM (DKL)", "gp": "GaussianProcess", "random": "Random",
          "sa": "Simulated annealing"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default="vgg16,googlenet",
                   help="comma-separated workload networks (default vgg16,googlenet; the "
                        "paper uses all five)")
    p.add_argument("--seeds", type=int_range(1, 100), default=3)
    p.add_argument("--iterations", type=int_range(1, 10000), default=24)
    p.add_argument("--init", type=int_range(1, 1000), default=8)
    p.add_argument("--candidates", type=int_range(16, 1 << 20), default=16384)
    p.add_argument("--out", type=out_dir, default="build/fig9")
    args = p.parse_args(argv)
    nets = [n for n in args.nets.split(",") if n]
    bad = [n for n in nets if n not in network_names()]
    if bad or not nets:
        p.error(f"unknown --nets {bad[0] if bad else ''!r}; allowed: "
                f"{', '.join(network_names())}")
    out = check_output_dir(args.out, "--out")
    out.mkdir(parents=True, exist_ok=True)
    seed0 = int(os.environ.get("PIMFORGE_SEED", "0"))
    print(f"seeds {seed0} .. {seed0 + args.seeds - 1} (PIMFORGE_SEED={seed0})", flush=True)
    space = nicepim_space()
    ev = Evaluator(nets)
    curves = {m: [] for m in METHODS}
    best = {m: [] for m in METHODS}
    seconds = {m: 0.0 for m in METHODS}
    points: list[dict] = []
    t_all = time.perf_counter()
    try:
        for seed in range(seed0, seed0 + args.seeds):
            for m in METHODS:
                t = time.perf_counter()
                bar = tqdm(total=args.init + args.iterations, desc=f"seed {seed} {m}",
                           unit="eval", leave=False, disable=None)

                def progress(r, seed=seed, bar=bar):
                    e = ev.cache.get(tuple(int(v) for v in r.values))
                    points.append({"seed": seed, "method": r.method, "iteration": r.iteration,
                                   "parameters": dict(zip(TABLE_I, map(int, r.values),
                                                          strict=True)),
                                   "area_mm2": r.area_mm2,
                                   "cost_edp_js": r.cost if math.isfinite(r.cost) else None,
                                   "error": r.error,
                                   "eval_s": round(e.seconds, 3) if e else None})
                    write_json_atomic(out / "fig9_points.json",
                                      {"nets": nets, "points": points})
                    bar.update()

                try:
                    recs = run(m, space, ev, iterations=args.iterations, seed=seed,
                               init=args.init, candidates=args.candidates, progress=progress)
                finally:
                    bar.close()
                seconds[m] += time.perf_counter() - t
                curves[m].append(top3_quality([r.cost for r in recs]).tolist())
                r = min(recs, key=lambda r: r.cost)
                best[m].append({"seed": seed, "cost_edp_js": r.cost, "area_mm2": r.area_mm2,
                                "iteration": r.iteration,
                                "parameters": dict(zip(TABLE_I, map(int, r.values),
                                                       strict=True)),
                                "unmappable": sum(1 for x in recs if x.error)})
                print(f"seed {seed} {m:6s}: best EDP {r.cost:.4g} J s at evaluation "
                      f"{r.iteration + 1}, {time.perf_counter() - t:.0f} s "
                      f"({len(ev.cache)} architectures evaluated so far)", flush=True)
            report(args, nets, out, curves, best, seconds, ev, t_all, final=False)
    except KeyboardInterrupt:
        print(f"\nstopped: {len(points)} evaluations kept in {out / 'fig9_points.json'}",
              flush=True)
        if min(len(c) for c in curves.values()):
            report(args, nets, out, curves, best, seconds, ev, t_all, final=False)
        return 130
    report(args, nets, out, curves, best, seconds, ev, t_all, final=True)
    return 0


def report(args, nets, out, curves, best, seconds, ev, t_all, final: bool) -> None:
    """Print the table and write fig9.json and fig9.png for the seeds done so far
    (after every seed, so that an interrupted run keeps what it finished)."""
    done = min(len(c) for c in curves.values())
    curves = {m: c[:done] for m, c in curves.items()}
    n = args.init + args.iterations
    marks = sorted({args.init, args.init + args.iterations // 4, args.init + args.iterations // 2,
                    args.init + 3 * args.iterations // 4, n})
    arr = {m: np.array(curves[m]) for m in METHODS}
    mean = {m: arr[m].mean(0) for m in METHODS}
    std = {m: arr[m].std(0) for m in METHODS}
    print(f"\nFig. 9: design quality (mean 1/EDP of the best three, 1/(J s)) over {done} "
          f"seeds, mean +- standard deviation [min, max]; nets {', '.join(nets)}")
    print("\n".join(md_header(["evaluations", *(LABELS[m] for m in METHODS), "DKL / Random"],
                               ["---:"] * (len(METHODS) + 2))))
    for k in marks:
        print(md_row([k, *(f"{mean[m][k - 1]:.4g} +- {std[m][k - 1]:.2g} "
                           f"[{arr[m][:, k - 1].min():.3g}, {arr[m][:, k - 1].max():.3g}]"
                           for m in METHODS),
                      f"{mean['dkl'][k - 1] / mean['random'][k - 1]:.3f}"]))
    wins = {m: int(sum(c[-1] >= max(curves[o][s][-1] for o in METHODS)
                       for s, c in enumerate(curves[m]))) for m in METHODS}
    print("seeds where the method ends best: " + ", ".join(f"{m} {w}" for m, w in wins.items()))
    # One set: an interrupted write leaves the previous JSON and plot, never a mix.
    with FileSet(out, marker="fig9.json") as files:
        write_json(files.path("fig9.json"), {
            "nets": nets, "seeds": done, "iterations": args.iterations, "init": args.init,
            "candidates": args.candidates, "quality_top3": curves,
            "mean": {m: v.tolist() for m, v in mean.items()},
            "std": {m: v.tolist() for m, v in std.items()}, "best": best,
            "seconds": {m: round(s, 1) for m, s in seconds.items()},
            "evaluations": len(ev.cache),
            "eval_seconds": round(sum(e.seconds for e in ev.cache.values()), 1),
            "wall_s": round(time.perf_counter() - t_all, 1), "ends_best": wins,
            "complete": final})
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
        x = np.arange(1, n + 1)
        for m in METHODS:
            c = np.array(curves[m])
            ax.plot(x, c.mean(0), label=LABELS[m])
            ax.fill_between(x, c.min(0), c.max(0), alpha=0.15)
        ax.axvline(args.init + 0.5, color="0.7", lw=0.8, ls="--")
        ax.set_xlabel("evaluated architectures")
        ax.set_ylabel("design quality: mean 1/EDP of the best three [1/(J s)]")
        ax.set_title(f"NicePIM Fig. 9: {', '.join(nets)}, {done} seeds (mean, min-max)",
                     fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(files.path("fig9.png"))
        plt.close(fig)
    print(f"wrote {out / 'fig9.json'} and {out / 'fig9.png'}" + ("" if final else
          " (partial)"), flush=True)


if __name__ == "__main__":
    sys.exit(main())
