"""Spilling: a basic block that needs more DataRF entries than are free, rewritten to fit.

The iPIM paper's compiler spills registers "to the local DRAM bank" when they run out
(Sec. VII-C, Fig. 10: fewer registers mean "more registers spilling to the local DRAM
bank, and increased register data dependency"). Here a block (a loop body or a window
of unrolled iterations, on virtual registers, in program order) whose values overlap
more than *regs* at some instruction is rewritten, one value at a time, until none
does:

Liveness
    A value holds an entry from its first write to its last read or write (a read of
    instruction ``i`` comes before its write, so a value read last by ``i`` and one
    written by ``i`` share an entry, as the allocator's live ranges have it). The
    linear-scan allocator (:func:`~.backend.allocate`, ``linear``) then needs exactly
    the most values that overlap, so the rewritten block fits the DataRF.
Choice
    At the first instruction where too many values overlap, the value whose next read or
    write is the farthest (Belady's choice) among those that instruction does not touch,
    values that are cheap to make again counting as farther (a constant's VSM line
    before a bank load, a bank load before a store and a reload).
Rematerialization
    A value written once by an instruction that reads only what nothing changes until
    its last read is made again before each read instead of being stored: a constant's
    ``rd_vsm`` of its VSM line (:meth:`~.emit.Evaluator.cst`), a load of an array no
    store of the block may write (:func:`~.backend.bank_span`), a ``rd_pgsm``.
Spill to the bank
    Any other value gets a slot: a bank vector at ``base + n`` (above the pipeline's
    arrays; a slot per spilled value of the block, the same slots for every block). Each
    write of the value is followed by ``st_rf`` to the slot, each read preceded by
    ``ld_rf`` from it, each in a register of its own; a write after the first (a lane
    of a vector, a ``mac``) reloads the slot first, since it keeps the other lanes.
Memory order
    The slots' accesses have direct addresses, so the backend's dependency graph
    (:func:`~.backend.dependency_graph`) orders a reload after the store it reads and a
    store after the reloads of the value it overwrites, exactly, and reorders them
    freely against the arrays' accesses, whose pointers never reach the slots; the core
    keeps the order of the bank accesses of consecutive blocks and loop trips (one
    request queue per PE, in issue order).
"""

from __future__ import annotations

from pimforge.rtl.ipim.isa import Instr, Opcode, Store, accesses, conflicts

from .backend import DataRFFull, VInstr, bank_span, may_alias, register_spiller
from .lang import CompileError

__all__ = ["SpillStats", "pressure", "spill_block"]

#: Opcodes whose value can be made again where it is read (they read no DataRF entry).
_REMAT = frozenset({Opcode.RD_VSM, Opcode.LD_RF, Opcode.RD_PGSM, Opcode.RESET})
_STORES = frozenset({Opcode.ST_RF, Opcode.ST_PGSM})


class SpillStats:
    """What :func:`spill_block` did: values spilled to the bank, values made again, and
    the bank slots used (``slots``)."""

    def __init__(self) -> None:
        self.stored = 0
        self.remade = 0
        self.slots = 0


def _spans(block: list[VInstr]) -> tuple[dict[int, int], dict[int, int]]:
    """Each value's first and last moment: a read of instruction ``i`` at ``2i``, a write
    at ``2i + 1``."""
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for i, vi in enumerate(block):
        for v in vi.uses():
            if v not in lo:
                raise CompileError(f"virtual register v{v} is read before it is written")
            hi[v] = max(hi[v], 2 * i)
        for v in vi.defs():
            lo.setdefault(v, 2 * i + 1)
            hi[v] = max(hi.get(v, 0), 2 * i + 1)
    return lo, hi


def pressure(block: list[VInstr]) -> int:
    """The most values of *block* that hold a DataRF entry at once (what the linear-scan
    allocator needs)."""
    lo, hi = _spans(block)
    return max(_profile(lo, hi, len(block)), default=0)


def _profile(lo: dict[int, int], hi: dict[int, int], n: int) -> list[int]:
    diff = [0] * (2 * n + 3)
    for v, a in lo.items():
        diff[a] += 1
        diff[hi[v] + 1] -= 1
    out, run = [], 0
    for d in diff:
        run += d
        out.append(run)
    return out


