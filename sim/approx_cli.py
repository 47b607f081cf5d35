"""``pimforge approx``: the error table of the PE approximations (exp, inverse sqrt, division)."""

from __future__ import annotations

import argparse
import dataclasses

from pimforge.gen.args import count_in_ram, out_file, seed
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_json
from pimforge.gen.provenance import stamp
from pimforge.rtl.capsnet.params import pe_constants
from pimforge.verif.models.capsnet.approx_error import characterize

__all__ = ["BYTES_PER_SAMPLE", "add_arguments", "run"]

#: Peak memory per ``--samples`` (measured: 114 MB at 1e6 samples, 313 MB at 4e6, i.e.
#: 66 bytes each over a base of 48 MB), with a margin; bounds --samples by the RAM.
BYTES_PER_SAMPLE = 96
_BASE_BYTES = 256 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--samples", type=count_in_ram(100, BYTES_PER_SAMPLE, "sample", _BASE_BYTES),
                   default=200_000,
                   help="inputs per row")
    p.add_argument("--seed", type=seed, default=1, help="seed of the input draw")
    p.add_argument("--json", type=out_file, help="also write the rows as JSON here")


def run(args) -> int:

    if args.samples < 100:
        raise PimforgeError(f"--samples must be at least 100, not {args.samples}")
    cfg = args.config
    c = pe_constants(cfg)
    rows = characterize(cfg, samples=args.samples, seed=args.seed)
    print(f"PE approximation error vs float64 (config {cfg.name}, {args.samples} samples per "
          f"row, seed {args.seed})")
    print(f"isqrt magic 0x{c.isqrt_magic:08x}, recip magic 0x{c.recip_magic:08x}, "
          f"exp bias {c.exp_bias!r}, recovery R {c.exp_recovery_factor!r} "
          f"({cfg.pe.calibration_samples} samples, seed {cfg.pe.calibration_seed})")
    print(f"{'flow':6s} {'variant':22s} {'input range':28s} {'max rel err':>12s} "
          f"{'mean rel err':>12s} {'mean signed':>12s}")
    for r in rows:
        print(f"{r.flow:6s} {r.variant:22s} {r.range:28s} {r.max_rel:12.3e} {r.mean_rel:12.3e} "
              f"{r.mean_signed:+12.3e}")
    if args.json:
        write_json(args.json, stamp({"samples": args.samples, "seed": args.seed,
                                     "rows": [dataclasses.asdict(r) for r in rows]},
                                    "pimforge.approx", 1, cfg))
    return 0
