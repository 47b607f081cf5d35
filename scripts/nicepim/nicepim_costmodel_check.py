"""NicePIM: the mapper's per-node cost model against the node RTL on sampled layer tiles.

Runs the hand-picked cases of pimforge.sim.nicepim.costmodel_check (1x1/3x3/5x5/7x7
kernels, strides 1 and 2, padded borders and interior parts, grouped layers, matmuls,
every input and output layout, tilings limited by each buffer) and ``--random N`` random
ones, four at a time on the nodes of nicepim_small's Verilated array, and prints each
node's counted cycles, DRAM words and row activations beside the model's
(pimforge.sim.nicepim.node_model.part_cost). Exits 1 when an output differs from numpy
or a cycle count (a tile's or a sharing ring's) is off by more than 5%.

    python scripts/nicepim/nicepim_costmodel_check.py [--config C] [--set nicepim.X=V ...]
                                             [--random 12] [--seed 1] [--json out.json]

With ``--set`` (another PE array or other buffers: another Verilator build) the
hand-picked cases that do not fit the buffers are left out.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from pathlib import Path

from pimforge.gen.args import int_range, out_file, seed
from pimforge.gen.config import load_config, parse_overrides
from pimforge.sim.nicepim.costmodel_check import (
    CASES,
    RINGS,
    UNCHECKED_RINGS,
    check_cases,
    fits,
    random_cases,
    sharing_ring,
)
from pimforge.sim.nicepim.rtl_run import build_array_driver

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row, write_json  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="nicepim_small")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override, e.g. nicepim.pe_rows=16")
    p.add_argument("--random", type=int_range(0, 400), default=12, metavar="N")
    p.add_argument("--seed", type=seed, default=1)
    p.add_argument("--json", type=out_file)
    args = p.parse_args()
    cfg = load_config(args.config, parse_overrides(args.set))
    exe = build_array_driver(cfg)
    cases = [c for c in CASES if fits(cfg, c)] + random_cases(cfg, random.Random(args.seed),
                                                              args.random)
    t0 = time.time()
    rows = check_cases(cfg, cases, seed=args.seed, exe=exe)
    print("\n".join(md_header(["case", "part", "layouts (in->out)", "tasks", "cycles RTL",
                                "cycles model", "error", "DRAM words RTL / model",
                                "ACTs RTL / model", "bit-exact"],
                               ["---"] * 3 + ["---:"] * 6 + ["---"])))
    for r in rows:
        print(md_row([r.name, r.shape, r.layouts, r.tasks, f"{r.cycles_rtl:,}",
                      f"{r.cycles_model:,.0f}", f"{100 * r.error:+.1f}%",
                      f"{r.words_rtl:,} / {r.words_model:,.0f}",
                      f"{r.acts_rtl} / {r.acts_model:.0f}",
                      "yes" if r.matches_reference else "NO"]))
    worst = max(abs(r.error) for r in rows)
    where = cfg.name + "".join(f" {o}" for o in args.set)
    print(f"\n{len(rows)} cases on {where} (seed {args.seed}) in {time.time() - t0:.1f} s; "
          f"largest cycle error {100 * worst:.2f}%, mean "
          f"{100 * sum(r.error for r in rows) / len(rows):+.2f}%")
    ring = []
    if cfg.nicepim.nodes == 4:
        print("\nData sharing (SEND/WAIT rings; model: NodeTiming.share_step):")
        print("\n".join(md_header(["ring", "words per node", "chunk spacing", "cycles RTL",
                                    "cycles model", "error", "delivered"],
                                   ["---"] + ["---:"] * 5 + ["---"])))
        for checked, rings in ((True, RINGS), (False, UNCHECKED_RINGS)):
            for nodes, words, spacing in rings:
                s = sharing_ring(cfg, words, ring=nodes, spacing=spacing, seed=args.seed,
                                 exe=exe)
                ring.append(s | {"checked": checked})
                print(md_row([" -> ".join(map(str, nodes)), words, s["spacing"],
                              f"{s['cycles_rtl']:,}", f"{s['cycles_model']:,.0f}",
                              f"{100 * s['error']:+.1f}%{'' if checked else ' (not checked)'}",
                              "yes" if s["delivered"] else "NO"]))
    if args.json:
        write_json(args.json, {"config": cfg.name, "set": args.set, "seed": args.seed,
                               "rows": [dataclasses.asdict(r) | {"error": r.error}
                                        for r in rows], "sharing_ring": ring})
    ok = all((abs(s["error"]) <= 0.05 or not s["checked"]) and s["delivered"] for s in ring)
    return 0 if worst <= 0.05 and ok and all(r.matches_reference for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
