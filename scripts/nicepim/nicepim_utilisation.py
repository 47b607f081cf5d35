"""PE utilisation of a network's convolution layers on a NicePIM array (the cost model).

    python scripts/nicepim/nicepim_utilisation.py [--net vgg16] [--config nicepim_4x4]
                                                 [--mapper nicepim] [--json OUT]

Maps the full-size network (``pimforge run dnn --scale 1``: the cost model, no RTL)
and prints per convolution layer its MACs over the array's PEs times its modelled
cycles, and the same over all of them (MACs summed over cycles summed). The node
model's cycles are checked against the RTL by ``nicepim_costmodel_check.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from pimforge.gen.cli import main as pimforge
from pimforge.gen.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import check_outputs, md_table, write_json  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", default="vgg16")
    ap.add_argument("--config", default="nicepim_4x4")
    ap.add_argument("--mapper", choices=["nicepim", "baseline"], default="nicepim")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    check_outputs(ap, json=args.json)
    n = load_config(args.config).nicepim
    pes = n.nodes * n.pe_rows * n.pe_cols
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "run.json"
        rc = pimforge(["run", "dnn", "--net", args.net, "--config", args.config, "--scale", "1",
                       "--mapper", args.mapper, "--json", str(out)])
        if rc:
            return rc
        run = json.loads(out.read_text())
    conv = [lay for lay in run["layers"] if lay["kind"] == "conv"]
    rows = [[lay["name"], f"{lay['macs']:,}", f"{lay['cycles_model']:,.0f}",
             f"{lay['macs'] / (pes * lay['cycles_model']):.1%}", lay["partition"]]
            for lay in conv]
    macs = sum(lay["macs"] for lay in conv)
    cycles = sum(lay["cycles_model"] for lay in conv)
    rows.append(["all conv", f"{macs:,}", f"{cycles:,.0f}", f"{macs / (pes * cycles):.1%}", ""])
    print(f"\n{args.net} on {args.config} ({pes:,} PEs), {args.mapper} mapper; network "
          f"{run['totals']['mapper_latency_cycles_model']:,.0f} cycles (model)")
    print("\n".join(md_table(["layer", "MACs", "cycles (model)", "PE utilisation", "partition"],
                             rows, ["---"] + ["---:"] * 3 + ["---"])))
    if args.json:
        write_json(args.json, {"net": args.net, "config": args.config, "mapper": args.mapper,
                               "pes": pes, "conv_macs": macs, "conv_cycles": cycles,
                               "utilisation": macs / (pes * cycles),
                               "layers": {lay["name"]: lay["macs"] / (pes * lay["cycles_model"])
                                          for lay in conv}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
