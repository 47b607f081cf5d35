"""NicePIM: the Data-Scheduler's schedules run through the nodes' data-sharing units.

For each sharing layout (``--cases SIZE/STRIDE/WORDS,...``: sets of SIZE nodes STRIDE
apart over the whole array, each node holding WORDS DRAM words) and each method (ILP,
TSP, SHP) the schedule is lowered to ``SEND``/``WAIT`` tasks and run on the array RTL
(pimforge.sim.nicepim.costmodel_check.schedule_on_array): every node must end with its
set's data. Prints the RTL's cycles beside the mapper's sharing cost for that method
(pimforge.sim.nicepim.mapcost.NodeModel.share_cycles), the busiest link's cycle edges,
and TSP's and SHP's cycles over the ILP's, i.e. Fig. 12's choice measured on the
units rather than on the bare mesh. Exits 1 when a node misses data.

    python scripts/nicepim/nicepim_sharing_rtl.py [--config nicepim_small]
        [--set nicepim.na_rows=4 --set nicepim.na_cols=4] [--cases 4/2/16,4/2/60,...]
        [--seed 1] [--json out.json]

The default is a 4x4 array of nicepim_small's nodes (a Verilator build of about a
minute, cached).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pimforge.gen.args import out_file, seed
from pimforge.gen.config import load_config, parse_overrides
from pimforge.gen.errors import PimforgeError
from pimforge.sim.nicepim.costmodel_check import schedule_on_array
from pimforge.sim.nicepim.rtl_run import build_array_driver
from pimforge.sim.nicepim.sharing import METHODS, Mesh, schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row, write_json  # noqa: E402

DEFAULT_CASES = "4/2/16,4/2/60,4/2/200,4/1/60,2/2/60,8/1/24,16/1/12"


def cases(text: str) -> list[tuple[int, int, int]]:
    out = []
    for item in text.split(","):
        try:
            size, stride, words = (int(v) for v in item.split("/"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not SIZE/STRIDE/WORDS (e.g. 4/2/60)") from None
        if size < 2 or stride < 1 or words < 1:
            raise argparse.ArgumentTypeError(
                f"{item!r}: SIZE must be at least 2, STRIDE and WORDS at least 1")
        out.append((size, stride, words))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="nicepim_small")
    p.add_argument("--set", action="append", default=None, metavar="KEY=VALUE",
                   help="config override (default: nicepim.na_rows=4 nicepim.na_cols=4)")
    p.add_argument("--cases", type=cases, default=cases(DEFAULT_CASES),
                   help=f"SIZE/STRIDE/WORDS,... (default {DEFAULT_CASES})")
    p.add_argument("--seed", type=seed, default=1)
    p.add_argument("--json", type=out_file)
    args = p.parse_args(argv)
    sets = args.set if args.set is not None else ["nicepim.na_rows=4", "nicepim.na_cols=4"]
    cfg = load_config(args.config, parse_overrides(sets))
    exe = build_array_driver(cfg)
    print("\n".join(md_header(["set / stride / words", "method", "busiest link (edges)",
                                "cycles RTL", "cycles model", "error", "over ILP (RTL)",
                                "delivered"], ["---", "---"] + ["---:"] * 5 + ["---"])))
    rows, ok = [], True
    mesh = Mesh(cfg.nicepim.na_rows, cfg.nicepim.na_cols)
    t0 = time.time()
    for size, stride, words in args.cases:
        got = {}
        for method in METHODS:
            try:
                sched = schedule(method, mesh, size, stride, 16, cfg.nicepim.flit_bits,
                                 time_limit=None, seed=0)
                got[method] = schedule_on_array(cfg, sched, words, seed=args.seed, exe=exe)
            except PimforgeError as e:
                print(md_row([f"{size} / {stride} / {words}", method, "-", "-", "-", "-",
                              "-", str(e)]))
        for method, r in got.items():
            ok &= r["delivered"]
            ilp = got.get("ilp")
            rows.append(r)
            print(md_row([f"{size} / {stride} / {words}", method, r["max_edge_load"],
                          f"{r['cycles_rtl']:,}", f"{r['cycles_model']:,}",
                          f"{100 * r['error']:+.1f}%",
                          f"{r['cycles_rtl'] / ilp['cycles_rtl']:.2f}x" if ilp else "-",
                          "yes" if r["delivered"] else "NO"]))
    where = cfg.name + "".join(f" {o}" for o in sets)
    print(f"\n{len(rows)} schedules on {where} (seed {args.seed}) in {time.time() - t0:.0f} s")
    if args.json:
        write_json(args.json, {"config": cfg.name, "set": sets, "seed": args.seed,
                               "rows": rows})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
