"""Whole-network PIM-CapsNet ablations of Sec. 6.3 (Fig. 17): a table per network.

Usage::

    python scripts/capsnet/capsnet_pipeline.py --net Caps-MN1 [--net Caps-SV1 ...]
        [--config hmc_gen3] [--routing-json FILE] [--batches 16] [--window 3000]
        [--routing-speedup X] [--gamma-v GV --gamma-h GH] [--json OUT.json]

The routing time and per-vault traffic come from ``--routing-json`` (the JSON
of ``pimforge run capsnet --json``) or, without it, from the ISA-level model
of the routing with its exact RTL cycle count (``run_capsnet(...,
CapsNetRunOptions(model_only=True))``).  ``--routing-speedup X`` instead sets the routing time
to the P100 roofline routing time divided by X (a what-if, labelled as such;
the PE streams keep the run's per-vault rate in bytes/s, since the run's bytes
over a much shorter time would exceed a vault's bandwidth).  Host and
baseline times are the P100 roofline MODEL; contention is replayed on the
``hmc_mem`` RTL (see ``pimforge.sim.capsnet.contention``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.sim.capsnet.gpu_roofline import roofline
from pimforge.sim.capsnet.networks import network
from pimforge.sim.capsnet.pipeline import (
    PAPER,
    routing_from_run,
    whole_network,
    whole_network_table,
)
from pimforge.sim.capsnet.workload import CapsNetRunOptions, run_capsnet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, write_text  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", action="append", required=True, help="Table 1 network (repeatable)")
    ap.add_argument("--config", default="hmc_gen3", help="config preset or TOML (hmc_gen3)")
    ap.add_argument("--routing-json", type=Path, help="a `pimforge run capsnet --json` result")
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--window", type=int, default=3000, help="requests per replay window")
    ap.add_argument("--replay-vaults", type=int, default=4)
    ap.add_argument("--routing-speedup", type=float,
                    help="what-if: routing time = P100 roofline routing time / X")
    ap.add_argument("--gamma-v", type=int, default=1, help="RMAS impact factor of PE work")
    ap.add_argument("--gamma-h", type=int, default=1, help="RMAS impact factor of host work")
    ap.add_argument("--json", type=Path, help="write all results here")
    a = ap.parse_args(argv)
    check_outputs(ap, json=a.json)
    cfg = load_config(a.config)
    results = []
    for name in a.net:
        if a.routing_json:
            # a dict: files of older runs (without a schema) are read too
            run = json.loads(a.routing_json.read_text())
        else:
            run = run_capsnet(name, a.config, CapsNetRunOptions(model_only=True,
                                                                check_route_pim=False)
                              ).to_json()
        routing = routing_from_run(run)
        # a run at --scale S routed the reduced network: the host layers follow it
        net = network(name).scaled(run["scale"]) if run.get("scale", 1) > 1 else network(name)
        if a.routing_speedup:
            routing["executed_on"] = (f"what-if: P100 roofline RP / {a.routing_speedup:g} "
                                      f"(run: {1e3 * routing['time_s']:.3f} ms)")
            t = roofline(net).routing_s / a.routing_speedup
            f = t / routing["time_s"]
            routing["reads"] = [r * f for r in routing["reads"]]
            routing["writes"] = [w * f for w in routing["writes"]]
            routing["time_s"] = t
            routing.pop("energy_j", None)
        res = whole_network(net, cfg, routing, policy_windows=a.window, batches=a.batches,
                            replay_vaults=a.replay_vaults, gamma_v=a.gamma_v,
                            gamma_h=a.gamma_h)
        results.append(res)
        print(whole_network_table(res))
        c = res["contention"]
        print(f"  contention window: {c['window_cycles']} cycles on {c['replay_vaults']} vaults,"
              f" {c['host_requests']} host + {c['pe_requests']} PE requests, demand "
              f"{100 * c['demand_of_peak']:.0f}% of peak; routing per-vault counts: "
              f"{routing.get('per_vault', 'given')}\n")
    print("paper (Sec. 6.3, average of 12 nets): All-in-PIM "
          f"{PAPER['all-in-pim']:.4f}x baseline speed, PIM-CapsNet {PAPER['pim-capsnet']}x; "
          "RMAS-PIM / RMAS-GPU below PIM-CapsNet")
    if a.json:
        write_text(a.json, json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
