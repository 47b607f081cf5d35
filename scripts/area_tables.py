"""Area of the synthesized blocks against the papers' figures.

Synthesizes (Yosys, gen/synth.py; cached) the blocks each paper's area figure
covers, prices them with the area model (gen/area.py: NanGate45 NAND2 scaled to
the paper's node, memory macros by the DESCNet SRAM model, x2 on a DRAM die)
and prints one table per paper, each row: our NAND2 equivalents, our mm^2,
the paper's figure and the ratio. Writes the rows as JSON and the tables as
markdown into --out.

    python scripts/area_tables.py [--out build/area] [--only capsnet,ipim,descnet,nicepim]

Tables:
- PIM-CapsNet (24 nm logic die, Sec. 6.5): 16 PEs + operation controller per vault,
  32 vaults and the RMAS: 3.11 mm^2 in the paper.
- iPIM Table IV (22 nm, DRAM die, x2): SIMD unit, int ALU, AddrRF, DataRF,
  memory controller and PGSM per DRAM die of the ipim_table3 config.
- DESCNet Table III (32 nm): the scratchpads whose size is a power of two (the
  generator's constraint), as B x SC sector macros with their PMU and control.
- NicePIM: the NN engine, when ``rtl/nicepim`` registers one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pimforge.gen.area import AreaModel
from pimforge.gen.config import load_config
from pimforge.gen.output import check_output_dir
from pimforge.gen.registry import blocks
from pimforge.gen.synth import synth_block
from pimforge.sim.descnet import sram

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import md_header, md_row, write_json, write_text  # noqa: E402

IPIM_DIE_MM2 = 96.0          # iPIM Sec. VII-A, after its ref. [66]: one HBM DRAM die


def _row(name, count, gates, area, paper, note=""):
    return {"component": name, "count": count, "nand2_eq": gates, "mm2": area,
            "paper_mm2": paper, "ratio": (area / paper) if paper else None, "note": note}


def _synth(block, cfg, log):
    t = time.monotonic()
    r = synth_block(block, cfg)
    log.append((block, cfg.name, time.monotonic() - t, r.cached))
    print(f"  synthesized {block} ({cfg.name}): {r.total['nand2_eq']:,.0f} NAND2-eq "
          f"{'(cached)' if r.cached else f'in {time.monotonic() - t:.0f} s'}", flush=True)
    return r


def capsnet_table(log):
    """PIM-CapsNet Sec. 6.5: 32 vaults x (16 PEs + operation controller) + RMAS, 24 nm."""
    cfg = load_config("hmc_gen3", {})
    m = AreaModel(node_nm=24, sram=sram.area_mm2)
    pe = _synth("capsnet_pe", cfg, log)
    vault = _synth("capsnet_vault", cfg, log)
    rmas = _synth("rmas", cfg, log)
    a_pe, a_v, a_r = m.of(pe.total), m.of(vault.total), m.of(rmas.total)
    nv = cfg.hmc.vaults
    ctrl = a_v.total_mm2 - cfg.capsnet.pes_per_vault * a_pe.total_mm2
    total = nv * a_v.total_mm2 + a_r.total_mm2
    rows = [
        _row("PE (MAC/inv-sqrt/exp/div flows)", 1, pe.total["nand2_eq"], a_pe.total_mm2, None,
             "paper: gate-level PE at 24 nm, no per-PE figure"),
        _row("operation controller + its memories", nv, vault.total["nand2_eq"]
             - cfg.capsnet.pes_per_vault * pe.total["nand2_eq"], ctrl, None,
             f"{vault.total['memory_bits']:,} bits of macros per vault"),
        _row(f"vault compute ({cfg.capsnet.pes_per_vault} PEs + controller)", nv,
             vault.total["nand2_eq"], a_v.total_mm2, None),
        _row("RMAS", 1, rmas.total["nand2_eq"], a_r.total_mm2, None),
        _row(f"{nv} vaults + RMAS", 1, nv * vault.total["nand2_eq"] + rmas.total["nand2_eq"],
             total, 3.11, "paper: 3.11 mm^2, 0.32% of the HMC logic die; 2.24 W average"),
    ]
    return {"title": "PIM-CapsNet logic (Sec. 6.5), hmc_gen3, 24 nm logic die",
            "model": m.describe(), "rows": rows}


def ipim_table(log):
    """iPIM Table IV: per DRAM die, 22 nm, x2 DRAM process."""
    cfg = load_config("ipim_table3", {})
    m = AreaModel(node_nm=22, sram=sram.area_mm2, dram_die=True)
    pe = _synth("simb_pe", cfg, log)
    pgsm = _synth("simb_pgsm", cfg, log)
    c = cfg.ipim
    # Table IV counts per DRAM die: 64 PEs (SIMD, ALU, RFs), 16 memory controllers, 16 PGSMs.
    n_pe, n_pg = 64, 16
    simd, alu, ctrl = (pe.module_total(s) for s in ("simd", "alu", "ctrl"))
    own = pe.modules[pe.top]          # decode, DataRF and AddrRF flops and their muxes
    a = {k: m.of(v) for k, v in (("simd", simd), ("alu", alu), ("ctrl", ctrl),
                                ("pe", own), ("pgsm", pgsm.total))}
    arf = m.macro_mm2(32, c.arf_bytes // 4, ports=3)
    drf = m.macro_mm2(128, c.drf_bytes // 16, ports=3)
    rf_bits = (c.drf_bytes + c.arf_bytes) * 8
    rows = [
        _row("SIMD unit", n_pe, simd["nand2_eq"], n_pe * a["simd"].total_mm2, 2.26),
        _row("Int ALU", n_pe, alu["nand2_eq"], n_pe * a["alu"].total_mm2, 0.32),
        _row("AddrRF (SRAM macro, 3 ports)", n_pe, None, n_pe * arf, 0.20,
             f"{c.arf_bytes} B, DESCNet SRAM model"),
        _row("DataRF (SRAM macro, 3 ports)", n_pe, None, n_pe * drf, 1.79,
             f"{c.drf_bytes} B, DESCNet SRAM model"),
        _row("AddrRF + DataRF as built (flops) + PE decode", n_pe, own["nand2_eq"],
             n_pe * a["pe"].total_mm2, 1.99,
             f"{own['flops']:,} flops per PE, {rf_bits:,} of them register-file bits"),
        _row("Memory controller", n_pe, ctrl["nand2_eq"], n_pe * a["ctrl"].total_mm2, 1.84,
             "ours: one bank controller per PE (64 per die); paper: 16 per die"),
        _row("PGSM", n_pg, pgsm.total["nand2_eq"], n_pg * a["pgsm"].total_mm2, 3.87,
             f"{c.pgsm_bytes} B in {len(pgsm.total['memories'])} macros "
             f"({a['pgsm'].macro_mm2 / a['pgsm'].total_mm2:.0%} of it macros)"),
    ]
    tot_macro = sum(r["mm2"] for r in rows if r["component"] not in
                    ("AddrRF + DataRF as built (flops) + PE decode",))
    tot_built = sum(r["mm2"] for r in rows if "SRAM macro, 3 ports" not in r["component"])
    rows.append(_row("Total, RFs as SRAM macros", None, None, tot_macro, 10.28,
                     f"{tot_macro / IPIM_DIE_MM2:.2%} of a 96 mm^2 die (paper 10.71%)"))
    rows.append(_row("Total, RFs as built (flops)", None, None, tot_built, 10.28,
                     f"{tot_built / IPIM_DIE_MM2:.2%} of a 96 mm^2 die (paper 10.71%)"))
    return {"title": "iPIM Table IV, ipim_table3, per DRAM die, 22 nm, x2 DRAM process",
            "model": m.describe(), "rows": rows}


def descnet_table(log):
    """DESCNet Table III memories (power-of-two sizes), 32 nm, 16 banks."""
    m = AreaModel(node_nm=32, sram=sram.area_mm2)
    rows, seen = [], {}
    for net, org, mem, kib, ports, sectors, area, *_ in sram.TABLE_III:
        if kib & (kib - 1) or kib > 256:
            continue
        key = (kib, ports, sectors)
        if key not in seen:
            cfg = load_config("default", {"spm.size_bytes": kib * 1024, "spm.banks": 16,
                                          "spm.sectors": sectors, "spm.ports": ports})
            r = _synth("spm", cfg, log)
            seen[key] = (r, m.of(r.total))
        r, a = seen[key]
        rows.append(_row(f"{net} {org} {mem}: {kib} KiB, {ports}p, SC={sectors}", 1,
                         r.total["nand2_eq"], a.total_mm2, area,
                         f"{sum(x['count'] for x in r.total['memories'])} macros "
                         f"{a.macro_mm2:.3f} + logic {a.logic_mm2:.3f} mm^2"))
    return {"title": "DESCNet Table III memories (power-of-two sizes up to 256 KiB), 32 nm, "
            "16 banks", "model": m.describe(), "rows": rows}


def nicepim_table(log):
    """NicePIM's NN engines (28 nm logic die) against the 48 mm^2 the paper allows them."""
    if "nn_engine" not in blocks():
        print("  no NicePIM NN engine registered (rtl/nicepim): table skipped")
        return None
    m = AreaModel(node_nm=28, sram=sram.area_mm2)
    # Sec. VIII-B's 4x4 nodes, and the 4x8 nodes of 128x8 PEs (16/144/32 KiB buffers)
    # the paper compares with the V100.
    points = [("nicepim_4x4", {}),
              ("nicepim_4x4", {"nicepim.na_rows": 4, "nicepim.na_cols": 8,
                               "nicepim.pe_rows": 128, "nicepim.pe_cols": 8,
                               "nicepim.ibuf_bytes": 16 * 1024,
                               "nicepim.wbuf_bytes": 144 * 1024,
                               "nicepim.obuf_bytes": 32 * 1024,
                               "nicepim.banks_per_node": 8})]
    rows = []
    for preset, over in points:
        cfg = load_config(preset, over)
        c = cfg.nicepim
        r = _synth("nn_engine", cfg, log)
        a = m.of(r.total)
        n = c.na_rows * c.na_cols
        label = (f"{c.na_rows}x{c.na_cols} nodes of {c.pe_rows}x{c.pe_cols} PEs, buffers "
                 f"{c.ibuf_bytes // 1024}/{c.wbuf_bytes // 1024}/{c.obuf_bytes // 1024} KiB")
        rows.append(_row(f"NN engine ({c.pe_rows}x{c.pe_cols} PEs)", n, r.total["nand2_eq"],
                         n * a.total_mm2, 48.0,
                         f"{label}; macros {n * a.macro_mm2:.2f} mm^2; paper: the 48 mm^2 "
                         "area constraint (an upper bound)"))
    return {"title": "NicePIM NN engines (PE array + ibuf/wbuf/obuf), 28 nm logic die",
            "model": m.describe(), "rows": rows}


