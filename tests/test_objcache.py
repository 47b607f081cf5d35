"""The compile cache of the library sources every Verilator build compiles
(:mod:`pimforge.sim.objcache`): a library source is compiled once per preprocessed text,
flags and compiler, a build's own files every time, and a hit gives the same object."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pimforge.sim import objcache

CXX = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")


@pytest.fixture
def lib(tmp_path, monkeypatch):
    """A library folder (a header and a source) outside the build folder, the build
    folder as the working directory, and the cache folder."""
    libdir = tmp_path / "lib"
    libdir.mkdir()
    (libdir / "lib.h").write_text("#define SCALE 3\n")
    (libdir / "lib.cpp").write_text('#include "lib.h"\nint scale(int x) { return SCALE * x; }\n')
    build = tmp_path / "build"
    build.mkdir()
    monkeypatch.chdir(build)
    return libdir, build, tmp_path / "cache"


def _compile(cache: Path, src: Path, *flags: str) -> int:
    return objcache.main([str(cache), CXX, "-O1", f"-I{src.parent}", "-MMD", *flags, "-c",
                          "-o", "lib.o", str(src)])


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/*.o"))


def test_a_library_source_is_compiled_once_and_its_object_is_the_same(lib, monkeypatch):
    libdir, build, cache = lib
    assert _compile(cache, libdir / "lib.cpp") == 0
    first = (build / "lib.o").read_bytes()
    assert len(_entries(cache)) == 1 and (build / "lib.d").is_file()
    (build / "lib.o").unlink()
    (build / "lib.d").unlink()
    # a hit: only the preprocessor runs, never the compile
    entry = _entries(cache)[0]
    os.utime(entry, (0, 0))

    def no_compile(cmd):
        raise AssertionError(f"compiled again: {cmd}")
    monkeypatch.setattr(objcache.subprocess, "call", no_compile)
    assert _compile(cache, libdir / "lib.cpp") == 0
    assert (build / "lib.o").read_bytes() == first
    assert (build / "lib.d").is_file()
    assert entry.stat().st_mtime > 0                 # marked as used
    assert len(_entries(cache)) == 1


def test_a_changed_header_or_flag_is_a_new_object(lib):
    libdir, build, cache = lib
    assert _compile(cache, libdir / "lib.cpp") == 0
    (libdir / "lib.h").write_text("#define SCALE 5\n")
    assert _compile(cache, libdir / "lib.cpp") == 0
    assert _compile(cache, libdir / "lib.cpp", "-DEXTRA=1") == 0
    assert len(_entries(cache)) == 3


def test_the_builds_own_files_and_headers_are_not_cached(lib):
    libdir, build, cache = lib
    shutil.copy(libdir / "lib.cpp", build / "own.cpp")
    assert objcache._parse([CXX, "-c", "own.cpp"]) is None
    assert objcache._parse([CXX, "-x", "c++-header", "V__pch.h", "-o", "V__pch.h.fast.gch"]) \
        is None
    src, obj, pp = objcache._parse([CXX, "-MMD", "-O2", "-c", "-o", "x.o",
                                    str(libdir / "lib.cpp")])
    assert (src, obj) == (libdir / "lib.cpp", Path("x.o"))
    assert pp == [CXX, "-O2", str(libdir / "lib.cpp"), "-E"]
    assert objcache.main([str(cache), CXX, f"-I{libdir}", "-c", "own.cpp"]) == 0
    assert (build / "own.o").is_file() and not cache.exists()


def test_a_failing_compile_keeps_nothing(lib):
    libdir, build, cache = lib
    (libdir / "lib.cpp").write_text("int broken( {\n")
    assert _compile(cache, libdir / "lib.cpp") != 0
    assert not _entries(cache)


def test_the_cache_is_kept_under_its_limit(lib, monkeypatch):
    libdir, build, cache = lib
    monkeypatch.setattr(objcache, "LIMIT_BYTES", 1)
    assert _compile(cache, libdir / "lib.cpp") == 0
    assert (build / "lib.o").is_file() and not _entries(cache)
