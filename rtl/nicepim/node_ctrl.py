"""The node controller of a PIM-node: runs its task list on the engine, DMA and network."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_pow2
from .params import TASK_LAYOUT, Op

__all__ = ["NodeController"]


class NodeController(wiring.Component):
    """Fetches the node's tasks (:class:`~pimforge.rtl.nicepim.params.Op`) in order and runs
    each on its unit: ``LOAD_I``/``LOAD_W``/``STORE`` on the DMA, ``COMPUTE`` on the NN
    engine, ``SEND`` on the data-sharing unit; ``WAIT`` holds until ``received``
    reaches the task's ``dest``; ``END`` raises ``done``.

    A task costs three cycles of its own (fetch: the task memory is read
    synchronously; dispatch: the unit's ``start``; retire: the cycle in which the
    unit is seen idle again) besides the unit's busy cycles or the ``WAIT``'s
    cycles, so that a run's ``cycles = overhead + waiting + sum(unit busy)``.

    Parameters
    ----------
    task_entries : int
        Tasks the task memory holds.

    Attributes
    ----------
    prog : Out(WritePort.Signature)
        The task memory's write port (loaded before ``start``).
    start : In(1)
        Run the task list from task 0.
    done : Out(1)
        ``END`` was reached (until the next ``start``).
    task : Out(TASK_LAYOUT)
        The task being run.
    eng_start, dma_start, share_start : Out(1)
    eng_busy, dma_busy, share_busy : In(1)
    received : In(32)
        Words this node has received over the network.
    running, overhead, waiting : Out(1)
        The list is running; this cycle is a task's own; a ``WAIT`` holds.
    """

    def __init__(self, *, task_entries: int):
        check_pow2("task_entries", task_entries, 4, 4096)
        self.task_entries = task_entries
        super().__init__({
            "prog": Out(WritePort.Signature(addr_width=ceil_log2(task_entries),
                                            shape=TASK_LAYOUT)),
            "start": In(1), "done": Out(1), "task": Out(TASK_LAYOUT),
            "eng_start": Out(1), "dma_start": Out(1), "share_start": Out(1),
            "eng_busy": In(1), "dma_busy": In(1), "share_busy": In(1),
            "received": In(32),
            "running": Out(1), "overhead": Out(1), "waiting": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        mem = m.submodules.tasks = Memory(shape=TASK_LAYOUT, depth=self.task_entries,
                                          init=[])
        wiring.connect(m, wiring.flipped(self.prog), mem.write_port())
        rp = mem.read_port()
        pc = Signal(range(self.task_entries))
        # pc changes only as a task retires, so the read port shows the task being run
        # from its fetch cycle to its retire cycle (the memory is not written meanwhile).
        m.d.comb += [rp.addr.eq(pc), self.task.eq(rp.data)]
        unit_busy = self.eng_busy | self.dma_busy | self.share_busy
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += pc.eq(0)
                    m.next = "FETCH"
            with m.State("FETCH"):
                m.d.comb += [self.running.eq(1), self.overhead.eq(1)]
                m.next = "DISPATCH"
            with m.State("DISPATCH"):
                m.d.comb += [self.running.eq(1), self.overhead.eq(1)]
                with m.Switch(self.task.op):
                    with m.Case(Op.END):
                        m.next = "DONE"
                    with m.Case(Op.LOAD_I, Op.LOAD_W, Op.STORE):
                        m.d.comb += self.dma_start.eq(1)
                        m.next = "RUN"
                    with m.Case(Op.COMPUTE):
                        m.d.comb += self.eng_start.eq(1)
                        m.next = "RUN"
                    with m.Case(Op.SEND):
                        m.d.comb += self.share_start.eq(1)
                        m.next = "RUN"
                    with m.Case(Op.WAIT):
                        m.next = "WAIT"
                    with m.Default():
                        m.next = "DONE"     # an unknown task ends the list
            with m.State("RUN"):
                m.d.comb += self.running.eq(1)
                with m.If(~unit_busy):
                    m.d.comb += self.overhead.eq(1)
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("WAIT"):
                m.d.comb += [self.running.eq(1), self.waiting.eq(1)]
                with m.If(self.received >= self.task.dest):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                with m.If(self.start):
                    m.d.sync += pc.eq(0)
                    m.next = "FETCH"
        return m
