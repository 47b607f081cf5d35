"""The driver-facing top: the C++ drivers see pins with plain names, never RTL port names.

Verilator turns a Verilog port into a C++ member under its own escaping rules
(``host0__valid`` becomes ``host0___05Fvalid``) and into an integer or a
``VlWide`` word array depending on its width. Rather than repeating either
rule in Python, every native driver simulates a thin wrapper, generated here
with Amaranth, that instantiates the RTL top and renames its ports to
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
    from amaranth.back import verilog as amaranth_verilog
    from amaranth.hdl import ClockSignal, Const, Instance, Module, ResetSignal, Signal

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

    m = Module()
    conns: dict[str, object] = {}
    wrapper_ports: list[Signal] = []
    words: dict[str, int] = {}
    for pin, spec, w in plan:
        if isinstance(spec, Mapping):
            sig = Signal(spec["width"], name=pin)
            conns[("i_" if spec["dir"] == "input" else "o_") + spec["name"]] = sig
            wrapper_ports.append(sig)
            continue
        words[pin] = w
        sig = Signal(32 * w * len(spec), name=pin)
        wrapper_ports.append(sig)
        output = any(p is not None and p["dir"] == "output" for p in spec)
        for k, p in enumerate(spec):
            lo = 32 * w * k
            used = p["width"] if p is not None else 0
            if p is not None and not output:
                conns["i_" + p["name"]] = sig[lo:lo + used]
            elif p is not None:
                out = Signal(used, name=f"{pin}_{k}")
                conns["o_" + p["name"]] = out
                m.d.comb += sig[lo:lo + used].eq(out)
            if output and used < 32 * w:
                m.d.comb += sig[lo + used:lo + 32 * w].eq(Const(0, 32 * w - used))
    if _CLOCK in by_name:
        conns["i_" + _CLOCK] = ClockSignal()
    if _RESET in by_name:
        conns["i_" + _RESET] = ResetSignal()
    m.submodules.dut = Instance(inner, **conns)
    text = amaranth_verilog.convert(m, name=name, ports=wrapper_ports, emit_src=False)
    return DriverTop(name, text + "\n" + verilog, words)
