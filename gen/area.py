"""Silicon area from synthesized gate counts: logic by NAND2 equivalents, memories as macros.

The model turns a :class:`~pimforge.gen.synth.SynthResult` (or any of its
``total`` dicts) into mm^2 at a stated technology node. Every coefficient and
its source:

Logic
    ``nand2_eq`` (flip-flops included, see :data:`pimforge.gen.synth.NAND2_EQ`)
    times the area of one NAND2 at the node. The reference is NAND2_X1 of the
    NanGate FreePDK45 Open Cell Library, :data:`NAND2_UM2` = 0.798 um^2 at
    :data:`NAND2_NODE_NM` = 45 nm (the library the weights come from). Other
    nodes scale it by the ideal area rule ``(node / 45)**2`` (:func:`node_scale`):
    a half-node step halves the area. Real libraries shrink less below 28 nm
    (contacted poly pitch and metal pitch stopped scaling with the node name), so
    at 22-24 nm this rule is optimistic; it is the rule PIM papers use when they
    quote one node's figure at another.
    The area is standard-cell area; :data:`UTILIZATION` (1.0) leaves placement
    and routing overhead out, as design-compiler area reports (iPIM's, PIM-CapsNet's)
    do.

Memories
    Memories that synthesis kept as macros (``memories`` of a result: width x
    depth, ports) are priced by an SRAM model passed in as ``sram``: a function
    ``sram(size_bytes, ports) -> mm^2`` at :data:`SRAM_NODE_NM` = 32 nm. The
    model used everywhere in pimforge is the DESCNet scratchpad model,
    :func:`pimforge.sim.descnet.sram.area_mm2` (a closed form fitted to DESCNet
    Table III's CACTI-P areas at 32 nm); it lives in the ``sim`` layer, which
    this module may not import, so callers above ``gen`` (the command line, the
    scripts, the DSE) pass it in. Other nodes scale it by ``(node / 32)**2``.

DRAM process
    Logic and buffers placed on a DRAM die are built with the DRAM process's
    fewer metal layers; iPIM (Sec. VII-A, after its ref. [73]) conservatively
    doubles their area: :data:`DRAM_PROCESS_FACTOR` = 2, applied when
    ``dram_die=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import PimforgeError

__all__ = ["DRAM_PROCESS_FACTOR", "NAND2_NODE_NM", "NAND2_UM2", "SRAM_NODE_NM", "UTILIZATION",
           "Area", "AreaError", "AreaModel", "node_scale"]

#: NanGate FreePDK45 Open Cell Library, NAND2_X1 cell area (um^2).
NAND2_UM2 = 0.798
#: Node of :data:`NAND2_UM2` (nm).
NAND2_NODE_NM = 45.0
#: Node of the DESCNet SRAM model (DESCNet Sec. VI: 32 nm CMOS, CACTI-P).
SRAM_NODE_NM = 32.0
#: iPIM Sec. VII-A: "x2 area overhead considering reduced metal layers in the DRAM process".
DRAM_PROCESS_FACTOR = 2.0
#: Cell area over placed area; 1.0 = cell area only (what synthesis reports).
UTILIZATION = 1.0


def node_scale(node_nm: float, ref_nm: float) -> float:
    """Area factor from *ref_nm* to *node_nm* by the ideal rule ``(node / ref)**2``."""
    return (node_nm / ref_nm) ** 2


class AreaError(PimforgeError):
    """An area model was asked for something it cannot price."""


@dataclass(frozen=True)
class Area:
    """Area of one design (or one part), mm^2.

    Attributes
    ----------
    logic_mm2 : float
        Standard cells (gates and flip-flops).
    macro_mm2 : float
        Memory macros.
    factor : float
        The process factor already included (2 on a DRAM die, else 1).
    """

    logic_mm2: float
    macro_mm2: float
    factor: float = 1.0

    @property
    def total_mm2(self) -> float:
        return self.logic_mm2 + self.macro_mm2

    def __mul__(self, n: float) -> Area:
        return Area(self.logic_mm2 * n, self.macro_mm2 * n, self.factor)

    __rmul__ = __mul__

    def __add__(self, other: Area) -> Area:
        return Area(self.logic_mm2 + other.logic_mm2, self.macro_mm2 + other.macro_mm2,
                    self.factor)

    def to_json(self) -> dict[str, float]:
        return {"logic_mm2": self.logic_mm2, "macro_mm2": self.macro_mm2,
                "total_mm2": self.total_mm2, "factor": self.factor}


@dataclass(frozen=True)
class AreaModel:
    """Area at one technology node (see the module docstring for every coefficient).

    Parameters
    ----------
    node_nm : float
        Technology node the area is given at.
    sram : callable
        ``sram(size_bytes, ports) -> mm^2`` at :data:`SRAM_NODE_NM`; pimforge's is
        :func:`pimforge.sim.descnet.sram.area_mm2`.
    dram_die : bool
        The design sits on a DRAM die: everything is multiplied by
        :data:`DRAM_PROCESS_FACTOR`.
    utilization : float
        Cell area over placed area (default :data:`UTILIZATION`).
    """

    node_nm: float
    sram: Callable[[float, int], Any]
    dram_die: bool = False
    utilization: float = UTILIZATION

    def __post_init__(self):
        if not 3.0 <= self.node_nm <= 250.0:
            raise AreaError(f"node_nm must be between 3 and 250 nm, not {self.node_nm}")
        if not 0.1 <= self.utilization <= 1.0:
            raise AreaError(f"utilization must be between 0.1 and 1, not {self.utilization}")

    @property
    def factor(self) -> float:
        return DRAM_PROCESS_FACTOR if self.dram_die else 1.0

    @property
    def nand2_um2(self) -> float:
        """One NAND2 at this node (um^2)."""
        return NAND2_UM2 * node_scale(self.node_nm, NAND2_NODE_NM)

    def logic_mm2(self, nand2_eq: float) -> float:
        """Area of *nand2_eq* gates (mm^2), process factor included."""
        return nand2_eq * self.nand2_um2 * 1e-6 / self.utilization * self.factor

    def macro_mm2(self, width: int, depth: int, ports: int = 1) -> float:
        """One memory macro of *depth* x *width* bits with *ports* ports (mm^2)."""
        if ports > 3:
            raise AreaError(f"the SRAM model covers 1 to 3 ports, not {ports}")
        size = width * depth / 8
        return (float(self.sram(size, ports)) * node_scale(self.node_nm, SRAM_NODE_NM)
                * self.factor)

    def of(self, total: Mapping[str, Any]) -> Area:
        """Area of a synthesis ``total`` (``nand2_eq`` and ``memories``, as in
        :attr:`pimforge.gen.synth.SynthResult.total`)."""
        macros = sum(m.get("count", 1) * self.macro_mm2(m["width"], m["depth"],
                                                       m.get("ports", 1))
                     for m in total.get("memories", ()))
        return Area(self.logic_mm2(total["nand2_eq"]), macros, self.factor)

    def describe(self) -> str:
        """One line stating the node and coefficients, for tables."""
        return (f"{self.node_nm:g} nm: NAND2 {self.nand2_um2:.3f} um^2 (NanGate45 0.798 um^2 "
                f"x ({self.node_nm:g}/45)^2), SRAM = DESCNet model x ({self.node_nm:g}/32)^2"
                + (f", x{DRAM_PROCESS_FACTOR:g} DRAM process" if self.dram_die else ""))
