"""Table 5 study: accuracy of the shipped digits CapsNet under four routing arithmetics.

    pimforge accuracy [--config C] [--rtl-sample [--rtl-images N]] [--json F]
    .venv/bin/python -m pimforge.sim.capsnet.accuracy [--rtl-sample]

(a) float64 reference routing, (b) float32 in the PE's fixed operation order
(IEEE special functions, sequential sums), (c) the PE's arithmetic without and
(d) with the exponential's accuracy recovery.  (c) and (d) are
:class:`~pimforge.verif.models.capsnet.pe_ops.PEOps`: the bit-exact PE model (EXP, ISQRT,
RECIP flows with the config's Newton steps and constants, MAC lane order) through
the :class:`~pimforge.verif.models.capsnet.routing.RoutingOps` interface.  The convolution
layers (the host GPU's part) run in float64 for every variant; only the routing
differs.  Test images are routed in consecutive batches of 100 (Caps-MN1's
batch), sharing ``b_ij`` as in Algorithm 1.

``--rtl-sample`` also routes one batch on the Verilated PE
(:func:`~pimforge.sim.capsnet.rtl_routing.rtl_sample_check`) and checks it equals
variant (d) (or (c) when the config has recovery off) bit for bit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from functools import partial

import numpy as np

from pimforge.gen.args import int_range, out_file
from pimforge.gen.config import Config, load_config
from pimforge.gen.errors import PimforgeError
from pimforge.gen.output import write_text
from pimforge.gen.provenance import stamp
from pimforge.verif.models.capsnet.pe_ops import PEOps
from pimforge.verif.models.capsnet.routing import RoutingOps, route_f32, route_f64, route_pim

from .. import verilator as vl
from .digits_net import EVAL_BATCH, ITERATIONS, TEST_IMAGES, load_digits_split, load_trained
from .rtl_routing import rtl_sample_check

__all__ = [
    "PAPER_TABLE5",
    "WITH",
    "WITHOUT",
    "AccuracyRow",
    "accuracy_table",
    "add_arguments",
    "evaluate",
    "run",
]

#: PIM-CapsNet Table 5 (origin, w/o recovery, w/ recovery), in percent.
PAPER_TABLE5 = {
    "Caps-MN1": (99.75, 99.73, 99.75), "Caps-MN2": (99.75, 99.74, 99.75),
    "Caps-MN3": (99.75, 99.73, 99.75), "Caps-CF1": (89.40, 89.15, 89.37),
    "Caps-CF2": (90.03, 89.91, 90.02), "Caps-CF3": (90.43, 90.08, 90.39),
    "Caps-EN1": (88.74, 88.19, 88.69), "Caps-EN2": (85.01, 84.16, 84.96),
    "Caps-EN3": (82.36, 81.64, 82.34), "Caps-SV1": (96.70, 95.08, 96.42),
    "Caps-SV2": (95.90, 95.92, 95.90), "Caps-SV3": (95.90, 95.92, 95.90),
}
WITHOUT = "PE approx, w/o recovery"
WITH = "PE approx, w/ recovery"


@dataclass(frozen=True)
class AccuracyRow:
    """One routing variant on the held-out split."""

    variant: str
    accuracy: float
    agree_with_f64: float
    max_abs_v_err: float
    #: Largest difference of an output capsule from the w/o-recovery PE variant
    #: (NaN for the first rows): shows how much the recovery multiply changes.
    max_abs_v_diff_vs_without: float = float("nan")
    #: Output capsule components whose bits differ from the w/o-recovery variant.
    bits_differ_vs_without: int = -1


def default_variants(cfg: Config) -> dict[str, object]:
    """The four Table 5 variants for *cfg* (its Newton steps, calibration, MAC lanes)."""
    return {"float64": route_f64, "float32": route_f32,
            WITHOUT: PEOps.from_config(cfg, recovery=False),
            WITH: PEOps.from_config(cfg, recovery=True)}


def evaluate(variants: dict[str, object] | None = None, cfg: Config | None = None,
             split: str = "test") -> list[AccuracyRow]:
    """Accuracy per routing variant.

    *variants* maps a label to a router ``(u, W, iterations) -> RoutingResult``
    or to a :class:`RoutingOps` (run through ``route_pim``); the default is
    :func:`default_variants` of ``cfg`` (preset ``default``).
    """
    cfg = cfg if cfg is not None else load_config("default")
    if variants is None:
        variants = default_variants(cfg)
    net = load_trained()
    xtr, ytr, xte, yte = load_digits_split()
    x, y = (xte, yte) if split == "test" else (xtr, ytr)
    u = net.primary_capsules(x)

    def run_(router):
        vs = [np.asarray(router(u[s:s + EVAL_BATCH], net.W, ITERATIONS).v)
              for s in range(0, len(u), EVAL_BATCH)]
        return np.concatenate(vs)

    v_ref = run_(route_f64).astype(np.float64)
    pred_ref = np.argmax(np.sum(v_ref ** 2, axis=-1), axis=1)
    rows, v_without = [], None
    for label, r in variants.items():
        router = partial(route_pim, ops=r) if isinstance(r, RoutingOps) else r
        v_raw = run_(router) if router is not route_f64 else v_ref
        v = v_raw.astype(np.float64)
        pred = np.argmax(np.sum(v ** 2, axis=-1), axis=1)
        extra = {}
        if label == WITHOUT:
            v_without = v_raw
        elif v_without is not None and v_raw.dtype == v_without.dtype:
            extra = {"max_abs_v_diff_vs_without": float(np.max(np.abs(v - v_without))),
                     "bits_differ_vs_without": int(np.count_nonzero(v_raw != v_without))}
        rows.append(AccuracyRow(variant=label, accuracy=float(np.mean(pred == y)),
                                agree_with_f64=float(np.mean(pred == pred_ref)),
                                max_abs_v_err=float(np.max(np.abs(v - v_ref))), **extra))
    return rows


def accuracy_table(rows: list[AccuracyRow]) -> str:
    lines = [(f"{'routing':<26} {'accuracy':>9} {'same class as f64':>18} {'max |v - v_f64|':>16}"
             f" {'max |v - v_w/o|':>16} {'v bits != w/o':>14}")]
    for r in rows:
        diff = ("" if r.bits_differ_vs_without < 0 else
                f" {r.max_abs_v_diff_vs_without:>16.2e} {r.bits_differ_vs_without:>14d}")
        lines.append(f"{r.variant:<26} {100 * r.accuracy:>8.2f}% {100 * r.agree_with_f64:>17.2f}% "
                     f"{r.max_abs_v_err:>16.2e}{diff}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    # --config (the dispatcher's) sets the Newton steps, recovery calibration and MAC
    # lanes of the PE variants.
    p.add_argument("--rtl-sample", action="store_true",
                   help="also route one test batch on the Verilated PE and check it bit for bit")
    p.add_argument("--rtl-images", type=int_range(1, TEST_IMAGES), default=EVAL_BATCH,
                   help=f"images in the RTL sample (default {EVAL_BATCH}, one routing batch)")
    p.add_argument("--json", type=out_file, help="write the rows (and the RTL check) as JSON here")


def run(args) -> int:

    cfg = args.config
    if args.rtl_sample:
        vl.preflight()          # the RTL sample is a Verilated build: say so before the table
    _, _, xte, _ = load_digits_split()
    if not 1 <= args.rtl_images <= len(xte):
        raise PimforgeError(f"--rtl-images must be between 1 and {len(xte)}, "
                            f"not {args.rtl_images}")
    c = PEOps.from_config(cfg).c
    print(f"digits CapsNet, {len(xte)} held-out images, routing batch {EVAL_BATCH}, "
          f"{ITERATIONS} iterations; PE of config {cfg.name}: {cfg.pe.newton_steps} Newton "
          f"step(s), {c.add_latency} MAC lanes, recovery R = {c.exp_recovery_factor!r}")
    rows = evaluate(cfg=cfg)
    print(accuracy_table(rows))
    out = {"config": cfg.name, "images": len(xte), "batch": EVAL_BATCH,
           "iterations": ITERATIONS, "recovery_factor": c.exp_recovery_factor,
           "rows": [dataclasses.asdict(r) for r in rows], "paper_table5": PAPER_TABLE5}
    status = 0
    if args.rtl_sample:
        res = rtl_sample_check(cfg, images=args.rtl_images)
        print(res.summary())
        out["rtl_sample"] = dataclasses.asdict(res)
        status = 0 if res.bit_exact else 1
    if args.json:
        write_text(args.json, json.dumps(stamp(out, "pimforge.accuracy", 1, cfg), indent=2,
                                         default=float) + "\n")
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pimforge.sim.capsnet.accuracy",
                                description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
