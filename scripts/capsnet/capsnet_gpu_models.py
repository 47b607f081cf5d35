"""The GPU baseline MODELS (roofline and eager PyTorch) of the 12 Table 1 CapsNets.

Usage::

    python scripts/capsnet/capsnet_gpu_models.py [--launch-us 5] [--net Caps-MN1 ...]
        [--json OUT.json]

Prints, as Markdown for the README: per network (full Table 1 size) the
roofline and the eager-PyTorch routing times on the paper's P100 (320 GB/s)
and on a shipping P100's 732 GB/s, the routing's share of the inference
under both models, and the eager kernel launches; then the checks against
the paper's profile of its GPU (Fig. 4, Sec. 3.2, Fig. 6b, Fig. 7).  Both are
MODELS (see ``pimforge.sim.capsnet.gpu_models``); no GPU is run.
``--json`` writes the checks and both models per network and GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import check_output_file, write_json
from pimforge.sim.capsnet.gpu_models import (
    gpu_models,
    gpu_models_table,
    paper_checks,
    paper_checks_table,
)
from pimforge.sim.capsnet.networks import NETWORKS, network
from pimforge.sim.result import to_plain


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", action="append", help="Table 1 network (repeatable; default all)")
    ap.add_argument("--launch-us", type=float, default=5.0,
                    help="eager per-launch overhead in microseconds (default 5, an assumption)")
    ap.add_argument("--json", type=Path, help="write the checks and both models here")
    a = ap.parse_args(argv)
    try:
        if a.launch_us < 0:
            raise PimforgeError(f"--launch-us must be >= 0, not {a.launch_us:g}")
        nets = [network(n) for n in a.net] if a.net else list(NETWORKS)
        if a.json:
            check_output_file(a.json, "--json")
    except PimforgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    launch = a.launch_us * 1e-6
    print(f"GPU baseline MODELS (not measured), full Table 1 sizes, {a.launch_us:g} us per "
          f"eager launch; RP = routing procedure\n")
    print(gpu_models_table(nets, launch_s=launch))
    checks = paper_checks(nets, launch_s=launch)
    print()
    print(paper_checks_table(checks))
    if a.json:
        write_json(a.json, to_plain({"checks": checks,
                                     "models": {n.name: gpu_models(n, launch_s=launch)
                                                for n in nets}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
