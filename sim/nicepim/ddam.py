"""A DDAM-style pipelined mapping (NicePIM Sec. VIII-D, Fig. 11; DDAM is the paper's ref. [47]).

As the paper describes DDAM: the network is cut into parts, each part runs on its own
region of the PIM-node array, and the parts form a pipeline over a stream of samples;
a dynamic program balances the regions' loads for throughput. It does not consider
data layouts (one layout for all tensors, the best of NCHW, NHWC, NCHW[C8] by
throughput) nor parallelism between branches (the layers are one chain in topological
order; a skip connection is a transfer from an earlier stage's region).

What this module builds, for ``S`` stages:

1. every layer's load is its node-cycles on the whole array (the baseline's
   per-layer cost times the nodes), the chain is cut into ``S`` contiguous stages
   minimizing the largest stage load (the min-max linear partition, solved exactly
   by bisection on the bottleneck with a greedy feasibility check); then again, twice,
   with each layer's node-cycles on the region the last cut gave it;
2. the regions are cut from the array by the slicing tree PIM-Mapper uses for
   branches (:func:`~.branch_regions`), each in proportion to its stage's load;
3. a stage's layers run one after the other on its region, each with its fastest LM
   (the layer's own data sharing counted) and, by Algorithm 2's DP on that one region,
   the WRs of least stage time whose weights fit a node's DRAM (a node stores only
   its stage's weights); each layer's inputs are moved from its predecessors' nodes
   (:func:`~.redistribution`, also across regions).

The pipeline's period is its slowest stage; with a batch of ``b`` samples the
pipeline takes ``(S - 1 + b)`` periods, so the throughput at the paper's largest
batch (16) is ``16 / ((S + 15) period)`` and the latency of one sample is the sum of
the stage times. Stages run at once, so their transfers would share links; that
contention between stages is not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from pimforge.gen.errors import CapacityError
from pimforge.rtl.nicepim.params import Layout

from .mapcost import NodeModel
from .mapper import baseline_map
from .mapspace import LAYOUTS
from .movement import Placement, redistribution
from .networks import Network
from .selection import branch_regions, layer_candidates, mapping_select

__all__ = ["PipelineMapping", "ddam_map", "min_max_split"]


def min_max_split(loads: Sequence[float], parts: int) -> list[int]:
    """Cut *loads* into at most *parts* contiguous non-empty groups with the least
    largest group sum; returns the groups' first indices (the first is 0)."""
    if parts < 1 or not loads:
        raise ValueError("min_max_split needs a load and at least one part")

    def greedy(limit: float) -> list[int] | None:
        starts, acc = [0], 0.0
        for i, v in enumerate(loads):
            if v > limit:
                return None
            if acc + v > limit:
                starts.append(i)
                acc = 0.0
            acc += v
        return starts if len(starts) <= parts else None

    lo, hi = max(loads), float(sum(loads))
    for _ in range(100):
        if hi - lo <= 1e-9 * max(1.0, hi):
            break
        mid = (lo + hi) / 2
        if greedy(mid) is None:
            lo = mid
        else:
            hi = mid
    out = greedy(hi)
    assert out is not None
    return out


@dataclass
class PipelineMapping:
    """A pipelined mapping: its stages, their regions and times."""

    network: str
    layout: str
    stages: list[dict] = field(default_factory=list)
    energy_pj: float = 0.0            # of one sample

    @property
    def period_cycles(self) -> float:
        return max(s["cycles"] for s in self.stages)

    @property
    def latency_cycles(self) -> float:
        return float(sum(s["cycles"] for s in self.stages))

    def throughput(self, batch: int) -> float:
        """Samples per cycle for a batch of *batch* samples through the pipeline."""
        return batch / ((len(self.stages) - 1 + batch) * self.period_cycles)

    def to_json(self) -> dict:
        return {"network": self.network, "layout": self.layout, "stages": self.stages,
                "energy_pj": self.energy_pj, "period_cycles": self.period_cycles,
                "latency_cycles": self.latency_cycles}


def _stage_counts(nodes: int, layers: int) -> list[int]:
    out = set()
    s = 2
    while s <= min(nodes, layers):
        out.add(s)
        s = s + 1 if s < 8 else int(s * 1.5)
    return sorted(out)


def ddam_map(net: Network, cfg, *, stages: Sequence[int] | None = None, batch: int = 16,
             rounds: int = 2, model: NodeModel | None = None) -> PipelineMapping:
    """The DDAM-style pipeline of highest throughput at *batch* over the stage counts
    *stages* (by default 2 to 8, then growing by half, up to the nodes and layers: a
    pipeline has at least two parts) and the three layouts."""
    n = cfg.nicepim
    array = (n.na_rows, n.na_cols)
    model = model or NodeModel(cfg)
    lays = [lay for lay in net.layers if lay.kind != "input"]
    best = None
    for lo in LAYOUTS:
        base = baseline_map(net, cfg, lo, lm_goal="full", model=model)
        load = [base.layers[lay.name]["cycles"] * n.na_rows * n.na_cols + 1.0 for lay in lays]
        layouts = {lay.name: lo for lay in net.layers}
        cache = model.memo      # the candidates, keyed by layer shape and layouts
        for s in stages or _stage_counts(n.na_rows * n.na_cols, len(lays)):
            est = load
            for _ in range(1 + rounds):
                starts = min_max_split(est, s)
                ends = [*starts[1:], len(lays)]
                groups = [lays[a:b] for a, b in zip(starts, ends, strict=True)]
                regs = branch_regions(array, [sum(est[a:b])
                                               for a, b in zip(starts, ends, strict=True)])
                if any(h < 1 or w < 1 for _, _, h, w in regs):
                    break
                try:
                    pm = _evaluate(net, model, array, n, groups, regs, layouts, cache)
                except CapacityError:
                    break
                pm.layout = Layout(lo).name
                if best is None or pm.throughput(batch) > best.throughput(batch):
                    best = pm
                # the next balance: each layer's node-cycles on the region it got
                est = [c * st["region"][2] * st["region"][3] + 1.0
                       for st in pm.stages for c in st["layer_cycles"]]
    if best is None:
        raise CapacityError(f"{net.name} fits no pipelined mapping of the array")
    return best


def _evaluate(net, model, array, n, groups, regs, layouts, cache) -> PipelineMapping:
    pm = PipelineMapping(net.name, "")
    placed: dict[str, Placement] = {}
    energy = 0.0
    for group, region in zip(groups, regs, strict=True):
        _, _, h, w = region
        wrs = sorted({1, h * w} | {2 ** i for i in range(8) if 2 ** i <= h * w})
        cands = [layer_candidates(model, lay, region, wrs, layouts, cache)
                 for lay in group]
        _, _, pick = mapping_select([[[cands]]], n.node_bytes)
        cycles = 0.0
        per = []
        for lay, cs, ci in zip(group, cands, pick[0][0], strict=True):
            c = cs[ci]
            pl = Placement(lay, c.part, tuple(region))
            preds = [placed[p] for p in lay.preds if p in placed]
            move, bit_hops = redistribution(model, array, preds, pl)
            placed[lay.name] = pl
            cycles += c.perf + move
            per.append(c.perf + move)
            energy += c.energy * h * w + bit_hops * n.noc_pj_per_bit_hop
        pm.stages.append({"region": list(region), "layers": [lay.name for lay in group],
                          "cycles": cycles, "layer_cycles": per})
    pm.energy_pj = energy
    if not math.isfinite(pm.period_cycles):
        raise CapacityError("a stage does not fit")
    return pm
