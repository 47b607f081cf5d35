"""``pimforge run image``: the Table II benchmarks, or a pipeline of the user's, on the
iPIM cube.

``pimforge run image (--bench {NAME,all} | --pipeline FILE.py) [--config C]
[--photo NAME | --image PATH]
[--size WxH] [--opt LEVEL] [--param NAME=VALUE ...] [--engine rtl|iss] [--one-vault]
[--dump DIR] --json OUT`` compiles each
benchmark, runs it on a real photograph (scikit-image's, resized) on the Verilated
cube and checks the output against the numpy reference
(:mod:`pimforge.verif.models.ipim.image`); ``--dump DIR`` writes ``DIR/<bench>/input.npy``,
``output.npy`` (the RTL's result, ``(rows, cols)``) and ``params.json`` (every
parameter the run used, the size-derived ones resolved).

``--one-vault`` compiles each benchmark for the config's whole machine (Table III's
8 cubes x 16 vaults at 7680x4320) and runs one vault's share, with its two neighbouring
vaults, on a cube of four vaults (:mod:`pimforge.sim.ipim.one_vault`); the share's
output rows are checked against the reference, and ``benches.<name>`` gains
``machine_ms`` (the vault's cycles at the config's clock: every vault runs alike) and
``one_vault`` (the vault, its output rows, the window). ``--dump`` writes the share.

``--pipeline FILE.py`` runs a pipeline written with the front end
(:mod:`pimforge.sim.ipim.user_pipeline` says what the file defines): always on the
instruction-set simulator, and with the default engine on the cube RTL too, whose
output must equal the simulator's bit for bit; both are checked against the file's
``reference`` when it defines one, within its ``ATOL``. The results record the file's
path and SHA-256.
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
from .image_run import cube_driver, run_bench, run_program
from .lang import CompileError
from .one_vault import run_one_vault, window_config
from .photos import PHOTOS, load_image, load_photo
from .user_pipeline import load_pipeline

__all__ = ["PREPARE_OPTIONS", "ImageResult", "add_arguments", "bench_params", "param_arg",
           "prepare", "run", "run_pipeline", "size_arg"]

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
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--bench", type=_bench_names, metavar="{NAME,all}",
                      help=f"Table II benchmark: {', '.join(BENCHES)}, or all")
    what.add_argument("--pipeline", type=in_file, metavar="FILE.py",
                      help="a pipeline of your own written with the front end: FILE.py "
                           "defines pipeline(H, W) and optionally reference(img), INPUT, ATOL "
                           "(README, 'Your own image pipeline')")
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
                        "r_sigma=0.5; with --bench all, each benchmark takes the ones it has; "
                        "with --pipeline, a keyword parameter of its pipeline()")
    p.add_argument("--engine", choices=["rtl", "iss"], default="rtl",
                   help="run on the Verilated cube (default) or the instruction-set simulator "
                        "(--pipeline: always on the simulator, and on the cube too by default)")
    p.add_argument("--one-vault", action="store_true",
                   help="compile for the config's whole machine and run one vault's share "
                        "(with its two neighbours, on a cube of four vaults); adds machine_ms")
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
    #: ``--pipeline``: the file's ``path``, ``sha256``, ``input_kind``, ``atol`` and
    #: ``has_reference``; its run is ``benches[<file stem>]``
    pipeline: dict | None = None
    #: ``--one-vault``: each bench ran one vault's share of the whole machine
    one_vault: bool = False

    @property
    def ok(self) -> bool:
        """Every benchmark asked for ran, matched its reference (a pipeline without one:
        nothing to match) and, on the RTL, the instruction-set simulator bit for bit."""
        return not self.skipped and all(b["matches_reference"] is not False
                                        and b.get("matches_iss") is not False
                                        for b in self.benches.values())

    def summary(self) -> str:
        what = (f"pipeline {self.pipeline['path']}" if self.pipeline is not None
                else "image benchmarks")
        lines = [f"iPIM {what} on {self.config} ({self.engine}), {self.source} "
                 f"{self.size[0]}x{self.size[1]}, compiler {self.opt}",
                 f"{'bench':16s} {'match':>5s} {'max err':>9s} {'cycles':>10s} {'IPC':>6s} "
                 f"{'energy uJ':>10s}" + (f" {'machine ms':>10s}" if self.one_vault else "")]
        for n, b in self.benches.items():
            cyc = "-" if b["cycles"] is None else f"{b['cycles']:,}"
            ipc = "-" if b["ipc"] is None else f"{b['ipc']:.3f}"
            en = b["energy_nj"].get("total")
            en_s = "-" if en is None else f"{en / 1e3:.2f}"
            match = {True: "yes", False: "NO", None: "-"}[b["matches_reference"]]
            err = "-" if b["max_abs_error"] is None else f"{b['max_abs_error']:9.2e}"
            ms = ""
            if self.one_vault:
                ms = " " + ("-" if b["machine_ms"] is None else f"{b['machine_ms']:.4f}").rjust(10)
            lines.append(f"{n:16s} {match:>5s} {err:>9s} {cyc:>10s} {ipc:>6s} {en_s:>10s}{ms}")
            if b.get("matches_iss") is False:
                lines.append(f"{n:16s} the RTL's output DIFFERS FROM the instruction-set "
                             "simulator's")
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
        cube_driver(window_config(config) if getattr(args, "one_vault", False) else config)


def run(args: argparse.Namespace, config) -> ImageResult:
    waves = waves_window(args)
    if getattr(args, "pipeline", None) is not None:
        if getattr(args, "one_vault", False):
            raise PimforgeError("--one-vault runs a Table II benchmark's share: give --bench, "
                                "not --pipeline")
        if waves is not None:
            raise PimforgeError("--waves writes the cube's waves of one benchmark: give one "
                                "--bench and --engine rtl, not --pipeline")
        return run_pipeline(args, config)
    one_vault = getattr(args, "one_vault", False)
    if one_vault and waves is not None:
        raise PimforgeError("--waves writes the whole cube's waves; leave out --one-vault")
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
            if one_vault:
                ov = run_one_vault(b, img, config, opt=args.opt, engine=args.engine,
                                   **params[b])
                r = ov.run
            else:
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
        entry = ov.to_json() if one_vault else r.to_json()
        benches[b] = {**entry, "params": resolve_params(b, img, **params[b])}
        dumps.append((b, img, r))
        share = (f"vault {ov.vault}'s rows {ov.rows[0]}..{ov.rows[1] - 1}: " if one_vault
                 else "")
        say(f"{b}: {share}{'matches' if r.matches_reference else 'DIFFERS FROM'} the "
            f"reference (max error {r.max_abs_error:.2e})")
    res = ImageResult(config=config.name, source=str(args.image or args.photo),
                      size=list(args.size), engine=args.engine, opt=args.opt, benches=benches,
                      skipped=skipped, one_vault=one_vault)
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


def run_pipeline(args: argparse.Namespace, config) -> ImageResult:
    """``--pipeline FILE.py``: load, compile and run the user's pipeline (module
    docstring); everything that can be wrong with the file is found before any output
    is written."""
    up = load_pipeline(args.pipeline)
    params = up.check_params(getattr(args, "params", None))
    img = (load_image(args.image, args.size, up.input_kind) if args.image
           else load_photo(args.photo, args.size, up.input_kind))
    H, W = img.shape[:2]
    ref = up.reference(img, **params)
    prog = up.compile(H, W, config, args.opt, **params)
    r = run_program(up.name, prog, img, ref, config, opt=args.opt, engine=args.engine,
                    atol=up.atol)
    given = {**up.params, **params}
    entry = {**r.to_json(), "params": given}
    info = {"path": str(args.pipeline), "sha256": up.sha256, "input_kind": up.input_kind,
            "atol": up.atol, "has_reference": up.has_reference}
    checks = []
    if r.matches_iss is not None:
        checks.append("equals the instruction-set simulator's bit for bit" if r.matches_iss
                      else "DIFFERS FROM the instruction-set simulator's")
    if r.matches_reference is not None:
        checks.append(f"{'matches' if r.matches_reference else 'DIFFERS FROM'} the reference "
                      f"(max error {r.max_abs_error:.2e}, ATOL {up.atol:g})")
    else:
        checks.append("no reference() in the file to check against")
    print(f"{up.name} ({args.engine}): output {'; '.join(checks)}", flush=True)
    res = ImageResult(config=config.name, source=str(args.image or args.photo),
                      size=list(args.size), engine=args.engine, opt=args.opt,
                      benches={up.name: entry}, pipeline=info)
    if args.dump is not None:
        with FileSet(args.dump / up.name, "params.json") as fs:
            np.save(fs.path("input.npy"), img)
            np.save(fs.path("output.npy"), r.output)
            fs.path("params.json").write_text(json.dumps(stamp({
                "pipeline": info, "params": given, "size": list(args.size),
                "source": args.image or args.photo, "config": config.name,
                "opt": args.opt, "engine": args.engine, "input_kind": up.input_kind,
                "output_shape": list(r.output.shape)}, "pimforge.run.image.dump", 1,
                config), indent=2))
    return res