def markdown(table) -> str:
    def f(v, fmt):
        return "" if v is None else format(v, fmt)
    lines = [f"**{table['title']}** ({table['model']})", "",
             *md_header(["component", "count", "NAND2-eq (each)", "ours mm^2", "paper mm^2",
                         "ratio", "note"], ["---"] + ["---:"] * 5 + ["---"])]
    for r in table["rows"]:
        lines.append(md_row([r["component"], f(r["count"], "d"), f(r["nand2_eq"], ",.0f"),
                             f"{r['mm2']:.3f}", f(r["paper_mm2"], ".3f"), f(r["ratio"], ".2f"),
                             r["note"]]))
    return "\n".join(lines) + "\n"


TABLES = {"capsnet": capsnet_table, "ipim": ipim_table, "descnet": descnet_table,
          "nicepim": nicepim_table}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build/area", help="folder for area_tables.{json,md}")
    p.add_argument("--only", default=",".join(TABLES),
                   help=f"comma-separated subset of {','.join(TABLES)}")
    args = p.parse_args(argv)
    only = [t for t in args.only.split(",") if t]
    bad = [t for t in only if t not in TABLES]
    if bad:
        p.error(f"unknown table {bad[0]!r}; choose from {', '.join(TABLES)}")
    out = check_output_dir(args.out, "--out")
    log: list = []
    t0 = time.monotonic()
    tables = {}
    for name in only:
        print(f"{name}:", flush=True)
        t = TABLES[name](log)
        if t is not None:
            tables[name] = t
    md = "\n".join(markdown(t) for t in tables.values())
    print()
    print(md)
    wall = time.monotonic() - t0
    print(f"{wall:.0f} s ({sum(1 for x in log if not x[3])} syntheses, the rest cached)")
    write_json(Path(out) / "area_tables.json", {
        "tables": tables, "wall_s": wall,
        "syntheses": [{"block": b, "config": c, "s": s, "cached": k} for b, c, s, k in log]})
    write_text(Path(out) / "area_tables.md", md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
