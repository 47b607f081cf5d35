"""Speed of the NicePIM array's native driver against a bare native loop on the same model.

    python scripts/nicepim/nicepim_speed.py --config nicepim_small

Runs one convolution layer (``--layer C,H,W,CO,K``, stride 1, padding 1, input in
NCHW[C8]) partitioned over every node of the array by output rows, node 0 sharing the
input rows and the weights over the NoC (:func:`pimforge.sim.nicepim.rtl_run.conv_layer_tasks`),
checks it against numpy, and prints the driver's speed (array cycles per second of
wall time, and node-cycles per second: the former times the nodes) next to the bare
loop's: the same Verilated model clocked from the same start for the same number of
cycles with nothing else done.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

from pimforge.gen.config import load_config
from pimforge.rtl.nicepim.params import Layout
from pimforge.sim.nicepim.rtl_run import conv_layer_tasks, read_tensor, run_array
from pimforge.verif.models.nicepim import conv2d, wrap32

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_table  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="nicepim_small")
    ap.add_argument("--layer", default="16,32,12,4,3", help="C,H,W,CO,K")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    n = cfg.nicepim
    C, H, W, CO, K = (int(v) for v in args.layer.split(","))
    r = random.Random(args.seed)
    x = np.array([r.randint(-2000, 2000) for _ in range(C * H * W)]).reshape(1, C, H, W)
    w = np.array([r.randint(-2000, 2000) for _ in range(CO * C * K * K)]).reshape(CO, C, K, K)
    # Input from byte 0, weights from a quarter of the node's DRAM, outputs from half.
    w_base = n.node_bytes // 4 // 2          # 16-bit elements
    o_base = n.node_bytes // 2 // 4          # 32-bit elements
    plan = conv_layer_tasks(cfg, x, w, stride=1, pad=1, x_layout=Layout.NCHWC8, x_base=0,
                            w_base=w_base, o_base=o_base)
    run = run_array(cfg, plan.tasks, plan.dram, bare=True)
    ref = wrap32(conv2d(x[0], w, pad=1))
    got = np.zeros_like(ref)
    for k, (lo, hi) in enumerate(plan.bands):
        out = read_tensor(run.dram[k], Layout.NCHW, (1, *ref.shape), o_base,
                          n.node_bank_bits)[0]
        got[:, lo:hi] = out[:, lo:hi]
    ok = np.array_equal(got, ref)
    print("\n".join(md_table(
        ["config", "nodes", "layer C,H,W,CO,K", "cycles", "driver, cycles/s",
         "bare native loop, cycles/s", "driver/bare", "node-cycles/s"],
        [[f"`{cfg.name}`", n.nodes, args.layer, f"{run.cycles:,}", f"{run.cycles_per_s:,.0f}",
          f"{run.bare_cycles_per_s:,.0f}", f"{run.cycles_per_s / run.bare_cycles_per_s:.0%}",
          f"{run.cycles_per_s * n.nodes:,.0f}"]])))
    print(f"numpy match: {ok}; shared words {plan.shared_words}; engine busy "
          f"{run.perf['eng_busy']}, DMA busy {run.perf['dma_busy']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
