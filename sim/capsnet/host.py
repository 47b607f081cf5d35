"""The host side of PIM-CapsNet: Conv, PrimaryCaps and the FC decoder in numpy.

PIM-CapsNet (Sec. 4) keeps the layers around the routing on the host GPU.
This module runs them in numpy (float32, vectorised: im2col + one matmul per
convolution) for any Table 1 network, and counts per layer the work the GPU
roofline charges (FLOPs, bytes of weights and activations read and written).

Structure (the one :mod:`pimforge.sim.capsnet.networks` assumes for Table 1):

* ``conv1``: ``k1 x k1`` convolution, ``in_channels -> conv_channels``, stride 1,
  valid, ReLU (Table 1: 9x9, 256 channels on a 28x28 input -> 20x20);
* ``primary``: ``k2 x k2`` convolution with stride ``s2``, ``conv_channels ->
  types * C_L`` (Table 1: 9x9 stride 2 -> a 6x6 grid), reshaped into
  ``N_L = types * grid^2`` capsules of ``C_L`` scalars and squashed.  Capsule
  ``n = t * grid^2 + y * grid + x`` holds channels ``t*C_L .. t*C_L + C_L - 1``
  at ``(y, x)`` (the digits network's order);
* ``decoder``: the ``N_H x C_H`` output capsules, all but the chosen class
  masked to zero, through FC ``16 N_H -> 512 -> 1024 -> pixels`` with ReLU,
  ReLU, sigmoid.

:meth:`HostNet.digits` is the small trained network of
:mod:`pimforge.sim.capsnet.digits_net` (3x3 kernels on 8x8 images, no
decoder); :func:`digits_weights` loads its trained weights.

Counting rules (FP32 words, as :mod:`pimforge.sim.capsnet.gpu_roofline`): a
convolution costs ``2 * k^2 * C_in`` FLOPs per output, reads its input, its
weights and bias once and writes its output once; the PrimaryCaps squash adds
``3 C_L + 3`` FLOPs per capsule and writes the capsules (its pre-squash output
stays on chip); an FC layer costs ``2 * in * out + out`` per image; ReLU is
free (fused).  For the Table 1 structure these counts are exactly the
roofline's Conv1, PrimeCaps and decoder kernels (checked by the tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pimforge.gen.errors import PimforgeError

from . import digits_net as dn
from .digits_net import load_trained
from .gpu_roofline import P100
from .networks import CapsNetSpec

__all__ = ["HostLayer", "HostNet", "conv2d", "conv2d_loop", "decoder_forward",
           "digits_weights", "host_forward", "host_layers", "host_times", "init_weights",
           "primary_capsules", "squash"]

W = 4  # bytes per FP32 word


@dataclass(frozen=True)
class HostLayer:
    """Work of one host layer for a whole batch.

    Attributes
    ----------
    name : str
    stage : str
        ``"pre"`` (before the routing: Conv, PrimaryCaps) or ``"post"`` (decoder).
    flops, macs : int
        FP32 operations (multiply and add counted separately) and the
        multiply-accumulates among them.
    weight_bytes, act_read_bytes, act_write_bytes : int
        Bytes of parameters read, activations read and activations written.
    """

    name: str
    stage: str
    flops: int
    macs: int
    weight_bytes: int
    act_read_bytes: int
    act_write_bytes: int

    @property
    def read_bytes(self) -> int:
        return self.weight_bytes + self.act_read_bytes

    @property
    def write_bytes(self) -> int:
        return self.act_write_bytes

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    def time_s(self, gpu) -> float:
        """Roofline time on *gpu* (a :class:`~pimforge.sim.capsnet.gpu_roofline.GPU`)."""
        return max(self.flops / gpu.peak_flops, self.bytes / gpu.bandwidth)


@dataclass(frozen=True)
class HostNet:
    """Shapes of the host layers of one network.

    Parameters
    ----------
    name : str
    batch : int
    in_channels, in_size : int
        Input image channels and side.
    conv_kernel, conv_channels : int
        ``conv1``.
    prim_kernel, prim_stride, types : int
        PrimaryCaps convolution; ``types`` capsule types of ``c_l`` scalars.
    c_l, n_h, c_h : int
        Capsule sizes (``n_h``, ``c_h`` for the decoder input).
    decoder : tuple of int
        Hidden widths of the FC decoder (empty: no decoder).
    """

    name: str
    batch: int
    in_channels: int
    in_size: int
    conv_kernel: int
    conv_channels: int
    prim_kernel: int
    prim_stride: int
    types: int
    c_l: int
    n_h: int
    c_h: int
    decoder: tuple[int, ...] = (512, 1024)

    def __post_init__(self):
        for f in ("batch", "in_channels", "in_size", "conv_kernel", "conv_channels",
                  "prim_kernel", "prim_stride", "types", "c_l", "n_h", "c_h"):
            v = getattr(self, f)
            if not (isinstance(v, int) and v >= 1):
                raise PimforgeError(f"host net {f} must be an integer >= 1, not {v!r}")
        if self.grid < 1:
            raise PimforgeError(f"host net {self.name}: the layers leave no capsule grid "
                                f"(input {self.in_size}, kernels {self.conv_kernel}/"
                                f"{self.prim_kernel}, stride {self.prim_stride})")

    @property
    def conv_out(self) -> int:
        return self.in_size - self.conv_kernel + 1

    @property
    def grid(self) -> int:
        return (self.conv_out - self.prim_kernel) // self.prim_stride + 1

    @property
    def n_l(self) -> int:
        return self.types * self.grid * self.grid

    @property
    def pixels(self) -> int:
        return self.in_size * self.in_size * self.in_channels

    @classmethod
    def from_spec(cls, net: CapsNetSpec, batch: int | None = None) -> HostNet:
        """The assumed Table 1 structure of *net* (28x28 input, 9x9/256, 9x9 stride 2).

        ``types = N_L / 36``; a reduced network (:meth:`CapsNetSpec.scaled`) whose
        ``N_L`` is not a multiple of 36 gets ``ceil(N_L / 36)`` types, so its host
        layers produce up to 35 capsules more than it routes.
        """
        cells = net.primary_grid ** 2
        return cls(name=net.name, batch=batch or net.batch, in_channels=net.in_channels,
                   in_size=28, conv_kernel=9, conv_channels=256, prim_kernel=9,
                   prim_stride=2, types=-(-net.n_l // cells), c_l=net.c_l, n_h=net.n_h,
                   c_h=net.c_h)

    @classmethod
    def digits(cls, batch: int = 100) -> HostNet:
        """The trained digits network (:mod:`pimforge.sim.capsnet.digits_net`), no decoder."""
        return cls(name="digits", batch=batch, in_channels=1, in_size=8, conv_kernel=3,
                   conv_channels=32, prim_kernel=3, prim_stride=1, types=dn.TYPES,
                   c_l=dn.C_L, n_h=dn.N_H, c_h=dn.C_H, decoder=())


# --------------------------------------------------------------------------- layers

def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int = 1,
           chunk: int = 16) -> np.ndarray:
    """Valid 2-D convolution (cross-correlation) by im2col + matmul, float32.

    ``x`` is ``(N, C, H, W)``, ``w`` ``(C_out, C, k, k)``, ``b`` ``(C_out,)``;
    images are processed *chunk* at a time so the im2col matrix stays small.
    """
    x = np.asarray(x, np.float32)
    w = np.asarray(w, np.float32)
    n, c = x.shape[:2]
    co, ci, k, k2 = w.shape
    if ci != c or k != k2:
        raise PimforgeError(f"conv2d: weights {w.shape} do not fit input {x.shape}")
    wm = w.reshape(co, -1).T                                   # C*k*k, C_out
    outs = []
    for s in range(0, n, chunk):
        win = sliding_window_view(x[s:s + chunk], (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
        m, ho, wo = win.shape[0], win.shape[2], win.shape[3]
        cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(m * ho * wo, c * k * k)
        out = cols @ wm + np.asarray(b, np.float32)
        outs.append(out.reshape(m, ho, wo, co).transpose(0, 3, 1, 2))
    return np.ascontiguousarray(np.concatenate(outs)) if outs else np.zeros((0, co, 0, 0),
                                                                           np.float32)


def conv2d_loop(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int = 1) -> np.ndarray:
    """The same convolution by explicit loops in float64 (slow; reference for tests)."""
    n, c, h, wd = x.shape
    co, _, k, _ = w.shape
    ho, wo = (h - k) // stride + 1, (wd - k) // stride + 1
    out = np.zeros((n, co, ho, wo))
    for i in range(n):
        for o in range(co):
            for y in range(ho):
                for z in range(wo):
                    acc = float(b[o])
                    for ch in range(c):
                        for dy in range(k):
                            for dz in range(k):
                                acc += float(x[i, ch, y * stride + dy, z * stride + dz]) * float(
                                    w[o, ch, dy, dz])
                    out[i, o, y, z] = acc
    return out


def squash(s: np.ndarray) -> np.ndarray:
    """``|s|^2 / (1 + |s|^2) * s / |s|`` along the last axis (0 for a zero vector)."""
    n = np.sum(s * s, axis=-1, keepdims=True)
    return (s * (np.sqrt(n) / (1.0 + n))).astype(s.dtype)


def init_weights(hn: HostNet, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded He-normal float32 weights (zero biases) of every host layer of *hn*."""
    rng = np.random.default_rng(seed)

    def he(shape, fan_in):
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), shape).astype(np.float32)

    k1, k2 = hn.conv_kernel, hn.prim_kernel
    wts = {"conv1_w": he((hn.conv_channels, hn.in_channels, k1, k1), hn.in_channels * k1 * k1),
           "conv1_b": np.zeros(hn.conv_channels, np.float32),
           "prim_w": he((hn.types * hn.c_l, hn.conv_channels, k2, k2),
                        hn.conv_channels * k2 * k2),
           "prim_b": np.zeros(hn.types * hn.c_l, np.float32)}
    dims = _decoder_dims(hn)
    for i, (a, o) in enumerate(zip(dims[:-1], dims[1:])):
        wts[f"fc{i}_w"] = he((a, o), a)
        wts[f"fc{i}_b"] = np.zeros(o, np.float32)
    return wts


