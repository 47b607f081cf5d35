"""Merging the identical modules of Amaranth's Verilog: which modules merge (text that
differs only in the name, bottom-up), which stay apart (one constant, the writer's
numbered names used differently), and a Verilated design that simulates the same
cycle by cycle with and without the merge, flat and hierarchical.

(No ``from __future__ import annotations`` here: Amaranth reads the components' port
annotations as objects.)"""

import re
import subprocess

import pytest
from amaranth.back import verilog as amaranth_verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pimforge.gen.vdedup import dedup_modules, repeated_blocks
from pimforge.sim import build


def _mod(name: str, body: str) -> str:
    return f"(* generator = \"Amaranth\" *)\nmodule {name}(clk, y);\n{body}endmodule\n"


def _leaf(name: str, const: str = "8'h03") -> str:
    return _mod(name, f"  input clk;\n  output [7:0] y;\n  assign y = {const};\n")


def _parent(name: str, *children: tuple[str, str]) -> str:
    body = "  input clk;\n  output [7:0] y;\n"
    for i, (mod, inst) in enumerate(children):
        body += f"  {mod} {inst} (\n    .clk(clk),\n    .y(w{i})\n  );\n"
    return _mod(name, body)


def _modules(text: str) -> list[str]:
    return re.findall(r"^module (\S+?) ?\(", text, re.M)


def test_copies_merge_bottom_up_and_a_constant_keeps_a_module_apart():
    text = (_parent("top", ("\\top.a", "a"), ("\\top.b", "b"), ("\\top.c", "c"))
            + _parent("\\top.a", ("\\top.a.x", "x"), ("\\top.a.y", "y"))
            + _parent("\\top.b", ("\\top.b.x", "x"), ("\\top.b.y", "y"))
            + _parent("\\top.c", ("\\top.c.x", "x"), ("\\top.c.y", "y"))
            + _leaf("\\top.a.x") + _leaf("\\top.a.y") + _leaf("\\top.b.x") + _leaf("\\top.b.y")
            + _leaf("\\top.c.x") + _leaf("\\top.c.y", "8'h04"))
    out, aliases = dedup_modules(text, "top")
    # the leaves equal but for their name become one; then a and b (whose children are
    # now the same module) become one; c keeps its own child with the other constant
    assert aliases == {"\\top.a.y": "\\top.a.x", "\\top.b.x": "\\top.a.x",
                       "\\top.b.y": "\\top.a.x", "\\top.c.x": "\\top.a.x",
                       "\\top.b": "\\top.a"}
    assert _modules(out) == ["top", "\\top.a", "\\top.c", "\\top.a.x", "\\top.c.y"]
    assert "8'h04" in out and out.count("8'h03") == 1
    # every instance names a module that is still there
    kept = set(_modules(out))
    insts = re.findall(r"^  (\S+) \S+ \($", out, re.M)
    assert insts == ["\\top.a", "\\top.a", "\\top.c", "\\top.a.x", "\\top.a.x",
                     "\\top.a.x", "\\top.c.y"]
    assert set(insts) <= kept
    assert out.count("(* generator") == 5          # attributes go with their module


def test_the_top_and_unique_modules_are_left_as_they_are():
    text = _leaf("top") + _leaf("\\top.x", "8'h01") + _leaf("\\top.y", "8'h02")
    assert dedup_modules(text, "top") == (text, {})
    # a top that equals a submodule is never merged away
    text = _leaf("top") + _leaf("\\top.x")
    assert dedup_modules(text, "top") == (text, {})


def test_the_writers_numbered_names_match_only_where_they_are_used_alike():
    def numbered(name: str, first: int, second: int, swap: bool = False) -> str:
        d1, d2 = (f"\\$auto$verilog_backend.cc:2355:dump_module${n} " for n in (first, second))
        use = f"{d2}, {d1}" if swap else f"{d1}, {d2}"
        return _mod(name, f"  input clk;\n  output [7:0] y;\n  reg {d1} = 0;\n"
                          f"  reg {d2} = 1;\n  assign y = {{{use}}};\n")
    # other numbers, used alike: the same module
    same = numbered("\\t.a", 1, 2) + numbered("\\t.b", 7, 8)
    assert dedup_modules(same, "t")[1] == {"\\t.b": "\\t.a"}
    # the same names used the other way round (erasing the numbers would merge them)
    swapped = numbered("\\t.a", 1, 2) + numbered("\\t.b", 1, 2, swap=True)
    assert dedup_modules(swapped, "t")[1] == {}


class _Acc(wiring.Component):
    x: In(8)
    y: Out(16)

    def __init__(self, k: int):
        self.k = k
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.y * 3 + self.x * self.k)
        return m


class _Pair(wiring.Component):
    x: In(8)
    a: Out(16)
    b: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.p = p = _Acc(3)
        m.submodules.q = q = _Acc(3)
        m.d.comb += [p.x.eq(self.x), q.x.eq(self.x ^ 0x5A), self.a.eq(p.y), self.b.eq(q.y)]
        return m


