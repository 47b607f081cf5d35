"""NicePIM's engine area model (sim/nicepim/area.py) against Yosys on engines outside its fit.

The model's coefficients are fitted to four synthesized ``nn_engine`` blocks
(``area.SYNTHESIZED``); this script synthesizes others (``gen/synth.py``, cached)
and prints the model's NAND2 equivalents and mm^2 (28 nm) beside synthesis'.

    python scripts/nicepim/nicepim_area_model.py [--points 2x8,16x2,8x16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.gen.synth import synth_block
from pimforge.sim.nicepim import area as A

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", default="2x8,16x2,8x16",
                   help="comma-separated PE_row x PE_col engines (2 KiB buffers each)")
    args = p.parse_args(argv)
    m = A.model()
    print("\n".join(md_header(["PEs", "buffers i/w/o", "synthesis NAND2-eq", "model NAND2-eq",
                                "error", "synthesis mm^2", "model mm^2", "error", "Yosys s"],
                               ["---", "---"] + ["---:"] * 7)))
    for spec in args.points.split(","):
        r, c = (int(v) for v in spec.split("x"))
        buf = max(2048, 4 * 2 * c * 4)
        cfg = load_config("nicepim_small", {"nicepim.pe_rows": r, "nicepim.pe_cols": c,
                                            "nicepim.ibuf_bytes": max(2048, 4 * r),
                                            "nicepim.wbuf_bytes": buf,
                                            "nicepim.obuf_bytes": buf})
        n = cfg.nicepim
        t = time.monotonic()
        res = synth_block("nn_engine", cfg)
        s_g, m_g = res.total["nand2_eq"], float(A.engine_nand2(r, c))
        s_a = m.of(res.total).total_mm2
        m_a = float(A.engine_area_mm2(r, c, n.ibuf_bytes, n.wbuf_bytes, n.obuf_bytes))
        print(md_row([f"{r}x{c}", f"{n.ibuf_bytes // 1024}/{n.wbuf_bytes // 1024}/"
                      f"{n.obuf_bytes // 1024} KiB", f"{s_g:,.0f}", f"{m_g:,.0f}",
                      f"{m_g / s_g - 1:+.2%}", f"{s_a:.4f}", f"{m_a:.4f}", f"{m_a / s_a - 1:+.2%}",
                      "cached" if res.cached else f"{time.monotonic() - t:.0f}"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
