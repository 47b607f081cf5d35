"""Run task lists on the Verilated NicePIM array with the native driver ``nicepim_main.cpp``.

One Verilog model of :class:`~pimforge.rtl.nicepim.array.NicePIMArray` is built
(cached) with the driver, which loads each node's task list through its task-memory
backdoor, serves every node's DRAM banks from a sparse model, clocks the array until
every started node is done and writes back the counters and the final DRAM. Python
writes the tasks and the DRAM words and reads the results: it is never woken per
cycle. The driver can also clock the same model from the same start for the same
number of cycles with nothing but the clock (``bare``): the ceiling of a native loop
on this Verilog.

Besides the run, this module has what a task list is made of: :func:`task` encodes
one task, :func:`place_tensor` and :func:`read_tensor` move tensors between numpy and
a node's DRAM words in a :class:`~pimforge.rtl.nicepim.params.Layout`, and
:func:`conv_tasks` lowers a convolution (stride, padding, groups; a matmul is a
1 x M image) on one node to tiles that fit its buffers.
"""

from __future__ import annotations

import gc
import math
import subprocess
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from amaranth.hdl import UnusedElaboratable

from pimforge.gen.args import WavesWindow
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import CapacityError, SimulationError
from pimforge.rtl.nicepim.node import COUNTERS
from pimforge.rtl.nicepim.params import (
    C_BLOCK,
    DATA_BITS,
    PSUM_BITS,
    SIGNED_FIELDS,
    TASK_LAYOUT,
    TASK_WORDS,
    Layout,
    Op,
    element_address,
    kblock_address,
    kblock_elems,
)
from pimforge.rtl.nicepim.share import MESSAGE_FLITS

from ..build import build_verilated
from ..drivers import params_header, sources
from ..drivers.io import read_fields, write_fields, write_table
from ..drivers.pins import driver_top
from ..drivers.waves import DriverWaves
from .tiling import ConvPart, blocking, drop_held, tiles

__all__ = ["WORD_FLITS", "ArrayRun", "ConvPlan", "LayerPlan", "build_array_driver",
           "conv_layer_tasks", "conv_tasks", "part_tasks",
           "link_names", "pins", "place_tensor", "place_weights", "read_tensor", "run_array",
           "send_tasks", "task", "tensor_elems", "tensor_words", "weight_elems"]


def task(op: Op, **fields: int) -> int:
    """One task word of :data:`~pimforge.rtl.nicepim.params.TASK_LAYOUT` (unnamed fields 0)."""
    word = 0
    known = dict(TASK_LAYOUT)
    for name, value in {"op": int(op), **fields}.items():
        if name not in known:
            raise ValueError(f"unknown task field {name!r}; fields: {', '.join(known)}")
        f = known[name]
        w = f.width
        lo, hi = (-(1 << (w - 1)), 1 << (w - 1)) if name in SIGNED_FIELDS else (0, 1 << w)
        if not lo <= int(value) < hi:
            raise CapacityError(f"task field {name} = {value} does not fit its {w} bits")
        word |= (int(value) & ((1 << w) - 1)) << f.offset
    return word


def pins(nodes: int, links: int) -> dict[str, object]:
    """Driver pin -> port(s) of the array: the only place the driver names its ports."""
    N = range(nodes)
    out: dict[str, object] = {"start": "start", "done": "done", "overflow": "overflow",
                              "prog_node": "prog_node", "prog_en": "prog__en",
                              "prog_addr": "prog__addr", "prog_data": "prog__data"}
    for n in ("re", "we", "addr", "wdata", "rdata"):
        out[f"arr_{n}"] = [f"arr__{i}__{n}" for i in N]
    for n in COUNTERS:
        out[f"perf_{n}"] = [f"perf__{i}__{n}" for i in N]
    out["link_flits"] = [f"link_flits__{k}" for k in range(max(1, links))]
    return out


