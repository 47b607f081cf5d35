"""The native build cache: a broken cached executable is rebuilt, and the temporary
folders of killed builds are swept."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pimforge.sim import build
from pimforge.sim import verilator as vl

VERILOG = """module tiny(input clk, output reg [7:0] n);
  initial n = 0;
  always @(posedge clk) n <= n + 1;
endmodule
"""
MAIN = """#include "Vtiny.h"
#include "verilated.h"
#include <cstdio>
int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    Vtiny t;
    for (int i = 0; i < 5; i++) { t.clk = 0; t.eval(); t.clk = 1; t.eval(); }
    std::printf("%d\\n", (int)t.n);
    return 0;
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path))
    return tmp_path


def _run(exe) -> str:
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.strip()


def test_broken_cached_executable_is_rebuilt_and_stale_temporaries_swept(cache):
    exe = build.build_verilated(VERILOG, "tiny", {"main.cpp": MAIN}, name="cachetest")
    assert _run(exe) == "5"
    assert build.build_verilated(VERILOG, "tiny", {"main.cpp": MAIN}, name="cachetest") == exe
    exe.write_bytes(exe.read_bytes()[:100])          # a truncated executable
    # a temporary folder left by a build process that no longer exists
    stale = vl.cache_dir() / "verilated" / "other-0123.tmp999999999"
    stale.mkdir(parents=True)
    again = build.build_verilated(VERILOG, "tiny", {"main.cpp": MAIN}, name="cachetest")
    assert again == exe and _run(again) == "5"
    assert not stale.exists()
    assert not list((vl.cache_dir() / "verilated").glob("*.tmp*"))


def _fake_build(folder):
    (folder / "exe").write_text("#!/bin/sh\necho 5\n")


def test_a_build_says_what_it_builds_where_and_how_long(tmp_path, capsys):
    bdir = tmp_path / "blk-0a1b"
    assert build.cached_build(bdir, "exe", _fake_build, what="Verilator build of blk") \
        == bdir / "exe"
    err = capsys.readouterr().err
    assert "Verilator build of blk: building it once (later runs reuse it), from seconds" in err
    assert f"cache: {bdir}" in err and "Verilator build of blk: built in " in err
    build.cached_build(bdir, "exe", _fake_build, what="Verilator build of blk")
    assert capsys.readouterr().err == ""                 # a finished build: silent
    other = tmp_path / "blk-2c3d"                        # the same block, another config
    build.cached_build(other, "exe", _fake_build, what="Verilator build of blk")
    assert "about 0 s like the last build of blk" in capsys.readouterr().err


def test_a_wait_on_the_build_lock_names_the_holder(tmp_path, capsys):
    bdir = tmp_path / "blk-0a1b"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"f = open({str(bdir) + '.lock'!r}, 'a+')\n"
         "fcntl.flock(f, fcntl.LOCK_EX); f.write(f'{os.getpid()}\\n'); f.flush()\n"
         "print('locked', flush=True); time.sleep(1.5)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        build.cached_build(bdir, "exe", _fake_build, what="Verilator build of blk")
    finally:
        holder.wait(timeout=30)
    err = capsys.readouterr().err
    assert f"Verilator build of blk: waiting for process {holder.pid}, which is building it " \
           f"into {bdir}" in err
    assert (bdir / "exe").is_file()
