"""iPIM's evaluation (Sec. VII) on the cube RTL: Fig. 11, 12 and 13, and Fig. 6 against a
labelled V100 model.

    python scripts/ipim/ipim_eval.py --config ipim_small --size 64x64 --json out/ipim_eval.json

For every benchmark the compiler has, on a scikit-image photograph:

- Fig. 12: cycles of each compiler configuration (``opt``, ``baseline1-4``) on the RTL;
  the speedup of ``opt`` over each baseline, per benchmark and as a geometric mean
  (paper: 3.19x, 2.59x, 2.74x, 1.30x).
- Fig. 13: IPC per vault (paper: 0.63 on average) and the PE units' utilization.
- Fig. 11: the dynamic instruction breakdown by class.
- Fig. 6: iPIM's time on an 8K image (7680x4320) on Table III's 8 cubes x 16 vaults x 32
  PEs, scaled from the run here by the pixels each PE computes (every benchmark's work
  per PE is linear in its band's pixels; the halo exchange adds a per-stage term per
  PE that does not grow with the band; the histogram's cross-vault reduction grows with
  the vaults and is NOT added: scripts/ipim/ipim_vault_scaling.py measures it, 867 cycles per
  extra vault on ipim_eval, which on 128 vaults would add about 1.6 % to the 8K
  histogram's time); the check of that scaling
  is the same benchmark at two sizes here (``--check-size``), whose cycle ratio must
  follow the pixel ratio. Against a V100 model: the roofline of its 900 GB/s HBM2 at
  the 57.55 % DRAM utilization the paper measured, moving the input once and the
  output once, or its FP32 peak (15.7 TFLOPS) on the arithmetic the SIMB program does
  (its executed ``comp`` instructions x 4 lanes, one operation each), whichever takes
  longer: a lower bound on a fused Halide schedule's time (the paper's Fig. 6 GPU is
  measured with nvprof).

Every run is checked against the numpy reference; a mismatch is reported and fails
the script.

``--set`` changes the machine of every benchmark, ``--set-of BENCH:KEY=VALUE`` one
benchmark's (the local Laplacian's program at 64x64 needs more than ipim_eval's 4,096
instructions: ``--set-of local_laplacian:ipim.imem_instructions=16384``, the 256 KiB
VSM of Table III that holds the program, Sec. IV-C); such a benchmark is labelled in
the tables. ``--merge OLD.json`` adds the benchmarks of an earlier run (``--json``) that
this one does not run, so that a long evaluation can be made in parts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from pimforge.gen.config import load_config, parse_overrides
from pimforge.gen.errors import PimforgeError
from pimforge.sim.ipim.backend import OPT_LEVELS
from pimforge.sim.ipim.image_benches import PIPELINES
from pimforge.sim.ipim.image_run import compile_bench, run_bench
from pimforge.sim.ipim.lang import CompileError
from pimforge.sim.ipim.photos import load_photo
from pimforge.verif.models.ipim.image import BENCHES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, finish, geomean, md_header, md_row, verdict  # noqa: E402

PAPER_FIG12 = {"baseline1": 3.19, "baseline2": 2.59, "baseline3": 2.74, "baseline4": 1.30}
PAPER_IPC = 0.63
V100_GBS = 900.0
V100_DRAM_UTIL = 0.5755
V100_TFLOPS = 15.7       # FP32 peak (SXM2), the roofline's compute bound
#: published V100 times of Halide schedules, ms per megapixel, to check the model against:
#: the manually scheduled bilateral grid
V100_PUBLISHED_MS_PER_MP = {"bilateral_grid": 0.045}
K8 = (7680, 4320)
CLASSES = {"comp": ("comp",), "calc_arf": ("calc_arf",), "bank": ("ld_rf", "st_rf"),
           "pgsm": ("ld_pgsm", "st_pgsm", "rd_pgsm", "wr_pgsm"), "vsm": ("rd_vsm", "wr_vsm"),
           "mov": ("mov_arf", "mov_drf", "reset"), "const": ("seti_vsm",),
           "ctrl": ("seti_crf", "calc_crf", "cjump", "jump"), "sync/req": ("sync", "req"),
           "other": ("nop", "halt")}


def _compiles(bench: str, w: int, h: int, cfg, stencils: int) -> bool:
    """Whether *bench* compiles at ``w x h`` for *cfg* (the bilateral grid's replicated
    grids do not fit 64 KiB banks at 64x64); a benchmark that does not is skipped."""
    try:
        compile_bench(bench, h, w, cfg,
                      **({"stencils": stencils} if bench == "stencil_chain" else {}))
    except CompileError as e:
        print(f"{bench}: skipped ({e})", flush=True)
        return False
    return True


def _wh(text: str) -> tuple[int, int]:
    """``WxH`` as ``(w, h)``."""
    try:
        w, h = (int(v) for v in text.split("x"))
    except ValueError:
        raise ValueError(f"a size is WxH, like 64x64, not {text!r}") from None
    if w < 1 or h < 1:
        raise ValueError(f"a size is WxH with W, H >= 1, not {text!r}")
    return w, h


def _label(b: str, size: dict, w: int, h: int, sets: dict | None = None) -> str:
    """The benchmark's name, with its size and machine changes where they are not the
    run's."""
    notes = [] if tuple(size[b]) == (w, h) else [f"{size[b][0]}x{size[b][1]}"]
    notes += [f"{k.split('.')[-1]} {v:,}" if isinstance(v, int) else f"{k.split('.')[-1]} {v}"
              for k, v in (sets or {}).get(b, {}).items()]
    return f"{b} ({', '.join(notes)})" if notes else b


