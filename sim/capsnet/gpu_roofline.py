"""A roofline MODEL of the paper's GPU baseline -- not a measurement.

PIM-CapsNet compares against CapsNet inference on a Tesla P100 (Table 4:
3584 FP32 lanes at 1190 MHz, HBM at 320 GB/s) and discusses a V100.  No GPU
is run here: every kernel is charged ``max(FLOPs / peak, bytes / bandwidth)``
and kernels run one after another.

Peaks used (:data:`GPUS`, the one description of the modelled GPUs; the
eager-PyTorch model :mod:`pimforge.sim.capsnet.gpu_eager` uses the same):

* ``P100-320`` (:data:`P100`): 3584 lanes x 2 FLOP (FMA) x 1.190 GHz = 8.53
  TFLOP/s FP32; 320 GB/s, the paper's Table 4 baseline memory.
* ``P100-732`` (:data:`P100_HBM2`): the same lanes and clock with the 732 GB/s
  of a shipping P100's HBM2 (NVIDIA's P100 whitepaper, the paper's ref. [65]).
  Only the bandwidth differs, so the pair shows what the paper's 320 GB/s
  costs; the shipping boost clock (up to 1.48 GHz) would change only
  compute-bound kernels, and the routing kernels are memory bound.
* ``V100``: 5120 lanes x 2 FLOP x 1.530 GHz = 15.67 TFLOP/s FP32; 900 GB/s.

Counting rules (from the shapes, 4-byte FP32 words):

* one multiply or add = 1 FLOP; ``exp``, divide and square root = 1 FLOP each;
* every routing equation is its own kernel that reads its inputs from DRAM
  once and writes its outputs once: the intermediates (``u_hat`` alone is
  ``B N_L N_H C_H`` words) do not fit on chip (the paper's Sec. 3.2), but
  perfect reuse inside a kernel is assumed, so the model is optimistic: it is
  a lower bound on the GPU's time (no launch cost, nothing materialized
  between equations; the eager model charges both);
* the routing follows Algorithm 1: Eq. 1 once, then Eq. 5, 2, 3, 4 per iteration;
* the surrounding layers follow the structure assumed in
  :mod:`pimforge.sim.capsnet.networks` (Conv 9x9x256 on 28x28xC, PrimeCaps
  9x9 stride 2 with ``N_L`` capsules of 8 on a 6x6 grid plus their squash,
  FC decoder C_H N_H -> 512 -> 1024 -> 784 C).
"""

from __future__ import annotations

from dataclasses import dataclass

from .networks import NETWORKS, CapsNetSpec, network

__all__ = ["GPU", "P100", "P100_HBM2", "V100", "GPUS", "Kernel", "routing_kernels",
           "network_kernels", "Roofline", "roofline", "roofline_table"]

W = 4  # bytes per FP32 word


@dataclass(frozen=True)
class GPU:
    """Peak FP32 rate (FLOP/s) and DRAM bandwidth (bytes/s) of a modelled GPU."""

    name: str
    peak_flops: float
    bandwidth: float

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory to compute."""
        return self.peak_flops / self.bandwidth


#: The paper's baseline (Table 4: 3584 lanes at 1190 MHz, HBM at 320 GB/s).
P100 = GPU("P100-320", 3584 * 2 * 1.190e9, 320e9)
#: The same GPU with the 732 GB/s HBM2 a shipping P100 has.
P100_HBM2 = GPU("P100-732", 3584 * 2 * 1.190e9, 732e9)
V100 = GPU("V100", 5120 * 2 * 1.530e9, 900e9)
GPUS = (P100, P100_HBM2, V100)


@dataclass(frozen=True)
class Kernel:
    """One kernel's work: FLOPs and DRAM bytes; ``count`` launches of it."""

    name: str
    flops: int
    bytes: int
    count: int = 1
    routing: bool = True

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    def time_s(self, gpu: GPU) -> float:
        return self.count * max(self.flops / gpu.peak_flops, self.bytes / gpu.bandwidth)

    def bound(self, gpu: GPU) -> str:
        return "compute" if self.intensity >= gpu.ridge else "memory"


