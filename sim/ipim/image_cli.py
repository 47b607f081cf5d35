"""``pimforge run image``: the Table II benchmarks on the iPIM cube.

``pimforge run image --bench {NAME,all} [--config C] [--photo NAME | --image PATH]
[--size WxH] [--opt LEVEL] [--param NAME=VALUE ...] [--engine rtl|iss] [--dump DIR]
--json OUT`` compiles each
benchmark, runs it on a real photograph (scikit-image's, resized) on the Verilated
cube and checks the output against the numpy reference
(:mod:`pimforge.verif.models.ipim.image`); ``--dump DIR`` writes ``DIR/<bench>/input.npy``,
``output.npy`` (the RTL's result, ``(rows, cols)``) and ``params.json`` (every
parameter the run used, the size-derived ones resolved).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from tqdm import tqdm

from pimforge.gen.args import add_waves_options, in_file, out_dir, waves_window
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import FileSet
from pimforge.gen.provenance import stamp
from pimforge.verif.models.ipim.image import BENCHES, check_input, check_param, resolve_params

from ..result import WorkloadResult
from .backend import OPT_LEVELS
from .image_benches import PIPELINES
from .image_run import cube_driver, run_bench
from .lang import CompileError
from .photos import PHOTOS, load_image, load_photo

__all__ = ["PREPARE_OPTIONS", "ImageResult", "add_arguments", "bench_params", "param_arg",
           "prepare", "run", "size_arg"]

#: The options :func:`prepare`'s build depends on besides the config.
PREPARE_OPTIONS = ("engine",)


def size_arg(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be WxH, e.g. 64x64, not {text!r}") from None
    if not (16 <= w <= 8192 and 4 <= h <= 8192):
        raise argparse.ArgumentTypeError(f"size {text} is out of range (W 16..8192, H 4..8192)")
    return w, h


def param_arg(text: str) -> tuple[str, int | float]:
    """``NAME=VALUE`` of ``--param``: a benchmark parameter, an int or a float."""
    k, sep, v = text.partition("=")
    if not sep or not k.isidentifier():
        raise argparse.ArgumentTypeError(f"--param takes NAME=VALUE (e.g. depth=3), not {text!r}")
    try:
        return k, int(v)
    except ValueError:
        pass
    try:
        x = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--param {k}: {v!r} is not a number") from None
    if not math.isfinite(x):          # nan, inf, or a literal past the float range
        raise argparse.ArgumentTypeError(f"--param {k}: {v!r} is not a finite number")
    return k, x


def bench_params(benches: list[str], given: list[tuple[str, int | float]] | None) -> dict:
    """``bench -> {parameter: value}`` of the ``--param`` values each of *benches* takes;
    a parameter none of them takes, one given twice or a value out of the benchmark's
    range is a one-line error."""
    names = [k for k, _ in given or []]
    twice = sorted({k for k in names if names.count(k) > 1})
    if twice:
        raise PimforgeError(f"--param {', '.join(twice)}: given twice; give each parameter once")
    given = dict(given or [])
    known = {k for b in benches for k in BENCHES[b].params}
    unknown = sorted(set(given) - known)
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise PimforgeError(f"--param {', '.join(unknown)}: not a parameter of "
                            f"{', '.join(benches)} (they take: {takes})")
    out = {b: {k: v for k, v in given.items() if k in BENCHES[b].params} for b in benches}
    for b, ps in out.items():
        for k, v in ps.items():
            check_param(b, k, v)
    return out


def _bench_names(text: str) -> list[str]:
    if text == "all":
        return [b for b in BENCHES if b in PIPELINES]
    if text not in BENCHES:
        raise argparse.ArgumentTypeError(f"unknown benchmark {text!r}; choose all or one of "
                                         f"{', '.join(BENCHES)}")
    return [text]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bench", type=_bench_names, required=True, metavar="{NAME,all}",
                   help=f"Table II benchmark: {', '.join(BENCHES)}, or all")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--photo", choices=PHOTOS, default="camera",
                     help="scikit-image photograph (default camera)")
    src.add_argument("--image", type=in_file, help="PNG, JPEG or .npy file instead of a photo")
    p.add_argument("--size", type=size_arg, default=(64, 64), metavar="WxH",
                   help="resize the input to this (default 64x64)")
    p.add_argument("--opt", choices=sorted(OPT_LEVELS), default="opt",
                   help="compiler options of Fig. 12 (default opt)")
    p.add_argument("--param", dest="params", type=param_arg, action="append",
                   metavar="NAME=VALUE",
                   help="a benchmark parameter (repeatable), e.g. depth=3, stencils=8, levels=2, "
                        "r_sigma=0.5; with --bench all, each benchmark takes the ones it has")
    p.add_argument("--engine", choices=["rtl", "iss"], default="rtl",
                   help="run on the Verilated cube (default) or the instruction-set simulator")
    p.add_argument("--dump", type=out_dir, help="write input/output .npy and params per bench")
    add_waves_options(p)        # one benchmark on the RTL: the cube's waves


@dataclass(frozen=True)
class ImageResult(WorkloadResult):
    """The runs of ``pimforge run image`` (schema ``pimforge.run.image``)."""

    SCHEMA: ClassVar[str] = "pimforge.run.image"
    SCHEMA_VERSION: ClassVar[int] = 1

    config: str
    source: str
    size: list[int]
    engine: str
    opt: str
    benches: dict[str, dict] = field(default_factory=dict)
    #: benchmark -> why it did not run (``--bench all``: it does not compile at this size)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every benchmark asked for ran and matched its reference."""
        return not self.skipped and all(b["matches_reference"] for b in self.benches.values())

    def summary(self) -> str:
        lines = [f"iPIM image benchmarks on {self.config} ({self.engine}), {self.source} "
                 f"{self.size[0]}x{self.size[1]}, compiler {self.opt}",
                 f"{'bench':16s} {'match':>5s} {'max err':>9s} {'cycles':>10s} {'IPC':>6s} "
                 f"{'energy uJ':>10s}"]
        for n, b in self.benches.items():
            cyc = "-" if b["cycles"] is None else f"{b['cycles']:,}"
            ipc = "-" if b["ipc"] is None else f"{b['ipc']:.3f}"
            en = b["energy_nj"].get("total")
            en_s = "-" if en is None else f"{en / 1e3:.2f}"
            lines.append(f"{n:16s} {'yes' if b['matches_reference'] else 'NO':>5s} "
                         f"{b['max_abs_error']:9.2e} {cyc:>10s} {ipc:>6s} {en_s:>10s}")
        for n, why in self.skipped.items():
            lines.append(f"{n:16s} SKIPPED: {why}")
        if self.skipped:
            lines.append(f"{len(self.skipped)} of {len(self.skipped) + len(self.benches)} "
                         "benchmarks did not run (exit status 1)")
        return "\n".join(lines)


