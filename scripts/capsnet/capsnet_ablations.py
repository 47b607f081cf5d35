"""Sec. 6.1 routing ablations of the 12 networks on the vault RTL (the README's table).

Usage: python scripts/capsnet/capsnet_ablations.py [--config hmc_gen3]
       [--set SECTION.FIELD=VALUE ...] [--scale 16] [--net NAME ...] [--threads N] [--json OUT]

Runs PIM-CapsNet, PIM-Inter and PIM-Intra (see
:func:`pimforge.sim.capsnet.workload.compile_variant`) of every network on the
RTL with the banked DRAM model and prints one Markdown row per network: the
three cycle counts, PIM-CapsNet's speed-up over each variant, and the averages
next to the paper's (Fig. 16a: 2.28x over PIM-Inter, 1.77x over PIM-Intra).
Every run must have ``rtl_matches_model`` true.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pimforge.gen.args import int_range, out_file
from pimforge.gen.config import load_config, parse_overrides
from pimforge.sim.capsnet.networks import network_names
from pimforge.sim.capsnet.workload import CapsNetRunOptions, run_capsnet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row, write_json  # noqa: E402

VARIANTS = ("pim-capsnet", "pim-inter", "pim-intra")
PAPER = {"pim-inter": 2.28, "pim-intra": 1.77}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="hmc_gen3")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="SECTION.FIELD=VALUE", help="change one config value (repeatable)")
    ap.add_argument("--scale", type=int_range(1, 1 << 20), default=16)
    ap.add_argument("--net", action="append", choices=network_names(),
                    help="only these networks (default: all 12)")
    ap.add_argument("--threads", type=int_range(1, 1024), default=None)
    ap.add_argument("--json", type=out_file, help="also write the rows here")
    a = ap.parse_args(argv)
    cfg = load_config(a.config, parse_overrides(a.overrides))
    rows = []
    # dim: PIM-CapsNet's (and PIM-Inter's) Sec. 5.1 choice; PIM-Intra always splits L.
    print("\n".join(md_header(["net", "dim", "PIM-CapsNet cycles", "PIM-Inter cycles",
                                "PIM-Intra cycles", "vs PIM-Inter", "vs PIM-Intra"])))
    for name in a.net or network_names():
        t0 = time.monotonic()
        cyc, dims = {}, {}
        for var in VARIANTS:
            r = run_capsnet(name, cfg, CapsNetRunOptions(scale=a.scale, ablation=var,
                                                         threads=a.threads))
            if not r.rtl_matches_model:
                print(f"{name} {var}: the RTL does not match the model", file=sys.stderr)
                return 1
            cyc[var], dims[var] = r.cycles, r.dimension
        row = {"net": name, "dim": dims, "cycles": cyc,
               "speedup_vs": {v: cyc[v] / cyc["pim-capsnet"] for v in PAPER},
               "wall_s": time.monotonic() - t0}
        rows.append(row)
        print(md_row([name, dims["pim-capsnet"], f"{cyc['pim-capsnet']:,}",
                      f"{cyc['pim-inter']:,}", f"{cyc['pim-intra']:,}",
                      f"{row['speedup_vs']['pim-inter']:.2f}x",
                      f"{row['speedup_vs']['pim-intra']:.2f}x"]), flush=True)
    mean = {v: sum(r["speedup_vs"][v] for r in rows) / len(rows) for v in PAPER}
    print(f"| mean of {len(rows)} | | | | | {mean['pim-inter']:.2f}x (paper 2.28x) | "
          f"{mean['pim-intra']:.2f}x (paper 1.77x) |")
    if a.json:
        write_json(a.json, {"config": a.config, "overrides": a.overrides, "scale": a.scale,
                            "rows": rows, "mean": mean, "paper": PAPER})
    return 0


if __name__ == "__main__":
    sys.exit(main())
