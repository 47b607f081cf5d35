"""Native Verilator builds: Verilog plus a C++ driver compiled into one executable.

Workload drivers write a C++ ``main`` that owns the clock loop (Python is
never woken per cycle) and exchange data with it through files; this module
compiles and caches such executables, keyed by the hash of every input.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..gen.errors import SimulationError
from . import verilator as vl

__all__ = ["build_verilated"]

_SOURCES = (".cpp", ".cc", ".c")


def build_verilated(verilog: str, top: str, cpp: dict[str, str], *, name: str | None = None,
                    opt: str = "-O2", trace: bool = False, threads: int = 1,
                    extra_args: tuple[str, ...] = ()) -> Path:
    """Compile *verilog* (top module *top*) with the C++ files *cpp* (name -> text).

    Every file of *cpp* is written into the build folder; the sources among
    them (``.cpp``, ``.cc``, ``.c``) are compiled and the headers are found by
    their ``#include``. Returns the path of the executable. ``trace`` enables
    VCD tracing (the FST writer needs lz4 headers that no PyPI package ships).
    The build folder lives under :func:`pimforge.sim.verilator.cache_dir` and
    is reused while the Verilog, the C++ files, the options and the Verilator
    version are unchanged.
    """
    key = vl.content_key(verilog, top, *sorted(f"{k}\0{v}" for k, v in cpp.items()), opt,
                         str(trace), str(threads), *extra_args, vl.verilator_version(),
                         # its makefiles name the wheel's sources by absolute path
                         str(vl.verilator_root()))
    bdir = vl.cache_dir() / "verilated" / f"{name or top}-{key}"
    exe = bdir / "obj" / f"V{top}"
    if exe.exists():
        return exe
    tmp = bdir.with_name(bdir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / f"{top}.v").write_text(verilog)
    for fname, text in cpp.items():
        (tmp / fname).write_text(text)
    cmd = [str(vl.verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--build",
           "-j", str(max(1, os.cpu_count() or 1)), "-Wno-fatal", "--top-module", top,
           "--Mdir", "obj", "-O3", "--x-assign", "fast", "--x-initial", "fast",
           "-CFLAGS", opt, *(["--trace"] if trace else []),
           *(["--threads", str(threads)] if threads > 1 else []), *extra_args,
           f"{top}.v", *(f for f in cpp if f.endswith(_SOURCES))]
    res = subprocess.run(cmd, cwd=tmp, env=vl.verilator_env(), capture_output=True, text=True)
    if res.returncode != 0:
        (tmp / "build.log").write_text(res.stdout + res.stderr)
        raise SimulationError(f"Verilator build of {top} failed (log: {tmp / 'build.log'}):\n"
                              + (res.stdout + res.stderr)[-4000:])
    shutil.rmtree(bdir, ignore_errors=True)
    tmp.rename(bdir)
    if not exe.exists():
        raise SimulationError(f"Verilator build of {top} produced no {exe}")
    return exe
