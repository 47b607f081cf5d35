"""The README's full-size table: all 12 Table-1 networks at full size, the ideal-memory
count of the ISA model (a lower bound on the RTL's cycles) beside the RTL's cycles with
the banked DRAM.

    python scripts/capsnet/capsnet_fullsize.py [--config hmc_gen3] [--nets Caps-MN1,...]
                                       [--rtl-dir out/capsnet-full] [--run-rtl]
                                       [--threads N] [--gpu-json FILE]

For each network: a ``--model-only`` run (seconds to a minute at full size); the RTL
run's JSON ``<rtl-dir>/<net>.json`` (as ``pimforge run capsnet --net NET --config
hmc_gen3 --json <rtl-dir>/<net>.json`` writes it) when it is there, else with
``--run-rtl`` the RTL run itself, written there atomically (so an interrupted sweep
resumes where it stopped; 10 to 60 minutes a network on 2 cores), else "not run".
A JSON whose network, config, scale or dimension differs from the model-only run's, or
whose ``rtl_matches_model`` is false, is an error. Beside the RTL's cycles, its time
at the cube's clock against the routing measured on a GPU (``scripts/gpu/gpu_measure.py``;
the kept H200 measurement unless ``--gpu-json``). Prints the markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pimforge.sim.capsnet.networks import network_names
from pimforge.sim.capsnet.workload import CapsNetRunOptions, run_capsnet
from pimforge.sim.gpu_measured import MeasurementError, load, routing_seconds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report import md_header, md_row, write_json  # noqa: E402

GPU_JSON = Path(__file__).resolve().parents[1] / "gpu" / "measured" / "gpu.json"


def _rtl(name: str, path: Path, cfg: str, model: dict, run: bool, threads: int | None):
    if path.exists():
        r = json.loads(path.read_text())
        for key in ("network", "config", "scale", "dimension"):
            if r.get(key) != model[key]:
                sys.exit(f"{path}: {key} is {r.get(key)!r}, the model-only run's is "
                         f"{model[key]!r}; remove the file or point --rtl-dir elsewhere")
    elif run:
        r = run_capsnet(name, cfg, CapsNetRunOptions(scale=1, threads=threads)).to_json()
        write_json(path, r)
    else:
        return None
    if not r.get("rtl_matches_model"):
        sys.exit(f"{path}: the RTL's v differs from the ISA model's (rtl_matches_model false)")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="hmc_gen3")
    ap.add_argument("--nets", default=",".join(network_names()))
    ap.add_argument("--rtl-dir", default="out/capsnet-full", type=Path)
    ap.add_argument("--run-rtl", action="store_true",
                    help="run the RTL for the networks whose JSON is not in --rtl-dir")
    ap.add_argument("--threads", type=int, default=None,
                    help="native driver threads of the RTL runs (default: the usable cores)")
    ap.add_argument("--gpu-json", type=Path, default=GPU_JSON,
                    help="a scripts/gpu/gpu_measure.py output for the measured-GPU column "
                         "(default: the kept H200 measurement)")
    a = ap.parse_args()
    try:
        meas = load(a.gpu_json)
    except MeasurementError as e:
        ap.error(f"--gpu-json: {e}")
    gpu = meas["device"]["name"].replace("NVIDIA ", "")
    names = a.nets.split(",")
    unknown = [n for n in names if n not in network_names()]
    if unknown:
        ap.error(f"--nets: unknown network {unknown[0]!r}; one of {', '.join(network_names())}")
    print("\n".join(md_header([
        "net", "dim", "cycles (ideal memory)", "RTL cycles", "RTL / ideal",
        "ms at 312.5 MHz (ideal)", "inter-vault MB", "speedup vs P100 roofline model (ideal)",
        f"RTL speedup vs {gpu} measured (eager PyTorch)", "max abs err vs float64"])))
    for name in names:
        m = run_capsnet(name, a.config, CapsNetRunOptions(scale=1, model_only=True)).to_json()
        r = _rtl(name, a.rtl_dir / f"{name}.json", a.config, m, a.run_rtl, a.threads)
        gpu_s = routing_seconds(meas, name)
        if r is None:
            rtl, ratio, vs_gpu = "not run", "", ""
        else:
            rtl = f"{r['cycles']:,} ({r['wall_s']['total']:.0f} s)"
            ratio = f"{r['cycles'] / m['cycles']:.2f}"
            rtl_s = r["cycles"] * m["time_s"] / m["cycles"]
            vs_gpu = f"{gpu_s / rtl_s:.2f}x" if gpu_s else "-"
        print(md_row([name, m["dimension"], f"{m['cycles']:,}", rtl, ratio,
                      f"{m['time_s'] * 1e3:.2f}", f"{m['intervault_bytes'] / 1e6:.2f}",
                      f"{m['speedup_vs_gpu_model']:.3f}", vs_gpu,
                      f"{m['max_abs_err_vs_float64']:.1e}"]), flush=True)


if __name__ == "__main__":
    main()