def _img(bench, size, photo):
    return load_photo(photo, size, BENCHES[bench].input_kind)


def _bytes(bench: str, w: int, h: int) -> float:
    """Input + output bytes of *bench* on a ``w x h`` image (the V100 roofline's traffic)."""
    b = BENCHES[bench]
    px = w * h
    inb = px * (1 if b.input_kind == "u8" else 16 if b.input_kind == "rgba" else 4)
    out = b.out_shape(h, w)
    outb = math.prod(out) * 4
    return inb + outb


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="ipim_small")
    p.add_argument("--size", default="64x64")
    p.add_argument("--check-size", default="32x32",
                   help="second size for the scaling check of Fig. 6")
    p.add_argument("--photo", default="camera")
    p.add_argument("--bench", action="append", help="only these benchmarks (repeatable)")
    p.add_argument("--stencils", type=int, default=32,
                   help="stages of the stencil chain (default 32, the benchmark's)")
    p.add_argument("--opt", action="append", help="only these configurations (repeatable)")
    p.add_argument("--size-of", action="append", default=[], metavar="BENCH=WxH",
                   help="run BENCH at its own size (repeatable; its check size is the "
                        "--check-size, or half its size where that is not smaller)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change the machine of every benchmark (repeatable)")
    p.add_argument("--set-of", action="append", default=[], metavar="BENCH:KEY=VALUE",
                   help="change one benchmark's machine (repeatable)")
    p.add_argument("--merge", action="append", type=Path, default=[], metavar="OLD.json",
                   help="add the benchmarks of an earlier --json that this run does not run")
    p.add_argument("--tables-only", action="store_true",
                   help="run nothing: the tables of the --merge files")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path, help="write the tables as markdown here")
    a = p.parse_args(argv)
    check_outputs(p, json=a.json, md=a.md)
    size, check = {}, {}
    try:
        sets = parse_overrides(a.set)
        own: dict = {}
        for item in a.set_of:
            name, colon, kv = item.partition(":")
            if not colon or name not in PIPELINES:
                raise ValueError(f"--set-of {item}: give BENCH:SECTION.FIELD=VALUE with a "
                                 f"compiled benchmark ({', '.join(PIPELINES)})")
            own.setdefault(name, []).append(kv)
        own = {b: parse_overrides(v) for b, v in own.items()}
        cfg = load_config(a.config, sets)
        cfgs = {b: load_config(a.config, {**sets, **own.get(b, {})}) for b in PIPELINES}
        merged = [json.loads(m.read_text()) for m in a.merge]
        w, h = _wh(a.size)
        cw, ch = _wh(a.check_size)
        for item in a.size_of:
            name, _, wh = item.partition("=")
            if name not in PIPELINES:
                raise ValueError(f"--size-of {item}: {name!r} is not a compiled benchmark "
                                 f"({', '.join(PIPELINES)})")
            size[name] = _wh(wh)
        if a.tables_only and not merged:
            raise ValueError("--tables-only makes the tables of --merge files: give one")
    except (ValueError, OSError, PimforgeError) as e:
        p.error(str(e))
    ip = cfg.ipim
    for b in PIPELINES:
        bw, bh = size.setdefault(b, (w, h))
        check[b] = (cw, ch) if cw * ch < bw * bh else (max(1, bw // 2), max(1, bh // 2))
    benches = [] if a.tables_only else a.bench or [b for b in BENCHES
                          if b in PIPELINES and _compiles(b, *size[b], cfgs[b], a.stencils)]
    levels = a.opt or list(OPT_LEVELS)
    res: dict = {"config": a.config, "set": sets, "size": [w, h], "photo": a.photo,
                 "stencils": a.stencils, "runs": {},
                 "sizes": {b: list(size[b]) for b in benches},
                 "check_sizes": {b: list(check[b]) for b in benches},
                 "set_of": {b: own[b] for b in benches if b in own}}
    bad = []
    t0 = time.time()
    for b in benches:
        img = _img(b, size[b], a.photo)
        kw = {"stencils": a.stencils} if b == "stencil_chain" else {}
        res["runs"][b] = {}
        for lv in levels:
            r = run_bench(b, img, cfgs[b], opt=lv, **kw)
            res["runs"][b][lv] = r.to_json()
            if not r.matches_reference:
                bad.append(f"{b}/{lv}")
            print(f"{b:14s} {lv:9s} cycles {r.cycles:>9,} IPC {r.ipc:.3f} "
                  f"{verdict(r.matches_reference)} "
                  f"({time.time() - t0:.0f} s)", flush=True)
        if a.check_size and "opt" in levels:
            r2 = run_bench(b, _img(b, check[b], a.photo), cfgs[b], opt="opt", **kw)
            res["runs"][b]["opt@check"] = r2.to_json()
    for old in merged:          # an earlier part of the evaluation
        if (old["config"], old.get("set", {}), old["photo"], old["stencils"]) != \
                (a.config, sets, a.photo, a.stencils):
            print("--merge: the earlier run had another config, --set, photo or --stencils",
                  file=sys.stderr)
            return 2
        for b, runs in old["runs"].items():
            if b not in res["runs"] and all(lv in runs for lv in levels):
                res["runs"][b] = runs
                res["sizes"][b], res["check_sizes"][b] = old["sizes"][b], old["check_sizes"][b]
                size[b], check[b] = tuple(old["sizes"][b]), tuple(old["check_sizes"][b])
                if b in old.get("set_of", {}):
                    res["set_of"][b] = old["set_of"][b]
    benches = [b for b in BENCHES if b in res["runs"]]
    bad += [f"{b}/{lv}" for b in benches for lv in levels
            if not res["runs"][b][lv]["matches_reference"] and f"{b}/{lv}" not in bad]
    own = res["set_of"]
    lines = []
    # Fig. 12
    if "opt" in levels:
        lines += ["### Fig. 12: compiler configurations (cycles on the cube RTL)", "",
                  *md_header(["bench", *levels])]
        sp = {lv: [] for lv in levels if lv != "opt"}
        for b in benches:
            c = {lv: res["runs"][b][lv]["cycles"] for lv in levels}
            lines.append(md_row([_label(b, size, w, h, own), *(f"{c[lv]:,}" for lv in levels)]))
            for lv in sp:
                sp[lv].append(c[lv] / c["opt"])
        geo = {lv: geomean(v) for lv, v in sp.items()}
        res["fig12_speedup_of_opt"] = geo
        lines += ["", *md_header(["opt vs", "ours (geomean)", "paper"])]
        for lv, g in geo.items():
            lines.append(md_row([lv, f"{g:.2f}x", f"{PAPER_FIG12.get(lv, float('nan')):.2f}x"]))
        # Fig. 13 and 11
        lines += ["", "### Fig. 13: IPC and unit utilization (opt)", "",
                  *md_header(["bench", "IPC", "SIMD", "int ALU", "DataRF", "AddrRF",
                              "bank RD/WR"])]
        ipcs = []
        for b in benches:
            r = res["runs"][b]["opt"]
            u = r["unit_utilization"]
            ipcs.append(r["ipc"])
            lines.append(md_row([_label(b, size, w, h, own), f"{r['ipc']:.3f}",
                                 *(f"{u[k]:.1%}" for k in ("simd", "alu", "drf", "arf", "rdwr"))]))
        res["fig13_mean_ipc"] = sum(ipcs) / len(ipcs)
        lines += [f"| mean | {res['fig13_mean_ipc']:.3f} (paper {PAPER_IPC}) | | | | | |", "",
                  "### Fig. 11: dynamic instruction breakdown (opt, % of executed)", "",
                  *md_header(["bench", *CLASSES])]
        for b in benches:
            cnt = res["runs"][b]["opt"]["instruction_breakdown"]
            tot = sum(cnt.values())
            row = [sum(cnt.get(o, 0) for o in ops) / tot for ops in CLASSES.values()]
            lines.append(md_row([_label(b, size, w, h, own), *(f"{x:.1%}" for x in row)]))
        # Fig. 6
        pes_here = ip.cubes * ip.vaults * ip.pes
        pes_8k = 8 * 16 * 32
        lines += ["", "### Fig. 6: 8K image, Table III machine (scaled) vs a V100 model", "",
                  *md_header(["bench", "cycles here", "check-size ratio (pixels ratio)",
                              "iPIM 8K ms", "V100 model ms", "speedup"])]
        sp6 = []
        gpu_ms = {}
        for b in benches:
            r = res["runs"][b]["opt"]
            c1 = r["cycles"]
            c2 = res["runs"][b].get("opt@check", {}).get("cycles")
            (bw, bh), (bcw, bch) = size[b], check[b]
            px_pe = (bw * bh) / pes_here
            px_pe_8k = (K8[0] * K8[1]) / pes_8k
            t_ipim = c1 * (px_pe_8k / px_pe) * ip.tck_ns * 1e-6
            t_mem = _bytes(b, *K8) / (V100_GBS * 1e9 * V100_DRAM_UTIL) * 1e3
            cnt = r["instruction_breakdown"]
            flops = 4 * cnt.get("comp", 0) * (K8[0] * K8[1]) / (bw * bh)
            t_gpu = max(t_mem, flops / (V100_TFLOPS * 1e12) * 1e3)
            ratio = f"{c1 / c2:.2f} ({(bw * bh) / (bcw * bch):.2f})" if c2 else "-"
            sp6.append(t_gpu / t_ipim)
            gpu_ms[b] = t_gpu
            lines.append(md_row([_label(b, size, w, h, own), f"{c1:,}", ratio, f"{t_ipim:.3f}",
                                 f"{t_gpu:.3f}", f"{t_gpu / t_ipim:.2f}x"]))
        res["fig6_geomean_speedup"] = geomean(sp6)
        lines.append(f"| geomean | | | | | {res['fig6_geomean_speedup']:.2f}x (paper 11.02x) |")
        for b, t_pub in V100_PUBLISHED_MS_PER_MP.items():
            if b in gpu_ms:
                t_mod = gpu_ms[b] / (K8[0] * K8[1] / 1e6)
                lines.append(f"\nV100 model of {b}: {t_mod:.4f} ms per megapixel; published "
                             f"Halide schedule on a V100: {t_pub} ms per megapixel "
                             f"(the model is {t_pub / t_mod:.2f}x faster)")
    return finish("\n".join(lines), res, json=a.json, md=a.md, bad=bad, t0=t0)


if __name__ == "__main__":
    sys.exit(main())
