"""ISA-level golden model of the PIM-CapsNet vault programs.

Runs the per-vault programs of :mod:`pimforge.rtl.capsnet.isa` on word
memories (one ``uint32`` array of binary32 patterns per vault), with every
floating-point operation taken from the bit-exact PE model
(:class:`pimforge.verif.models.capsnet.pe.PEModel`):

* ``FLOW MAC``: the products ``a * b`` of a group are accumulated in the PE's
  lane order (:func:`lane_sum`, equal to :meth:`PEModel.stream`);
* ``FLOW ISQRT/EXP/RECIP/DIV``: the PE's approximate flows;
* ``ADD``: the 2-product MAC group ``(a * 1, b * +-1)``, i.e. one rounded add;
* ``MAXR``/``SELPOS``: exact comparisons (controller logic, no rounding);
* ``SEND``: a word copy into another vault's memory;
* ``BAR``: every vault runs to its next barrier before any goes on.

Between two barriers the vaults are independent (the compiler only sends to
words that nobody reads before the next barrier), so they run one after the
other here. :func:`execute` also returns per-instruction statistics that the
timing and energy models read, including the loop shape from which
:meth:`InstrStats.issue_cycles` gives the controller's issue cycles for any
number of lanes (the vault controller issues ``lanes`` outputs of the ``o3``
loop per cycle; see :mod:`pimforge.rtl.capsnet.vault`). The statistics depend
on the instructions' fields only, so :func:`program_stats` gives the same ones
without running anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pimforge.rtl.capsnet.isa import Instr, Opcode
from pimforge.rtl.capsnet.pe import Flow

from .pe import NEG_ZERO, f32_add, f32_mul

__all__ = ["lane_sum", "InstrStats", "ExecResult", "execute", "issue_cycles", "ONE_BITS",
           "program_stats", "walk"]

ONE_BITS = 0x3F800000
_MINUS_ONE = 0xBF800000
_CHUNK = 1 << 21     # elements per vectorized slice of one instruction


def lane_sum(p: np.ndarray, lanes: int) -> np.ndarray:
    """Sum the last axis of *p* (binary32 patterns) in the PE's MAC order.

    Element ``e`` goes to lane ``e % lanes``; a lane starts from -0.0 and adds
    its elements in order; the lanes are then reduced ``((L0 + L1) + L2) + ...``
    (unused lanes as -0.0). See :class:`pimforge.rtl.capsnet.pe.CapsNetPE`.
    """
    p = np.asarray(p, dtype=np.uint32)
    g = p.shape[-1]
    if g == 0:
        raise ValueError("a MAC group needs at least one element")
    lane_vals = []
    for lane in range(lanes):
        acc = np.full(p.shape[:-1], NEG_ZERO, dtype=np.uint32)
        for e in range(lane, g, lanes):
            acc = f32_add(acc, p[..., e])
        lane_vals.append(acc)
    s = lane_vals[0]
    for k in range(1, lanes):
        s = f32_add(s, lane_vals[k])
    return s


@dataclass
class InstrStats:
    """What one instruction did on one vault (for the timing and energy models)."""

    vault: int
    pc: int
    op: str
    flow: str | None
    elements: int          # PE input records (or words compared/copied)
    outputs: int
    words_read: int
    words_written: int
    send_bytes: int = 0
    peer: int = -1
    phase: int = 0
    rows: int = 1          # n1 * n2
    n3: int = 1            # the lane-parallel output loop
    group: int = 1         # records per output (2 for ADD, g otherwise)

    def issue_cycles(self, lanes: int) -> int:
        """Cycles the controller issues this instruction for with *lanes* lanes."""
        return self.rows * -(-self.n3 // lanes) * self.group


@dataclass
class ExecResult:
    memories: list[np.ndarray]
    stats: list[InstrStats] = field(default_factory=list)
    phases: int = 0


def issue_cycles(ins: Instr, lanes: int) -> int:
    """Issue cycles of *ins* on a controller of *lanes* lanes (always-ready memory):
    ``n1 * n2 * ceil(n3 / lanes) * g'`` with ``g' = 2`` for ADD."""
    g = 2 if ins.op is Opcode.ADD else ins.g
    return ins.n1 * ins.n2 * -(-ins.n3 // lanes) * g


def _index(base: int, s1: int, s2: int, s3: int, se: int, o1: np.ndarray, n2: int, n3: int,
           g: int) -> np.ndarray:
    return (base + o1[:, None, None, None] * s1 + np.arange(n2)[None, :, None, None] * s2
            + np.arange(n3)[None, None, :, None] * s3 + np.arange(g)[None, None, None, :] * se)


def _check(idx: np.ndarray, mem: np.ndarray, what: str, vault: int, pc: int) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= mem.size):
        raise IndexError(f"vault {vault} pc {pc}: {what} address out of the vault memory "
                         f"({idx.min()}..{idx.max()}, memory {mem.size} words)")


def _run_instr(ins: Instr, v: int, pc: int, mems: list[np.ndarray], pe, lanes: int) -> None:
    mem = mems[v]
    n1, n2, n3, g = ins.n1, ins.n2, ins.n3, ins.g
    step = max(1, _CHUNK // max(1, n2 * n3 * g))
    for s in range(0, n1, step):
        o1 = np.arange(s, min(n1, s + step))
        ia = _index(ins.a, ins.a_s1, ins.a_s2, ins.a_s3, ins.a_se, o1, n2, n3, g)
        _check(ia, mem, "a", v, pc)
        if ins.op is Opcode.SEND:
            dst = mems[ins.peer]
            idd = _index(ins.d, ins.d_s1, ins.d_s2, ins.d_s3, ins.d_se, o1, n2, n3, g)
            _check(idd, dst, "send destination", v, pc)
            dst[idd] = mem[ia]
            continue
        idd = _index(ins.d, ins.d_s1, ins.d_s2, ins.d_s3, 0, o1, n2, n3, 1)[..., 0]
        _check(idd, mem, "d", v, pc)
        a = mem[ia]
        if ins.op is Opcode.MAXR:
            out = _max_bits(a)
        else:
            ib = _index(ins.b, ins.b_s1, ins.b_s2, ins.b_s3, ins.b_se, o1, n2, n3, g)
            _check(ib, mem, "b", v, pc)
            b = mem[ib]
            if ins.op is Opcode.FLOW:
                out = _flow(ins.flow, a, b, pe, lanes)
            elif ins.op is Opcode.ADD:
                nb = b ^ np.uint32(0x80000000) if ins.sign else b
                out = lane_sum(np.stack([a[..., 0], nb[..., 0]], axis=-1), lanes)
            elif ins.op is Opcode.SELPOS:
                bf = b[..., 0].view(np.float32)
                out = np.where(bf > 0, a[..., 0], np.uint32(0)).astype(np.uint32)
            else:
                raise ValueError(f"vault {v} pc {pc}: opcode {ins.op.name} "
                                 "is not a compute instruction")
        mem[idd] = out


def _max_bits(a: np.ndarray) -> np.ndarray:
    f = a.view(np.float32)
    idx = np.argmax(f, axis=-1)
    return np.take_along_axis(a, idx[..., None], axis=-1)[..., 0]


def _flow(flow: Flow, a: np.ndarray, b: np.ndarray, pe, lanes: int) -> np.ndarray:
    if flow is Flow.MAC:
        return lane_sum(f32_mul(a, b), lanes)
    a0, b0 = a[..., 0], b[..., 0]
    if flow is Flow.EXP:
        return pe.exp(a0)
    if flow is Flow.ISQRT:
        return pe.isqrt(a0)
    if flow is Flow.RECIP:
        return pe.recip(a0)
    return pe.div(a0, b0)


def _stats(v: int, pc: int, ins: Instr, phase: int) -> InstrStats:
    """The statistics of instruction *ins* at *pc* of vault *v*: they depend on its
    fields only, never on the data."""
    n_in = 2 if ins.op in (Opcode.FLOW, Opcode.ADD, Opcode.SELPOS) else 1
    send = ins.op is Opcode.SEND
    return InstrStats(
        v, pc, ins.op.name, ins.flow.name if ins.op is Opcode.FLOW else None,
        2 * ins.outputs if ins.op is Opcode.ADD else ins.elements, ins.outputs,
        n_in * ins.elements, ins.elements if send else ins.outputs,
        4 * ins.elements if send else 0, ins.peer if send else -1, phase,
        ins.n1 * ins.n2, ins.n3, 2 if ins.op is Opcode.ADD else ins.g)


def walk(programs: list[list[Instr]]) -> tuple[list[tuple[int, int, Instr, int]], int]:
    """The order in which :func:`execute` runs the instructions of *programs*.

    Returns ``(steps, phases)``: ``(vault, pc, instr, phase)`` for every
    instruction other than ``BAR``/``HALT``, phase by phase and within a phase
    vault by vault (the vaults are independent between barriers), and the
    number of phases. Raises ``ValueError`` when the vaults disagree on the
    number of barriers or a program does not end with ``HALT``.
    """
    nb = {sum(1 for i in p if i.op is Opcode.BAR) for p in programs}
    if len(nb) != 1:
        raise ValueError(f"vault programs have different barrier counts: {sorted(nb)}")
    for v, p in enumerate(programs):
        if not p or p[-1].op is not Opcode.HALT:
            raise ValueError(f"program of vault {v} does not end with HALT")
    steps = []
    pcs = [0] * len(programs)
    phase = 0
    while True:
        for v, prog in enumerate(programs):
            while prog[pcs[v]].op not in (Opcode.BAR, Opcode.HALT):
                steps.append((v, pcs[v], prog[pcs[v]], phase))
                pcs[v] += 1
        if all(p[pcs[v]].op is Opcode.HALT for v, p in enumerate(programs)):
            return steps, phase + 1
        for v in range(len(programs)):
            pcs[v] += 1
        phase += 1


def program_stats(programs: list[list[Instr]]) -> ExecResult:
    """:func:`execute`'s statistics and phase count without running anything
    (no memories): the timing model's input for a compiled program, e.g. to
    compare distribution dimensions before choosing one."""
    steps, phases = walk(programs)
    return ExecResult([], [_stats(*st) for st in steps], phases)


def execute(programs: list[list[Instr]], memories: list[np.ndarray], pe) -> ExecResult:
    """Run one program per vault on *memories* (modified in place) with PE model *pe*.

    Raises ``ValueError`` when the vaults disagree on the number of barriers or a
    program does not end with ``HALT`` (:func:`walk`).
    """
    steps, phases = walk(programs)
    res = ExecResult(memories, phases=phases)
    for v, pc, ins, phase in steps:
        _run_instr(ins, v, pc, memories, pe, pe.lanes)
        res.stats.append(_stats(v, pc, ins, phase))
    return res
