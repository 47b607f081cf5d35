"""The TSV data path of one vault when the PEs sit on the base die (iPIM Sec. VII-C1,
Fig. 8: the process-on-base-die machine)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..mem.bank import TimingCounter
from ..params import check_int

__all__ = ["TSVArbiter"]


class TSVArbiter(wiring.Component):
    """Grants the column commands of a vault's bank controllers one TSV transfer at a time.

    With the PEs (and their one-bank controllers) on the base die, every RD and
    WR moves its 128-bit vector over the vault's TSVs, which all of the vault's
    banks share (Sec. VII-C1: "serializing the data traffic on the shared TSVs
    between the base logic die and the DRAM dies"). A controller raises
    ``want[p]`` when its scheduler's pick is a RD or WR and issues it in a cycle
    in which ``ok[p]`` is high. ``ok`` is combinational in ``want`` and the
    arbiter's registered state.

    A vector occupies the TSVs for ``beats`` cycles (128 bits over a
    ``128 / beats``-bit TSV bus), so two grants are at least ``beats`` cycles
    apart; the TSVs are a pipeline, so their traversal latency (the controller's
    ``path_latency``) does not hold them. Each transfer is booked in the cycle
    of its column command: a read's data crosses a fixed time after its RD and
    a write's before its WR, and booking both at the command treats the bus as
    turned around for free (a simplification, in the TSVs' favour).

    At most one grant per cycle, to the first wanting PE in round-robin order
    from a pointer, which then moves past it: a PE that keeps wanting is granted
    within ``pes * beats`` cycles. Work-conserving: whenever the TSVs are free
    and a PE wants, one is granted.

    Parameters
    ----------
    pes : int
        Controllers (PEs, one bank each) sharing the TSVs.
    beats : int
        Cycles one vector occupies the TSVs.

    Attributes
    ----------
    want : In(pes)
        Bit ``p``: PE ``p``'s controller would issue a RD or WR this cycle.
    ok : Out(pes)
        Bit ``p``: it may (one-hot or zero; only wanting PEs).
    """

    def __init__(self, *, pes: int, beats: int = 1):
        check_int("pes", pes, 1, 64)
        check_int("beats", beats, 1, 64)
        self.pes, self.beats = pes, beats
        super().__init__({"want": In(pes), "ok": Out(pes)})

    def elaborate(self, platform):
        m = Module()
        P = self.pes
        granted = self.ok.any()
        busy = TimingCounter(m, self.beats, "tsv")
        busy.load(granted, self.beats)
        busy.elaborate()
        # At least one bit, so that one PE still has a pointer to switch on.
        ptr = Signal(range(max(P, 2)))
        grant, grant_v = Signal(range(max(P, 2))), Signal()
        with m.If(busy.ready):
            with m.Switch(ptr):
                for s in range(P):
                    with m.Case(s):
                        # The last matching assignment wins: walk the order from its end.
                        for p in reversed([(s + k) % P for k in range(P)]):
                            with m.If(self.want[p]):
                                m.d.comb += [grant.eq(p), grant_v.eq(1)]
        for p in range(P):
            m.d.comb += self.ok[p].eq(grant_v & (grant == p))
        with m.If(grant_v):
            m.d.sync += ptr.eq(Mux(grant == P - 1, 0, grant + 1))
        return m
