"""The five NicePIM workloads (Sec. VIII) as layer graphs with their branches.

Each network is a list of :class:`Layer` in topological order; a layer names its
predecessors, so GoogLeNet's inception modules and the residual additions of
ResNet152 and DarkNet53 are branches of the graph, not a flattened chain. The
graphs are written from the original definitions (no framework is imported):

* **VGG16** (configuration D, 224x224): 13 3x3 convolutions with biases, five
  max-pools, the classifier 25088-4096-4096-1000.
* **ResNet152**, torchvision's v1.5 (the stride of a down-sampling bottleneck on
  its 3x3 convolution), 224x224, blocks [3, 8, 36, 3].
* **GoogLeNet**, torchvision's variant (224x224): batch-normalized convolutions
  without bias, a 3x3 convolution (not 5x5) on the third inception branch,
  ceil-mode pools, no auxiliary classifiers (they are dropped at inference).
* **DarkNet53**, the classifier of the Darknet reference configuration
  (``darknet53.cfg``) at 256x256: batch-normalized convolutions, five
  down-sampling stages with 1, 2, 8, 8, 4 residual blocks, global average pool
  and a 1x1 convolution to 1000 classes with biases.
* **BERT-base** (uncased, 12 layers, hidden 768, 12 heads, intermediate 3072)
  at sequence length 128, batch 1, with the pooler: the projections and the
  feed-forward layers are matrix multiplications with weights, the attention
  products ``Q K^T`` and ``softmax(.) V`` are matrix multiplications whose
  second operand is an activation (:attr:`Layer.operand`).

Conventions (the mapper's view of a layer): an activation tensor is
``N x C x H x W``; a layer makes ``N x K x P x Q`` from it with an ``R x S``
window, ``stride``, ``pad`` and ``groups``. A fully connected layer is a 1x1
convolution on a 1x1 input; a token-wise matrix multiplication (BERT) is a 1x1
convolution over ``H = sequence length``, ``W = 1``; an attention product is a
1x1 convolution with ``groups = heads`` whose weights are the other operand.

What is counted, as torchvision's published figures count it: ``macs`` are the
multiply-accumulates of convolutions and matrix multiplications only
(pools, additions, normalizations, activations and softmax are not counted);
``params`` are the trainable parameters: weights and biases, the scale and
shift of batch and layer normalization (not the running statistics, which are
buffers) and the embedding tables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

from pimforge.gen.errors import PimforgeError, UnknownNameError

__all__ = ["KINDS", "Layer", "Network", "NetworkError", "network", "network_names"]

#: Layer kinds. ``conv`` and ``fc`` carry weights; ``matmul`` multiplies two activations
#: (its weights are the predecessor named by ``operand``); the rest do no MACs.
KINDS = ("input", "conv", "fc", "matmul", "maxpool", "avgpool", "add", "concat",
         "softmax", "layernorm", "embed", "select")
_COMPUTE = ("conv", "fc", "matmul")


class NetworkError(PimforgeError):
    """A layer graph is malformed (a shape that does not fit, an unknown predecessor)."""


@dataclass(frozen=True)
class Layer:
    """One layer of a network.

    Parameters
    ----------
    name : str
        Unique within its network.
    kind : str
        One of :data:`KINDS`.
    n, c, h, w : int
        Input batch, channels, height and width (of the first predecessor; an
        ``add`` or ``concat`` reads its predecessors' outputs of the same ``H x W``).
    k, p, q : int
        Output channels, height and width.
    r, s : int
        Window height and width (1 for layers without one).
    stride, pad : int
        Of the window, the same on both axes.
    groups : int
        Channel groups (heads of an attention product).
    preds : tuple of str
        Predecessors, in input order (a ``concat`` stacks them in this order).
    bias : bool
        A bias per output channel.
    post : tuple of str
        Operations applied to the output before the next layer (``bn``, ``relu``,
        ``leaky``, ``gelu``, ``tanh``, ``scale``); ``bn`` has trainable parameters.
    operand : str
        For a ``matmul``: the predecessor whose output is the second operand.
    table : int
        Embedding table entries (an ``embed`` layer's parameters are ``table x k``).
    """

    name: str
    kind: str
    n: int
    c: int
    h: int
    w: int
    k: int
    p: int
    q: int
    r: int = 1
    s: int = 1
    stride: int = 1
    pad: int = 0
    groups: int = 1
    preds: tuple[str, ...] = ()
    bias: bool = False
    post: tuple[str, ...] = ()
    operand: str = ""
    table: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise NetworkError(f"layer {self.name}: kind must be one of {', '.join(KINDS)}, "
                               f"not {self.kind!r}")
        if self.c % self.groups or self.k % self.groups:
            raise NetworkError(f"layer {self.name}: groups = {self.groups} must divide "
                               f"C = {self.c} and K = {self.k}")

    @property
    def weights(self) -> int:
        """Weight elements ``K x C/groups x R x S`` (of the second operand for a matmul)."""
        if self.kind not in _COMPUTE:
            return 0
        return self.k * (self.c // self.groups) * self.r * self.s

    @property
    def macs(self) -> int:
        """Multiply-accumulates: ``N P Q K (C/groups) R S`` for conv, fc and matmul, else 0."""
        if self.kind not in _COMPUTE:
            return 0
        return self.n * self.p * self.q * self.weights

    @property
    def params(self) -> int:
        """Trainable parameters of the layer (weights, bias, normalization, table)."""
        n = 0
        if self.kind in ("conv", "fc"):
            n += self.weights + (self.k if self.bias else 0)
        if "bn" in self.post:
            n += 2 * self.k
        if self.kind == "layernorm":
            n += 2 * self.c
        if self.kind == "embed":
            n += self.table * self.k
        return n

    @property
    def in_elems(self) -> int:
        """Elements of the (first) input tensor."""
        return self.n * self.c * self.h * self.w

    @property
    def out_elems(self) -> int:
        """Elements of the output tensor."""
        return self.n * self.k * self.p * self.q

    @property
    def dynamic_weights(self) -> bool:
        """The weights are an activation (an attention product), not stored parameters."""
        return self.kind == "matmul"


@dataclass(frozen=True)
class Network:
    """A network: its layers in topological order.

    Parameters
    ----------
    name : str
        ``vgg16``, ``resnet152``, ``googlenet``, ``darknet53`` or ``bert_base``.
    layers : tuple of Layer
        The input layer first; every predecessor comes before its successors.
    doc : str
        Which variant, at which input size.
    """

    name: str
    layers: tuple[Layer, ...]
    doc: str = ""

    def __post_init__(self):
        seen: set[str] = set()
        for lay in self.layers:
            if lay.name in seen:
                raise NetworkError(f"{self.name}: layer {lay.name!r} is defined twice")
            for p in lay.preds:
                if p not in seen:
                    raise NetworkError(f"{self.name}: layer {lay.name!r} reads {p!r}, which "
                                       "is not an earlier layer")
            if lay.operand and lay.operand not in lay.preds:
                raise NetworkError(f"{self.name}: layer {lay.name!r}: operand {lay.operand!r} "
                                   "is not one of its predecessors")
            seen.add(lay.name)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one inference (see the module docstring)."""
        return sum(lay.macs for lay in self.layers)

    @property
    def params(self) -> int:
        """Trainable parameters."""
        return sum(lay.params for lay in self.layers)

    @functools.cached_property
    def by_name(self) -> dict[str, Layer]:
        """Layers by name."""
        return {lay.name: lay for lay in self.layers}

    @functools.cached_property
    def succs(self) -> dict[str, tuple[str, ...]]:
        """Successors of each layer, in layer order."""
        out: dict[str, list[str]] = {lay.name: [] for lay in self.layers}
        for lay in self.layers:
            for p in lay.preds:
                out[p].append(lay.name)
        return {k: tuple(v) for k, v in out.items()}

    def batched(self, n: int) -> Network:
        """The network on a batch of *n* samples (every layer's ``n``).

        Raises
        ------
        NetworkError
            *n* is below 1."""
        if not isinstance(n, int) or n < 1:
            raise NetworkError(f"{self.name}: the batch must be a whole number of samples "
                               f"of at least 1, not {n!r}")
        doc = self.doc.replace(", batch 1", "")
        return Network(self.name, tuple(replace(lay, n=n) for lay in self.layers),
                       f"{doc}, batch {n}" if n > 1 else self.doc)

    def compute_layers(self) -> list[Layer]:
        """The layers that do MACs (conv, fc, matmul), in order."""
        return [lay for lay in self.layers if lay.kind in _COMPUTE]

    def segments(self) -> list[list[Layer]]:
        """The network cut into its smallest serial pieces (Sec. III-B, Fig. 4).

        A cut falls after a layer through which every path from the input to
        the output passes (a layer that no edge jumps over). A segment with
        branches is a piece between two such cuts whose layers do not form a
        chain; :meth:`branches` splits it.
        """
        order = {lay.name: i for i, lay in enumerate(self.layers)}
        # reach[i]: the furthest layer index an edge leaving layers 0..i reaches
        reach = 0
        cuts = []
        for i, lay in enumerate(self.layers):
            for s in self.succs[lay.name]:
                reach = max(reach, order[s])
            if reach <= i + 1:
                cuts.append(i)
        out, start = [], 0
        for c in cuts:
            out.append(list(self.layers[start:c + 1]))
            start = c + 1
        if start < len(self.layers):
            out.append(list(self.layers[start:]))
        return out

    def branches(self, segment: list[Layer]) -> list[list[Layer]]:
        """The parallel branches of a *segment*: chains of layers joined only at the
        segment's ends. A join layer (the ``add`` or ``concat`` closing it) is a
        branch of its own, after the others; a chain segment is one branch."""
        names = {lay.name for lay in segment}
        inner_pred = {lay.name: [p for p in lay.preds if p in names] for lay in segment}
        inner_succ = {lay.name: [s for s in self.succs[lay.name] if s in names]
                      for lay in segment}
        # union-find over edges between layers that are neither fork nor join
        parent = {n: n for n in names}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for lay in segment:
            if len(inner_pred[lay.name]) > 1:
                continue
            for p in inner_pred[lay.name]:
                if len(inner_succ[p]) == 1:
                    parent[find(lay.name)] = find(p)
        groups: dict[str, list[Layer]] = {}
        for lay in segment:
            groups.setdefault(find(lay.name), []).append(lay)
        return list(groups.values())


class _Builder:
    """Builds a network layer by layer, deriving every shape from the predecessors."""

    def __init__(self, name: str, c: int, h: int, w: int, n: int = 1):
        self.name = name
        self.layers: list[Layer] = [Layer("input", "input", n, c, h, w, c, h, w)]
        self.shape = {"input": (n, c, h, w)}

    def _add(self, lay: Layer) -> str:
        self.layers.append(lay)
        self.shape[lay.name] = (lay.n, lay.k, lay.p, lay.q)
        return lay.name

    def conv(self, name: str, src: str, k: int, r: int, *, stride: int = 1, pad: int = 0,
             groups: int = 1, bias: bool = False, post: tuple[str, ...] = ()) -> str:
        n, c, h, w = self.shape[src]
        p = (h + 2 * pad - r) // stride + 1
        q = (w + 2 * pad - r) // stride + 1
        if p < 1 or q < 1:
            raise NetworkError(f"{self.name}: layer {name}: a {r}x{r} window does not fit "
                               f"a {h}x{w} input")
        return self._add(Layer(name, "conv", n, c, h, w, k, p, q, r, r, stride, pad, groups,
                               (src,), bias, post))

    def fc(self, name: str, src: str, k: int, *, bias: bool = True,
           post: tuple[str, ...] = ()) -> str:
        """A fully connected layer on the flattened input (a 1x1 convolution on 1x1)."""
        n, c, h, w = self.shape[src]
        return self._add(Layer(name, "fc", n, c * h * w, 1, 1, k, 1, 1, preds=(src,),
                               bias=bias, post=post))

    def linear(self, name: str, src: str, k: int, *, post: tuple[str, ...] = ()) -> str:
        """A token-wise matrix multiplication with weights and bias: a 1x1 convolution
        over the ``H`` tokens."""
        n, c, h, w = self.shape[src]
        return self._add(Layer(name, "fc", n, c, h, w, k, h, w, preds=(src,), bias=True,
                               post=post))

    def matmul(self, name: str, src: str, operand: str, k: int, groups: int,
               post: tuple[str, ...] = ()) -> str:
        n, c, h, w = self.shape[src]
        return self._add(Layer(name, "matmul", n, c, h, w, k, h, w, groups=groups,
                               preds=(src, operand), post=post, operand=operand))

    def pool(self, name: str, src: str, r: int, *, stride: int, pad: int = 0,
             kind: str = "maxpool", ceil: bool = False) -> str:
        n, c, h, w = self.shape[src]

        def out(x: int) -> int:
            num = x + 2 * pad - r
            o = (-(-num // stride) if ceil else num // stride) + 1
            if ceil and (o - 1) * stride >= x + pad:   # PyTorch: the last window starts inside
                o -= 1
            return o

        return self._add(Layer(name, kind, n, c, h, w, c, out(h), out(w), r, r, stride, pad,
                               preds=(src,)))

    def global_pool(self, name: str, src: str) -> str:
        n, c, h, w = self.shape[src]
        return self._add(Layer(name, "avgpool", n, c, h, w, c, 1, 1, h, w, 1, 0,
                               preds=(src,)))

    def add(self, name: str, srcs: tuple[str, ...], post: tuple[str, ...] = ()) -> str:
        shapes = {self.shape[s] for s in srcs}
        if len(shapes) != 1:
            raise NetworkError(f"{self.name}: layer {name} adds tensors of shapes "
                               f"{sorted(shapes)}")
        n, c, h, w = shapes.pop()
        return self._add(Layer(name, "add", n, c, h, w, c, h, w, preds=srcs, post=post))

    def concat(self, name: str, srcs: tuple[str, ...]) -> str:
        hw = {self.shape[s][2:] for s in srcs}
        if len(hw) != 1:
            raise NetworkError(f"{self.name}: layer {name} concatenates maps of sizes "
                               f"{sorted(hw)}")
        n, c, h, w = self.shape[srcs[0]]
        k = sum(self.shape[s][1] for s in srcs)
        return self._add(Layer(name, "concat", n, c, h, w, k, h, w, preds=srcs))

    def unary(self, name: str, kind: str, src: str) -> str:
        n, c, h, w = self.shape[src]
        return self._add(Layer(name, kind, n, c, h, w, c, h, w, preds=(src,)))

    def build(self, doc: str) -> Network:
        return Network(self.name, tuple(self.layers), doc)


# ---- VGG16 -----------------------------------------------------------------------------------

def _vgg16() -> Network:
    b = _Builder("vgg16", 3, 224, 224)
    x = "input"
    stages = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))
    for i, stage in enumerate(stages, 1):
        for j, k in enumerate(stage, 1):
            x = b.conv(f"conv{i}_{j}", x, k, 3, pad=1, bias=True, post=("relu",))
        x = b.pool(f"pool{i}", x, 2, stride=2)
    # torchvision's adaptive 7x7 average pool is the identity on a 7x7 map
    x = b.fc("fc6", x, 4096, post=("relu",))
    x = b.fc("fc7", x, 4096, post=("relu",))
    b.fc("fc8", x, 1000)
    return b.build("VGG16 (configuration D), 224x224, batch 1")


# ---- ResNet152 v1.5 --------------------------------------------------------------------------

def _resnet152() -> Network:
    b = _Builder("resnet152", 3, 224, 224)
    x = b.conv("conv1", "input", 64, 7, stride=2, pad=3, post=("bn", "relu"))
    x = b.pool("pool1", x, 3, stride=2, pad=1)
    inplanes = 64
    for stage, (planes, blocks) in enumerate(((64, 3), (128, 8), (256, 36), (512, 3)), 2):
        for i in range(blocks):
            stride = 2 if (i == 0 and stage > 2) else 1
            pre = f"res{stage}_{i}"
            y = b.conv(f"{pre}_a", x, planes, 1, post=("bn", "relu"))
            y = b.conv(f"{pre}_b", y, planes, 3, stride=stride, pad=1, post=("bn", "relu"))
            y = b.conv(f"{pre}_c", y, 4 * planes, 1, post=("bn",))
            short = x
            if stride != 1 or inplanes != 4 * planes:
                short = b.conv(f"{pre}_down", x, 4 * planes, 1, stride=stride, post=("bn",))
            x = b.add(f"{pre}_add", (y, short), post=("relu",))
            inplanes = 4 * planes
    x = b.global_pool("pool5", x)
    b.fc("fc", x, 1000)
    return b.build("ResNet152 v1.5 (torchvision: stride on the 3x3 convolution), 224x224, "
                   "batch 1")


# ---- GoogLeNet (torchvision) -----------------------------------------------------------------

def _googlenet() -> Network:
    b = _Builder("googlenet", 3, 224, 224)
    bn = ("bn", "relu")
    x = b.conv("conv1", "input", 64, 7, stride=2, pad=3, post=bn)
    x = b.pool("pool1", x, 3, stride=2, ceil=True)
    x = b.conv("conv2", x, 64, 1, post=bn)
    x = b.conv("conv3", x, 192, 3, pad=1, post=bn)
    x = b.pool("pool2", x, 3, stride=2, ceil=True)

    def inception(name: str, src: str, c1: int, c3r: int, c3: int, c5r: int, c5: int,
                  pp: int) -> str:
        b1 = b.conv(f"{name}_1x1", src, c1, 1, post=bn)
        b2 = b.conv(f"{name}_3x3r", src, c3r, 1, post=bn)
        b2 = b.conv(f"{name}_3x3", b2, c3, 3, pad=1, post=bn)
        b3 = b.conv(f"{name}_5x5r", src, c5r, 1, post=bn)
        # torchvision's known deviation from the paper: a 3x3 kernel on this branch
        b3 = b.conv(f"{name}_5x5", b3, c5, 3, pad=1, post=bn)
        b4 = b.pool(f"{name}_pool", src, 3, stride=1, pad=1, ceil=True)
        b4 = b.conv(f"{name}_poolproj", b4, pp, 1, post=bn)
        return b.concat(f"{name}_concat", (b1, b2, b3, b4))

    x = inception("inc3a", x, 64, 96, 128, 16, 32, 32)
    x = inception("inc3b", x, 128, 128, 192, 32, 96, 64)
    x = b.pool("pool3", x, 3, stride=2, ceil=True)
    x = inception("inc4a", x, 192, 96, 208, 16, 48, 64)
    x = inception("inc4b", x, 160, 112, 224, 24, 64, 64)
    x = inception("inc4c", x, 128, 128, 256, 24, 64, 64)
    x = inception("inc4d", x, 112, 144, 288, 32, 64, 64)
    x = inception("inc4e", x, 256, 160, 320, 32, 128, 128)
    x = b.pool("pool4", x, 2, stride=2, ceil=True)
    x = inception("inc5a", x, 256, 160, 320, 32, 128, 128)
    x = inception("inc5b", x, 384, 192, 384, 48, 128, 128)
    x = b.global_pool("pool5", x)
    b.fc("fc", x, 1000)
    return b.build("GoogLeNet as torchvision defines it (batch-normalized convolutions, 3x3 "
                   "on the '5x5' branch, ceil-mode pools, no auxiliary classifiers), "
                   "224x224, batch 1")


# ---- DarkNet53 -------------------------------------------------------------------------------

def _darknet53() -> Network:
    b = _Builder("darknet53", 3, 256, 256)
    lk = ("bn", "leaky")
    x = b.conv("conv0", "input", 32, 3, pad=1, post=lk)
    c = 32
    for stage, blocks in enumerate((1, 2, 8, 8, 4), 1):
        c *= 2
        x = b.conv(f"down{stage}", x, c, 3, stride=2, pad=1, post=lk)
        for i in range(blocks):
            pre = f"res{stage}_{i}"
            y = b.conv(f"{pre}_a", x, c // 2, 1, post=lk)
            y = b.conv(f"{pre}_b", y, c, 3, pad=1, post=lk)
            x = b.add(f"{pre}_add", (y, x))
    x = b.global_pool("avgpool", x)
    b.conv("fc", x, 1000, 1, bias=True)
    return b.build("DarkNet53 classifier (darknet53.cfg), 256x256, batch 1")


# ---- BERT-base -------------------------------------------------------------------------------

BERT_VOCAB = 30522
BERT_POSITIONS = 512
BERT_TYPES = 2


def _bert_base(seq: int = 128) -> Network:
    d, heads, ff, depth = 768, 12, 3072, 12
    b = _Builder("bert_base", 1, seq, 1)
    # word, position and token-type tables: one lookup layer whose output is their sum
    x = b._add(Layer("embed", "embed", 1, 1, seq, 1, d, seq, 1, preds=("input",),
                     table=BERT_VOCAB + BERT_POSITIONS + BERT_TYPES))
    x = b.unary("embed_ln", "layernorm", x)
    for i in range(depth):
        pre = f"enc{i}"
        q = b.linear(f"{pre}_q", x, d)
        k = b.linear(f"{pre}_k", x, d)
        v = b.linear(f"{pre}_v", x, d)
        # scores: per head, (seq x 64) times (64 x seq); K is the second operand
        s = b.matmul(f"{pre}_qk", q, k, heads * seq, heads, post=("scale",))
        s = b.unary(f"{pre}_softmax", "softmax", s)
        # context: per head, (seq x seq) times (seq x 64)
        a = b.matmul(f"{pre}_av", s, v, d, heads)
        o = b.linear(f"{pre}_o", a, d)
        o = b.add(f"{pre}_add1", (o, x))
        x = b.unary(f"{pre}_ln1", "layernorm", o)
        f = b.linear(f"{pre}_ff1", x, ff, post=("gelu",))
        f = b.linear(f"{pre}_ff2", f, d)
        f = b.add(f"{pre}_add2", (f, x))
        x = b.unary(f"{pre}_ln2", "layernorm", f)
    n, c, h, w = b.shape[x]
    cls = b._add(Layer("cls", "select", n, c, h, w, c, 1, 1, preds=(x,)))
    b.fc("pooler", cls, d, post=("tanh",))
    return b.build(f"BERT-base (12 layers, hidden 768, 12 heads), sequence {seq}, batch 1, "
                   "with the pooler; attention products as matmul layers")


NETWORKS: dict[str, Callable[[], Network]] = {
    "vgg16": _vgg16, "resnet152": _resnet152, "googlenet": _googlenet,
    "darknet53": _darknet53, "bert_base": _bert_base,
}


def network_names() -> list[str]:
    """The workload names, in the paper's order."""
    return list(NETWORKS)


@functools.cache
def network(name: str) -> Network:
    """The network *name* (one of :func:`network_names`)."""
    try:
        make = NETWORKS[name]
    except KeyError:
        raise UnknownNameError(f"unknown network {name!r}; available: "
                               f"{', '.join(NETWORKS)}") from None
    return make()