def link_names(cfg) -> list[tuple[int, str]]:
    """The array's mesh links in ``link_flits`` order: (node, direction)."""
    from pimforge.rtl.noc.flit import PORT_NAMES, NoCLink
    from pimforge.rtl.noc.mesh import Mesh

    n = cfg.nicepim
    # A mesh built only to read its link list (Amaranth would warn that it is never
    # elaborated when it is freed).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        mesh = Mesh(link=NoCLink.Signature(rows=n.na_rows, cols=n.na_cols, vcs=n.noc_vcs,
                                           flit_bits=n.flit_bits), depth=n.noc_buffer_depth,
                    probes=True)
        out = [(k, PORT_NAMES[d]) for k, d in mesh.probe_links]
        del mesh
        gc.collect()
    return out


#: The most PEs of an array Verilated flat: larger ones Verilate the node and router
#: once, as hierarchical blocks (their waves cannot be written: trace builds are flat).
#: Flat, Verilator holds every PE's copy in memory: the 16x16 array's 16,384 PEs passed
#: 10 GB before its C++ was written.
HIER_PES = 4096


def build_array_driver(cfg, *, trace: bool = False) -> Path:
    """The (cached) native driver of *cfg*'s NicePIM array (with *trace*: a separate
    build that can write waves)."""
    n = cfg.nicepim
    big = n.nodes * n.pe_rows * n.pe_cols > HIER_PES
    if trace and big:
        raise CapacityError(f"waves of a {n.na_rows}x{n.na_cols} array of {n.pe_rows}x"
                            f"{n.pe_cols} PEs cannot be written (a traced build is flat, and "
                            f"flat Verilator holds every PE in memory); use an array of at "
                            f"most {HIER_PES} PEs")
    el = elaborate("nicepim_array", cfg)
    links = len(link_names(cfg))
    top = driver_top(el.verilog, el.top, el.manifest["ports"], pins(n.nodes, links),
                     name="nicepim_array_driver")
    hdr = params_header(top.name, N=n.nodes, WW=n.word_bytes // 4, TW=TASK_WORDS,
                        NODE_WORDS=n.node_words, TASK_ENTRIES=n.task_entries,
                        LINKS=max(1, links))
    hdr += "#define NODE_COUNTERS(X) " + " ".join(f"X({c})" for c in COUNTERS) + "\n"
    # -fno-inline keeps the node and the router one C++ class each. Hierarchical only
    # past HIER_PES: the node and router as hierarchical blocks halve the array's
    # speed (nicepim_small: 34-40k against 82-95k cycles/s) and a flat small array
    # builds in about a minute.
    return build_verilated(top.verilog, top.name, sources("nicepim_main.cpp", hdr),
                           name=f"nicepim_array-{cfg.name}", extra_args=("-fno-inline",),
                           trace=trace, hierarchical=big)


@dataclass
class ArrayRun:
    """What one run of the array measured.

    Attributes
    ----------
    dram : dict
        ``node -> {word address: int}``: every nonzero DRAM word at the end.
    cycles : int
        Cycles from the start until every started node was done.
    perf : dict
        Counter name (:data:`~pimforge.rtl.nicepim.node.COUNTERS`) -> per-node values.
    link_flits : list of int
        Flits over each mesh link, in :func:`link_names` order.
    wall_s, cycles_per_s : float
        Wall time of the driver's cycle loop and its speed (array cycles per second).
    bare_cycles_per_s : float or None
        Speed of a bare native loop on the same model (when asked for).
    """

    dram: dict
    cycles: int
    perf: dict
    link_flits: list
    wall_s: float
    cycles_per_s: float
    bare_cycles_per_s: float | None = None