def digits_weights() -> dict[str, np.ndarray]:
    """The trained host-layer weights of the digits network, as float32."""
    m = load_trained()
    return {k: getattr(m, k).astype(np.float32)
            for k in ("conv1_w", "conv1_b", "prim_w", "prim_b")}


def primary_capsules(x: np.ndarray, wts: dict, hn: HostNet) -> np.ndarray:
    """Conv + ReLU + PrimaryCaps + squash: ``u`` of shape ``(N, N_L, C_L)`` (float32)."""
    x = np.asarray(x, np.float32)
    exp = (hn.in_channels, hn.in_size, hn.in_size)
    if x.ndim != 4 or x.shape[1:] != exp:
        raise PimforgeError(f"{hn.name}: input must be (N, {exp[0]}, {exp[1]}, {exp[2]}), "
                            f"not {x.shape}")
    a1 = np.maximum(conv2d(x, wts["conv1_w"], wts["conv1_b"]), 0.0)
    h2 = conv2d(a1, wts["prim_w"], wts["prim_b"], stride=hn.prim_stride)
    n, g = x.shape[0], hn.grid
    p = h2.reshape(n, hn.types, hn.c_l, g, g).transpose(0, 1, 3, 4, 2).reshape(n, hn.n_l, hn.c_l)
    return squash(p)


