"""The ``pimforge`` command line.

The framework's own commands live here: ``verilog``, ``regress``, ``config``,
``run`` (which dispatches on the registered workloads) and ``dse`` (which
dispatches on the registered design-space explorations). Every other
subcommand is contributed by an accelerator (:mod:`pimforge.gen.registry`):
its module provides ``add_arguments(parser)`` and ``run(args)``. Commands that
take a config get ``--config``/``CONFIG`` and ``--set SECTION.FIELD=VALUE`` from
here, and receive the resolved config as ``args.config``. Errors a user can
cause (:class:`~pimforge.gen.errors.PimforgeError`, a generator's
:class:`~pimforge.rtl.params.ParameterError`) are printed in one line without a
traceback and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from pimforge.rtl.params import ParameterError
from .args import int_range, nonempty, number_range, out_dir, out_file
from .errors import PimforgeError
from .output import check_output_dir, write_json
from .provenance import invocation, name_config, pimforge_version, stamp
from .registry import blocks, commands, explorers, get_block, resolve, workloads

# Everything heavier than the registry (the config tree and Amaranth, the Verilator
# harness, numpy, scipy...) is imported inside the command that needs it, and a
# command's own module only when that command is parsed: `pimforge --help`, a usage
# error or `--version` answer without loading them.

__all__ = ["build_parser", "main"]


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.FIELD=VALUE",
                   help="change one config value (repeatable), e.g. --set hmc.vaults=8")


def add_config_option(p: argparse.ArgumentParser, default: str = "default") -> None:
    p.add_argument("--config", default=None,
                   help=f"config preset or TOML path (default: {default})")
    p.set_defaults(_default_config=default)
    _add_set(p)


def add_config_positional(p: argparse.ArgumentParser, default: str = "default") -> None:
    p.add_argument("config", nargs="?", default=None,
                   help=f"config preset or TOML path (default: {default})")
    p.set_defaults(_default_config=default)
    _add_set(p)


def resolve_config(args) -> None:
    """Replace ``args.config`` (a name or path) by the resolved config with ``--set``."""
    from .config import load_config, parse_overrides

    spec = args.config if args.config is not None else args._default_config
    name_config(spec)               # what the results record as `config`
    args.config = load_config(spec, parse_overrides(args.overrides))


# -- verilog -------------------------------------------------------------------------

def add_verilog(p: argparse.ArgumentParser) -> None:
    add_config_positional(p)
    p.add_argument("--top", type=nonempty,
                   help="generate this registered block instead of the config's top")
    p.add_argument("--config", dest="config_opt", help="config for --top (default: default)")
    p.add_argument("--out", type=out_dir, help="output folder")
    p.add_argument("--list", action="store_true", help="list the registered blocks")
    p.add_argument("--lint", action="store_true", help="run verilator --lint-only on the result")


def cmd_verilog(args) -> int:
    from pimforge.sim.verilator import lint, verilator_root
    from .elaborate import elaborate

    if args.list:
        for name, b in sorted(blocks().items()):
            print(f"{name:24s} {b.doc}")
        return 0
    if args.top is not None:
        get_block(args.top)         # a misspelled block is named before a missing --out
    if args.out is None:
        raise PimforgeError("--out DIR is required (the folder to write Verilog and manifest to)")
    if args.config and args.config_opt:
        raise PimforgeError("give the config either as the positional CONFIG or --config, "
                            "not both")
    args.config = args.config or args.config_opt
    out = check_output_dir(args.out, "--out")
    if args.lint:
        verilator_root()            # a missing tool is named before anything is written
    resolve_config(args)
    cfg = args.config
    block = args.top or cfg.top
    get_block(block)
    el = elaborate(block, cfg)
    # The manifest file says what made it; the resolved config's values keep their place
    # under another name (`config` is the preset name or the TOML path, as in every result).
    manifest = dict(el.manifest)
    values = manifest.pop("config")
    el.manifest = {**stamp(manifest, "pimforge.verilog", 1, cfg), "config_values": values}
    v, j = el.write(out)
    if args.lint:
        lint(v, el.top)
    print(f"wrote {v} and {j} ({len(el.manifest['modules'])} modules, config {cfg.name})")
    return 0


# -- regress -------------------------------------------------------------------------

def add_regress(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    p.add_argument("-k", dest="pattern", type=nonempty,
                   help="only benches whose name matches (glob or substring)")
    p.add_argument("--waves", action="store_true", help="dump waveforms (VCD)")
    p.add_argument("--seed", type=int_range(0, 2**31 - 1),
                   help="random seed (default: fresh, logged)")
    p.add_argument("--list", action="store_true", help="list the benches and exit")
    p.add_argument("--json", type=out_file, help="write the results as JSON here")


def cmd_regress(args) -> int:
    from pimforge.verif.regression import select
    from pimforge.verif.runner import run_testbench

    benches = select(args.pattern)
    if args.list:
        for b in benches:
            print(f"{b.name:32s} {b.block:20s} {b.module}")
        return 0
    if not benches:
        raise PimforgeError(f"no bench matches {args.pattern!r}; `pimforge regress --list` "
                            "shows them")
    out = args.json
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
    if out is not None:
        write_json(out, stamp({"wall_s": wall, "benches": [
            {"name": r.name, "tests": r.tests, "failed": r.failed, "seed": r.seed,
             "build_s": r.build_s, "run_s": r.run_s} for r in rows]}, "pimforge.regress", 1))
    return 1 if failed else 0


# -- config --------------------------------------------------------------------------

def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="preset name or TOML path (omit to list presets)")
    _add_set(p)


def cmd_config(args) -> int:
    from .config import load_config, parse_overrides, preset_names, to_dict

    if args.config == "":
        raise PimforgeError("the config name is empty: give a preset name or a TOML path, "
                            "or omit it to list the presets")
    if args.config is None and not args.overrides:
        print("\n".join(preset_names()))
        return 0
    print(json.dumps(to_dict(load_config(args.config, parse_overrides(args.overrides))),
                     indent=2))
    return 0


# -- run WORKLOAD --------------------------------------------------------------------

def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--list", action="store_true", help="list the registered workloads")
    sub = p.add_subparsers(dest="workload", metavar="WORKLOAD")
    for name, w in workloads().items():
        sub.add_lazy(name, lambda q, name=name: add_workload_arguments(q, name),
                     help=w.doc, description=w.doc)


def add_workload_arguments(p: argparse.ArgumentParser, name: str) -> None:
    """The options of ``pimforge run NAME``: ``--config``, ``--set``, ``--json`` and the
    workload's own."""
    add_config_option(p, workloads()[name].default_config)
    p.add_argument("--json", type=out_file, help="write the results JSON here")
    resolve(workloads()[name].cli).add_arguments(p)


