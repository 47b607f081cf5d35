"""A kernel-by-kernel MODEL of eager PyTorch CapsNet inference -- not a measurement.

The roofline of :mod:`pimforge.sim.capsnet.gpu_roofline` charges each routing
equation once, as if one perfect kernel computed it: a lower bound.  The
paper's baseline is PyTorch (Sec. 3, Sec. 6.1), which runs the routing op by
op, and public PyTorch CapsNets write it the same way (Sabour et al.'s
structure as re-implemented in the widely copied PyTorch tutorials; e.g.
cedrickchee/capsule-net-pytorch ``capsule_layer.py`` and the
higgsfield-style ``Capsule Network.py``):

.. code-block:: python

    u_hat = torch.matmul(W, u)          # W (1,N_L,N_H,C_H,C_L) over the batch, u (B,N_L,1,C_L,1)
    b = torch.zeros(1, N_L, N_H, 1)     # shared by the batch (or B, N_L, N_H, 1)
    for it in range(I):
        c = F.softmax(b, dim=2)                          # over the high-level capsules
        c = torch.cat([c] * B, dim=0)                    # shared b only
        s = (c * u_hat).sum(dim=1, keepdim=True)
        sq = (s ** 2).sum(-2, keepdim=True)
        v = sq * s / ((1. + sq) * torch.sqrt(sq))        # squash
        a = torch.matmul(u_hat.transpose(3, 4), torch.cat([v] * N_L, dim=1))
        b = b + a.mean(dim=0, keepdim=True)              # .mean: shared b only

The agreement and the ``b`` update run in every iteration, as in the paper's
Algorithm 1 and the roofline (some public copies skip them in the last
iteration, whose ``b`` is unused; that would save the four Eq. 4 kernels
once).  Each op is one kernel launch, reading every input tensor from DRAM
once and writing its output once; its time is ``max(FLOPs / peak, bytes /
bandwidth)`` plus a per-launch overhead (:data:`LAUNCH_S`).  The GPU peaks are
:data:`pimforge.sim.capsnet.gpu_roofline.GPUS` (one source of truth).

Which broadcasts are materialized (counted at their full size, written by a
copy kernel and read back): ``torch.matmul`` with broadcast batch dimensions
expands and reshapes its operands, which copies a non-contiguous expand, so
``W`` is copied over the batch and ``u`` over ``N_H`` (the public code does the
same explicitly with ``torch.cat``/``torch.stack``); the shared ``c`` is
copied over the batch and ``v`` over ``N_L`` (``torch.cat`` in the code above,
or matmul's own expand).  Elementwise broadcasts (``c * u_hat`` over ``C_H``,
``sq * s``) are strided reads and materialize nothing.

The layers around the routing follow :func:`gpu_roofline.network_kernels`
(same convolution and GEMM kernels and counts) plus what eager PyTorch adds:
the convolution bias as its own kernel (PyTorch's ``_convolution`` adds it
after cuDNN), ReLU/sigmoid kernels, the PrimaryCaps gather into ``(B, N_L,
C_L)`` (a permute + contiguous copy), the 7-kernel squash, and the decoder's
masking (length, argmax, one-hot, multiply).  The FC bias is counted inside
the GEMM (cuBLASLt's epilogue; older PyTorch launched one bias copy more per
layer).

Counting rules: 4-byte FP32 words (argmax indices counted as words too); one
add, multiply, compare, ``exp``, divide or square root = 1 FLOP (ReLU 1,
sigmoid 4: negate, ``exp``, add, divide); softmax is max, subtract, ``exp``,
sum, divide per row; a copy does 0 FLOPs.

On-chip storage: with ``on_chip_bytes > 0``, an intermediate tensor (produced
and consumed inside the inference) no larger than that is not charged to
DRAM, neither its write nor its reads; inputs, parameters and the final output
always are.  Each tensor is judged alone (tensors do not compete for the
space), so the variant is optimistic; it is the check of the paper's Fig. 6b.

What this model is not: the launch overhead is an assumption, not a figure
measured on a P100 (:data:`LAUNCH_S`); kernels run back to back (no overlap of
launches with the previous kernel, no concurrency); every kernel reaches the
full DRAM bandwidth or the full FP32 peak (cuDNN/cuBLAS do not, on these
shapes); barrier stalls, which the paper's Fig. 5 profiles at 34.45 % of the
routing's stall cycles, are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpu_roofline import GPU, P100
from .networks import CapsNetSpec, network

__all__ = ["LAUNCH_S", "EagerKernel", "EagerTime", "Tensor", "eager", "eager_network_kernels",
           "eager_routing_kernels"]

W = 4  # bytes per FP32 word

#: Seconds charged per eager kernel launch (CPU dispatch in PyTorch + the CUDA
#: launch), added to every kernel's time.  An ASSUMPTION: launches are "on the
#: order of microseconds" (NVIDIA's CUDA-graph guides) and PyTorch's per-op
#: dispatch adds a few more; 5 us is taken for a P100-class system of the
#: paper's time.  No GPU was measured for it.
LAUNCH_S = 5e-6


@dataclass(frozen=True)
class Tensor:
    """A tensor a kernel reads or writes.

    Attributes
    ----------
    name : str
    words : int
        FP32 words.
    kind : {"input", "param", "temp", "output"}
        ``temp``: produced and consumed inside the inference (the only kind the
        on-chip variant can keep out of DRAM).
    """

    name: str
    words: int
    kind: str = "temp"

    def __post_init__(self):
        if self.kind not in ("input", "param", "temp", "output"):
            raise ValueError(f"tensor kind must be input, param, temp or output, "
                             f"not {self.kind!r}")

    @property
    def bytes(self) -> int:
        return W * self.words


@dataclass(frozen=True)
class EagerKernel:
    """One eager op: the tensors it reads and writes, its FLOPs; ``count`` launches."""

    name: str
    reads: tuple[Tensor, ...]
    writes: tuple[Tensor, ...]
    flops: int
    count: int = 1
    routing: bool = True

    def dram_bytes(self, on_chip_bytes: float = 0) -> int:
        """DRAM bytes of one launch: every tensor read once and written once,
        less the intermediates no larger than *on_chip_bytes*."""
        return sum(t.bytes for t in (*self.reads, *self.writes)
                   if not (t.kind == "temp" and t.bytes <= on_chip_bytes))

    @property
    def bytes(self) -> int:
        """DRAM bytes of one launch with nothing kept on chip."""
        return self.dram_bytes(0)

    def time_s(self, gpu: GPU, launch_s: float = LAUNCH_S, on_chip_bytes: float = 0) -> float:
        """``count * (max(FLOPs / peak, bytes / bandwidth) + launch_s)``."""
        return self.count * (max(self.flops / gpu.peak_flops,
                                 self.dram_bytes(on_chip_bytes) / gpu.bandwidth) + launch_s)


def _k(name: str, reads, writes, flops: int, count: int = 1, routing: bool = True):
    return EagerKernel(name, tuple(reads), tuple(writes), int(flops), count, routing)


def _squash(prefix: str, s: Tensor, rows: int, dim: int, out: Tensor, count: int = 1,
            routing: bool = True) -> list[EagerKernel]:
    """``sq = (s**2).sum(-1); v = sq * s / ((1 + sq) * sqrt(sq))``: 7 kernels on
    *rows* vectors of *dim* scalars."""
    s2 = Tensor(f"{prefix}s^2", rows * dim)
    sq = Tensor(f"{prefix}|s|^2", rows)
    t1 = Tensor(f"{prefix}|s|^2 s", rows * dim)
    t2 = Tensor(f"{prefix}1+|s|^2", rows)
    t3 = Tensor(f"{prefix}|s|", rows)
    t4 = Tensor(f"{prefix}(1+|s|^2)|s|", rows)
    n = rows * dim
    return [_k(f"{prefix}squash s**2", [s], [s2], n, count, routing),
            _k(f"{prefix}squash sum", [s2], [sq], rows * (dim - 1), count, routing),
            _k(f"{prefix}squash |s|^2 * s", [sq, s], [t1], n, count, routing),
            _k(f"{prefix}squash 1 + |s|^2", [sq], [t2], rows, count, routing),
            _k(f"{prefix}squash sqrt", [sq], [t3], rows, count, routing),
            _k(f"{prefix}squash (1+|s|^2)*|s|", [t2, t3], [t4], rows, count, routing),
            _k(f"{prefix}squash divide", [t1, t4], [out], n, count, routing)]


def eager_routing_kernels(net: CapsNetSpec, shared_b: bool = True) -> list[EagerKernel]:
    """Every kernel eager PyTorch launches for the routing of *net* (module doc).

    Parameters
    ----------
    net : CapsNetSpec
    shared_b : bool
        ``b`` is ``(N_L, N_H)``, shared by the batch (the paper's Sec. 2.2 and
        the code above: ``c`` copied over the batch, agreements averaged over
        it); False: ``b`` is ``(B, N_L, N_H)``, one per input.

    Kernels with ``count = iterations`` run once per routing iteration.
    """
    b, nl, nh, cl, ch, it = net.batch, net.n_l, net.n_h, net.c_l, net.c_h, net.iterations
    bsz = nl * nh if shared_b else b * nl * nh
    u = Tensor("u", b * nl * cl)   # made by PrimaryCaps
    w = Tensor("W", nl * nh * ch * cl, "param")
    wb = Tensor("W expanded", b * nl * nh * ch * cl)
    ub = Tensor("u expanded", b * nl * nh * cl)
    u_hat = Tensor("u_hat", b * nl * nh * ch)
    bt = Tensor("b", bsz)
    c = Tensor("c", bsz)
    cb = Tensor("c expanded", b * nl * nh)
    cu = Tensor("c*u_hat", b * nl * nh * ch)
    s = Tensor("s", b * nh * ch)
    v = Tensor("v", b * nh * ch)
    vb = Tensor("v expanded", b * nl * nh * ch)
    a = Tensor("a", b * nl * nh)
    am = Tensor("a mean", nl * nh)
    ks = [
        _k("Eq.1 expand W over batch (copy)", [w], [wb], 0),
        _k("Eq.1 expand u over N_H (copy)", [u], [ub], 0),
        _k("Eq.1 u_hat = W @ u (bmm)", [wb, ub], [u_hat], b * nl * nh * ch * (2 * cl - 1)),
        _k("b = zeros", [], [bt], 0),
        _k("Eq.5 c = softmax(b)", [bt], [c], (bsz // nh) * (5 * nh - 2), it),
    ]
    if shared_b:
        ks.append(_k("Eq.5 expand c over batch (copy)", [c], [cb], 0, it))
    ks += [
        _k("Eq.2 c * u_hat", [cb if shared_b else c, u_hat], [cu], b * nl * nh * ch, it),
        _k("Eq.2 s = sum over N_L", [cu], [s], b * nh * ch * (nl - 1), it),
        *_squash("Eq.3 ", s, b * nh, ch, v, it),
        _k("Eq.4 expand v over N_L (copy)", [v], [vb], 0, it),
        _k("Eq.4 a = u_hat . v (bmm)", [u_hat, vb], [a], b * nl * nh * (2 * ch - 1), it),
    ]
    if shared_b:
        ks += [_k("Eq.4 mean of a over batch", [a], [am], b * nl * nh, it),
               _k("Eq.4 b = b + a", [bt, am], [bt], bsz, it)]
    else:
        ks.append(_k("Eq.4 b = b + a", [bt, a], [bt], bsz, it))
    return ks


def eager_network_kernels(net: CapsNetSpec, shared_b: bool = True) -> list[EagerKernel]:
    """The whole inference, eagerly: Conv1, PrimaryCaps, the routing, the decoder."""
    b, nl, nh, cin, cl, ch = net.batch, net.n_l, net.n_h, net.in_channels, net.c_l, net.c_h
    pc = nl * cl // 36                     # PrimaryCaps output channels on the 6x6 grid
    x = Tensor("image", b * 784 * cin, "input")
    w1, b1 = Tensor("conv1 weight", 81 * cin * 256, "param"), Tensor("conv1 bias", 256, "param")
    y1 = Tensor("conv1 out", b * 256 * 400)
    a1 = Tensor("conv1 relu", b * 256 * 400)
    w2, b2 = Tensor("prim weight", 81 * 256 * pc, "param"), Tensor("prim bias", pc, "param")
    y2 = Tensor("prim out", b * pc * 36)
    p = Tensor("prim capsules", b * nl * cl)
    u = Tensor("u", b * nl * cl)
    n1 = 256 * 400 * b
    n2 = pc * 36 * b
    pre = [
        _k("Conv1 9x9x256 (cuDNN)", [x, w1], [y1], 2 * 81 * cin * n1, routing=False),
        _k("Conv1 bias", [y1, b1], [y1], n1, routing=False),
        _k("Conv1 ReLU", [y1], [a1], n1, routing=False),
        _k("PrimeCaps 9x9/2 (cuDNN)", [a1, w2], [y2], 2 * 81 * 256 * n2, routing=False),
        _k("PrimeCaps bias", [y2, b2], [y2], n2, routing=False),
        _k("PrimeCaps gather capsules (copy)", [y2], [p], 0, routing=False),
        *_squash("PrimeCaps ", p, b * nl, cl, u, routing=False),
    ]
    v = Tensor("v", b * nh * ch)
    v2 = Tensor("mask v**2", b * nh * ch)
    ln2 = Tensor("mask |v|^2", b * nh)
    ln = Tensor("mask |v|", b * nh)
    idx = Tensor("mask argmax", b)
    eye = Tensor("mask one-hot", b * nh)
    mv = Tensor("masked v", b * nh * ch)
    post = [
        _k("decoder mask v**2", [v], [v2], b * nh * ch, routing=False),
        _k("decoder mask sum", [v2], [ln2], b * nh * (ch - 1), routing=False),
        _k("decoder mask sqrt", [ln2], [ln], b * nh, routing=False),
        _k("decoder mask argmax", [ln], [idx], b * (nh - 1), routing=False),
        _k("decoder mask one-hot", [idx, Tensor("eye", nh * nh, "param")], [eye], 0,
           routing=False),
        _k("decoder mask multiply", [v, eye], [mv], b * nh * ch, routing=False),
    ]
    h = mv
    dims = [ch * nh, 512, 1024, 784 * cin]
    for i, (fi, fo) in enumerate(zip(dims[:-1], dims[1:])):
        last = i == len(dims) - 2
        wt = Tensor(f"fc{i} weight", fi * fo, "param")
        bt = Tensor(f"fc{i} bias", fo, "param")
        z = Tensor(f"fc{i} out", b * fo)
        act = Tensor(f"fc{i} act", b * fo, "output" if last else "temp")
        post += [_k(f"decoder FC{i} {fi}x{fo} (GEMM + bias)", [h, wt, bt], [z],
                    2 * b * fi * fo + b * fo, routing=False),
                 _k(f"decoder FC{i} {'sigmoid' if last else 'ReLU'}", [z], [act],
                    (4 if last else 1) * b * fo, routing=False)]
        h = act
    return [*pre, *eager_routing_kernels(net, shared_b), *post]


@dataclass(frozen=True)
class EagerTime:
    """Modelled eager times (seconds) of one network on one GPU."""

    network: str
    gpu: str
    launch_s: float
    on_chip_bytes: float
    routing_s: float
    total_s: float
    routing_flops: int
    routing_bytes: int
    total_bytes: int
    routing_launches: int
    launches: int

    @property
    def routing_share(self) -> float:
        return self.routing_s / self.total_s


def eager(net: CapsNetSpec | str, gpu: GPU = P100, launch_s: float = LAUNCH_S,
          on_chip_bytes: float = 0, shared_b: bool = True) -> EagerTime:
    """The eager model's times of *net* on *gpu* (see the module doc)."""
    if isinstance(net, str):
        net = network(net)
    ks = eager_network_kernels(net, shared_b)
    rk = [k for k in ks if k.routing]
    return EagerTime(
        network=net.name, gpu=gpu.name, launch_s=launch_s, on_chip_bytes=on_chip_bytes,
        routing_s=sum(k.time_s(gpu, launch_s, on_chip_bytes) for k in rk),
        total_s=sum(k.time_s(gpu, launch_s, on_chip_bytes) for k in ks),
        routing_flops=sum(k.flops * k.count for k in rk),
        routing_bytes=sum(k.dram_bytes(on_chip_bytes) * k.count for k in rk),
        total_bytes=sum(k.dram_bytes(on_chip_bytes) * k.count for k in ks),
        routing_launches=sum(k.count for k in rk), launches=sum(k.count for k in ks))
