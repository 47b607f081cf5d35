"""GPU measurements beside the GPU models that stand in for them.

The GPU baselines of PIM-CapsNet (:mod:`pimforge.sim.capsnet.gpu_roofline`,
:mod:`pimforge.sim.capsnet.gpu_eager`) and NicePIM
(:mod:`pimforge.sim.nicepim.gpu_roofline`) are models of GPUs the project has no access
to (the papers' P100 and V100). ``scripts/gpu/gpu_measure.py`` measures the same workloads
on a GPU at hand; this module evaluates the models at that GPU's *measured* peaks (copy
bandwidth, FP32 and FP16 matrix-product rates, the time of one eager op as the launch
overhead) and sets them beside the measurements, so that what each model leaves out
shows as a ratio on a real GPU:

* CapsNet routing: the eager model (every op a kernel, materialized broadcasts, a
  launch overhead each) against eager PyTorch, the same model without launches against
  the same kernels replayed as a CUDA graph, the roofline (a lower bound) against both;
  the model's launch count against the profiler's kernel count;
* DNN inference: the roofline's best time per sample over batches 1-1024 against the
  measured best (eager, and as a CUDA graph) in FP32 (TF32 off) and FP16.

``python scripts/gpu/gpu_report.py [--json FILE]`` prints the tables.
"""

from __future__ import annotations

import json
from pathlib import Path

from pimforge.gen.errors import PimforgeError

from .capsnet.gpu_eager import eager
from .capsnet.gpu_roofline import GPU, roofline
from .capsnet.networks import network as capsnet
from .nicepim.gpu_roofline import best_per_sample
from .nicepim.networks import network as dnn

__all__ = ["MeasurementError", "capsnet_rows", "dnn_calibration", "dnn_rows", "load",
           "measured_gpu", "report", "routing_seconds"]


class MeasurementError(PimforgeError):
    """A measurement file that is not what ``scripts/gpu/gpu_measure.py`` writes."""


def load(path: str | Path) -> dict:
    """The measurement JSON at *path*, checked for the parts the report reads."""
    p = Path(path)
    try:
        meas = json.loads(p.read_text())
    except FileNotFoundError:
        raise MeasurementError(f"{p}: no such file; run scripts/gpu/gpu_measure.py on a GPU "
                               "first or pass --json") from None
    except json.JSONDecodeError as e:
        raise MeasurementError(f"{p}: not JSON ({e})") from None
    for key in ("device", "peaks"):
        if key not in meas:
            raise MeasurementError(f"{p}: no {key!r} part; it is not a gpu_measure.py output")
    return meas


def measured_gpu(meas: dict, precision: str = "fp32") -> GPU:
    """The measured GPU as a model's :class:`GPU`: its matrix-product rate in *precision*
    and its copy bandwidth."""
    pk = meas["peaks"]
    return GPU(f"{meas['device']['name']} ({precision}, measured)",
               pk[f"{precision}_matmul_flops_per_s"], pk["copy_bytes_per_s"])


def routing_seconds(meas: dict, name: str) -> float | None:
    """Measured eager routing time of Table 1 network *name* at full size (None where the
    measurement has no full-size run of it)."""
    if meas["device"].get("capsnet_scale", 1) != 1:
        return None
    m = meas.get("capsnet", {}).get(name)
    return m["routing"]["median_s"] if m else None


def capsnet_rows(meas: dict) -> list[dict]:
    """Per measured CapsNet: measured times (s) and kernels beside the models'."""
    gpu = measured_gpu(meas, "fp32")
    launch = meas["peaks"]["eager_op_s"]
    scale = meas["device"].get("capsnet_scale", 1)
    rows = []
    for name, m in meas.get("capsnet", {}).items():
        net = capsnet(name)
        net = net.scaled(scale) if scale > 1 else net
        e = eager(net, gpu, launch)
        e0 = eager(net, gpu, 0.0)
        r = roofline(net, gpu)
        rows.append({
            "network": name,
            "measured_routing_s": m["routing"]["median_s"],
            "measured_graph_s": m.get("routing_graph", {}).get("median_s"),
            "measured_whole_s": m["whole"]["median_s"],
            "measured_kernels": m["routing"]["kernels"],
            "measured_routing_share": m["routing_share"],
            "eager_s": e.routing_s, "eager_no_launch_s": e0.routing_s,
            "eager_launches": e.routing_launches, "eager_share": e.routing_share,
            "roofline_s": r.routing_s,
            "matches_reference": m["check"]["matches_reference"],
        })
    return rows


def dnn_rows(meas: dict) -> list[dict]:
    """Per measured network and precision: best measured time per sample beside the
    roofline's at the measured peaks (with the measured launch overhead, and without)."""
    launch = meas["peaks"]["eager_op_s"]
    rows = []
    for key, m in meas.get("dnn", {}).items():
        name, prec = key.split("/")
        net = dnn(name)
        gpu = measured_gpu(meas, prec)
        wb = 2 if prec == "fp16" else 4
        model, mb = best_per_sample(net, gpu, wb, launch)
        model0, mb0 = best_per_sample(net, gpu, wb, 0.0)
        row = {"network": name, "precision": prec, "model_s": model, "model_batch": mb,
               "model_no_launch_s": model0, "model_no_launch_batch": mb0,
               "errors": m.get("errors", {})}
        for mode in ("eager", "graph"):
            best = m.get("best", {}).get(mode)
            row[f"{mode}_s"] = best["seconds_per_sample"] if best else None
            row[f"{mode}_batch"] = best["batch"] if best else None
        rows.append(row)
    return rows


