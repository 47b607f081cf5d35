"""``pimforge compile image (--bench NAME | --pipeline FILE.py) [--config C] [--size WxH]
[--opt LEVEL] [--param NAME=VALUE ...] [-o FILE.s] [--dump-ir DIR]``:
the iPIM compiler's output for a Table II benchmark or a pipeline file of the user's
(:mod:`pimforge.sim.ipim.user_pipeline`): one vault's SIMB assembly, the kernels it is
made of and the static instruction breakdown by opcode. ``--dump-ir DIR`` also writes
the program after each pass of :data:`pimforge.sim.ipim.passes.PASSES` as
``DIR/NN-pass.txt`` (the printed vault's code), all of them or none.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from pimforge.gen.args import in_file, out_dir, out_file
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import FileSet, write_text
from pimforge.rtl.ipim.asm import disassemble

from .backend import OPT_LEVELS
from .image_benches import PIPELINES
from .image_cli import bench_params, param_arg, size_arg
from .image_run import compile_bench
from .passes import PASSES, Pass, ir_text
from .user_pipeline import load_pipeline

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="what", metavar="{image}", required=True)
    i = sub.add_parser("image", help="compile a Table II benchmark (or your pipeline) to "
                       "SIMB assembly", description="compile a Table II benchmark (or a "
                       "pipeline file of yours) to SIMB assembly")
    what = i.add_mutually_exclusive_group(required=True)
    what.add_argument("--bench", choices=sorted(PIPELINES), help="benchmark to compile")
    what.add_argument("--pipeline", type=in_file, metavar="FILE.py",
                      help="a pipeline file written with the front end (as run image "
                           "--pipeline takes)")
    i.add_argument("--size", type=size_arg, default=(64, 64), metavar="WxH",
                   help="input size (default 64x64)")
    i.add_argument("--opt", choices=sorted(OPT_LEVELS), default="opt",
                   help="compiler options of Fig. 12 (default opt)")
    i.add_argument("--param", dest="params", type=param_arg, action="append",
                   metavar="NAME=VALUE", help="a benchmark parameter (repeatable), e.g. depth=3")
    i.add_argument("--vault", type=int, default=0, help="whose program to print (default 0)")
    i.add_argument("-o", dest="out", type=out_file, help="write the assembly here")
    i.add_argument("--dump-ir", type=out_dir, metavar="DIR",
                   help="write the program after each compiler pass to DIR/NN-pass.txt")
    # also after ``image`` (``pimforge compile image --bench blur --config ipim_eval``);
    # not given here, they leave the ones given before ``image`` as they are
    i.add_argument("--config", default=argparse.SUPPRESS,
                   help="config preset or TOML path (default: ipim_small)")
    i.add_argument("--set", dest="overrides", action="append", default=argparse.SUPPRESS,
                   metavar="SECTION.FIELD=VALUE", help="change one config value (repeatable)")


def dump_name(n: int, p: Pass) -> str:
    """The file of pass number *n* (from 1) in a ``--dump-ir`` folder."""
    return f"{n:02d}-{p.name}.txt"


def run(args: argparse.Namespace) -> int:
    cfg = args.config
    w, h = args.size
    dumps: list[tuple[str, str]] = []
    nvaults = cfg.ipim.cubes * cfg.ipim.vaults
    if not 0 <= args.vault < nvaults:
        raise PimforgeError(f"vault {args.vault} is not in the machine (0..{nvaults - 1})")
    if args.dump_ir is not None and args.out is not None:
        names = {dump_name(n, p) for n, p in enumerate(PASSES, 1)}
        out = Path(args.out).resolve()
        if out.parent == Path(args.dump_ir).resolve() and out.name in names:
            raise PimforgeError(f"-o {args.out} is one of --dump-ir's files; write the "
                                "assembly elsewhere")

    def observe(p: Pass, ir: object) -> None:
        text = ir_text(ir, vault=args.vault)
        dumps.append((dump_name(len(dumps) + 1, p),
                      f"# pass {len(dumps) + 1} of {len(PASSES)}: {p.name}: {p.doc}\n"
                      f"# {name} {w}x{h}, {args.opt}, vault {args.vault}\n{text}"))

    observer = observe if args.dump_ir is not None else None
    if args.pipeline is not None:
        up = load_pipeline(args.pipeline)
        name = up.name
        prog = up.compile(h, w, cfg, args.opt, observe=observer,
                          **up.check_params(args.params))
    else:
        name = args.bench
        params = bench_params([args.bench], args.params)[args.bench]
        prog = compile_bench(args.bench, h, w, cfg, args.opt, observe=observer, **params)
    if args.vault not in prog.programs:
        raise PimforgeError(f"vault {args.vault} is not in the machine "
                            f"(0..{len(prog.programs) - 1})")
    if args.dump_ir is not None:
        # the last pass's file is the marker: a folder that has it has them all
        with FileSet(args.dump_ir, dumps[-1][0]) as fs:
            for fname, text in dumps:
                fs.path(fname).write_text(text)
    asm = disassemble(prog.programs[args.vault])
    if args.out is not None:
        write_text(args.out, asm + "\n")
    else:
        print(asm)
    # The breakdown is of the program printed (the vault's), so it adds up to the count
    # above it; the machine's total over every vault is stated beside it.
    mine = Counter(ins.opcode.name.lower() for ins in prog.programs[args.vault])
    total = sum(mine.values())
    print(f"# {name} {w}x{h}, {args.opt}: {total} instructions in vault {args.vault} "
          f"({sum(prog.breakdown().values())} in all {len(prog.programs)} vaults)")
    for k in prog.kernels:
        print(f"#   {k}")
    print(f"# vault {args.vault} by opcode:")
    for op, n in sorted(mine.items()):
        print(f"#   {op:10s} {n:7d}  {100 * n / total:5.1f}%")
    return 0
