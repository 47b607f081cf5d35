"""Native Verilator builds: Verilog plus a C++ driver compiled into one executable.

Workload drivers write a C++ ``main`` that owns the clock loop (Python is
never woken per cycle) and exchange data with it through files; this module
compiles and caches such executables, keyed by the hash of every input.
"""

from __future__ import annotations

import hashlib
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
    root = vl.cache_dir() / "verilated"
    bdir = root / f"{name or top}-{key}"
    exe = bdir / "obj" / f"V{top}"
    if _verified(bdir, exe):
        return exe
    _sweep_stale(root)
    tmp = bdir.with_name(bdir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        (tmp / f"{top}.v").write_text(verilog)
        for fname, text in cpp.items():
            (tmp / fname).write_text(text)
        cmd = [str(vl.verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--build",
               "-j", str(max(1, os.cpu_count() or 1)), "-Wno-fatal", "--top-module", top,
               "--Mdir", "obj", "-O3", "--x-assign", "fast", "--x-initial", "fast",
               "-CFLAGS", opt, *(["--trace"] if trace else []),
               *(["--threads", str(threads)] if threads > 1 else []), *extra_args,
               f"{top}.v", *(f for f in cpp if f.endswith(_SOURCES))]
        res = subprocess.run(cmd, cwd=tmp, env=vl.verilator_env(), capture_output=True,
                             text=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)     # interrupted: leave no half build
        raise
    if res.returncode != 0:
        # Kept for the log it holds; swept once this process has gone.
        (tmp / "build.log").write_text(res.stdout + res.stderr)
        raise SimulationError(f"Verilator build of {top} failed (log: {tmp / 'build.log'}):\n"
                              + (res.stdout + res.stderr)[-4000:])
    built = tmp / "obj" / f"V{top}"
    if not built.exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise SimulationError(f"Verilator build of {top} produced no V{top}")
    (tmp / _STAMP).write_text(_digest(built))      # what a later use checks the executable by
    shutil.rmtree(bdir, ignore_errors=True)
    tmp.rename(bdir)
    return exe


#: File beside a finished build holding the SHA-256 of its executable.
_STAMP = "executable.sha256"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verified(bdir: Path, exe: Path) -> bool:
    """True if *bdir* is a finished build whose executable is intact (a truncated or
    overwritten one, or a folder without the stamp, is rebuilt)."""
    stamp = bdir / _STAMP
    try:
        return exe.is_file() and stamp.read_text().strip() == _digest(exe)
    except OSError:
        return False


def _sweep_stale(root: Path) -> None:
    """Remove the temporary folders of builds whose process has gone (killed, or failed
    and kept for its log)."""
    for tmp in root.glob("*.tmp*"):
        pid = tmp.name.rpartition(".tmp")[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
