"""Periodic refresh of one vault: the tREFI timer and the count of refreshes owed."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["Refresher"]

# JEDEC lets a controller postpone up to 8 refreshes; the counter holds that many.
MAX_OWED = 8


class Refresher(wiring.Component):
    """tREFI refresh timer (LiteDRAM's ``Refresher``, without the command sequencer).

    Every ``tREFI`` cycles one more all-bank refresh is owed; ``pending`` holds
    while any is owed, and the scheduler answers with a REF (``issued``) once it
    has precharged every bank. Refreshes are counted, never dropped, so a busy
    vault still issues all of them.

    Parameters
    ----------
    tREFI : int
        Refresh interval in controller cycles.

    Attributes
    ----------
    issued : In(1)
        A REF is issued this cycle.
    pending : Out(1)
        At least one refresh is owed.
    """

    class Signature(wiring.Signature):
        """The refresher's port (refresher side).

        Members
        -------
        issued : In(1)
            A REF is issued this cycle.
        pending : Out(1)
            At least one refresh is owed.
        """

        def __init__(self):
            super().__init__({"issued": In(1), "pending": Out(1)})

        def __eq__(self, other):
            return type(other) is type(self)

        def __hash__(self):
            return hash(type(self))

        def __repr__(self):
            return "Refresher.Signature()"

    def __init__(self, *, tREFI: int):
        check_int("tREFI", tREFI, 1, 1 << 24)
        self.tREFI = tREFI
        super().__init__(self.Signature())

    def elaborate(self, platform):
        m = Module()
        t = self.tREFI
        refi = Signal(range(t + 1), init=t - 1)
        owed = Signal(range(MAX_OWED + 1))
        due = Signal()
        m.d.comb += due.eq(refi == 0)
        m.d.sync += refi.eq(Mux(due, t - 1, refi - 1))
        with m.If(due & ~self.issued):
            m.d.sync += owed.eq(owed + 1)
        with m.Elif(self.issued & ~due):
            m.d.sync += owed.eq(owed - 1)
        m.d.comb += self.pending.eq(owed.any())
        return m