def workload_parser(name: str, parser_class: type[argparse.ArgumentParser] | None = None
                    ) -> argparse.ArgumentParser:
    """A parser of the arguments after ``pimforge run NAME`` (``pimforge sweep`` parses
    each point with it)."""
    p = (parser_class or Parser)(prog=f"pimforge run {name}")
    add_workload_arguments(p, name)
    return p


def run_workload(name: str, args: argparse.Namespace):
    """Resolve the config of parsed *args* and run workload *name*: the result object
    (``to_json()``, ``summary()``, ``ok``) that ``pimforge run`` prints and writes."""
    resolve_config(args)
    return resolve(workloads()[name].cli).run(args, args.config)


def cmd_run(args) -> int:
    if args.list:
        for name, w in sorted(workloads().items()):
            print(f"{name:12s} {w.doc}")
        return 0
    if not args.workload:
        raise PimforgeError("name a workload: pimforge run WORKLOAD ... "
                            f"({', '.join(sorted(workloads()))}; `pimforge run --list`)")
    out = args.json
    result = run_workload(args.workload, args)
    print(result.summary())
    if out is not None:
        write_json(out, stamp(result.to_json(), config=args.config))
    return 0 if result.ok else 1


# -- dse KIND ------------------------------------------------------------------------

def add_dse(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, e in explorers().items():
        sub.add_lazy(kind, lambda q, e=e: _add_explorer(q, e), help=e.help, description=e.help)


def _add_explorer(q: argparse.ArgumentParser, e) -> None:
    if e.config == "option":
        add_config_option(q, e.default_config)
    elif e.config == "positional":
        add_config_positional(q, e.default_config)
    resolve(e.cli).add_arguments(q)


def cmd_dse(args) -> int:
    e = explorers()[args.kind]
    if e.config:
        resolve_config(args)
    return resolve(e.cli).run(args)


# -- synth, fpga ---------------------------------------------------------------------

def add_synth(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", type=nonempty, metavar="BLOCK|CONFIG",
                   help="a registered block (built for --config), or a config (its top block)")
    add_config_option(p)
    p.add_argument("--node", type=number_range(3.0, 250.0), default=45.0, metavar="NM",
                   help="technology node of the area estimate (default: 45)")
    p.add_argument("--dram-die", action="store_true",
                   help="the block sits on a DRAM die (x2 area, iPIM Sec. VII-A)")
    p.add_argument("--json", type=out_file, help="write the gate counts and area as JSON here")


def cmd_synth(args) -> int:
    from pimforge.sim.descnet.sram import area_mm2
    from .area import AreaModel
    from .config import preset_names
    from .synth import synth_block

    if args.target in blocks():
        block = args.target
    elif args.config is not None:
        raise PimforgeError(f"{args.target!r} is not a registered block (`pimforge verilog "
                            "--list`); with a config as the target, leave out --config")
    elif args.target not in preset_names() and not args.target.endswith(".toml"):
        raise PimforgeError(f"{args.target!r} is neither a registered block (`pimforge "
                            "verilog --list`) nor a config (`pimforge config`)")
    else:
        block, args.config = None, args.target
    resolve_config(args)
    res = synth_block(block or args.config.top, args.config)
    model = AreaModel(node_nm=args.node, sram=area_mm2, dram_die=args.dram_die)
    area = model.of(res.total)
    print(res.summary())
    print(f"area at {model.describe()}: {area.total_mm2:.4f} mm^2 (logic "
          f"{area.logic_mm2:.4f}, memory macros {area.macro_mm2:.4f})")
    if args.json is not None:
        write_json(args.json, stamp({**res.to_json(), "area": {**area.to_json(),
                                                               "model": model.describe()}},
                                    "pimforge.synth", 1, args.config))
    return 0


def add_fpga(p: argparse.ArgumentParser) -> None:
    p.add_argument("--board", type=nonempty, required=True,
                   help="an ECP5 board of amaranth-boards (ulx3s-85f, orangecrab-85f, ...)")
    add_config_option(p)
    p.add_argument("--top", type=nonempty, help="registered block to build (default: the "
                   "config's top)")
    p.add_argument("--out", type=out_dir, default="build/fpga",
                   help="folder for the bitstream and report (default: build/fpga)")
    p.add_argument("--json", type=out_file, help="write the utilization and Fmax as JSON here")


def cmd_fpga(args) -> int:
    from .fpga import build_fpga, check_board

    check_board(args.board)
    resolve_config(args)
    block = args.top or args.config.top
    get_block(block)
    res = build_fpga(block, args.config, args.board, args.out)
    print(res.summary())
    if args.json is not None:
        write_json(args.json, stamp(res.to_json(), "pimforge.fpga", 1, args.config))
    return 0


def _sweep_cli():
    # imported when used: the sweep command module builds on this one's workload parser
    from pimforge.sim.sweep import cli

    return cli


def _examples():
    from pimforge.sim import examples

    return examples


# -- the parser ----------------------------------------------------------------------

#: The framework's own commands: name -> (help, add_arguments, run).
CORE = {
    "verilog": ("generate Verilog and a JSON manifest", add_verilog, cmd_verilog),
    "regress": ("run the cocotb regression", add_regress, cmd_regress),
    "config": ("list presets or print one resolved config (with --set changes)", add_config,
               cmd_config),
    "run": ("run a registered workload end to end on the RTL (`pimforge run --list`)",
            add_run, cmd_run),
    "sweep": ("run a grid of workload runs from a spec on Dask (local cores, a scheduler, "
              "Slurm/PBS)", lambda p: _sweep_cli().add_arguments(p),
              lambda args: _sweep_cli().run(args)),
    "dse": ("design-space exploration of a registered kind (`pimforge dse KIND --help`)",
            add_dse, cmd_dse),
    "synth": ("gate counts (Yosys) and area of a block or a config's top", add_synth,
              cmd_synth),
    "fpga": ("bitstream, utilization and Fmax of a block on an ECP5 board", add_fpga,
             cmd_fpga),
    "examples": ("copy the example sweep specs and SIMB programs into a folder",
                 lambda p: _examples().add_arguments(p), lambda args: _examples().run(args)),
}


def _registered(name: str):
    cmd = commands()[name]
    mod = resolve(cmd.cli)

    def add(p: argparse.ArgumentParser) -> None:
        if cmd.config == "option":
            add_config_option(p, cmd.default_config)
        elif cmd.config == "positional":
            add_config_positional(p, cmd.default_config)
        mod.add_arguments(p)

    def run(args) -> int:
        if cmd.config:
            resolve_config(args)
        return mod.run(args)

    return cmd.help, add, run


class _LazySubParsers(argparse._SubParsersAction):
    """Subcommands whose options are added when the subcommand is parsed: the top-level
    help lists every command from the registry without importing any command's module."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pending: dict[str, tuple] = {}

    def add_lazy(self, name: str, add, **kwargs) -> argparse.ArgumentParser:
        """A subparser *name* whose options ``add(parser)`` adds when it is first used."""
        p = self.add_parser(name, **kwargs)
        self.pending[name] = (add, p)
        return p

    def populate(self, name: str) -> None:
        if name in self.pending:
            add, p = self.pending.pop(name)
            add(p)

    def __call__(self, parser, namespace, values, option_string=None):
        self.populate(values[0])
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """Usage mistakes are one line too: ``pimforge CMD: error: WHAT (see --help)``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _LazySubParsers)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _populate_all(parser: argparse.ArgumentParser) -> None:
    for a in parser._actions:
        if isinstance(a, _LazySubParsers):
            for name in list(a.pending):
                a.populate(name)
            for p in a.choices.values():
                _populate_all(p)


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """The ``pimforge`` parser. With *lazy*, a (sub)command's options are added only when
    it is parsed (what :func:`main` does); otherwise every subparser is complete."""
    parser = Parser(prog="pimforge", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version",
                        version=f"pimforge {pimforge_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_, add, run) in CORE.items():
        p = sub.add_lazy(name, add, help=help_, description=help_)
        p.set_defaults(_run=run)
    for name, cmd in commands().items():
        p = sub.add_lazy(name, lambda q, name=name: _registered(name)[1](q), help=cmd.help,
                         description=cmd.help)
        p.set_defaults(_run=lambda args, name=name: _registered(name)[2](args))
    if not lazy:
        _populate_all(parser)
    return parser


def _named_config(args: argparse.Namespace) -> str | None:
    """The config the user named on the command line (or the command's default), before
    it is resolved: what results record as ``config``."""
    for key in ("config", "config_opt"):
        if isinstance(getattr(args, key, None), str):
            return getattr(args, key)
    return getattr(args, "_default_config", None)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser(lazy=True).parse_args(argv)
    except SystemExit as e:          # usage error (2) or --help (0): a status, as below
        return int(e.code or 0)
    try:
        with invocation(sys.argv[1:] if argv is None else list(argv), _named_config(args)):
            return int(args._run(args) or 0)
    except (PimforgeError, ParameterError) as e:
        print(f"pimforge {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pimforge {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:      # `pimforge ... | head`: the reader has gone, not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (no flush error at exit)
        return 0


if __name__ == "__main__":
    sys.exit(main())
