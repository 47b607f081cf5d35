"""Error of the PE approximations against exact float64 math, over routing-relevant ranges.

Each row runs the bit-exact golden model of a flow (the RTL computes the same
bits) on inputs drawn from a seeded generator and compares with numpy float64:
relative error ``|approx - exact| / |exact|``, its maximum and mean, and the
mean signed error (the bias that accuracy recovery removes).

Ranges: the exponential over the softmax inputs of routing (logits b_ij,
uniform in [-20, 20]); inverse square root over |s|^2 in [1e-6, 1e6] and the
reciprocal (softmax normalization, squash's 1/(1 + |s|^2)) over [1e-6, 1e6],
both log-uniform; division a/d with a log-uniform in [1e-3, 1e3].
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pimforge.rtl.capsnet.params import exp_recovery_factor, isqrt_magic, recip_magic

from .pe import div_approx, exp_approx, isqrt_approx, recip_approx

__all__ = ["EXP_RANGE", "POS_RANGE", "ErrorRow", "characterize"]

EXP_RANGE = (-20.0, 20.0)
POS_RANGE = (1e-6, 1e6)


@dataclasses.dataclass(frozen=True)
class ErrorRow:
    flow: str
    variant: str
    range: str
    samples: int
    max_rel: float
    mean_rel: float
    mean_signed: float


def _row(flow: str, variant: str, rng_txt: str, approx_bits: np.ndarray,
         exact: np.ndarray) -> ErrorRow:
    approx = approx_bits.view(np.float32).astype(np.float64)
    rel = (approx - exact) / np.abs(exact)
    return ErrorRow(flow, variant, rng_txt, len(exact), float(np.max(np.abs(rel))),
                    float(np.mean(np.abs(rel))), float(np.mean(rel)))


def _loguniform(rng: np.random.Generator, lo: float, hi: float, n: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.float32)


def characterize(cfg, *, samples: int = 200_000, seed: int = 1,
                 steps: tuple[int, ...] = (0, 1, 2)) -> list[ErrorRow]:
    """The error table for *cfg* (recovery constant from ``cfg.pe``), one row per variant."""
    rng = np.random.default_rng(seed)
    rows = []
    x = rng.uniform(*EXP_RANGE, samples).astype(np.float32)
    exact = np.exp(x.astype(np.float64))
    r = exp_recovery_factor(cfg.pe.calibration_samples, cfg.pe.calibration_seed)
    rng_txt = f"[{EXP_RANGE[0]:g}, {EXP_RANGE[1]:g}]"
    rows.append(_row("exp", "no recovery", rng_txt, exp_approx(x.view(np.uint32), recovery=None),
                     exact))
    rows.append(_row("exp", f"recovery R={r:.6f}", rng_txt,
                     exp_approx(x.view(np.uint32), recovery=r), exact))
    x = _loguniform(rng, *POS_RANGE, samples)
    d = _loguniform(rng, 1e-3, 1e3, samples)
    x64 = x.astype(np.float64)
    rng_txt = f"[{POS_RANGE[0]:g}, {POS_RANGE[1]:g}]"
    for n in steps:
        rows.append(_row("isqrt", f"{n} Newton", rng_txt,
                         isqrt_approx(x.view(np.uint32), newton_steps=n, magic=isqrt_magic(n)),
                         1.0 / np.sqrt(x64)))
    for n in steps:
        rows.append(_row("recip", f"{n} Newton", rng_txt,
                         recip_approx(x.view(np.uint32), newton_steps=n, magic=recip_magic(n)),
                         1.0 / x64))
    for n in steps:
        rows.append(_row("div", f"{n} Newton", f"[1e-3, 1e3] / {rng_txt}",
                         div_approx(d.view(np.uint32), x.view(np.uint32), newton_steps=n,
                                    magic=recip_magic(n)),
                         d.astype(np.float64) / x64))
    return rows
