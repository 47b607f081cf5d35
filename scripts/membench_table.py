"""Bandwidth table of the README's "Memory system" section (membench on the RTL).

Usage: python scripts/membench_table.py [OUT_DIR] [--requests N]
(then the RMAS ablation on the "mixed" pattern, PIM-CapsNet mapping)
Equivalent to running, for each mapping and pattern,
``pimforge membench default --pattern P --mapping M --requests N --json OUT/P-M.json``.
"""

import argparse
import json
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.sim.membench import membench

ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?", type=Path, default=Path("out/membench"))
ap.add_argument("--requests", type=int, default=8192)
ap.add_argument("--config", default="default")
a = ap.parse_args()
a.out.mkdir(parents=True, exist_ok=True)
print("| pattern | mapping | cycles | GB/s | fraction of cube peak | fraction of used vaults "
      "| row hit rate | bank-conflict stalls |")
print("|---|---|---|---|---|---|---|---|")
for mp in ("default", "capsnet"):
    for pat in ("seq", "random", "pe-burst"):
        r = membench(load_config(a.config), pattern=pat, mapping=mp, requests=a.requests)
        (a.out / f"{pat}-{mp}.json").write_text(json.dumps(r, indent=2) + "\n")
        print(f"| {pat} | {mp} | {r['cycles']} | {r['bandwidth_bytes_per_s'] / 1e9:.2f} | "
              f"{100 * r['bandwidth_fraction']:.1f}% | "
              f"{100 * r['bandwidth_fraction_of_used_vaults']:.1f}% ({r['vaults_used']}) | "
              f"{100 * r['row_hit_rate']:.1f}% | {r['bank_conflict_stalls']} |", flush=True)

print()
print("| policy | gamma_v | gamma_h | cycles | host finish | PE finish | bandwidth fraction |")
print("|---|---|---|---|---|---|---|")
for pol, gv, gh in (("rmas", 1, 1), ("rmas", 8, 1), ("pim-first", 1, 1), ("host-first", 1, 1),
                    ("arrival", 1, 1)):
    r = membench(load_config(a.config), pattern="mixed", mapping="capsnet",
                 requests=a.requests, policy=pol, gamma_v=gv, gamma_h=gh)
    (a.out / f"mixed-{pol}-{gv}-{gh}.json").write_text(json.dumps(r, indent=2) + "\n")
    print(f"| {pol} | {gv} | {gh} | {r['cycles']} | {r['host_finish_cycles']} | "
          f"{r['pe_finish_cycles']} | {100 * r['bandwidth_fraction']:.1f}% |", flush=True)
