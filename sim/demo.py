"""``pimforge demo``: dynamic routing (PIM-CapsNet Algorithm 1) with its arithmetic on the PE RTL.

A small routing problem (random L capsules ``u`` and weights ``W`` from a fixed
seed) runs for a few iterations. Every floating-point step of Eq. 2-5 goes
through the Verilated :class:`~pimforge.rtl.capsnet.pe.CapsNetPE` of the
config, driven by the native stream driver (:mod:`pimforge.sim.stream`):

* softmax (Eq. 5): EXP on every ``b_ij``, MAC for ``sum_j e_ij``, DIV ``e_ij / sum``;
* Eq. 2: MAC ``s_j = sum_i c_ij * u_hat_j|i``;
* squash (Eq. 3): MAC ``|s_j|^2``, ISQRT of it, RECIP of ``1 + |s_j|^2`` (the host adds
  the 1 in float32), scale ``|s|^2 * isqrt * recip`` applied by the host in float32;
* Eq. 4: MAC ``b_ij + u_hat_j|i . v_j`` (``b_ij`` enters the group as ``b_ij * 1``).

Every RTL result is compared bit for bit with the golden model fed the same
inputs (exit status 1 on any difference), and shown next to exact float64
math; the whole routing is also run in float64 for the end-to-end error.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="config preset or TOML path (default: default)")
    p.add_argument("--l-caps", type=int, default=32, help="L capsules (default 32)")
    p.add_argument("--h-caps", type=int, default=10, help="H capsules (default 10)")
    p.add_argument("--iterations", type=int, default=3, help="routing iterations (default 3)")
    p.add_argument("--seed", type=int, default=7, help="seed of u and W (default 7)")


class _PERunner:
    """Runs record streams through the Verilated PE and checks them against the model."""

    def __init__(self, cfg):
        from ..gen.elaborate import elaborate
        from ..rtl.capsnet.pe import Flow
        from ..verif.models.capsnet_pe import PEModel
        from .stream import StreamDriver

        self.Flow = Flow
        self.el = elaborate("capsnet_pe", cfg)
        self.latency = self.el.manifest["latencies"]["pe"]
        self.model = PEModel(cfg)
        t0 = time.monotonic()
        self.drv = StreamDriver(self.el, name="capsnet_pe-demo")
        self.build_s = time.monotonic() - t0
        self.cycles = 0
        self.sim_s = 0.0
        self.results = 0
        self.mismatches = 0

    def run(self, flow, a, b=None, groups=None) -> np.ndarray:
        """Results (float32) of *flow* on operand arrays; MAC sums consecutive *groups*."""
        from ..verif.models.capsnet_pe import Record

        a = np.ascontiguousarray(a, dtype=np.float32).ravel().view(np.uint32)
        b = (np.zeros_like(a) if b is None
             else np.ascontiguousarray(b, dtype=np.float32).ravel().view(np.uint32))
        n = len(a)
        first = np.zeros(n, bool)
        last = np.zeros(n, bool)
        if flow is self.Flow.MAC:
            ends = np.cumsum(groups)
            first[np.r_[0, ends[:-1]]] = True
            last[ends - 1] = True
        recs = self.drv.records(n)
        recs["op"] = flow.value
        recs["in_valid"] = 1
        recs["a"], recs["b"], recs["first"], recs["last"] = a, b, first, last
        recs["tag"] = np.arange(n) & 0xFFFF
        res = self.drv.run(recs, drain=self.latency + 1)
        self.cycles += res.cycles
        self.sim_s += res.seconds
        out = res.outputs
        want = self.model.stream([Record(flow, int(x), int(y), bool(f), bool(s))
                                  for x, y, f, s in zip(a, b, first, last)])
        want_idx = np.array([w[0] for w in want], dtype=np.int64)
        want_bits = np.array([w[1] for w in want], dtype=np.uint32)
        self.results += len(out)
        ok = (len(out) == len(want)
              and np.array_equal(out["result"].astype(np.uint32), want_bits)
              and np.array_equal(out["out_tag"].astype(np.int64), want_idx & 0xFFFF)
              and np.array_equal(out["cycle"].astype(np.int64), want_idx + self.latency))
        if not ok:
            self.mismatches += 1
            print(f"  MISMATCH in {flow.name}: {len(out)} RTL results, {len(want)} expected")
        return out["result"].astype(np.uint32).view(np.float32)


def _exact_routing(u_hat: np.ndarray, iters: int):
    b = np.zeros(u_hat.shape[:2])
    for _ in range(iters):
        c = np.exp(b) / np.exp(b).sum(axis=1, keepdims=True)
        s = np.einsum("ij,ijd->jd", c, u_hat)
        n2 = (s * s).sum(axis=1, keepdims=True)
        v = n2 / (1 + n2) * s / np.sqrt(n2)
        b = b + np.einsum("ijd,jd->ij", u_hat, v)
    return c, v, b


def run(args) -> int:
    from ..gen.config import load_config
    from ..gen.errors import PimforgeError

    for name in ("l_caps", "h_caps", "iterations"):
        if not 1 <= getattr(args, name) <= 4096:
            raise PimforgeError(f"--{name.replace('_', '-')} must be between 1 and 4096, "
                                f"not {getattr(args, name)}")
    t_start = time.monotonic()
    cfg = load_config(args.config)
    pe = _PERunner(cfg)
    F = pe.Flow
    print(f"capsnet_pe (config {cfg.name}): latency {pe.latency} cycles for every flow, "
          f"{cfg.pe.newton_steps} Newton step(s), exp recovery "
          f"{'on' if cfg.pe.exp_recovery else 'off'}; Verilator build {pe.build_s:.1f}s")

    L, H, DI, DO = args.l_caps, args.h_caps, 8, 16
    rng = np.random.default_rng(args.seed)
    u = rng.normal(0, 1, (L, DI)).astype(np.float32)
    W = rng.normal(0, 0.5, (L, H, DI, DO)).astype(np.float32)
    u_hat = np.einsum("id,ijde->ije", u.astype(np.float64), W.astype(np.float64)).astype(
        np.float32)                                        # Eq. 1, prepared by the host
    b = np.zeros((L, H), np.float32)
    one = np.float32(1.0)
    for it in range(args.iterations):
        b_in = b
        # Eq. 5: softmax over H capsules
        e = pe.run(F.EXP, b).reshape(L, H)
        den = pe.run(F.MAC, e, np.full_like(e, one), groups=[H] * L)
        c = pe.run(F.DIV, e, np.repeat(den, H)).reshape(L, H)
        # Eq. 2: s_j = sum_i c_ij u_hat_j|i (group per (j, d), over i)
        cs = np.broadcast_to(c[:, :, None], u_hat.shape).transpose(1, 2, 0)
        s = pe.run(F.MAC, cs, u_hat.transpose(1, 2, 0), groups=[L] * (H * DO)).reshape(H, DO)
        # Eq. 3: squash
        n2 = pe.run(F.MAC, s, s, groups=[DO] * H)
        isq = pe.run(F.ISQRT, n2)
        rcp = pe.run(F.RECIP, (n2 + one).astype(np.float32))
        scale = (n2 * isq * rcp).astype(np.float32)
        v = (s * scale[:, None]).astype(np.float32)
        # Eq. 4: b_ij + u_hat_j|i . v_j (group per (i, j): b_ij * 1 first, then DO products)
        aa = np.concatenate([b[:, :, None], u_hat], axis=2)
        bb = np.concatenate([np.ones((L, H, 1), np.float32),
                             np.broadcast_to(v[None], u_hat.shape)], axis=2)
        b = pe.run(F.MAC, aa, bb, groups=[DO + 1] * (L * H)).reshape(L, H)

        if it == args.iterations - 1:
            x64 = n2.astype(np.float64)
            print(f"\nsquash, iteration {it + 1} (|s|^2 -> ISQRT, 1 + |s|^2 -> RECIP):")
            print(f"  {'j':>2s} {'|s|^2':>12s} {'isqrt RTL':>12s} {'exact':>12s} {'rel err':>9s}"
                  f" {'recip RTL':>12s} {'exact':>12s} {'rel err':>9s}")
            for j in range(min(H, 6)):
                ex_i, ex_r = 1 / np.sqrt(x64[j]), 1 / (1 + x64[j])
                print(f"  {j:2d} {x64[j]:12.6g} {isq[j]:12.6g} {ex_i:12.6g} "
                      f"{isq[j] / ex_i - 1:+9.2e} {rcp[j]:12.6g} {ex_r:12.6g} "
                      f"{rcp[j] / ex_r - 1:+9.2e}")
            bin_ = b_in.astype(np.float64)
            ex_e = np.exp(bin_)
            ex_c = ex_e / ex_e.sum(axis=1, keepdims=True)
            print(f"\nsoftmax, iteration {it + 1}, L capsule 0 (b -> EXP, sum -> MAC, "
                  f"e / sum -> DIV):")
            print(f"  {'j':>2s} {'b_0j':>10s} {'exp RTL':>12s} {'exact':>12s} {'rel err':>9s} "
                  f"{'c RTL':>10s} {'exact':>10s} {'rel err':>9s}")
            for j in range(min(H, 6)):
                print(f"  {j:2d} {bin_[0, j]:10.5f} {e[0, j]:12.6g} {ex_e[0, j]:12.6g} "
                      f"{e[0, j] / ex_e[0, j] - 1:+9.2e} {c[0, j]:10.6f} {ex_c[0, j]:10.6f} "
                      f"{c[0, j] / ex_c[0, j] - 1:+9.2e}")

    ex_c, ex_v, ex_b = _exact_routing(u_hat.astype(np.float64), args.iterations)
    err_v = np.max(np.abs(v - ex_v)) / np.max(np.abs(ex_v))
    err_c = np.max(np.abs(c - ex_c))
    agree = np.mean(np.argmax(np.linalg.norm(v, axis=1)) == np.argmax(np.linalg.norm(ex_v,
                                                                                     axis=1)))
    print(f"\nend to end vs float64 routing after {args.iterations} iterations: "
          f"max |c - c_exact| {err_c:.2e}, max |v - v_exact| / max|v_exact| {err_v:.2e}, "
          f"longest H capsule {'agrees' if agree else 'DIFFERS'}")
    wall = time.monotonic() - t_start
    status = "all bit-exact" if pe.mismatches == 0 else f"{pe.mismatches} runs DIFFER"
    print(f"RTL vs golden model: {pe.results} results, {status}")
    print(f"simulated {pe.cycles} cycles in {pe.sim_s:.3f}s of Verilator time "
          f"({pe.cycles / max(pe.sim_s, 1e-9):,.0f} cycles/s); demo wall {wall:.1f}s")
    return 0 if pe.mismatches == 0 else 1
