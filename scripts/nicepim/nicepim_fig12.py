"""NicePIM Fig. 12: the Data-Scheduler's ILP against the TSP and SHP baselines.

Sharing sets of 16 PIM-nodes, 8 KiB shared per node, 64-bit flits (Sec. VIII-E):
one set on 4x4, four sets at stride 2 on 8x8, sixteen sets at stride 4 on 16x16.
For each mesh and method: the flits on the busiest link, the modelled latency
and the solve time; with --rtl the schedule also runs on the mesh NoC RTL
(Verilator, packets of 16 flits, the default config's PIM-node routers: 1 VC of 4 flits)
and the measured cycles are printed beside the model's. Writes the rows as JSON.

    python scripts/nicepim/nicepim_fig12.py [--meshes 4x4,8x8,16x16] [--rtl] [--time-limit 60]
                                    [--json build/fig12.json]
"""

from __future__ import annotations

import argparse
import time

from pimforge.gen.config import load_config
from pimforge.gen.output import write_json
from pimforge.sim.nicepim import sharing as sh
from pimforge.sim.nicepim.schedule_cli import router_vcs, rtl_config

STRIDE = {"4x4": 1, "8x8": 2, "16x16": 4}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--meshes", default="4x4,8x8,16x16")
    p.add_argument("--methods", default="ilp,tsp,shp")
    p.add_argument("--rtl", action="store_true")
    p.add_argument("--rtl-max-nodes", type=int, default=256,
                   help="run meshes of at most this many nodes on the RTL")
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--json", default="build/nicepim_fig12.json")
    args = p.parse_args()
    rows = []
    print(f"{'mesh':6s} {'method':6s} {'sets':>4s} {'max link flits':>14s} "
          f"{'model cycles':>12s} {'RTL cycles':>10s} {'RTL/model':>9s} {'solve s':>8s} "
          "optimal/gap")
    for mesh_s in args.meshes.split(","):
        r, c = (int(v) for v in mesh_s.split("x"))
        mesh = sh.Mesh(r, c)
        for meth in args.methods.split(","):
            s = sh.schedule(meth, mesh, 16, STRIDE.get(mesh_s, 1), 8192, 64,
                            time_limit=args.time_limit,
                            vcs=router_vcs(load_config("default")))
            row = {"mesh": mesh_s, "method": meth, "sets": len(s.sets),
                   "max_link_load": s.max_link_load, "latency_cycles": s.latency_cycles,
                   "solve_s": s.solve_s, "optimal": s.optimal, "gap": s.gap,
                   "rtl_cycles": None, "rtl_s": None}
            if args.rtl and r * c <= args.rtl_max_nodes:
                t0 = time.perf_counter()
                res = sh.run_rtl(s, rtl_config(load_config("default"), r, c, 64))
                row["rtl_cycles"] = res["rtl_cycles"]
                row["rtl_max_link_flits"] = res["rtl_max_link_flits"]
                row["rtl_s"] = time.perf_counter() - t0
            rows.append(row)
            rtl = row["rtl_cycles"]
            og = "" if meth != "ilp" else ("optimal" if s.optimal else f"gap {s.gap:.0%}")
            print(f"{mesh_s:6s} {meth:6s} {len(s.sets):4d} {s.max_link_load:14d} "
                  f"{s.latency_cycles:12d} {rtl if rtl else '-':>10} "
                  f"{(rtl / s.latency_cycles) if rtl else float('nan'):9.3f} "
                  f"{s.solve_s:8.2f} {og}", flush=True)
            write_json(args.json, rows)


if __name__ == "__main__":
    main()
