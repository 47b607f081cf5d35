"""What a block publishes about itself: its Verilog ports and its descriptive attributes.

A manifest (:func:`pimforge.gen.elaborate.elaborate`) is built from the
component, never from the Verilog text:

* ports: the component's ``signature.flatten()``, named as Amaranth's Verilog
  backend names them (the member path joined with ``__``), plus ``clk`` and
  ``rst`` of the ``sync`` domain that every pimforge block runs in;
* descriptive attributes, the protocol read here and by
  :class:`~pimforge.rtl.hierarchy.Leaf` (which copies them from its block):

  ``latencies`` : dict[str, int]
      Pipeline latencies in cycles, by name.
  ``memory_map`` : dict or None
      The block's address layout (JSON-serialisable).
  ``isa_version`` : str or None
      Version of the instruction set the block executes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amaranth.hdl import Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["DESCRIPTIVE", "BlockInfo", "block_info", "ports"]

#: The descriptive attributes of a block (see the module docstring).
DESCRIPTIVE = ("latency", "latencies", "memory_map", "isa_version")

# Every block is synchronous in the one ``sync`` domain, whose clock and reset
# the Verilog backend adds as ports after the signature's members.
_DOMAIN_PORTS = ({"name": "clk", "dir": "input", "width": 1},
                 {"name": "rst", "dir": "input", "width": 1})


@dataclass(frozen=True)
class BlockInfo:
    """The descriptive attributes of one block, checked."""

    latencies: dict[str, int]
    memory_map: dict | None
    isa_version: str | int | None


def block_info(component: Any) -> BlockInfo:
    """Read and check *component*'s descriptive attributes."""
    latencies = dict(getattr(component, "latencies", None) or {})
    for k, v in latencies.items():
        if not isinstance(k, str) or not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{type(component).__name__}.latencies must map names to cycle "
                            f"counts, not {k!r}: {v!r}")
    memory_map = getattr(component, "memory_map", None)
    if memory_map is not None and not isinstance(memory_map, dict):
        raise TypeError(f"{type(component).__name__}.memory_map must be a dict or None, "
                        f"not {memory_map!r}")
    isa_version = getattr(component, "isa_version", None)
    if isa_version is not None and not isinstance(isa_version, (str, int)):
        raise TypeError(f"{type(component).__name__}.isa_version must be a string or None, "
                        f"not {isa_version!r}")
    return BlockInfo(latencies, memory_map, isa_version)


def ports(component: wiring.Component) -> list[dict]:
    """The Verilog ports of *component* as a top module, sorted by name as the
    backend emits them: ``{"name", "dir", "width"}`` each."""
    out = [dict(p) for p in _DOMAIN_PORTS]
    for path, member, _value in component.signature.flatten(component):
        out.append({"name": "__".join(map(str, path)),
                    "dir": "input" if member.flow == In else "output",
                    "width": Shape.cast(member.shape).width})
    return sorted(out, key=lambda p: p["name"])
