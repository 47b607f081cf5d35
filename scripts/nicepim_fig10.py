"""NicePIM Fig. 10 (model): PIM-Mapper against the Sec. VIII-B baseline, batch 1.

For each network and system (presets nicepim_4x4 and nicepim_16x16), the latency
and energy of the baseline mapping (each layer on the whole array, WR lowered from
the largest layers until the weights fit, one layout for all) and of PIM-Mapper
(mapper.map_network), both from the analytical per-node model of
pimforge.sim.nicepim.mapper, and their ratios. Writes the rows as JSON.

    python scripts/nicepim_fig10.py [--nets vgg16,...] [--configs nicepim_4x4,nicepim_16x16]
                                    [--json build/nicepim_fig10.json]
"""

from __future__ import annotations

import argparse
import time

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.sim.nicepim import mapper
from pimforge.sim.nicepim import networks as nets


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default=",".join(nets.network_names()))
    p.add_argument("--configs", default="nicepim_4x4,nicepim_16x16")
    p.add_argument("--json", default="build/nicepim_fig10.json")
    args = p.parse_args()
    rows = []
    print(f"{'config':14s} {'network':10s} {'baseline cycles':>15s} {'mapper cycles':>13s} "
          f"{'latency':>8s} {'energy':>8s} {'map s':>6s}")
    for cname in args.configs.split(","):
        cfg = load_config(cname)
        for name in args.nets.split(","):
            net = nets.network(name)
            t0 = time.perf_counter()
            try:
                b = mapper.baseline_map(net, cfg)
                m = mapper.map_network(net, cfg)
            except PimforgeError as e:
                print(f"{cname:14s} {name:10s} does not map: {e}", flush=True)
                rows.append({"config": cname, "network": name, "error": str(e)})
                continue
            dt = time.perf_counter() - t0
            row = {"config": cname, "network": name, "baseline": b.to_json(),
                   "mapper": m.to_json(), "latency_ratio": m.latency_cycles / b.latency_cycles,
                   "energy_ratio": m.energy_pj / b.energy_pj, "map_s": dt}
            rows.append(row)
            print(f"{cname:14s} {name:10s} {b.latency_cycles:15.4g} {m.latency_cycles:13.4g} "
                  f"{row['latency_ratio'] - 1:+8.1%} {row['energy_ratio'] - 1:+8.1%} {dt:6.1f}",
                  flush=True)
            write_json(args.json, rows)


if __name__ == "__main__":
    main()
