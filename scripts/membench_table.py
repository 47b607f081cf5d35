"""Bandwidth table of rtl/mem/README.md (membench on the RTL).

Usage: python scripts/membench_table.py [OUT_DIR] [--requests N]
(then the RMAS ablation on the "mixed" pattern, PIM-CapsNet mapping)
Equivalent to running, for each mapping and pattern,
``pimforge membench default --pattern P --mapping M --requests N --json OUT/P-M.json``.
"""

import argparse
import sys
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.sim.membench import membench

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import md_header, md_row, write_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("out", nargs="?", type=Path, default=Path("out/membench"))
ap.add_argument("--requests", type=int, default=8192)
ap.add_argument("--config", default="default")
a = ap.parse_args()
a.out.mkdir(parents=True, exist_ok=True)
print("\n".join(md_header(["pattern", "mapping", "cycles", "GB/s", "fraction of cube peak",
                           "fraction of used vaults", "row hit rate", "bank-conflict stalls"])))
for mp in ("default", "capsnet"):
    for pat in ("seq", "random", "pe-burst"):
        r = membench(load_config(a.config), pattern=pat, mapping=mp, requests=a.requests)
        write_json(a.out / f"{pat}-{mp}.json", r)
        print(md_row([pat, mp, r["cycles"], f"{r['bandwidth_bytes_per_s'] / 1e9:.2f}",
                      f"{100 * r['bandwidth_fraction']:.1f}%",
                      f"{100 * r['bandwidth_fraction_of_used_vaults']:.1f}% ({r['vaults_used']})",
                      f"{100 * r['row_hit_rate']:.1f}%", r["bank_conflict_stalls"]]), flush=True)

print()
print("\n".join(md_header(["policy", "gamma_v", "gamma_h", "cycles", "host finish", "PE finish",
                           "bandwidth fraction"])))
for pol, gv, gh in (("rmas", 1, 1), ("rmas", 8, 1), ("pim-first", 1, 1), ("host-first", 1, 1),
                    ("arrival", 1, 1)):
    r = membench(load_config(a.config), pattern="mixed", mapping="capsnet",
                 requests=a.requests, policy=pol, gamma_v=gv, gamma_h=gh)
    write_json(a.out / f"mixed-{pol}-{gv}-{gh}.json", r)
    print(md_row([pol, gv, gh, r["cycles"], r["host_finish_cycles"], r["pe_finish_cycles"],
                  f"{100 * r['bandwidth_fraction']:.1f}%"]), flush=True)
