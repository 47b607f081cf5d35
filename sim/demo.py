"""``pimforge demo``: a small CapsNet classifies digits end to end, its routing on the vault RTL.

The network is the digits CapsNet shipped with the package
(:mod:`pimforge.sim.capsnet.digits_net`: conv 3x3 -> PrimaryCaps of 64 capsules
of 8 -> 10 digit capsules of 16, 3 routing iterations, trained on
scikit-learn's 8x8 digits). For ``--batch`` held-out test images:

1. the host layers (convolution, PrimaryCaps, squash) run in numpy and give
   the low-level capsules ``u``;
2. the routing (Algorithm 1, Eq. 1-5) is compiled for the config's cube
   (distribution dimension chosen by the Sec. 5.1 scores) and runs on the
   Verilated vault compute of every vault -- controllers, PEs, banked DRAM
   throughput model, crossbar and barriers (``pimforge run capsnet`` does the
   same for the Table 1 networks);
3. the RTL's memories and ``v`` are compared bit for bit with the ISA-level
   golden model (``rtl_matches_model``), ``v`` with float64 Algorithm 1, and
   the predicted digits (longest capsule) with the labels.

Exit status 1 when the RTL differs from the golden model.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pimforge.gen.args import add_waves_options, int_range, out_file, waves_window
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.gen.provenance import stamp
from pimforge.verif.models.capsnet.routing import route_f64

from . import verilator as vl
from .capsnet import digits_net as dn
from .capsnet.networks import CapsNetSpec
from .capsnet.workload import CapsNetRunOptions, route

__all__ = ["add_arguments", "demo_json", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int_range(1, dn.TEST_IMAGES), default=16,
                   help="test images routed together (default 16)")
    p.add_argument("--offset", type=int_range(0, dn.TEST_IMAGES - 1), default=0,
                   help="index of the first test image (default 0)")
    p.add_argument("--dram", choices=["banked", "ideal"], default="banked",
                   help="operand memory model of the RTL run (default banked)")
    p.add_argument("--json", type=out_file, help="write the routing run's results JSON here")
    add_waves_options(p)        # the routing's waves of one vault's compute
    p.add_argument("--waves-vault", type=int_range(0), default=0, metavar="V",
                   help="with --waves: the vault whose compute the waves show (default 0)")


def _over_ideal_lines(res, cfg) -> str:
    """Where the cycles over the ideal-memory time went, and what the TSVs moved."""
    o = res.cycles_over_ideal
    p = o["parts"]
    lines = [f"  cycles over the ideal memory: {o['over']:,} = TSV bandwidth stalls "
             f"{p['bandwidth_stalls']:,} + bank conflict (vault request) stalls "
             f"{p['vault_request_stalls']:,} - overlapped with other vaults' work "
             f"{-p['hidden_by_other_vaults']:,} + barrier/crossbar "
             f"{p['barrier_and_crossbar']:,} + unaccounted {p['unaccounted']:,} "
             f"(stalls of the last vault at each barrier)"]
    d = res.dram
    if d.get("model") == "banked":
        moved = 16 * (d["blocks_read"] + d["blocks_written"])
        tsv = cfg.hmc.vault_bw_gbs * 1e9 / (cfg.freq_mhz * 1e6)
        lanes = 8 * sum(res.reads) + 4 * sum(res.writes)
        rate = moved / res.vaults / res.cycles
        lines.append(f"  DRAM: the TSVs moved {moved:,} B ({rate:.1f} B/cycle per vault on "
                     f"average, peak {tsv:.1f}) for the {lanes:,} B of operands and results "
                     f"the lanes used (the rest came from the stationary-operand registers, "
                     f"lane broadcasts and the operand port's buffers); "
                     f"{d['row_misses']:,} row misses, {d['row_hits']:,} hits")
    return "\n".join(lines)


def run(args) -> int:

    t_start = time.monotonic()
    cfg = args.config
    waves = waves_window(args)
    if args.waves_vault and waves is None:
        raise PimforgeError("--waves-vault picks the vault of --waves FILE.vcd; give --waves "
                            "too")
    if args.waves_vault >= cfg.hmc.vaults:
        raise PimforgeError(f"--waves-vault must be below the config's {cfg.hmc.vaults} "
                            f"vaults, not {args.waves_vault}")
    vl.preflight()              # the routing runs on a Verilated build: say so before the work
    if args.offset > dn.TEST_IMAGES - args.batch:      # before loading anything
        raise PimforgeError(f"--offset must be between 0 and {dn.TEST_IMAGES - args.batch} "
                            f"for --batch {args.batch}, not {args.offset}")
    _, _, x_test, y_test = dn.load_digits_split()
    if not 1 <= args.batch <= len(x_test):
        raise PimforgeError(f"--batch must be between 1 and {len(x_test)} (the held-out "
                            f"digits), not {args.batch}")
    if not 0 <= args.offset <= len(x_test) - args.batch:
        raise PimforgeError(f"--offset must be between 0 and {len(x_test) - args.batch} for "
                            f"--batch {args.batch}, not {args.offset}")
    x = x_test[args.offset:args.offset + args.batch]
    y = y_test[args.offset:args.offset + args.batch]
    model = dn.load_trained()
    meta = dn.trained_meta()
    t0 = time.monotonic()
    u = model.primary_capsules(x).astype(np.float32)
    host_s = time.monotonic() - t0
    W = model.W.astype(np.float32)
    spec = CapsNetSpec(name="digits-capsnet", dataset="sklearn digits", batch=len(x),
                       n_l=dn.N_L, n_h=dn.N_H, iterations=dn.ITERATIONS, c_l=dn.C_L,
                       c_h=dn.C_H)
    print(f"digits CapsNet (weights v{meta.get('version')}, {dn.N_L} x {dn.C_L} -> "
          f"{dn.N_H} x {dn.C_H}, {dn.ITERATIONS} iterations) on {len(x)} held-out images, "
          f"config {cfg.name}")
    print(f"  host (numpy): conv + PrimaryCaps + squash -> u {u.shape} in {1e3 * host_s:.1f} ms")
    print(f"  routing on the Verilated vault RTL: {cfg.hmc.vaults} vaults x "
          f"{cfg.capsnet.pes_per_vault} PEs at {cfg.freq_mhz:g} MHz, {args.dram} DRAM, "
          f"{cfg.hmc.mapping} address mapping (first run builds it with Verilator)...",
          flush=True)
    routed = route(spec, cfg, CapsNetRunOptions(dram=args.dram, waves=waves,
                                                waves_vault=args.waves_vault),
                   inputs=(u, W))
    res, v = routed.result, routed.v
    print("  dimension scores (1/s): " + ", ".join(f"{k} {s['score']:.4g}"
                                                   for k, s in res.scores.items())
          + f" -> {res.dimension}")
    print(f"  {res.cycles:,} cycles = {1e6 * res.time_s:.1f} us "
          f"(timing model with an ideal memory: {res.timing_model_cycles:,}); "
          f"inter-vault {res.intervault_bytes:,} B; vault request stalls "
          f"{res.vault_request_stalls}; energy {1e6 * res.energy_j['total']:.2f} uJ (model)")
    print(f"  per equation, busiest vault: {res.per_equation_cycles_busiest_vault}")
    if res.cycles_over_ideal is not None:
        print(_over_ideal_lines(res, cfg))
    ok = res.ok
    print(f"  RTL vs ISA golden model (every memory word and v): "
          f"{'bit-exact' if ok else 'DIFFERENT'}")
    v64 = route_f64(u.astype(np.float64), W.astype(np.float64), dn.ITERATIONS).v
    cls_rtl = np.argmax(np.sum(v.astype(np.float64) ** 2, axis=-1), axis=1)
    cls_64 = np.argmax(np.sum(v64 ** 2, axis=-1), axis=1)
    print(f"  v vs float64 Algorithm 1: max |dv| {np.abs(v - v64).max():.3g} "
          f"(max |v| {np.abs(v64).max():.3g})")
    print(f"  digits: RTL {np.mean(cls_rtl == y):.1%} correct, float64 routing "
          f"{np.mean(cls_64 == y):.1%}; RTL and float64 agree on "
          f"{int(np.sum(cls_rtl == cls_64))}/{len(y)}")
    print(f"  first images: label {' '.join(map(str, y[:16]))}")
    print(f"                RTL   {' '.join(map(str, cls_rtl[:16]))}")
    w = res.wall_s
    print(f"simulated {res.cycles:,} cycles in {w.rtl_loop:.1f}s "
          f"({res.rtl_cycles_per_s:,.0f} cycles/s); build {w.build:.1f}s; "
          f"demo wall {time.monotonic() - t_start:.1f}s")
    if args.json:
        write_json(args.json, demo_json(res, y, cls_rtl, cls_64, cfg))
    return 0 if ok else 1


def demo_json(res, labels: np.ndarray, rtl_classes: np.ndarray,
              float64_classes: np.ndarray, config) -> dict:
    """The run's JSON (schema pimforge.run.capsnet) with the demo's own section and what
    made it."""
    out = res.to_json()
    out["demo"] = {"labels": labels.tolist(), "rtl_classes": rtl_classes.tolist(),
                   "float64_classes": float64_classes.tolist(),
                   "rtl_accuracy": float(np.mean(rtl_classes == labels)),
                   "float64_accuracy": float(np.mean(float64_classes == labels))}
    return stamp(out, config=config)
