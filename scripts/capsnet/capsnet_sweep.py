"""All 12 Table-1 networks on the vault RTL at reduced scale (one line each).

Usage: python scripts/capsnet/capsnet_sweep.py [--config NAME] [--min-scale N] [--dram banked|ideal]
       [--json OUT]

Each network is shrunk (B and N_L divided by the smallest power of two that fits
its data in the config's vault capacity), then run with ``run_capsnet``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.gen.errors import CapacityError
from pimforge.sim.capsnet.networks import network, network_names
from pimforge.sim.capsnet.workload import CapsNetRunOptions, choose_dimension, run_capsnet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, write_json  # noqa: E402


def fitting_scale(name: str, cfg) -> int:
    s = 1
    while True:
        net = network(name).scaled(s) if s > 1 else network(name)
        try:
            choose_dimension(net, cfg)     # compiles every dimension that fits
            return s
        except CapacityError:
            s *= 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=None)
    ap.add_argument("--min-scale", type=int, default=16)
    ap.add_argument("--dram", choices=["banked", "ideal"], default="banked")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    check_outputs(ap, json=a.json)
    cfg = load_config(a.config)
    rows = []
    t0 = time.monotonic()
    for name in network_names():
        s = max(a.min_scale, fitting_scale(name, cfg))
        r = run_capsnet(name, a.config, CapsNetRunOptions(scale=s, dram=a.dram))
        rows.append(r)
        print(f"{name:9s} scale {s:4d} dim {r.dimension} cycles {r.cycles:9d} "
              f"(ideal {r.timing_model_cycles:8d}, VRS {r.vault_request_stalls}) "
              f"match {r.rtl_matches_model} err {r.max_abs_err_vs_float64:.2e} "
              f"wall {r.wall_s.total:.1f}s", flush=True)
    print(f"total {time.monotonic() - t0:.1f}s; all match: "
          f"{all(r.rtl_matches_model for r in rows)}")
    if a.json:
        write_json(a.json, [r.to_json() for r in rows])


if __name__ == "__main__":
    main()
