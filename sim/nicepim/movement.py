"""Data movement between layers: where each node of a layer's LM runs, what it keeps
and what it needs, and the NoC transfers that bring a layer's inputs into place.

A layer's output stays in the DRAM of the nodes that made it (the C parts of a split
reduction each keep a slice of its channels, :func:`owned_boxes`); before a layer
runs, each of its nodes gets the part of its input window it does not hold
(:func:`home_boxes`) from the nodes that hold it (:func:`redistribution`: the boxes
intersected, :func:`traffic`, the transfers routed XY at once by the nodes'
data-sharing units, :func:`noc_transfer`: the slower of the busiest sender's unit and
the busiest link or port in flits). Its K set then shares the window as the node
model counts (:meth:`.mapcost.NodeModel.layer_cost`). :func:`node_index` is the one
source of which node runs which part, for the model and for the runs on the RTL.
A flatten before a classifier moves each node's share from every producer node in
proportion.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pimforge.rtl.nicepim.params import DATA_BITS
from pimforge.rtl.nicepim.share import MESSAGE_FLITS
from pimforge.rtl.noc.router import HEAD_CYCLES_PER_HOP

from .mapcost import NodeModel
from .mapspace import DIMS, Partition, layer_shape
from .networks import Layer

__all__ = ["Placement", "home_boxes", "noc_transfer", "node_index", "owned_boxes",
           "placement_nodes", "redistribution", "redistributions", "traffic"]


@dataclass(frozen=True)
class Placement:
    """Where a layer runs: its LM on a region ``(y, x, h, w)`` of the array."""

    layer: Layer
    part: Partition
    region: tuple[int, int, int, int]


def _split(total: int, parts: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranges ``[lo, hi)`` of part *idx* when *total* is cut into *parts* near-equal parts."""
    return idx * total // parts, (idx + 1) * total // parts


def node_index(part: Partition, h: int, w: int) -> dict[str, np.ndarray]:
    """Each node of an ``h x w`` region, row by row: its row ``y`` and column ``x`` in
    the region and its part index along B, K, P, Q and C. Along each axis the split
    loops follow ``P_order``, the last fastest (as :func:`.mapspace.spacing` assumes); a loop's
    index is its row part times its column parts plus its column part. The one
    source of where a part runs, for the model and for the runs on the RTL."""
    return {d: a.copy() for d, a in _node_index(part, h, w).items()}


@functools.lru_cache(maxsize=16384)
def _node_index(part: Partition, h: int, w: int) -> dict[str, np.ndarray]:
    # shared by the placements of one LM: read-only
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    ys, xs = ys.ravel(), xs.ravel()
    out = {"y": ys, "x": xs}
    ry, rx = ys.copy(), xs.copy()
    for d in reversed(part.order):
        i = DIMS.index(d)
        hi_, wi_ = ry % part.ph[i], rx % part.pw[i]
        ry, rx = ry // part.ph[i], rx // part.pw[i]
        out[d] = hi_ * part.pw[i] + wi_
    for a in out.values():
        a.setflags(write=False)
    return out


def placement_nodes(pl: Placement) -> dict[str, np.ndarray]:
    """:func:`node_index` of *pl*'s region, ``y`` and ``x`` absolute in the array."""
    y0, x0, h, w = pl.region
    out = dict(_node_index(pl.part, h, w))
    out["y"], out["x"] = out["y"] + y0, out["x"] + x0
    return out


