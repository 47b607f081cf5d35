"""The ACT window of one process group: tRRDS, tRRDL and tFAW across the PEs' banks
of one DRAM die."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..mem.bank import TimingCounter
from ..params import check, check_int

__all__ = ["ActWindow"]


class ActWindow(wiring.Component):
    """Grants the ACTs of one PG's PEs so that the die's power limits hold.

    Each near-bank PE has a one-bank memory controller of its own, which knows
    nothing of the other banks of its DRAM die. The PEs of one PG share a die
    (iPIM Sec. III, Table III), so their ACTs are granted here: a PE raises
    ``want[p]`` when its scheduler would issue an ACT, and issues it in a cycle
    in which ``ok[p]`` is high. ``ok`` is combinational in ``want`` and the
    window's registered state; a granted ACT is counted as issued in the cycle
    of the grant (the controller issues exactly when it wants and is granted).

    Timing semantics, the same as :class:`~pimforge.rtl.mem.bank.TimingCounter`
    and :class:`~pimforge.verif.models.dram_timing.TimingChecker`: "t cycles
    apart" means the issue cycles differ by at least t (t = 1: any two cycles).
    An ACT is granted in cycle ``c`` only if

    * ``c - c_last >= t_rrd_s`` for the PG's last granted ACT at ``c_last``;
    * ``c - c_group >= t_rrd_l`` for the last granted ACT at ``c_group`` of a PE
      of the same bank group (PE ``p`` is in bank group ``p % bank_groups``);
    * ``c - c_4 >= t_faw`` for the fourth-last granted ACT at ``c_4``, i.e. fewer
      than four ACTs were granted in the ``t_faw - 1`` cycles before ``c``.

    At most one ACT is granted per cycle. Among the wanting PEs whose bank
    group allows an ACT, the grant goes to the first in round-robin order from
    a pointer. The first *wanting* PE from the pointer (the head) keeps its
    turn: the pointer moves past a granted PE only when it was the head, so an
    ACT granted out of turn (the head's bank group still in tRRDL) does not
    push the head to the back. A PE of the head's bank group is never granted
    before the head (their windows are the same and the head comes first), so
    the head is granted within ``t_rrd_l + max(t_rrd_s, t_faw)`` cycles, and
    where every PE that wants keeps wanting until it is granted (as a
    controller does, but for a refresh), a PE is granted within ``pes`` times
    that. When every PE wants all the time and ``bank_groups`` divides ``pes``
    (or ``pes <= bank_groups``: so in a vault, whose ``pes_per_pg`` is a power
    of two), the grants go 0, 1, ..., ``pes - 1``, 0, ...: the head's bank group
    is then the one granted longest ago. Otherwise the first PE's group follows
    the last PE's, and a PE granted out of turn while the head waits may get
    two grants in one round (fewer than twice any other PE's share). The window
    is work-conserving: whenever a wanting PE may issue, one does.

    Parameters
    ----------
    pes : int
        PEs of the PG (one bank each).
    t_rrd_s : int
        Cycles between two ACTs of the PG (tRRDS).
    t_rrd_l : int
        Cycles between two ACTs of one bank group (tRRDL), at least ``t_rrd_s``.
    t_faw : int
        Four-activation window in cycles (tFAW).
    bank_groups : int
        Bank groups of the die.

    Attributes
    ----------
    want : In(pes)
        Bit ``p``: PE ``p``'s controller would issue an ACT this cycle.
    ok : Out(pes)
        Bit ``p``: PE ``p`` may issue it (one-hot or zero; only wanting PEs).
    """

    def __init__(self, *, pes: int, t_rrd_s: int, t_rrd_l: int, t_faw: int,
                 bank_groups: int = 4):
        check_int("pes", pes, 1, 64)
        check_int("t_rrd_s", t_rrd_s, 1, 1024)
        check_int("t_rrd_l", t_rrd_l, 1, 1024)
        check(t_rrd_l >= t_rrd_s, "t_rrd_l", t_rrd_l, f"at least t_rrd_s ({t_rrd_s})")
        check_int("t_faw", t_faw, 1, 4096)
        check_int("bank_groups", bank_groups, 1, 64)
        self.pes, self.t_rrd_s, self.t_rrd_l, self.t_faw = pes, t_rrd_s, t_rrd_l, t_faw
        self.bank_groups = bank_groups
        super().__init__({"want": In(pes), "ok": Out(pes)})

    def elaborate(self, platform):
        m = Module()
        P = self.pes
        G = min(self.bank_groups, P)          # groups that hold a PE
        granted = self.ok.any()

        rrd_s = TimingCounter(m, self.t_rrd_s, "rrd_s")
        rrd_s.load(granted, self.t_rrd_s)
        rrd_l = [TimingCounter(m, self.t_rrd_l, f"rrd_l{g}") for g in range(G)]
        for g, c in enumerate(rrd_l):
            c.load(self.ok[g::G].any(), self.t_rrd_l)
        # tFAW: the fourth-last ACT must be t_faw old; one counter per ACT of the window,
        # loaded in turn (scheduler.py's vault-wide tFAW).
        faw = [TimingCounter(m, self.t_faw, f"faw{i}") for i in range(4)]
        faw_next = Signal(2)
        for i, c in enumerate(faw):
            c.load(granted & (faw_next == i), self.t_faw)
        with m.If(granted):
            m.d.sync += faw_next.eq(faw_next + 1)
        for c in (rrd_s, *rrd_l, *faw):
            c.elaborate()
        die_ok = Signal()
        m.d.comb += die_ok.eq(rrd_s.ready & Array(c.ready for c in faw)[faw_next])
        eligible = Signal(P)
        for p in range(P):
            m.d.comb += eligible[p].eq(self.want[p] & rrd_l[p % G].ready & die_ok)

        # Round robin from the pointer: the first eligible PE is granted, the first
        # wanting PE is the head. The last matching assignment wins, so each order is
        # walked from its end.
        # At least one bit, so that one PE still has a pointer to switch on.
        ptr = Signal(range(max(P, 2)))
        grant, grant_v = Signal(range(max(P, 2))), Signal()
        head = Signal(range(max(P, 2)))
        with m.Switch(ptr):
            for s in range(P):
                with m.Case(s):
                    order = [(s + k) % P for k in range(P)]
                    for p in reversed(order):
                        with m.If(eligible[p]):
                            m.d.comb += [grant.eq(p), grant_v.eq(1)]
                        with m.If(self.want[p]):
                            m.d.comb += head.eq(p)
        for p in range(P):
            m.d.comb += self.ok[p].eq(grant_v & (grant == p))
        with m.If(grant_v & (grant == head)):
            m.d.sync += ptr.eq(Mux(grant == P - 1, 0, grant + 1))
        return m
