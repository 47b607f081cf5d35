"""Operation-wise on-chip memory profiles of CapsNet and DeepCaps (DESCNet Sec. IV).

Every number here is computed from the layer shapes by a model of a
CapsAcc-style 16x16 MAC array (DESCNet Sec. II-B): data enter the rows,
weights are loaded into the PEs column by column (weight-stationary tiles of
16 reduction elements x 16 outputs), partial sums run down the columns into
the accumulators. For each operation *i* the model gives the on-chip usage
``D_i``, ``W_i``, ``A_i`` (bytes of the data memory, weight memory and
accumulators), their read and write counts (values), the cycles, and the
off-chip reads and writes of Eq. 3-4.

The dataflow model (documented because the paper gives its results only as
bar charts, Fig. 9-11):

* data and weights are 8 bit, accumulator entries 32 bit (``ACC_BYTES``);
  values that leave the accumulators pass the activation unit and are stored
  as 8 bit.
* **convolutions** (Conv1, PrimaryCaps, ConvCaps2D): loop over groups of 16
  output channels (the columns), then over reduction tiles of 16 elements of
  ``K*K*C`` (the rows); each weight tile is loaded once (16 cycles) and the
  ``Ho*Wo`` pixel vectors stream through it. The whole input map stays in the
  data memory (it is reused by every output group, so it is read from DRAM
  once); the weight memory holds two tiles (the active one and the prefetched
  next one); the accumulators hold the ``Ho*Wo*16`` partial sums of the
  active output group.
* **votes** (ClassCaps, ConvCaps3D): prediction vectors ``u_hat = W u`` are
  computed like a convolution with ``M`` streamed vectors; the results are
  kept on chip in the weight memory, from where the dynamic routing uses them
  as stationary weights (the CapsAcc reuse of the predictions).
* **dynamic routing**: three iterations of *Sum+Squash* (``s_j = sum_i c_ij
  u_hat_ij``, ``v_j = squash(s_j)``) and *Update+Softmax* (``b_ij += u_hat_ij
  . v_j``, ``c = softmax(b)``), six operations as in the paper. ``u_hat``
  stays in the weight memory, ``c`` and ``v`` in the data memory, ``s`` and
  the logits ``b`` (which persist between iterations) in the accumulators.
* cycles per tile: 16 weight-load cycles plus one per streamed vector, and a
  31-cycle fill/drain of the 16x16 pipeline per output group; squash and
  softmax use one unit per column (16 values per cycle).

Off-chip accesses (Appendix A): ``RD_off_i = (WR_D + WR_W)_i`` counting the
writes that come from DRAM (Eq. 3), and ``WR_off_i`` is the output of *i* that
the next operation loads into its data memory (Eq. 4, read as the write count
``WR_D`` of *i+1*: the paper writes ``RD_D`` there, but with this dataflow's
reuse the read count would count every input value once per output group).
Routing reads DRAM only in its first operation
(the initial coupling coefficients) and writes only in its last (``v``).
DeepCaps' skip connections are added by preloading the accumulators of the
third layer of each cell with the skip branch's output (an off-chip read
counted with Eq. 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.errors import UnknownNameError

__all__ = [
    "ACC_BYTES",
    "ARRAY",
    "DATA_BYTES",
    "FREQ_MHZ",
    "NETS",
    "WEIGHT_BYTES",
    "Op",
    "Profile",
    "profile",
]

ARRAY = 16          # CapsAcc NP array: 16 x 16 PEs
DATA_BYTES = 1      # 8-bit data
WEIGHT_BYTES = 1    # 8-bit weights and stored predictions
ACC_BYTES = 4       # 32-bit accumulator entries
LOAD = ARRAY        # cycles to load one weight tile (one row per cycle)
PIPE = 2 * ARRAY - 1  # fill/drain of the systolic pipeline per output group
FREQ_MHZ = 250.0    # CapsAcc clock (DATE 2019)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Op:
    """One operation of the inference (one bar of Fig. 9-11)."""

    name: str
    kind: str
    D: int           # bytes of the data memory in use
    W: int           # bytes of the weight memory in use
    A: int           # bytes of the accumulators in use
    rd: tuple[int, int, int]   # reads of (D, W, A), in values
    wr: tuple[int, int, int]   # writes of (D, W, A), in values
    cycles: int
    macs: int
    fill: tuple[int, int, int] = (0, 0, 0)   # writes of (D, W, A) that come from DRAM
    out_offchip: int = 0                      # values this op sends to DRAM itself


@dataclass
class Profile:
    """The operation sequence of one network, with numpy views for the DSE."""

    net: str
    ops: list[Op]
    freq_mhz: float = FREQ_MHZ
    usage: np.ndarray = field(init=False)     # (n_ops, 3) bytes: D, W, A
    reads: np.ndarray = field(init=False)     # (n_ops, 3)
    writes: np.ndarray = field(init=False)    # (n_ops, 3)
    cycles: np.ndarray = field(init=False)    # (n_ops,)
    offchip_reads: np.ndarray = field(init=False)
    offchip_writes: np.ndarray = field(init=False)

    def __post_init__(self):
        self.usage = np.array([[o.D, o.W, o.A] for o in self.ops], dtype=np.int64)
        self.reads = np.array([o.rd for o in self.ops], dtype=np.int64)
        self.writes = np.array([o.wr for o in self.ops], dtype=np.int64)
        self.cycles = np.array([o.cycles for o in self.ops], dtype=np.int64)
        # Eq. 3: what an op writes into the on-chip memories from DRAM.
        fills = np.array([o.fill for o in self.ops], dtype=np.int64)
        self.offchip_reads = fills.sum(axis=1)
        # Eq. 4: an op writes to DRAM the output the next one loads (recorded
        # per op by the network builder) and nothing while routing on chip.
        self.offchip_writes = np.array([o.out_offchip for o in self.ops], dtype=np.int64)

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.ops]

    @property
    def seconds(self) -> np.ndarray:
        return self.cycles / (self.freq_mhz * 1e6)

    @property
    def total_seconds(self) -> float:
        return float(self.seconds.sum())

    @property
    def macs(self) -> int:
        return sum(o.macs for o in self.ops)

    def table(self) -> str:
        head = (f"{'op':14s} {'D[B]':>9s} {'W[B]':>9s} {'A[B]':>9s} {'cycles':>10s} "
                f"{'rdD':>10s} {'rdW':>10s} {'rdA':>10s} {'wrD':>9s} {'wrW':>9s} {'wrA':>9s} "
                f"{'offRD':>9s} {'offWR':>9s}")
        rows = [head]
        for k, o in enumerate(self.ops):
            rows.append(f"{o.name:14s} {o.D:9d} {o.W:9d} {o.A:9d} {o.cycles:10d} "
                        f"{o.rd[0]:10d} {o.rd[1]:10d} {o.rd[2]:10d} {o.wr[0]:9d} {o.wr[1]:9d} "
                        f"{o.wr[2]:9d} {self.offchip_reads[k]:9d} {self.offchip_writes[k]:9d}")
        return "\n".join(rows)


def conv(name: str, h: int, w: int, c: int, k: int, s: int, f: int, *, pad: bool,
         squash_out: bool = False, preload_acc: bool = False) -> Op:
    """A convolution on the array (Conv1, PrimaryCaps, ConvCaps2D)."""
    ho = (h - 1) // s + 1 if pad else (h - k) // s + 1
    wo = (w - 1) // s + 1 if pad else (w - k) // s + 1
    m, red = ho * wo, k * k * c
    r, g = _cdiv(red, ARRAY), _cdiv(f, ARRAY)
    cycles = g * (r * (LOAD + m) + PIPE)
    if squash_out:
        cycles += _cdiv(m * f, ARRAY)
    n_in, n_w, n_out = h * w * c, red * f, m * f
    return Op(
        name, "conv",
        D=n_in * DATA_BYTES, W=2 * ARRAY * ARRAY * WEIGHT_BYTES, A=m * ARRAY * ACC_BYTES,
        rd=(g * m * red, n_w, n_out * r),
        wr=(n_in, n_w, n_out * r),
        cycles=cycles, macs=m * red * f,
        fill=(n_in, n_w, n_out if preload_acc else 0), out_offchip=n_out)


def votes(name: str, m: int, k: int, n: int, n_weights: int, n_in_values: int) -> Op:
    """Prediction vectors: ``m`` input vectors of ``k`` elements, ``n`` outputs each.

    ``n_weights`` is the number of distinct weights (``m*k*n`` for ClassCaps,
    where every input capsule has its own matrices; ``k*n`` for the shared 3D
    kernel). The ``m*n`` predictions are stored in the weight memory.
    """
    r, g = _cdiv(k, ARRAY), _cdiv(n, ARRAY)
    shared = n_weights < m * k * n
    n_pred = m * n
    if shared:      # one kernel: weight-stationary tiles, vectors stream through
        cycles = g * (r * (LOAD + m) + PIPE)
        acc = m * ARRAY * ACC_BYTES
        w_tiles = 2 * ARRAY * ARRAY
        d_reads = g * m * k
    else:           # per-vector matrices: one tile load per vector and group
        cycles = m * g * r * (LOAD + 1) + PIPE
        acc = 2 * n * ACC_BYTES     # one vector's predictions, double-buffered
        w_tiles = 2 * ARRAY * ARRAY
        d_reads = m * k * g
    return Op(
        name, "votes",
        D=n_in_values * DATA_BYTES, W=w_tiles * WEIGHT_BYTES + n_pred * WEIGHT_BYTES, A=acc,
        rd=(d_reads, n_weights if shared else m * k * n, n_pred * r),
        wr=(n_in_values, n_weights + n_pred, n_pred * r),
        cycles=cycles, macs=m * k * n,
        fill=(n_in_values, n_weights, 0))


def routing(prefix: str, groups: int, n_in: int, n_out: int, dim: int,
            iterations: int = 3) -> list[Op]:
    """Dynamic routing: ``iterations`` x (Sum+Squash, Update+Softmax)."""
    uhat = groups * n_in * n_out * dim
    n_c = groups * n_in * n_out
    n_v = groups * n_out * dim
    ops = []
    for it in range(1, iterations + 1):
        b_bytes = n_c * ACC_BYTES if it > 1 else 0
        r = _cdiv(n_in, ARRAY)
        cyc = groups * n_out * r * _cdiv(dim, ARRAY) * (LOAD + 1) + PIPE + _cdiv(n_v, ARRAY)
        ops.append(Op(
            f"{prefix}Sum{it}", "route",
            D=(n_c + n_v) * DATA_BYTES, W=uhat * WEIGHT_BYTES,
            A=n_v * ACC_BYTES + b_bytes,
            rd=(n_c * _cdiv(dim, ARRAY), uhat, n_v * r + n_v),
            wr=(n_v + (n_c if it == 1 else 0), 0, n_v * r),
            cycles=cyc, macs=uhat,
            fill=(n_c if it == 1 else 0, 0, 0)))
        cyc = (groups * n_out * _cdiv(dim, ARRAY) * r * (LOAD + 1) + PIPE
               + _cdiv(n_c, ARRAY))
        last = it == iterations
        ops.append(Op(
            f"{prefix}Upd{it}", "route",
            D=(n_c + n_v) * DATA_BYTES, W=uhat * WEIGHT_BYTES, A=n_c * ACC_BYTES,
            rd=(n_v * r, uhat, 2 * n_c),
            wr=(n_c, 0, n_c),
            cycles=cyc, macs=uhat,
            out_offchip=n_v if last else 0))
    return ops


def capsnet() -> Profile:
    """Google's CapsNet (Sabour et al. 2017) on 28x28 MNIST."""
    ops = [
        conv("Conv1", 28, 28, 1, 9, 1, 256, pad=False),
        conv("Prim", 20, 20, 256, 9, 2, 256, pad=False, squash_out=True),
        votes("Class", m=1152, k=8, n=10 * 16, n_weights=1152 * 8 * 160, n_in_values=1152 * 8),
        *routing("", 1, 1152, 10, 16),
    ]
    return Profile("capsnet", ops)


