"""``pimforge run dnn``: a NicePIM network mapped onto the array and run on its RTL.

``pimforge run dnn --net NAME [--config C] [--mapper nicepim|baseline] [--scale S]
[--layers N] [--seed N] [--dump DIR] --json OUT`` scales the network by ``S``
(:func:`~pimforge.sim.nicepim.dnn_run.scale_network`), maps it with PIM-Mapper or the
baseline on the config's array and runs every layer with MACs on the Verilated array,
each checked against numpy bit for bit, with the cost model's cycles beside the RTL's
(:mod:`pimforge.sim.nicepim.dnn_run`). ``--scale 1`` is the full network: nothing
runs, the mapper's modelled cycles are reported, labelled as the model.

``--dump DIR`` writes, per layer, ``DIR/<layer>/input.npy`` (int16, NCHW),
``weight.npy`` (int16, ``(K, C/groups, R, S)``; a matmul as a 1x1 convolution; layers
with MACs only), ``output.npy`` (int32, NKPQ: the RTL's raw accumulations, before any
post-operation; for a layer on the host its raw result) and ``layer.json`` (``kind``,
``stride``, ``padding``, ``groups``, ``inputs`` (the layers it reads; ``input.npy`` is
the first's output), the shapes, where it ran, and the post-operations applied before
the next layer).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from tqdm import tqdm

from pimforge.gen.args import add_waves_options, int_range, nonempty, out_dir, seed, waves_window
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import FileSet
from pimforge.gen.provenance import stamp

from ..result import WorkloadResult
from .dnn_run import map_scaled, run_network, scale_network
from .networks import network, network_names
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``dnn`` workload's own options."""
    p.add_argument("--net", required=True, type=nonempty,
                   help=f"network: {', '.join(network_names())}")
    p.add_argument("--mapper", choices=["nicepim", "baseline"], default="nicepim",
                   help="PIM-Mapper (default) or the Sec. VIII-B baseline")
    p.add_argument("--scale", type=int_range(1, 1024), default=8, metavar="S",
                   help="divide the input's height and width and every channel count by S "
                        "and run on the RTL (default 8); 1: the full network, model only")
    p.add_argument("--layers", type=int_range(1, 100_000), metavar="N",
                   help="only the first N layers after the input")
    p.add_argument("--seed", type=seed, default=1, help="seed of the inputs and weights")
    p.add_argument("--dump", type=out_dir,
                   help="write per layer input/weight/output .npy and layer.json here")
    add_waves_options(p)        # the array's waves of the first layer with MACs


@dataclass(frozen=True)
class DnnResult(WorkloadResult):
    """A run of ``pimforge run dnn`` (schema ``pimforge.run.dnn``).

    ``engine`` is ``"rtl"`` (layers with MACs ran on the Verilated array; ``cycles_rtl``
    is measured, ``cycles_model`` the cost model's) or ``"model"`` (``--scale 1``:
    only the model's cycles)."""

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
        return "\n".join(lines)


_EXES: dict = {}


def array_driver(config):
    """The Verilated array of *config*, elaborated and built (or found in the build cache)
    once per process."""
    if config not in _EXES:
        _EXES[config] = build_array_driver(config)
    return _EXES[config]


def prepare(args: argparse.Namespace, config) -> None:
    """Build the Verilated array of *config* into the build cache (``pimforge sweep``)."""
    if args.scale > 1:
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


def run(args: argparse.Namespace, config) -> DnnResult:
    waves = waves_window(args)
    if waves is not None and args.scale == 1:
        raise PimforgeError("--waves needs a run on the RTL: give --scale 2 or more")
    if args.dump is not None and args.scale == 1:
        raise PimforgeError("--dump needs a run on the RTL: give --scale 2 or more (--scale 1 "
                            "is the full network through the cost model only)")
    net = scale_network(network(args.net), args.scale, args.layers)
    mapping = map_scaled(net, config, args.mapper, args.scale)     # before any build
    exe = array_driver(config) if args.scale > 1 and waves is None else None
    if waves is not None:
        exe = build_array_driver(config, trace=True)
    # A bar on a terminal's stderr only (disable=None): logs and pipes stay clean.
    bar = tqdm(total=len(net.layers), desc=f"{args.net} layers", unit="layer", disable=None,
               leave=False)

    def progress(name: str) -> None:
        bar.set_postfix_str(name, refresh=False)
        bar.update()

    try:
        r = run_network(net, config, mapper=args.mapper, scale=args.scale, seed=args.seed,
                        exe=exe, keep=args.dump is not None, progress=progress,
                        mapping=mapping, waves=waves)
    finally:
        bar.close()
    if args.dump is not None:
        for lr in r.layers:
            _dump(args.dump, lr, config)
    return DnnResult(network=args.net, config=config.name, mapper=r.mapping.mapper,
                     scale=args.scale, scaled=r.scaled, engine=r.engine, seed=args.seed,
                     layers=[lr.to_json() for lr in r.layers], totals=r.totals,
                     host_work=list(HOST_WORK))
