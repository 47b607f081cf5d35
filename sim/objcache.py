"""A compile cache for the library sources that every Verilator build compiles again.

Each Verilated build, native or cocotb, compiles Verilator's runtime library
(``verilated.cpp``, ``verilated_threads.cpp``, ``verilated_dpi.cpp``, and
``verilated_vpi.cpp`` and cocotb's ``verilator.cpp`` for a testbench): 15-25 s of
compiling that is the same in every build of a run. Make runs this program as
Verilator's ``OBJCACHE`` (the command it puts before every compile, see
:func:`pimforge.sim.verilator.verilator_env`)::

    python objcache.py CACHE_DIR c++ FLAGS... -c [-o OUT] SOURCE

A compile of a source that lies outside the build folder (an installed package's, not
the model's or a driver's) is looked up by the SHA-256 of the compiler (its path, size
and time), the command less its output name, and the preprocessed source, which holds
every header and macro the object depends on; a hit copies the object (and its
dependency file) into place, a miss compiles and keeps them. Any other command runs as
given, and so does a compile when the cache cannot be read or written: the cache never
changes what is built, only how often. The folder is kept under :data:`LIMIT_BYTES` by
removing the objects used least recently.

Only the standard library is imported: make starts this program once per compile.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The size the cached objects are kept under.
LIMIT_BYTES = 512 * 1024 * 1024
_SOURCES = (".cpp", ".cc", ".c")
#: Options of the compile that name or make its dependency file (left out of the
#: preprocessing, kept in the key).
_DEP_FLAGS = ("-MMD", "-MD", "-MP")
_DEP_ARGS = ("-MF", "-MT", "-MQ")


def _parse(cmd: list[str]) -> tuple[Path, Path, list[str]] | None:
    """``(source, object, preprocess command)`` of a cacheable compile, else None."""
    if "-c" not in cmd or any(a in ("-", "-E", "-S") for a in cmd):
        return None
    srcs = [a for a in cmd[1:] if a.endswith(_SOURCES) and not a.startswith("-")]
    if len(srcs) != 1:
        return None
    src = Path(srcs[0])
    out = None
    pp = []
    it = iter(cmd)
    for a in it:
        if a == "-o":
            out = next(it, None)
        elif a in _DEP_ARGS:
            next(it, None)
        elif a != "-c" and a not in _DEP_FLAGS:
            pp.append(a)
    obj = Path(out) if out else Path(src.with_suffix(".o").name)
    try:
        inside = src.resolve().is_relative_to(Path.cwd().resolve())
    except OSError:
        return None
    if inside:                      # the build's own files: compiled every time
        return None
    return src, obj, [*pp, "-E"]


def _key(cmd: list[str], obj: Path, pp: list[str]) -> str | None:
    compiler = shutil.which(cmd[0])
    if compiler is None:
        return None
    st = os.stat(os.path.realpath(compiler))
    res = subprocess.run(pp, capture_output=True)
    if res.returncode != 0:
        return None
    h = hashlib.sha256()
    for part in (os.path.realpath(compiler), str(st.st_size), str(st.st_mtime_ns),
                 *[a for a in cmd if a != str(obj)]):
        h.update(part.encode() + b"\0")
    h.update(res.stdout)
    return h.hexdigest()


def _put(src: Path, dst: Path) -> None:
    """Copy *src* to *dst* atomically (another process may read *dst* meanwhile)."""
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=dst.name + ".")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _prune(folder: Path) -> None:
    files = [(p.stat().st_mtime, p.stat().st_size, p) for p in folder.glob("*/*")
             if p.is_file()]
    total = sum(s for _, s, _ in files)
    for _, size, p in sorted(files, key=lambda f: f[0]):
        if total <= LIMIT_BYTES:
            break
        p.unlink(missing_ok=True)
        total -= size


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: objcache.py CACHE_DIR COMPILER ARGS...", file=sys.stderr)
        return 2
    folder, cmd = Path(argv[0]), argv[1:]
    parsed = _parse(cmd)
    if parsed is None:
        return subprocess.call(cmd)
    src, obj, pp = parsed
    try:
        key = _key(cmd, obj, pp)
    except OSError:
        key = None
    if key is None:
        return subprocess.call(cmd)
    entry = folder / key[:2] / key
    dep = obj.with_suffix(".d")
    try:
        if Path(f"{entry}.o").is_file():
            _put(Path(f"{entry}.o"), obj)
            if Path(f"{entry}.d").is_file() and any(f in cmd for f in _DEP_FLAGS):
                _put(Path(f"{entry}.d"), dep)
            os.utime(f"{entry}.o")
            return 0
    except OSError:
        pass
    rc = subprocess.call(cmd)
    if rc == 0 and obj.is_file():
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            if dep.is_file():
                _put(dep, Path(f"{entry}.d"))
            _put(obj, Path(f"{entry}.o"))
            _prune(folder)
        except OSError:
            pass
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
