"""Separately elaborated leaf modules, instantiated by name where they repeat.

Amaranth flattens a design into one Verilog module, so a block used N times
(the PEs of a vault, the vaults of a cube, the FP units of a PE) is emitted N
times and Verilator compiles N copies of it. :class:`Leaf` keeps such a block
as one Verilog module that every use instantiates: inside
:func:`leaf_scope` (which :func:`pimforge.gen.elaborate.elaborate` opens) a
Leaf elaborates to an ``Instance`` of a module generated once per distinct
name, and the scope collects those modules' Verilog. Outside a scope (the
Amaranth simulator, which cannot simulate an ``Instance``) a Leaf simply
elaborates a fresh copy of the block, so unit tests see the same behaviour.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["Leaf", "LeafModule", "leaf_scope"]


@dataclass
class LeafModule:
    """One separately generated Verilog module."""

    name: str
    verilog: str
    ports: frozenset[str]
    fingerprint: tuple


@dataclass
class _Scope:
    modules: dict[str, LeafModule] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("leaf_scope",
                                                                        default=None)
_PORT_RE = re.compile(r"^\s*(?:input|output|inout)\s+(?:signed\s+)?(?:\[\d+:\d+\]\s+)?"
                      r"\\?([\w$]+)\s*;", re.M)


@contextlib.contextmanager
def leaf_scope() -> Iterator[_Scope]:
    """Collect the leaf modules of the design elaborated inside this block."""
    scope = _Scope()
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def _convert(component: wiring.Component, name: str) -> str:
    from amaranth.back import verilog

    return verilog.convert(component, name=name, emit_src=False)


class Leaf(wiring.Component):
    """A block elaborated once and instantiated by module name.

    Parameters
    ----------
    name : str
        Verilog module name; it must identify the block and its parameters
        (two leaves with one name and different Verilog are an error).
    factory : callable
        Returns a fresh component of the block; called once for the module
        (and once per use outside a :func:`leaf_scope`).

    Attributes
    ----------
    prototype : wiring.Component
        The component built for the signature; its attributes (``latency``,
        ``latencies``...) describe every instance, and any of its attributes
        that is not a port can be read through the leaf.
    """

    # Attributes of the block that describe every instance, copied from the prototype.
    _DESCRIPTIVE = ("latency", "latencies", "memory_map", "isa_version")

    def __init__(self, name: str, factory: Callable[[], wiring.Component]):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"leaf name must be a Verilog identifier, not {name!r}")
        self.leaf_name = name
        self._factory = factory
        self.prototype = factory()
        # The prototype only describes the block; it is never elaborated itself.
        self.prototype._MustUse__silence = True
        super().__init__(self.prototype.signature)
        for attr in self._DESCRIPTIVE:
            if hasattr(self.prototype, attr):
                setattr(self, attr, getattr(self.prototype, attr))
        # What must agree between two leaves of one name (a cheap guard against a
        # name that does not encode every parameter).
        fingerprint = (type(self.prototype).__qualname__, repr(self.prototype.signature),
                       repr(getattr(self.prototype, "latencies", None)))
        scope = _SCOPE.get()
        if scope is not None:
            known = scope.modules.get(name)
            if known is None:
                text = _convert(factory(), name)
                body = re.search(rf"^module {re.escape(name)}\(.*?^endmodule", text,
                                 re.M | re.S)
                ports = frozenset(_PORT_RE.findall(body.group(0) if body else ""))
                scope.modules[name] = LeafModule(name, text, ports, fingerprint)
                scope.order.append(name)
            elif known.fingerprint != fingerprint:
                raise ValueError(f"two different blocks use the leaf module name {name!r}; "
                                 "the name must encode every parameter of the block")

    def __getattr__(self, name: str):
        # Parameters of the block (``bank_bits``, ``port_signature``...) read through to
        # the prototype; ports and private names never do (wiring sets those itself).
        proto = self.__dict__.get("prototype")
        if proto is None or name.startswith("_") or name in proto.signature.members:
            raise AttributeError(name)
        return getattr(proto, name)

    def elaborate(self, platform):
        m = Module()
        scope = _SCOPE.get()
        if scope is None:
            m.submodules.impl = impl = self._factory()
            wiring.connect(m, wiring.flipped(self), impl)
            return m
        leaf = scope.modules[self.leaf_name]
        kwargs = {}
        for path, member, value in self.signature.flatten(self):
            port = "__".join(map(str, path))
            if port not in leaf.ports:  # unused inputs are pruned from the module
                continue
            kwargs[("i_" if member.flow == In else "o_") + port] = value
        if "clk" in leaf.ports:
            kwargs["i_clk"] = ClockSignal()
        if "rst" in leaf.ports:
            kwargs["i_rst"] = ResetSignal()
        m.submodules.inst = Instance(self.leaf_name, **kwargs)
        return m
