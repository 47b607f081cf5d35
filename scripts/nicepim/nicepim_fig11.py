"""NicePIM Fig. 11 (model): PIM-Mapper's throughput against a DDAM-style pipelined mapping.

For each network and system: PIM-Mapper's mapping (mapper.map_network) of the network
on a batch of b samples for each b of ``--batches`` (the LM may split the batch), its
throughput ``b / latency(b)``, the best b kept (the paper: "changing the batch size
from 1 to 16 and choosing the best result"), against the pipelined mapping of
pimforge.sim.nicepim.ddam (contiguous stages on slicing-tree regions balanced by load,
at least two stages, the best stage count and layout) at the paper's largest batch, 16
samples: ``16 / ((S + 15) period)``. Also printed: the pipeline's steady-state
throughput (one over its period), its latency for one sample and both energies per
sample. The paper: PIM-Mapper's throughput 11 % higher on average, DDAM's latency
about 10x PIM-Mapper's, DDAM's NoC energy much lower.

    python scripts/nicepim/nicepim_fig11.py [--nets vgg16,...] [--configs nicepim_4x4,nicepim_16x16]
                                    [--batches 1,2,4,8,16]
                                    [--node rtl|ideal|ideal-engine|ideal-dma]
                                    [--stages 2,3,4] [--json build/nicepim_fig11.json]

``--node`` as in nicepim_fig10.py.
"""

from __future__ import annotations

import argparse
import time

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.sim.nicepim import ddam, mapper
from pimforge.sim.nicepim import networks as nets

BATCH = 16


def stage_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be stage counts like 2,4,8, not {text!r}") from None
    if not out or min(out) < 2:
        raise argparse.ArgumentTypeError(f"a pipeline has at least 2 stages, not {text!r}")
    return out


def batch_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be batch sizes like 1,4,16, not {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"a batch has at least 1 sample, not {text!r}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default=",".join(nets.network_names()))
    p.add_argument("--configs", default="nicepim_4x4,nicepim_16x16")
    p.add_argument("--node", choices=tuple(mapper.WHAT_IF), default="rtl")
    p.add_argument("--stages", type=stage_list, default=None,
                   help="stage counts to try (default: ddam_map's, 2 to 8 then by half)")
    p.add_argument("--batches", type=batch_list, default=[1, 2, 4, 8, 16],
                   help="PIM-Mapper's batch sizes to try (default 1,2,4,8,16)")
    p.add_argument("--json", default="build/nicepim_fig11.json")
    args = p.parse_args()
    rows = []
    print(f"{'config':14s} {'network':10s} {'mapper /s':>10s} {'b':>3s} {'DDAM b16 /s':>11s} "
          f"{'DDAM inf /s':>12s} {'M/D':>6s} {'M/D inf':>7s} {'stages':>6s} "
          f"{'D lat/M lat':>11s} {'D E/M E':>8s} {'s':>6s}")
    for cname in args.configs.split(","):
        cfg = load_config(cname)
        model = mapper.node_model(cfg, args.node)
        for name in args.nets.split(","):
            net = nets.network(name)
            t0 = time.perf_counter()
            try:
                ms = {b: mapper.map_network(net.batched(b), cfg, model=model)
                      for b in args.batches}
                b_m = max(ms, key=lambda b: b / ms[b].latency_cycles)
                m = ms[b_m]
                d = ddam.ddam_map(net, cfg, batch=BATCH, model=model, stages=args.stages)
            except PimforgeError as e:
                print(f"{cname:14s} {name:10s} does not map: {e}", flush=True)
                rows.append({"config": cname, "network": name, "error": str(e)})
                continue
            dt = time.perf_counter() - t0
            hz = cfg.freq_mhz * 1e6                        # samples per second
            thr_m = hz * b_m / m.latency_cycles
            thr_d = d.throughput(BATCH) * hz
            thr_inf = hz / d.period_cycles
            row = {"config": cname, "network": name, "node": args.node,
                   "mapper": m.to_json(), "mapper_batch": b_m, "ddam": d.to_json(),
                   "mapper_per_s_by_batch": {b: hz * b / x.latency_cycles
                                             for b, x in ms.items()},
                   "mapper_per_s": thr_m, "ddam_per_s": thr_d,
                   "ddam_steady_per_s": thr_inf, "throughput_ratio": thr_m / thr_d,
                   "latency_ratio": d.latency_cycles / ms[min(ms)].latency_cycles,
                   "energy_ratio": d.energy_pj / (m.energy_pj / b_m), "seconds": dt}
            rows.append(row)
            print(f"{cname:14s} {name:10s} {thr_m:10.2f} {b_m:3d} {thr_d:11.2f} {thr_inf:12.2f} "
                  f"{thr_m / thr_d - 1:+6.1%} {thr_m / thr_inf - 1:+7.1%} {len(d.stages):6d} "
                  f"{row['latency_ratio']:11.2f} {row['energy_ratio']:8.2f} {dt:6.1f}",
                  flush=True)
            write_json(args.json, rows)
    ok = [r for r in rows if "error" not in r]
    if ok:
        avg = sum(r["throughput_ratio"] for r in ok) / len(ok) - 1
        print(f"average over {len(ok)}: PIM-Mapper throughput {avg:+.1%} against the pipeline "
              "at batch 16 (paper: +11 %)")


if __name__ == "__main__":
    main()
