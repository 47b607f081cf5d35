"""iPIM Fig. 8 on the cube RTL: near-bank PEs against the same PEs on the base die.

    python scripts/ipim/ipim_fig8.py --config ipim_eval --size 32x32 --md out/fig8.md

Every benchmark the compiler has runs on a scikit-image photograph twice, on the cube
built with ``ipim.pe_placement = "near-bank"`` (iPIM) and with ``"base-die"`` (Sec.
VII-C1's process-on-base-die machine: the PEs, PGSMs and bank controllers on the base
die, every bank RD/WR crossing the vault's shared TSVs, ``ipim.tsv_bits`` per cycle,
``ipim.t_tsv`` each way, granted round robin among the vault's PEs). Both outputs are
checked against the numpy reference (a mismatch fails the script). Per benchmark:
cycles, the near-bank speedup, the Table III energy estimate of each
(:func:`pimforge.sim.ipim.image_run.energy_nj`, with the TSV energy of every bank
access on the base die) and the near-bank saving; the geometric mean speedup and the
mean saving against the paper's 3.61x and 56.71 %.

Why a benchmark gains or not: the near-bank run's bank traffic per vault-cycle against
what the TSVs carry (``1 / tsv_beats`` vectors a cycle): a run whose traffic exceeds it
must slow down at least by that ratio on the base die ("TSV bound"); the same bound for
TSVs with Table III's share of the banks' peak (``ipim_table3``: 128 bits a cycle for 32
banks of one vector per tCCD = 2 cycles, 1/16) is given beside it. ``--set`` changes
both machines alike (``--set ipim.tsv_bits=16`` gives a vault of four banks the ratio of
TSV to bank bandwidth of Table III's vault of 32 banks with a 128-bit TSV bus).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pimforge.gen.config import load_config, parse_overrides
from pimforge.gen.config.ipim import PE_PLACEMENTS
from pimforge.gen.errors import PimforgeError
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.sim.ipim.image_benches import PIPELINES
from pimforge.sim.ipim.image_run import compile_bench, run_bench
from pimforge.sim.ipim.lang import CompileError
from pimforge.sim.ipim.photos import load_photo
from pimforge.verif.models.ipim.image import BENCHES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, finish, geomean, md_header, md_row, verdict  # noqa: E402

PAPER_SPEEDUP = 3.61
PAPER_SAVING = 0.5671


def _bank_peak(ip) -> float:
    """Vectors a cycle a vault's banks move at most: one per bank per column gap."""
    t = resolve_timing(ip.timing, ip.tck_ns)
    return ip.pes / t.col_gap


