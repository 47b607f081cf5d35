"""A NicePIM network end to end: mapped, lowered to node task lists and run on the array RTL.

:func:`scale_network` shrinks a network of :mod:`.networks` by ``S``: the input's
height and width and every layer's channel count are divided by ``S`` (rounded up,
at least 1); kernels, strides, padding and the graph are kept and every shape is
derived again. For BERT that is the sequence (128 / S) and the hidden, head and
feed-forward sizes (768 / S, 64 / S, 3072 / S) with the 12 heads kept.

:func:`run_network` maps the (scaled) network with PIM-Mapper or the baseline on the
config's array and runs every layer with MACs (conv, fc, matmul: a matmul is a 1x1
convolution over the tokens) on the Verilated array, layer by layer: each node of the
layer's region gets its part of the mapping's partition (its K, P, Q and C slices;
its input window with the halo, clipped to the image, in the layer's input layout;
its weights; its output in the layer's output layout; :mod:`.node_jobs`) and the
nodes run their task lists at once. What the host does, stated:

* it places each node's input window and weights in the node's DRAM before the
  layer and reads the raw 32-bit outputs back after it (the data sharing of the
  Data-Scheduler is not run here; the cost model's sharing cycles are reported
  beside the node cycles);
* it adds the partial sums of a layer split over its input channels (C): the node
  has no adder for tensors in DRAM (its engine accumulates only in its own output
  buffer). The partial sums do travel on the RTL: after the layer, every node of a C
  set sends its raw output over the NoC (``SEND``) into the DRAM of the set's first
  node, which waits for them (``WAIT``); the host reads them there
  (``gather_cycles_rtl``: that run's cycles, the slowest node);
* it applies each layer's post-operations (the node has no activation unit):
  batch normalization is taken as folded into the weights (the identity here),
  ReLU, leaky ReLU with slope 1/8, BERT's attention scale (a right shift by
  ``log2 sqrt(d_head)`` when that is whole, else 3), GELU and tanh as integer
  stand-ins (ReLU; a clip to +-127), then requantizes to 16 bits by a right shift
  that brings the largest magnitude below 128 (so that the next layer's 32-bit sums
  never overflow);
* it runs the layers without MACs in numpy: max and average pools (the average
  floored), additions, concatenations, and for BERT integer stand-ins of the
  embedding (a random table), layer normalization (the mean subtracted) and
  softmax (``clip(x - max + 127, 0, 127)`` per token).

Every layer's raw accumulations are checked against numpy (int64, wrapped to 32 bits)
bit for bit; per layer the RTL's cycles (the slowest node of the region, its counters
summed over the pieces of its task list) stand beside the cost model's
(:func:`~.node_model.part_cost` of each node's part). At ``S = 1`` nothing runs: the
mapper's modelled cycles of every layer are reported, labelled as the model.

A model with its own float parameters (:class:`FloatParams`, an imported ONNX model:
:mod:`.onnx_import`) runs the same way at its own size, its input and weights quantized
per tensor instead of drawn at random and its biases added by the host before the
post-operations (a ``bias`` post-operation); :func:`run_network` says how.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.args import WavesWindow
from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.params import DATA_BITS, Layout
from pimforge.verif.models.nicepim import conv2d, wrap32

from .mapper import (
    E_BUF_PJ_PER_BIT,
    E_MAC_PJ,
    Mapping,
    NodeModel,
    baseline_map,
    map_network,
    node_index,
    parse_partition,
)
from .networks import Layer, Network, NetworkError
from .node_jobs import NodeJob, run_jobs
from .tiling import ConvPart

__all__ = ["COMPUTE", "QMAX", "DnnRun", "FloatParams", "LayerRun", "map_scaled", "node_parts",
           "quantize", "run_network", "scale_network"]

#: Layers that run on the array (the rest run on the host).
COMPUTE = ("conv", "fc", "matmul")
_DIMS = ("k", "p", "q", "c")         # the loops a run of one sample splits
#: Value ranges of the random input and weights.
INPUT_RANGE = (-128, 128)
WEIGHT_RANGE = (-8, 8)
#: The largest magnitude of a quantized weight or input (a model's own parameters).
QMAX = 127


@dataclass(frozen=True)
class FloatParams:
    """A model's own float parameters (an imported ONNX model): ``weights[layer]``
    ``[K, C/groups, R, S]`` and ``biases[layer]`` ``[K]`` of its conv and fc layers (BN
    folded), its ``input`` ``[C, H, W]`` (``None`` until the caller draws it), and which
    layer makes each of the model's ``outputs`` (ONNX tensor name -> layer)."""

    weights: dict
    biases: dict
    input: np.ndarray | None = None
    outputs: dict = field(default_factory=dict)


