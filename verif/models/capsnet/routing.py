"""Golden models of the dynamic routing procedure (PIM-CapsNet Algorithm 1, Eq. 1-5).

Shapes (the paper's Table 3 names):

* ``u``  -- low-level capsules, ``(B, N_L, C_L)``
* ``W``  -- transformation matrices, ``(N_L, N_H, C_H, C_L)``
* ``u_hat`` -- prediction vectors ``W_ij u_i^k``, ``(B, N_L, N_H, C_H)`` (Eq. 1)
* ``b``, ``c`` -- routing logits and coefficients, ``(N_L, N_H)``.  As in
  Algorithm 1 they are *shared by the whole batch*: Eq. 4 adds the agreement
  summed over all input sets ``k`` (not one ``b`` per sample as in Sabour et
  al.), so the routing result of one sample depends on the rest of its batch.
* ``s``, ``v`` -- high-level capsules before/after squashing, ``(B, N_H, C_H)``.

Three models share these semantics:

:func:`route_f64`
    The reference: float64 numpy, textbook squash.
:func:`route_pim`
    Every operation in float32 in a fixed order (below), with the three
    special functions and the reduction order taken from a :class:`RoutingOps`
    object so that a bit-exact PE model can be plugged in.
:func:`route_f32`
    :func:`route_pim` with :class:`ExactFloat32Ops` (IEEE float32 ``exp``,
    correctly rounded ``1/sqrt`` and ``1/x``, sequential accumulation).

Fixed float32 operation order of :func:`route_pim` (what a PE executes; no
fused multiply-add -- the PE has a separate multiplier and adder, so every
product and every sum is rounded to float32):

1. Eq. 1: ``u_hat[k,i,j,c] = sum_l W[i,j,c,l] * u[k,i,l]``, products first,
   then ``ops.sum`` over ``l`` (ascending ``l``).
2. Per iteration:

   a. Eq. 5: ``m_i = max_j b_ij``; ``e_ij = ops.exp(b_ij - m_i)``;
      ``z_i = ops.sum_j e_ij``; ``c_ij = e_ij * ops.recip(z_i)``.  Subtracting
      the row maximum does not change the softmax mathematically; it keeps
      every ``exp`` argument <= 0, because the batch-summed logits easily
      exceed float32's ``exp`` range (about 88), and makes ``z_i >= 1``.
   b. Eq. 2: ``t = u_hat[k,i,j,:] * c_ij``; ``s = ops.sum`` over ``i``.
   c. Eq. 3 in the hardware form
      ``v = s * (n * ops.recip(1 + n)) * ops.rsqrt(n)`` with
      ``n = ops.sum_c s_c * s_c``; the scalar factor is formed first, then
      multiplied into each component.  ``n == 0`` gives ``v = 0`` (the limit
      of the squash; ``rsqrt(0)`` would otherwise make ``0 * inf = NaN``).
   d. Eq. 4: ``a[k,i,j] = ops.sum_c u_hat[k,i,j,c] * v[k,j,c]``;
      ``b = b + ops.sum_k a[k]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["RoutingResult", "RoutingOps", "ExactFloat32Ops", "route_f64", "route_f32",
           "route_pim", "route_naive", "squash_f64", "check_shapes"]

F32 = np.float32


@dataclass(frozen=True)
class RoutingResult:
    """Everything one routing run produces (arrays in the model's precision).

    ``b`` is the value after the last iteration's Eq. 4 update and ``c`` the
    coefficients used in the last iteration, as Algorithm 1 leaves them.
    """

    v: np.ndarray
    s: np.ndarray
    c: np.ndarray
    b: np.ndarray
    u_hat: np.ndarray


@runtime_checkable
class RoutingOps(Protocol):
    """The arithmetic a routing engine supplies to :func:`route_pim`.

    All methods take and return float32 arrays (elementwise for ``exp``,
    ``rsqrt`` and ``recip``).  ``sum`` fixes the reduction (MAC) order.
    """

    name: str

    def exp(self, x: np.ndarray) -> np.ndarray: ...

    def rsqrt(self, x: np.ndarray) -> np.ndarray: ...

    def recip(self, x: np.ndarray) -> np.ndarray: ...

    def sum(self, x: np.ndarray, axis: int) -> np.ndarray: ...


def sequential_sum(x: np.ndarray, axis: int) -> np.ndarray:
    """Float32 sum along *axis* in ascending index order, one rounding per add.

    This is the order of a single MAC/accumulator chain: ``((x0 + x1) + x2) + ...``.
    """
    x = np.moveaxis(np.asarray(x, dtype=F32), axis, 0)
    if x.shape[0] == 0:
        return np.zeros(x.shape[1:], dtype=F32)
    acc = x[0].copy()
    for t in range(1, x.shape[0]):
        acc = (acc + x[t]).astype(F32, copy=False)
    return acc


class ExactFloat32Ops:
    """IEEE float32 special functions and sequential accumulation.

    ``rsqrt`` is ``1/sqrt(x)`` with two float32 roundings (sqrt, then divide);
    ``recip`` a correctly rounded float32 divide; ``exp`` numpy's float32 exp.
    """

    name = "float32"

    def exp(self, x: np.ndarray) -> np.ndarray:
        return np.exp(np.asarray(x, dtype=F32)).astype(F32)

    def rsqrt(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return (F32(1) / np.sqrt(np.asarray(x, dtype=F32))).astype(F32)

    def recip(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return (F32(1) / np.asarray(x, dtype=F32)).astype(F32)

    def sum(self, x: np.ndarray, axis: int) -> np.ndarray:
        return sequential_sum(x, axis)


def check_shapes(u: np.ndarray, W: np.ndarray, iterations: int) -> tuple[int, int, int, int, int]:
    """Validate routing inputs; return ``(B, N_L, N_H, C_H, C_L)``."""
    u = np.asarray(u)
    W = np.asarray(W)
    if u.ndim != 3:
        raise ValueError(f"u must have shape (B, N_L, C_L), not {u.shape}")
    if W.ndim != 4:
        raise ValueError(f"W must have shape (N_L, N_H, C_H, C_L), not {W.shape}")
    B, n_l, c_l = u.shape
    if W.shape[0] != n_l or W.shape[3] != c_l:
        raise ValueError(f"W shape {W.shape} does not match u shape {u.shape}: "
                         f"need W.shape[0] == N_L == {n_l} and W.shape[3] == C_L == {c_l}")
    if not (isinstance(iterations, int) and iterations >= 1):
        raise ValueError(f"iterations must be an integer >= 1, not {iterations!r}")
    return B, n_l, W.shape[1], W.shape[2], c_l


def squash_f64(s: np.ndarray, axis: int = -1) -> np.ndarray:
    """Eq. 3 in float64: ``|s|^2/(1+|s|^2) * s/|s|``; zero vectors map to zero."""
    s = np.asarray(s, dtype=np.float64)
    n = np.sum(s * s, axis=axis, keepdims=True)
    norm = np.sqrt(n)
    scale = np.divide(n / (1.0 + n), norm, out=np.zeros_like(n), where=norm > 0)
    return s * scale


def _softmax_f64(b: np.ndarray) -> np.ndarray:
    e = np.exp(b - b.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def route_f64(u: np.ndarray, W: np.ndarray, iterations: int) -> RoutingResult:
    """Reference dynamic routing in float64 (vectorized numpy)."""
    check_shapes(u, W, iterations)
    u = np.asarray(u, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    u_hat = np.einsum("ijcl,kil->kijc", W, u)                     # Eq. 1
    b = np.zeros(W.shape[:2])
    for _ in range(iterations):
        c = _softmax_f64(b)                                         # Eq. 5
        s = np.einsum("kijc,ij->kjc", u_hat, c)                     # Eq. 2
        v = squash_f64(s)                                           # Eq. 3
        b = b + np.einsum("kijc,kjc->ij", u_hat, v)                 # Eq. 4 (sum over k)
    return RoutingResult(v=v, s=s, c=c, b=b, u_hat=u_hat)


def route_pim(u: np.ndarray, W: np.ndarray, iterations: int,
              ops: RoutingOps | None = None) -> RoutingResult:
    """Dynamic routing with every operation in float32 in the fixed order of the module doc.

    Parameters
    ----------
    u, W, iterations
        As :func:`route_f64`; converted to float32 first.
    ops : RoutingOps, optional
        Special functions and reduction order; :class:`ExactFloat32Ops` if omitted.
    """
    check_shapes(u, W, iterations)
    ops = ExactFloat32Ops() if ops is None else ops
    u = np.asarray(u, dtype=F32)
    W = np.asarray(W, dtype=F32)
    one = F32(1)
    # Eq. 1: products (B, N_L, N_H, C_H, C_L), then the C_L accumulation chain.
    u_hat = ops.sum(W[None, :, :, :, :] * u[:, :, None, None, :], axis=4)
    b = np.zeros(W.shape[:2], dtype=F32)
    for _ in range(iterations):
        # Eq. 5
        e = ops.exp((b - b.max(axis=1, keepdims=True)).astype(F32))
        z = ops.sum(e, axis=1)
        c = (e * ops.recip(z)[:, None]).astype(F32)
        # Eq. 2: (B, N_L, N_H, C_H) products, accumulated over N_L
        s = ops.sum(u_hat * c[None, :, :, None], axis=1)
        # Eq. 3, hardware form
        n = ops.sum(s * s, axis=2)
        with np.errstate(invalid="ignore"):   # 0 * rsqrt(0) = NaN is replaced below
            scale = ((n * ops.recip(n + one)).astype(F32) * ops.rsqrt(n)).astype(F32)
        scale = np.where(n > 0, scale, F32(0)).astype(F32)
        v = (s * scale[:, :, None]).astype(F32)
        # Eq. 4: agreement per sample, then summed over the batch into b
        a = ops.sum(u_hat * v[:, None, :, :], axis=3)
        b = (b + ops.sum(a, axis=0)).astype(F32)
    return RoutingResult(v=v, s=s, c=c, b=b, u_hat=u_hat)


def route_f32(u: np.ndarray, W: np.ndarray, iterations: int) -> RoutingResult:
    """Float32 routing: :func:`route_pim` with :class:`ExactFloat32Ops`."""
    return route_pim(u, W, iterations, ExactFloat32Ops())


def route_naive(u: np.ndarray, W: np.ndarray, iterations: int) -> RoutingResult:
    """Algorithm 1 written as plain Python loops over scalars (float64; tiny sizes only).

    An independent transcription used to check the vectorized models; it uses
    ``math`` functions and the unshifted softmax of Eq. 5.
    """

    B, n_l, n_h, c_h, c_l = check_shapes(u, W, iterations)
    u = np.asarray(u, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    u_hat = np.zeros((B, n_l, n_h, c_h))
    for k in range(B):
        for i in range(n_l):
            for j in range(n_h):
                for r in range(c_h):
                    u_hat[k, i, j, r] = sum(W[i, j, r, q] * u[k, i, q] for q in range(c_l))
    b = [[0.0] * n_h for _ in range(n_l)]
    c = np.zeros((n_l, n_h))
    s = np.zeros((B, n_h, c_h))
    v = np.zeros((B, n_h, c_h))
    for _ in range(iterations):
        for i in range(n_l):
            den = sum(math.exp(b[i][q]) for q in range(n_h))
            for j in range(n_h):
                c[i, j] = math.exp(b[i][j]) / den
        for k in range(B):
            for j in range(n_h):
                for r in range(c_h):
                    s[k, j, r] = sum(u_hat[k, i, j, r] * c[i, j] for i in range(n_l))
                sq = sum(s[k, j, r] ** 2 for r in range(c_h))
                f = 0.0 if sq == 0 else sq / (1 + sq) / math.sqrt(sq)
                for r in range(c_h):
                    v[k, j, r] = f * s[k, j, r]
        for i in range(n_l):
            for j in range(n_h):
                b[i][j] += sum(sum(v[k, j, r] * u_hat[k, i, j, r] for r in range(c_h))
                               for k in range(B))
    return RoutingResult(v=v, s=s, c=c.copy(), b=np.array(b), u_hat=u_hat)