def run_array(cfg, tasks: Mapping[int, Sequence[int]],
              dram: Mapping[int, Mapping[int, int]] | None = None, *,
              max_cycles: int = 2_000_000, bare: bool = False,
              exe: Path | None = None, waves: WavesWindow | None = None) -> ArrayRun:
    """Run ``tasks[n]`` (task words of :func:`task`, ending with ``END``) on node ``n`` of
    *cfg*'s array from *dram* (``node -> {word address: int}``) until every node with
    tasks is done; the final DRAM and the counters. *waves*: write the waves of these
    cycles from the start on (*exe* must then be a trace build).

    Raises
    ------
    CapacityError
        A task list longer than the task memory, or a node or word the array lacks.
    SimulationError
        A router overflowed, or the array did not finish in *max_cycles*.
    """
    c = cfg.nicepim
    for n, lst in tasks.items():
        if not 0 <= n < c.nodes:
            raise CapacityError(f"node {n} is not in the array (nicepim has {c.nodes} nodes)")
        if len(lst) > c.task_entries:
            raise CapacityError(f"node {n}'s task list has {len(lst)} tasks but the task "
                                f"memory holds {c.task_entries}; raise nicepim.task_entries")
    for n, words in (dram or {}).items():
        bad = [a for a in words if not 0 <= a < c.node_words]
        if not 0 <= n < c.nodes or bad:
            raise CapacityError(f"DRAM word {bad[0] if bad else 0} of node {n} is not in the "
                                f"array ({c.nodes} nodes of {c.node_words} words)")
    exe = exe or build_array_driver(cfg, trace=waves is not None)
    ww = c.word_bytes // 4
    mask32 = 0xFFFFFFFF
    with tempfile.TemporaryDirectory() as td, DriverWaves(waves, Path(td)) as wv:
        d = Path(td)
        write_fields(d / "run.txt", {"max_cycles": max_cycles, "bare": int(bare),
                                     **wv.fields})
        write_table(d / "tasks.tbl", ("node", "addr", *[f"t{k}" for k in range(TASK_WORDS)]),
                    ((n, a, *[(t >> (32 * k)) & mask32 for k in range(TASK_WORDS)])
                     for n in sorted(tasks) for a, t in enumerate(tasks[n])))
        write_table(d / "dram.tbl", ("node", "addr", *[f"w{k}" for k in range(ww)]),
                    ((n, a, *[(x >> (32 * k)) & mask32 for k in range(ww)])
                     for n, words in sorted((dram or {}).items())
                     for a, x in sorted(words.items()) if x))
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True, check=False)
        if not (d / "stats.txt").exists():
            raise SimulationError(f"nicepim driver failed (exit {res.returncode}): "
                                  f"{res.stderr[-2000:]}")
        f = read_fields(d / "stats.txt")
        wv.publish()        # a failed run's too: its waves show where
        out: dict = {}
        for line in (d / "dram_out.tbl").read_text().splitlines()[1:]:
            n, a, *w = (int(x) for x in line.split())
            out.setdefault(n, {})[a] = sum(x << (32 * k) for k, x in enumerate(w))
    if f.int("overflow"):
        raise SimulationError("a router of the array received a flit for a full buffer")
    if res.returncode == 3 or not f.int("done"):
        raise SimulationError(f"the array did not finish in {max_cycles} cycles; raise "
                              "max_cycles or check the task lists (a WAIT for words that "
                              "are never sent?)")
    if res.returncode != 0:
        raise SimulationError(f"nicepim driver failed (exit {res.returncode}): "
                              f"{res.stderr[-2000:]}")
    return ArrayRun(dram=out, cycles=f.int("cycles"),
                    perf={n: f.ints(f"perf_{n}") for n in COUNTERS},
                    link_flits=f.ints("link_flits"), wall_s=f.float("wall_s"),
                    cycles_per_s=f.float("cycles_per_s"),
                    bare_cycles_per_s=f.float("bare_cycles_per_s") if bare else None)


