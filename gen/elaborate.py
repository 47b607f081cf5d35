"""Elaboration of a registered block to Verilog, with its JSON manifest.

The manifest written beside every Verilog file records what a user (or a
testbench) needs to drive the design without reading the generator: the
config, the module list, the top's ports, pipeline latencies, the memory map
and the ISA version where the block has them; ports and descriptions are read
from the component (:mod:`pimforge.rtl.describe`), not from the Verilog.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from amaranth.back import verilog

from pimforge.rtl.describe import block_info, ports
from pimforge.rtl.hierarchy import leaf_scope

from .config import Config, to_dict
from .output import FileSet, check_output_dir, check_output_file
from .registry import get_block

__all__ = ["Elaborated", "elaborate", "write_build"]

# Amaranth's Verilog backend (yosys ``write_verilog``) produces three kinds of
# Verilator warnings by construction, each meaning exactly what Amaranth meant:
# constants trimmed to their minimal width and unextended operands that rely
# on Verilog's context-determined widths (WIDTHEXPAND), dynamic bit selects
# written as shifts into narrower signals (WIDTHTRUNC), and ``case`` statements
# of ``m.Switch``/``m.FSM`` with no default arm, where "no arm matches" keeps
# the defaults in both languages (CASEINCOMPLETE). These three are switched off
# in the file itself, so a plain ``verilator --lint-only`` of the output
# accepts it while every other warning (latches, combinational loops, multiple
# drivers, unused or undriven signals that Verilator reports by default)
# stays fatal.
LINT_HEADER = ("/* verilator lint_off WIDTHEXPAND */\n/* verilator lint_off WIDTHTRUNC */\n"
               "/* verilator lint_off CASEINCOMPLETE */\n")


@dataclass
class Elaborated:
    top: str
    verilog: str
    manifest: dict

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        """Write ``TOP.v`` and ``TOP.json`` (the manifest, last) into *out_dir* as one set:
        a failure leaves the previous pair whole."""
        out_dir = check_output_dir(out_dir, "--out")
        v = check_output_file(out_dir / f"{self.top}.v")
        j = check_output_file(out_dir / f"{self.top}.json")
        with FileSet(out_dir, marker=j.name) as fs:
            fs.path(v.name).write_text(self.verilog)
            fs.path(j.name).write_text(json.dumps(self.manifest, indent=2) + "\n")
        return v, j


def elaborate(block: str, config: Config, *, top: str | None = None) -> Elaborated:
    """Build *block* for *config* and convert it to Verilog named *top* (default: block)."""
    spec = get_block(block)
    top = top or spec.name
    with leaf_scope() as leaves:
        component = spec.build(config)
        text = verilog.convert(component, name=top, emit_src=False)
    if top in leaves.modules:
        raise ValueError(f"block {block!r} uses a leaf module named like the top, {top!r}")
    # One copy of every separately elaborated leaf module (see rtl/hierarchy.py).
    text = LINT_HEADER + text + "".join(leaves.modules[n].verilog for n in leaves.order)
    modules = re.findall(r"^module (\\?[^\s(]+)", text, re.M)
    # Ports and descriptions come from the component (rtl/describe.py), not the text.
    info = block_info(component)
    manifest = {
        "top": top,
        "block": spec.name,
        "description": spec.doc,
        "config_name": config.name,
        "config": to_dict(config),
        "modules": modules,
        "ports": ports(component),
        "latencies": info.latencies,
        "memory_map": info.memory_map,
        "isa_version": info.isa_version,
        "generator": {"pimforge": metadata.version("pimforge"),
                      "amaranth": metadata.version("amaranth")},
    }
    return Elaborated(top, text, manifest)


def write_build(block: str, config: Config, out_dir: Path) -> tuple[Path, Path]:
    return elaborate(block, config).write(out_dir)
