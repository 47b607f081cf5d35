"""``pimforge run dnn``: a NicePIM network mapped onto the array and run on its RTL.

``pimforge run dnn --net NAME [--config C] [--mapper nicepim|baseline] [--scale S]
[--layers N] [--seed N] [--dump DIR] --json OUT`` scales the network by ``S``
(:func:`~pimforge.sim.nicepim.dnn_run.scale_network`), maps it with PIM-Mapper or the
baseline on the config's array and runs every layer with MACs on the Verilated array,
each checked against numpy bit for bit, with the cost model's cycles beside the RTL's
(:mod:`pimforge.sim.nicepim.dnn_run`). ``--scale 1`` is the full network: nothing
runs, the mapper's modelled cycles are reported, labelled as the model.

``pimforge run dnn --onnx MODEL.onnx ...`` runs the user's own float model instead
(:mod:`pimforge.sim.nicepim.onnx_import`: the operators it maps, BatchNormalization
folded) at its own size on the RTL: ``--scale`` does not apply (giving it is an error),
``--layers N`` keeps its first N layers. The input is drawn from
``numpy.random.default_rng(seed)`` (standard normal) and, with the weights, quantized
per tensor (:func:`~pimforge.sim.nicepim.dnn_run.quantize`); ``totals.float_check``
compares the dequantized output with the float model's (``onnx.reference``) on that
input. An operator it cannot map is one line naming it and its node.

``--dump DIR`` writes, per layer, ``DIR/<layer>/input.npy`` (int16, NCHW),
``weight.npy`` (int16, ``(K, C/groups, R, S)``; a matmul as a 1x1 convolution; layers
with MACs only), ``output.npy`` (int32, NKPQ: the RTL's raw accumulations, before any
post-operation; for a layer on the host its raw result) and ``layer.json`` (``kind``,
``stride``, ``padding``, ``groups``, ``inputs`` (the layers it reads; ``input.npy`` is
the first's output), the shapes, where it ran, and the post-operations applied before
the next layer; with ``--onnx`` the first is the ``bias`` added to the raw sums).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from tqdm import tqdm

from pimforge.gen.args import (
    add_waves_options,
    in_file,
    int_range,
    nonempty,
    out_dir,
    seed,
    waves_window,
)
from pimforge.gen.errors import CapacityError, PimforgeError
from pimforge.gen.output import FileSet
from pimforge.gen.provenance import stamp

from ..result import OMIT_IF_NONE, WorkloadResult
from .dnn_run import COMPUTE, map_scaled, run_network, scale_network
from .networks import Network, network, network_names
from .onnx_import import calibration_input, float_check, load_onnx
from .rtl_run import build_array_driver

__all__ = ["PREPARE_OPTIONS", "DnnResult", "add_arguments", "array_driver", "prepare", "run"]

#: The options :func:`prepare`'s build depends on besides the config.
PREPARE_OPTIONS = ("scale",)

#: What runs on the host, said in every result.
HOST_WORK = (
    "places each node's input window and weights in its DRAM and reads its raw outputs "
    "(the Data-Scheduler's sharing is modelled, not run)",
    "adds the partial sums of a layer split over input channels (a node cannot add "
    "tensors in DRAM); they reach one node of the C set over the NoC on the RTL "
    "(SEND/WAIT, gather_cycles_rtl) and are read there",
    "post-operations and the requantization to 16 bits (bn folded: identity; relu; leaky "
    "slope 1/8; attention scale as a shift; gelu/tanh integer stand-ins)",
    "layers without MACs in numpy: pools, additions, concatenations; BERT's embedding, "
    "layer normalization and softmax as integer stand-ins",
)
#: What the host adds for an ``--onnx`` model.
ONNX_HOST_WORK = (
    "quantizes the float input and each layer's weights per tensor, symmetric to +-127 "
    "(scale max|x| / 127), and each bias to round(b / (s_in s_w)), added before the "
    "post-operations; brings the inputs of an addition or concatenation to their largest "
    "scale",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``dnn`` workload's own options."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--net", type=nonempty,
                       help=f"network: {', '.join(network_names())}")
    which.add_argument("--onnx", type=in_file, metavar="MODEL.onnx",
                       help="your own float ONNX model (Conv, Gemm, MatMul, BatchNormalization, "
                            "Relu, MaxPool, AveragePool, GlobalAveragePool, Add, Concat, "
                            "Flatten, Reshape), quantized per tensor, at its own size on the RTL")
    p.add_argument("--mapper", choices=["nicepim", "baseline"], default="nicepim",
                   help="PIM-Mapper (default) or the Sec. VIII-B baseline")
    p.add_argument("--scale", type=int_range(1, 1024), metavar="S",
                   help="--net: divide the input's height and width and every channel count "
                        "by S and run on the RTL (default 8); 1: the full network, model only "
                        "(not with --onnx)")
    p.add_argument("--layers", type=int_range(1, 100_000), metavar="N",
                   help="only the first N layers after the input")
    p.add_argument("--seed", type=seed, default=1,
                   help="seed of the inputs and weights (--onnx: of the input)")
    p.add_argument("--dump", type=out_dir,
                   help="write per layer input/weight/output .npy and layer.json here")
    add_waves_options(p)        # the array's waves of one layer with MACs
    p.add_argument("--waves-layer", metavar="LAYER",
                   help="the layer whose array run --waves records (default: the first "
                        "layer with MACs; `pimforge run dnn --net NET --scale S` lists them)")


@dataclass(frozen=True)
class DnnResult(WorkloadResult):
    """A run of ``pimforge run dnn`` (schema ``pimforge.run.dnn``).

    ``engine`` is ``"rtl"`` (layers with MACs ran on the Verilated array; ``cycles_rtl``
    is measured, ``cycles_model`` the cost model's) or ``"model"`` (``--scale 1``:
    only the model's cycles). ``onnx``: the ``--onnx`` model's path (then ``scale`` is 1:
    the model at its own size, on the RTL)."""

    SCHEMA: ClassVar[str] = "pimforge.run.dnn"
    SCHEMA_VERSION: ClassVar[int] = 1

    network: str
    config: str
    mapper: str
    scale: int
    scaled: str
    engine: str
    seed: int
    layers: list[dict] = field(default_factory=list)
    totals: dict = field(default_factory=dict)
    host_work: list[str] = field(default_factory=list)
    onnx: str | None = field(default=None, metadata=OMIT_IF_NONE)

    @property
    def ok(self) -> bool:
        return all(x["matches_reference"] is not False for x in self.layers)

    def summary(self) -> str:
        t = self.totals
        head = (f"NicePIM {self.scaled} on {self.config}, mapper {self.mapper}, "
                f"{'RTL' if self.engine == 'rtl' else 'MODEL ONLY (full size)'}")
        lines = [head, f"{'layer':18s} {'kind':8s} {'on':5s} {'partition':16s} "
                       f"{'cycles RTL':>11s} {'cycles model':>12s} {'err':>7s} match"]
        for x in self.layers:
            rtl = "-" if x["cycles_rtl"] is None else f"{x['cycles_rtl']:,}"
            mod = "-" if x["cycles_model"] is None else f"{x['cycles_model']:,.0f}"
            err = "-" if x["model_error"] is None else f"{100 * x['model_error']:+.1f}%"
            ok = {None: "-", True: "yes", False: "NO"}[x["matches_reference"]]
            lines.append(f"{x['name']:18s} {x['kind']:8s} {x['runs_on']:5s} "
                         f"{x['partition'][:16]:16s} {rtl:>11s} {mod:>12s} {err:>7s} {ok}")
        if self.engine == "rtl":
            lines.append(f"total (mapping's schedule): RTL {t['cycles_rtl']:,.0f} cycles "
                         f"+ {t['gather_cycles_rtl']:,.0f} gathering partial sums on the NoC, "
                         f"model {t['cycles_model']:,.0f} (node task lists) + "
                         f"{t['share_cycles_model']:,.0f} sharing (modelled); energy "
                         f"{t['energy_pj_rtl'] / 1e6:.3f} uJ from the RTL's counters, "
                         f"{t['energy_pj_model'] / 1e6:.3f} uJ model; "
                         f"{'all layers bit-exact' if t['all_match_reference'] else 'MISMATCH'}")
        else:
            lines.append(f"total (model): {t['mapper_latency_cycles_model']:,.0f} cycles, "
                         f"{t['mapper_energy_pj_model'] / 1e6:.3f} uJ")
        for name, f in t.get("float_check", {}).items():
            rel = "-" if f["relative_error"] is None else f"{100 * f['relative_error']:.1f}%"
            lines.append(f"output {name} against the float model (onnx.reference): largest "
                         f"error {f['max_abs_error']:.4g} of {f['max_abs_float']:.4g} ({rel})")
        return "\n".join(lines)


_EXES: dict = {}


def array_driver(config):
    """The Verilated array of *config*, elaborated and built (or found in the build cache)
    once per process."""
    if config not in _EXES:
        _EXES[config] = build_array_driver(config)
    return _EXES[config]


def _scale(args: argparse.Namespace) -> int:
    """``--scale``, its default 8 for ``--net``; with ``--onnx`` (the model at its own size,
    on the RTL) it is refused."""
    if getattr(args, "onnx", None) is not None:
        if args.scale is not None:
            raise PimforgeError("--scale does not apply to --onnx: the model runs at its own "
                                "size; make it smaller or use --layers N")
        return 1
    return 8 if args.scale is None else args.scale


def prepare(args: argparse.Namespace, config) -> None:
    """Build the Verilated array of *config* into the build cache (``pimforge sweep``)."""
    if args.onnx is not None or _scale(args) > 1:
        array_driver(config)


def _dump(folder, lr, config) -> None:
    meta = {"name": lr.name, "kind": lr.kind, "runs_on": lr.runs_on, "stride": lr.stride,
            "padding": lr.padding, "groups": lr.groups, "inputs": lr.preds,
            "input_shape": lr.input_shape,
            "weight_shape": lr.weight_shape, "output_shape": lr.output_shape,
            "layout_in": lr.layout_in, "layout_out": lr.layout_out,
            "partition": lr.partition, "region": lr.region, "post": lr.post,
            "output": "raw 32-bit accumulations before the post-operations"
            if lr.runs_on == "rtl" else "the host's raw result before the post-operations"}
    with FileSet(folder / lr.name, "layer.json") as fs:
        np.save(fs.path("input.npy"), np.asarray(lr.input, dtype=np.int16)[None])
        if lr.weight is not None:
            np.save(fs.path("weight.npy"), np.asarray(lr.weight, dtype=np.int16))
        np.save(fs.path("output.npy"), np.asarray(lr.output, dtype=np.int32)[None])
        meta = stamp(meta, "pimforge.run.dnn.dump", 1, config)
        fs.path("layer.json").write_text(json.dumps(meta, indent=2) + "\n")


def _onnx(args: argparse.Namespace):
    """The ``--onnx`` model as a network (cut after ``--layers``) and its parameters with
    the calibration input."""
    net, params = load_onnx(args.onnx)
    if args.layers is not None and args.layers < len(net.layers) - 1:
        net = Network(net.name, net.layers[:args.layers + 1],
                      f"{net.doc}, first {args.layers} layers")
    return net, dataclasses.replace(params, input=calibration_input(net, args.seed))


def run(args: argparse.Namespace, config) -> DnnResult:
    scale = _scale(args)
    waves = waves_window(args)
    if waves is not None and scale == 1 and args.onnx is None:
        raise PimforgeError("--waves needs a run on the RTL: give --scale 2 or more")
    if args.dump is not None and scale == 1 and args.onnx is None:
        raise PimforgeError("--dump needs a run on the RTL: give --scale 2 or more (--scale 1 "
                            "is the full network through the cost model only)")
    params = None
    if args.onnx is not None:
        net, params = _onnx(args)
    else:
        net = scale_network(network(args.net), scale, args.layers)
    if args.waves_layer is not None:
        _check_waves_layer(net, args.waves_layer, waves)
    try:
        r = _run(args, config, net, scale, params, waves)
    except CapacityError as e:
        if params is None:
            raise
        # the node's hint names --scale, which an ONNX model does not take
        raise CapacityError(str(e).replace("use a larger --scale",
                                           "use a smaller model, --layers N")) from None
    totals = r.totals
    if params is not None:
        totals = totals | {"float_check": float_check(args.onnx, params, r.dequantized)}
    if args.dump is not None:
        for lr in r.layers:
            _dump(args.dump, lr, config)
    return DnnResult(network=net.name, config=config.name, mapper=r.mapping.mapper,
                     scale=scale, scaled=r.scaled, engine=r.engine, seed=args.seed,
                     layers=[lr.to_json() for lr in r.layers], totals=totals,
                     host_work=list(HOST_WORK) + (list(ONNX_HOST_WORK) if params else []),
                     onnx=None if args.onnx is None else str(args.onnx))


def _check_waves_layer(net: Network, name: str, waves) -> None:
    if waves is None:
        raise PimforgeError("--waves-layer picks the layer of --waves FILE.vcd; give --waves "
                            "too")
    macs = [lay.name for lay in net.layers if lay.kind in COMPUTE]
    if name not in macs:
        near = ", ".join(macs[:6]) + (f" ... ({len(macs)} in all)" if len(macs) > 6 else "")
        what = ("has no MACs (it runs on the host)" if name in net.by_name
                else f"is no layer of {net.name}")
        raise PimforgeError(f"--waves-layer {name!r} {what}; give a layer with MACs: {near}")


def _run(args: argparse.Namespace, config, net: Network, scale: int, params, waves):
    mapping = map_scaled(net, config, args.mapper, scale)     # before any build
    rtl = scale > 1 or params is not None
    exe = array_driver(config) if rtl and waves is None else None
    if waves is not None:
        exe = build_array_driver(config, trace=True)
    # A bar on a terminal's stderr only (disable=None): logs and pipes stay clean.
    bar = tqdm(total=len(net.layers), desc=f"{net.name} layers", unit="layer", disable=None,
               leave=False)

    def progress(name: str) -> None:
        bar.set_postfix_str(name, refresh=False)
        bar.update()

    try:
        return run_network(net, config, mapper=args.mapper, scale=scale, seed=args.seed,
                           exe=exe, keep=args.dump is not None, progress=progress,
                           mapping=mapping, params=params, rtl=rtl, waves=waves,
                           waves_layer=args.waves_layer)
    finally:
        bar.close()
