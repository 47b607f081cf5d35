"""The ``pimforge`` command line.

Each subcommand is a small module-level pair ``add_<name>(parser)`` /
``cmd_<name>(args)`` here, or lives in its subsystem and is listed in
:data:`COMMANDS` as ``"module:add_fn:run_fn"``. Errors a user can cause
(:class:`~pimforge.gen.errors.PimforgeError`) are printed without a traceback
and exit with status 2.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import sys
import time
from pathlib import Path

from .errors import PimforgeError

__all__ = ["main"]


def add_verilog(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="config preset name or TOML path")
    p.add_argument("--top", help="generate this registered block instead of the config's top")
    p.add_argument("--config", dest="config_opt", help="config for --top (default: default)")
    p.add_argument("--out", type=Path, help="output folder")
    p.add_argument("--list", action="store_true", help="list the registered blocks")
    p.add_argument("--lint", action="store_true", help="run verilator --lint-only on the result")


def cmd_verilog(args) -> int:
    from .blocks import BLOCKS, get_block
    from .config import load_config
    from .elaborate import elaborate

    if args.list:
        for name in sorted(BLOCKS):
            print(f"{name:24s} {BLOCKS[name].doc}")
        return 0
    if args.out is None:
        raise PimforgeError("--out DIR is required (the folder to write Verilog and manifest to)")
    if args.config and args.config_opt:
        raise PimforgeError("give the config either as the positional CONFIG or --config, "
                            "not both")
    cfg = load_config(args.config or args.config_opt)
    block = args.top or cfg.top
    get_block(block)
    el = elaborate(block, cfg)
    v, j = el.write(args.out)
    if args.lint:
        from ..sim.verilator import lint
        lint(v, el.top)
    print(f"wrote {v} and {j} ({len(el.manifest['modules'])} modules, config {cfg.name})")
    return 0


def add_regress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    p.add_argument("-k", dest="pattern", help="only benches whose name matches (glob or substring)")
    p.add_argument("--waves", action="store_true", help="dump waveforms (FST with Verilator)")
    p.add_argument("--seed", type=int, help="random seed (default: fresh, logged)")
    p.add_argument("--list", action="store_true", help="list the benches and exit")
    p.add_argument("--json", type=Path, help="write the results as JSON here")


def cmd_regress(args) -> int:
    from ..verif.regression import BENCHES
    from ..verif.runner import run_testbench

    pat = args.pattern
    benches = [b for b in BENCHES if not pat or pat in b.name or fnmatch.fnmatch(b.name, pat)]
    if args.list:
        for b in benches:
            print(f"{b.name:32s} {b.block:20s} {b.module}")
        return 0
    if not benches:
        raise PimforgeError(f"no bench matches {pat!r}; `pimforge regress --list` shows them")
    rows, t0 = [], time.monotonic()
    for i, b in enumerate(benches, 1):
        print(f"[{i}/{len(benches)}] {b.name} ...", flush=True)
        r = run_testbench(b.name, b.block, b.module, config=b.make_config(), sim=args.sim,
                          waves=args.waves, seed=args.seed)
        rows.append(r)
        status = "PASS" if r.ok else "FAIL"
        print(f"    {status} {r.tests - r.failed}/{r.tests} tests, seed {r.seed}, build "
              f"{r.build_s:.1f}s, run {r.run_s:.1f}s ({r.results_xml.parent})", flush=True)
    wall = time.monotonic() - t0
    failed = [r for r in rows if not r.ok]
    print(f"{len(rows) - len(failed)} passed, {len(failed)} failed in {wall:.1f}s")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "benches": [
            {"name": r.name, "tests": r.tests, "failed": r.failed, "seed": r.seed,
             "build_s": r.build_s, "run_s": r.run_s} for r in rows]}, indent=2))
    return 1 if failed else 0


def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="preset name or TOML path (omit to list presets)")


def cmd_config(args) -> int:
    from .config import load_config, preset_names, to_dict

    if not args.config:
        print("\n".join(preset_names()))
        return 0
    print(json.dumps(to_dict(load_config(args.config)), indent=2))
    return 0


# Subcommands: name -> (help, "module:add_fn", "module:run_fn"), modules relative to pimforge.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "verilog": ("generate Verilog and a JSON manifest", "gen.cli:add_verilog",
                "gen.cli:cmd_verilog"),
    "regress": ("run the cocotb regression", "gen.cli:add_regress", "gen.cli:cmd_regress"),
    "config": ("list presets or print one resolved config", "gen.cli:add_config",
               "gen.cli:cmd_config"),
    "dse": ("design-space exploration (spm: DESCNet scratchpads)", "sim.descnet.dse_cli:add_arguments",
            "sim.descnet.dse_cli:run"),
    "membench": ("drive the HMC memory-system RTL with a traffic pattern",
                 "sim.membench:add_arguments", "sim.membench:run"),
    "demo": ("a small CapsNet end to end: host layers in numpy, routing on the vault RTL",
             "sim.demo:add_arguments", "sim.demo:run"),
    "run": ("run a workload end to end on the RTL (capsnet: dynamic routing on the vaults)",
            "sim.capsnet.run_cli:add_arguments", "sim.capsnet.run_cli:run"),
    "approx": ("error table of the PIM-CapsNet PE approximations vs float64",
               "sim.approx_cli:add_arguments", "sim.approx_cli:run"),
    "accuracy": ("Table 5 study: digits CapsNet accuracy with the PE arithmetic (and on the RTL)",
                 "sim.capsnet.accuracy:add_arguments", "sim.capsnet.accuracy:run"),
    "capsnet-dist": ("Fig. 18 study: B/L/H distribution scores and choice per PE frequency",
                     "sim.capsnet.dist_cli:add_arguments", "sim.capsnet.dist_cli:run"),
}


def _resolve(ref: str):
    mod, fn = ref.split(":")
    return getattr(importlib.import_module(f"pimforge.{mod}"), fn)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pimforge", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_, add, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        _resolve(add)(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(_resolve(args._run)(args) or 0)
    except PimforgeError as e:
        print(f"pimforge {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pimforge {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