def routing_kernels(net: CapsNetSpec) -> list[Kernel]:
    """Per-equation kernels of the routing procedure (Eq. 1 once, Eq. 5/2/3/4 per iteration)."""
    b, nl, nh, cl, ch, it = net.batch, net.n_l, net.n_h, net.c_l, net.c_h, net.iterations
    return [
        Kernel("Eq.1 u_hat = W u", b * nl * nh * ch * (2 * cl - 1),
               W * (b * nl * cl + nl * nh * ch * cl + b * nl * nh * ch)),
        Kernel("Eq.5 c = softmax(b)", nl * nh + nl * (nh - 1) + nl * nh,
               W * (2 * nl * nh), count=it),
        Kernel("Eq.2 s = sum c u_hat", b * nh * ch * (2 * nl - 1),
               W * (b * nl * nh * ch + nl * nh + b * nh * ch), count=it),
        Kernel("Eq.3 v = squash(s)", b * nh * (3 * ch + 3),
               W * (2 * b * nh * ch), count=it),
        Kernel("Eq.4 b += sum_k v.u_hat", b * nl * nh * (2 * ch - 1) + b * nl * nh,
               W * (b * nl * nh * ch + b * nh * ch + 2 * nl * nh), count=it),
    ]


def network_kernels(net: CapsNetSpec) -> list[Kernel]:
    """The whole inference: Conv, PrimeCaps (+ squash), the routing kernels, the FC decoder."""
    b, nl, nh, cin = net.batch, net.n_l, net.n_h, net.in_channels
    pc = nl * net.c_l // 36                    # PrimeCaps output channels on the 6x6 grid
    conv1 = Kernel("Conv1 9x9x256", 2 * 81 * cin * 256 * 400 * b,
                   W * (b * 784 * cin + 81 * cin * 256 + 256 + b * 256 * 400), routing=False)
    prim = Kernel("PrimeCaps 9x9/2 + squash",
                  2 * 81 * 256 * pc * 36 * b + b * nl * (3 * net.c_l + 3),
                  W * (b * 256 * 400 + 81 * 256 * pc + pc + b * nl * net.c_l), routing=False)
    fc = [(net.c_h * nh, 512), (512, 1024), (1024, 784 * cin)]
    dec = Kernel("FC decoder", sum(2 * b * i * o + b * o for i, o in fc),
                 W * sum(i * o + o + b * (i + o) for i, o in fc), routing=False)
    return [conv1, prim, *routing_kernels(net), dec]


@dataclass(frozen=True)
class Roofline:
    """Modelled times (seconds) of one network on one GPU."""

    network: str
    gpu: str
    routing_s: float
    total_s: float
    routing_flops: int
    routing_bytes: int

    @property
    def routing_share(self) -> float:
        return self.routing_s / self.total_s


def roofline(net: CapsNetSpec | str, gpu: GPU = P100) -> Roofline:
    if isinstance(net, str):
        net = network(net)
    ks = network_kernels(net)
    rk = [k for k in ks if k.routing]
    return Roofline(network=net.name, gpu=gpu.name,
                    routing_s=sum(k.time_s(gpu) for k in rk),
                    total_s=sum(k.time_s(gpu) for k in ks),
                    routing_flops=sum(k.flops * k.count for k in rk),
                    routing_bytes=sum(k.bytes * k.count for k in rk))


def roofline_table(nets: list[CapsNetSpec | str] | None = None,
                   gpus: tuple[GPU, ...] = GPUS) -> str:
    """Text table of the modelled routing and whole-inference times (ms)."""
    nets = [network(n) if isinstance(n, str) else n for n in (nets or NETWORKS)]
    head = (f"{'network':<10} {'GFLOP RP':>9} {'GB RP':>7} "
            + " ".join(f"{g.name + ' RP ms':>15} {g.name + ' all ms':>16} {'RP %':>5}"
                       for g in gpus))
    lines = ["GPU roofline MODEL (not measured): " + "; ".join(
        f"{g.name} {g.peak_flops / 1e12:.2f} TFLOP/s, {g.bandwidth / 1e9:.0f} GB/s" for g in gpus),
        head, "-" * len(head)]
    for n in nets:
        rs = [roofline(n, g) for g in gpus]
        lines.append(f"{n.name:<10} {rs[0].routing_flops / 1e9:>9.3f} "
                     f"{rs[0].routing_bytes / 1e9:>7.3f} " + " ".join(
                         f"{1e3 * r.routing_s:>15.3f} {1e3 * r.total_s:>16.3f} "
                         f"{100 * r.routing_share:>5.1f}" for r in rs))
    return "\n".join(lines)


if __name__ == "__main__":
    print(roofline_table())
