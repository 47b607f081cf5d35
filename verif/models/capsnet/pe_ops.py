"""The PIM-CapsNet PE's arithmetic as a :class:`~pimforge.verif.models.capsnet.routing.RoutingOps`.

:class:`PEOps` plugs the bit-exact PE model (:mod:`pimforge.verif.models.capsnet.pe`)
into :func:`~pimforge.verif.models.capsnet.routing.route_pim`:

* ``exp``, ``rsqrt`` and ``recip`` are the PE's EXP, ISQRT and RECIP flows (constants
  from :mod:`pimforge.rtl.capsnet.params`, the one place they are derived);
* ``sum`` is the MAC flow's order: element ``j`` of a reduction goes to lane
  ``j % La`` (``La = fp.add_latency``), each lane accumulates sequentially, and the
  lanes are reduced as ``((S_0 + S_1) + S_2) + ...`` with unused lanes -0.0.

Every other float32 step of ``route_pim`` (a product, ``b - max``, ``n + 1``) is one
IEEE binary32 operation that the PE's MAC flow computes bit for bit (a product as a
one-element group, a sum of two as a two-element group with a factor 1), because the
PE's adder and multiplier are IEEE round-to-nearest-even with subnormals; only NaN
payloads differ (the PE returns the canonical NaN), and the routing produces no NaN.
:mod:`pimforge.sim.capsnet.rtl_routing` runs that whole correspondence on the RTL.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from pimforge.rtl.capsnet.params import pe_constants

from .pe import exp_approx, isqrt_approx, recip_approx

__all__ = ["PEOps", "lane_sum"]

F32 = np.float32
_NEG_ZERO = F32(-0.0)


def lane_sum(x: np.ndarray, axis: int, lanes: int) -> np.ndarray:
    """Float32 sum along *axis* in the PE MAC order with *lanes* interleaved partial sums."""
    x = np.moveaxis(np.asarray(x, dtype=F32), axis, 0)
    n = x.shape[0]
    parts = []
    for lane in range(lanes):
        if lane < n:
            acc = x[lane].copy()          # -0.0 + p is p, bit for bit (also for p = +-0)
            for t in range(lane + lanes, n, lanes):
                acc = (acc + x[t]).astype(F32, copy=False)
        else:
            acc = np.full(x.shape[1:], _NEG_ZERO, dtype=F32)
        parts.append(acc)
    out = parts[0]
    for p in parts[1:]:
        out = (out + p).astype(F32, copy=False)
    return out


class PEOps:
    """Routing arithmetic of the PE of one config.

    Parameters
    ----------
    pe : PEConfig
        ``cfg.pe``: Newton steps, recovery switch, calibration draw.
    fp : FPConfig
        ``cfg.fp``: the adder latency sets the MAC lane count.
    recovery : bool, optional
        Overrides ``pe.exp_recovery`` (the accuracy study runs both).
    """

    def __init__(self, pe, fp, *, recovery: bool | None = None):
        self.c = pe_constants(SimpleNamespace(pe=pe, fp=fp))
        self.recovery = self.c.exp_recovery if recovery is None else bool(recovery)
        self.newton_steps = self.c.newton_steps
        self.lanes = self.c.add_latency
        self.factor = self.c.exp_recovery_factor if self.recovery else None
        self.name = f"pe{'+recovery' if self.recovery else ''}"

    @classmethod
    def from_config(cls, cfg, *, recovery: bool | None = None) -> PEOps:
        return cls(cfg.pe, cfg.fp, recovery=recovery)

    @staticmethod
    def _bits(x) -> np.ndarray:
        return np.ascontiguousarray(x, dtype=F32).view(np.uint32)

    def exp(self, x: np.ndarray) -> np.ndarray:
        return exp_approx(self._bits(x), recovery=self.factor).view(F32)

    def rsqrt(self, x: np.ndarray) -> np.ndarray:
        return isqrt_approx(self._bits(x), newton_steps=self.newton_steps,
                            magic=self.c.isqrt_magic).view(F32)

    def recip(self, x: np.ndarray) -> np.ndarray:
        return recip_approx(self._bits(x), newton_steps=self.newton_steps,
                            magic=self.c.recip_magic).view(F32)

    def sum(self, x: np.ndarray, axis: int) -> np.ndarray:
        return lane_sum(x, axis, self.lanes)
