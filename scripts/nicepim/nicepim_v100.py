"""NicePIM Sec. VIII-C: the NicePIM design against a V100 MODEL (a roofline, not a measurement).

The paper runs the five networks on a Tesla V100 (batch 1 to 1024, the best latency per
sample) and on the 4x8-node NicePIM design it found (preset ``nicepim_gpu``: 128x8 PEs,
16/144/32 KiB buffers a node, batch 1 to 16), scales the GPU's latency by area,
frequency and technology node, and reports NicePIM 25x lower on average. No GPU is run
here. The V100 side, every constant stated:

* peaks: ``V100`` of :mod:`pimforge.sim.capsnet.gpu_roofline` (5120 FP32 lanes x 2
  FLOP x 1.530 GHz = 15.67 TFLOP/s, 900 GB/s HBM2; NVIDIA's V100 datasheet) and the
  same memory with the 125 TFLOP/s of the tensor cores (FP16 inputs, the datasheet's
  "deep learning" peak) -- the paper does not say which precision it ran, so both;
* every layer of :mod:`pimforge.sim.nicepim.networks` is one kernel taking
  ``max(FLOPs / peak, bytes / bandwidth) + launch``: FLOPs ``2 MACs`` (a layer without
  MACs one per output element and window point), bytes its inputs, output and weights
  once each at 2 (FP16) or 4 (FP32) bytes an element, the weights read once per batch
  (an attention product's second operand once per sample); ``launch`` = 5 us a kernel
  (an assumption: CUDA's launch latency is a few microseconds; ``--launch-us``);
  the roofline assumes the peaks are reached, so the GPU side is optimistic;
* batch: the best time per sample over 1, 2, 4, ..., 1024 (memory capacity ignored).

NicePIM's side is PIM-Mapper's best latency per sample on ``nicepim_gpu`` at its
400 MHz over the batches of ``--pim-batches`` (default 1, 2, 4, 8, 16, as the paper's
1 to 16; the LM may split the batch over the nodes), with the node
model of the node's RTL (``--node rtl``) or a what-if of
:class:`pimforge.sim.nicepim.mapper.WhatIfNodeModel` (``--node ideal``: the engine
without each tile's fill and drain and a DMA at the banks' width, closer to the
simulators the paper's design was chosen with).

Scaling ("with the area, frequency and technology node", Sec. VIII-C): the GPU's
latency is multiplied by ``(A_gpu (28/12)^2 / A_pim) (f_gpu / f_pim)``: the V100's die
(815 mm^2, TSMC 12 nm; NVIDIA's Volta whitepaper) grown to 28 nm by the ideal area
rule (:func:`pimforge.gen.area.node_scale`) over the NN engines' area, times 1530 MHz
over 400 MHz. ``A_pim`` is by default our area model's area of the config's engines
(``--area model``: :func:`pimforge.sim.nicepim.area.total_area_mm2`, 69.6 mm^2 for
``nicepim_gpu``), or the 48 mm^2 the engines may take by Table II (``--area paper``).
The paper does not give its formula; this is one reading of it, and the raw ratio is
printed beside the scaled one.

Calibration (``--measured FILE``, by default the H200 measurement kept in
``scripts/gpu/measured/gpu.json``; ``--measured none`` for the bare roofline): each
network's roofline time is multiplied by how much slower the measured GPU ran that
network, in that precision, than the same roofline at its own measured peaks
(:func:`pimforge.sim.gpu_measured.dnn_calibration`: 0.93-1.6x in FP32, 3.1-6.1x in
FP16 on the H200), i.e. the V100 is assumed to fall short of its peaks as the H200
did. Both the roofline and the calibrated ratios are printed.

    python scripts/nicepim/nicepim_v100.py [--nets vgg16,...] [--launch-us 5]
                                   [--pim-batches 1,2,4,8,16]
                                   [--node rtl|ideal|ideal-engine|ideal-dma]
                                   [--area model|paper] [--measured FILE|none]
                                   [--json build/nicepim_v100.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pimforge.gen.area import node_scale
from pimforge.gen.args import number_range
from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.sim.capsnet.gpu_roofline import V100
from pimforge.sim.gpu_measured import dnn_calibration, load
from pimforge.sim.nicepim import mapper
from pimforge.sim.nicepim import networks as nets
from pimforge.sim.nicepim.area import AREA_CONSTRAINT_MM2, total_area_mm2
from pimforge.sim.nicepim.gpu_roofline import V100_TENSOR, best_per_sample

V100_AREA_MM2, V100_NM, V100_MHZ = 815.0, 12.0, 1530.0
MEASURED = Path(__file__).resolve().parents[1] / "gpu" / "measured" / "gpu.json"
PIM_NM = 28.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default=",".join(nets.network_names()))
    p.add_argument("--config", default="nicepim_gpu")
    p.add_argument("--launch-us", type=number_range(0.0, 1000.0), default=5.0)
    p.add_argument("--node", choices=tuple(mapper.WHAT_IF), default="rtl")
    p.add_argument("--pim-batches", default="1,2,4,8,16",
                   help="NicePIM's batch sizes to try (default 1,2,4,8,16)")
    p.add_argument("--area", choices=("model", "paper"), default="model",
                   help="the PIM side's area: our area model's for --config (default) or "
                        "Table II's 48 mm^2 budget")
    p.add_argument("--measured", default=str(MEASURED),
                   help="a gpu_measure.py output whose per-network shortfall from its own "
                        "roofline calibrates the V100's (default: the kept H200 "
                        "measurement; 'none': the bare roofline)")
    p.add_argument("--json", default="build/nicepim_v100.json")
    args = p.parse_args()
    try:
        calib = {} if args.measured == "none" else dnn_calibration(load(args.measured))
    except PimforgeError as e:
        p.error(f"--measured: {e}")
    try:
        pim_batches = [int(x) for x in args.pim_batches.split(",")]
    except ValueError:
        pim_batches = []
    if not pim_batches or min(pim_batches) < 1:
        p.error(f"--pim-batches must be batch sizes like 1,4,16, not {args.pim_batches!r}")
    cfg = load_config(args.config)
    f_pim = cfg.freq_mhz
    pim_area = (float(total_area_mm2(cfg.nicepim)) if args.area == "model"
                else AREA_CONSTRAINT_MM2)
    scale = (V100_AREA_MM2 * node_scale(PIM_NM, V100_NM) / pim_area) * (V100_MHZ / f_pim)
    print(f"scale on the GPU's latency: ({V100_AREA_MM2:.0f} mm^2 x "
          f"{node_scale(PIM_NM, V100_NM):.2f} / {pim_area:.1f} mm^2, {args.area}) x "
          f"({V100_MHZ:.0f} / {f_pim:.0f} MHz) = {scale:.1f}")
    print(f"{'network':10s} {'NicePIM ms':>10s} {'b':>3s} {'FP16 ms':>8s} {'b':>5s} "
          f"{'FP32 ms':>8s} {'b':>5s} {'raw FP16':>8s} {'scaled FP16':>11s} "
          f"{'scaled FP32':>11s} {'cal FP16':>8s} {'cal FP32':>8s} {'s':>5s}")
    rows = []
    for name in args.nets.split(","):
        net = nets.network(name)
        t0 = time.perf_counter()
        model = mapper.node_model(cfg, args.node)
        try:
            ms = {b: mapper.map_network(net.batched(b), cfg, model=model) for b in pim_batches}
        except PimforgeError as e:
            print(f"{name:10s} does not map: {e}", flush=True)
            rows.append({"network": name, "error": str(e)})
            continue
        b_pim = min(ms, key=lambda b: ms[b].latency_cycles / b)
        pim_s = ms[b_pim].latency_cycles / b_pim / (f_pim * 1e6)
        row = {"network": name, "nicepim_s": pim_s, "nicepim_batch": b_pim,
               "nicepim_cycles": ms[b_pim].latency_cycles,
               "nicepim_s_by_batch": {b: x.latency_cycles / b / (f_pim * 1e6)
                                      for b, x in ms.items()}}
        for label, gpu, wb in (("fp16", V100_TENSOR, 2), ("fp32", V100, 4)):
            per, b = best_per_sample(net, gpu, wb, args.launch_us * 1e-6)
            cal = calib.get((name, label))
            row[label] = {"gpu": gpu.name, "seconds_per_sample": per, "batch": b,
                          "raw_ratio": per / pim_s, "scaled_ratio": per * scale / pim_s,
                          "calibration": cal,
                          "calibrated_ratio": per * cal * scale / pim_s if cal else None}
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(f"{name:10s} {pim_s * 1e3:10.3f} {b_pim:3d} "
              f"{row['fp16']['seconds_per_sample'] * 1e3:8.3f} "
              f"{row['fp16']['batch']:5d} {row['fp32']['seconds_per_sample'] * 1e3:8.3f} "
              f"{row['fp32']['batch']:5d} {row['fp16']['raw_ratio']:8.3f} "
              f"{row['fp16']['scaled_ratio']:11.1f} {row['fp32']['scaled_ratio']:11.1f} "
              f"{_cal(row['fp16']):>8s} {_cal(row['fp32']):>8s} "
              f"{row['seconds']:5.1f}", flush=True)
        write_json(args.json, {"scale": scale, "pim_area_mm2": pim_area, "area": args.area,
                               "launch_us": args.launch_us, "measured": args.measured,
                               "node": args.node, "rows": rows})
    ok = [r for r in rows if "error" not in r]
    for label in ("fp16", "fp32") if ok else ():
        avg = sum(r[label]["scaled_ratio"] for r in ok) / len(ok)
        cal = [r[label]["calibrated_ratio"] for r in ok if r[label]["calibrated_ratio"]]
        print(f"average scaled ratio, {label}: {avg:.1f}x"
              + (f", calibrated {sum(cal) / len(cal):.1f}x over {len(cal)}" if cal else "")
              + " (paper: 25x)")


def _cal(r: dict) -> str:
    return "-" if r["calibrated_ratio"] is None else f"{r['calibrated_ratio']:.1f}"


if __name__ == "__main__":
    main()