def _input(args, bench: str) -> np.ndarray:
    kind = BENCHES[bench].input_kind
    if args.image:
        return load_image(args.image, args.size, kind)
    return load_photo(args.photo, args.size, kind)


def prepare(args: argparse.Namespace, config) -> None:
    """Build the Verilated cube of *config* into the build cache (``pimforge sweep``)."""
    if args.engine == "rtl":
        cube_driver(config)


def run(args: argparse.Namespace, config) -> ImageResult:
    waves = waves_window(args)
    if waves is not None and (len(args.bench) != 1 or args.engine != "rtl"):
        raise PimforgeError("--waves writes the cube's waves of one benchmark: give one "
                            "--bench and --engine rtl")
    missing = [b for b in args.bench if b not in PIPELINES]
    if missing:
        raise PimforgeError(f"the iPIM compiler has no pipeline for {', '.join(missing)} yet; "
                            f"run one of {', '.join(sorted(PIPELINES))}")
    params = bench_params(args.bench, getattr(args, "params", None))
    inputs = {}
    for b in args.bench:        # every input and parameter checked before any run
        inputs[b] = _input(args, b)
        check_input(b, inputs[b])
        resolve_params(b, inputs[b], **params[b])
    benches: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    dumps = []
    # A bar on a terminal's stderr for --bench all (disable=None: none in logs and pipes)
    bar = tqdm(args.bench, desc="benchmarks", unit="bench", leave=False,
               disable=None if len(args.bench) > 1 else True)

    def say(line: str) -> None:
        if bar.disable:
            print(line, flush=True)
        else:
            bar.write(line)

    for b in bar:
        bar.set_postfix_str(b)
        img = inputs[b]
        try:
            r = run_bench(b, img, config, opt=args.opt, engine=args.engine, waves=waves,
                          **params[b])
        except CompileError as e:
            if len(args.bench) == 1:
                raise
            # --bench all: a benchmark whose program or arrays do not fit this size
            skipped[b] = (f"it does not compile for {config.name} at "
                          f"{args.size[0]}x{args.size[1]} ({e})")
            say(f"{b}: skipped, {skipped[b]}")
            continue
        benches[b] = {**r.to_json(), "params": resolve_params(b, img, **params[b])}
        dumps.append((b, img, r))
        say(f"{b}: {'matches' if r.matches_reference else 'DIFFERS FROM'} the reference "
            f"(max error {r.max_abs_error:.2e})")
    res = ImageResult(config=config.name, source=str(args.image or args.photo),
                      size=list(args.size), engine=args.engine, opt=args.opt, benches=benches,
                      skipped=skipped)
    if args.dump is not None:
        for b, img, r in dumps:
            with FileSet(args.dump / b, "params.json") as fs:
                np.save(fs.path("input.npy"), img)
                np.save(fs.path("output.npy"), r.output)
                fs.path("params.json").write_text(json.dumps(stamp({
                    "bench": b, "params": resolve_params(b, img, **params[b]),
                    "size": list(args.size),
                    "source": args.image or args.photo, "config": config.name,
                    "opt": args.opt, "engine": args.engine,
                    "input_kind": BENCHES[b].input_kind,
                    "output_shape": list(r.output.shape)}, "pimforge.run.image.dump", 1,
                    config), indent=2))
    return res
