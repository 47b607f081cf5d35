"""Workload-driver speed vs a native Verilator clock loop on the same Verilog.

Usage: python scripts/capsnet/capsnet_driver_speed.py [--net Caps-MN1] [--scale 32] [--config NAME]
       [--dram banked|ideal] [--opt-fast FLAGS] [--threads N]

Runs the routing with the native driver (lane-vector memory serving, the DRAM
model, sends, barriers) and, in the same run, a pure C++ clock loop over the
same Verilated vault models (same executable, ``native`` mode: no memory
serving, no bookkeeping) for the same number of cycles; prints both cycles/s
and their ratio, for the driver on one thread and on ``--threads`` (default:
the usable cores), so the speed-up of the threaded driver is measured in the
same run. ``--opt-fast`` rebuilds with Verilator's ``OPT_FAST`` make
variable (the optimisation of the model's hot code) set to FLAGS, e.g. ``--opt-fast=-O2``.
"""

from __future__ import annotations

import argparse

from pimforge.gen.config import load_config
from pimforge.sim.capsnet.compiler import compile_routing
from pimforge.sim.capsnet.networks import network
from pimforge.sim.capsnet.rtl_run import (
    build_vault_driver,
    default_threads,
    native_loop,
    run_on_rtl,
)
from pimforge.sim.capsnet.workload import choose_dimension, random_inputs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", default="Caps-MN1")
    ap.add_argument("--scale", type=int, default=32)
    ap.add_argument("--config", default=None)
    ap.add_argument("--dim", choices=["B", "L", "H"], default=None,
                    help="distribution dimension (default: the run's own choice)")
    ap.add_argument("--dram", choices=["banked", "ideal"], default="banked")
    ap.add_argument("--opt-fast", default=None)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings (default 3)")
    ap.add_argument("--threads", type=int, default=default_threads(),
                    help="driver threads of the threaded run (default: the usable cores)")
    a = ap.parse_args()
    cfg = load_config(a.config)
    net = network(a.net).scaled(a.scale)
    comp = compile_routing(net, choose_dimension(net, cfg, a.dim)[2], cfg)
    u, W = random_inputs(net, 1)
    mems = comp.memories(u, W)
    extra = ("-MAKEFLAGS", f"OPT_FAST={a.opt_fast}") if a.opt_fast else ()
    exe = build_vault_driver(cfg, extra_args=extra)
    one_s, many_s, nat_s, cycles = [], [], [], 0
    for _ in range(max(1, a.repeat)):    # interleaved, so all see the same machine load
        r = run_on_rtl(comp, mems, cfg, exe=exe, dram=a.dram, threads=1)
        cycles = r.cycles
        one_s.append(r.seconds)
        rt = run_on_rtl(comp, mems, cfg, exe=exe, dram=a.dram, threads=a.threads)
        if rt.cycles != cycles:
            raise SystemExit(f"{a.threads} threads gave {rt.cycles} cycles, 1 thread {cycles}")
        many_s.append(rt.seconds)
        nat_s.append(native_loop(comp, mems, cfg, r.cycles, exe=exe))
    one, many, nat = cycles / min(one_s), cycles / min(many_s), cycles / min(nat_s)
    print(f"{net.name} x{comp.vaults} vaults ({a.dram} DRAM, OPT_FAST {a.opt_fast or 'default'})"
          f": {cycles} cycles; native loop (1 thread) {nat:,.0f} cycles/s; driver 1 thread "
          f"{one:,.0f} cycles/s (ratio {one / nat:.2f}), {a.threads} threads {many:,.0f} "
          f"cycles/s (ratio {many / nat:.2f}, speed-up {many / one:.2f}x)")


if __name__ == "__main__":
    main()
