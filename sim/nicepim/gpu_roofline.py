"""A roofline MODEL of DNN inference on a GPU -- not a measurement.

NicePIM (Sec. VIII-C) compares its design with a Tesla V100. Every layer of
:mod:`pimforge.sim.nicepim.networks` is one kernel taking
``max(FLOPs / peak, bytes / bandwidth) + launch``: FLOPs ``2 MACs`` (a layer without
MACs one per output element and window point), bytes its inputs, output and weights
once each at 2 (FP16) or 4 (FP32) bytes an element, the weights read once per batch (an
attention product's second operand once per sample); ``launch`` is a per-kernel
overhead. The roofline assumes the peaks are reached, so it is optimistic: a lower
bound on a GPU that runs these kernels one after another.

The peaks are :class:`pimforge.sim.capsnet.gpu_roofline.GPU` records (one description
of a modelled GPU for both accelerators); :data:`V100_TENSOR` adds the V100's tensor
cores. ``scripts/gpu/gpu_measure.py`` measures the same networks on a real GPU and
``scripts/gpu/gpu_report.py`` sets this model, at that GPU's measured peaks, beside them.
"""

from __future__ import annotations

from ..capsnet.gpu_roofline import GPU, V100
from .networks import Network

__all__ = ["V100_TENSOR", "BATCHES", "gpu_seconds", "best_per_sample"]

#: The V100's tensor cores: 125 TFLOP/s (FP16 in, FP32 accumulate), the same 900 GB/s.
V100_TENSOR = GPU("V100-tensor", 125e12, V100.bandwidth)
#: Batches the best time per sample is taken over (1 to 1024, as the paper's V100 runs).
BATCHES = tuple(2 ** i for i in range(11))


def gpu_seconds(net: Network, gpu: GPU, word_bytes: int, batch: int, launch_s: float) -> float:
    """Modelled time of one batch of *net* on *gpu* (see the module docstring)."""
    total = 0.0
    for lay in net.layers:
        if lay.kind == "input":
            continue
        if lay.macs:
            flops = 2 * lay.macs * batch
        else:
            flops = lay.out_elems * max(1, lay.r * lay.s) * batch
        acts = (lay.in_elems * max(1, len(lay.preds)) + lay.out_elems) * batch
        weights = lay.weights * batch if lay.dynamic_weights else lay.params
        if lay.dynamic_weights:
            acts -= lay.in_elems * batch            # the operand is counted as its weights
        nbytes = word_bytes * (acts + weights)
        total += max(flops / gpu.peak_flops, nbytes / gpu.bandwidth) + launch_s
    return total


def best_per_sample(net: Network, gpu: GPU, word_bytes: int, launch_s: float,
                    batches=BATCHES) -> tuple[float, int]:
    """``(seconds per sample, batch)`` at the batch of *batches* that gives the least."""
    return min((gpu_seconds(net, gpu, word_bytes, b, launch_s) / b, b) for b in batches)
