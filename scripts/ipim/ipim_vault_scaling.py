"""Check of the Fig. 6 scaling of ``scripts/ipim/ipim_eval.py`` across vault counts, on the
cube RTL.

    python scripts/ipim/ipim_vault_scaling.py --config ipim_eval --band 32x32 --vaults 1,2,4

``ipim_eval.py`` scales a run to an 8K image on 8 cubes x 16 vaults by the pixels each PE
computes: at a fixed band of pixels per PE, a benchmark's cycles should not depend on
how many vaults share the image, except for the histogram, whose vault 0 adds the other
vaults' partial histograms fetched by ``req`` (a term linear in ``vaults - 1``). Here
each benchmark runs at a fixed band per vault (``--band WxH``: the image is ``W`` wide
and ``H`` rows per vault, the photograph's band repeated once per vault, so every vault
holds the same pixels) on 1, 2 and 4 vaults (``--set ipim.vaults=N`` of the config;
one vault runs as vault 0 of a two-vault cube, the other vault idle and halted, since
the cube RTL needs two). The model's prediction:

- every benchmark but the histogram: ``cycles(N) = cycles(1)``;
- the histogram: ``cycles(N) = cycles(1) + (N - 1) * r``, with the per-vault reduction
  cost ``r = cycles(2) - cycles(1)`` measured on two vaults, so that four vaults are a
  prediction, not a fit.

The table gives measured cycles, the prediction and measured / predicted for every
vault count. Every run is checked against the numpy reference (a mismatch fails the
script).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from pimforge.gen.config import load_config, parse_overrides
from pimforge.gen.errors import PimforgeError
from pimforge.sim.ipim.image_benches import PIPELINES
from pimforge.sim.ipim.image_run import run_bench
from pimforge.sim.ipim.photos import load_photo
from pimforge.verif.models.ipim.image import BENCHES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, finish, md_header, md_row, verdict  # noqa: E402


def predict(bench: str, cycles: dict[int, int]) -> dict[int, float]:
    """The scaling model's cycles for each vault count of *cycles* (module docstring)."""
    c1 = cycles[1]
    if bench != "histogram":
        return {n: float(c1) for n in cycles}
    r = cycles[2] - c1
    return {n: float(c1 + (n - 1) * r) for n in cycles}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="ipim_eval")
    p.add_argument("--band", default="32x32",
                   help="W x rows of the image per vault (default 32x32)")
    p.add_argument("--vaults", default="1,2,4", help="vault counts (must include 1 and 2)")
    p.add_argument("--photo", default="camera")
    p.add_argument("--bench", action="append", help="only these benchmarks (repeatable)")
    p.add_argument("--stencils", type=int, default=8,
                   help="stages of the stencil chain (default 8 of its 32)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every vault count (repeatable)")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path, help="write the table as markdown here")
    a = p.parse_args(argv)
    check_outputs(p, json=a.json, md=a.md)
    bw, bh = (int(v) for v in a.band.split("x"))
    counts = sorted({int(v) for v in a.vaults.split(",")})
    if not {1, 2} <= set(counts):
        p.error("--vaults must include 1 and 2 (the histogram's reduction term is "
                         "measured between them)")
    sets = parse_overrides(a.set)
    if "ipim.vaults" in sets:
        p.error("--set ipim.vaults: give the vault counts with --vaults")
    cfgs = {n: load_config(a.config, {**sets, "ipim.vaults": n}) for n in counts}
    # One vault runs as vault 0 of a two-vault cube (the cube RTL needs two).
    cubes = {n: cfgs[max(n, 2)] if max(n, 2) in cfgs else
             load_config(a.config, {**sets, "ipim.vaults": max(n, 2)}) for n in counts}
    benches = a.bench or [b for b in BENCHES if b in PIPELINES]
    for b in benches:
        if b not in PIPELINES:
            p.error(f"--bench {b}: the compiler has {', '.join(PIPELINES)}")
    res: dict = {"config": a.config, "set": sets, "band": [bw, bh], "photo": a.photo,
                 "stencils": a.stencils, "vaults": counts, "runs": {}}
    bad = []
    t0 = time.time()
    for n in counts:              # a vault count's cube is built (or found) once
        for b in benches:
            band = load_photo(a.photo, (bw, bh), BENCHES[b].input_kind)
            kw = {"stencils": a.stencils} if b == "stencil_chain" else {}
            img = np.concatenate([band] * n, axis=0)
            r = run_bench(b, img, cfgs[n], cube_cfg=None if n >= 2 else cubes[n], **kw)
            res["runs"].setdefault(b, {})[str(n)] = r.to_json()
            if not r.matches_reference:
                bad.append(f"{b}/{n} vaults")
            print(f"{b:14s} {n} vaults {img.shape[1]}x{img.shape[0]} cycles {r.cycles:>9,} "
                  f"{verdict(r.matches_reference)} ({time.time() - t0:.0f} s)",
                  flush=True)
    lines = md_header(["bench", *(f"{n} vault{'s' * (n > 1)}" for n in counts),
                       *(f"predicted {n}" for n in counts if n > 1),
                       *(f"measured / predicted {n}" for n in counts if n > 1)])
    for b in benches:
        cyc = {n: res["runs"][b][str(n)]["cycles"] for n in counts}
        pr = predict(b, cyc)
        res["runs"][b]["predicted"] = pr
        res["runs"][b]["measured_over_predicted"] = {n: cyc[n] / pr[n] for n in counts}
        lines.append(md_row([b, *(f"{cyc[n]:,}" for n in counts),
                             *(f"{pr[n]:,.0f}" for n in counts if n > 1),
                             *(f"{cyc[n] / pr[n]:.3f}" for n in counts if n > 1)]))
    ip = cfgs[1].ipim
    text = (f"{a.config}, {ip.pes} PEs per vault, {bw}x{bh} per vault (`{a.photo}`'s band "
            f"repeated), stencil chain {a.stencils} stages\n\n" + "\n".join(lines))
    return finish(text, res, json=a.json, md=a.md, bad=bad, t0=t0)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PimforgeError as e:          # bad config, a benchmark that does not fit
        sys.exit(f"ipim_vault_scaling: {e}")