def _tsv_share(ip) -> float:
    """The TSVs' bandwidth over the banks' peak, of one vault of *ip*."""
    return (1.0 / ip.tsv_beats) / _bank_peak(ip)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="ipim_eval")
    p.add_argument("--size", default="32x32", help="WxH of the input (default 32x32)")
    p.add_argument("--photo", default="camera")
    p.add_argument("--bench", action="append", help="only these benchmarks (repeatable)")
    p.add_argument("--stencils", type=int, default=8,
                   help="stages of the stencil chain (default 8 of its 32)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for both placements (repeatable)")
    p.add_argument("--order", default=",".join(PE_PLACEMENTS), choices=[
        ",".join(PE_PLACEMENTS), ",".join(reversed(PE_PLACEMENTS))],
        help="which placement runs first")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path, help="write the table as markdown here")
    a = p.parse_args(argv)
    check_outputs(p, json=a.json, md=a.md)
    w, h = (int(v) for v in a.size.split("x"))
    sets = parse_overrides(a.set)
    if "ipim.pe_placement" in sets:
        p.error("--set ipim.pe_placement: the script runs both placements itself")
    cfgs = {pl: load_config(a.config, {**sets, "ipim.pe_placement": pl})
            for pl in a.order.split(",")}
    ip = cfgs["base-die"].ipim
    benches = list(a.bench or [b for b in BENCHES if b in PIPELINES])
    for b in benches:
        if b not in PIPELINES:
            p.error(f"--bench {b}: the compiler has {', '.join(PIPELINES)}")
    res: dict = {"config": a.config, "set": sets, "size": [w, h], "photo": a.photo,
                 "stencils": a.stencils, "tsv_bits": ip.tsv_bits, "t_tsv": ip.t_tsv,
                 "vaults": ip.vaults, "pes_per_vault": ip.pes, "runs": {}}
    bad = []
    t0 = time.time()
    # a benchmark that does not compile at this size is left out before any run (the
    # compile is the same on both placements), so that it costs none of the others
    skipped = {}
    for b in list(benches):
        kw = {"stencils": a.stencils} if b == "stencil_chain" else {}
        try:
            compile_bench(b, h, w, cfgs["near-bank"], **kw)
        except CompileError as e:
            skipped[b] = str(e)
            benches.remove(b)
            print(f"{b:14s} skipped: it does not compile for {a.config} at {w}x{h} ({e})",
                  flush=True)
    res["skipped"] = skipped
    if not benches:
        p.error("no benchmark compiles at this size: give a smaller --size")
    for pl, cfg in cfgs.items():         # a placement's cube is built (or found) once
        for b in benches:
            img = load_photo(a.photo, (w, h), BENCHES[b].input_kind)
            kw = {"stencils": a.stencils} if b == "stencil_chain" else {}
            r = run_bench(b, img, cfg, **kw)
            res["runs"].setdefault(b, {})[pl] = r.to_json()
            ok = r.matches_reference
            if not ok:
                bad.append(f"{b}/{pl}")
            print(f"{b:14s} {pl:9s} cycles {r.cycles:>9,} energy {r.energy['total']:>10.1f} nJ "
                  f"{verdict(ok)} ({time.time() - t0:.0f} s)", flush=True)
    # The TSVs carry one vector per tsv_beats cycles per vault; Table III's vault (the
    # ipim_table3 preset) has TSVs for 1/16 of its banks' peak.
    tsv_cap = 1.0 / ip.tsv_beats
    t3_share = _tsv_share(load_config("ipim_table3").ipim)
    t3_cap = t3_share * _bank_peak(ip)
    res["tsv_share_of_bank_peak"] = tsv_cap / _bank_peak(ip)
    res["table3_tsv_share_of_bank_peak"] = t3_share
    lines = md_header(["bench", "near-bank cycles", "base-die cycles", "speedup", "near-bank nJ",
                       "base-die nJ", "energy saving", "bank vectors / vault-cycle (near-bank)",
                       "TSV bound", "TSV bound at Table III's share"])
    sp, sv = [], []
    for b in benches:
        n, d = res["runs"][b]["near-bank"], res["runs"][b]["base-die"]
        s = d["cycles"] / n["cycles"]
        e = 1.0 - n["energy_nj"]["total"] / d["energy_nj"]["total"]
        demand = n["pe_counters"]["rdwr"] / (n["cycles"] * ip.vaults)
        bound = max(1.0, demand / tsv_cap)
        sp.append(s)
        sv.append(e)
        res["runs"][b]["speedup"], res["runs"][b]["energy_saving"] = s, e
        res["runs"][b]["bank_vectors_per_vault_cycle"] = demand
        lines.append(md_row([b, f"{n['cycles']:,}", f"{d['cycles']:,}", f"{s:.2f}x",
                             f"{n['energy_nj']['total']:,.1f}", f"{d['energy_nj']['total']:,.1f}",
                             f"{e:.1%}", f"{demand:.3f}", f"{bound:.2f}x",
                             f"{max(1.0, demand / t3_cap):.2f}x"]))
    res["geomean_speedup"] = geomean(sp)
    res["mean_energy_saving"] = sum(sv) / len(sv)
    lines.append(f"| geomean / mean | | | {res['geomean_speedup']:.2f}x (paper {PAPER_SPEEDUP}x)"
                 f" | | | {res['mean_energy_saving']:.1%} (paper {PAPER_SAVING:.2%}) | | | |")
    head = (f"{a.config} {w}x{h} `{a.photo}`, {ip.vaults} vaults x {ip.pes} PEs, TSV "
            f"{ip.tsv_bits} bits/cycle/vault ({tsv_cap:.3g} vectors, "
            f"{res['tsv_share_of_bank_peak']:.1%} of the banks' peak of "
            f"{_bank_peak(ip):.3g} vectors/cycle/vault; Table III's vault: {t3_share:.2%})")
    text = head + "\n\n" + "\n".join(lines)
    if skipped:
        text += "\n\nNot run (they do not compile at this size): " + ", ".join(skipped)
    return finish(text, res, json=a.json, md=a.md, bad=bad, t0=t0)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PimforgeError as e:          # bad config, a benchmark that does not fit
        sys.exit(f"ipim_fig8: {e}")
