"""Table 5 study: accuracy of the shipped digits CapsNet under four routing arithmetics.

    .venv/bin/python -m pimforge.sim.capsnet.accuracy

(a) float64 reference routing, (b) float32 in the PE's fixed operation
order, (c) the PE approximations of Sec. 5.2.2 without and (d) with the
exponential's accuracy recovery.  (c) and (d) use :class:`ApproxOps` through
the :class:`~pimforge.verif.models.routing.RoutingOps` interface; a bit-exact
PE model implementing the same interface can be passed to :func:`evaluate`
instead.  The convolution layers (the host GPU's part) run in float64 for
every variant; only the routing differs.  Test images are routed in
consecutive batches of 100 (Caps-MN1's batch), sharing ``b_ij`` as in
Algorithm 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from pimforge.gen.config import Config, load_config
from pimforge.verif.models.routing import RoutingOps, route_f32, route_f64, route_pim

from .approx_ops import ApproxOps
from .digits_net import EVAL_BATCH, ITERATIONS, load_digits_split, load_trained

__all__ = ["AccuracyRow", "evaluate", "accuracy_table", "PAPER_TABLE5"]

#: PIM-CapsNet Table 5 (origin, w/o recovery, w/ recovery), in percent.
PAPER_TABLE5 = {
    "Caps-MN1": (99.75, 99.73, 99.75), "Caps-MN2": (99.75, 99.74, 99.75),
    "Caps-MN3": (99.75, 99.73, 99.75), "Caps-CF1": (89.40, 89.15, 89.37),
    "Caps-CF2": (90.03, 89.91, 90.02), "Caps-CF3": (90.43, 90.08, 90.39),
    "Caps-EN1": (88.74, 88.19, 88.69), "Caps-EN2": (85.01, 84.16, 84.96),
    "Caps-EN3": (82.36, 81.64, 82.34), "Caps-SV1": (96.70, 95.08, 96.42),
    "Caps-SV2": (95.90, 95.92, 95.90), "Caps-SV3": (95.90, 95.92, 95.90),
}


@dataclass(frozen=True)
class AccuracyRow:
    """One routing variant on the held-out split."""

    variant: str
    accuracy: float
    agree_with_f64: float
    max_abs_v_err: float


def evaluate(variants: dict[str, object] | None = None, cfg: Config | None = None,
             split: str = "test") -> list[AccuracyRow]:
    """Accuracy per routing variant.

    *variants* maps a label to a router ``(u, W, iterations) -> RoutingResult``
    or to a :class:`RoutingOps` (run through ``route_pim``); the default is the
    four Table 5 variants built from ``cfg.pe`` (preset ``default``).
    """
    cfg = cfg if cfg is not None else load_config("default")
    if variants is None:
        variants = {
            "float64": route_f64,
            "float32": route_f32,
            "PIM approx, w/o recovery": ApproxOps.from_config(cfg.pe, recovery=False),
            "PIM approx, w/ recovery": ApproxOps.from_config(cfg.pe, recovery=True),
        }
    net = load_trained()
    xtr, ytr, xte, yte = load_digits_split()
    x, y = (xte, yte) if split == "test" else (xtr, ytr)
    u = net.primary_capsules(x)

    def run(router):
        vs = [np.asarray(router(u[s:s + EVAL_BATCH], net.W, ITERATIONS).v, dtype=np.float64)
              for s in range(0, len(u), EVAL_BATCH)]
        return np.concatenate(vs)

    v_ref = run(route_f64)
    pred_ref = np.argmax(np.sum(v_ref ** 2, axis=-1), axis=1)
    rows = []
    for label, r in variants.items():
        router = partial(route_pim, ops=r) if isinstance(r, RoutingOps) else r
        v = v_ref if router is route_f64 else run(router)
        pred = np.argmax(np.sum(v ** 2, axis=-1), axis=1)
        rows.append(AccuracyRow(variant=label, accuracy=float(np.mean(pred == y)),
                                agree_with_f64=float(np.mean(pred == pred_ref)),
                                max_abs_v_err=float(np.max(np.abs(v - v_ref)))))
    return rows


def accuracy_table(rows: list[AccuracyRow]) -> str:
    lines = [f"{'routing':<26} {'accuracy':>9} {'same class as f64':>18} {'max |v - v_f64|':>16}"]
    for r in rows:
        lines.append(f"{r.variant:<26} {100 * r.accuracy:>8.2f}% {100 * r.agree_with_f64:>17.2f}% "
                     f"{r.max_abs_v_err:>16.2e}")
    return "\n".join(lines)


def main() -> None:
    _, _, xte, _ = load_digits_split()
    print(f"digits CapsNet, {len(xte)} held-out images, routing batch {EVAL_BATCH}, "
          f"{ITERATIONS} iterations")
    print(accuracy_table(evaluate()))


if __name__ == "__main__":
    main()
