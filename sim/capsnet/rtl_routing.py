"""Dynamic routing with every floating-point operation executed by the PE RTL.

:func:`route_on_pe` performs :func:`~pimforge.verif.models.capsnet.routing.route_pim` step for
step, but each float32 operation is a record stream through a PE flow, run on the
Verilated :class:`~pimforge.rtl.capsnet.pe.CapsNetPE` by the native stream driver
(:mod:`pimforge.sim.stream`; Python never sees a clock cycle):

===================================  ==================================================
route_pim step                        PE records
===================================  ==================================================
Eq. 1 ``u_hat = sum_l W u``           MAC groups of ``C_L`` products
Eq. 5 ``b - max_j b``                 MAC groups ``(b, 1), (max, -1)``; the max itself
                                      is a comparison (exact) done by the controller
``e = exp(.)``                        EXP
``z = sum_j e``                       MAC groups ``(e, 1)`` of ``N_H``
``c = e * recip(z)``                  DIV ``(e, z)``
Eq. 2 ``s = sum_i u_hat c``           MAC groups of ``N_L``
Eq. 3 ``n = sum s s``                 MAC groups of ``C_H``
``n * recip(n + 1) * rsqrt(n)``       MAC ``(n, 1), (1, 1)``; RECIP; ISQRT; two one-product MACs
``v = s * scale``                     one-product MAC groups (``scale = 0`` where ``n = 0``
                                      is a select, exact)
Eq. 4 ``a = sum_c u_hat v``           MAC groups of ``C_H``
``b + sum_k a``                       MAC groups ``(a_k, 1)`` of ``B``; MAC ``(b, 1), (sum, 1)``
===================================  ==================================================

With :class:`~pimforge.verif.models.capsnet.pe_ops.PEOps` of the same config,
``route_pim(u, W, r, PEOps(...))`` must equal the result bit for bit;
:func:`rtl_sample_check` checks that on a batch of the trained digits network.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import SimulationError
from pimforge.rtl.capsnet.pe import Flow
from pimforge.sim.stream import StreamDriver
from pimforge.verif.models.capsnet.pe_ops import PEOps
from pimforge.verif.models.capsnet.routing import check_shapes, route_pim

from .digits_net import EVAL_BATCH, ITERATIONS, load_digits_split, load_trained

__all__ = [
    "PEStreamRunner",
    "RTLSampleResult",
    "route_on_pe",
    "routing_pe_counts",
    "rtl_sample_check",
]

F32 = np.float32
#: Records per driver invocation: bounds the stimulus file (28 bytes a record).
CHUNK = 1 << 21


class PEStreamRunner:
    """Runs flows on the Verilated PE of *cfg*; counts records, cycles and runs.

    Each call streams one record per cycle. Groups never straddle a chunk, so the
    PE's MAC state starts fresh in every invocation exactly as the stream model says.
    """

    def __init__(self, cfg):

        self.Flow = Flow
        el = elaborate("capsnet_pe", cfg)
        self.latency = el.manifest["latencies"]["pe"]
        t0 = time.monotonic()
        self.drv = StreamDriver(el, name="capsnet_pe-routing")
        self.build_s = time.monotonic() - t0
        self.records = self.cycles = self.runs = self.mac_groups = 0
        self.sim_s = 0.0
        self.per_flow: dict[str, int] = {}

    def __call__(self, flow, a, b=None, group: int = 1) -> np.ndarray:
        """Results of *flow* on operand arrays (flattened); MAC sums groups of *group*."""
        a = np.ascontiguousarray(a, dtype=F32).ravel().view(np.uint32)
        b = (np.zeros_like(a) if b is None
             else np.ascontiguousarray(np.broadcast_to(b, a.shape) if np.ndim(b) == 0 else b,
                                       dtype=F32).ravel().view(np.uint32))
        if a.shape != b.shape:
            raise SimulationError(f"operand sizes differ: {a.shape} vs {b.shape}")
        is_mac = flow is self.Flow.MAC
        g = group if is_mac else 1
        if len(a) % g:
            raise SimulationError(f"{len(a)} MAC operands do not split into groups of {g}")
        step = max(g, CHUNK // g * g)
        outs = []
        for s in range(0, len(a), step):
            outs.append(self._run(flow, a[s:s + step], b[s:s + step], g, is_mac))
        self.per_flow[flow.name] = self.per_flow.get(flow.name, 0) + len(a)
        if is_mac:
            self.mac_groups += len(a) // g
        return (np.concatenate(outs) if outs else np.zeros(0, np.uint32)).view(F32)

    def _run(self, flow, a, b, g, is_mac) -> np.ndarray:
        n = len(a)
        recs = self.drv.records(n)
        recs["op"] = flow.value
        recs["in_valid"] = 1
        recs["a"], recs["b"] = a, b
        idx = np.arange(n)
        if is_mac:
            recs["first"] = (idx % g) == 0
            recs["last"] = (idx % g) == g - 1
        recs["tag"] = idx & 0xFFFF
        res = self.drv.run(recs, drain=self.latency + 1)
        out = res.outputs
        want_idx = idx[g - 1::g] if is_mac else idx
        if (len(out) != len(want_idx)
                or not np.array_equal(out["cycle"].astype(np.int64), want_idx + self.latency)
                or not np.array_equal(out["out_tag"].astype(np.int64), want_idx & 0xFFFF)):
            raise SimulationError(f"PE {flow.name} run: {len(out)} outputs, expected "
                                  f"{len(want_idx)} at input cycle + {self.latency}")
        self.records += n
        self.cycles += res.cycles
        self.sim_s += res.seconds
        self.runs += 1
        return out["result"].astype(np.uint32)


def route_on_pe(u: np.ndarray, W: np.ndarray, iterations: int, pe) -> dict:
    """``route_pim`` with every float operation run by ``pe(flow, a, b, group)``.

    Returns a dict with ``v``, ``s``, ``c``, ``b``, ``u_hat`` (float32) like
    :class:`~pimforge.verif.models.capsnet.routing.RoutingResult`.
    """

    F = pe.Flow
    B, n_l, n_h, c_h, c_l = check_shapes(u, W, iterations)
    u = np.asarray(u, dtype=F32)
    W = np.asarray(W, dtype=F32)
    one = F32(1)
    # Eq. 1: group (k, i, j, c) over l
    wa = np.broadcast_to(W[None], (B, n_l, n_h, c_h, c_l))
    ub = np.broadcast_to(u[:, :, None, None, :], (B, n_l, n_h, c_h, c_l))
    u_hat = pe(F.MAC, wa, ub, c_l).reshape(B, n_l, n_h, c_h)
    b = np.zeros((n_l, n_h), dtype=F32)
    for _ in range(iterations):
        # Eq. 5
        m = np.broadcast_to(b.max(axis=1, keepdims=True), b.shape)
        d = pe(F.MAC, np.stack([b, m], -1), np.stack([np.full_like(b, one),
                                                     np.full_like(b, -one)], -1), 2)
        e = pe(F.EXP, d).reshape(n_l, n_h)
        z = pe(F.MAC, e, one, n_h)
        c = pe(F.DIV, e, np.repeat(z, n_h)).reshape(n_l, n_h)
        # Eq. 2: group (k, j, c) over i
        uh = np.moveaxis(u_hat, 1, 3)                                    # (B, N_H, C_H, N_L)
        cc = np.broadcast_to(c.T[None, :, None, :], uh.shape)
        s = pe(F.MAC, uh, cc, n_l).reshape(B, n_h, c_h)
        # Eq. 3
        n = pe(F.MAC, s, s, c_h)                                         # (B * N_H,)
        n1 = pe(F.MAC, np.stack([n, np.full_like(n, one)], -1), one, 2)
        r = pe(F.RECIP, n1)
        q = pe(F.ISQRT, n)
        scale = pe(F.MAC, pe(F.MAC, n, r, 1), q, 1)
        scale = np.where(n > 0, scale, F32(0)).astype(F32).reshape(B, n_h)
        v = pe(F.MAC, s, np.broadcast_to(scale[:, :, None], s.shape), 1).reshape(B, n_h, c_h)
        # Eq. 4: group (k, i, j) over c, then (i, j) over k, then b + that
        vv = np.broadcast_to(v[:, None, :, :], u_hat.shape)
        a = pe(F.MAC, u_hat, vv, c_h).reshape(B, n_l, n_h)
        sa = pe(F.MAC, np.moveaxis(a, 0, 2), one, B)                     # (N_L * N_H,)
        b = pe(F.MAC, np.stack([b.ravel(), sa], -1), one, 2).reshape(n_l, n_h)
    return {"v": v, "s": s, "c": c, "b": b, "u_hat": u_hat}


def routing_pe_counts(batch: int, n_l: int, n_h: int, c_l: int, c_h: int,
                      iterations: int) -> dict[str, int]:
    """PE inputs per flow (and MAC groups) that :func:`route_on_pe` issues, in closed form.

    The keys are those of :func:`pimforge.sim.capsnet.energy.pim_energy`.
    """
    B, L, H = batch, n_l, n_h
    mac = B * L * H * c_h * c_l
    groups = B * L * H * c_h
    it_mac = (2 * L * H + L * H + B * H * c_h * L + B * H * c_h + 2 * B * H + 2 * B * H
              + B * H * c_h + B * L * H * c_h + L * H * B + 2 * L * H)
    it_groups = (L * H + L + B * H * c_h + B * H + B * H + 2 * B * H + B * H * c_h + B * L * H
                 + L * H + L * H)
    return {"mac": mac + iterations * it_mac, "mac_groups": groups + iterations * it_groups,
            "exp": iterations * L * H, "div": iterations * L * H,
            "recip": iterations * B * H, "isqrt": iterations * B * H}


@dataclass(frozen=True)
class RTLSampleResult:
    """Outcome of routing one batch on the PE RTL vs the PE-ops model."""

    images: int
    recovery: bool
    bit_exact: bool
    mismatches: dict
    same_class_as_model: float
    records: int
    cycles: int
    sim_s: float
    build_s: float
    per_flow: dict

    def summary(self) -> str:
        verdict = ("bit-exact" if self.bit_exact else
                   "DIFFERS: " + ", ".join(f"{k} {n}" for k, n in self.mismatches.items() if n))
        flows = ", ".join(f"{k} {n:,}" for k, n in sorted(self.per_flow.items()))
        return (f"RTL sample: {self.images} test images routed on the PE RTL ({flows} records); "
                f"v, s, c, b, u_hat vs route_pim(PEOps, recovery "
                f"{'on' if self.recovery else 'off'}): {verdict}; "
                f"{self.cycles:,} cycles in {self.sim_s:.2f}s of Verilator time "
                f"({self.cycles / max(self.sim_s, 1e-9):,.0f} cycles/s), build {self.build_s:.1f}s")


def rtl_sample_check(cfg=None, *, images: int | None = None, start: int = 0,
                     recovery: bool | None = None) -> RTLSampleResult:
    """Route test images ``[start, start + images)`` of the digits network on the PE RTL.

    *images* defaults to one routing batch (``EVAL_BATCH``); the routing of those images
    shares ``b_ij`` exactly as in the accuracy study.
    """


    cfg = cfg if cfg is not None else load_config("default")
    if recovery is not None:
        cfg = cfg.replace(pe=dataclasses.replace(cfg.pe, exp_recovery=bool(recovery)))
    images = EVAL_BATCH if images is None else images
    net = load_trained()
    _, _, xte, _ = load_digits_split()
    if not (1 <= images and 0 <= start and start + images <= len(xte)):
        raise SimulationError(f"images {start}..{start + images} outside the {len(xte)} "
                              "held-out images")
    u = net.primary_capsules(xte[start:start + images])
    runner = PEStreamRunner(cfg)
    got = route_on_pe(u, net.W, ITERATIONS, runner)
    ref = route_pim(u, net.W, ITERATIONS, PEOps.from_config(cfg))
    mism = {k: int(np.count_nonzero(np.asarray(got[k], F32).view(np.uint32)
                                    != np.asarray(getattr(ref, k), F32).view(np.uint32)))
            for k in ("u_hat", "c", "s", "v", "b")}
    cls_got = np.argmax(np.sum(got["v"].astype(np.float64) ** 2, -1), 1)
    cls_ref = np.argmax(np.sum(ref.v.astype(np.float64) ** 2, -1), 1)
    return RTLSampleResult(images=images, recovery=cfg.pe.exp_recovery,
                           bit_exact=not any(mism.values()), mismatches=mism,
                           same_class_as_model=float(np.mean(cls_got == cls_ref)),
                           records=runner.records, cycles=runner.cycles, sim_s=runner.sim_s,
                           build_s=runner.build_s, per_flow=dict(runner.per_flow))
