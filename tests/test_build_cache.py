"""The native build cache: a broken cached executable is rebuilt, and the temporary
folders of killed builds are swept."""

from __future__ import annotations

import subprocess

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
