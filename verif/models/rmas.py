"""Golden model of RMAS (PIM-CapsNet Eq. 15) and of the naive priority policies."""

from __future__ import annotations

from math import isqrt

__all__ = ["policy_grant", "rmas_grant", "rmas_nh"]


def rmas_nh(q: list[int], target: list[bool], gamma_v: int, gamma_h: int) -> int:
    """``n_h = floor(sqrt(n_max*gamma_h / (Qbar*gamma_v)))`` clamped to ``[0, n_max]``.

    ``Qbar = sum(Q)/n_max`` over the targeted vaults, so the radicand is
    ``n_max^2*gamma_h / (sum(Q)*gamma_v)``; evaluated exactly with integers
    (``floor(sqrt(a/b)) = isqrt(a // b)``), ``n_max`` when ``sum(Q)*gamma_v`` is 0.
    """
    n_max = sum(bool(t) for t in target)
    if n_max == 0:
        return 0
    den = sum(qq for qq, t in zip(q, target) if t) * gamma_v
    if den == 0:
        return n_max
    return min(n_max, isqrt((n_max * n_max * gamma_h) // den))


def rmas_grant(q, target, gamma_v, gamma_h) -> set[int]:
    """The targeted vaults given host priority: the n_h with the smallest Q (ties: index)."""
    n_h = rmas_nh(q, target, gamma_v, gamma_h)
    order = sorted((qq, v) for v, (qq, t) in enumerate(zip(q, target)) if t)
    return {v for _, v in order[:n_h]}


def policy_grant(policy: int, q, target, gamma_v, gamma_h) -> tuple[set[int], bool]:
    """(host-first vaults, arrival-order flag) for a :class:`~pimforge.rtl.mem.rmas.Policy`."""
    if policy == 0:
        return rmas_grant(q, target, gamma_v, gamma_h), False
    if policy == 1:
        return set(), False
    if policy == 2:
        return set(range(len(q))), False
    return set(), True