def owned_boxes(pl: Placement) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The output box ``[lo, hi)`` in samples, channels, rows and columns each node of
    *pl* keeps in its DRAM after the layer: its B, K, P and Q part; the C parts of one
    output split its channels among them (the partial sums are reduced onto the
    owners). With :func:`placement_nodes`; cached, read-only."""
    return _owned_boxes(pl)[:2]


@functools.lru_cache(maxsize=65536)
def _owned_boxes(pl: Placement) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray,
                                         np.ndarray]:
    lay, part = pl.layer, pl.part
    nd = placement_nodes(pl)
    n0, n1 = _split(lay.n, part.parts("b"), nd["b"])
    k0, k1 = _split(lay.k, part.parts("k"), nd["k"])
    pc = part.parts("c")
    width = k1 - k0
    c0, c1 = k0 + nd["c"] * width // pc, k0 + (nd["c"] + 1) * width // pc
    p0, p1 = _split(lay.p, part.parts("p"), nd["p"])
    q0, q1 = _split(lay.q, part.parts("q"), nd["q"])
    return _frozen(nd, _columns(n0, n1, c0, c1, p0, p1, q0, q1), 1)


def home_boxes(pl: Placement, pred: Layer, offset: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The input box of *pred*'s output each node of *pl* must hold in its own DRAM
    before the layer: its window (output rows and columns back through the stride,
    padding and kernel), its input channels (its C part; for a grouped layer its groups;
    for a layer without MACs its output channels, less *offset* for a concatenation's
    later inputs). The nodes of a K set of a layer with MACs each hold one slice of the
    set's channels; the layer's own sharing (:meth:`NodeModel.layer_cost`) gathers the
    rest. With :func:`placement_nodes`; cached, read-only."""
    return _home_boxes(pl, pred.k, offset)[:2]