def _decoder_dims(hn: HostNet) -> list[int]:
    return [hn.n_h * hn.c_h, *hn.decoder, hn.pixels] if hn.decoder else []


def decoder_forward(v: np.ndarray, wts: dict, hn: HostNet,
                    labels: np.ndarray | None = None) -> np.ndarray:
    """Reconstruction ``(N, pixels)`` from the output capsules ``v`` ``(N, N_H, C_H)``.

    All capsules but the one of *labels* (default: the longest) are masked to 0.
    """
    if not hn.decoder:
        raise PimforgeError(f"{hn.name} has no decoder")
    v = np.asarray(v, np.float32)
    if labels is None:
        labels = np.argmax(np.sum(v * v, axis=-1), axis=1)
    mask = np.zeros(v.shape[:2], np.float32)
    mask[np.arange(len(v)), labels] = 1.0
    h = (v * mask[:, :, None]).reshape(len(v), -1)
    nl = len(_decoder_dims(hn)) - 1
    for i in range(nl):
        h = h @ wts[f"fc{i}_w"] + wts[f"fc{i}_b"]
        h = np.maximum(h, 0.0) if i < nl - 1 else 1.0 / (1.0 + np.exp(-h))
    return h.astype(np.float32)


def host_forward(x: np.ndarray, wts: dict, hn: HostNet) -> np.ndarray:
    """The pre-routing host layers (alias of :func:`primary_capsules`)."""
    return primary_capsules(x, wts, hn)


# --------------------------------------------------------------------------- costs

def host_layers(hn: HostNet | CapsNetSpec) -> list[HostLayer]:
    """Per-layer FLOPs, MACs and bytes of *hn* for one batch (see the module doc)."""
    if isinstance(hn, CapsNetSpec):
        hn = HostNet.from_spec(hn)
    b, cin, k1, c1 = hn.batch, hn.in_channels, hn.conv_kernel, hn.conv_channels
    o1 = hn.conv_out * hn.conv_out
    pc, g2 = hn.types * hn.c_l, hn.grid * hn.grid
    k2 = hn.prim_kernel
    conv_macs = k1 * k1 * cin * c1 * o1 * b
    prim_macs = k2 * k2 * c1 * pc * g2 * b
    layers = [
        HostLayer("Conv1", "pre", 2 * conv_macs, conv_macs,
                  W * (k1 * k1 * cin * c1 + c1), W * b * hn.pixels, W * b * c1 * o1),
        HostLayer("PrimaryCaps+squash", "pre", 2 * prim_macs + b * hn.n_l * (3 * hn.c_l + 3),
                  prim_macs, W * (k2 * k2 * c1 * pc + pc), W * b * c1 * o1,
                  W * b * hn.n_l * hn.c_l)]
    dims = _decoder_dims(hn)
    if dims:
        fc = list(zip(dims[:-1], dims[1:]))
        macs = sum(b * i * o for i, o in fc)
        layers.append(HostLayer("FC decoder", "post", sum(2 * b * i * o + b * o for i, o in fc),
                                macs, W * sum(i * o + o for i, o in fc),
                                W * sum(b * i for i, _ in fc), W * sum(b * o for _, o in fc)))
    return layers


def host_times(hn: HostNet | CapsNetSpec, gpu=None) -> dict:
    """Roofline times (s) of the host layers on *gpu* (default P100): per layer, pre, post."""
    gpu = gpu or P100
    ls = host_layers(hn)
    per = {layer.name: layer.time_s(gpu) for layer in ls}
    return {"layers": per, "gpu": gpu.name,
            "pre_s": sum(layer.time_s(gpu) for layer in ls if layer.stage == "pre"),
            "post_s": sum(layer.time_s(gpu) for layer in ls if layer.stage == "post")}
