"""Speed of PIM-Mapper: one architecture's five networks mapped, wall and CPU seconds.

    python scripts/nicepim/nicepim_mapper_speed.py [--config nicepim_4x4] [--repeat 3]
                                                   [--nets vgg16,...] [--json OUT]

Maps every network of :mod:`pimforge.sim.nicepim.networks` (batch 1) with
:func:`~pimforge.sim.nicepim.mapper.map_network` on ``--config``, each repeat in a fresh
process state for the mapper (a new node model; the task lists' costs, the sharing
steps played through the DRAM port and the Data-Scheduler's schedules cleared), and
prints per network the wall and CPU seconds of the fastest repeat, the mapped latency
and energy (the same in every repeat), and the machine's load average
(the seconds are only comparable at a similar load). CPU seconds are the better
measure on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.sim.nicepim import mapper, node_model, share_port, sharing
from pimforge.sim.nicepim.networks import network, network_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_table, write_json  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="nicepim_4x4")
    ap.add_argument("--nets", default=",".join(network_names()))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    nets = [n for n in args.nets.split(",") if n]
    best: dict[str, tuple[float, float]] = {}
    result: dict[str, tuple[float, float]] = {}
    totals = []
    load0 = os.getloadavg()[0]
    for _ in range(args.repeat):
        # cold, as for a new architecture: the task lists' costs, the sharing steps
        # played through the DRAM port and the Data-Scheduler's schedules
        for cache in (node_model._part_cost, share_port._play, sharing.set_loads,
                      sharing._min_hop_order):
            cache.cache_clear()
        wall = cpu = 0.0
        for name in nets:
            t, c = time.perf_counter(), time.process_time()
            m = mapper.map_network(network(name), cfg)
            dt, dc = time.perf_counter() - t, time.process_time() - c
            wall, cpu = wall + dt, cpu + dc
            if name not in best or dc < best[name][1]:
                best[name] = (dt, dc)
            if result.setdefault(name, (m.latency_cycles, m.energy_pj)) != (
                    m.latency_cycles, m.energy_pj):
                raise SystemExit(f"{name}: a repeat mapped it differently")
        totals.append((wall, cpu))
    load1 = os.getloadavg()[0]
    rows = [[name, f"{best[name][0]:.2f}", f"{best[name][1]:.2f}", f"{result[name][0]:,.0f}",
             f"{result[name][1] / 1e6:,.1f}"] for name in nets]
    wall, cpu = min(totals, key=lambda t: t[1])
    rows.append(["**all**", f"{wall:.2f}", f"{cpu:.2f}", "", ""])
    print(f"PIM-Mapper on {cfg.name}, {len(nets)} networks, best of {args.repeat} "
          f"(load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} CPUs)")
    print("\n".join(md_table(["network", "wall s", "CPU s", "latency (cycles)",
                              "energy (uJ)"], rows)))
    if args.json:
        write_json(args.json, {"config": cfg.name, "nets": nets, "repeat": args.repeat,
                               "per_net_s": {k: list(v) for k, v in best.items()},
                               "totals_s": totals, "load_average": [load0, load1],
                               "mapped": {k: list(v) for k, v in result.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
