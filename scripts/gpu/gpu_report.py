"""The GPU models at a measured GPU's peaks, beside that GPU's measurements.

    python scripts/gpu/gpu_report.py [--json scripts/gpu/measured/gpu.json]

Reads what ``scripts/gpu/gpu_measure.py`` wrote on a GPU (the default is the measurement
kept in the repository) and prints, as Markdown for the README, the tables of
:mod:`pimforge.sim.gpu_measured`. Needs no GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pimforge.gen.errors import PimforgeError
from pimforge.sim.gpu_measured import load, report

DEFAULT = Path(__file__).resolve().parent / "measured" / "gpu.json"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=DEFAULT,
                    help="a gpu_measure.py output (default: the kept measurement)")
    a = ap.parse_args(argv)
    try:
        print(report(load(a.json)))
    except PimforgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
