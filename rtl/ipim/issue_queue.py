"""The issued-instruction queue of the iPIM control core: its slots, what each one's
instruction still waits for, and the dependency check of the instruction in the issue
stage against them (Sec. IV-B)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_int
from .isa import DRAM_BITS, MASK_BITS, REG_BITS

__all__ = ["IssueQueue", "HAZARD"]

_REG = data.StructLayout({"en": 1, "store": 3, "idx": REG_BITS})
_MEM = data.StructLayout({"en": 1, "store": 3, "whole": 1, "queued": 1, "addr": DRAM_BITS})
#: Decoded hazard resources of one instruction (see :mod:`~pimforge.rtl.ipim.core`).
HAZARD = data.StructLayout({"rd0": _REG, "rd1": _REG, "rd2": _REG, "wr": _REG,
                            "mrd": _MEM, "mwr": _MEM})


def _reg_match(x, y):
    return x.en & y.en & (x.store == y.store) & (x.idx == y.idx)


def _mem_match(x, y):
    return (x.en & y.en & (x.store == y.store) & ~(x.queued & y.queued)
            & (x.whole | y.whole | (x.addr == y.addr)))


def _conflict(new, old):
    """RAW, WAR or WAW between the issuing instruction *new* and an older one."""
    raw = _reg_match(new.rd0, old.wr) | _reg_match(new.rd1, old.wr) \
        | _reg_match(new.rd2, old.wr) | _mem_match(new.mrd, old.mwr)
    war = _reg_match(new.wr, old.rd0) | _reg_match(new.wr, old.rd1) \
        | _reg_match(new.wr, old.rd2) | _mem_match(new.mwr, old.mrd)
    waw = _reg_match(new.wr, old.wr) | _mem_match(new.mwr, old.mwr)
    return raw | war | waw


class IssueQueue(wiring.Component):
    """``slots`` slots, each holding one issued instruction's hazards and outstanding bits.

    A slot's outstanding bits are one per PE (``pes`` of them) and one for a
    vault-level unit (bit ``pes``). ``take`` fills slot ``slot`` (the lowest
    free one) with ``take_pending`` and ``hazard`` at the end of the cycle. A
    ``finish`` of PE ``p`` (``pe_done[p]``) or of a unit (any of ``unit_done``)
    with a slot's number as ``tag`` clears that bit at the end of its cycle;
    the slot is free from the next cycle on, once no bit is left (no bypass:
    its hazards block the issue stage until then).

    ``dep`` is high while ``hazard`` (the instruction in the issue stage) has a
    true, anti or output dependency with an occupied slot's instruction.

    Parameters
    ----------
    slots : int
        Slots of the queue (``ipim.inst_queue``).
    pes : int
        PEs of the vault.
    units : int
        Vault-level units whose finishes clear the unit bit.

    Attributes
    ----------
    hazard : In(HAZARD)
        The hazard resources of the instruction in the issue stage.
    dep : Out(1)
    slot : Out(range(slots))
        The lowest free slot (the tag of the next instruction that takes one).
    any_free, drained : Out(1)
        Some slot is free; every slot is.
    take : In(1)
    take_pending : In(pes + 1)
        The outstanding bits of the instruction taking ``slot``.
    pe_done : In(IssueQueue.FinishSignature(tag_bits)).array(pes)
    unit_done : In(IssueQueue.FinishSignature(tag_bits)).array(units)
    """

    class FinishSignature(wiring.Signature):
        """One finish report: the instruction of slot ``tag`` is done (reporter's side).

        Parameters
        ----------
        tag_bits : int

        Members
        -------
        valid : Out(1)
            One cycle per finish; no back-pressure.
        tag : Out(tag_bits)
        """

        def __init__(self, tag_bits: int):
            check_int("tag_bits", tag_bits, 1, 16)
            self._tag_bits = tag_bits
            super().__init__({"valid": Out(1), "tag": Out(tag_bits)})

        @property
        def tag_bits(self) -> int:
            return self._tag_bits

        def __eq__(self, other):
            return type(other) is type(self) and other.tag_bits == self.tag_bits

        def __hash__(self):
            return hash((type(self), self.tag_bits))

        def __repr__(self):
            return f"IssueQueue.FinishSignature({self.tag_bits})"

    def __init__(self, *, slots: int, pes: int, units: int = 3):
        check_int("slots", slots, 1, 256)
        check_int("pes", pes, 1, MASK_BITS)
        check_int("units", units, 1, 8)
        self.slots, self.pes, self.units = slots, pes, units
        self.tag_bits = max(1, ceil_log2(slots))
        finish = self.FinishSignature(self.tag_bits)
        super().__init__({
            "hazard": In(HAZARD), "dep": Out(1),
            "slot": Out(range(slots)), "any_free": Out(1), "drained": Out(1),
            "take": In(1), "take_pending": In(pes + 1),
            "pe_done": In(finish).array(pes), "unit_done": In(finish).array(units),
        })

    def elaborate(self, platform):
        m = Module()
        P, Q = self.pes, self.slots
        U = P                           # the vault-unit bit of a slot's outstanding bits
        pending = [Signal(P + 1, name=f"slot{s}_pending") for s in range(Q)]
        hazard = [Signal(HAZARD, name=f"slot{s}_hazard") for s in range(Q)]
        busy = Cat(*(p.any() for p in pending))
        free = Signal(Q)
        m.d.comb += free.eq(~busy)
        for s in reversed(range(Q)):
            with m.If(free[s]):
                m.d.comb += self.slot.eq(s)
        m.d.comb += [self.any_free.eq(free.any()), self.drained.eq(~busy.any())]
        m.d.comb += self.dep.eq(
            Cat(*(busy[s] & _conflict(self.hazard, hazard[s]) for s in range(Q))).any())

        for s in range(Q):
            clr = Signal(P + 1, name=f"slot{s}_clr")
            m.d.comb += clr[U].eq(Cat(*(u.valid & (u.tag == s) for u in self.unit_done)).any())
            for p in range(P):
                m.d.comb += clr[p].eq(self.pe_done[p].valid & (self.pe_done[p].tag == s))
            with m.If(self.take & (self.slot == s)):
                m.d.sync += [pending[s].eq(self.take_pending), hazard[s].eq(self.hazard)]
            with m.Else():
                m.d.sync += pending[s].eq(pending[s] & ~clr)
        return m
