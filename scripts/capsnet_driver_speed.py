"""Workload-driver speed vs a native Verilator clock loop on the same Verilog.

Usage: python scripts/capsnet_driver_speed.py [--net Caps-MN1] [--scale 32] [--config NAME]

Runs the routing with the native driver (memory serving, sends, barriers) and,
in the same run, a pure C++ clock loop over the same Verilated vault models
(same executable, ``native`` mode: no memory serving, no bookkeeping) for the
same number of cycles; prints both cycles/s and their ratio.
"""

from __future__ import annotations

import argparse

from pimforge.gen.config import load_config
from pimforge.sim.capsnet.compiler import compile_routing
from pimforge.sim.capsnet.distribution import choose_distribution
from pimforge.sim.capsnet.networks import network
from pimforge.sim.capsnet.rtl_run import build_vault_driver, native_loop, run_on_rtl
from pimforge.sim.capsnet.run_cli import _inputs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", default="Caps-MN1")
    ap.add_argument("--scale", type=int, default=32)
    ap.add_argument("--config", default=None)
    a = ap.parse_args()
    cfg = load_config(a.config)
    net = network(a.net).scaled(a.scale)
    comp = compile_routing(net, choose_distribution(net, cfg).best, cfg)
    u, W = _inputs(net, 1)
    mems = comp.memories(u, W)
    exe = build_vault_driver(cfg)
    r = run_on_rtl(comp, mems, cfg, exe=exe)
    nat_s = native_loop(comp, mems, cfg, r.cycles, exe=exe)
    drv, nat = r.cycles / r.seconds, r.cycles / nat_s
    print(f"{net.name} x{comp.vaults} vaults: {r.cycles} cycles; driver {drv:,.0f} cycles/s, "
          f"native loop {nat:,.0f} cycles/s, ratio {drv / nat:.2f}")


if __name__ == "__main__":
    main()
