"""Instruction set of the PIM-CapsNet operation controller (one per vault).

Defined once, as Amaranth ``enum``/``data`` layouts, and imported by the
compiler and assembler (:mod:`pimforge.sim.capsnet.compiler`), the ISA-level
executor (:mod:`pimforge.verif.models.capsnet.isa`) and the disassembler
(:func:`disassemble`).

Every instruction is a *loop descriptor*: the controller walks three nested
output loops ``(o1, o2, o3)`` of sizes ``(n1, n2, n3)`` and, for each output, an
inner group ``e`` of ``g`` elements. Operand ``x`` (``a``, ``b``, destination
``d``) of element ``(o1, o2, o3, e)`` is at the vault-local word address::

    x + o1 * x_s1 + o2 * x_s2 + o3 * x_s3 + e * x_se

(strides are signed; ``0`` broadcasts). The controller issues the ``o3`` loop
``lanes`` (= PEs of the vault) outputs at a time, one per PE, so an
instruction takes ``n1 * n2 * ceil(n3 / lanes)`` steps of ``g`` elements (2 for
ADD); the compiler puts the best output loop in ``o3``
(:func:`pimforge.sim.capsnet.compiler.normalize`). One descriptor covers a whole equation
of Algorithm 1 on the vault's slice, so a program has a few dozen instructions
per routing iteration whatever the network size.

Opcodes
-------
FLOW   the PE flow ``flow`` on ``(a, b)``: MAC sums the ``g`` products of a group
       (one output per group, the PE's lane order); ISQRT/EXP/RECIP/DIV need
       ``g == 1``.
ADD    ``d = a + b`` (``sign`` set: ``a - b``), executed as a 2-product MAC group
       ``(a * 1, b * +-1)`` on a PE, which rounds once like an FP32 adder.
MAXR   ``d = max_e a`` over the group (comparator in the controller; softmax
       shift of Eq. 5).
SELPOS ``d = a if b > 0 else +0`` (controller mux; the squash limit at 0).
SEND   copy the ``n1*n2*n3*g`` words at ``a`` to vault ``peer`` at ``d`` (crossbar).
BAR    barrier: wait until every vault has reached its matching ``BAR`` and every
       ``SEND`` issued before it has landed.
HALT   end of program.

Stationary operand (``hold``, FLOW only): ``Hold.A`` (``Hold.B``) says operand
``a`` (``b``) does not depend on ``o2`` (its ``s2`` stride is 0). The
controller then walks ``o2`` inside the lane blocks of ``o3`` (loop order
``o1, o3 / lanes, o2, e`` instead of ``o1, o2, o3 / lanes, e``) and each lane
keeps its ``g`` elements of the held operand in a register file filled at
``o2 = 0``, so the operand is read from memory once per ``o1``/lane block
instead of ``n2`` times (W of Eq. 1 stays in the PEs while ``u`` streams over
the batch, Sec. 5.2). The outputs of an instruction are independent, so the
order does not change any result. A group longer than the register file
(``g > capsnet.hold_words``) runs unheld: same results, more reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.lib import data, enum

from .pe import Flow

__all__ = ["ISA_VERSION", "Opcode", "Hold", "INSTRUCTION", "Instr", "encode", "decode",
           "disassemble", "STRIDE_BITS", "ADDR_BITS", "COUNT_BITS", "INSTR_BITS"]

ISA_VERSION = 2
ADDR_BITS = 32
STRIDE_BITS = 24
COUNT_BITS = 24


class Opcode(enum.Enum, shape=3):
    FLOW = 0
    ADD = 1
    MAXR = 2
    SELPOS = 3
    SEND = 4
    BAR = 5
    HALT = 6


class Hold(enum.Enum, shape=2):
    """Which operand a FLOW instruction keeps in the lanes' registers across ``o2``."""

    NONE = 0
    A = 1
    B = 2


_FIELDS = {"op": Opcode, "flow": Flow, "hold": Hold, "sign": 1, "peer": 8,
           "n1": COUNT_BITS, "n2": COUNT_BITS, "n3": COUNT_BITS, "g": COUNT_BITS}
