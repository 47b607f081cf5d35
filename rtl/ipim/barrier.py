"""The inter-vault ``sync`` barrier of iPIM (Sec. IV-D): master-slave, one phase at a time.

Vault 0 is the master. A vault reaching its ``sync`` (``arrive`` high, see
:class:`~pimforge.rtl.ipim.bus.SyncSignature`) sends one message to the
master, which lands ``latency[v]`` cycles later and sets the vault's bit of
the global synchronization status vector. Once every bit is set, the master
clears the vector and broadcasts ``proceed_phase``; vault ``v`` sees its
``proceed`` pulse ``latency[v]`` cycles later (the master's own messages take
one cycle). The latencies are the network distance to the master
(``hops * t_noc_hop`` in a cube); the messages travel on dedicated
wires of that delay rather than as packets among the ``req`` traffic, so a
barrier never waits behind data (a simplification: the paper sends them over
the network).

A halted vault counts as arrived, so a vault whose program ended does not
hold the others (programs are expected to run the same ``sync`` sequence on
every vault; the golden model checks that).

All vaults of one barrier must be at the same ``phase``; a mismatch raises
the sticky ``error`` output (a program bug the driver reports) and the
barrier proceeds anyway.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check, check_int
from .bus import SyncSignature

__all__ = ["SyncBarrier"]


class SyncBarrier(wiring.Component):
    """Master-slave barrier over ``len(latency)`` vaults.

    Parameters
    ----------
    latency : tuple of int
        Cycles a message takes between vault ``v`` and the master, each way
        (``latency[0]`` is the master's own, normally 1).

    Attributes
    ----------
    vault : In(SyncSignature()).array(vaults)
        Each vault's barrier port (``arrive``/``phase`` in, ``proceed`` out).
    halted : In(vaults)
        Vault ``v`` has executed ``halt``.
    error : Out(1)
        Sticky: two vaults met at one barrier with different phases.
    barriers : Out(32)
        Barriers completed (for the counters of a run).
    """

    def __init__(self, *, latency: tuple[int, ...]):
        latency = tuple(latency)
        check_int("vaults", len(latency), 1, 1024)
        for v, d in enumerate(latency):
            check(isinstance(d, int) and 1 <= d <= 4096, f"latency[{v}]", d,
                  "an integer number of cycles between 1 and 4096")
        self.latency = latency
        n = len(latency)
        super().__init__({"vault": In(SyncSignature()).array(n), "halted": In(n),
                          "error": Out(1), "barriers": Out(32)})

    def elaborate(self, platform):
        m = Module()
        n = len(self.latency)
        status = Signal(n)              # arrivals landed at the master
        go = Signal()                   # the master broadcasts proceed_phase this cycle

        for v, d in enumerate(self.latency):
            port = self.vault[v]
            cw = ceil_log2(d + 1)
            # One message each way at most: a vault holds arrive until its proceed.
            sent = Signal(name=f"sent{v}")
            up = Signal(cw, name=f"up{v}")          # cycles left for the arrive message
            up_busy = Signal(name=f"up_busy{v}")
            down = Signal(cw, name=f"down{v}")      # cycles left for the proceed message
            down_busy = Signal(name=f"down_busy{v}")
            with m.If(port.arrive & ~sent):
                m.d.sync += [sent.eq(1), up.eq(d - 1), up_busy.eq(1)]
            with m.Elif(up_busy):
                m.d.sync += up.eq(up - 1)
                with m.If(up == 0):
                    m.d.sync += [up_busy.eq(0), status.bit_select(v, 1).eq(1)]
            with m.If(go & sent):       # a halted vault is not told
                m.d.sync += [down.eq(d - 1), down_busy.eq(1)]
            with m.Elif(down_busy):
                m.d.sync += down.eq(down - 1)
                with m.If(down == 0):
                    m.d.sync += down_busy.eq(0)
            fire = Signal(name=f"fire{v}")
            m.d.comb += [fire.eq(down_busy & (down == 0)), port.proceed.eq(fire)]
            with m.If(fire):
                m.d.sync += sent.eq(0)

        # Halted vaults count as arrived; a barrier needs one real arrival.
        m.d.comb += go.eq(((status | self.halted) == (1 << n) - 1) & (status != 0))
        with m.If(go):
            m.d.sync += [status.eq(0), self.barriers.eq(self.barriers + 1)]
            # Arrived vaults hold their phase until proceed: compare them all with
            # the lowest-numbered one.
            ref = Signal(16)
            for v in reversed(range(n)):
                with m.If(status.bit_select(v, 1)):
                    m.d.comb += ref.eq(self.vault[v].phase)
            for v in range(n):
                with m.If(status.bit_select(v, 1) & (self.vault[v].phase != ref)):
                    m.d.sync += self.error.eq(1)
        return m
