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
import gc
import hashlib
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from amaranth.hdl import (
    ClockSignal,
    Elaboratable,
    Instance,
    Module,
    ResetSignal,
    UnusedElaboratable,
)
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from .describe import DESCRIPTIVE

__all__ = ["Leaf", "LeafModule", "leaf_name", "leaf_scope", "param_digest"]


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
    # Copies built only to read a signature (the module of their name exists already).
    spare: list[wiring.Component] = field(default_factory=list)


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("leaf_scope",
                                                                        default=None)
_PORT_RE = re.compile(r"^\s*(?:input|output|inout)\s+(?:signed\s+)?(?:\[\d+:\d+\]\s+)?"
                      r"\\?([\w$]+)\s*;", re.M)


def param_digest(params: object, digits: int = 10) -> str:
    """Short hex digest of *params* (their ``repr``), for module names."""
    return hashlib.sha1(repr(params).encode()).hexdigest()[:digits]


def leaf_name(kind: str, *labels: object, digest: object = None, digits: int = 10) -> str:
    """The Verilog module name of a shared block: every leaf is named here.

    The name is *kind*, then the readable *labels*, then (when given) a digest
    of *digest*, all joined by ``_``. Together they must identify every
    parameter of the block: :class:`Leaf` rejects two different blocks that
    share a name.

    >>> leaf_name("fp32_add", "l2")
    'fp32_add_l2'
    """
    parts = [kind, *map(str, labels)]
    if digest is not None:
        parts.append(param_digest(digest, digits))
    name = "_".join(parts)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"leaf name must be a Verilog identifier, not {name!r}")
    return name


@contextlib.contextmanager
def leaf_scope() -> Iterator[_Scope]:
    """Collect the leaf modules of the design elaborated inside this block."""
    scope = _Scope()
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
        _discard(scope.spare)


def _holds_blocks(v: object) -> bool:
    """*v* is a block or a list/tuple of blocks."""
    items = v if isinstance(v, (list, tuple)) else (v,)
    return any(isinstance(x, Elaboratable) for x in items)


def _discard(blocks: list[wiring.Component]) -> None:
    """Free *blocks*, built only to be described, without Amaranth's warning that
    they were never elaborated; the warning stays on for every other block."""
    if not blocks:
        return
    # A block built for its signature may hold blocks of its own (a vault's PEs and
    # scratchpads): they go unused with it.
    every: dict[int, object] = {}
    todo = list(blocks)
    while todo:
        b = todo.pop()
        if id(b) in every:
            continue
        every[id(b)] = b
        for v in vars(b).values():
            for x in (v if isinstance(v, (list, tuple)) else (v,)):
                if isinstance(x, Elaboratable):
                    todo.append(x)
    texts = [f"{b!r} created but never used" for b in every.values()]
    del every, todo, b          # no reference may keep them past the collection below
    with warnings.catch_warnings():
        for text in texts:
            warnings.filterwarnings("ignore", re.escape(text), UnusedElaboratable)
        blocks.clear()
        gc.collect()  # Amaranth blocks refer to themselves: only the collector frees them


def _convert(component: wiring.Component, name: str) -> str:
    from amaranth.back import verilog

    return verilog.convert(component, name=name, emit_src=False)


class Leaf(wiring.Component):
    """A block elaborated once and instantiated by module name.

    Parameters
    ----------
    name : str
        Verilog module name, from :func:`leaf_name`; it must identify the block and its parameters
        (two leaves with one name and different Verilog are an error).
    factory : callable
        Returns a fresh component of the block; called once for the module
        (and once per use outside a :func:`leaf_scope`).
    verilog : callable, optional
        ``verilog(name)`` returns the module's Verilog, written by the block's
        generator instead of converted from a copy: for a block whose
        conversion grows with a size that its text need not (a memory, whose
        initial values Amaranth writes one word per line). The module must have
        the block's ports (signature members named ``a__b``, ``clk``, ``rst``)
        and behave as the block, which is still what runs outside a scope.

    Attributes
    ----------
    params : dict
        The block's attributes that are not ports (``latency``, ``latencies``,
        ``bank_bits``, ``port_signature``...), read from one copy built for the
        signature; each of them can also be read as an attribute of the leaf.
    """


    def __init__(self, name: str, factory: Callable[[], wiring.Component], *,
                 verilog: Callable[[str], str] | None = None):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"leaf name must be a Verilog identifier, not {name!r}")
        self.leaf_name = name
        self._factory = factory
        proto = factory()
        signature = proto.signature
        # Sub-blocks are not parameters: a leaf describes its block, it does not hold
        # the copy's parts (which would also outlive the copy, unused).
        self.params = {k: v for k, v in vars(proto).items()
                       if not k.startswith("_") and k not in signature.members
                       and not _holds_blocks(v)}
        # What must agree between two leaves of one name (a cheap guard against a
        # name that does not encode every parameter).
        fingerprint = (type(proto).__qualname__, repr(signature),
                       repr(self.params.get("latencies")))
        # The copy read here is also the one elaborated: the module's Verilog in a
        # scope, this leaf's implementation outside one.
        self._impl = proto
        super().__init__(signature)
        # The block's descriptive attributes describe every instance.
        for attr in DESCRIPTIVE:
            if attr in self.params:
                setattr(self, attr, self.params[attr])
        scope = _SCOPE.get()
        if scope is not None:
            known = scope.modules.get(name)
            self._impl = None
            if known is None:
                if verilog is None:
                    text = _convert(proto, name)
                else:
                    text = verilog(name)
                    scope.spare.append(proto)   # read for its signature only
                body = re.search(rf"^module {re.escape(name)}\(.*?^endmodule", text,
                                 re.M | re.S)
                ports = frozenset(_PORT_RE.findall(body.group(0) if body else ""))
                scope.modules[name] = LeafModule(name, text, ports, fingerprint)
                scope.order.append(name)
            else:
                scope.spare.append(proto)
                if known.fingerprint != fingerprint:
                    raise ValueError(f"two different blocks use the leaf module name "
                                     f"{name!r}; the name must encode every parameter of "
                                     "the block")

    def __getattr__(self, name: str):
        # Parameters of the block (``bank_bits``, ``port_signature``...) read through to
        # the copy's attributes; ports and private names never do (wiring sets those).
        params = self.__dict__.get("params")
        if params is None or name.startswith("_") or name not in params:
            raise AttributeError(name)
        return params[name]

    def elaborate(self, platform):
        m = Module()
        scope = _SCOPE.get()
        if scope is None:
            impl, self._impl = self._impl or self._factory(), None
            m.submodules.impl = impl
            # Member by member: Amaranth 0.5's flipped() cannot reach into an array of
            # interfaces (a router's ports), so wiring.connect(flipped(self), impl) fails.
            for (_, member, outer), (_, _, inner) in zip(self.signature.flatten(self),
                                                         impl.signature.flatten(impl)):
                m.d.comb += inner.eq(outer) if member.flow == In else outer.eq(inner)
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
