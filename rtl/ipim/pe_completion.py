"""The completion port of the near-bank PE: one finishing instruction a cycle, chosen among
the reserved fixed-latency completion, the scratchpad engine and the bank."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int
from .bus import VECTOR_BITS
from .isa import LANES, REG_BITS

__all__ = ["PECompletion", "completion_layout"]


def completion_layout(tag_bits: int) -> data.StructLayout:
    """One finishing instruction: its issue ``tag`` and its register write.

    ``drf`` writes the DataRF entry ``idx`` in the lanes of ``mask``; ``arf``
    writes ``data[:32]`` into the AddrRF entry ``idx``; neither set writes
    nothing (the instruction only reports ``done``).
    """
    check_int("tag_bits", tag_bits, 1, 16)
    return data.StructLayout({"tag": tag_bits, "drf": 1, "arf": 1, "idx": REG_BITS,
                              "mask": LANES, "data": VECTOR_BITS})


class PECompletion(wiring.Component):
    """The PE's one completion port (``done``, the DataRF and AddrRF write ports together).

    A fixed-latency instruction reserved its completion cycle when it was
    dispatched, so ``fixed`` is never refused. The cycles it leaves free go to
    the scratchpad engine, then to the bank: a bank response can wait in the
    controller's response FIFO, while the engine holds its one access until it
    is done, so serving the engine first frees it for the next scratchpad
    instruction sooner. ``engine.ready`` and ``bank.ready`` depend on the other
    sources' ``valid`` only, never on their own.

    Parameters
    ----------
    tag_bits : int
        Width of the issue tags.

    Attributes
    ----------
    fixed : In(stream.Signature(completion_layout(tag_bits), always_ready=True))
        The head of the fixed-latency reservation line.
    engine : In(stream.Signature(completion_layout(tag_bits)))
        A finished scratchpad access.
    bank : In(stream.Signature(completion_layout(tag_bits)))
        A bank response of the PE's own (``ld_rf``, ``st_rf``, ``st_pgsm``).
    done : Out(stream.Signature(completion_layout(tag_bits), always_ready=True))
        The instruction finishing this cycle; the payload is all zero while
        ``valid`` is low.
    """

    def __init__(self, *, tag_bits: int):
        layout = completion_layout(tag_bits)
        self.tag_bits = tag_bits
        super().__init__({
            "fixed": In(stream.Signature(layout, always_ready=True)),
            "engine": In(stream.Signature(layout)),
            "bank": In(stream.Signature(layout)),
            "done": Out(stream.Signature(layout, always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        fixed, engine, bank, done = self.fixed, self.engine, self.bank, self.done
        m.d.comb += [engine.ready.eq(~fixed.valid), bank.ready.eq(~fixed.valid & ~engine.valid)]
        with m.If(fixed.valid):
            m.d.comb += [done.valid.eq(1), done.payload.eq(fixed.payload)]
        with m.Elif(engine.valid):
            m.d.comb += [done.valid.eq(1), done.payload.eq(engine.payload)]
        with m.Elif(bank.valid):
            m.d.comb += [done.valid.eq(1), done.payload.eq(bank.payload)]
        return m
