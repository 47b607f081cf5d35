"""``pimforge capsnet-dist``: the Fig. 18 study of the B/L/H workload distribution.

For each network of Table 1 (or those named with ``--net``) and each PE frequency
(``--freq``, default 312.5, 625 and 937.5 MHz as in Fig. 18) prints the execution
scores ``S = 1/(alpha E + beta M)`` of the three dimensions and the chosen one,
then a row per network with its choice at every frequency; ``--json`` writes
:func:`~pimforge.sim.capsnet.distribution.frequency_study`.
"""

from __future__ import annotations

import argparse

from pimforge.gen.args import AppendUnique, number_range, out_file
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.gen.provenance import stamp

from .distribution import FIG18_FREQS_MHZ, frequency_study
from .networks import network_names

__all__ = ["add_arguments", "run", "study_text"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--freq", type=number_range(1.0, 5000.0), action=AppendUnique, metavar="MHZ",
                   help="PE frequency in MHz (repeatable; default 312.5, 625, 937.5)")
    p.add_argument("--net", action=AppendUnique, metavar="NAME",
                   help="only this network of Table 1 (repeatable; default all 12)")
    p.add_argument("--json", type=out_file, help="write the study as JSON here")


def study_text(study: dict) -> str:
    """The study as two text tables: scores per (network, frequency), then choices."""
    head = (f"{'network':<10} {'MHz':>6}  {'S_B (1/s)':>11} {'S_L (1/s)':>11} "
            f"{'S_H (1/s)':>11}  best")
    lines = [(f"execution score S = 1/(alpha E + beta M), config {study['config']}, "
             f"{study['vaults']} vaults, beta {study['beta_s_per_byte']:.3g} s/byte"),
             head, "-" * len(head)]
    for n in study["networks"]:
        for p in n["per_freq"]:
            s = p["scores"]
            lines.append(f"{n['network']:<10} {p['freq_mhz']:>6g}  {s['B']['score']:>11.1f} "
                         f"{s['L']['score']:>11.1f} {s['H']['score']:>11.1f}  {p['best']}")
    freqs = study["freqs_mhz"]
    lines += ["", f"{'network':<10} " + " ".join(f"{f:>7g}" for f in freqs) + "  (MHz)"]
    for n in study["networks"]:
        mark = "  <- changes with frequency" if n["changes"] else ""
        lines.append(f"{n['network']:<10} " + " ".join(f"{c:>7}" for c in n["choices"]) + mark)
    lines.append("choices per frequency: " + "; ".join(
        f"{f} MHz " + " ".join(f"{d}={k}" for d, k in c.items())
        for f, c in study["choice_counts"].items()))
    return "\n".join(lines)


def run(args) -> int:


    cfg = args.config
    nets = args.net
    if nets:
        bad = [n for n in nets if n not in network_names()]
        if bad:
            raise PimforgeError(f"unknown network {bad[0]!r}; choose from "
                                f"{', '.join(network_names())}")
    study = frequency_study(cfg, tuple(args.freq or FIG18_FREQS_MHZ), nets)
    print(study_text(study))
    if args.json:
        write_json(args.json, stamp(study, "pimforge.capsnet-dist", 1, cfg))
    return 0