def dnn_calibration(meas: dict) -> dict[tuple[str, str], float]:
    """Per measured network and precision, how much slower the GPU ran than the roofline
    at its own measured peaks says: the best measured time per sample (eager or CUDA
    graph, whichever is faster) over the model's (with the measured launch overhead).
    Multiplying another GPU's roofline by it assumes that GPU falls short of its peaks
    as the measured one did."""
    out = {}
    for r in dnn_rows(meas):
        best = min((x for x in (r["eager_s"], r["graph_s"]) if x), default=None)
        if best and r["model_s"]:
            out[(r["network"], r["precision"])] = best / r["model_s"]
    return out


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.3f}"


def _cell(s: float | None, b: int | None) -> str:
    return "-" if s is None else f"{s * 1e3:.3f} ({b})"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def _mean_row(rows: list[dict]) -> str:
    def mean(a: str, b: str) -> str:
        xs = [r[a] / r[b] for r in rows if r[a] is not None and r[b]]
        return f"{sum(xs) / len(xs):.2f}x" if xs else "-"
    return (f"| mean of {len(rows)} | | | {mean('measured_routing_s', 'eager_s')} | | | "
            f"{mean('measured_graph_s', 'eager_no_launch_s')} | | "
            f"{mean('measured_routing_s', 'roofline_s')} | | | |")


def report(meas: dict) -> str:
    """Markdown tables of :func:`capsnet_rows` and :func:`dnn_rows`."""
    d, pk = meas["device"], meas["peaks"]
    out = [f"Measured on {d['name']} (PyTorch {d['torch']}, CUDA {d['cuda']}): copy "
           f"{pk['copy_bytes_per_s'] / 1e9:,.0f} GB/s, FP32 matmul "
           f"{pk['fp32_matmul_flops_per_s'] / 1e12:.1f} TFLOP/s (TF32 off), FP16 "
           f"{pk['fp16_matmul_flops_per_s'] / 1e12:.1f} TFLOP/s, one eager op "
           f"{pk['eager_op_s'] * 1e6:.1f} us. The models below are evaluated at these "
           "measured peaks."]
    rows = capsnet_rows(meas)
    if rows:
        scale = d.get("capsnet_scale", 1)
        size = f"Table 1 sizes / {scale}" if scale > 1 else "Table 1 sizes"
        out += ["", f"CapsNet routing ({size}), ms:", "",
                "| network | measured eager | eager model | meas./model | measured graph | "
                "model w/o launches | meas./model | roofline | eager / roofline | kernels "
                "meas. / model | routing share meas. / model | matches f64 ref. |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            out.append(
                f"| {r['network']} | {_ms(r['measured_routing_s'])} | {_ms(r['eager_s'])} | "
                f"{_ratio(r['measured_routing_s'], r['eager_s'])} | "
                f"{_ms(r['measured_graph_s'])} | {_ms(r['eager_no_launch_s'])} | "
                f"{_ratio(r['measured_graph_s'], r['eager_no_launch_s'])} | "
                f"{_ms(r['roofline_s'])} | "
                f"{_ratio(r['measured_routing_s'], r['roofline_s'])} | "
                f"{r['measured_kernels']} / {r['eager_launches']} | "
                f"{100 * r['measured_routing_share']:.1f} % / {100 * r['eager_share']:.1f} % | "
                f"{'yes' if r['matches_reference'] else 'NO'} |")
        out.append(_mean_row(rows))
    prof = meas.get("routing_profile")
    if prof:
        total = sum(k["seconds"] for k in prof["kernels"])
        out += ["", f"Where the GPU time of one {prof['network']} routing goes (profiler, "
                f"{total * 1e3:.3f} ms of kernels):", "",
                "| kernel | launches | ms | share |", "|---|---|---|---|"]
        for k in prof["kernels"][:6]:
            name = k["name"].replace("|", "/")
            name = name if len(name) <= 70 else name[:67] + "..."
            out.append(f"| `{name}` | {k['launches']} | {k['seconds'] * 1e3:.3f} | "
                       f"{100 * k['seconds'] / total:.1f} % |")
    rows = dnn_rows(meas)
    if rows:
        out += ["", "DNN inference, best ms per sample (batch) over batches 1-1024:", "",
                "| network | precision | measured eager | measured graph | roofline model | "
                "model w/o launches | graph / model w/o launches |",
                "|---|---|---|---|---|---|---|"]
        for r in rows:
            out.append(f"| {r['network']} | {r['precision']} | "
                       f"{_cell(r['eager_s'], r['eager_batch'])} | "
                       f"{_cell(r['graph_s'], r['graph_batch'])} | "
                       f"{_cell(r['model_s'], r['model_batch'])} | "
                       f"{_cell(r['model_no_launch_s'], r['model_no_launch_batch'])} | "
                       f"{_ratio(r['graph_s'], r['model_no_launch_s'])} |")
    for what in meas.get("skipped", []):
        out.append(f"\nnot measured: {what}")
    return "\n".join(out)
