"""Run PIM-nodes' parts of convolutions on the Verilated array and model them.

A :class:`NodeJob` is one node's part of a convolution (:class:`~.tiling.ConvPart`)
with its data: the input sub-tensor the node holds (its window, halo included,
clipped to the image), its weights and the layouts of its input and output in
DRAM. :func:`run_jobs` places every job's tensors in its node's DRAM (input at
element 0, weights and output each from the next DRAM row), lowers it with
:func:`~.rtl_run.part_tasks`, runs the task lists on the array (in pieces of what a
node's task memory holds, the DRAM carried from one piece to the next) and reads
the raw 32-bit outputs back. Each node's counters are summed over the pieces; the
cost model's prediction (:func:`~.node_model.part_cost`) comes with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pimforge.gen.args import WavesWindow
from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.node import COUNTERS
from pimforge.rtl.nicepim.params import DATA_BITS, PSUM_BITS, TASK_LAYOUT, Layout, Op

from .node_model import (
    NodeCost,
    NodeTiming,
    cut_pieces,
    part_cost,
    weight_layout,
)
from .rtl_run import (
    drop_held_loads,
    group_stride,
    part_tasks,
    place_tensor,
    place_weights,
    read_tensor,
    run_array,
    task,
    tensor_elems,
    weight_elems,
)
from .tiling import ConvPart

__all__ = ["JobResult", "NodeJob", "run_jobs"]


@dataclass(frozen=True)
class NodeJob:
    """One node's part of a convolution and its data.

    Attributes
    ----------
    part : ConvPart
    x : ndarray
        The input sub-tensor ``part.x_dims`` (int16 values).
    w : ndarray
        Weights ``[k, c / groups, r, s]`` (int16 values).
    x_layout, o_layout : Layout
        Of the input and of the output in the node's DRAM.
    """

    part: ConvPart
    x: np.ndarray
    w: np.ndarray
    x_layout: int = Layout.NCHW
    o_layout: int = Layout.NCHW


@dataclass
class JobResult:
    """What one node did: its raw output ``[k, p, q]`` (int64 of the 32-bit sums), its
    counters summed over the pieces of its task list, the model's prediction, and its
    counters in the gather run (:func:`run_jobs`)."""

    out: np.ndarray
    perf: dict
    model: NodeCost
    tasks: int
    pieces: int
    gather_perf: dict | None = None


def _row_align(elems: int, bits: int, n) -> int:
    """*elems* elements of *bits* rounded up to whole DRAM rows, in 16-bit elements."""
    row_bits = n.row_words * n.node_bank_bits
    return -(-elems * bits // row_bits) * row_bits // DATA_BITS


def _pieces(tasks: list[int], most: int, node: int) -> list[list[int]]:
    """*tasks* cut after STOREs into pieces of at most *most* tasks (:func:`.cut_pieces`)."""
    op = TASK_LAYOUT["op"]
    return cut_pieces(tasks, most, lambda t: (t >> op.offset) & ((1 << op.width) - 1), node)


def run_jobs(cfg, jobs: dict[int, NodeJob], *, exe=None,
             gather: dict[int, list[int]] | None = None,
             waves: WavesWindow | None = None) -> dict[int, JobResult]:
    """Run every node's job at once on *cfg*'s array (see the module docstring).
    *waves*: the waves of the first array run (*exe* must then be a trace build).

    *gather* ``{receiver: [senders]}``: after the jobs, each sender sends its raw output
    (its DRAM words) over the NoC into free DRAM of the receiver (``SEND`` tasks; the
    receiver waits for all of them), and the sender's output is read back from the
    receiver's copy (:attr:`JobResult.gather_perf` holds that run's counters).

    Raises
    ------
    CapacityError
        A node's tensors exceed its DRAM, or a part does not fit its buffers.
    """
    n = cfg.nicepim
    bits = n.node_bank_bits
    tm = NodeTiming(n)
    w_layout = weight_layout(n)
    engine = (n.pe_rows, n.pe_cols)
    lists, dram, layout = {}, {}, {}
    for node, j in jobs.items():
        p = j.part
        og = p.k // p.groups
        x_el = tensor_elems(j.x_layout, (1, *p.x_dims))
        w_base = _row_align(x_el, DATA_BITS, n)
        w_el = p.groups * weight_elems(w_layout, (og, p.c // p.groups, p.r, p.s), engine)
        o_base16 = w_base + _row_align(w_el, DATA_BITS, n)
        o_el = p.groups * group_stride(j.o_layout, (1, og, p.p, p.q), bits)
        end_bits = o_base16 * DATA_BITS + o_el * PSUM_BITS
        if end_bits > n.node_words * bits:
            raise CapacityError(f"node {node}'s part needs {end_bits // 8} bytes of DRAM but "
                                f"a node has {n.node_bytes}; use a larger --scale or raise "
                                "nicepim.bank_bytes")
        o_base = o_base16 * DATA_BITS // PSUM_BITS
        words = place_tensor(j.x[None], j.x_layout, 0, bits)
        place_weights(j.w, p.groups, w_base, bits, words=words, layout=w_layout,
                      engine=engine)
        plan = part_tasks(cfg, p, x_layout=j.x_layout, x_base=0, w_base=w_base,
                          o_base=o_base, o_layout=j.o_layout, w_layout=w_layout, hold=False)
        lists[node], dram[node], layout[node] = plan.tasks, words, o_base
    # A run starts from reset: the output buffer is empty, so a piece ends after a STORE,
    # and each piece loads what its buffer halves do not hold yet.
    pieces_of = {node: [drop_held_loads(p) for p in _pieces(t, n.task_entries - 1, node)]
                 for node, t in lists.items()}
    n_pieces = max((len(p) for p in pieces_of.values()), default=0)
    perf = {node: dict.fromkeys(COUNTERS, 0) for node in jobs}
    for i in range(n_pieces):
        piece = {node: p[i] + [task(Op.END)] for node, p in pieces_of.items() if i < len(p)}
        run = run_array(cfg, piece, dram, exe=exe, waves=waves if i == 0 else None)
        dram = run.dram
        for node in piece:
            for c in COUNTERS:
                perf[node][c] += run.perf[c][node]
    word_el = bits // PSUM_BITS                       # 32-bit elements per DRAM word
    o_words = {}
    for node, j in jobs.items():
        p = j.part
        o_el = p.groups * group_stride(j.o_layout, (1, p.k // p.groups, p.p, p.q), bits)
        o_words[node] = (layout[node] // word_el, -(-(layout[node] + o_el) // word_el))
    # node -> (the node whose DRAM holds its output, element base there)
    where = {node: (node, base) for node, base in layout.items()}
    gather_perf = {node: dict.fromkeys(COUNTERS, 0) for node in jobs}
    if gather:
        sends: dict[int, list[int]] = {}
        row = n.row_words
        for recv, senders in gather.items():
            free = -(-o_words[recv][1] // row) * row
            total = 0
            for snd in senders:
                lo, hi = o_words[snd]
                if free + hi - lo > n.node_words:
                    raise CapacityError(f"node {recv} has no room for node {snd}'s partial "
                                        "sums; use a larger --scale or raise "
                                        "nicepim.bank_bytes")
                y, x = divmod(recv, n.na_cols)
                for a in range(lo, hi, 1 << 15):
                    cnt = min(1 << 15, hi - a)
                    sends.setdefault(snd, []).append(task(Op.SEND, base=a, dest=free + a - lo,
                                                          count=cnt, node=x | y << 4))
                where[snd] = (recv, layout[snd] + (free - lo) * word_el)
                total += hi - lo
                free = -(-(free + hi - lo) // row) * row
            sends.setdefault(recv, []).append(task(Op.WAIT, dest=total))
        run = run_array(cfg, {k: v + [task(Op.END)] for k, v in sends.items()}, dram, exe=exe)
        dram = run.dram
        for node in sends:
            for c in COUNTERS:
                gather_perf[node][c] = run.perf[c][node]
    out = {}
    for node, j in jobs.items():
        p = j.part
        og = p.k // p.groups
        o_group = group_stride(j.o_layout, (1, og, p.p, p.q), bits)
        holder, base = where[node]
        res = [read_tensor(dram.get(holder, {}), j.o_layout, (1, og, p.p, p.q),
                           base + g * o_group, bits)[0] for g in range(p.groups)]
        out[node] = JobResult(np.concatenate(res), perf[node],
                              part_cost(n, p, j.x_layout, j.o_layout, tm),
                              sum(len(x) for x in pieces_of[node]),
                              len(pieces_of[node]), gather_perf[node])
    return out
