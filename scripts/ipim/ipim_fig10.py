"""iPIM Fig. 10 on the cube RTL: sensitivity to the registers per PE and the PGSM's size.

    python scripts/ipim/ipim_fig10.py --config ipim_eval --size 32x32 --md out/fig10a.md
    python scripts/ipim/ipim_fig10.py --sweep ipim.pgsm_bytes=2048,4096,8192 --md out/fig10b.md

The paper (Sec. VII-D3) varies the DataRF from 16 to 128 registers and the PGSM from 2 to
8 KiB and normalizes the execution time to the largest (RF 16, 32, 64: 46.8 %, 26.8 %,
9.5 % slower than RF 128; PGSM 2 and 4 KiB: 58.9 % and 39.0 % slower than 8 KiB). Here
each point of ``--sweep FIELD=V1,V2,...`` (default ``ipim.drf_bytes=256,512,1024,2048``:
16, 32, 64 and 128 registers of 16 bytes) is the config with that one field changed: a
cube of its own (built or found in the build cache), every benchmark compiled for it
(a benchmark that does not compile there is reported with the reason, not run) and run
on a scikit-image photograph, its output checked against numpy (a mismatch fails the
script). Per benchmark and point: cycles, static instructions, and the time over the
time at the sweep's last value; per point the geometric mean over the benchmarks that
run at every point, and the performance drop ``1 - t_last / t`` the paper reports.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pimforge.gen.config import load_config, parse_overrides
from pimforge.gen.errors import PimforgeError
from pimforge.sim.ipim.image_benches import PIPELINES
from pimforge.sim.ipim.image_run import compile_bench, run_bench
from pimforge.sim.ipim.lang import CompileError
from pimforge.sim.ipim.photos import load_photo
from pimforge.verif.models.ipim.image import BENCHES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, finish, geomean, md_header, md_row, verdict  # noqa: E402

#: the paper's performance drop against the largest point, by field and value
PAPER_DROP = {"ipim.drf_bytes": {256: 0.468, 512: 0.268, 1024: 0.095},
              "ipim.pgsm_bytes": {2048: 0.589, 4096: 0.390}}


def _sweep(text: str) -> tuple[str, list[int]]:
    field, eq, vals = text.partition("=")
    try:
        values = [int(v) for v in vals.split(",")]
    except ValueError:
        values = []
    if not eq or len(values) < 2 or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"--sweep takes FIELD=V1,V2,... with two or more "
                                         f"distinct integers, not {text!r}")
    return field, values


def _label(field: str, v: int) -> str:
    if field == "ipim.drf_bytes":
        return f"RF {v // 16}"
    if field == "ipim.pgsm_bytes" and v % 1024 == 0:
        return f"PGSM {v // 1024} KiB"
    return f"{field.split('.')[-1]} {v}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="ipim_eval")
    p.add_argument("--sweep", type=_sweep, default=("ipim.drf_bytes", [256, 512, 1024, 2048]),
                   metavar="FIELD=V1,V2,...", help="the field and its values; the last is "
                   "the reference (default ipim.drf_bytes=256,512,1024,2048)")
    p.add_argument("--size", default="32x32", help="WxH of the input (default 32x32)")
    p.add_argument("--photo", default="camera")
    p.add_argument("--bench", action="append", help="only these benchmarks (repeatable)")
    p.add_argument("--stencils", type=int, default=8,
                   help="stages of the stencil chain (default 8 of its 32)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every point (repeatable)")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path, help="write the table as markdown here")
    a = p.parse_args(argv)
    field, values = a.sweep
    check_outputs(p, json=a.json, md=a.md)
    try:
        w, h = (int(v) for v in a.size.split("x"))
        sets = parse_overrides(a.set)
        if field in sets:
            raise ValueError(f"--set {field}: the sweep sets it")
        cfgs = {v: load_config(a.config, {**sets, field: v}) for v in values}
        benches = a.bench or [b for b in BENCHES if b in PIPELINES]
        unknown = [b for b in benches if b not in PIPELINES]
        if unknown:
            raise ValueError(f"--bench {', '.join(unknown)}: the compiler has "
                             f"{', '.join(PIPELINES)}")
    except (ValueError, PimforgeError) as e:
        p.error(str(e))
    params = {"stencil_chain": {"stencils": a.stencils}}
    res: dict = {"config": a.config, "set": sets, "field": field, "values": values,
                 "size": [w, h], "photo": a.photo, "stencils": a.stencils, "runs": {}}
    bad = []
    t0 = time.time()
    for v, cfg in cfgs.items():          # a point's cube is built (or found) once
        for b in benches:
            kw = params.get(b, {})
            try:
                static = len(compile_bench(b, h, w, cfg, **kw).programs[0])
            except CompileError as e:
                res["runs"].setdefault(b, {})[str(v)] = {"error": str(e)}
                print(f"{b:16s} {field}={v}: does not compile ({e})", flush=True)
                continue
            img = load_photo(a.photo, (w, h), BENCHES[b].input_kind)
            r = run_bench(b, img, cfg, **kw)
            res["runs"].setdefault(b, {})[str(v)] = {
                "cycles": r.cycles, "ipc": r.ipc, "static_instructions": static,
                "matches_reference": r.matches_reference}
            if not r.matches_reference:
                bad.append(f"{b}/{v}")
            print(f"{b:16s} {field}={v}: cycles {r.cycles:>9,} static {static:>5} "
                  f"{verdict(r.matches_reference)} ({time.time() - t0:.0f} s)",
                  flush=True)
    ref = str(values[-1])
    lines = [f"{a.config} {w}x{h} `{a.photo}`, {field} swept; cycles (time over the time at "
             f"{_label(field, values[-1])})",
             "", *md_header(["bench", *(_label(field, v) for v in values)])]
    every = []
    for b in benches:
        runs = res["runs"][b]
        base = runs[ref].get("cycles")
        cells = []
        for v in values:
            r = runs[str(v)]
            if "error" in r:
                cells.append("does not compile")
            elif base:
                cells.append(f"{r['cycles']:,} ({r['cycles'] / base:.3f})")
            else:
                cells.append(f"{r['cycles']:,}")
        if all("cycles" in runs[str(v)] for v in values):
            every.append(b)
        lines.append(md_row([b, *cells]))
    res["geomean_time"] = {}
    if every:
        row = []
        for v in values:
            g = geomean(res["runs"][b][str(v)]["cycles"] / res["runs"][b][ref]["cycles"]
                        for b in every)
            res["geomean_time"][str(v)] = g
            paper = PAPER_DROP.get(field, {}).get(v)
            row.append(f"{g:.3f}, drop {1 - 1 / g:.1%}"
                       + (f" (paper {paper:.1%})" if paper is not None else ""))
        lines.append(md_row([f"geomean over {len(every)}", *row]))
    text = "\n".join(lines)
    return finish(text, res, json=a.json, md=a.md, bad=bad, t0=t0)


if __name__ == "__main__":
    sys.exit(main())