for _x in ("a", "b", "d"):
    _FIELDS.update({_x: ADDR_BITS, **{f"{_x}_{s}": STRIDE_BITS for s in ("s1", "s2", "s3",
                                                                         "se")}})
#: The instruction word (strides are two's complement in STRIDE_BITS).
INSTRUCTION = data.StructLayout(_FIELDS)
INSTR_BITS = INSTRUCTION.size
_NAMES = tuple(_FIELDS)
_SIGNED = {n for n in _NAMES if n[1:3] == "_s"}


@dataclass(frozen=True)
class Instr:
    """One instruction as Python values (what the compiler emits)."""

    op: Opcode
    flow: Flow = Flow.MAC
    hold: Hold = Hold.NONE
    sign: int = 0
    peer: int = 0
    n1: int = 1
    n2: int = 1
    n3: int = 1
    g: int = 1
    a: int = 0
    a_s1: int = 0
    a_s2: int = 0
    a_s3: int = 0
    a_se: int = 0
    b: int = 0
    b_s1: int = 0
    b_s2: int = 0
    b_s3: int = 0
    b_se: int = 0
    d: int = 0
    d_s1: int = 0
    d_s2: int = 0
    d_s3: int = 0
    d_se: int = 0

    def __post_init__(self):
        for n in _NAMES:
            v = getattr(self, n)
            if n in ("op", "flow", "hold"):
                continue
            w = _width(n)
            lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if n in _SIGNED else (0, (1 << w) - 1)
            if not lo <= int(v) <= hi:
                raise ValueError(f"instruction field {n} must be between {lo} and {hi}, not {v}")
        if self.op is Opcode.FLOW and self.flow is not Flow.MAC and self.g != 1:
            raise ValueError(f"flow {self.flow.name} takes one element per output, not g={self.g}")
        if self.hold is not Hold.NONE:
            x = "a" if self.hold is Hold.A else "b"
            if self.op is not Opcode.FLOW or getattr(self, f"{x}_s2") != 0:
                raise ValueError(f"hold {self.hold.name} needs a FLOW instruction whose "
                                 f"operand {x} has s2 stride 0")

    @property
    def outputs(self) -> int:
        return self.n1 * self.n2 * self.n3

    @property
    def elements(self) -> int:
        return self.outputs * self.g


def _width(name: str) -> int:
    return INSTRUCTION[name].width


def encode(ins: Instr) -> int:
    """The instruction word as an int (field order of :data:`INSTRUCTION`)."""
    word = 0
    for n in _NAMES:
        f = INSTRUCTION[n]
        v = getattr(ins, n)
        v = v.value if hasattr(v, "value") else int(v)
        word |= (v & ((1 << f.width) - 1)) << f.offset
    return word


def decode(word: int) -> Instr:
    """Inverse of :func:`encode`."""
    vals = {}
    for n in _NAMES:
        f = INSTRUCTION[n]
        v = (word >> f.offset) & ((1 << f.width) - 1)
        if n in _SIGNED and v >> (f.width - 1):
            v -= 1 << f.width
        vals[n] = v
    vals["op"] = Opcode(vals["op"])
    vals["flow"] = Flow(vals["flow"])
    vals["hold"] = Hold(vals["hold"])
    return Instr(**vals)


def disassemble(prog: list[Instr]) -> str:
    """One line per instruction, non-default fields only."""
    lines = []
    default = Instr(Opcode.HALT)
    for pc, ins in enumerate(prog):
        parts = [ins.op.name]
        if ins.op is Opcode.FLOW:
            parts.append(ins.flow.name)
        if ins.hold is not Hold.NONE:
            parts.append(f"hold={ins.hold.name}")
        for n in _NAMES[3:]:
            v = getattr(ins, n)
            if v != getattr(default, n):
                parts.append(f"{n}={v}")
        lines.append(f"{pc:5d}: " + " ".join(parts))
    return "\n".join(lines)
