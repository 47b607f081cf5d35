"""The vault controller's request queue: compacting, entry 0 is the oldest."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["CommandQueue"]


class CommandQueue(wiring.Component):
    """A request queue whose entries are all visible to the scheduler, oldest first.

    A request is appended behind the last entry when the queue has room. The
    scheduler may take any entry (``take``, ``take_index``); the entries behind
    it move up one place in the same cycle, so entry 0 is always the oldest and
    the order of the others is their arrival order (what FCFS and the
    "same block keeps its order" rule of FR-FCFS rely on).

    Parameters
    ----------
    layout : data.StructLayout
        Payload of one request.
    depth : int
        Number of entries.

    Attributes
    ----------
    req : In(stream.Signature(layout))
        Requests in; ``ready`` while an entry is free.
    view : Out(CommandQueue.Signature)
        The entries, for the scheduler.
    """

    class Signature(wiring.Signature):
        """The queue's view port (queue side), read by a scheduler.

        Parameters
        ----------
        layout : data.StructLayout
            Payload of one entry.
        depth : int
            Number of entries.

        Members
        -------
        entries : Out(layout).array(depth)
            The entries, oldest first.
        valid : Out(1).array(depth)
            Entry ``i`` holds a request.
        count : Out(range(depth + 1))
            Requests queued.
        take : In(1)
            The scheduler serves entry ``take_index`` this cycle; it leaves the queue.
        take_index : In(range(depth))
            Entry served.
        """

        def __init__(self, *, layout: data.StructLayout, depth: int):
            if not isinstance(layout, data.StructLayout):
                raise TypeError(f"layout must be a data.StructLayout, not {layout!r}")
            check_int("depth", depth, 2, 64)
            self._layout, self._depth = layout, depth
            super().__init__({
                "entries": Out(layout).array(depth),
                "valid": Out(1).array(depth),
                "count": Out(range(depth + 1)),
                "take": In(1),
                "take_index": In(range(depth)),
            })

        @property
        def layout(self) -> data.StructLayout:
            return self._layout

        @property
        def depth(self) -> int:
            return self._depth

        def __eq__(self, other):
            return (type(other) is type(self) and other.layout == self.layout
                    and other.depth == self.depth)

        def __hash__(self):
            return hash((type(self), self.depth))

        def __repr__(self):
            return f"CommandQueue.Signature(layout={self.layout!r}, depth={self.depth})"

    def __init__(self, *, layout: data.StructLayout, depth: int):
        view = self.Signature(layout=layout, depth=depth)
        self.layout, self.depth = layout, depth
        super().__init__({"req": In(stream.Signature(layout)), "view": Out(view)})

    def elaborate(self, platform):
        m = Module()
        Q, lay, v = self.depth, self.layout, self.view
        ent = [Signal(lay, name=f"q{i}") for i in range(Q)]
        count = Signal(range(Q + 1))
        for i in range(Q):
            m.d.comb += [v.entries[i].eq(ent[i]), v.valid[i].eq(count > i)]
        m.d.comb += v.count.eq(count)

        accept = Signal()
        m.d.comb += [self.req.ready.eq(count < Q), accept.eq(self.req.valid & self.req.ready)]
        # Remove the served entry: it and every entry behind it take their successor's value.
        shift = Const(0)
        for i in range(Q):
            shift = shift | (v.take & (v.take_index == i))
            nxt = ent[i + 1] if i + 1 < Q else Const(0, len(ent[i].as_value()))
            with m.If(shift):
                m.d.sync += ent[i].eq(nxt)
        tail = Signal(range(Q + 1))
        m.d.comb += tail.eq(count - v.take)
        for i in range(Q):
            with m.If(accept & (tail == i)):
                m.d.sync += ent[i].eq(self.req.payload)
        m.d.sync += count.eq(tail + accept)
        return m
