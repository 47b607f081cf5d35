"""NicePIM Fig. 9: PIM-Tuner's design quality per iteration against a plain GP and random
search, over several seeds.

Each seed runs the three methods of :mod:`pimforge.sim.nicepim.tuner` (``dkl``:
NicePIM's deep-kernel-learning suggestion model; ``gp``; ``random``) from the
same initial random legal architectures; every architecture is evaluated by
PIM-Mapper on ``--nets`` (Eq. 1 with alpha = beta = gamma = 1: the summed EDP).
The design quality after each evaluation is the mean ``1 / EDP`` of the best
three architectures so far (the paper's Fig. 9 definition). Prints the mean over
seeds at a few points of the run and writes ``fig9.json`` (every curve, the best
architectures, the settings) and ``fig9.png`` into ``--out``.

    python scripts/nicepim/nicepim_fig9.py [--nets vgg16,googlenet] [--seeds 3] [--iterations 24]
                                   [--init 8] [--candidates 16384] [--out build/fig9]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from pimforge.gen.args import int_range, out_dir
from pimforge.gen.output import FileSet, check_output_dir
from pimforge.sim.nicepim.networks import network_names
from pimforge.sim.nicepim.tuner import METHODS, TABLE_I, Evaluator, nicepim_space, run, top3_quality

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row, write_json  # noqa: E402

LABELS = {"dkl": "NicePIM (DKL)", "gp": "GaussianProcess", "random": "Random"}


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
    space = nicepim_space()
    ev = Evaluator(nets)
    curves = {m: [] for m in METHODS}
    best = {m: [] for m in METHODS}
    seconds = {m: 0.0 for m in METHODS}
    t_all = time.perf_counter()
    for seed in range(args.seeds):
        if seed:
            report(args, nets, out, curves, best, seconds, ev, t_all, final=False)
        for m in METHODS:
            t = time.perf_counter()
            recs = run(m, space, ev, iterations=args.iterations, seed=seed, init=args.init,
                       candidates=args.candidates)
            seconds[m] += time.perf_counter() - t
            curves[m].append(top3_quality([r.cost for r in recs]).tolist())
            r = min(recs, key=lambda r: r.cost)
            best[m].append({"seed": seed, "cost_edp_js": r.cost, "area_mm2": r.area_mm2,
                            "iteration": r.iteration,
                            "parameters": dict(zip(TABLE_I, map(int, r.values), strict=True)),
                            "unmappable": sum(1 for x in recs if x.error)})
            print(f"seed {seed} {m:6s}: best EDP {r.cost:.4g} J s at evaluation "
                  f"{r.iteration + 1}, {time.perf_counter() - t:.0f} s "
                  f"({len(ev.cache)} architectures evaluated so far)", flush=True)
    report(args, nets, out, curves, best, seconds, ev, t_all, final=True)
    return 0


def report(args, nets, out, curves, best, seconds, ev, t_all, final: bool) -> None:
    """Print the table and write fig9.json and fig9.png for the seeds done so far
    (after every seed, so that an interrupted run keeps what it finished)."""
    done = len(curves["dkl"])
    n = args.init + args.iterations
    marks = sorted({args.init, args.init + args.iterations // 4, args.init + args.iterations // 2,
                    args.init + 3 * args.iterations // 4, n})
    mean = {m: np.mean(curves[m], 0) for m in METHODS}
    print(f"\nFig. 9: mean over {done} seeds of the design quality (mean 1/EDP of the "
          f"best three, 1/(J s)); nets {', '.join(nets)}")
    print("\n".join(md_header(["evaluations", *(LABELS[m] for m in METHODS), "DKL / Random"],
                               ["---:"] * (len(METHODS) + 2))))
    for k in marks:
        print(md_row([k, *(f"{mean[m][k - 1]:.4g}" for m in METHODS),
                      f"{mean['dkl'][k - 1] / mean['random'][k - 1]:.3f}"]))
    wins = {m: int(sum(c[-1] >= max(curves[o][s][-1] for o in METHODS)
                       for s, c in enumerate(curves[m]))) for m in METHODS}
    print("seeds where the method ends best: " + ", ".join(f"{m} {w}" for m, w in wins.items()))
    # One set: an interrupted write leaves the previous JSON and plot, never a mix.
    with FileSet(out, marker="fig9.json") as files:
        write_json(files.path("fig9.json"), {
            "nets": nets, "seeds": done, "iterations": args.iterations, "init": args.init,
            "candidates": args.candidates, "quality_top3": curves,
            "mean": {m: v.tolist() for m, v in mean.items()}, "best": best,
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
