"""Cycles of the tiny routing workload on the whole cube (hmc_capsnet) vs an ideal memory.

Usage: python scripts/capsnet/hmc_capsnet_cycles.py [--pes N ...] [--banks B ...] [--seed S]

Runs the end-to-end cocotb bench of ``verif/tb/capsnet/cube.py`` (default preset,
2 vaults, capsnet mapping) for each PE count and bank count and prints the
cycles of the run beside the ISA timing model's count with an always-ready
memory (``sim/capsnet/timing.py`` ``program_cycles``). Each point is one
Verilator build (minutes for 16 PEs).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from pimforge.gen.config import bench_config
from pimforge.verif.regression import Bench
from pimforge.verif.runner import run_testbench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--pes", type=int, nargs="+", default=[4, 16])
ap.add_argument("--banks", type=int, nargs="+", default=[16])
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
print("\n".join(md_header(["PEs/vault", "banks/vault", "cycles (DRAM path)",
                           "cycles (ideal memory)", "ratio", "PE-port reads", "PE-port writes"])))
for pes in a.pes:
    for banks in a.banks:
        b = Bench("hmc_capsnet_cycles", "hmc_capsnet", "pimforge.verif.tb.capsnet.cube",
                  overrides={"capsnet.pes_per_vault": pes, "hmc.mapping": "capsnet",
                             "hmc.banks_per_vault": banks,
                             "hmc.capacity_per_vault": banks * 16 * 256})
        with tempfile.TemporaryDirectory() as td:
            out = Path(td) / "r.json"
            res = run_testbench(b.name, b.block, b.module, config=bench_config(b),
                                seed=a.seed, extra_env={"PIMFORGE_TOP_JSON": str(out)})
            if not res.ok:
                raise SystemExit(f"bench failed: {res.results_xml}")
            r = json.loads(out.read_text())
        pp = r["pe_port"]
        print(md_row([pes, banks, r["cycles"], r["ideal_cycles"],
                      f"{r['cycles'] / r['ideal_cycles']:.1f}", pp.get("reads", 0),
                      pp.get("writes", 0) + pp.get("remote_writes", 0)]), flush=True)
