"""``pimforge noc``: latency against injection rate of the mesh NoC RTL.

A native C++ driver (``noc_main.cpp`` of :mod:`pimforge.sim.drivers`) runs the
Verilated ``noc_mesh`` with its own clock loop: every node is a Bernoulli
source of fixed-length packets (uniform random destinations among the other
nodes, or transpose: node (x, y) sends to (y, x), the diagonal stays silent)
with an unbounded source queue, and a sink that takes every flit and returns
its credit. Each offered rate is a run from reset with warm-up, measurement and
drain phases: the latency of the packets generated in the measurement window,
from generation (source queueing included) to the ejection of the tail, and the
flits accepted during the window per source node and cycle. The driver also
checks the network's contract at every cycle (see the C++ file); the tests
run it with probes on every router-to-router link.

Units: router clock cycles; rates in flits per source node per cycle.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from amaranth.back import verilog as amaranth_verilog

from pimforge.gen.args import (
    WavesWindow,
    add_waves_options,
    int_range,
    number_range,
    out_file,
    seed,
    waves_window,
)
from pimforge.gen.elaborate import LINT_HEADER
from pimforge.gen.errors import PimforgeError, SimulationError
from pimforge.gen.output import write_json
from pimforge.gen.provenance import stamp
from pimforge.rtl.hierarchy import leaf_scope
from pimforge.rtl.noc.flit import EAST, NORTH, SOUTH, WEST
from pimforge.rtl.noc.mesh import Mesh
from pimforge.rtl.noc.mesh import from_config as mesh_from_config
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

from . import verilator as vl
from .build import build_verilated
from .drivers import params_header, sources
from .drivers.io import read_fields, write_fields, write_table
from .drivers.pins import driver_top
from .drivers.waves import DriverWaves

__all__ = ["TRAFFIC", "add_arguments", "build_driver", "channel_bound",
           "mean_hops", "noc_sweep", "parse_mesh", "run", "run_driver", "run_trace",
           "zero_load_model"]

TRAFFIC = {"uniform": 0, "transpose": 1}
_STATS = ("generated", "delivered", "labeled", "labeled_done", "latency_sum", "latency_max",
          "accepted_flits", "cycles", "drained", "errors", "hop_sum", "packets_hopped",
          "sink_stalls", "credit_stalls", "excess_min", "excess_sum", "overtaken")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mesh", help="ROWSxCOLS, e.g. 8x8 (default: noc.rows x noc.cols)")
    p.add_argument("--traffic", choices=tuple(TRAFFIC), default="uniform")
    p.add_argument("--vcs", type=int_range(1, 8), help="override noc.vcs")
    p.add_argument("--buffers", type=int_range(2, 64),
                   help="override noc.buffer_depth (flits per VC)")
    p.add_argument("--packet-flits", type=int_range(1, 16), default=4,
                   help="flits per packet (default 4)")
    p.add_argument("--step", type=number_range(0.01, 0.5), default=0.05,
                   help="offered-rate step of the sweep up to 1 flit/node/cycle (default 0.05)")
    p.add_argument("--warmup", type=int_range(0, 10**6), default=1000, help="cycles")
    p.add_argument("--measure", type=int_range(100, 10**6), default=2000, help="cycles")
    p.add_argument("--ordered", action="store_true",
                   help="send every flow on one VC, kept on every hop, and check that its "
                        "packets arrive in order (default: any free VC per packet and hop)")
    p.add_argument("--seed", type=seed, default=1)
    p.add_argument("--json", type=out_file, required=True, help="write the results here")
    p.add_argument("--png", type=out_file, help="plot latency against accepted rate here")
    add_waves_options(p)


def parse_mesh(text: str) -> tuple[int, int]:
    """``"RxC"`` -> (rows, cols)."""
    r, sep, c = text.lower().partition("x")
    if not (sep and r.isdigit() and c.isdigit()):
        raise PimforgeError(f"--mesh must be ROWSxCOLS such as 4x4, not {text!r}")
    return int(r), int(c)


def _probe_words(mesh: Mesh) -> int:
    return -(-mesh.probe_layout.size // 32)


def build_driver(cfg, *, probes: bool = False, trace: bool = False) -> Path:
    """The (cached) native traffic driver of *cfg*'s ``noc_mesh`` (with *probes*: every
    router-to-router link is checked too; with *trace*: a separate build that can write
    waves)."""
    n = cfg.noc
    with leaf_scope() as leaves:
        # The driver's sources are one message class: every VC is open to every
        # packet, as in BookSim (noc.classes belongs to the network interfaces).
        mesh = mesh_from_config(cfg.replace(noc=replace(n, classes=1)), probes=probes)
        text = amaranth_verilog.convert(mesh, name="noc_mesh", emit_src=False)
    text = LINT_HEADER + text + "".join(leaves.modules[k].verilog for k in leaves.order)
    N = n.nodes
    pins: dict[str, list[str] | str] = {"overflow": "overflow"}
    for pin, port, member in (("in_valid", "local_in", "valid"), ("in_flit", "local_in", "flit"),
                              ("in_credit", "local_in", "credit"),
                              ("out_valid", "local_out", "valid"),
                              ("out_flit", "local_out", "flit"),
                              ("out_credit", "local_out", "credit")):
        pins[pin] = [f"{port}__{i}__{member}" for i in range(N)]
    if probes:
        pins["probe"] = [f"probe__{k}" for k in range(len(mesh.probe_links))]
    top = driver_top(text, "noc_mesh", None, pins, name="noc_mesh_driver")
    fl = mesh.link.flit_layout
    pl = mesh.probe_layout
    links = mesh.probe_links or [(0, EAST)]
    hdr = params_header(
        top.name, HEAD_CYCLES=mesh.latencies["head_cycles_per_hop"], ROWS=n.rows,
        COLS=n.cols, N=N, V=n.vcs, D=n.buffer_depth,
        FLIT_WORDS=top.words["in_flit"], PAYLOAD_BITS=n.flit_bits,
        OFF_PAYLOAD=fl["payload"].offset, OFF_VC=fl["vc"].offset, W_VC=fl["vc"].width,
        OFF_HEAD=fl["head"].offset, OFF_TAIL=fl["tail"].offset, OFF_ORD=fl["ordered"].offset,
        OFF_DX=fl["dest_x"].offset, W_DX=fl["dest_x"].width,
        OFF_DY=fl["dest_y"].offset, W_DY=fl["dest_y"].width,
        OFF_SRC=fl["src"].offset, W_SRC=fl["src"].width,
        NPROBE=len(mesh.probe_links), PROBE_WORDS=top.words.get("probe", _probe_words(mesh)),
        PROBE_NODE=[k for k, _ in links], PROBE_DIR=[d for _, d in links],
        PROBE_OFF_FLIT=pl["flit"].offset, PROBE_OFF_CREDIT=pl["credit"].offset)
    hdr += f"#define NOC_PROBES {int(probes)}\n"
    # -fno-inline keeps the router one C++ class that every router runs: a mesh
    # compiles in the time of one router, not of rows x cols copies of it.
    return build_verilated(top.verilog, top.name, sources("noc_main.cpp", hdr),
                           name=f"noc-{n.rows}x{n.cols}-{cfg.name}",
                           extra_args=("-fno-inline",), trace=trace)


def run_driver(cfg, rates: list[float], *, traffic: str = "uniform", packet_flits: int = 4,
               warmup: int = 1000, measure: int = 2000, drain: int | None = None,
               check: bool = False, stall: float = 0.0, seed: int = 1, probes: bool = False,
               ordered: bool = False, exe: Path | None = None,
               waves: WavesWindow | None = None) -> list[dict]:
    """Run the driver once per offered rate; the raw counters of each run.

    *check*: stop generating after the measurement window and require every
    packet to arrive (no loss, no deadlock) within *drain* cycles. *stall*: the
    probability that a sink holds a credit back one more cycle. *ordered*: every
    flow's packets on one VC with the ``ordered`` flag, checked to arrive in order
    (else each packet's head takes the next VC with a credit, round robin, and the
    routers any free VC, as in BookSim). *waves*: write the
    waves of these cycles (the rates' runs numbered on one after the other; *exe*
    must then be a trace build).
    """
    if traffic not in TRAFFIC:
        raise PimforgeError(f"--traffic must be one of {', '.join(TRAFFIC)}, not {traffic!r}")
    if traffic == "transpose" and cfg.noc.rows != cfg.noc.cols:
        raise PimforgeError(f"transpose traffic needs a square mesh, not "
                            f"{cfg.noc.rows}x{cfg.noc.cols}")
    exe = exe or build_driver(cfg, probes=probes, trace=waves is not None)
    with tempfile.TemporaryDirectory() as td, DriverWaves(waves, Path(td)) as w:
        d = Path(td)
        write_fields(d / "run.txt", {
            "seed": seed, "packet_flits": packet_flits, "traffic": TRAFFIC[traffic],
            "rates": " ".join(repr(float(r)) for r in rates), "warmup": warmup,
            "measure": measure, "drain": 3 * measure if drain is None else drain,
            "check": int(check), "stall": float(stall), "ordered": int(ordered),
            **w.fields})
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True, check=False)
        if not (d / "stats.txt").exists():
            raise SimulationError(f"noc driver failed: {res.stderr[-2000:]}")
        f = read_fields(d / "stats.txt")
        w.publish()         # a run that broke the contract too: its waves show where
    cols = {k: f.ints(k) for k in _STATS}
    points = [{k: cols[k][i] for k in _STATS} | {"offered": r} for i, r in enumerate(rates)]
    if res.returncode != 0:
        raise SimulationError(f"noc driver: {f.int('total_errors')} contract violations:\n"
                              f"{res.stderr[-2000:]}")
    return points


def run_trace(cfg, messages: list[tuple[int, int, int, int]], *, limit: int,
              exe: Path | None = None) -> dict:
    """Run the driver in trace mode: *messages* are ``(src, dest, flits, dep)`` packets,
    each node injecting its own in list order, a message with ``dep >= 0`` only once
    message ``dep`` (sent to its source) has arrived whole. Every router-to-router
    link is probed. Returns ``cycles`` (the cycle after the last arrival), ``arrive``
    (per message), ``link_flits`` (``{(node, direction): flits}``) and the counters.
    """
    exe = exe or build_driver(cfg, probes=True)
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        write_table(d / "trace.txt", ("src", "dest", "flits", "dep"), messages)
        write_fields(d / "run.txt", {"trace": "trace.txt", "limit": limit})
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True, check=False)
        if not (d / "stats.txt").exists():
            raise SimulationError(f"noc driver failed: {res.stderr[-2000:]}")
        f = read_fields(d / "stats.txt")
    if res.returncode != 0:
        raise SimulationError(f"noc driver (trace): {f.int('total_errors')} errors:\n"
                              f"{res.stderr[-2000:]}")
    links = zip(f.ints("link_node"), f.ints("link_dir"), f.ints("link_flits"), strict=True)
    return {"cycles": f.int("cycles"), "arrive": f.ints("arrive"),
            "link_flits": {(n, d): v for n, d, v in links},
            **{k: f.int(k) for k in ("messages", "delivered", "accepted_flits",
                                     "credit_stalls", "errors")}}


def _pairs(rows: int, cols: int, traffic: str) -> list[tuple[int, int, float]]:
    """(source, destination, share of the source's packets) of a traffic pattern."""
    N = rows * cols
    if traffic == "uniform":
        return [(s, t, 1 / (N - 1)) for s in range(N) for t in range(N) if s != t]
    return [(s, (s % cols) * cols + s // cols, 1.0) for s in range(N)
            if (s % cols) * cols + s // cols != s]


def mean_hops(rows: int, cols: int, traffic: str) -> float:
    """Average router-to-router hops of a packet (Manhattan distance under XY routing)."""
    pairs = _pairs(rows, cols, traffic)
    srcs = len({s for s, _, _ in pairs})
    return sum(w * (abs(s % cols - t % cols) + abs(s // cols - t // cols))
               for s, t, w in pairs) / srcs


def zero_load_model(rows: int, cols: int, traffic: str, packet_flits: int) -> float:
    """Zero-load packet latency of this router: ``2 (H + 1) + L - 1`` cycles for H hops
    (H + 1 routers, two cycles each for the head) and L flits, averaged over the pattern."""
    return HEAD_CYCLES_PER_HOP * (mean_hops(rows, cols, traffic) + 1) + packet_flits - 1


def channel_bound(rows: int, cols: int, traffic: str) -> float:
    """Ideal throughput (flits/source node/cycle) of XY routing for the pattern: the
    inverse of the most loaded channel's load per unit injection rate, at most 1
    (the injection and ejection channels carry one flit per cycle)."""
    load: dict[tuple[int, int], float] = {}
    for s, t, w in _pairs(rows, cols, traffic):
        x, y = s % cols, s // cols
        tx, ty = t % cols, t // cols
        while x != tx:
            d = EAST if tx > x else WEST
            load[(y * cols + x, d)] = load.get((y * cols + x, d), 0.0) + w
            x += 1 if d == EAST else -1
        while y != ty:
            d = SOUTH if ty > y else NORTH
            load[(y * cols + x, d)] = load.get((y * cols + x, d), 0.0) + w
            y += 1 if d == SOUTH else -1
        load[(t, -1)] = load.get((t, -1), 0.0) + w      # ejection channel
    return min(1.0, 1.0 / max(load.values()))


def noc_sweep(cfg, *, traffic: str, packet_flits: int = 4, step: float = 0.05,
              warmup: int = 1000, measure: int = 2000, seed: int = 1, refine: int = 3,
              ordered: bool = False, exe: Path | None = None,
              waves: WavesWindow | None = None) -> dict:
    """Latency and accepted throughput over offered rates ``step, 2 step, ... 1``; the
    JSON-able result.

    A rate is *stable* when every packet of its measurement window arrived within
    the drain bound and their average latency is at most three times the zero-load
    model; the saturation point is the highest stable rate, found by bisecting
    *refine* times between the last stable and the first unstable rate of the grid
    (0 when even the first is unstable).
    The zero-load latency is measured apart, at 0.01 flits/node/cycle, with every
    packet counted. *waves*: the waves of the grid's runs (from the lowest rate on,
    numbered on from one rate to the next), not of the bisection or zero-load runs.
    """
    n = cfg.noc
    if packet_flits > n.packet_flits:
        raise PimforgeError(f"--packet-flits must be at most noc.packet_flits = "
                            f"{n.packet_flits}, not {packet_flits}")
    if traffic == "transpose" and n.rows != n.cols:     # before the build
        raise PimforgeError(f"transpose traffic needs a square mesh, not {n.rows}x{n.cols}")
    # The probes cost little and keep every check of the driver on in measurements too.
    exe = exe or build_driver(cfg, probes=True, trace=waves is not None)
    model = zero_load_model(n.rows, n.cols, traffic, packet_flits)
    srcs = len({s for s, _, _ in _pairs(n.rows, n.cols, traffic)})
    kw = dict(traffic=traffic, packet_flits=packet_flits, seed=seed, ordered=ordered, exe=exe)

    def point(p: dict) -> dict:
        done = bool(p["drained"]) and p["labeled_done"] > 0
        lat = p["latency_sum"] / p["labeled_done"] if done else None
        return {"offered": p["offered"], "accepted": p["accepted_flits"] / (srcs * measure),
                "latency": lat, "latency_max": p["latency_max"] if done else None,
                "packets": p["labeled"], "stable": done and lat <= 3 * model}

    k = round(1 / step)
    rates = sorted({round(min(1.0, i * step), 6) for i in range(1, k + 2)})
    curve = [point(p) for p in run_driver(cfg, rates, warmup=warmup, measure=measure,
                                          waves=waves, **kw)]
    unstable = [i for i, c in enumerate(curve) if not c["stable"]]
    if unstable:
        j = unstable[0]
        lo, hi = (curve[j - 1]["offered"] if j else 0.0), curve[j]["offered"]
        for _ in range(refine):
            mid = round((lo + hi) / 2, 6)
            (c,) = [point(p) for p in run_driver(cfg, [mid], warmup=warmup, measure=measure,
                                                 **kw)]
            curve.append(c)
            lo, hi = (mid, hi) if c["stable"] else (lo, mid)
        curve.sort(key=lambda c: c["offered"])
    stable = [c for c in curve if c["stable"]]
    sat = max(stable, key=lambda c: c["offered"]) if stable else None
    (z,) = run_driver(cfg, [0.01], warmup=0, measure=max(measure, 5000), drain=5000,
                      check=True, **kw)
    zl = z["latency_sum"] / z["labeled_done"] if z["labeled_done"] else None
    bound = channel_bound(n.rows, n.cols, traffic)
    k_ = n.rows if n.rows == n.cols and traffic == "uniform" else None
    return {
        "config": cfg.name, "mesh": f"{n.rows}x{n.cols}", "traffic": traffic,
        "vcs": n.vcs, "buffer_depth": n.buffer_depth, "flit_bits": n.flit_bits,
        "packet_flits": packet_flits, "source_nodes": srcs, "seed": seed,
        "warmup_cycles": warmup, "measure_cycles": measure,
        "unit": "latency in router cycles; rates in flits per source node per cycle",
        "router": "input-queued, wormhole, a free VC allocated per packet and hop, XY routing, "
                  f"credits; {HEAD_CYCLES_PER_HOP} cycles per hop for a head flit, 1 for a "
                  "body flit",
        "ordered": ordered,
        "zero_load_latency": zl,
        "zero_load_packets": z["labeled_done"],
        "zero_load_contention": z["excess_sum"] / z["delivered"] if z["delivered"] else None,
        "zero_load_latency_model": model,
        "zero_load_model_formula": "2 (H + 1) + L - 1",
        "mean_hops": mean_hops(n.rows, n.cols, traffic),
        "saturation_rate": sat["offered"] if sat else None,
        "saturation_throughput": sat["accepted"] if sat else None,
        "max_accepted_throughput": max(c["accepted"] for c in curve),
        "ideal_throughput_xy": bound,
        "ideal_uniform_bisection_4_over_k": (min(1.0, 4 / k_) if k_ else None),
        "saturation_fraction_of_ideal": sat["accepted"] / bound if sat else None,
        "curve": curve,
    }


def plot(path: Path, r: dict) -> None:
    """Latency against accepted throughput, the ideal bound as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [c for c in r["curve"] if c["latency"] is not None]
    fig, ax = plt.subplots(figsize=(6, 4.2), dpi=110)
    ax.plot([c["offered"] for c in pts], [c["latency"] for c in pts], "o-",
            label="measured (RTL)")
    ax.axvline(r["ideal_throughput_xy"], color="k", ls="--", lw=1,
               label=f"XY channel bound {r['ideal_throughput_xy']:.3f}")
    if r["saturation_throughput"] is not None:
        ax.axvline(r["saturation_throughput"], color="C3", ls=":", lw=1,
                   label=f"saturation throughput {r['saturation_throughput']:.3f}")
    ax.axhline(r["zero_load_latency_model"], color="C2", ls="-.", lw=1,
               label=f"zero-load model {r['zero_load_latency_model']:.1f}")
    ax.set_xlabel("offered load [flits/node/cycle]")
    ax.set_ylabel("average packet latency [cycles]")
    ax.set_ylim(0, max(4 * r["zero_load_latency_model"], 1))
    ax.set_title(f"{r['mesh']} mesh, {r['traffic']}, {r['vcs']} VCs x {r['buffer_depth']} flits, "
                 f"{r['packet_flits']}-flit packets", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)


def run(args) -> int:
    waves = waves_window(args)
    cfg = args.config
    changes = {}
    if args.mesh is not None:
        changes["rows"], changes["cols"] = parse_mesh(args.mesh)
    if args.vcs is not None:
        changes["vcs"] = args.vcs
        # The message classes belong to the network interface, which this driver
        # replaces: an odd --vcs is fine here.
        if args.vcs % cfg.noc.classes:
            changes["classes"] = 1
    if args.buffers is not None:
        changes["buffer_depth"] = args.buffers
    if changes:
        cfg = cfg.replace(noc=replace(cfg.noc, **changes))
    vl.preflight()              # the driver build needs them; say so before the work
    r = noc_sweep(cfg, traffic=args.traffic, packet_flits=args.packet_flits, step=args.step,
                  warmup=args.warmup, measure=args.measure, seed=args.seed,
                  ordered=args.ordered, waves=waves)
    r = stamp(r, "pimforge.noc", 1, cfg)
    write_json(args.json, r)
    if args.png:
        plot(args.png, r)
    sat = r["saturation_throughput"]
    print(f"{r['mesh']} {r['traffic']}: zero-load latency {r['zero_load_latency']:.2f} cycles "
          f"(model {r['zero_load_latency_model']:.2f}), saturation throughput "
          + (f"{sat:.3f} flits/node/cycle ({100 * r['saturation_fraction_of_ideal']:.0f}% of "
             f"the XY bound {r['ideal_throughput_xy']:.3f})" if sat is not None else
             "not reached: unstable at the lowest rate")
          + f", {r['max_accepted_throughput']:.3f} accepted at most")
    return 0