def deepcaps() -> Profile:
    """DeepCaps (Rajasegaran et al. 2019) on CIFAR10 resized to 64x64."""
    ops = [conv("Conv2D", 64, 64, 3, 3, 1, 128, pad=True)]
    size, ch = 64, 128
    for cell, out_ch in enumerate((128, 256, 256, 256), start=1):
        half = size // 2
        ops.append(conv(f"C{cell}L1", size, size, ch, 3, 2, out_ch, pad=True, squash_out=True))
        size, ch = half, out_ch
        if cell < 4:
            ops.append(conv(f"C{cell}Skip", size, size, ch, 3, 1, ch, pad=True,
                            squash_out=True))
        else:
            # ConvCaps3D: 32 input capsule types of 8D at each of 4x4 positions,
            # a 3x3x8 kernel shared by all types, 32x8 votes each; routing per position.
            ops.append(votes("C4Caps3D", m=size * size * 32, k=3 * 3 * 8, n=32 * 8,
                             n_weights=3 * 3 * 8 * 32 * 8, n_in_values=size * size * ch))
            ops.extend(routing("C4R", size * size, 32, 32, 8))
        ops.append(conv(f"C{cell}L2", size, size, ch, 3, 1, ch, pad=True, squash_out=True))
        ops.append(conv(f"C{cell}L3", size, size, ch, 3, 1, ch, pad=True, squash_out=True,
                        preload_acc=True))
    n_caps = 8 * 8 * 32 + 4 * 4 * 32     # flattened cells 3 and 4, 8D capsules
    ops.append(votes("Class", m=n_caps, k=8, n=10 * 32, n_weights=n_caps * 8 * 320,
                     n_in_values=n_caps * 8))
    ops.extend(routing("", 1, n_caps, 10, 32))
    return Profile("deepcaps", ops)


NETS = {"capsnet": capsnet, "deepcaps": deepcaps}


def profile(net: str) -> Profile:
    """The profile of ``net`` (``capsnet`` or ``deepcaps``)."""
    try:
        return NETS[net]()
    except KeyError:
        raise UnknownNameError(f"unknown network {net!r}; allowed: "
                               f"{', '.join(sorted(NETS))}") from None

