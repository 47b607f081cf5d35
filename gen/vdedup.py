"""Merging the identical modules of a Verilog file that Amaranth wrote.

Amaranth 0.5's Verilog backend writes one module per submodule *instance*
(``\\simd.add0`` ... ``\\simd.add3``), so a block used N times inside one shared
module (:class:`~pimforge.rtl.hierarchy.Leaf`) is N modules that Yosys
synthesizes and Verilator compiles N times. :func:`dedup_modules` keeps one
module of each set whose text is the same but for its name, and renames the
instances of the others: the design is the same netlist, written once per kind
of block. Modules that differ in anything else (a constant, a width, a port)
stay apart.

Verilator 5 still generates code per *instance* (its scopes are flattened), so a
module kept once is compiled once only when it is a hierarchical block
(``--hierarchical``): :func:`repeated_blocks` names the shared blocks worth it.
"""

from __future__ import annotations

import re

__all__ = ["dedup_modules", "repeated_blocks"]

# A module definition with the attribute lines before it (Yosys' Verilog writer).
_MODULE_RE = re.compile(r"(?:^\(\*[^\n]*\*\)\n)*^module (\\\S+|[A-Za-z_][\w$]*) ?\(.*?"
                        r"^endmodule\n?", re.M | re.S)
# Names Yosys numbers across the design (``\\$auto$rtlil.cc:2739:Not$4``,
# ``\\$auto$verilog_backend.cc:2355:dump_module$1``), which differ between copies.
_LOCAL_RE = re.compile(r"(\$auto\$[^\s$]*\$)(\d+)(?=\s)")
# The start of an instance: indentation, the module's name, whitespace, the instance name.
_INSTANCE_RE = re.compile(r"^(\s+)(\\\S+|[A-Za-z_][\w$]*)(?=\s+\S+\s*\()", re.M)


def _key(body: str, name: str) -> str:
    """The module's text without its attributes and its name, with the ports of its
    header sorted and Yosys' numbered names renumbered in order of first use
    (so that two modules match only where they use them alike).

    The header's order is the order Amaranth met the ports in, which differs between
    copies of one block; it means nothing to instances that connect ports by name,
    as every instance that Yosys writes does.
    """
    text = body[body.index("module ") + len("module ") + len(name):]
    start, end = text.index("("), text.index(");")
    ports = sorted(p.strip() for p in text[start + 1:end].split(","))
    text = "module (" + ", ".join(ports) + text[end:]
    # A consistent renaming inside Yosys' own ``$auto$`` names, which no other name uses.
    numbers: dict[str, int] = {}
    return _LOCAL_RE.sub(lambda m: f"{m.group(1)}{numbers.setdefault(m.group(0), len(numbers))}",
                         text)


def dedup_modules(verilog: str, top: str) -> tuple[str, dict[str, str]]:
    """*verilog* with each set of identical modules replaced by one, and the aliases.

    Modules whose text is the same but for their name, the order of the ports in
    their header and the numbers of Yosys' ``$auto$...$N`` names are merged into the
    first, their instances renamed, bottom-up until no two are alike (parents become
    alike once their children are merged). The *top* module is kept as it is. Returns the text and
    ``{removed name: kept name}``; a file without repeats is returned unchanged.
    """
    aliases: dict[str, str] = {}
    text = verilog
    while True:
        keep: dict[str, str] = {}
        found: dict[str, str] = {}
        for m in _MODULE_RE.finditer(text):
            name = m.group(1)
            if name == top:
                continue
            key = _key(m.group(0), name)
            if key in keep:
                found[name] = keep[key]
            else:
                keep[key] = name
        if not found:
            return text, aliases
        text = _MODULE_RE.sub(lambda m: "" if m.group(1) in found else m.group(0), text)
        text = _INSTANCE_RE.sub(lambda m: m.group(1) + found.get(m.group(2), m.group(2)), text)
        for k, v in list(aliases.items()):
            aliases[k] = found.get(v, v)
        aliases.update(found)


def repeated_blocks(verilog: str, top: str, *, min_chars: int = 20_000) -> list[str]:
    """The modules of *verilog* worth Verilating once as hierarchical blocks.

    Those are the shared blocks (:class:`~pimforge.rtl.hierarchy.Leaf`, whose names
    are plain identifiers, unlike the escaped ``\\a.b`` names of Amaranth's
    submodules) that the design holds more than once and whose text with their
    submodules' is at least *min_chars* characters: a small block costs more at its
    boundary (no optimization across it, a call per evaluation) than it saves.
    Sorted by name.
    """
    mods = {m.group(1): m.group(0) for m in _MODULE_RE.finditer(verilog)}
    children: dict[str, dict[str, int]] = {}
    for name, body in mods.items():
        counts: dict[str, int] = {}
        for m in _INSTANCE_RE.finditer(body):
            if m.group(2) in mods and m.group(2) != name:
                counts[m.group(2)] = counts.get(m.group(2), 0) + 1
        children[name] = counts
    size: dict[str, int] = {}

    def subtree(name: str) -> int:
        if name not in size:
            size[name] = len(mods[name]) + sum(n * subtree(c)
                                               for c, n in children[name].items())
        return size[name]

    uses: dict[str, int] = {}

    def walk(name: str, mult: int) -> None:
        uses[name] = uses.get(name, 0) + mult
        for c, n in children[name].items():
            walk(c, mult * n)

    if top not in mods:
        raise ValueError(f"top module {top!r} is not in the Verilog")
    walk(top, 1)
    return sorted(n for n, k in uses.items()
                  if n != top and k > 1 and not n.startswith("\\")
                  and subtree(n) >= min_chars)
