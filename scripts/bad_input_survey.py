#!/usr/bin/env python3
"""Replay bad invocations of every ``pimforge`` command and check the bad-input promise.

The promise (README.md, "Where outputs go"): a command given bad input prints one line
saying what to change, exits with status 2, prints no traceback and writes
nothing; and it says so before any work starts. Each case here runs
``python -m pimforge.gen.cli ...`` as a subprocess in a fresh temporary working
folder that holds a few prepared things to misuse (a file where a folder is
expected, a folder where a file is expected, a read-only place, broken TOML
files), with ``HOME`` and the build cache (``PIMFORGE_CACHE``) pointed into that
folder so that a write anywhere of the command's own is seen. Per case it records
the exit status, the number of stderr lines, whether a traceback appeared,
whether anything in the folder was created or changed, and the wall time; a
case that runs past ``--timeout`` started real work and fails.

A few cases are documented valid invocations (listing presets, ``--list``):
they must exit 0, print no traceback and write nothing -- they show that the
harness itself can pass. A few run with a file-size limit standing in for a full
disk (``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored so that writes fail with
``EFBIG``): they must exit 1 (the work was done, its result could not be stored)
with one line naming the folder, and write nothing. A stderr line longer than
500 characters (an echoed garbage token) breaks the promise too.

The table (case, command, outcome) goes to ``--out`` as Markdown, written
atomically; the exit status is 1 when any case breaks the promise.

Example::

    .venv/bin/python scripts/bad_input_survey.py --out survey.md --jobs 2
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pimforge.gen.args import int_range, nonempty, out_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import md_header, md_row, write_text  # noqa: E402

__all__ = ["CASES", "Case", "Outcome", "main", "run_case"]

ROOT = os.geteuid() == 0
# Root writes through permission bits, so the read-only places are on a read-only mount.
RO_DIR = "/proc/sys" if ROOT else "ro"
RO_FILE = "/proc/sys/kernel/ostype" if ROOT else "ro_file.json"


@dataclass(frozen=True)
class Case:
    """One invocation: ``pimforge *argv`` with *env* added; *valid* ones must succeed."""

    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    valid: bool = False
    #: A file-size limit in bytes (a full disk): the case must exit 1, not 2.
    fsize: int | None = None

    @property
    def status(self) -> int:
        """The exit status the promise asks for."""
        return 0 if self.valid else 1 if self.fsize is not None else 2

    @property
    def command(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return (env + " " if env else "") + "pimforge " + shlex.join(self.argv)


@dataclass
class Outcome:
    case: Case
    status: int | None            # None: killed at the timeout
    stderr_lines: int
    traceback: bool
    written: list[str] = field(default_factory=list)
    seconds: float = 0.0
    stderr: str = ""

    @property
    def problems(self) -> list[str]:
        out = []
        if self.status is None:
            out.append("still running at the timeout (started real work)")
        elif self.status != self.case.status:
            out.append(f"exit {self.status}")
        if not self.case.valid and self.status is not None and self.stderr_lines != 1:
            out.append(f"{self.stderr_lines} stderr lines")
        longest = max((len(ln) for ln in self.stderr.splitlines()), default=0)
        if longest > MAX_LINE:
            out.append(f"a stderr line of {longest} characters")
        if self.traceback:
            out.append("traceback")
        if self.written:
            shown = ", ".join(self.written[:3]) + (" ..." if len(self.written) > 3 else "")
            out.append(f"wrote {shown}")
        return out

    @property
    def holds(self) -> bool:
        return not self.problems


#: The longest stderr line a case may print (what echoes a 64 KiB token fails).
MAX_LINE = 500

# -- the cases -----------------------------------------------------------------------

def _fixtures(folder: Path) -> None:
    """The things every case may misuse, made fresh in its working folder."""
    (folder / "afile").write_text("x\n")
    (folder / "adir").mkdir()
    (folder / "home").mkdir()
    (folder / "bad_utf8.toml").write_bytes(b'name = "caf\xe9"\n[hmc]\nvaults = 4\n')
    (folder / "bad_syntax.toml").write_text("[hmc\nvaults = = 4\n")
    (folder / "unknown_key.toml").write_text("[hmc]\nvaults = 4\nwarp_drive = true\n")
    (folder / "wrong_type.toml").write_text("[hmc]\nvaults = \"four\"\n")
    (folder / "bad_value.toml").write_text("[hmc]\nvaults = 6\n")
    (folder / "a_dir.toml").mkdir()
    (folder / "p.s").write_text("halt\n")
    (folder / "big.s").write_text("nop\n" * 70_000)        # past any program memory
    (folder / "garbage.s").write_text("x" * 65536 + "\n")
    (folder / "inf.s").write_text("seti_vsm [0], fp32(1e400)\n")
    os.symlink("loop2", folder / "loop1")
    os.symlink("loop1", folder / "loop2")
    (folder / "cache_sub").mkdir()
    (folder / "cache_sub" / "verilated").write_text("a file where a folder goes\n")
    head = ('workload = "capsnet"\n[options]\nscale = 64\nmodel-only = true\n'
            'threads = 1\n')
    (folder / "sweep_ok.toml").write_text(head + '[axes]\nnet = ["Caps-MN1"]\n')
    (folder / "sweep_date.toml").write_text(head + '[axes]\nnet = [1979-05-27]\n')
    (folder / "sweep_table.toml").write_text(head + '[axes]\nnet = [{ n = 1 }]\n')
    ten = "[" + ", ".join(map(str, range(1, 11))) + "]"
    (folder / "sweep_huge.toml").write_text(     # 10^6 points
        head.replace("threads = 1\n", "") + f'[axes]\nnet = ["Caps-MN1"]\nseed = {ten}\n'
        f'freq = {ten}\n"hmc.vaults" = {ten}\n"hmc.tck_ns" = {ten}\nfreq_mhz = {ten}\n'
        f'threads = {ten}\n')
    (folder / "sweep_preset.toml").write_text('config = "no_such_preset"\n' + head
                                              + '[axes]\nnet = ["Caps-MN1"]\n')
    (folder / "sweep_workload.toml").write_text('workload = "warp"\n[axes]\nnet = [1]\n')
    (folder / "sweep_key.toml").write_text(head + '[axes]\nwarp = [1]\n')
    if not ROOT:
        (folder / "ro").mkdir()
        (folder / "ro").chmod(0o555)
        (folder / "ro_file.json").write_text("{}\n")
        (folder / "ro_file.json").chmod(0o444)


def _bad_outputs(opt: str, ext: str) -> list[tuple[str, list[str]]]:
    """Output paths that cannot be written, for option *opt* of files ending *ext*."""
    return [(f"{opt} empty", [opt, ""]),
            (f"{opt} is a folder", [opt, "adir"]),
            (f"{opt} under a file", [opt, f"afile/r{ext}"]),
            (f"{opt} in a read-only folder", [opt, f"{RO_DIR}/r{ext}"]),
            (f"{opt} read-only file", [opt, RO_FILE])]


def _bad_dirs(opt: str) -> list[tuple[str, list[str]]]:
    """Output folders that cannot be made or written."""
    return [(f"{opt} empty", [opt, ""]),
            (f"{opt} is a file", [opt, "afile"]),
            (f"{opt} under a file", [opt, "afile/sub"]),
            (f"{opt} in a read-only folder", [opt, f"{RO_DIR}/sub"])]


BAD_SETS = [
    ("--set invalid value", ["--set", "hmc.vaults=7"]),
    ("--set unknown field", ["--set", "hmc.warp_drive=1"]),
    ("--set unknown section", ["--set", "warp.speed=9"]),
    ("--set without =", ["--set", "hmc"]),
    ("--set empty", ["--set", ""]),
    ("--set empty value", ["--set", "hmc.vaults="]),
    ("--set int as text", ["--set", "hmc.vaults=abc"]),
    ("--set int as float", ["--set", "hmc.vaults=4.0"]),
    ("--set negative int", ["--set", "hmc.vaults=-4"]),
    ("--set huge int", ["--set", "hmc.vaults=99999999999999999999"]),
    ("--set bool as text", ["--set", "pe.exp_recovery=maybe"]),
    ("--set bool as quoted text", ["--set", 'pe.exp_recovery="false"']),
    ("--set float as text", ["--set", "hmc.tck_ns=fast"]),
    ("--set float zero", ["--set", "freq_mhz=0"]),
    ("--set float nan", ["--set", "freq_mhz=nan"]),
    ("--set float inf", ["--set", "freq_mhz=inf"]),
    ("--set enum unknown", ["--set", "hmc.scheduler=lifo"]),
    ("--set section as value", ["--set", "hmc=4"]),
    ("--set top unknown", ["--set", "top=warp_core"]),
    ("--set twice", ["--set", "hmc.vaults=4", "--set", "hmc.vaults=8"]),
]
BAD_CONFIGS = [
    ("config unknown preset", "no_such_preset"),
    ("config empty", ""),
    ("config missing file", "missing.toml"),
    ("config is a folder", "a_dir.toml"),
    ("config non-UTF-8 TOML", "bad_utf8.toml"),
    ("config TOML syntax error", "bad_syntax.toml"),
    ("config unknown key", "unknown_key.toml"),
    ("config wrong type", "wrong_type.toml"),
    ("config invalid value", "bad_value.toml"),
]


def _config_cases(cmd: list[str], base: list[str], positional: bool, *, full: bool = False,
                  after: bool = False) -> list[Case]:
    """--config / CONFIG and --set cases of a command that takes a config (all of
    them with *full*, else a few of each kind)."""
    sets = BAD_SETS if full else [BAD_SETS[i] for i in (0, 1, 4, 10, 16, 19)]
    configs = BAD_CONFIGS if full else [BAD_CONFIGS[i] for i in (0, 2, 4, 6)]
    out = []

    def case(name, extra):
        argv = [*cmd, *base, *extra] if after else [*cmd, *extra, *base]
        out.append(Case(f"{' '.join(cmd)}: {name}", tuple(argv)))
    for name, extra in sets:
        case(name, extra)
    for name, spec in configs:
        case(name, [spec] if positional else ["--config", spec])
    return out


def _opt(cmd: list[str], base: list[str], items, *, after: bool = False) -> list[Case]:
    out = []
    for name, extra in items:
        argv = [*cmd, *base, *extra] if after else [*cmd, *extra, *base]
        out.append(Case(f"{' '.join(cmd)}: {name}", tuple(argv)))
    return out


def _ints(opt: str, values) -> list[tuple[str, list[str]]]:
    return [(f"{opt} {v!r}", [opt, v]) for v in values]


def build_cases() -> list[Case]:
    c: list[Case] = []
    # documented valid invocations (exit 0, nothing written)
    for argv in (["config"], ["config", "default"], ["verilog", "--list"], ["regress", "--list"],
                 ["run", "--list"]):
        c.append(Case(f"valid: {' '.join(argv)}", tuple(argv), valid=True))
    # top level
    c += [Case("no command", ()), Case("unknown command", ("warp",)),
          Case("unknown option", ("config", "--warp"))]

    # config: the full --set and config-file matrix (the cheapest command that loads one)
    c += _config_cases(["config"], [], positional=True, full=True)

    # verilog
    v = ["verilog"]
    c += _opt(v, [], [("no --out", [])])
    c += _opt(v, [], _bad_dirs("--out"))
    c += _opt(v, ["--out", "o"], [("--top unknown", ["--top", "warp_core"]),
                                  ("--top empty", ["--top", ""]),
                                  ("CONFIG and --config both", ["default", "--config", "default"]),
                                  ("--top with --config unknown",
                                   ["--top", "fp32_add", "--config", "no_such_preset"])])
    c += _config_cases(v, ["--out", "o"], positional=True)

    # regress
    r = ["regress"]
    c += _opt(r, [], _ints("--seed", ["-1", "abc", "1.5", "", str(2**31), "9" * 30]))
    c += _opt(r, [], [("--sim unknown", ["--sim", "modelsim"]),
                      ("-k matches nothing", ["-k", "warp_core"]),
                      ("-k empty", ["-k", ""]),
                      ("-k blank", ["-k", "  "]),
                      ("--json in a missing folder, -k matches nothing",
                       ["--json", "newdir/r.json", "-k", "warp_core"])])
    c += _opt(r, ["-k", "fp32_add"], _bad_outputs("--json", ".json"))
    seed_env = [("abc", "PIMFORGE_SEED=abc"), ("-1", "PIMFORGE_SEED=-1"),
                ("1.5", "PIMFORGE_SEED=1.5"), (str(2**40), "PIMFORGE_SEED huge")]
    for val, name in seed_env:
        c.append(Case(f"regress: {name}", ("regress", "-k", "fp32_add"),
                      env=(("PIMFORGE_SEED", val),)))
    for val, name in (("afile", "a file"), ("afile/sub", "under a file"),
                      (RO_DIR + "/cache", "in a read-only folder")):
        c.append(Case(f"regress: PIMFORGE_CACHE {name}", ("regress", "-k", "fp32_add"),
                      env=(("PIMFORGE_CACHE", val),)))

    # run
    c += [Case("run: no workload", ("run",)), Case("run: unknown workload", ("run", "warp")),
          Case("run capsnet: no --net", ("run", "capsnet"))]
    rc = ["run", "capsnet"]
    c += _opt(rc, [], [("--net unknown", ["--net", "Caps-XX9"]), ("--net empty", ["--net", ""]),
                       ("--net blank", ["--net", " "])])
    base = ["--net", "Caps-MN1", "--model-only"]
    c += _opt(rc, base, [*_ints("--scale", ["0", "-1", "abc", "2.5", str(1 << 21)]),
                         *_ints("--freq", ["0", "-5", "nan", "inf", "abc", "1e9"]),
                         ("--dim unknown", ["--dim", "Q"]),
                         *_ints("--seed", ["-1", "abc", str(2**32)]),
                         ("--dump empty", ["--dump", ""]),
                         ("--dump is a file", ["--dump", "afile"]),
                         ("--dump under a file", ["--dump", "afile/d"]),
                         ("--ablation unknown", ["--ablation", "warp"]),
                         ("--dram unknown", ["--dram", "sram"]),
                         ("--operand-buffer unknown", ["--operand-buffer", "all"]),
                         *_bad_outputs("--json", ".json")], after=True)
    c += _config_cases(rc, base, positional=False, after=True)
    # documented: B and N_L are divided by --scale and kept at least 1, and the run's
    # first line states the sizes it ran
    c.append(Case("valid: run capsnet --scale larger than the network",
                  (*rc, *base, "--scale", str(1 << 20)), valid=True))
    c.append(Case("run capsnet: PIMFORGE_CACHE a file (RTL run)",
                  ("run", "capsnet", "--net", "Caps-MN1", "--scale", "64"),
                  env=(("PIMFORGE_CACHE", "afile"),)))

    # membench
    m = ["membench"]
    mb = ["--json", "r.json"]
    c += [Case("membench: no --json", ("membench",))]
    c += _opt(m, mb, [*_ints("--requests", ["0", "-1", "abc", "1e3", "", "9" * 20]),
                      ("--requests past the memory", ["--requests", "10000000"]),
                      *_ints("--write-fraction", ["-0.1", "1.5", "nan", "abc"]),
                      *_ints("--stride", ["0", "15", "-16", "abc", str(2**33)]),
                      ("--stride past the memory",
                       ["--pattern", "strided", "--stride", str(2**32)]),
                      *_ints("--burst", ["8", "24", "512"]),
                      ("--burst not a power of two (pe-burst)",
                       ["--pattern", "pe-burst", "--burst", "48"]),
                      *_ints("--gamma-v", ["-1", "256"]),
                      *_ints("--gamma-h", ["abc"]),
                      *_ints("--seed", ["-1", str(2**32)]),
                      ("--pattern unknown", ["--pattern", "zigzag"]),
                      ("--mapping unknown", ["--mapping", "xor"]),
                      ("--policy unknown", ["--policy", "fair"]),
                      *_bad_outputs("--trace", ".csv")])
    c += _opt(m, [], _bad_outputs("--json", ".json"))
    c += _config_cases(m, mb, positional=True)
    c.append(Case("membench: PIMFORGE_CACHE a file", ("membench", *mb),
                  env=(("PIMFORGE_CACHE", "afile"),)))

    # demo
    d = ["demo"]
    c += _opt(d, [], [*_ints("--batch", ["0", "-1", "abc", "4097", "9" * 20]),
                      ("--batch more than the test images", ["--batch", "4096"]),
                      *_ints("--offset", ["-1", "abc"]),
                      ("--offset past the test images", ["--offset", "100000"]),
                      ("--dram unknown", ["--dram", "sram"]),
                      *_bad_outputs("--json", ".json")])
    c += _config_cases(d, [], positional=False)
    c.append(Case("demo: PIMFORGE_CACHE a file", ("demo", "--batch", "1"),
                  env=(("PIMFORGE_CACHE", "afile"),)))

    # approx
    a = ["approx"]
    c += _opt(a, [], [*_ints("--samples", ["99", "0", "-1", "abc", "1e6", "", "9" * 20]),
                      *_ints("--seed", ["-1", "abc"]),
                      *_bad_outputs("--json", ".json")])
    c += _config_cases(a, [], positional=False)

    # accuracy
    ac = ["accuracy"]
    c += _opt(ac, [], [*_ints("--rtl-images", ["0", "-1", "abc", "100000"]),
                       ("--rtl-images past the test images with --rtl-sample",
                        ["--rtl-sample", "--rtl-images", "100000"]),
                       *_bad_outputs("--json", ".json")])
    c += _config_cases(ac, [], positional=False)
    c.append(Case("accuracy: PIMFORGE_CACHE a file (--rtl-sample)",
                  ("accuracy", "--rtl-sample", "--rtl-images", "1"),
                  env=(("PIMFORGE_CACHE", "afile"),)))

    # capsnet-dist
    cd = ["capsnet-dist"]
    c += _opt(cd, [], [*_ints("--freq", ["0", "-1", "nan", "abc", "5001", ""]),
                       ("--freq twice", ["--freq", "312.5", "--freq", "312.5"]),
                       ("--freq twice in one list", ["--freq", "625,625"]),
                       ("--net unknown", ["--net", "Caps-XX9"]),
                       ("--net empty", ["--net", ""]),
                       ("--net twice", ["--net", "Caps-MN1", "--net", "Caps-MN1"]),
                       *_bad_outputs("--json", ".json")])
    c += _config_cases(cd, [], positional=False)

    # dse
    ds = ["dse"]
    c += [Case("dse: no kind", ("dse", "--out", "o")), Case("dse: no --out", ("dse", "spm"))]
    c += _opt(ds, ["--out", "o"], [("kind unknown", ["warp"]), ("kind empty", [""])])
    c += _opt(ds, ["spm", "--out", "o"],
              [("--net unknown", ["--net", "resnet"]), ("--net empty", ["--net", ""]),
               ("--org unknown", ["--org", "XYZ"]), ("--org empty", ["--org", ""]),
               ("--org twice", ["--org", "HY", "--org", "HY"]),
               ("--org twice in one list", ["--org", "HY,SEP,HY"]),
               *_ints("--max-sectors", ["-1", "4097", "abc"])])
    c += _opt(ds, ["spm"], _bad_dirs("--out"))
    dn = ["dse", "nicepim"]
    c += _opt(dn, ["--nets", "vgg16", "--iterations", "1", "--init", "2", "--out", "o"],
              [("--nets unknown", ["--nets", "alexnet"]), ("--nets empty", ["--nets", ""]),
               ("--nets twice", ["--nets", "vgg16,vgg16"]),
               *_ints("--iterations", ["-1", "abc", "1e9"]),
               *_ints("--init", ["0", "-1", "abc"]),
               ("--method unknown", ["--method", "bayes"]),
               *_ints("--candidates", ["0", "-1", "abc"]),
               *_ints("--area-limit", ["0", "-1", "nan", "abc"]),
               *_ints("--seed", ["-1", "abc"])], after=True)
    c += _opt(dn, ["--nets", "vgg16", "--iterations", "1"], _bad_dirs("--out"))
    c += _config_cases(dn, ["--nets", "vgg16", "--iterations", "1", "--out", "o"],
                       positional=False)

    # run dnn (NicePIM) and run image (iPIM): the other workloads
    rd = ["run", "dnn"]
    c += _opt(rd, ["--net", "resnet152"],
              [("--net unknown", ["--net", "alexnet"]), ("--net empty", ["--net", ""]),
               *_ints("--scale", ["0", "-1", "abc"]),
               ("--scale at which a window no longer fits", ["--scale", "1024"]),
               *_ints("--layers", ["0", "-1", "abc"]),
               ("--mapper unknown", ["--mapper", "greedy"]),
               *_ints("--seed", ["-1", "abc"]),
               ("--dump with --scale 1 (no RTL run)", ["--scale", "1", "--dump", "d"]),
               *_bad_dirs("--dump"), *_bad_outputs("--json", ".json")], after=True)
    c += _config_cases(rd, ["--net", "resnet152"], positional=False)
    c += _opt(rd, [], [("--onnx missing", ["--onnx", "nothere.onnx"]),
                       ("--onnx not a model", ["--onnx", "afile"]),
                       ("--onnx a folder", ["--onnx", "adir"]),
                       ("--onnx with --net", ["--onnx", "afile", "--net", "vgg16"])])
    ri = ["run", "image"]
    c += _opt(ri, ["--bench", "blur", "--engine", "iss"],
              [("--bench unknown", ["--bench", "sharpen"]), ("--bench empty", ["--bench", ""]),
               ("--bench not compiled yet", ["--bench", "bilateral_grid"]),
               ("--photo unknown", ["--photo", "lena"]),
               ("--image missing", ["--image", "nothere.png"]),
               ("--image not an image", ["--image", "afile"]),
               ("--size malformed", ["--size", "64"]), ("--size zero", ["--size", "0x64"]),
               ("--size too small for the bench", ["--size", "2x2"]),
               ("--opt unknown", ["--opt", "O3"]), ("--engine unknown", ["--engine", "fpga"]),
               ("--param malformed", ["--param", "depth"]),
               ("--param not a number", ["--param", "depth=deep"]),
               ("--param the bench does not take", ["--param", "depth=2"]),
               ("--param beyond the image", ["--bench", "local_laplacian", "--size", "16x16",
                                             "--param", "depth=9"]),
               *_bad_dirs("--dump"), *_bad_outputs("--json", ".json")], after=True)
    c += _config_cases(ri, ["--bench", "blur", "--engine", "iss"], positional=False)
    ci = ["compile", "image"]
    c += _opt(ci, ["--bench", "blur"],
              [("--bench unknown", ["--bench", "sharpen"]),
               ("--size malformed", ["--size", "axb"]), ("--opt unknown", ["--opt", "O3"]),
               ("--param the bench does not take", ["--param", "stencils=3"])],
              after=True)

    # schedule sharing (the Data-Scheduler)
    sh = ["schedule", "sharing"]
    c += _opt(sh, ["--mesh", "4x4", "--method", "tsp"],
              [("--mesh malformed", ["--mesh", "4"]), ("--mesh zero", ["--mesh", "0x4"]),
               *_ints("--set-size", ["0", "-1", "abc", "17"]),
               *_ints("--stride", ["0", "-1", "abc", "4"]),
               *_ints("--bytes", ["0", "-1", "abc"]),
               ("--method unknown", ["--method", "greedy"]),
               *_ints("--flit-bits", ["0", "-1", "abc"]),
               *_ints("--time-limit", ["0", "-1", "abc"]),
               *_bad_outputs("--json", ".json")], after=True)
    c.append(Case("schedule sharing: an ILP too big to build within --time-limit",
                  (*sh, "--mesh", "64x64", "--set-size", "256", "--time-limit", "10")))

    # sweep
    sw = ["sweep"]
    c += [Case("sweep: no spec", ("sweep",)),
          Case("valid: sweep --list", ("sweep", "sweep_ok.toml", "--list"), valid=True)]
    c += _opt(sw, ["--out", "o"],
              [("spec missing", ["nothere.toml"]), ("spec empty", [""]),
               ("spec is a folder", ["adir"]), ("spec not TOML", ["bad_syntax.toml"]),
               ("spec not UTF-8", ["bad_utf8.toml"]),
               ("spec with a TOML date", ["sweep_date.toml"]),
               ("spec with an inline table as a value", ["sweep_table.toml"]),
               ("spec grid of a million points", ["sweep_huge.toml"]),
               ("spec grid past --max-points", ["sweep_ok.toml", "--max-points", "0"]),
               ("spec naming a preset that does not exist", ["sweep_preset.toml"]),
               ("spec naming an unknown workload", ["sweep_workload.toml"]),
               ("spec with an unknown key", ["sweep_key.toml"]),
               ("--executor unknown", ["sweep_ok.toml", "--executor", "mpi"]),
               ("--executor slurm without sbatch",
                ["sweep_ok.toml", "--executor", "slurm", "--workers", "2"]),
               ("--executor slurm without --workers", ["sweep_ok.toml", "--executor", "slurm"]),
               *_ints("--workers", ["0", "-1", "abc"])])
    c += _opt(sw, ["sweep_ok.toml"], [*_bad_dirs("--out"),
                                       ("--out a symbolic link loop", ["--out", "loop1"])])
    c.append(Case("sweep: spec as the output folder", ("sweep", "sweep_ok.toml", "--out",
                                                       "sweep_ok.toml")))

    # simb: big or hostile program files
    sb = ["simb"]
    c += _opt(sb, [], [
        ("asm: a program past the largest program memory", ["asm", "big.s"]),
        ("run: a program past the config's program memory", ["run", "big.s"]),
        ("asm: a 64 KiB garbage token", ["asm", "garbage.s"]),
        ("asm: fp32 literal that overflows to inf", ["asm", "inf.s"]),
        ("asm: output is the input", ["asm", "p.s", "-o", "p.s"]),
        ("asm: output is the input through a path", ["asm", "p.s", "-o", "./adir/../p.s"]),
        ("asm: empty file name", ["asm", ""]),
        ("disasm: a 64 KiB garbage token", ["disasm", "garbage.s"])])

    # outputs that clobber each other, paths and caches
    c.append(Case("noc: --json and --png the same file",
                  ("noc", "--json", "r.json", "--png", "./r.json")))
    c.append(Case("verilog: config name empty", ("verilog", "", "--out", "o")))
    c.append(Case("verilog: --out a symbolic link loop", ("verilog", "--out", "loop1/sub")))
    c.append(Case("membench: PIMFORGE_CACHE with a subfolder that is a file",
                  ("membench", "--json", "r.json"), env=(("PIMFORGE_CACHE", "cache_sub"),)))
    c.append(Case("config: a name too long for the file system", ("config", "n" * 5000)))
    c.append(Case("config: --set an integer of 70000 digits",
                  ("config", "--set", "hmc.vaults=" + "9" * 70000)))

    # --param values
    for name, extra in (("--param not finite", ["--param", "a=nan"]),
                        ("--param overflowing", ["--param", "a=1e400"]),
                        ("--param out of the bench's range", ["--param", "a=1e308"]),
                        ("--param twice", ["--param", "a=2", "--param", "a=3"])):
        c.append(Case(f"run image: {name}", ("run", "image", "--bench", "brighten",
                                             "--engine", "iss", *extra)))
        c.append(Case(f"compile image: {name}", ("compile", "image", "--bench", "brighten",
                                                 *extra)))

    # a full disk (a file-size limit): exit 1, one line naming the folder, nothing written
    caps = ("run", "capsnet", "--net", "Caps-MN1", "--model-only", "--scale", "64")
    for name, argv in (("run capsnet --dump", (*caps, "--dump", "d")),
                       ("run capsnet --json", (*caps, "--json", "r.json")),
                       ("compile image -o", ("compile", "image", "--bench", "blur", "-o",
                                             "b.s")),
                       ("schedule sharing --json", ("schedule", "sharing", "--mesh", "4x4",
                                                    "--method", "tsp", "--json", "s.json")),
                       ("simb run --dump", ("simb", "run", "p.s", "--dump", "sd")),
                       ("run image --json", ("run", "image", "--bench", "brighten",
                                             "--engine", "iss", "--size", "16x16", "--json",
                                             "i.json")),
                       ("run image --dump", ("run", "image", "--bench", "brighten",
                                             "--engine", "iss", "--size", "16x16", "--dump",
                                             "id"))):
        c.append(Case(f"full disk: {name}", argv, fsize=64))
    return c


CASES: list[Case] = build_cases()


# -- running them --------------------------------------------------------------------

def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return out


def _limit(nbytes: int):
    """A child's file-size limit: a write past it fails with EFBIG, as on a full disk."""
    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return pre


