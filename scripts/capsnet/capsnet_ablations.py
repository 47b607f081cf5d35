"""Sec. 6.1 routing ablations of the 12 networks on the vault RTL (the README's table).

Usage: python scripts/capsnet/capsnet_ablations.py [--config hmc_gen3]
       [--set SECTION.FIELD=VALUE ...] [--scale 16] [--net NAME ...] [--threads N] [--json OUT]

Runs PIM-CapsNet, PIM-Inter and PIM-Intra (see
:func:`pimforge.sim.capsnet.workload.compile_variant`) of every network on the
RTL with the banked DRAM model and prints one Markdown row per network: the
three cycle counts, PIM-CapsNet's speed-up over each variant, and the averages
next to the paper's (Fig. 16a: 2.28x over PIM-Inter, 1.77x over PIM-Intra);
then Fig. 16(a)'s breakdown: per variant, its time normalized to PIM-CapsNet's
and the shares of compute, inter-vault communication, vault request stalls
(and TSV bandwidth stalls) in it, averaged over the networks
(:func:`pimforge.sim.capsnet.overhead.time_breakdown`), next to the shares the
paper gives (PIM-Intra: inter-vault communication 45.24 %; PIM-Inter: vault
request stalls 57.91 %), and the speed-up PIM-CapsNet would have over the
variant if that part took the paper's share of the variant's time and the rest
were as measured: ``(cycles - part) / (1 - share)`` over PIM-CapsNet's cycles.
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
from pimforge.sim.capsnet.overhead import BREAKDOWN
from pimforge.sim.capsnet.workload import CapsNetRunOptions, run_capsnet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row, write_json  # noqa: E402

VARIANTS = ("pim-capsnet", "pim-inter", "pim-intra")
PAPER = {"pim-inter": 2.28, "pim-intra": 1.77}
#: The shares of a variant's time that Sec. 6.2.2 gives for Fig. 16(a).
PAPER_SHARES = {"pim-intra": {"inter_vault_communication": 0.4524},
                "pim-inter": {"vault_request_stalls": 0.5791}}
NAMES = {"pim-capsnet": "PIM-CapsNet", "pim-inter": "PIM-Inter", "pim-intra": "PIM-Intra"}


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
        cyc, dims, parts = {}, {}, {}
        for var in VARIANTS:
            r = run_capsnet(name, cfg, CapsNetRunOptions(scale=a.scale, ablation=var,
                                                         threads=a.threads))
            if not r.rtl_matches_model:
                print(f"{name} {var}: the RTL does not match the model", file=sys.stderr)
                return 1
            cyc[var], dims[var] = r.cycles, r.dimension
            parts[var] = r.time_breakdown["parts"]
        row = {"net": name, "dim": dims, "cycles": cyc, "breakdown": parts,
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
    fig = fig16a(rows)
    print()
    print("\n".join(md_header(["variant", "time / PIM-CapsNet's", *BREAKDOWN, "paper",
                                "speed-up at the paper's share"])))
    for var in VARIANTS:
        f = fig[var]
        paper = ", ".join(f"{k.replace('_', ' ')} {100 * x:.2f} %"
                          for k, x in PAPER_SHARES.get(var, {}).items())
        what_if = ", ".join(f"{x:.2f}x" for x in f.get("at_paper_share", {}).values())
        print(md_row([NAMES[var], f"{f['normalized_time']:.2f}",
                      *(f"{100 * f['share'][k]:.1f} %" for k in BREAKDOWN), paper or "-",
                      what_if or "-"]))
    if a.json:
        write_json(a.json, {"config": a.config, "overrides": a.overrides, "scale": a.scale,
                            "rows": rows, "mean": mean, "paper": PAPER, "fig16a": fig,
                            "paper_shares": PAPER_SHARES})
    return 0


def fig16a(rows: list[dict]) -> dict:
    """Per variant: its mean time over PIM-CapsNet's, and the mean share of each
    :data:`BREAKDOWN` part in its time, over *rows*."""
    out = {}
    for var in VARIANTS:
        share = {k: sum(r["breakdown"][var][k] / r["cycles"][var] for r in rows) / len(rows)
                 for k in BREAKDOWN}
        norm = sum(r["cycles"][var] / r["cycles"]["pim-capsnet"] for r in rows) / len(rows)
        out[var] = {"normalized_time": norm, "share": share}
        at = {}
        for k, paper in PAPER_SHARES.get(var, {}).items():
            at[k] = sum((r["cycles"][var] - r["breakdown"][var][k]) / (1 - paper)
                        / r["cycles"]["pim-capsnet"] for r in rows) / len(rows)
        if at:
            out[var]["at_paper_share"] = at
    return out


if __name__ == "__main__":
    sys.exit(main())
