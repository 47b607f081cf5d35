"""Bandwidth of one PIM-node's tensor DMA on the array RTL, per task kind and layout.

    python scripts/nicepim/nicepim_dma_bw.py --config nicepim_small

Node 0 runs ``--repeat`` loads of a tile that fills its input buffer (``LOAD_I``: the
buffer's lines of ``pe_rows`` channels, every element inside the tensor) in NCHW, NHWC
and NCHW[C8], the same for the weight buffer (``LOAD_W`` in NCHW, i.e. OIHW, in
CHWN, the output channels innermost, and in KBLOCK, the engine's own order) and stores of a
tile that fills its output buffer (``STORE`` of 32-bit sums) in each layout. Prints
the bytes moved per DMA busy cycle and per second at the config's clock, beside the
node's DRAM word per column gap (the bank's peak).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pimforge.gen.config import load_config
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.rtl.nicepim.params import Layout, Op
from pimforge.sim.nicepim.node_model import NodeTiming
from pimforge.sim.nicepim.rtl_run import build_array_driver, run_array, task

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_table  # noqa: E402

#: The layouts of activations (CHWN and KBLOCK are for weights).
ACTS = (Layout.NCHW, Layout.NHWC, Layout.NCHWC8)


def cases(n):
    """(name, task words, bytes moved) of each measured task."""
    R, C = n.pe_rows, n.pe_cols
    # an input tile of cb blocks of nh x nw pixels filling the input buffer
    nw = 16 if n.ibuf_lines >= 16 else n.ibuf_lines
    nh = max(1, n.ibuf_lines // (nw * 2))
    cb = max(1, n.ibuf_lines // (nh * nw))
    dims_i = (1, cb * R, nh, nw)
    out = []
    for lay in ACTS:
        t = task(Op.LOAD_I, base=0, layout=lay, dn=1, dc=cb * R, dh=nh, dw=nw, cb=cb, nh=nh,
                 nw=nw)
        out.append((f"LOAD_I {lay.name} {dims_i}", t, cb * R * nh * nw * 2))
    kh = kw = 3 if n.wbuf_lines >= 9 * R else 1
    cbw = max(1, n.wbuf_lines // (kh * kw * R))
    for lay in (Layout.NCHW, Layout.CHWN, Layout.KBLOCK):
        t = task(Op.LOAD_W, base=0, layout=lay, dn=C, dc=cbw * R, dh=kh, dw=kw, cb=cbw, nh=kh,
                 nw=kw)
        out.append((f"LOAD_W {lay.name} ({C}, {cbw * R}, {kh}, {kw})", t,
                    C * cbw * R * kh * kw * 2))
    ow = 16 if n.obuf_lines >= 16 else n.obuf_lines
    oh = n.obuf_lines // ow
    for lay in ACTS:
        t = task(Op.STORE, base=0, layout=lay, dn=1, dc=C, dh=oh, dw=ow, cb=1, nh=oh, nw=ow)
        out.append((f"STORE {lay.name} (1, {C}, {oh}, {ow})", t, C * oh * ow * 4))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="nicepim_small")
    ap.add_argument("--repeat", type=int, default=8)
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    n = cfg.nicepim
    exe = build_array_driver(cfg)
    tm = resolve_timing(n.timing, n.tck_ns)
    f_hz = 1e9 / n.tck_ns
    peak = n.word_bytes / tm.col_gap
    rows = []
    for name, t, nbytes in cases(n):
        run = run_array(cfg, {0: [t] * args.repeat + [task(Op.END)]}, {}, exe=exe)
        busy = run.perf["dma_busy"][0]
        bpc = nbytes * args.repeat / busy
        rows.append([name, f"{nbytes * args.repeat:,}", f"{busy:,}", f"{bpc:.2f}",
                     f"{bpc * f_hz / 1e9:.2f}", f"{bpc / peak:.1%}"])
    print(f"{cfg.name}: {n.pe_rows}x{n.pe_cols} PEs, a {n.word_bytes}-byte DRAM word, peak "
          f"{peak:.0f} B/cycle = {peak * f_hz / 1e9:.1f} GB/s (a word per {tm.col_gap} cycles)")
    print("\n".join(md_table(["task", "bytes", "DMA busy cycles", "B/cycle", "GB/s", "of peak"],
                              rows)))
    print()
    print("\n".join(back_to_back(cfg, exe)))
    return 0


def back_to_back(cfg, exe) -> list[str]:
    """Weight and input loads in turn (different DRAM rows), the DMA running each load
    behind the one before: the gap from one load's last write to the next one's first,
    ``(run - first load alone - sum over the others of (alone - latency)) / others``,
    with the model's first-word latency (:meth:`NodeTiming.pipe`), beside the model's
    gap (a row switch)."""
    n = cfg.nicepim
    R, C = n.pe_rows, n.pe_cols
    tm = NodeTiming(n)
    lat, gap, _, _ = tm.pipe(1, 1)
    row_el = n.row_words * n.word_bytes // 2
    out = [f"back to back (model: latency {lat:.1f}, gap {gap:.1f} = tRP + tRCD):"]
    for cb, k in ((1, 3), (2, 3), (1, 1)):
        lw = task(Op.LOAD_W, base=0, layout=Layout.KBLOCK, dn=C, dc=cb * R, dh=k, dw=k, cb=cb,
                  nh=k, nw=k)
        li = task(Op.LOAD_I, base=4 * row_el, layout=Layout.NHWC, dn=1, dc=cb * R, dh=4, dw=4,
                  cb=cb, nh=4, nw=4, buf=1)

        def busy(ts):
            return run_array(cfg, {0: ts + [task(Op.END)]}, {}, exe=exe).perf["dma_busy"][0]

        w1, i1 = tm.dma(int(Op.LOAD_W), int(Layout.KBLOCK), (C, cb * R, k, k), 0, 0, 0, 0, cb,
                        k, k)[0], tm.dma(int(Op.LOAD_I), int(Layout.NHWC), (1, cb * R, 4, 4),
                                         0, 0, 0, 0, cb, 4, 4)[0]
        for reps in (1, 4):
            run = busy([lw, li] * reps)
            others = (reps - 1) * (w1 - lat) + reps * (i1 - lat)
            measured = (run - w1 - others) / (2 * reps - 1)
            out.append(f"  {cb} block(s) of a {k}x{k} kernel, {2 * reps} loads: "
                       f"{run} cycles, gap {measured:.1f}")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
