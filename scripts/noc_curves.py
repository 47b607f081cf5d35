"""Latency against offered load of the mesh NoC RTL, 1-flit and 4-flit packets, beside
the ideal channel bound: the table of rtl/noc/README.md.

    python scripts/noc_curves.py --mesh 8x8 --vcs 8 --buffers 8 --json noc.json --md noc.md

Runs :func:`pimforge.sim.noc.noc_sweep` (the Verilated mesh with the native driver and
all its checks on) once per packet length, under uniform random traffic to the other
nodes, and prints per length the zero-load latency, the saturation throughput (the
highest offered rate whose packets all arrive with a mean latency of at most three
times zero load), the most accepted and the XY channel bound of the driver's channel
model (one flit per link and cycle, injection and ejection at most one flit per node and
cycle), then the curves side by side. ``--ordered``: every flow on one VC, kept on every
hop (the ``ordered`` flag), the routers' static VC assignment of before per-packet VC
allocation.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.sim import noc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, finish, md_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default")
    p.add_argument("--mesh", default="8x8", help="ROWSxCOLS (default 8x8)")
    p.add_argument("--vcs", type=int, default=8)
    p.add_argument("--buffers", type=int, default=8, help="flits per VC buffer")
    p.add_argument("--flit-bits", type=int, default=64)
    p.add_argument("--lengths", default="1,4", help="packet lengths in flits (default 1,4)")
    p.add_argument("--traffic", choices=tuple(noc.TRAFFIC), default="uniform")
    p.add_argument("--step", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--measure", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ordered", action="store_true",
                   help="one VC per flow, kept on every hop (static VC assignment)")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path)
    a = p.parse_args(argv)
    check_outputs(p, json=a.json, md=a.md)
    t0 = time.time()
    rows, cols = noc.parse_mesh(a.mesh)
    lengths = [int(x) for x in a.lengths.split(",")]
    cfg = load_config(a.config)
    cfg = cfg.replace(noc=replace(cfg.noc, rows=rows, cols=cols, vcs=a.vcs, classes=1,
                                  buffer_depth=a.buffers, flit_bits=a.flit_bits,
                                  packet_flits=max(lengths)))
    exe = noc.build_driver(cfg, probes=True)
    runs = {}
    for L in lengths:
        runs[L] = noc.noc_sweep(cfg, traffic=a.traffic, packet_flits=L, step=a.step,
                                warmup=a.warmup, measure=a.measure, seed=a.seed,
                                ordered=a.ordered, exe=exe)
        print(f"{L}-flit packets: saturation {runs[L]['saturation_throughput']}",
              file=sys.stderr)
    vc_mode = "one VC per flow (ordered)" if a.ordered else "a free VC per packet and hop"
    head = (f"{a.mesh} mesh, {a.traffic} traffic, {a.vcs} VCs x {a.buffers} flits, "
            f"{vc_mode}, seed {a.seed}")

    def f3(x):
        return "-" if x is None else f"{x:.3f}"

    summary = md_table(
        ["packet flits", "zero-load latency (model), cycles", "saturation throughput",
         "max accepted", "XY bound", "fraction of bound"],
        [[L, f"{r['zero_load_latency']:.2f} ({r['zero_load_latency_model']:.2f})",
          f3(r["saturation_throughput"]), f3(r["max_accepted_throughput"]),
          f3(r["ideal_throughput_xy"]),
          "-" if r["saturation_fraction_of_ideal"] is None
          else f"{100 * r['saturation_fraction_of_ideal']:.0f} %"] for L, r in runs.items()])
    rates = sorted({c["offered"] for r in runs.values() for c in r["curve"]})
    by = {L: {c["offered"]: c for c in r["curve"]} for L, r in runs.items()}
    names = ["offered"]
    for L in lengths:
        names += [f"{L}-flit accepted", f"{L}-flit latency"]
    rows_ = []
    for x in rates:
        row = [f"{x:.4g}"]
        for L in lengths:
            c = by[L].get(x)
            row += (["", ""] if c is None else
                    [f3(c["accepted"]), "-" if c["latency"] is None else
                     f"{c['latency']:.1f}" + ("" if c["stable"] else " (unstable)")])
        rows_.append(row)
    text = "\n".join([head, "", *summary, "", *md_table(names, rows_)])
    result = {"schema": "pimforge.noc_curves", "schema_version": 1, "argv": sys.argv,
              "runs": {str(L): r for L, r in runs.items()}}
    return finish(text, result, json=a.json, md=a.md, t0=t0)


if __name__ == "__main__":
    sys.exit(main())
