"""Power-management unit of a sectored scratchpad (DESCNet Sec. V-B, Fig. 15-16)."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "STATE_GOING_OFF",
    "STATE_OFF",
    "STATE_ON",
    "STATE_WAKING",
    "SPMPowerManager",
    "from_config",
]

STATE_ON, STATE_GOING_OFF, STATE_OFF, STATE_WAKING = range(4)


class SPMPowerManager(wiring.Component):
    """Sleep-request / acknowledge handshake and sleep-transistor control per sector index.

    Every sector index ``s`` (the sectors with that index in all banks, which
    share one footer sleep transistor) runs the cycle of Fig. 16:

    ``ON`` --(``sleep_req[s]`` rises)--> ``GOING_OFF`` (``sleep[s]`` = 1, the
    virtual ground discharges for ``sleep_cycles``) --> ``OFF`` (``sleep_ack[s]``
    = 1; the contents are lost: ``lose[s]`` pulses for one cycle) --(``sleep_req[s]``
    falls)--> ``WAKING`` (``sleep[s]`` = 0, ``wakeup_cycles`` to recharge) -->
    ``ON`` (``sleep_ack[s]`` = 0).

    The request is a level that the requester holds until the acknowledge
    matches it (two-way handshake): a request that changes during a
    transition is served once the transition has finished. A sector is
    usable (``on[s]``) only in ``ON``.

    Parameters
    ----------
    sectors : int
        Number of sector indices (sleep signals).
    wakeup_cycles : int
        Cycles from the falling request to ``on`` (at least 1).
    sleep_cycles : int
        Cycles from the rising request to the acknowledge (at least 1).
    counter_bits : int
        Width of the ON-cycle counters.

    Attributes
    ----------
    sleep_req : In(sectors)
        1 asks sector ``s`` to power off, 0 to be on.
    sleep_ack : Out(sectors)
        1 once sector ``s`` is off; back to 0 once it is on again.
    sleep : Out(sectors)
        Gate of the footer sleep transistor (1 = supply cut).
    on : Out(sectors)
        Sector ``s`` is powered and may be accessed.
    lose : Out(sectors)
        One-cycle pulse when sector ``s`` reaches ``OFF`` (its contents are gone).
    on_cycles : Out(ArrayLayout(counter_bits, sectors))
        Cycles each sector has been powered (``sleep`` = 0), saturating.
    wakeups : Out(ArrayLayout(16, sectors))
        OFF -> ON transitions of each sector, saturating.
    """

    def __init__(self, *, sectors: int, wakeup_cycles: int, sleep_cycles: int = 1,
                 counter_bits: int = 32):
        if not isinstance(sectors, int) or not 1 <= sectors <= 256:
            raise ValueError(f"sectors must be an integer between 1 and 256, not {sectors!r}")
        if not isinstance(wakeup_cycles, int) or not 1 <= wakeup_cycles <= 1024:
            raise ValueError(f"wakeup_cycles must be an integer between 1 and 1024, "
                             f"not {wakeup_cycles!r}")
        if not isinstance(sleep_cycles, int) or not 1 <= sleep_cycles <= 1024:
            raise ValueError(f"sleep_cycles must be an integer between 1 and 1024, "
                             f"not {sleep_cycles!r}")
        if not isinstance(counter_bits, int) or not 8 <= counter_bits <= 64:
            raise ValueError(f"counter_bits must be an integer between 8 and 64, "
                             f"not {counter_bits!r}")
        self.sectors = sectors
        self.wakeup_cycles = wakeup_cycles
        self.sleep_cycles = sleep_cycles
        self.counter_bits = counter_bits
        super().__init__({
            "sleep_req": In(sectors),
            "sleep_ack": Out(sectors),
            "sleep": Out(sectors),
            "on": Out(sectors),
            "lose": Out(sectors),
            "on_cycles": Out(data.ArrayLayout(unsigned(counter_bits), sectors)),
            "wakeups": Out(data.ArrayLayout(unsigned(16), sectors)),
        })
        self.latencies = {"wakeup_cycles": wakeup_cycles, "sleep_cycles": sleep_cycles}

    def elaborate(self, platform):
        m = Module()
        cnt_max = max(self.wakeup_cycles, self.sleep_cycles, 2)
        sat = Const((1 << self.counter_bits) - 1, self.counter_bits)
        for s in range(self.sectors):
            state = Signal(2, name=f"state{s}", init=STATE_ON)
            count = Signal(range(cnt_max + 1), name=f"count{s}")
            req = self.sleep_req[s]
            m.d.comb += [
                self.on[s].eq(state == STATE_ON),
                self.sleep[s].eq((state == STATE_GOING_OFF) | (state == STATE_OFF)),
                self.sleep_ack[s].eq((state == STATE_OFF) | (state == STATE_WAKING)),
            ]
            # Static energy is paid while the supply is connected (sleep = 0).
            with m.If(~self.sleep[s] & (self.on_cycles[s] != sat)):
                m.d.sync += self.on_cycles[s].eq(self.on_cycles[s] + 1)
            m.d.sync += self.lose[s].eq(0)
            with m.Switch(state):
                with m.Case(STATE_ON):
                    with m.If(req):
                        if self.sleep_cycles == 1:
                            m.d.sync += [state.eq(STATE_OFF), self.lose[s].eq(1)]
                        else:
                            m.d.sync += [state.eq(STATE_GOING_OFF),
                                         count.eq(self.sleep_cycles - 2)]
                with m.Case(STATE_GOING_OFF):
                    with m.If(count == 0):
                        m.d.sync += [state.eq(STATE_OFF), self.lose[s].eq(1)]
                    with m.Else():
                        m.d.sync += count.eq(count - 1)
                with m.Case(STATE_OFF):
                    with m.If(~req):
                        if self.wakeup_cycles == 1:
                            m.d.sync += state.eq(STATE_ON)
                            self._count_wakeup(m, s)
                        else:
                            m.d.sync += [state.eq(STATE_WAKING),
                                         count.eq(self.wakeup_cycles - 2)]
                with m.Case(STATE_WAKING):
                    with m.If(count == 0):
                        m.d.sync += state.eq(STATE_ON)
                        self._count_wakeup(m, s)
                    with m.Else():
                        m.d.sync += count.eq(count - 1)
        return m

    def _count_wakeup(self, m, s):
        with m.If(self.wakeups[s] != 0xFFFF):
            m.d.sync += self.wakeups[s].eq(self.wakeups[s] + 1)


def from_config(cfg) -> SPMPowerManager:
    return SPMPowerManager(sectors=cfg.spm.sectors, wakeup_cycles=cfg.spm.wakeup_cycles,
                           sleep_cycles=cfg.spm.sleep_cycles)