def _remat_def(block: list[VInstr], v: int, occ: list[int], ranges) -> VInstr | None:
    """The instruction that makes *v* again where it is read, or None: *v* written once,
    by an instruction of :data:`_REMAT` whose inputs nothing changes until *v*'s last
    read."""
    defs = [i for i in occ if v in block[i].defs()]
    if len(defs) != 1 or defs[0] != occ[0]:
        return None
    d = block[defs[0]]
    if d.ins.opcode not in _REMAT or v in d.uses() or set(d.vregs) != {"drf"}:
        return None
    reads, _ = accesses(d.ins)
    reads = frozenset(x for x in reads if x.store is not Store.BANK)
    span = bank_span(d.ins, ranges)
    for j in range(occ[0] + 1, occ[-1] + 1):
        ins = block[j].ins
        _, w = accesses(ins)
        if conflicts(reads, frozenset(x for x in w if x.store is not Store.BANK)):
            return None
        if span is not None and ins.opcode in _STORES and \
                may_alias(span, bank_span(ins, ranges)):
            return None
    return d


def _rename(vi: VInstr, v: int, t: int) -> VInstr:
    return VInstr(vi.ins, {f: t if x == v else x for f, x in vi.vregs.items()})


def spill_block(block: list[VInstr], regs: int, base: int, ip,
                ranges: dict[int, tuple[int, int]] | None = None,
                stats: SpillStats | None = None) -> list[VInstr]:
    """*block* rewritten so that at most *regs* of its values hold a DataRF entry at once
    (the module docstring): values made again where they are read, or spilled to bank
    slots from vector *base* up. *ranges*: the bank addresses each loop pointer spans
    (:func:`~.backend.bank_span`). A block that fits is returned as it is.

    Raises
    ------
    DataRFFull
        One instruction alone needs more than *regs* entries.
    CompileError
        The slots do not fit the bank above *base*.
    """
    stats = stats if stats is not None else SpillStats()
    block = list(block)
    top = 1 + max((x for vi in block for x in vi.vregs.values()), default=0)
    temps: set[int] = set()
    while True:
        lo, hi = _spans(block)
        prof = _profile(lo, hi, len(block))
        t = next((m for m, c in enumerate(prof) if c > regs), None)
        if t is None:
            return block
        at = t // 2
        occ: dict[int, list[int]] = {}
        for i, vi in enumerate(block):
            for x in set(vi.vregs.values()):
                occ.setdefault(x, []).append(i)
        best = None
        for v in lo:
            if not lo[v] <= t <= hi[v] or v in temps or at in occ[v]:
                continue
            nxt = next(i for i in occ[v] if i > at)
            remat = _remat_def(block, v, occ[v], ranges)
            weight = 1 if remat is None else 3 if remat.ins.opcode is not Opcode.LD_RF else 2
            key = ((nxt - at) * weight, hi[v], v)
            if best is None or key > best[0]:
                best = (key, v, remat)
        if best is None:
            raise DataRFFull(f"an instruction of the kernel needs more than {regs} free "
                             "DataRF entries even with every other value spilled; raise "
                             "ipim.drf_bytes")
        _, v, remat = best
        out: list[VInstr] = []
        if remat is not None:
            stats.remade += 1
            for vi in block:
                if vi is remat:
                    continue
                if v in vi.vregs.values():
                    temps.add(top)
                    out += [VInstr(remat.ins, {"drf": top}), _rename(vi, v, top)]
                    top += 1
                else:
                    out.append(vi)
        else:
            addr = base + stats.slots
            if addr >= ip.bank_vectors:
                raise CompileError(f"spilling needs more than the {ip.bank_vectors - base} "
                                   "vectors of each bank above the arrays; raise "
                                   "ipim.bank_bytes or ipim.drf_bytes")
            stats.slots += 1
            stats.stored += 1
            written = False
            for vi in block:
                if v not in vi.vregs.values():
                    out.append(vi)
                    continue
                temps.add(top)
                mask = vi.ins.simb_mask
                d = v in vi.defs()
                if v in vi.uses() or (d and written):
                    out.append(VInstr(Instr(Opcode.LD_RF, dram=addr, simb_mask=mask),
                                      {"drf": top}))
                out.append(_rename(vi, v, top))
                if d:
                    written = True
                    out.append(VInstr(Instr(Opcode.ST_RF, dram=addr, simb_mask=mask),
                                      {"drf": top}))
                top += 1
        block = out


register_spiller(spill_block)
