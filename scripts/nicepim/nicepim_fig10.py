"""NicePIM Fig. 10 (model): PIM-Mapper against the Sec. VIII-B baseline, batch 1.

For each network and system (presets nicepim_4x4 and nicepim_16x16): the latency and
energy of the baseline (each layer on the whole array, its LM of least node cycles as
the paper's per-layer Timeloop "Delay" search gives it, WR lowered from the largest
layers until the weights fit, one layout for all), of the stronger baseline whose LM
also weighs the layer's data sharing (``lm_goal="full"``), and of PIM-Mapper
(mapper.map_network), all from the analytical model of pimforge.sim.nicepim.mapper
with the movement of every layer's inputs between partitions (mapper.evaluate).
Writes the rows as JSON.

``--node`` picks the node model: ``rtl`` (mapper.NodeModel, the node RTL's, checked
against it) or a what-if of mapper.WhatIfNodeModel that counts the engine
(``ideal-engine``), the tensor DMA (``ideal-dma``) or both (``ideal``) as the paper's
simulators would (Timeloop; a DRAM at the banks' width), to measure how much of the
difference to the paper those terms, which every mapping pays, account for.

    python scripts/nicepim/nicepim_fig10.py [--nets vgg16,...] [--configs nicepim_4x4,nicepim_16x16]
                                    [--node rtl|ideal|ideal-engine|ideal-dma]
                                    [--sharing best|ilp|tsp|shp]
                                    [--json build/nicepim_fig10.json]

``--sharing`` picks the Data-Scheduler's schedules that price data sharing for both
methods (the paper's baseline also shares by the Data-Scheduler), so running it with
``ilp`` and ``tsp`` shows Fig. 12's choice in the network figures.
"""

from __future__ import annotations

import argparse
import time

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.sim.nicepim import mapper
from pimforge.sim.nicepim import networks as nets


def _moved(m: mapper.Mapping) -> float:
    return sum(i["redist_cycles"] for i in m.layers.values()) / m.latency_cycles


def _terms(b: mapper.Mapping) -> dict[str, float]:
    """The baseline's latency by term (its layers run one after the other)."""
    out = {t: sum(i[t] for i in b.layers.values()) / b.latency_cycles
           for t in ("compute", "dram", "share")}
    out["moved"] = _moved(b)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default=",".join(nets.network_names()))
    p.add_argument("--configs", default="nicepim_4x4,nicepim_16x16")
    p.add_argument("--node", choices=tuple(mapper.WHAT_IF), default="rtl")
    p.add_argument("--sharing", choices=("best", "ilp", "tsp", "shp"), default="best",
                   help="the Data-Scheduler's schedules data sharing is priced on (both "
                        "the baseline and PIM-Mapper; default: the fastest of ILP and TSP "
                        "per sharing set)")
    p.add_argument("--json", default="build/nicepim_fig10.json")
    args = p.parse_args()
    rows = []
    print(f"{'config':14s} {'network':10s} {'baseline cyc':>12s} {'mapper cyc':>11s} "
          f"{'latency':>8s} {'energy':>8s} {'vs full: lat':>12s} {'energy':>7s} "
          f"{'moved B/M':>10s} {'B: engine/DRAM/share':>20s} {'s':>6s}")
    for cname in args.configs.split(","):
        cfg = load_config(cname)
        model = mapper.node_model(cfg, args.node, args.sharing)
        for name in args.nets.split(","):
            net = nets.network(name)
            t0 = time.perf_counter()
            try:
                b = mapper.baseline_map(net, cfg, model=model)
                bf = mapper.baseline_map(net, cfg, lm_goal="full", model=model)
                m = mapper.map_network(net, cfg, model=model)
            except PimforgeError as e:
                print(f"{cname:14s} {name:10s} does not map: {e}", flush=True)
                rows.append({"config": cname, "network": name, "error": str(e)})
                continue
            dt = time.perf_counter() - t0
            row = {"config": cname, "network": name, "node": args.node,
                   "sharing": args.sharing,
                   "baseline": b.to_json(),
                   "baseline_full": bf.to_json(), "mapper": m.to_json(),
                   "latency_ratio": m.latency_cycles / b.latency_cycles,
                   "energy_ratio": m.energy_pj / b.energy_pj,
                   "latency_ratio_full": m.latency_cycles / bf.latency_cycles,
                   "energy_ratio_full": m.energy_pj / bf.energy_pj,
                   "baseline_terms": _terms(b), "seconds": dt}
            t = row["baseline_terms"]
            rows.append(row)
            print(f"{cname:14s} {name:10s} {b.latency_cycles:12.4g} {m.latency_cycles:11.4g} "
                  f"{row['latency_ratio'] - 1:+8.1%} {row['energy_ratio'] - 1:+8.1%} "
                  f"{row['latency_ratio_full'] - 1:+12.1%} {row['energy_ratio_full'] - 1:+7.1%} "
                  f"{_moved(b):4.1%}/{_moved(m):4.1%} "
                  f"{t['compute']:6.1%}/{t['dram']:5.1%}/{t['share']:5.1%} {dt:6.1f}", flush=True)
            write_json(args.json, rows)
    ok = [r for r in rows if "error" not in r]
    if ok:
        lat = sum(r["latency_ratio"] for r in ok) / len(ok) - 1
        en = sum(r["energy_ratio"] for r in ok) / len(ok) - 1
        print(f"average over {len(ok)}: latency {lat:+.1%}, energy {en:+.1%} "
              "(paper: -37 %, -28 %)")


if __name__ == "__main__":
    main()
