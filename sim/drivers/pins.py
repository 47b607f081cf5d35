"""The driver-facing top: the C++ drivers see pins with plain names, never RTL port names.

Verilator turns a Verilog port into a C++ member under its own escaping rules
(``host0__valid`` becomes ``host0___05Fvalid``) and into an integer or a
``VlWide`` word array depending on its width. Rather than repeating either
rule in Python, every native driver simulates a thin wrapper, written here as
Verilog text (only wires and assignments, so no netlist limit applies: Amaranth
caps an instance's outputs at 65,536 bits, which the 16x16 NicePIM array's
ports pass), that instantiates the RTL top and renames its ports to
identifiers Verilator keeps as they are. A *lane pin* packs a family of ports
(one per vault, per master, per memory) side by side, each padded to whole
32-bit words, so the C++ side reaches element ``i`` through the lane helpers
of ``driver.h`` and loops instead of naming each port. The map from pins to
RTL ports is the one place where a driver names RTL ports: a renamed port is
an edit there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pimforge.gen.errors import SimulationError

__all__ = ["DriverTop", "driver_top", "module_ports"]

_CLOCK, _RESET = "clk", "rst"
_PORT_RE = re.compile(r"^\s*(input|output)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s+)?"
                      r"\\?([\w$]+)\s*;", re.M)


@dataclass(frozen=True)
class DriverTop:
    """A generated wrapper around an RTL top.

    Attributes
    ----------
    name : str
        Module name of the wrapper (Verilator's class is ``V<name>``).
    verilog : str
        The wrapper followed by the wrapped design.
    words : dict[str, int]
        32-bit words of one element of every lane pin.
    """

    name: str
    verilog: str
    words: dict[str, int]


def _words(width: int) -> int:
    return -(-width // 32)


def _slice(pin: str, lo: int, width: int) -> str:
    return f"{pin}[{lo + width - 1}:{lo}]"


def _ident(name: str) -> str:
    """*name* as a Verilog identifier (escaped where it is not a plain one)."""
    return name if re.fullmatch(r"[A-Za-z_][\w$]*", name) else f"\\{name} "


def module_ports(verilog: str, module: str) -> list[dict]:
    """Ports of *module* in Amaranth's Verilog, as a manifest lists them (name, dir, width)."""
    m = re.search(rf"^module {re.escape(module)}\(.*?^endmodule", verilog, re.M | re.S)
    if not m:
        raise SimulationError(f"no module {module!r} in the Verilog")
    return [{"name": n, "dir": d, "width": int(hi) - int(lo) + 1 if hi else 1}
            for d, hi, lo, n in _PORT_RE.findall(m.group(0))]


def driver_top(verilog: str, inner: str, ports: Sequence[Mapping] | None,
               pins: Mapping[str, object], *, name: str) -> DriverTop:
    """Wrap module *inner* of *verilog* in module *name* whose ports are *pins*.

    Parameters
    ----------
    verilog : str
        Verilog text holding module *inner* (and everything it instantiates).
    inner : str
        The wrapped module.
    ports : sequence of mapping or None
        *inner*'s ports as in a manifest (``name``, ``dir``, ``width``); None:
        read from *verilog* (:func:`module_ports`).
    pins : mapping
        Pin name -> RTL port name (the pin has the port's width), or -> a list
        of RTL port names or ``None`` (a lane pin: element ``i`` is the ``i``-th
        port zero-extended to :attr:`DriverTop.words` words; ``None`` is a
        missing port, which reads as 0 and ignores what is written). ``clk``
        and ``rst`` are always connected. Every other input of *inner* must be
        driven by a pin.

    Returns
    -------
    DriverTop
    """
    ports = module_ports(verilog, inner) if ports is None else ports
    by_name = {p["name"]: p for p in ports}

    def port(rtl: str) -> Mapping:
        if rtl not in by_name:
            raise SimulationError(f"{inner} has no port {rtl!r} (driver pin map out of date?)")
        return by_name[rtl]

    # Check everything before building, so that an error leaves no half-built module.
    plan: list[tuple[str, Mapping | list[Mapping | None], int]] = []
    driven = set()
    for pin, spec in pins.items():
        if not pin.isidentifier() or "__" in pin or pin in (_CLOCK, _RESET):
            raise SimulationError(f"pin name {pin!r} is not a plain C identifier")
        if isinstance(spec, str):
            plan.append((pin, port(spec), 0))
            driven.add(spec)
            continue
        elems = [None if s is None else port(s) for s in spec]
        if len({p["dir"] for p in elems if p is not None}) != 1:
            raise SimulationError(f"pin {pin!r} mixes inputs and outputs or has no port")
        plan.append((pin, elems, max(_words(p["width"]) for p in elems if p is not None)))
        driven.update(p["name"] for p in elems if p is not None)
    for p in ports:
        if p["dir"] == "input" and p["name"] not in driven | {_CLOCK, _RESET}:
            raise SimulationError(f"input {p['name']!r} of {inner} is driven by no pin")

    decls: list[str] = []
    body: list[str] = []
    conns: list[tuple[str, str]] = []
    words: dict[str, int] = {}

    def decl(kind: str, width: int, ident: str) -> None:
        decls.append(f"  {kind} {f'[{width - 1}:0] ' if width > 1 else ''}{ident};")

    for pin, spec, w in plan:
        if isinstance(spec, Mapping):
            decl(spec["dir"], spec["width"], pin)
            conns.append((spec["name"], pin))
            continue
        words[pin] = w
        output = any(p is not None and p["dir"] == "output" for p in spec)
        decl("output" if output else "input", 32 * w * len(spec), pin)
        for k, p in enumerate(spec):
            lo = 32 * w * k
            used = p["width"] if p is not None else 0
            if p is not None and not output:
                conns.append((p["name"], _slice(pin, lo, used)))
            elif p is not None:
                decl("wire", used, f"{pin}__{k}")
                conns.append((p["name"], f"{pin}__{k}"))
                body.append(f"  assign {_slice(pin, lo, used)} = {pin}__{k};")
            if output and used < 32 * w:
                body.append(f"  assign {_slice(pin, lo + used, 32 * w - used)} = "
                            f"{32 * w - used}'d0;")
    for clk in (_CLOCK, _RESET):
        if clk in by_name:
            conns.append((clk, clk))
    names = [_CLOCK, _RESET] + [pin for pin, _, _ in plan]
    text = "\n".join([
        f"module {name}({', '.join(names)});",
        f"  input {_CLOCK};", f"  input {_RESET};", *decls,
        f"  {inner} dut (",
        ",\n".join(f"    .{_ident(port)}({wire})" for port, wire in conns),
        "  );", *body, "endmodule", ""])
    return DriverTop(name, text + "\n" + verilog, words)