def run_case(case: Case, timeout: float = 30.0) -> Outcome:
    """Run *case* in a fresh temporary folder and record what it did."""
    with tempfile.TemporaryDirectory(prefix="pimforge-survey-") as tmp:
        folder = Path(tmp)
        _fixtures(folder)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIMFORGE_")}
        env.update(HOME=str(folder / "home"), PIMFORGE_CACHE=str(folder / "cache"),
                   PYTHONDONTWRITEBYTECODE="1")
        env.update(dict(case.env))
        before = _snapshot(folder)
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "pimforge.gen.cli", *case.argv],
                                cwd=folder, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True,
                                preexec_fn=None if case.fsize is None else _limit(case.fsize))
        try:
            _, err = proc.communicate(timeout=timeout)
            status: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)         # its own session: the builds it started too
            _, err = proc.communicate()
            status = None
        seconds = time.monotonic() - t0
        after = _snapshot(folder)
        written = sorted(k for k, v in after.items() if before.get(k) != v)
        if not ROOT:
            (folder / "ro").chmod(0o755)    # so that the folder can be removed
        shutil.rmtree(folder / "cache", ignore_errors=True)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return Outcome(case, status, len(lines), "Traceback (most recent call last)" in err,
                   written, seconds, err)


def table(outcomes: list[Outcome]) -> str:
    """The survey as Markdown: a summary line, then one row per case."""
    bad = [o for o in outcomes if not o.holds]
    head = [f"# Bad-input survey: {len(outcomes)} cases, {len(outcomes) - len(bad)} hold, "
            f"{len(bad)} do not", "",
            "Each case runs in a fresh temporary folder; a bad invocation holds when it exits "
            "with status 2 and one stderr line, no traceback, nothing written (a documented "
            "valid one: status 0, nothing written; one on a full disk: status 1, one line, "
            "nothing written).", "",
            *md_header(["case", "command", "outcome"], "| --- | --- | --- |")]

    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")
    rows = []
    for o in outcomes:
        first = next((ln for ln in o.stderr.splitlines() if ln.strip()), "")
        what = ("holds" if o.holds else "**FAILS**: " + "; ".join(o.problems))
        what += f" ({o.seconds:.1f} s)" + (f": `{first[:160]}`" if first else "")
        rows.append(md_row([cell(o.case.name), f"`{cell(o.case.command)}`", cell(what)]))
    return "\n".join(head + rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bad_input_survey", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=out_file, required=True, help="write the Markdown table here")
    p.add_argument("--jobs", type=int_range(1, 64), default=2, help="cases run at once")
    p.add_argument("--timeout", type=int_range(1, 600), default=30,
                   help="seconds after which a case counts as having started work")
    p.add_argument("-k", dest="pattern", type=nonempty,
                   help="only cases whose name contains this")
    args = p.parse_args(argv)
    cases = [c for c in CASES if not args.pattern or args.pattern in c.name]
    if not cases:
        p.error(f"no case matches {args.pattern!r}")
    print(f"running {len(cases)} cases, {args.jobs} at a time", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(lambda c: run_case(c, args.timeout), cases))
    write_text(args.out, table(outcomes))
    bad = [o for o in outcomes if not o.holds]
    print(f"{len(outcomes)} cases, {len(outcomes) - len(bad)} hold, {len(bad)} do not "
          f"(table: {args.out})")
    for o in bad:
        print(f"  {o.case.name}: {'; '.join(o.problems)}\n    {o.case.command}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
