"""``pimforge simb``: assemble, disassemble and run SIMB programs on the instruction-set simulator.

``pimforge simb asm FILE [-o OUT.hex]`` writes the hex program format (one
32-hex-digit word per line; to stdout without ``-o``), ``pimforge simb disasm
FILE.hex [-o OUT.s]`` prints (or writes) assembly that reassembles to the same
words, and ``pimforge simb run FILE [--config C] [--set K=V] [--dump DIR]`` runs
a program (assembly, or hex when the name ends in ``.hex``) on every vault of
the machine with
:class:`~pimforge.verif.models.ipim.iss.SIMBMachine` and prints the instruction
counts; ``--dump`` writes the final state as one ``.npy`` per array of
:meth:`~pimforge.verif.models.ipim.iss.SIMBMachine.state` plus ``state.json``
(counts, steps, shapes), published together (``state.json`` last).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import numpy as np

from pimforge.gen.args import (
    WavesWindow,
    add_waves_options,
    in_file,
    int_range,
    out_dir,
    out_file,
    waves_window,
)
from pimforge.gen.config import load_config, parse_overrides
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import FileSet, write_text
from pimforge.gen.provenance import stamp
from pimforge.rtl.ipim.asm import (
    MAX_INSTRUCTIONS,
    MAX_LINE_CHARS,
    AsmError,
    assemble,
    disassemble,
    from_hex,
    to_hex,
)
from pimforge.rtl.ipim.isa import Instr
from pimforge.rtl.params import shown
from pimforge.verif.models.ipim.iss import DEFAULT_MAX_STEPS, SIMBMachine

__all__ = ["add_arguments", "run", "read_program"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="simb_cmd", metavar="{asm,disasm,run}", required=True)
    a = sub.add_parser("asm", help="assemble FILE into the hex program format",
                       description="assemble FILE into the hex program format")
    a.add_argument("file", type=in_file, metavar="FILE", help="assembly source")
    a.add_argument("-o", dest="out", type=out_file, help="hex file to write (default: stdout)")
    d = sub.add_parser("disasm", help="print the assembly of a hex program",
                       description="print the assembly of a hex program")
    d.add_argument("file", type=in_file, metavar="FILE.hex", help="hex program")
    d.add_argument("--pcs", action="store_true", help="append each instruction's pc")
    d.add_argument("-o", dest="out", type=out_file,
                   help="assembly file to write (default: stdout)")
    r = sub.add_parser("run", help="run FILE on every vault of the instruction-set simulator",
                       description="run FILE on every vault of the instruction-set simulator")
    r.add_argument("file", type=in_file, metavar="FILE",
                   help="assembly source, or a .hex program")
    r.add_argument("--config", default=None, help="config preset or TOML path (default: "
                   "default)")
    r.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.FIELD=VALUE",
                   help="change one config value (repeatable), e.g. --set ipim.pgs=4")
    r.add_argument("--dump", type=out_dir, help="write the final state (.npy, state.json) here")
    r.add_argument("--max-steps", type=int_range(1), default=DEFAULT_MAX_STEPS,
                   help="instructions one vault may execute before it counts as runaway")
    r.add_argument("--rtl", action="store_true",
                   help="also run it on the Verilated cube (ipim_cube) and compare every "
                   "bank with the instruction-set simulator")
    r.add_argument("--max-cycles", type=int_range(1, 10**10), default=10_000_000,
                   help="with --rtl: cycles before the cube counts as hung")
    add_waves_options(r)        # with --rtl: the cube's waves


def _lines(path: str) -> Iterator[str]:
    """The lines of *path*, read one at a time and each cut at
    :data:`~pimforge.rtl.ipim.asm.MAX_LINE_CHARS` + 1 characters (which the assembler
    refuses), so that a huge file is never read whole."""
    try:
        with open(path, encoding="utf-8") as f:
            while line := f.readline(MAX_LINE_CHARS + 1):
                yield line
    except (OSError, UnicodeDecodeError) as e:
        raise PimforgeError(f"cannot read {shown(path)}: "
                            f"{getattr(e, 'strerror', None) or e}; give an existing text "
                            "file") from None


def read_program(path: str, capacity: int = MAX_INSTRUCTIONS) -> list[Instr]:
    """The program in *path*: hex when the name ends in ``.hex``, else assembly; reading
    stops at the first error, a program longer than *capacity* instructions included."""
    try:
        if path.lower().endswith(".hex"):
            return from_hex(_lines(path), source=path, capacity=capacity)
        return assemble(_lines(path), source=path, capacity=capacity)
    except AsmError as e:
        raise PimforgeError(str(e)) from None


def _asm(args) -> int:
    prog = read_program(args.file)
    if args.out is None:
        print(to_hex(prog), end="")
    else:
        write_text(args.out, to_hex(prog))
        print(f"wrote {args.out} ({len(prog)} instructions)")
    return 0


def _disasm(args) -> int:
    try:
        prog = from_hex(_lines(args.file), source=args.file)
    except AsmError as e:
        raise PimforgeError(str(e)) from None
    text = disassemble(prog, pcs=args.pcs)
    if args.out is None:
        print(text, end="")
    else:
        write_text(args.out, text)
        print(f"wrote {args.out} ({len(prog)} instructions)")
    return 0


def _run(args) -> int:
    waves = waves_window(args)
    if waves is not None and not args.rtl:
        raise PimforgeError("--waves writes the waves of the RTL cube: give --rtl too")
    cfg = load_config(args.config, parse_overrides(args.overrides))
    prog = read_program(args.file, cfg.ipim.imem_instructions)
    m = SIMBMachine(cfg, max_steps=args.max_steps)
    m.load(prog)
    if args.rtl:
        # The cube starts from the same (empty) banks: keep a copy before the ISS runs.
        rtl_cfg = cfg
        if cfg.ipim.cubes != 1:
            raise PimforgeError(f"--rtl runs one cube; config {cfg.name} has "
                                f"{cfg.ipim.cubes} (set --set ipim.cubes=1)")
    total = m.run()
    ip = cfg.ipim
    print(f"{len(m.vaults)} vaults ({ip.cubes} cubes x {ip.vaults}), {ip.pes} PEs each: "
          f"{total} instructions, {m.syncs} barriers (config {cfg.name})")
    for name, n in sorted(m.counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {name:10s} {n}")
    if args.dump is not None:
        state = m.state()
        summary = {"config": cfg.name, "program": str(args.file), "instructions": total,
                   "syncs": m.syncs, "counts": dict(sorted(m.counts.items())),
                   "steps": [v.steps for v in m.vaults],
                   "arrays": {k: {"file": f"{k}.npy", "dtype": str(a.dtype),
                                  "shape": list(a.shape)} for k, a in state.items()}}
        with FileSet(args.dump, marker="state.json") as files:
            for k, a in state.items():
                with open(files.path(f"{k}.npy"), "wb") as f:
                    np.save(f, a)
            summary = stamp(summary, "pimforge.simb.run", 1, cfg)
            files.path("state.json").write_text(json.dumps(summary, indent=2) + "\n",
                                                encoding="utf-8")
        print(f"wrote the final state to {args.dump}")
    if args.rtl:
        return _run_rtl(rtl_cfg, prog, m, args.max_cycles, waves)
    return 0


def _run_rtl(cfg, prog: list[Instr], m: SIMBMachine, max_cycles: int,
             waves: WavesWindow | None = None) -> int:
    from .rtl_run import run_cube

    ip = cfg.ipim
    run = run_cube(cfg, {v: prog for v in range(ip.vaults)}, {}, max_cycles=max_cycles,
                   bare=True, waves=waves)
    bad = 0
    for v, vault in enumerate(m.vaults):
        for p, bank in enumerate(vault.banks):
            exp = {a: sum(int(x) << (32 * k) for k, x in enumerate(row))
                   for a, row in bank.items() if row.any()}
            got = run.banks.get((v, p), {})
            bad += sum(got.get(a, 0) != exp.get(a, 0) for a in set(got) | set(exp))
    print(f"RTL cube: {run.cycles} cycles, {run.issued} instructions issued, IPC "
          f"{run.ipc:.3f} per vault, {run.barriers} barriers; {run.cycles_per_s:,.0f} "
          f"cycles/s ({run.cycles_per_s * ip.vaults:,.0f} vault-cycles/s), bare native "
          f"loop {run.bare_cycles_per_s:,.0f} cycles/s")
    if bad:
        print(f"RTL and instruction-set simulator differ in {bad} bank vectors")
        return 1
    print("banks equal to the instruction-set simulator's")
    return 0


def run(args) -> int:
    return {"asm": _asm, "disasm": _disasm, "run": _run}[args.simb_cmd](args)
