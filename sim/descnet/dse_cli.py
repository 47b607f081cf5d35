"""``pimforge dse spm``: DESCNet scratchpad exploration for CapsNet or DeepCaps.

Writes ``results.json`` (configurations evaluated, seconds, the Pareto front,
the lowest-energy configuration per organization, the comparison with
Tables I-II and the saving against the 8 MiB all-on-chip baseline),
``points.csv`` (every configuration) and ``energy_area.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

from pimforge.gen.args import (
    AppendUnique,
    int_range,
    max_count_in_ram,
    nonempty,
    out_dir,
    physical_memory,
)
from pimforge.gen.errors import PimforgeError, UnknownNameError
from pimforge.gen.output import FileSet, check_output_dir
from pimforge.gen.provenance import csv_comment, stamp

from . import energy
from .dse import MAIN_ORGS, ORGANIZATIONS, run_dse, sigma, size_tuples
from .pg_replay import replay_selected
from .profiles import NETS, profile
from .sram import TABLE_III

__all__ = ["BYTES_PER_CONFIG", "add_arguments", "count_configs", "run"]

#: Peak memory per configuration explored (measured: 1.88 GB for DeepCaps' 13.1 M
#: uncapped configurations, 450 MB for CapsNet's 2.3 M), with a margin: --max-sectors
#: (0, no cap, is the largest space) is bounded by what fits in the RAM.
BYTES_PER_CONFIG = 192
_BASE_BYTES = 256 << 20

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--net", default="capsnet", type=nonempty,
                   help="capsnet or deepcaps (default capsnet)")
    p.add_argument("--org", action=AppendUnique,
                   help="organization(s) to explore, repeatable or comma-separated "
                        "(default: SMP, SMP-PG, SEP, SEP-PG, HY, HY-PG)")
    p.add_argument("--max-sectors", type=int_range(0, 4096), default=16,
                   help="cap of Algorithm 2's sector pool (default 16; 0 = [2, s/128] uncapped)")
    p.add_argument("--pg-sim", action="store_true",
                   help="replay the schedule of each selected -PG configuration on the "
                        "Verilated SPM and use the counted sector-ON cycles for its static "
                        "energy")
    p.add_argument("--out", type=out_dir, required=True, help="output folder")


def count_configs(prof, orgs, max_sectors: int | None) -> int:
    """The number of configurations :func:`~pimforge.sim.descnet.dse.explore` evaluates
    (Algorithm 2's product over every size tuple), counted without evaluating them."""
    n = 0
    for org in orgs:
        pg = ORGANIZATIONS[org][2]
        for sizes in size_tuples(prof, org):
            k = 1
            for s in sizes:
                k *= len(sigma(int(s), max_sectors)) if (pg and s > 0) else 1
            n += k
    return n


def _check_fits(prof, orgs, max_sectors: int) -> None:
    """Refuse a space whose evaluation would not fit in the RAM, naming the largest
    --max-sectors that does."""
    most = max_count_in_ram(BYTES_PER_CONFIG, _BASE_BYTES)
    n = count_configs(prof, orgs, max_sectors or None)
    if n <= most:
        return
    fits = [m for m in (2 ** k for k in range(1, 13))
            if count_configs(prof, orgs, m) <= most]
    given = f"--max-sectors {max_sectors}" + (" (no cap)" if not max_sectors else "")
    hint = (f"use --max-sectors {fits[-1]} or less" if fits
            else "no --max-sectors fits; use fewer --org")
    raise PimforgeError(f"{given} explores {n} configurations (about "
                        f"{n * BYTES_PER_CONFIG / 2**30:.1f} GiB); this machine has "
                        f"{physical_memory() / 2**30:.1f} GiB of RAM: {hint}")


def _kib(b: int) -> float:
    return round(b / 1024, 3)


def _point(space, i: int) -> dict:
    names = "SDWA"
    return {
        "org": space.orgs[int(space.org[i])],
        "size_kib": {k: _kib(int(v)) for k, v in zip(names, space.size[i]) if v},
        "sectors": {k: int(s) for k, v, s in zip(names, space.size[i], space.sectors[i]) if v},
        "area_mm2": round(float(space.area[i]), 6),
        "energy_mj": round(float(space.energy[i]), 6),
        "dynamic_mj": round(float(space.parts[i, 0]), 6),
        "static_mj": round(float(space.parts[i, 1]), 6),
        "wakeup_nj": round(float(space.parts[i, 2]) * 1e6, 6),
    }


def _paper(net: str) -> dict:

    out: dict = {}
    for n, org, mem, kib, _ports, sc, area, dyn, stat, wake in TABLE_III:
        if n == net:
            d = out.setdefault(org, {"size_kib": {}, "sectors": {}, "area_mm2": 0.0,
                                     "energy_mj": 0.0})
            d["size_kib"][mem] = kib
            d["sectors"][mem] = sc
            d["area_mm2"] = round(d["area_mm2"] + area, 6)
            d["energy_mj"] = round(d["energy_mj"] + dyn + stat + (wake or 0) * 1e-6, 6)
    return out


def write_csv(path: Path, space, header: str = "") -> None:
    """Every configuration, one row each (block-formatted with numpy for speed), after
    *header* (the provenance comment line)."""
    org_names = np.array(space.orgs)[space.org]
    cols = [org_names] + [space.size[:, k] for k in range(4)]
    with open(path, "w", newline="") as f:
        f.write(header)
        w = csv.writer(f)
        w.writerow(["org", "size_S_B", "size_D_B", "size_W_B", "size_A_B", "sc_S", "sc_D",
                    "sc_W", "sc_A", "area_mm2", "energy_mJ", "dynamic_mJ", "static_mJ",
                    "wakeup_mJ"])
        step = 65536
        for a in range(0, len(space), step):
            b = min(a + step, len(space))
            rows = zip(org_names[a:b].tolist(), *(c[a:b].tolist() for c in cols[1:]),
                       *(space.sectors[a:b, k].tolist() for k in range(4)),
                       np.round(space.area[a:b], 6).tolist(),
                       np.round(space.energy[a:b], 6).tolist(),
                       *(np.round(space.parts[a:b, k], 9).tolist() for k in range(3)))
            w.writerows(rows)


def plot(path: Path, space, front: np.ndarray, selected: dict, net: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    rng = np.random.default_rng(0)
    colors = {}
    for oi, org in enumerate(space.orgs):
        ids = np.flatnonzero(space.org == oi)
        if len(ids) > 40000:    # the cloud's shape, not 10^5 overlapping dots
            ids = rng.choice(ids, 40000, replace=False)
        colors[org] = f"C{oi % 10}"
        ax.scatter(space.area[ids], space.energy[ids], s=3, alpha=0.4, label=org,
                   color=colors[org], rasterized=True)
    ax.plot(space.area[front], space.energy[front], "k.-", lw=1.2, label="Pareto front")
    for org, i in selected.items():
        ax.scatter([space.area[i]], [space.energy[i]], marker="*", s=140, edgecolor="k",
                   color=colors[org], zorder=5)
        ax.annotate(org, (space.area[i], space.energy[i]), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("area [mm$^2$]")
    ax.set_ylabel("energy per inference [mJ]")
    ax.set_title(f"DESCNet scratchpad DSE, {net}: {len(space):,} configurations")
    ax.legend(fontsize=7, markerscale=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _results(args, orgs, sp, res, prof, t_w, selected, base, savings, pg_sim) -> dict:
    return {
        "net": args.net,
        "organizations": list(orgs),
        "max_sectors": args.max_sectors or None,
        "configs_evaluated": len(sp),
        "configs_per_org": {o: int((sp.org == k).sum()) for k, o in enumerate(sp.orgs)},
        "seconds": round(res.seconds, 3),
        "write_seconds": round(t_w, 3),
        "profile": {"ops": prof.names, "cycles": prof.cycles.tolist(),
                    "usage_bytes": prof.usage.tolist(),
                    "inference_ms": round(prof.total_seconds * 1e3, 4),
                    "offchip_reads": prof.offchip_reads.tolist(),
                    "offchip_writes": prof.offchip_writes.tolist()},
        "pareto": [_point(sp, int(i)) for i in res.pareto],
        "selected": selected,
        "paper": _paper(args.net),
        "baseline_8mib": {"total_mj": round(base.total_mj, 6),
                          "onchip_mj": round(base.onchip_mj, 6),
                          "accelerator_mj": round(base.accelerator_mj, 6)},
        "system": savings,
        "paper_saving_hy_pg_vs_8mib": 0.79 if args.net == "capsnet" else None,
        "pg_simulation": pg_sim,
    }


def run(args) -> int:

    if args.net not in NETS:
        raise UnknownNameError(f"unknown --net {args.net!r}; allowed: {', '.join(sorted(NETS))}")
    orgs = MAIN_ORGS
    if args.org:
        orgs = tuple(o.strip() for a in args.org for o in a.split(",") if o.strip())
        bad = [o for o in orgs if o not in ORGANIZATIONS]
        if bad:
            raise UnknownNameError(f"unknown --org {bad[0]!r}; allowed: "
                                   f"{', '.join(ORGANIZATIONS)}")
    if args.max_sectors < 0:
        raise PimforgeError(f"--max-sectors must be 0 (no cap) or positive, "
                            f"not {args.max_sectors}")
    prof = profile(args.net)
    _check_fits(prof, orgs, args.max_sectors)
    out = check_output_dir(args.out, "--out")
    res = run_dse(prof, orgs, max_sectors=args.max_sectors or None)
    sp = res.space
    selected = {org: _point(sp, i) for org, i in res.selected.items()}

    pg_sim = None
    if args.pg_sim:

        pg_sim = replay_selected(prof, sp, res.selected)
        for org, rep in pg_sim.items():
            selected[org]["static_mj_simulated"] = rep["static_mj_simulated"]
            selected[org]["energy_mj_simulated"] = rep["energy_mj_simulated"]

    base = energy.baseline_8mib(prof)
    savings = {}
    for org, i in res.selected.items():
        s = energy.system(prof, float(sp.energy[i]))
        savings[org] = {"total_mj": round(s.total_mj, 6),
                        "onchip_mj": round(s.onchip_mj, 6),
                        "offchip_mj": round(s.offchip_mj, 6),
                        "accelerator_mj": round(s.accelerator_mj, 6),
                        "saving_vs_8mib": round(1 - s.total_mj / base.total_mj, 4)}
    # results.json is written last: a folder that has it holds a complete, consistent set.
    with FileSet(out, marker="results.json") as files:
        t_w = time.perf_counter()
        head = stamp({}, "pimforge.dse.spm.points", 1)
        write_csv(files.path("points.csv"), sp, csv_comment(head))
        plot(files.path("energy_area.png"), sp, res.pareto, res.selected, args.net)
        t_w = time.perf_counter() - t_w
        results = stamp(_results(args, orgs, sp, res, prof, t_w, selected, base, savings,
                                 pg_sim), "pimforge.dse.spm", 1)
        files.path("results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"{len(sp):,} configurations of {args.net} in {res.seconds:.2f} s "
          f"(+{t_w:.1f} s writing CSV/PNG); Pareto front: {len(res.pareto)} points")
    print(f"{'org':10s} {'size KiB (sectors) S/D/W/A':44s} {'mm2':>8s} {'mJ':>9s}")
    for org, p in selected.items():
        sizes = " ".join(f"{k}{p['size_kib'][k]:g}({p['sectors'][k]})" for k in p["size_kib"])
        print(f"{org:10s} {sizes:44s} {p['area_mm2']:8.3f} {p['energy_mj']:9.4f}")
    if "HY-PG" in savings:
        print(f"HY-PG total energy vs the 8 MiB all-on-chip baseline: "
              f"-{100 * savings['HY-PG']['saving_vs_8mib']:.1f}%")
    # The DESCNet paper's selections stay in results.json ("paper") for the scripts that
    # compare against it; a tool's table shows this run only.
    print(f"wrote {out / 'results.json'}, {out / 'points.csv'}, {out / 'energy_area.png'}")
    return 0
