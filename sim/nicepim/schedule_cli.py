"""``pimforge schedule sharing``: the Data-Scheduler's data-sharing schedules (Sec. VII, Fig. 12).

Builds Fig. 12's problem (sharing sets of ``--set-size`` nodes ``--stride`` apart
on an ``RxC`` mesh, each node sharing ``--bytes``), schedules it with the ILP or
one of the TSP and SHP baselines, and reports the flits on the busiest link, the
modelled latency and the solve time; with ``--rtl`` the schedule also runs as
traffic on the mesh NoC RTL (the native driver's trace mode) and the measured
cycles and busiest link are reported beside the model's.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from pimforge.gen.args import (
    add_config_option,
    int_range,
    number_range,
    out_file,
    resolve_config,
    seed,
)
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.gen.provenance import stamp

from ..noc import parse_mesh
from . import sharing

__all__ = ["add_arguments", "rtl_config", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    s = sub.add_parser("sharing", help="schedule data sharing within sharing sets on a mesh",
                       description="schedule data sharing within sharing sets on a mesh "
                                   "(Hamilton-cycle ILP, or the TSP and SHP baselines)")
    # the config belongs to the subcommand, so that it goes after `sharing` like the rest
    add_config_option(s)
    s.add_argument("--mesh", required=True, help="ROWSxCOLS of PIM-nodes, e.g. 8x8")
    s.add_argument("--set-size", type=int_range(2, 256), default=16,
                   help="nodes per sharing set (default 16)")
    s.add_argument("--stride", type=int_range(1, 64), default=1,
                   help="distance between neighbouring nodes of a set (default 1)")
    s.add_argument("--bytes", type=int_range(1, 1 << 30), default=8192,
                   help="bytes each node shares (default 8192)")
    s.add_argument("--method", choices=sharing.METHODS, default="ilp")
    s.add_argument("--flit-bits", type=int_range(32, 512), default=64,
                   help="flit payload bits (default 64, as in Fig. 12)")
    s.add_argument("--time-limit", type=number_range(0.1, 86400.0), default=60.0,
                   help="cap on the ILP's wall time in seconds (default 60), building "
                        "included; the search ends on its work limits (--nodes, a fixed "
                        "number of annealing runs), so its result does not depend on the "
                        "machine's load; a search the cap stops keeps the best schedule "
                        "found and is marked time_limited (a model too big to build in it "
                        "is refused up front)")
    s.add_argument("--nodes", type=int_range(0, 1 << 30), default=sharing.MIP_NODES,
                   help="branch-and-bound nodes the ILP solver may explore after its warm "
                        f"start (default {sharing.MIP_NODES})")
    s.add_argument("--seed", type=seed, default=0, help="solver and local-search seed")
    s.add_argument("--rtl", action="store_true",
                   help="also run the schedule on the mesh NoC RTL (Verilator)")
    s.add_argument("--units", action="store_true",
                   help="also run the schedule through the data-sharing units of the "
                        "config's NicePIM array RTL (SEND/WAIT tasks, each node's --bytes "
                        "in its DRAM; the mesh must be the array's)")
    s.add_argument("--packet-flits", type=int_range(1, 255), default=16,
                   help="flits per packet (default 16)")
    s.add_argument("--json", type=out_file, help="write the result here")


def run(args) -> int:
    resolve_config(args)
    cfg = args.config
    rows, cols = parse_mesh(args.mesh)
    mesh = sharing.Mesh(rows, cols)
    flit_bits = args.flit_bits
    if args.rtl:
        if rows > 16 or cols > 16:
            raise PimforgeError(f"--rtl runs meshes of up to 16x16, not {rows}x{cols}")
        if flit_bits & (flit_bits - 1):
            raise PimforgeError(f"--rtl needs --flit-bits a power of two, not {flit_bits}")
        cfg = rtl_config(cfg, rows, cols, flit_bits)
        from .. import verilator as vl

        vl.preflight()
    nice = getattr(args.config, "nicepim", None)
    if args.units and (nice is None or (nice.na_rows, nice.na_cols) != (rows, cols)):
        have = "no NicePIM array" if nice is None else f"a {nice.na_rows}x{nice.na_cols} array"
        raise PimforgeError(f"--units runs on the config's NicePIM array, and {args.config.name} "
                            f"has {have}; use --config nicepim_small --set "
                            f"nicepim.na_rows={rows} --set nicepim.na_cols={cols}")
    if args.method == "ilp":     # a model too big to build is refused before the warning
        sharing.check_ilp_size(mesh, sharing.sharing_sets(mesh, args.set_size, args.stride),
                               args.time_limit)
    warn = sharing.size_warning(args.method, args.set_size)
    if warn:
        print(f"pimforge schedule: warning: {warn}", file=sys.stderr, flush=True)
    sched = sharing.schedule(args.method, mesh, args.set_size, args.stride, args.bytes,
                             flit_bits, packet_flits=args.packet_flits,
                             time_limit=args.time_limit, seed=args.seed, nodes=args.nodes,
                             vcs=router_vcs(args.config))
    out = {"config": cfg.name, "bytes": args.bytes, "flit_bits": flit_bits,
           "stride": args.stride, "seed": args.seed, "time_limit_s": args.time_limit,
           "nodes": args.nodes,
           **sched.to_json()}
    line = (f"{out['mesh']} mesh, {out['sets']} set(s) of {out['set_size']} at stride "
            f"{args.stride}, {args.bytes} B per node ({sched.part_flits} flits of "
            f"{flit_bits} bits), {args.method}: max link load {sched.max_link_load} flits, "
            f"model latency {sched.latency_cycles} cycles, solved in {sched.solve_s:.2f} s")
    if args.method == "ilp":
        line += (", optimal" if sched.optimal else
                 f", not proved optimal (gap {100 * sched.gap:.1f}% to the bound "
                 f"{sched.bound:.2f} cycle edges per link)")
        if sched.time_limited:
            line += ", stopped by --time-limit (depends on the machine's speed)"
    if args.rtl:
        r = sharing.run_rtl(sched, cfg)
        links = r.pop("link_flits")
        out["rtl"] = r | {"link_flits": [[n, d, v] for (n, d), v in sorted(links.items())]}
        line += (f"; RTL {r['rtl_cycles']} cycles ({r['rtl_over_model']:.3f} x the model), "
                 f"busiest link {r['rtl_max_link_flits']} flits")
    if args.units:
        from .costmodel_check import schedule_on_array
        from .rtl_run import build_array_driver

        words = -(-args.bytes // nice.word_bytes)
        u = schedule_on_array(args.config, sched, words, seed=args.seed,
                              exe=build_array_driver(args.config))
        out["units"] = u
        line += (f"; through the sharing units: RTL {u['cycles_rtl']} cycles, the mapper's "
                 f"cost {u['cycles_model']} ({100 * u['error']:+.1f}%), "
                 f"{'every node has its set' if u['delivered'] else 'DATA MISSING'}")
        if not u["delivered"]:
            print(line)
            raise PimforgeError("the sharing units did not deliver every chunk")
    print(line)
    if args.json:
        write_json(args.json, stamp(out, "pimforge.schedule.sharing", 1, cfg))
    return 0


def router_vcs(cfg) -> int:
    """VCs of the routers the schedule runs on: the PIM-nodes' where the config has a
    ``nicepim`` section (as :func:`rtl_config`), else ``noc.vcs``."""
    nice = getattr(cfg, "nicepim", None)
    return nice.noc_vcs if nice is not None else cfg.noc.vcs


def rtl_config(cfg, rows: int, cols: int, flit_bits: int):
    """*cfg* with the mesh the schedule runs on: ``rows x cols`` routers of *flit_bits*,
    and the PIM-nodes' router VCs and buffers where the config has a ``nicepim``
    section."""
    changes = {"rows": rows, "cols": cols, "flit_bits": flit_bits}
    nice = getattr(cfg, "nicepim", None)
    if nice is not None:
        changes |= {"vcs": nice.noc_vcs, "buffer_depth": nice.noc_buffer_depth}
        if nice.noc_vcs % cfg.noc.classes:
            changes["classes"] = 1      # the driver replaces the network interface
    return cfg.replace(noc=replace(cfg.noc, **changes))
