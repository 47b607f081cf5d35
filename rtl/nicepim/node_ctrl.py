"""The node controller of a PIM-node: runs its task list on the engine, DMA and network."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_pow2
from .params import TASK_LAYOUT, Op

__all__ = ["NodeController"]


class NodeController(wiring.Component):
    """Fetches the node's tasks (:class:`~pimforge.rtl.nicepim.params.Op`) in order and
    starts each on its unit: ``LOAD_I``/``LOAD_W``/``STORE`` on the DMA, ``COMPUTE`` on
    the NN engine, ``SEND`` on the data-sharing unit; ``WAIT`` holds until ``received``
    reaches the task's ``dest``; ``END`` raises ``done`` once every unit is idle.

    Tasks start in order but need not wait for the one before to finish: a task is
    started as soon as its unit is idle and no running task uses a buffer half it
    would use in conflict (the halves of TASK_LAYOUT's ``buf`` and ``obuf``):

    * ``LOAD_I``/``LOAD_W`` (writes the input/weight half ``buf``): the DMA ready
      (idle, or a load whose reads are all issued: the DMA runs two loads back to back),
      and the engine idle or running a tile on the other half;
    * ``STORE`` (reads output half ``obuf``): the DMA idle, and the engine idle or
      running a tile on the other output half;
    * ``COMPUTE`` (reads the input and weight halves ``buf``, writes output half
      ``obuf``): the engine idle, the DMA idle or running a ``STORE`` of the other
      output half (a load still running is the tile's own: tasks start in order);
    * ``SEND``, ``WAIT`` and ``END`` wait for every unit to be idle, and the task after
      a ``SEND`` for its end (sharing runs alone).

    So the next tile's loads run while the engine computes, and a finished band's
    store while the engine computes the next band, when the task list puts them in
    the other halves. A task costs two cycles of its own (fetch: the task memory is
    read synchronously; dispatch), more while it waits for its unit or a conflict.
    Each unit gets the task it was started with, held while it runs.

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
    eng_task, dma_task, share_task : Out(TASK_LAYOUT)
        The task each unit runs (valid from its ``start`` until it is idle again).
    eng_start, dma_start, share_start : Out(1)
    eng_busy, dma_busy, share_busy : In(1)
    dma_ready : In(1)
        The DMA takes a load now (:class:`~pimforge.rtl.nicepim.dma.TensorDMA`).
    received : In(32)
        Words this node has received over the network.
    running, waiting : Out(1)
        The list is running; a ``WAIT`` holds.
    """

    def __init__(self, *, task_entries: int):
        check_pow2("task_entries", task_entries, 4, 4096)
        self.task_entries = task_entries
        super().__init__({
            "prog": Out(WritePort.Signature(addr_width=ceil_log2(task_entries),
                                            shape=TASK_LAYOUT)),
            "start": In(1), "done": Out(1),
            "eng_task": Out(TASK_LAYOUT), "dma_task": Out(TASK_LAYOUT),
            "share_task": Out(TASK_LAYOUT),
            "eng_start": Out(1), "dma_start": Out(1), "share_start": Out(1),
            "eng_busy": In(1), "dma_busy": In(1), "share_busy": In(1), "dma_ready": In(1),
            "received": In(32),
            "running": Out(1), "waiting": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        mem = m.submodules.tasks = Memory(shape=TASK_LAYOUT, depth=self.task_entries,
                                          init=[])
        wiring.connect(m, wiring.flipped(self.prog), mem.write_port())
        rp = mem.read_port()
        pc = Signal(range(self.task_entries))
        # pc changes only as a task is dispatched, so the read port shows the task
        # from its fetch cycle to its dispatch cycle (the memory is not written meanwhile).
        task = rp.data
        m.d.comb += rp.addr.eq(pc)
        eng_t, dma_t, share_t = (Signal(TASK_LAYOUT, name=n) for n in ("eng_t", "dma_t",
                                                                      "share_t"))
        # a unit sees the task in its start cycle, then the copy taken then
        m.d.comb += [self.eng_task.eq(Mux(self.eng_start, task, eng_t)),
                     self.dma_task.eq(Mux(self.dma_start, task, dma_t)),
                     self.share_task.eq(Mux(self.share_start, task, share_t))]
        with m.If(self.eng_start):
            m.d.sync += eng_t.eq(task)
        with m.If(self.dma_start):
            m.d.sync += dma_t.eq(task)
        with m.If(self.share_start):
            m.d.sync += share_t.eq(task)

        all_idle = ~(self.eng_busy | self.dma_busy | self.share_busy)
        dma_op = dma_t.op
        dma_load = self.dma_busy & ((dma_op == Op.LOAD_I) | (dma_op == Op.LOAD_W))
        dma_store = self.dma_busy & (dma_op == Op.STORE)
        # the conflicts of the task being dispatched with the running ones
        load_ok = self.dma_ready & (~self.eng_busy | (eng_t.buf != task.buf))
        store_ok = ~self.dma_busy & (~self.eng_busy | (eng_t.obuf != task.obuf))
        compute_ok = ~self.eng_busy & ~dma_load & ~(dma_store & (dma_t.obuf == task.obuf))

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += pc.eq(0)
                    m.next = "FETCH"
            with m.State("FETCH"):
                m.d.comb += self.running.eq(1)
                m.next = "DISPATCH"
            with m.State("DISPATCH"):
                m.d.comb += self.running.eq(1)
                go = Signal()
                with m.Switch(task.op):
                    with m.Case(Op.END):
                        with m.If(all_idle):
                            m.next = "DONE"
                    with m.Case(Op.LOAD_I, Op.LOAD_W):
                        m.d.comb += [go.eq(load_ok), self.dma_start.eq(load_ok)]
                    with m.Case(Op.STORE):
                        m.d.comb += [go.eq(store_ok), self.dma_start.eq(store_ok)]
                    with m.Case(Op.COMPUTE):
                        m.d.comb += [go.eq(compute_ok), self.eng_start.eq(compute_ok)]
                    with m.Case(Op.SEND):
                        m.d.comb += [go.eq(all_idle), self.share_start.eq(all_idle)]
                        with m.If(all_idle):
                            m.d.sync += pc.eq(pc + 1)
                            m.next = "SENDING"
                    with m.Case(Op.WAIT):
                        with m.If(all_idle):
                            m.next = "WAIT"
                    with m.Default():
                        m.next = "DONE"     # an unknown task ends the list
                with m.If(go & (task.op != Op.SEND)):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("SENDING"):
                m.d.comb += self.running.eq(1)
                with m.If(~self.share_busy):
                    m.next = "FETCH"
            with m.State("WAIT"):
                m.d.comb += [self.running.eq(1), self.waiting.eq(1)]
                with m.If(self.received >= task.dest):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                with m.If(self.start):
                    m.d.sync += pc.eq(0)
                    m.next = "FETCH"
        return m