@functools.lru_cache(maxsize=65536)
def _home_boxes(pl: Placement, pred_k: int, offset: int) -> tuple[dict[str, np.ndarray],
                                                                  np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    # A node's box is its samples, channels, rows and columns, each a range that depends
    # only on its part index along one loop (its channels on its K and C parts): each
    # range is found once per part index (:func:`_home_ranges`) and the nodes take theirs.
    lay, part = pl.layer, pl.part
    nd = placement_nodes(pl)
    n_, c_, r_, s_ = _home_ranges((lay.kind, lay.n, lay.c, lay.h, lay.w, lay.k, lay.p, lay.q,
                                   lay.r, lay.s, lay.stride, lay.pad, lay.groups),
                                  part.sizes, pred_k, offset)
    pc = part.parts("c")
    boxes = np.concatenate((n_[nd["b"]], c_[nd["k"] * pc + nd["c"]], r_[nd["p"]],
                            s_[nd["q"]]), axis=1)
    return _frozen(nd, boxes, 0)


@functools.lru_cache(maxsize=16384)
def _home_ranges(dims: tuple, sizes: tuple[int, ...], pred_k: int,
                 offset: int) -> tuple[np.ndarray, ...]:
    """The ranges ``[lo, hi)`` of :func:`home_boxes` of a layer of *dims* (its kind,
    ``n, c, h, w, k, p, q, r, s``, stride, padding and groups) split into *sizes*, as
    ``(parts, 2)`` arrays by part index: its samples by its B part, its channels by its
    K part times the C parts plus its C part, its rows by its P part, its columns by
    its Q part."""
    kind, n, c, h, w, k, p, q, r, s, stride, pad, groups = dims
    pb, pk, pp, pq, pc = sizes

    def split(total: int, parts: int, i: int) -> tuple[int, int]:
        return i * total // parts, (i + 1) * total // parts

    def clip(a: int, hi: int) -> int:
        return min(max(a, 0), hi)

    rows, cols = [], []
    for i in range(pp):
        p0, p1 = split(p, pp, i)
        r0 = clip(p0 * stride - pad, h)
        rows.append((r0, max(clip((p1 - 1) * stride - pad + r, h), r0)))
    for i in range(pq):
        q0, q1 = split(q, pq, i)
        s0 = clip(q0 * stride - pad, w)
        cols.append((s0, max(clip((q1 - 1) * stride - pad + s, w), s0)))
    chans = []
    for ik in range(pk):
        for ic in range(pc):
            if kind in ("conv", "fc", "matmul"):
                if groups > 1:
                    og, cg = k // groups, c // groups
                    k0, k1 = split(k, pk, ik)
                    g0, g1 = k0 // og, -(-k1 // og)
                    c0 = g0 * cg
                    c0, c1 = split(max(g1 * cg, c0) - c0, pc, ic)
                    c0, c1 = g0 * cg + c0, g0 * cg + c1
                else:
                    c0, c1 = split(c, pc, ic)
                    c0, c1 = (c0 + ik * (c1 - c0) // pk, c0 + (ik + 1) * (c1 - c0) // pk)
            else:
                c0, c1 = split(k, pk, ik)
                if kind != "add":
                    c0, c1 = c0 - offset, c1 - offset
                c0, c1 = clip(c0, pred_k), clip(c1, pred_k)
            chans.append((c0, c1))
    out = tuple(np.array(t, dtype=np.int64).reshape(-1, 2)
                for t in ([split(n, pb, i) for i in range(pb)], chans, rows, cols))
    for a in out:
        a.setflags(write=False)
    return out


def _columns(*cols: np.ndarray) -> np.ndarray:
    """``np.stack(cols, axis=1)`` of equally long 1-D arrays (the same array; numpy's
    stack checks and expands its arrays in Python, several times the cost here)."""
    return np.ascontiguousarray(np.array(cols).T)


def _frozen(nd: dict[str, np.ndarray], boxes: np.ndarray,
            axis: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The nodes and their boxes, read-only, with the boxes' lower and upper corners
    (each node's four starts, then ends) as contiguous arrays with a unit *axis* (0:
    ``(1, nodes, 4)``, 1: ``(nodes, 1, 4)``) ready to broadcast against another
    placement's."""
    shape = (1, len(boxes), 4) if axis == 0 else (len(boxes), 1, 4)
    lo = np.ascontiguousarray(boxes[:, 0::2]).reshape(shape)
    hi = np.ascontiguousarray(boxes[:, 1::2]).reshape(shape)
    for a in (*nd.values(), boxes, lo, hi):
        a.setflags(write=False)
    return nd, boxes, lo, hi


def traffic(src: Placement, dst: Placement, offset: int) -> np.ndarray:
    """Rows ``(ys, xs, yd, xd, elements)`` of *src*'s output moved to *dst*'s nodes."""
    ns, nd, amount = _amounts(src, dst, offset)
    i, j = np.nonzero((amount > 0) & ((ns["y"][:, None] != nd["y"][None, :])
                                      | (ns["x"][:, None] != nd["x"][None, :])))
    out = np.empty((len(i), 5))
    out[:, 0], out[:, 1] = ns["y"][i], ns["x"][i]
    out[:, 2], out[:, 3] = nd["y"][j], nd["x"][j]
    out[:, 4] = np.ceil(amount[i, j])
    return out


def _amounts(src: Placement, dst: Placement,
             offset: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """*src*'s and *dst*'s nodes (:func:`placement_nodes`) and the elements of *src*'s
    output each node of *src* holds of each node of *dst*'s home box (a matrix)."""
    ns, own, own_lo, own_hi = _owned_boxes(src)
    nd, home, home_lo, home_hi = _home_boxes(dst, src.layer.k, offset)
    lay = dst.layer
    if (lay.kind not in ("concat", "add") and lay.kind in ("conv", "fc", "matmul")
            and (lay.c, lay.h, lay.w) != (src.layer.k, src.layer.p, src.layer.q)):
        # a reshape (a flatten before a classifier): the consumer's channels are the
        # producer's elements of a sample in another order; each node's home is taken,
        # sample by sample, from every producer node of that sample in proportion to
        # what that node keeps
        samples = np.maximum(np.minimum(own[:, None, 1], home[None, :, 1])
                             - np.maximum(own[:, None, 0], home[None, :, 0]), 0)
        size = np.prod(np.maximum(home[:, 3::2] - home[:, 2::2], 0), axis=1)
        per = src.layer.k * src.layer.p * src.layer.q
        share = np.prod(own[:, 3::2] - own[:, 2::2], axis=1) / max(1, per)
        amount = samples * share[:, None] * size[None, :] * per / max(
            1, lay.c * lay.h * lay.w)
    else:
        # the boxes' overlaps, the four extents multiplied out (integers: exact; the
        # callers round them up with np.ceil, which makes them floats)
        ext = np.minimum(own_hi, home_hi) - np.maximum(own_lo, home_lo)
        np.maximum(ext, 0, out=ext)
        amount = np.multiply.reduce(ext, axis=2)
    return ns, nd, amount


def noc_transfer(model: NodeModel, array: tuple[int, int], rows: np.ndarray) -> tuple[int, float]:
    """(cycles, bit-hops) of moving ``rows`` = ``(ys, xs, yd, xd, bytes)`` at once over
    the mesh with XY routing by the nodes' data-sharing units (``SEND`` tasks, one DRAM
    word a message of :data:`~pimforge.rtl.nicepim.share.MESSAGE_FLITS` flits): the slower
    of the busiest sender's unit (:meth:`.node_model.NodeTiming.share_busy`: reads in
    flight, the words it receives meanwhile written to other rows, its last message's
    path included) and the busiest link, injection or ejection port in flits plus the
    pipeline of the longest path."""
    if len(rows) == 0:
        return 0, 0.0
    H, W = array
    if H * W <= PAIR_NODES:
        at = rows[:, :4].astype(np.int64)
        ys, xs, yd, xd = at.T
        flits = np.ceil(rows[:, 4] / model.word_bytes) * MESSAGE_FLITS
        pairs = np.bincount((ys * W + xs) * (H * W) + yd * W + xd, flits, (H * W) ** 2)
        return _pair_transfer(model, array, pairs, int((np.abs(ys - yd)
                                                        + np.abs(xs - xd)).max()))
    ys, xs, yd, xd = (rows[:, i].astype(np.int64) for i in range(4))
    words = np.ceil(rows[:, 4] / model.word_bytes)
    flits = words * MESSAGE_FLITS
    # link loads by difference arrays, all the mesh's lines in one: the east- or
    # westbound links of row ys between xs and xd, then the south- or northbound links
    # of column xd between ys and yd; link i of a line joins its nodes i and i + 1. Each
    # line has max(H, W) + 1 entries (its differences sum to 0: the padding stays 0).
    M = max(H, W) + 1
    line = np.concatenate((ys + H * (xd > xs), 2 * H + xd + W * (yd > ys)))
    lo = np.concatenate((np.minimum(xs, xd), np.minimum(ys, yd)))
    hi = np.concatenate((np.maximum(xs, xd), np.maximum(ys, yd)))
    both = np.concatenate((flits, flits))
    size = 2 * (H + W) * M
    diff = np.bincount(line * M + lo, both, size) - np.bincount(line * M + hi, both, size)
    load = float(np.cumsum(diff.reshape(-1, M), axis=1).max())
    # the injection ports, then the ejection ports
    per = np.bincount(np.concatenate((ys * W + xs, H * W + yd * W + xd)), both, 2 * H * W)
    port = float(per.max())
    sent, recv = per[:H * W] / MESSAGE_FLITS, per[H * W:] / MESSAGE_FLITS
    hops = np.abs(ys - yd) + np.abs(xs - xd)
    far = int(hops.max())
    unit = _units_busy(model, sent, recv, far)
    pipe = HEAD_CYCLES_PER_HOP * (far + 1) - 1
    bit_hops = float((flits * model.flit_bytes * 8 * hops).sum())
    return math.ceil(max(max(load, port) + pipe, unit)), bit_hops


def _units_busy(model: NodeModel, sent: np.ndarray, recv: np.ndarray, far: int) -> float:
    """The busiest data-sharing unit's cycles (:meth:`.node_model.NodeTiming.share_busy`)
    among nodes that send *sent* and receive *recv* messages each, the farthest *far*
    hops away. Nodes that send and receive alike keep their units equally busy: each
    pair once (and once per model: the busy cycles of a pair recur in other
    transfers)."""
    unit = 0.0
    memo = model.memo
    for s, r in dict.fromkeys(zip(sent.tolist(), recv.tolist(), strict=True)):
        key = ("share_busy", s, r, far)
        busy = memo.get(key)
        if busy is None:
            busy = memo[key] = model.timing.share_busy(s, r, far)
        if busy > unit:
            unit = busy
    return unit


#: Meshes of at most this many nodes move their flits by node pairs
#: (:func:`_pair_transfer`); larger ones row by row.
PAIR_NODES = 36


@functools.lru_cache(maxsize=16)
def _mesh(H: int, W: int) -> tuple[np.ndarray, int, np.ndarray]:
    """What a node pair's flit adds to on an ``H x W`` mesh with XY routing, as a matrix
    with a row per pair (source node, then destination node, each row by row): a
    column per link (east-, west-, south- and northbound, those of :func:`noc_transfer`'s
    lines), then each node's injection port, each node's ejection port and the pair's
    hops; with the number of links and each pair's hops."""
    links: dict[tuple, int] = {}
    rows = []
    for ys in range(H):
        for xs in range(W):
            for yd in range(H):
                for xd in range(W):
                    row = []
                    for x in range(min(xs, xd), max(xs, xd)):
                        row.append(links.setdefault(("h", ys, xd > xs, x), len(links)))
                    for y in range(min(ys, yd), max(ys, yd)):
                        row.append(links.setdefault(("v", xd, yd > ys, y), len(links)))
                    rows.append((row, ys * W + xs, yd * W + xd,
                                 abs(ys - yd) + abs(xs - xd)))
    n_links, nodes = len(links), H * W
    m = np.zeros((len(rows), n_links + 2 * nodes + 1))
    hops = np.empty(len(rows), dtype=np.int64)
    for p, (row, s, d, h) in enumerate(rows):
        m[p, row] = 1.0
        m[p, n_links + s] = m[p, n_links + nodes + d] = 1.0
        m[p, -1] = hops[p] = h
    for a in (m, hops):
        a.setflags(write=False)
    return m, n_links, hops


def _pair_transfer(model: NodeModel, array: tuple[int, int], pairs: np.ndarray,
                   far: int) -> tuple[int, float]:
    """:func:`noc_transfer` of the flits *pairs* moved between each pair of nodes
    (:func:`_mesh`'s order; the farthest of them *far* hops): every load a sum of whole
    flits, so the same numbers as summing them row by row."""
    H, W = array
    m, n_links, _ = _mesh(H, W)
    v = pairs @ m
    load = max(float(v[:n_links].max()), 0.0) if n_links else 0.0
    per = v[n_links:-1]
    port = float(per.max())
    sent, recv = per[:H * W] / MESSAGE_FLITS, per[H * W:] / MESSAGE_FLITS
    unit = _units_busy(model, sent, recv, far)
    pipe = HEAD_CYCLES_PER_HOP * (far + 1) - 1
    bit_hops = float(v[-1] * (model.flit_bytes * 8))
    return math.ceil(max(max(load, port) + pipe, unit)), bit_hops


def _moved(preds: Sequence[Placement], lay: Layer) -> list[tuple[Placement, int]]:
    """The predecessors whose outputs move into *lay*, each with its channel offset
    (the network's input and an attention product's shared operand move nowhere)."""
    moved = []
    offset = 0
    for src in preds:
        if not (src.layer.kind == "input" or src.layer.name == lay.operand):
            moved.append((src, offset))
        offset += src.layer.k
    return moved


def _memo_key(array: tuple[int, int], lay: Layer, region,
              moved: list[tuple[Placement, int]]) -> tuple[tuple, tuple]:
    """The parts of :func:`redistribution`'s memo key before and after *lay*'s LM: the
    key is ``(*head, part, *tail)``."""
    return (("redistribution", tuple(array), layer_shape(lay)),
            (tuple(region), tuple((layer_shape(src.layer), src.part, tuple(src.region), off)
                                  for src, off in moved)))


def redistribution(model: NodeModel, array: tuple[int, int], preds: Sequence[Placement],
                   dst: Placement) -> tuple[int, float]:
    """(cycles, bit-hops) of bringing the outputs of *preds* from where their LMs left
    them to where *dst*'s LM needs them (all predecessors' transfers at once); the
    second operand of an attention product is shared by the layer's own model, and the
    network's input is placed where the first layer needs it.

    Memoized in ``model.memo`` by the layers' shapes (:func:`.mapspace.layer_shape`),
    LMs and regions, which is all the movement depends on, and the NoC transfer by
    its rows (on a mesh of at most :data:`PAIR_NODES` nodes by the flits it moves
    between each pair of nodes, :func:`_pair_redistribution`)."""
    moved = _moved(preds, dst.layer)
    if not moved:
        return 0, 0.0
    head, tail = _memo_key(array, dst.layer, dst.region, moved)
    key = (*head, dst.part, *tail)
    got = model.memo.get(key)
    if got is None and array[0] * array[1] <= PAIR_NODES:
        got = model.memo[key] = _pair_redistribution(model, array, moved, dst)
    if got is None:
        rows = []
        for src, off in moved:
            t = traffic(src, dst, off)
            t[:, 4] *= DATA_BITS / 8
            rows.append(t)
        rows = np.concatenate(rows)
        # the same transfers recur under other LMs (a third of them in GoogLeNet)
        tkey = ("noc_transfer", tuple(array), rows.shape, rows.tobytes())
        got = model.memo.get(tkey)
        if got is None:
            got = model.memo[tkey] = noc_transfer(model, array, rows)
        model.memo[key] = got
    return got


def redistributions(model: NodeModel, array: tuple[int, int], preds: Sequence[Placement],
                    lay: Layer, region: tuple[int, int, int, int]):
    """:func:`redistribution` into *lay* on *region* as a function of its LM, for a search
    that weighs many LMs of one layer against the same *preds*: the memo's key is made
    from the parts that do not depend on the LM once, and a placement only for an LM
    whose movement is not memoized yet. The same numbers, the same memo entries."""
    moved = _moved(preds, lay)
    if not moved:
        return lambda part: (0, 0.0)
    region = tuple(region)
    head, tail = _memo_key(array, lay, region, moved)
    memo = model.memo

    def move(part: Partition) -> tuple[int, float]:
        got = memo.get((*head, part, *tail))
        if got is None:
            got = redistribution(model, array, preds, Placement(lay, part, region))
        return got

    return move


def _pair_redistribution(model: NodeModel, array: tuple[int, int],
                         moved: list[tuple[Placement, int]], dst: Placement) -> tuple[int, float]:
    """:func:`redistribution`'s transfer on a small mesh: the flits of :func:`traffic`'s
    rows summed by node pair (:func:`_pair_transfer`) without making the rows (each
    row's elements, bytes, words and flits rounded as there); memoized by the pairs'
    flits, which is all the transfer depends on."""
    H, W = array
    nodes = H * W
    pairs = None
    for src, off in moved:
        _, _, amount = _amounts(src, dst, off)
        flits = np.ceil(np.ceil(amount) * (DATA_BITS / 8) / model.word_bytes) * MESSAGE_FLITS
        got = np.bincount(_pair_bins(src.part, src.region, dst.part, dst.region, (H, W)),
                          flits.ravel(), nodes * nodes + 1)
        pairs = got if pairs is None else pairs + got
    assert pairs is not None
    pairs = pairs[:-1]          # (the bin of the flits that stay on their node)
    if not pairs.any():         # (flits are never negative)
        return 0, 0.0
    tkey = ("pair_transfer", tuple(array), pairs.tobytes())
    got = model.memo.get(tkey)
    if got is None:
        far = int(_mesh(H, W)[2][pairs > 0].max())
        got = model.memo[tkey] = _pair_transfer(model, array, pairs, far)
    return got


@functools.lru_cache(maxsize=65536)
def _pair_bins(src_part: Partition, src_region: tuple, dst_part: Partition,
               dst_region: tuple, array: tuple[int, int]) -> np.ndarray:
    """The node pair (:func:`_mesh`'s order) of each sending node of *src_part* on
    *src_region* and receiving node of *dst_part* on *dst_region* of *array*, in the
    order of :func:`_amounts`' matrix flattened; a node's pair with itself (nothing
    moves) is the one past the last pair. Read-only."""
    H, W = array
    s_at = _node_at(src_part, src_region, W)
    d_at = _node_at(dst_part, dst_region, W)
    bins = s_at[:, None] * (H * W) + d_at[None, :]
    bins[s_at[:, None] == d_at[None, :]] = (H * W) ** 2
    bins = bins.ravel()
    bins.setflags(write=False)
    return bins


def _node_at(part: Partition, region: tuple, W: int) -> np.ndarray:
    """Each node's index ``y * W + x`` in the array, row by row."""
    y0, x0, h, w = region
    nd = _node_index(part, h, w)
    return (nd["y"] + y0) * W + nd["x"] + x0