# ---- tensors in DRAM ---------------------------------------------------------------------
def tensor_elems(layout: int, dims: tuple[int, int, int, int]) -> int:
    """Elements a tensor of *dims* spans in *layout* (NCHW[C8] fills its last block)."""
    n, c, h, w = dims
    if layout == Layout.NCHWC8:
        c = -(-c // C_BLOCK) * C_BLOCK
    return n * c * h * w


def group_stride(layout: int, dims: tuple[int, int, int, int], word_bits: int) -> int:
    """32-bit elements from one group's output tensor of *dims* to the next one's: the
    tensor rounded up to whole DRAM words of *word_bits*, so that every group's output
    starts at a word (as the node model counts a store's words and partly covered ones)."""
    per = word_bits // PSUM_BITS
    return -(-tensor_elems(layout, dims) // per) * per


def _flat_index(layout: int, dims: tuple[int, int, int, int]) -> np.ndarray:
    idx = np.indices(dims).reshape(4, -1)
    return np.array([element_address(layout, dims, *e) for e in idx.T], dtype=np.int64)


def place_tensor(x: np.ndarray, layout: int, base: int, word_bits: int, *,
                 bits: int = DATA_BITS, words: dict | None = None) -> dict[int, int]:
    """DRAM words holding ``x[N, C, H, W]`` in *layout* from element *base* (elements of
    *bits*), merged into *words* (``{word address: int}``, updated and returned)."""
    x = np.asarray(x)
    return _pack(_flat_index(layout, x.shape) + base, x, word_bits, bits,
                 {} if words is None else words)


def _pack(addresses: np.ndarray, x: np.ndarray, word_bits: int, bits: int,
          words: dict) -> dict[int, int]:
    """*x*'s elements (of *bits*) at element *addresses* merged into *words*."""
    per = word_bits // bits
    mask = (1 << bits) - 1
    for e, v in zip(addresses.tolist(), np.asarray(x).reshape(-1).tolist(), strict=True):
        a, lane = divmod(e, per)
        cur = words.get(a, 0) & ~(mask << (bits * lane))
        words[a] = cur | ((int(v) & mask) << (bits * lane))
    return words


def weight_elems(layout: int, dims: tuple[int, int, int, int], engine=None) -> int:
    """Elements one group's weights of *dims* ``(k / groups, c / groups, r, s)`` span in
    *layout* (KBLOCK: for the *engine* ``(pe_rows, pe_cols)``, whole blocks)."""
    if layout == Layout.KBLOCK:
        return kblock_elems(dims, *engine)
    return math.prod(dims)


def place_weights(w: np.ndarray, groups: int, base: int, word_bits: int, *,
                  layout: int = Layout.CHWN, words: dict | None = None,
                  engine: tuple[int, int] | None = None) -> dict[int, int]:
    """DRAM words holding weights ``w[k, c / groups, r, s]`` from element *base* as the
    ``LOAD_W`` tasks of :func:`part_tasks` read them: one tensor ``[k / groups, c / groups,
    r, s]`` per group, one after the other, each in *layout* (KBLOCK: for the *engine*
    ``(pe_rows, pe_cols)``, the blocks' padding 0)."""
    w = np.asarray(w)
    words = {} if words is None else words
    og = w.shape[0] // groups
    step = weight_elems(layout, (og, *w.shape[1:]), engine)
    for g in range(groups):
        wg = w[g * og:(g + 1) * og]
        if layout != Layout.KBLOCK:
            words = place_tensor(wg, layout, base + g * step, word_bits, words=words)
            continue
        idx = np.indices(wg.shape).reshape(4, -1)
        words = _pack(kblock_address(wg.shape, *engine, *idx) + base + g * step, wg,
                      word_bits, DATA_BITS, words)
    return words


def tensor_words(layout: int, dims: tuple[int, int, int, int], base: int, word_bits: int, *,
                 bits: int = DATA_BITS, select=None) -> list[int]:
    """The sorted DRAM words holding the elements of a tensor (those where
    ``select(n, c, h, w)`` holds, when given)."""
    idx = np.indices(dims).reshape(4, -1).T
    per = word_bits // bits
    out = {(element_address(layout, dims, *e) + base) // per for e in idx
           if select is None or select(*e)}
    return sorted(out)


def read_tensor(words: Mapping[int, int], layout: int, dims: tuple[int, int, int, int],
                base: int, word_bits: int, *, bits: int = PSUM_BITS) -> np.ndarray:
    """The signed tensor of *dims* in *layout* at element *base* of *words*."""
    per = word_bits // bits
    mask = (1 << bits) - 1
    flat = []
    for e in _flat_index(layout, dims) + base:
        a, lane = divmod(int(e), per)
        v = (words.get(a, 0) >> (bits * lane)) & mask
        flat.append(v - (1 << bits) if v >> (bits - 1) else v)
    return np.array(flat, dtype=np.int64).reshape(dims)


# ---- a convolution on one node --------------------------------------------------------------
@dataclass(frozen=True)
class ConvPlan:
    """The tasks of one node's share of a convolution and what the engine will spend.

    Attributes
    ----------
    tasks : list of int
        Task words (no ``END``).
    tiles : list of dict
        The ``COMPUTE`` tiles' shapes (``cb, kh, kw, oh, ow``) for the cycle formula.
    """

    tasks: list
    tiles: list


def part_tasks(cfg, part: ConvPart, *, x_layout: int, x_base: int, w_base: int, o_base: int,
               o_layout: int = Layout.NCHW, x_box: tuple | None = None,
               o_box: tuple | None = None, w_layout: int = Layout.CHWN,
               hold: bool = True) -> ConvPlan:
    """Tasks computing one node's *part* of a convolution (:mod:`.tiling`'s loop).

    With double buffering (:attr:`.tiling.Blocking.double`) the list is software
    pipelined: ``LOAD(0) COMPUTE(0) LOAD(1) [STORE(0)] COMPUTE(1) LOAD(2) ...``, tile
    ``i`` in input and weight half ``i % 2`` and band ``j`` in output half ``j % 2``, so
    the node controller runs each tile's loads and each band's store beside a compute;
    else ``LOAD(i) COMPUTE(i) [STORE(i)]`` one after the other.

    A load that would fill a buffer half with what it holds is left out
    (:func:`drop_held_loads`; e.g. a small image's input, the same for every ``pe_cols``
    output channels), unless *hold* is False: a list the task memory runs in pieces, each
    from reset, is cut first and each piece then leaves out its own held loads.

    Weights in KBLOCK (:func:`place_weights` with the engine's ``(pe_rows, pe_cols)``)
    are read a DRAM word a cycle: each tile's ``LOAD_W`` starts at its block.

    The input is the sub-tensor ``part.x_dims`` (the part's window clipped to the image)
    at element ``x_base`` in *x_layout*, or, with ``x_box = (dims, (row, col))``, a tensor
    of ``dims = (C, H, W)`` whose element ``(0, 0)`` is image pixel ``(row, col)``. The
    weights ``[k, c / groups, r, s]`` are at ``w_base``, a tensor ``[k / groups, c / groups, r,
    s]`` per group one after the other, each in *w_layout* (:func:`place_weights`; CHWN,
    the output channels innermost, loads a weight line a cycle). The output of
    32-bit sums goes to ``o_base`` in *o_layout*, one tensor ``(k / groups, p, q)`` per group
    after the other, or, with ``o_box = ((k / groups, H, W), (row, col))``, into per-group
    tensors of that size whose ``(0, 0)`` is output pixel ``(row, col)``.
    """
    n = cfg.nicepim
    R, C = n.pe_rows, n.pe_cols
    b = blocking(n, part)
    cg, og = part.c // part.groups, part.k // part.groups
    w_step = weight_elems(w_layout, (og, cg, part.r, part.s), (R, C))
    (ci, hi, wi), (xr, xc) = x_box or (part.x_dims, (part.x_rows[0], part.x_cols[0]))
    (_, P, Q), (orow, ocol) = o_box or ((og, part.p, part.q), part.rows[:1] + part.cols[:1])
    st, pad = part.stride, part.pad
    o_group = group_stride(o_layout, (1, og, P, Q), n.node_bank_bits)
    shapes = []
    loads, computes, stores = [], [], []
    band = 0
    for i, t in enumerate(tiles(n, part)):
        nh = (t.oh - 1) * st + t.kh
        # double buffering: tile i in input/weight half i % 2, band j in output half j % 2
        buf, obuf = (i % 2, band % 2) if b.double else (0, 0)
        if w_layout == Layout.KBLOCK:     # the tile's blocks, from its first one
            blk = (t.co // C * -(-cg // R) + t.b0) * part.r * part.s * R * C
            ld_w = task(Op.LOAD_W, base=w_base + t.g * w_step + blk, buf=buf,
                        layout=w_layout, dn=C, dc=t.cb * R, dh=part.r, dw=part.s, n0=0,
                        c0=0, h0=t.u0, w0=0, cb=t.cb, nh=t.kh, nw=part.s)
        else:
            ld_w = task(Op.LOAD_W, base=w_base + t.g * w_step, buf=buf, layout=w_layout,
                        dn=og, dc=cg, dh=part.r, dw=part.s, n0=t.co, c0=t.b0 * R, h0=t.u0,
                        w0=0, cb=t.cb, nh=t.kh, nw=part.s)
        # Channels of the block beyond the group read the next group's inputs; their
        # weights (beyond cg in the group's view) are 0.
        ld_i = task(Op.LOAD_I, base=x_base, layout=x_layout, dn=1, dc=ci, dh=hi, dw=wi,
                    buf=buf, n0=0, c0=t.g * cg + t.b0 * R, h0=t.o0 * st - pad + t.u0 - xr,
                    w0=part.cols[0] * st - pad - xc, cb=t.cb, nh=nh, nw=b.nw)
        # (the first load reads the tensor the load before read last: its DRAM row is open)
        loads.append([ld_i, ld_w] if t.i_first else [ld_w, ld_i])
        computes.append(task(Op.COMPUTE, acc=int(t.b0 > 0 or t.u0 > 0), cb=t.cb, nh=nh,
                             nw=b.nw, kh=t.kh, kw=part.s, stride=st, pad=0, oh=t.oh,
                             ow=part.q, buf=buf, obuf=obuf))
        shapes.append(dict(cb=t.cb, kh=t.kh, kw=part.s, oh=t.oh, ow=part.q))
        stores.append([task(Op.STORE, base=o_base + t.g * o_group, layout=o_layout, obuf=obuf,
                            dn=1, dc=og, dh=P, dw=Q, n0=0, c0=t.co, h0=t.o0 - orow,
                            w0=part.cols[0] - ocol, cb=1, nh=t.oh, nw=part.q)]
                      if t.store else [])
        band += int(t.store)
    out = []
    if b.double:    # the next tile's loads and the band's store run beside the compute
        out += loads[0] if loads else []
        for i, c in enumerate(computes):
            out += [c] + (loads[i + 1] if i + 1 < len(loads) else []) + stores[i]
    else:
        for ld, c, sto in zip(loads, computes, stores, strict=True):
            out += ld + [c] + sto
    return ConvPlan(drop_held_loads(out) if hold else out, shapes)


def drop_held_loads(tasks: list[int]) -> list[int]:
    """*tasks* (one run of the task memory) without the loads that would fill a buffer
    half with what it holds (:func:`~.tiling.drop_held`): a ``LOAD_I`` or ``LOAD_W``
    the same as the last one of its kind into its half."""
    op, buf = TASK_LAYOUT["op"], TASK_LAYOUT["buf"]

    def key(t):
        o = (t >> op.offset) & ((1 << op.width) - 1)
        if o not in (Op.LOAD_I, Op.LOAD_W):
            return None
        return o, (t >> buf.offset) & 1, t

    return drop_held(tasks, key)


def conv_tasks(cfg, *, x_dims: tuple[int, int, int], w_dims: tuple[int, int, int, int],
               stride: int, pad: int, groups: int, x_layout: int, x_base: int, w_base: int,
               o_base: int, rows: tuple[int, int] | None = None,
               w_layout: int = Layout.CHWN) -> ConvPlan:
    """Tasks computing output rows ``rows`` (all by default) of a convolution on one node.

    The input ``[C, H, W]`` is at element ``x_base`` in *x_layout*; the weights
    ``[CO, C / groups, KH, KW]`` at element ``w_base`` as :func:`place_weights` puts them in
    *w_layout*; the output
    ``[CO, OH, OW]`` of 32-bit sums goes to 32-bit element ``o_base`` in NCHW order.
    The tiles are :mod:`.tiling`'s (:func:`part_tasks` of the whole image).

    Raises
    ------
    CapacityError
        Not even one output row of one channel block fits the buffers.
    """
    Ci, H, W = x_dims
    CO, CG, KH, KW = w_dims
    if Ci != CG * groups or CO % groups:
        raise CapacityError(f"channels {Ci} -> {CO} do not split into {groups} groups of "
                            f"{CG} input channels")
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    part = ConvPart(c=Ci, k=CO, h=H, w=W, r=KH, s=KW, stride=stride, pad=pad, groups=groups,
                    rows=rows or (0, OH), cols=(0, OW))
    return part_tasks(cfg, part, x_layout=x_layout, x_base=x_base, w_base=w_base,
                      o_base=o_base, x_box=((Ci, H, W), (0, 0)),
                      o_box=((CO // groups, OH, OW), (0, 0)), w_layout=w_layout)


def send_tasks(words: Sequence[int], dest_node: int, cols: int, *,
               max_count: int = 1 << 15) -> list[int]:
    """``SEND`` tasks of the sorted DRAM *words* to the same addresses of node
    *dest_node* (runs of consecutive words, one task each)."""
    out = []
    runs: list[list[int]] = []
    for a in words:
        if runs and a == runs[-1][1] and runs[-1][1] - runs[-1][0] < max_count:
            runs[-1][1] = a + 1
        else:
            runs.append([a, a + 1])
    x, y = dest_node % cols, dest_node // cols
    for lo, hi in runs:
        out.append(task(Op.SEND, base=lo, dest=lo, count=hi - lo, node=x | y << 4))
    return out


#: Flits of one data-sharing message (one DRAM word).
WORD_FLITS = MESSAGE_FLITS


@dataclass(frozen=True)
class LayerPlan:
    """A convolution layer partitioned over an array by output rows.

    Attributes
    ----------
    tasks : dict
        ``node -> task words`` (ending with ``END``).
    dram : dict
        ``node -> {word: int}``: the input and the weights, all in node 0.
    bands : list of (int, int)
        Output rows ``[lo, hi)`` of each node.
    tiles : dict
        ``node -> tile shapes`` (:attr:`ConvPlan.tiles`).
    shared_words : int
        DRAM words node 0 sends to the others.
    """

    tasks: dict
    dram: dict
    bands: list
    tiles: dict
    shared_words: int


def conv_layer_tasks(cfg, x: np.ndarray, w: np.ndarray, *, stride: int, pad: int,
                     x_layout: int, x_base: int, w_base: int, o_base: int) -> LayerPlan:
    """A whole convolution layer (``x[1, C, H, W]``, ``w[CO, C, KH, KW]``) over every node of
    *cfg*'s array: node 0 holds the input (in *x_layout*) and the weights, sends each other
    node the input rows of its band of output rows (halo included) and the weights over
    the NoC, and every node computes its band (:func:`conv_tasks`) into its own DRAM
    (32-bit NCHW at *o_base*; the rows outside its band stay 0)."""
    n = cfg.nicepim
    bits = n.node_bank_bits
    _, C, H, W = x.shape
    CO, _, KH, _ = w.shape
    words = place_tensor(x, x_layout, x_base, bits)
    place_weights(w, 1, w_base, bits, words=words)
    OH = (H + 2 * pad - KH) // stride + 1
    bands = [(int(b[0]), int(b[-1]) + 1) for b in np.array_split(np.arange(OH), n.nodes)
             if len(b)]
    w_words = tensor_words(Layout.NCHW, w.shape, w_base, bits)
    tasks: dict[int, list[int]] = {}
    tiles = {}
    head: list[int] = []
    shared = 0
    for k, (lo, hi) in enumerate(bands):
        plan = conv_tasks(cfg, x_dims=(C, H, W), w_dims=w.shape, stride=stride, pad=pad,
                          groups=1, x_layout=x_layout, x_base=x_base, w_base=w_base,
                          o_base=o_base, rows=(lo, hi))
        tiles[k] = plan.tiles
        if k == 0:
            tasks[0] = plan.tasks + [task(Op.END)]
            continue
        rows = range(lo * stride - pad, (hi - 1) * stride - pad + KH)
        x_words = tensor_words(x_layout, x.shape, x_base, bits,
                               select=lambda _n, _c, h, _w, rows=rows: h in rows)
        head += send_tasks(x_words, k, n.na_cols) + send_tasks(w_words, k, n.na_cols)
        shared += len(x_words) + len(w_words)
        tasks[k] = ([task(Op.WAIT, dest=len(x_words) + len(w_words))] + plan.tasks
                    + [task(Op.END)])
    tasks[0][:0] = head
    return LayerPlan(tasks, {0: words}, bands, tiles, shared)
