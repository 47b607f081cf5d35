"""One DRAM bank's state machine and its per-bank timing counters."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..hierarchy import Leaf, leaf_name
from ..params import check_int
from .timing import Timing, resolve_timing

__all__ = ["BankMachine", "TimingCounter", "bank_leaf", "from_config"]


class TimingCounter:
    """A timing constraint group: one small down-counter per constraint
    (LiteDRAM's ``tXXDController``), ready when all of them are zero.

    ``load(cond, k)`` adds a constraint "after a cycle in which *cond* holds,
    wait *k* cycles" (``k = 1``: next cycle, no counter needed).
    """

    def __init__(self, m: Module, maximum: int, name: str):
        self.ready = Signal(name=f"{name}_ok")
        self.name = name
        self._m = m
        self._loads: list[tuple] = []

    def load(self, cond, cycles: int) -> None:
        self._loads.append((cond, cycles))

    def elaborate(self) -> None:
        m = self._m
        zeros = []
        for i, (cond, cycles) in enumerate(self._loads):
            w = cycles - 1  # the command's own cycle counts as the first
            if w <= 0:
                continue
            c = Signal(range(w + 1), name=f"{self.name}_c{i}")
            with m.If(cond):
                m.d.sync += c.eq(w)
            with m.Elif(c != 0):
                m.d.sync += c.eq(c - 1)
            zeros.append(c == 0)
        m.d.comb += self.ready.eq(Cat(*zeros).all() if zeros else 1)


class BankMachine(wiring.Component):
    """State machine and timing counters of one DRAM bank (LiteDRAM bankmachine style).

    The vault controller decides which command to issue; the bank machine
    tracks the open row and tells, through ``*_ok``, which commands the bank's
    own constraints allow this cycle. Vault-wide constraints (tCCD, tRRD, tFAW,
    tWTR, read/write turnaround) live in the controller.

    Parameters
    ----------
    timing : Timing
        Constraints in controller cycles.
    row_bits : int
        Width of a row address.

    Attributes
    ----------
    act, pre, rd, wr, ref : In(1)
        The command issued to this bank this cycle (``ref`` is the all-bank refresh).
    act_row : In(row_bits)
        Row of ``act``.
    is_open : Out(1)
        A row is open; ``open_row`` is it.
    act_ok, pre_ok, col_ok : Out(1)
        ACT (tRP, tRC, tRFC), PRE (tRAS, tRTP, tWR) and RD/WR (tRCD) allowed now.
    """

    class Signature(wiring.Signature):
        """The port of one bank machine (the bank side).

        Parameters
        ----------
        row_bits : int
            Width of a row address.

        Members
        -------
        act, pre, rd, wr, ref : In(1)
            Commands to the bank this cycle.
        act_row : In(row_bits)
            Row of ``act``.
        is_open, open_row : Out(1), Out(row_bits)
            Row state.
        act_ok, pre_ok, col_ok : Out(1)
            Commands the bank's own constraints allow this cycle.
        """

        def __init__(self, *, row_bits: int):
            check_int("row_bits", row_bits, 1, 24)
            self._row_bits = row_bits
            super().__init__({
                "act": In(1), "pre": In(1), "rd": In(1), "wr": In(1), "ref": In(1),
                "act_row": In(row_bits),
                "is_open": Out(1), "open_row": Out(row_bits),
                "act_ok": Out(1), "pre_ok": Out(1), "col_ok": Out(1),
            })

        @property
        def row_bits(self) -> int:
            return self._row_bits

        def __eq__(self, other):
            return type(other) is type(self) and other.row_bits == self.row_bits

        def __hash__(self):
            return hash((type(self), self.row_bits))

        def __repr__(self):
            return f"BankMachine.Signature(row_bits={self.row_bits})"

    def __init__(self, *, timing: Timing, row_bits: int):
        if not isinstance(timing, Timing):
            raise TypeError(f"timing must be a Timing, not {timing!r}")
        self.timing = timing
        self.row_bits = row_bits
        super().__init__(self.Signature(row_bits=row_bits))

    def elaborate(self, platform):
        m = Module()
        t = self.timing
        act_c = TimingCounter(m, max(t.tRC, t.tRP, t.tRFC), "act")
        act_c.load(self.act, t.tRC)
        act_c.load(self.pre, t.tRP)
        act_c.load(self.ref, t.tRFC)
        pre_c = TimingCounter(m, max(t.tRAS, t.tRTP, t.wr_to_pre), "pre")
        pre_c.load(self.act, t.tRAS)
        pre_c.load(self.rd, t.tRTP)
        pre_c.load(self.wr, t.wr_to_pre)
        col_c = TimingCounter(m, t.tRCD, "col")
        col_c.load(self.act, t.tRCD)
        for c in (act_c, pre_c, col_c):
            c.elaborate()

        with m.If(self.act):
            m.d.sync += [self.is_open.eq(1), self.open_row.eq(self.act_row)]
        with m.If(self.pre):
            m.d.sync += self.is_open.eq(0)
        m.d.comb += [
            self.act_ok.eq(act_c.ready & ~self.is_open),
            self.pre_ok.eq(pre_c.ready & self.is_open),
            self.col_ok.eq(col_c.ready & self.is_open),
        ]
        return m


def bank_leaf(*, timing: Timing, row_bits: int):
    """A :class:`BankMachine` as one Verilog module shared by every bank of that timing.

    The module name carries the row width and a hash of the timing, so two
    different bank machines never share a name.
    """

    return Leaf(leaf_name("bank_machine", f"r{row_bits}", digest=(timing, row_bits), digits=8),
                lambda: BankMachine(timing=timing, row_bits=row_bits))


def from_config(cfg) -> BankMachine:
    """The bank machine of ``cfg.hmc`` (timing resolved to controller cycles)."""
    h = cfg.hmc
    return BankMachine(timing=resolve_timing(h.timing, h.tck_ns), row_bits=h.row_bits)