def quantize(x: np.ndarray) -> tuple[np.ndarray, float]:
    """*x* symmetric per tensor: ``round(x / scale)`` in ``[-QMAX, QMAX]`` with ``scale =
    max|x| / QMAX`` (1 for an all-zero tensor), and the scale."""
    x = np.asarray(x, dtype=np.float64)
    top = float(np.abs(x).max()) if x.size else 0.0
    scale = top / QMAX if top > 0 else 1.0
    return np.clip(np.rint(x / scale), -QMAX, QMAX).astype(np.int64), scale


# ---- scaling -----------------------------------------------------------------------------------

def _div(x: int, s: int) -> int:
    return max(1, -(-x // s))


def _pool_out(x: int, r: int, stride: int, pad: int, ceil: bool) -> int:
    num = x + 2 * pad - r
    o = (-(-num // stride) if ceil else num // stride) + 1
    if ceil and (o - 1) * stride >= x + pad:
        o -= 1
    return o


def scale_network(net: Network, s: int, layers: int | None = None) -> Network:
    """*net* with its input's height and width and every channel count divided by *s*
    (see the module docstring), cut after its first *layers* layers (after the input)
    when given.

    Raises
    ------
    NetworkError
        A window no longer fits its input, or BERT's heads no longer divide its sizes.
    """
    src = list(net.layers if layers is None else net.layers[:layers + 1])
    out: dict[str, Layer] = {}
    shape: dict[str, tuple[int, int, int]] = {}

    def fail(lay, why):
        raise NetworkError(f"{net.name} at scale {s}: layer {lay.name}: {why}; use a smaller "
                           "--scale")

    for lay in src:
        if lay.kind == "input":
            new = dataclasses.replace(lay, c=_div(lay.c, s), h=_div(lay.h, s), w=_div(lay.w, s),
                                      k=_div(lay.k, s), p=_div(lay.p, s), q=_div(lay.q, s))
            out[lay.name] = new
            shape[lay.name] = (new.k, new.p, new.q)
            continue
        c, h, w = shape[lay.preds[0]]
        orig_pred = net.by_name[lay.preds[0]]
        kw: dict = {"c": c, "h": h, "w": w}
        if lay.kind == "conv":
            p = (h + 2 * lay.pad - lay.r) // lay.stride + 1
            q = (w + 2 * lay.pad - lay.s) // lay.stride + 1
            if p < 1 or q < 1:
                fail(lay, f"its {lay.r}x{lay.s} window does not fit a {h}x{w} input")
            kw |= {"k": _div(lay.k, s), "p": p, "q": q}
        elif lay.kind == "fc":
            if lay.h == lay.w == 1:             # on the flattened input
                kw |= {"c": c * h * w, "h": 1, "w": 1, "k": _div(lay.k, s), "p": 1, "q": 1}
            else:
                kw |= {"k": _div(lay.k, s), "p": h, "q": w}
        elif lay.kind == "matmul":
            # softmax(.) V makes the operand's channels; Q K^T one channel per token and head
            k = shape[lay.operand][0] if lay.k == net.by_name[lay.operand].k else \
                lay.groups * h
            if c % lay.groups or k % lay.groups:
                fail(lay, f"its {lay.groups} heads do not divide {c} and {k} channels")
            kw |= {"k": k, "p": h, "q": w}
        elif lay.kind in ("maxpool", "avgpool"):
            if lay.r == orig_pred.p and lay.s == orig_pred.q and lay.p == lay.q == 1:
                kw |= {"k": c, "p": 1, "q": 1, "r": h, "s": w}          # a global pool
            else:
                # GoogLeNet's pools are all ceil-mode (torchvision); elsewhere the mode
                # shows where the full-size output differs from the floor formula's
                ceil = net.name == "googlenet" or \
                    lay.p != (orig_pred.p + 2 * lay.pad - lay.r) // lay.stride + 1
                p, q = (_pool_out(x, lay.r, lay.stride, lay.pad, ceil) for x in (h, w))
                if p < 1 or q < 1 or not ceil and (lay.r > h + 2 * lay.pad
                                                   or lay.s > w + 2 * lay.pad):
                    fail(lay, f"its {lay.r}x{lay.s} window does not fit a {h}x{w} input")
                kw |= {"k": c, "p": p, "q": q}
        elif lay.kind == "add":
            if len({shape[x] for x in lay.preds}) != 1:
                fail(lay, "its inputs no longer have one shape")
            kw |= {"k": c, "p": h, "q": w}
        elif lay.kind == "concat":
            kw |= {"k": sum(shape[x][0] for x in lay.preds), "p": h, "q": w}
        elif lay.kind == "embed":
            kw |= {"k": _div(lay.k, s), "p": h, "q": w}
        elif lay.kind == "select":
            kw |= {"k": c, "p": 1, "q": 1}
        else:                                   # softmax, layernorm
            kw |= {"k": c, "p": h, "q": w}
        new = dataclasses.replace(lay, **kw)
        out[lay.name] = new
        shape[lay.name] = (new.k, new.p, new.q)
    doc = (f"{net.name} scaled by {s}: input {src[0].c}x{src[0].h}x{src[0].w} -> "
           f"{out['input'].c}x{out['input'].h}x{out['input'].w}, channels / {s}"
           + (f", first {layers} layers" if layers is not None else ""))
    return Network(f"{net.name}", tuple(out.values()), doc)


# ---- the mapping's node parts --------------------------------------------------------------------

def _split(total: int, parts: int, i: int) -> tuple[int, int]:
    return i * total // parts, (i + 1) * total // parts


@dataclass(frozen=True)
class NodePart:
    """A node's slices of a layer: node id, output channels, rows, columns, and input
    channels (within each group for a grouped layer), and its groups."""

    node: int
    k: tuple[int, int]
    p: tuple[int, int]
    q: tuple[int, int]
    c: tuple[int, int]
    g: tuple[int, int]


def node_parts(lay: Layer, region, partition: str, na_cols: int) -> list[NodePart]:
    """Every node of *region* ``(y, x, h, w)`` with its part of *lay* under *partition*
    (``"K2x1 C1x2"``...), laid out as the mapper lays it (:func:`.mapper.node_index`);
    a loop is cut into near-equal parts ``[i T / n, (i + 1) T / n)``. A grouped
    layer's K parts are whole groups and its C parts slice each group's channels.
    Nodes whose part is empty are left out.

    Raises
    ------
    NetworkError
        The partition splits the batch (the runs here are of one sample)."""
    part = parse_partition(partition)
    if part.parts("b") > 1 or lay.n > 1:
        raise NetworkError(f"layer {lay.name}: the RTL runs one sample, not a batch of "
                           f"{lay.n} split {part.parts('b')} ways; map the network at batch 1")
    y0, x0, h, w = region
    nd = node_index(part, h, w)
    n = {d: part.parts(d) for d in _DIMS}
    G = lay.groups
    out = []
    for j in range(h * w):
        idx = {d: int(nd[d][j]) for d in _DIMS}
        if G > 1:
            g = _split(G, n["k"], idx["k"])
            og = lay.k // G
            k = (g[0] * og, g[1] * og)
            c = _split(lay.c // G, n["c"], idx["c"])
        else:
            g = (0, 1)
            k = _split(lay.k, n["k"], idx["k"])
            c = _split(lay.c, n["c"], idx["c"])
        p, q = _split(lay.p, n["p"], idx["p"]), _split(lay.q, n["q"], idx["q"])
        if min(k[1] - k[0], p[1] - p[0], q[1] - q[0], c[1] - c[0], g[1] - g[0]) <= 0:
            continue
        out.append(NodePart((y0 + int(nd["y"][j])) * na_cols + x0 + int(nd["x"][j]),
                            k, p, q, c, g))
    return out


# ---- host operations ---------------------------------------------------------------------------

def _requant(y: np.ndarray) -> tuple[np.ndarray, int]:
    """*y* shifted right so that its largest magnitude is below 128, and the shift."""
    top = int(np.abs(y).max()) if y.size else 0
    shift = max(0, top.bit_length() - 7)
    return np.clip(y >> shift, -32768, 32767).astype(np.int64), shift


def _post(lay: Layer, y: np.ndarray, d_head: int,
          bias: np.ndarray | None = None) -> tuple[np.ndarray, list[dict]]:
    ops: list[dict] = []
    y = np.asarray(y, dtype=np.int64)
    if bias is not None:
        y = y + bias.reshape(-1, 1, 1)
        ops.append({"op": "bias", "values": [int(v) for v in bias]})
    for op in lay.post:
        if op == "bn":
            ops.append({"op": "bn", "as": "identity (folded into the weights)"})
        elif op in ("relu", "gelu"):
            y = np.maximum(y, 0)
            ops.append({"op": op, "as": "relu"})
        elif op == "leaky":
            y = np.where(y < 0, y >> 3, y)
            ops.append({"op": "leaky", "as": "x < 0: x >> 3 (slope 1/8)"})
        elif op == "scale":
            sh = int(math.log2(math.sqrt(d_head))) if d_head > 1 and \
                math.sqrt(d_head).is_integer() and math.log2(math.sqrt(d_head)).is_integer() \
                else 3
            y = y >> sh
            ops.append({"op": "scale", "as": f">> {sh}"})
        elif op == "tanh":
            ops.append({"op": "tanh", "as": "clip to +-127 after the requantization"})
    y, shift = _requant(y)
    ops.append({"op": "requantize", "shift": shift, "clip": [-32768, 32767]})
    if "tanh" in lay.post:
        y = np.clip(y, -127, 127)
    return y, ops


def _pool(lay: Layer, x: np.ndarray) -> np.ndarray:
    c, h, w = x.shape
    big = np.iinfo(np.int64).min if lay.kind == "maxpool" else 0
    ph = max(0, (lay.p - 1) * lay.stride + lay.r - h - lay.pad)
    pw = max(0, (lay.q - 1) * lay.stride + lay.s - w - lay.pad)
    xp = np.pad(x, ((0, 0), (lay.pad, ph), (lay.pad, pw)), constant_values=big)
    ones = np.pad(np.ones((h, w), dtype=np.int64), ((lay.pad, ph), (lay.pad, pw)))
    acc = np.full((c, lay.p, lay.q), big, dtype=np.int64) if lay.kind == "maxpool" \
        else np.zeros((c, lay.p, lay.q), dtype=np.int64)
    cnt = np.zeros((lay.p, lay.q), dtype=np.int64)
    for u in range(lay.r):
        for v in range(lay.s):
            sl = (slice(u, u + lay.stride * (lay.p - 1) + 1, lay.stride),
                  slice(v, v + lay.stride * (lay.q - 1) + 1, lay.stride))
            win = xp[(slice(None), *sl)]
            acc = np.maximum(acc, win) if lay.kind == "maxpool" else acc + win
            cnt += ones[sl]
    return acc if lay.kind == "maxpool" else np.floor_divide(acc, np.maximum(cnt, 1))


def _host(lay: Layer, ins: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """The raw result (before post-operations) of a layer without MACs, ``[K, P, Q]``."""
    x = ins[0]
    if lay.kind in ("maxpool", "avgpool"):
        return _pool(lay, x)
    if lay.kind == "add":
        return sum(ins[1:], ins[0].astype(np.int64))
    if lay.kind == "concat":
        return np.concatenate(ins)
    if lay.kind == "embed":
        return rng.integers(*INPUT_RANGE, (lay.k, lay.p, lay.q))
    if lay.kind == "select":
        return x[:, :1, :1]
    if lay.kind == "layernorm":
        return x - np.floor_divide(x.sum(axis=0, keepdims=True), x.shape[0])
    if lay.kind == "softmax":
        return np.clip(x - x.max(axis=0, keepdims=True) + 127, 0, 127)
    raise NetworkError(f"layer {lay.name}: no host operation for kind {lay.kind!r}")


def _weights(lay: Layer, ins: list[np.ndarray], names: list[str],
             rng: np.random.Generator) -> np.ndarray:
    """``[K, C / groups, R, S]``: random for conv and fc; an attention product's other
    operand (BERT: ``Q K^T`` takes K's channels of a head as its weights' input channels
    and the tokens as its output channels; ``softmax(.) V`` the reverse)."""
    if lay.kind != "matmul":
        return rng.integers(*WEIGHT_RANGE, (lay.k, lay.c // lay.groups, lay.r, lay.s))
    op = ins[names.index(lay.operand)][:, :, 0]          # [channels, tokens]
    G = lay.groups
    if lay.k == op.shape[0]:                             # softmax(.) V: K = d, C = heads * seq
        return op.reshape(lay.k, lay.c // G, 1, 1)
    dh, seq = op.shape[0] // G, op.shape[1]              # Q K^T: K = heads * seq, C = d
    w = op.reshape(G, dh, seq).transpose(0, 2, 1)        # [head, token, channel]
    return w.reshape(G * seq, dh, 1, 1)


# ---- the run -------------------------------------------------------------------------------------

@dataclass
class LayerRun:
    """One layer of a run (its JSON form is :meth:`to_json`)."""

    name: str
    kind: str
    runs_on: str
    input_shape: list
    output_shape: list
    weight_shape: list | None
    stride: int
    padding: int
    groups: int
    preds: list = field(default_factory=list)
    region: list | None = None
    partition: str = ""
    layout_in: str = "NCHW"
    layout_out: str = "NCHW"
    post: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    cycles_rtl: int | None = None
    cycles_model: float | None = None
    share_cycles_model: float | None = None
    gather_cycles_rtl: int = 0
    gather_words: int = 0
    matches_reference: bool | None = None
    macs: int = 0
    dram_words_rtl: int | None = None
    energy_pj_rtl: float | None = None
    energy_pj_model: float | None = None
    quant: dict | None = None
    input: np.ndarray | None = None
    weight: np.ndarray | None = None
    output: np.ndarray | None = None

    @property
    def error(self) -> float | None:
        if self.cycles_rtl and self.cycles_model is not None:
            return self.cycles_model / self.cycles_rtl - 1
        return None

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("input", "weight", "output")}
        d["model_error"] = self.error
        return d


@dataclass
class DnnRun:
    """A network's run: its mapping, every layer, and the totals."""

    network: str
    scaled: str
    scale: int
    engine: str
    mapping: Mapping
    layers: list[LayerRun]
    totals: dict
    #: With a model's own parameters: its outputs' layers, dequantized (``y * scale``).
    dequantized: dict = field(default_factory=dict)


def _energy(cfg, perf: dict, macs: int, outputs: int) -> float:
    """pJ of a layer from the RTL's counters at the model's per-event energies."""
    n = cfg.nicepim
    words = sum(p["dram_rd"] + p["dram_wr"] for p in perf)
    flits = sum(p["flits_out"] for p in perf)
    return (macs * E_MAC_PJ + words * n.node_bank_bits * n.dram_pj_per_bit
            + flits * n.flit_bits * n.noc_pj_per_bit_hop
            + (macs * 2 * DATA_BITS + outputs * 32) * E_BUF_PJ_PER_BIT)


def _layouts(m: Mapping) -> dict[str, int]:
    if m.mapper.startswith("baseline"):
        lo = Layout[m.mapper.split("(")[1].rstrip(")")]
        return {}.fromkeys(m.layers, lo) | {"input": lo}
    return {k: Layout[v] for k, v in m.layouts.items()}


def map_scaled(net: Network, cfg, mapper: str = "nicepim", scale: int = 1):
    """*net* (already scaled by *scale*) mapped on *cfg* by PIM-Mapper or the baseline; a
    mapping that does not fit is a one-line error that says what to change."""
    try:
        return baseline_map(net, cfg) if mapper == "baseline" else map_network(net, cfg)
    except CapacityError as err:
        hint = "; use a larger --scale or a config with more DRAM" if scale > 1 else ""
        raise CapacityError(f"mapping {net.doc} on {cfg.name}: {err}{hint}") from None


def run_network(net: Network, cfg, *, mapper: str = "nicepim", scale: int = 1, seed: int = 1,
                exe=None, keep: bool = False, progress=None, mapping=None,
                params: FloatParams | None = None, rtl: bool | None = None,
                waves: WavesWindow | None = None, waves_layer: str | None = None) -> DnnRun:
    """Map *net* (already scaled) on *cfg* and run it (module docstring). *keep*: keep every
    layer's input, weights and raw output (for a dump). ``scale == 1``: the model only,
    unless *rtl* says otherwise. *mapping*: :func:`map_scaled`'s result, when the caller
    mapped it already. *waves*: the array's waves of the layer *waves_layer* (default: the
    first layer with MACs), its first run (*exe* must then be a trace build).

    *params*: the model's own float parameters and input instead of random integers,
    quantized per tensor (:func:`quantize`): the input and each layer's weights to
    ``[-QMAX, QMAX]``, a bias to ``round(b / (s_in s_w))`` added in 64 bits before the
    post-operations; a tensor's scale follows it (times ``2^shift`` at each
    requantization), and an addition or concatenation first brings its inputs to the
    largest of their scales (``round(x s / s_max)``). Each layer's ``quant`` records the
    scales."""
    m = mapping if mapping is not None else map_scaled(net, cfg, mapper, scale)
    layouts = _layouts(m)
    rtl = scale > 1 if rtl is None else rtl
    scales: dict[str, float] = {}
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    model = NodeModel(cfg)
    runs: list[LayerRun] = []
    d_head = 64                 # BERT's head size: Q K^T's channels per head
    for lay in net.layers:
        if lay.kind == "matmul" and net.by_name[lay.operand].k != lay.k:
            d_head = lay.c // lay.groups
    for lay in net.layers:
        info = m.layers.get(lay.name, {})
        lo_in = layouts.get(lay.preds[0], Layout.NCHW) if lay.preds else Layout.NCHW
        lo_out = layouts.get(lay.name, Layout.NCHW)
        if lay.kind == "input":
            if rtl and params is not None:
                tensors[lay.name], scales[lay.name] = quantize(params.input)
            elif rtl:
                tensors[lay.name] = rng.integers(*INPUT_RANGE, (lay.c, lay.h, lay.w))
            continue
        compute = lay.kind in COMPUTE
        lr = LayerRun(
            name=lay.name, kind=lay.kind,
            runs_on=("rtl" if compute else "host") if rtl else "model",
            input_shape=[1, lay.c, lay.h, lay.w], output_shape=[1, lay.k, lay.p, lay.q],
            weight_shape=[lay.k, lay.c // lay.groups, lay.r, lay.s] if compute else None,
            stride=lay.stride, padding=lay.pad, groups=lay.groups, preds=list(lay.preds),
            region=info.get("region"), partition=info.get("partition", ""),
            layout_in=Layout(lo_in).name, layout_out=Layout(lo_out).name, macs=lay.macs)
        if progress:
            progress(lay.name)
        if not rtl:
            lr.cycles_model = info.get("cycles")
            lr.post = [{"op": op} for op in lay.post]
            runs.append(lr)
            continue
        ins = [tensors[p] for p in lay.preds]
        bias = None
        if params is not None:
            ins, bias, w, lr.quant = _quant_in(lay, ins, scales, params)
        x = ins[0]
        if compute and x.shape != (lay.c, lay.h, lay.w):
            x = x.reshape(lay.c, lay.h, lay.w)        # a flatten before a classifier
        if compute:
            if params is None:
                w = _weights(lay, ins, list(lay.preds), rng)
            traced = waves if waves_layer in (None, lay.name) else None
            raw = _run_layer(cfg, lay, x, w, info, lo_in, lo_out, exe, lr, traced)
            if traced is not None:
                waves = None
            ref = wrap32(conv2d(x, w, stride=lay.stride, pad=lay.pad, groups=lay.groups))
            lr.matches_reference = bool(np.array_equal(raw, ref))
            cost = model.layer_cost(lay, parse_partition(info["partition"]),
                                    info.get("wr", 1), lo_in, lo_out)
            lr.share_cycles_model = cost.share
            lr.energy_pj_model = cost.energy_pj * max(1, len(lr.nodes))
        else:
            w = None
            raw = _host(lay, ins, rng)
        y, lr.post = _post(lay, raw, d_head, bias)
        tensors[lay.name] = y
        if params is not None:
            scales[lay.name] = lr.quant["output_scale"] = \
                lr.quant["raw_scale"] * 2.0 ** lr.post[-1]["shift"]
        if keep:
            lr.input, lr.weight, lr.output = x, w, raw
        runs.append(lr)
    deq = {} if params is None else {
        name: tensors[name] * scales[name] for name in params.outputs.values()
        if name in tensors}
    return DnnRun(net.name, net.doc, scale, "rtl" if rtl else "model", m, runs,
                  _totals(m, runs, rtl), deq)


def _quant_in(lay: Layer, ins: list[np.ndarray], scales: dict[str, float],
              params: FloatParams) -> tuple[list, np.ndarray | None, np.ndarray | None, dict]:
    """A layer's inputs brought to one scale, its quantized bias and weights, and its
    ``quant`` record (the raw result's scale; :func:`run_network`)."""
    sc = [scales[p] for p in lay.preds]
    q: dict = {"input_scales": sc}
    if lay.kind in ("add", "concat") and len(set(sc)) > 1:
        top = max(sc)
        q["input_factors"] = [s / top for s in sc]
        ins = [np.rint(x * (s / top)).astype(np.int64) for x, s in zip(ins, sc, strict=True)]
        sc = [top] * len(sc)
    if lay.kind not in COMPUTE:
        q["raw_scale"] = sc[0]
        return ins, None, None, q
    w, sw = quantize(params.weights[lay.name])
    q["weight_scale"] = sw
    q["raw_scale"] = sc[0] * sw
    b = params.biases.get(lay.name)
    bias = None if b is None else np.rint(np.asarray(b, dtype=np.float64)
                                          / q["raw_scale"]).astype(np.int64)
    return ins, bias, w, q


def _run_layer(cfg, lay: Layer, x: np.ndarray, w: np.ndarray, info: dict, lo_in: int,
               lo_out: int, exe, lr: LayerRun,
               waves: WavesWindow | None = None) -> np.ndarray:
    """Run *lay*'s node parts on the array; its assembled raw output ``[K, P, Q]``."""
    n = cfg.nicepim
    parts = node_parts(lay, info["region"], info["partition"], n.na_cols)
    G = lay.groups
    cg = lay.c // G
    jobs = {}
    for np_ in parts:
        g0, g1 = np_.g
        if G > 1:
            chans = np.concatenate([g * cg + np.arange(*np_.c) for g in range(g0, g1)])
            wk = w[np_.k[0]:np_.k[1], np_.c[0]:np_.c[1]]
            groups = g1 - g0
        else:
            chans = np.arange(*np_.c)
            wk = w[np_.k[0]:np_.k[1], np_.c[0]:np_.c[1]]
            groups = 1
        part = ConvPart(c=len(chans), k=np_.k[1] - np_.k[0], h=lay.h, w=lay.w, r=lay.r,
                        s=lay.s, stride=lay.stride, pad=lay.pad, groups=groups, rows=np_.p,
                        cols=np_.q)
        (a, b), (e, f) = part.x_rows, part.x_cols
        jobs[np_.node] = NodeJob(part, x[chans][:, a:b, e:f], wk, lo_in, lo_out)
    # the C parts of one output slice: the first receives the others' partial sums
    sets: dict[tuple, list[int]] = {}
    for np_ in parts:
        sets.setdefault((np_.k, np_.p, np_.q, np_.g), []).append(np_.node)
    gather = {nodes[0]: nodes[1:] for nodes in sets.values() if len(nodes) > 1}
    try:
        res = run_jobs(cfg, jobs, exe=exe, gather=gather, waves=waves)
    except CapacityError as err:
        raise CapacityError(f"layer {lay.name}: {err}") from None
    out = np.zeros((lay.k, lay.p, lay.q), dtype=np.int64)
    perf = []
    for np_ in parts:
        r = res[np_.node]
        out[np_.k[0]:np_.k[1], np_.p[0]:np_.p[1], np_.q[0]:np_.q[1]] += r.out
        perf += [r.perf, r.gather_perf] if gather else [r.perf]
        lr.nodes.append({
            "node": np_.node, "k": list(np_.k), "p": list(np_.p), "q": list(np_.q),
            "c": list(np_.c), "groups": list(np_.g), "tasks": r.tasks,
            "task_list_pieces": r.pieces, "cycles_rtl": r.perf["cycles"],
            "cycles_model": r.model.cycles, "engine_busy_rtl": r.perf["eng_busy"],
            "dma_busy_rtl": r.perf["dma_busy"], "dram_words_rtl": r.perf["dma_rd"]
            + r.perf["dma_wr"], "dram_words_model": r.model.words_rd + r.model.words_wr,
            "dram_act_rtl": r.perf["dram_act"],
            "gather_cycles_rtl": r.gather_perf["cycles"] if gather else 0,
            "gather_words_sent": r.gather_perf["sent"] if gather else 0})
    lr.cycles_rtl = max(p["cycles_rtl"] for p in lr.nodes)
    if gather:
        lr.gather_cycles_rtl = max(p["gather_cycles_rtl"] for p in lr.nodes)
        lr.gather_words = sum(p["gather_words_sent"] for p in lr.nodes)
    lr.cycles_model = max(p["cycles_model"] for p in lr.nodes)
    lr.dram_words_rtl = sum(p["dram_words_rtl"] for p in lr.nodes)
    lr.energy_pj_rtl = _energy(cfg, perf, lay.macs, lay.k * lay.p * lay.q)
    return wrap32(out)


def _totals(m: Mapping, runs: list[LayerRun], rtl: bool) -> dict:
    """Network totals under the mapping's schedule: segments one after the other, the
    regions of a segment side by side (a segment takes its slowest region)."""
    by = {r.name: r for r in runs}
    # the baseline runs every layer on the whole array in turn (it records no segments)
    segments = m.segments or [{"layers": [[r.name]]} for r in runs]

    def total(key):
        t = 0.0
        for seg in segments:
            t += max((sum(getattr(by[x], key) or 0 for x in names if x in by)
                      for names in seg["layers"]), default=0)
        return t

    out = {"layers_rtl": sum(r.runs_on == "rtl" for r in runs),
           "layers_host": sum(r.runs_on == "host" for r in runs),
           "macs": sum(r.macs for r in runs),
           "mapper_latency_cycles_model": m.latency_cycles,
           "mapper_energy_pj_model": m.energy_pj}
    if rtl:
        out |= {"cycles_rtl": total("cycles_rtl"), "cycles_model": total("cycles_model"),
                "gather_cycles_rtl": total("gather_cycles_rtl"),
                "share_cycles_model": total("share_cycles_model"),
                "energy_pj_rtl": sum(r.energy_pj_rtl or 0 for r in runs),
                "energy_pj_model": sum(r.energy_pj_model or 0 for r in runs),
                "all_match_reference": all(r.matches_reference for r in runs
                                           if r.runs_on == "rtl")}
    return out
