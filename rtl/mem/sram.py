"""On-chip SRAM: one write port with lane enables, one synchronous read port, all zero at
power-up, written as its own Verilog module.

Amaranth writes a memory's initial values into the Verilog one word per line, and
builds a netlist bit per initial bit to do it: a 256 KiB scratchpad is 16,384 lines
of ``mem[i] = 128'h0;`` and about a fifth of its vault's elaboration time. A
:func:`sram_leaf` is the same memory as a :class:`~pimforge.rtl.hierarchy.Leaf`
whose Verilog (:func:`sram_verilog`) zeroes the words in a loop, so its text and its
conversion do not grow with the depth. Outside a leaf scope (the Amaranth simulator)
the leaf is the :class:`SRAM` component below, an Amaranth ``Memory``: both behave
as Amaranth's ports do.

- Write: at a clock edge, lane ``i`` of word ``w_addr`` takes lane ``i`` of ``w_data``
  where ``w_en[i]`` is set (a lane is ``width // lanes`` bits, lane 0 the low bits).
- Read: at a clock edge, ``r_data`` takes word ``r_addr`` as it was before that edge's
  write (not transparent), where ``r_en`` is set (always, without ``read_en``); it
  holds its value otherwise.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..hierarchy import Leaf, leaf_name

__all__ = ["SRAM", "sram_leaf", "sram_verilog"]


def _check(width: int, depth: int, lanes: int) -> None:
    if not (isinstance(depth, int) and depth >= 1):
        raise ValueError(f"SRAM depth must be a positive integer, not {depth!r}")
    if not (isinstance(lanes, int) and lanes >= 1 and width % lanes == 0):
        raise ValueError(f"SRAM lanes must divide its width {width}, not {lanes!r}")


def _abits(depth: int) -> int:
    """Address bits: one at least (a one-word memory is read at address 0)."""
    return max(1, ceil_log2(depth))


class SRAM(wiring.Component):
    """*depth* words of *width* bits in *lanes* write lanes (see the module's notes)."""

    def __init__(self, *, width: int, depth: int, lanes: int = 1, read_en: bool = False):
        _check(width, depth, lanes)
        self.width, self.depth, self.lanes, self.read_en = width, depth, lanes, read_en
        abits = _abits(depth)
        members = {"w_en": In(lanes), "w_addr": In(abits), "w_data": In(width),
                   "r_addr": In(abits), "r_data": Out(width)}
        if read_en:
            members["r_en"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=self.width, depth=self.depth, init=[])
        wp = mem.write_port(**({"granularity": self.width // self.lanes}
                               if self.lanes > 1 else {}))
        rp = mem.read_port(transparent_for=())
        m.d.comb += [wp.en.eq(self.w_en), wp.addr.eq(self.w_addr), wp.data.eq(self.w_data),
                     rp.addr.eq(self.r_addr), self.r_data.eq(rp.data)]
        if self.read_en:
            m.d.comb += rp.en.eq(self.r_en)
        return m


def sram_verilog(name: str, *, width: int, depth: int, lanes: int = 1,
                 read_en: bool = False) -> str:
    """The Verilog module *name* of an :class:`SRAM` (the leaf's ports: the signature's
    members and ``clk``)."""
    _check(width, depth, lanes)
    a, g = _abits(depth), width // lanes
    ports = ["clk", "w_en", "w_addr", "w_data", *(["r_en"] if read_en else []),
             "r_addr", "r_data"]
    writes = [f"    if (w_en[{i}]) mem[w_addr][{i * g + g - 1}:{i * g}] <= "
              f"w_data[{i * g + g - 1}:{i * g}];" for i in range(lanes)]
    return "\n".join([
        f"module {name}({', '.join(ports)});",
        "  input clk;",
        f"  input [{lanes - 1}:0] w_en;",
        f"  input [{a - 1}:0] w_addr;",
        f"  input [{width - 1}:0] w_data;",
        *(["  input r_en;"] if read_en else []),
        f"  input [{a - 1}:0] r_addr;",
        f"  output [{width - 1}:0] r_data;",
        f"  reg [{width - 1}:0] mem [0:{depth - 1}];",
        f"  reg [{width - 1}:0] q = {width}'d0;",
        "  integer i;",
        "  initial begin",
        f"    for (i = 0; i < {depth}; i = i + 1) mem[i] = {width}'d0;",
        "  end",
        "  always @(posedge clk) begin",
        *writes,
        "  end",
        "  always @(posedge clk) begin",
        f"    {'if (r_en) ' if read_en else ''}q <= mem[r_addr];",
        "  end",
        "  assign r_data = q;",
        "endmodule",
        "",
    ])


def sram_leaf(*, width: int, depth: int, lanes: int = 1, read_en: bool = False) -> Leaf:
    """An :class:`SRAM` as one Verilog module, instantiated by name wherever it repeats."""
    _check(width, depth, lanes)       # before a copy is built for the leaf
    kw = dict(width=width, depth=depth, lanes=lanes, read_en=read_en)
    name = leaf_name("sram", f"w{width}", f"d{depth}", f"l{lanes}", *(["re"] if read_en else []))
    return Leaf(name, lambda: SRAM(**kw), verilog=lambda n: sram_verilog(n, **kw))