class _Top(wiring.Component):
    x: In(8)
    o0: Out(16)
    o1: Out(16)
    o2: Out(16)
    o3: Out(16)
    o4: Out(16)
    o5: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.u = u = _Pair()
        m.submodules.v = v = _Pair()
        m.submodules.w = w = _Acc(5)      # differs from the others in one constant
        m.submodules.z = z = _Acc(3)
        m.d.comb += [u.x.eq(self.x), v.x.eq(self.x + 1), w.x.eq(self.x), z.x.eq(self.x),
                     self.o0.eq(u.a), self.o1.eq(u.b), self.o2.eq(v.a),
                     self.o3.eq(v.b), self.o4.eq(w.y), self.o5.eq(z.y)]
        return m


MAIN = """#include "Vdd_top.h"
#include "verilated.h"
#include <cstdio>
int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    Vdd_top t;
    unsigned s = 12345;
    t.rst = 1; t.clk = 0; t.eval(); t.clk = 1; t.eval(); t.rst = 0;
    for (int i = 0; i < 200; i++) {
        s = s * 1103515245u + 12345u;
        t.x = (s >> 16) & 0xFF;
        t.clk = 0; t.eval(); t.clk = 1; t.eval();
        std::printf("%d %d %d %d %d %d\\n", (int)t.o0, (int)t.o1, (int)t.o2,
                    (int)t.o3, (int)t.o4, (int)t.o5);
    }
    return 0;
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path))
    return tmp_path


def test_a_merged_design_simulates_the_same_cycle_by_cycle(cache):
    text = amaranth_verilog.convert(_Top(), name="dd_top", emit_src=False)
    merged, aliases = dedup_modules(text, "dd_top")
    # five accumulators with k = 3 become one, the two pairs then one; k = 5 stays
    assert len(_modules(text)) == 9 and len(_modules(merged)) == 4, _modules(merged)
    assert "\\dd_top.w" not in aliases and len(aliases) == 5

    def run(dedup: bool) -> list[str]:
        exe = build.build_verilated(text, "dd_top", {"main.cpp": MAIN}, name="vdedup",
                                    dedup=dedup)
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        return out.splitlines()

    plain, shared = run(False), run(True)
    assert len(plain) == 200 and shared == plain
    # the stimulus tells the k = 5 accumulator from the k = 3 one fed the same input,
    # so merging them would have shown
    assert any(line.split()[4] != line.split()[5] for line in plain)


def test_repeated_shared_blocks_are_named_for_hierarchical_verilation():
    text = (_parent("top", ("blk", "a"), ("blk", "b"), ("once", "c"), ("\\top.d", "d"),
                    ("\\top.d", "e"), ("tiny", "f"), ("tiny", "g"))
            + _parent("blk", ("inner", "x"), ("inner", "y")) + _leaf("inner")
            + _leaf("once") + _leaf("\\top.d") + _leaf("tiny"))
    # blk twice (with its inner copies); inner four times; once only once; \top.d is
    # an Amaranth submodule, not a shared block
    assert repeated_blocks(text, "top", min_chars=0) == ["blk", "inner", "tiny"]
    # size counts a block's submodules: blk holds two inners, tiny is one leaf
    leaf = len(_leaf("tiny"))
    assert repeated_blocks(text, "top", min_chars=2 * leaf + 1) == ["blk"]
    with pytest.raises(ValueError, match="nope"):
        repeated_blocks(text, "nope")


HIER_V = """module acc(input clk, input [7:0] x, output reg [15:0] y);
  initial y = 0;
  always @(posedge clk) y <= y * 3 + x * 3;
endmodule
module acc5(input clk, input [7:0] x, output reg [15:0] y);
  initial y = 0;
  always @(posedge clk) y <= y * 3 + x * 5;
endmodule
module hier_top(input clk, input [7:0] x, output [15:0] o0, output [15:0] o1,
                output [15:0] o2, output [15:0] o3);
  acc a (.clk(clk), .x(x), .y(o0));
  acc b (.clk(clk), .x(x ^ 8'h5a), .y(o1));
  acc c (.clk(clk), .x(x + 8'd1), .y(o2));
  acc5 d (.clk(clk), .x(x), .y(o3));
endmodule
"""
HIER_MAIN = """#include "Vhier_top.h"
#include "verilated.h"
#include <cstdio>
int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    Vhier_top t;
    unsigned s = 777;
    for (int i = 0; i < 100; i++) {
        s = s * 1103515245u + 12345u;
        t.x = (s >> 16) & 0xFF;
        t.clk = 0; t.eval(); t.clk = 1; t.eval();
        std::printf("%d %d %d %d\\n", (int)t.o0, (int)t.o1, (int)t.o2, (int)t.o3);
    }
    return 0;
}
"""


def test_a_hierarchical_build_simulates_the_same_as_a_flat_one(cache, monkeypatch):
    monkeypatch.setattr(build, "HIER_MIN_CHARS", 0)

    def run(hierarchical: bool) -> tuple[list[str], str]:
        exe = build.build_verilated(HIER_V, "hier_top", {"main.cpp": HIER_MAIN},
                                    name="vhier", hierarchical=hierarchical)
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        vlt = exe.parent.parent / "hier.vlt"
        return out.splitlines(), vlt.read_text() if vlt.exists() else ""

    (flat, none), (hier, vlt) = run(False), run(True)
    assert none == "" and 'hier_block -module "acc"' in vlt and "acc5" not in vlt
    assert len(flat) == 100 and hier == flat
    assert any(line.split()[0] != line.split()[3] for line in flat)
