"""PIM-CapsNet runtime memory access scheduler (RMAS, Sec. 5.3.2, Eq. 15)."""

from __future__ import annotations

import enum

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["RMAS", "Policy", "from_config"]


class Policy(enum.IntEnum):
    """Host/PE priority policy: RMAS, and the naive ones of the ablation (Sec. 6.1)."""
    RMAS = 0        # Eq. 15
    PIM_FIRST = 1   # RMAS-PIM: PEs always first
    HOST_FIRST = 2  # RMAS-GPU: host always first
    ARRIVAL = 3     # whichever request arrived first


class RMAS(wiring.Component):
    """Chooses which vaults give the host priority over their PEs.

    With ``policy = RMAS``: ``n_max`` = number of vaults the host targets,
    ``Qbar`` = mean PE-queue occupancy over them, and
    ``n_h = floor(sqrt(n_max*gamma_h / (Qbar*gamma_v)))`` clamped to
    ``[0, n_max]`` (``n_max`` when ``Qbar*gamma_v`` is 0), computed exactly as
    the largest ``n <= n_max`` with ``n^2 * sum(Q) * gamma_v <= n_max^2 * gamma_h``.
    The ``n_h`` targeted vaults with the smallest Q (ties: lower vault index)
    get host priority. Outputs are registered (one cycle).

    Parameters
    ----------
    vaults : int
        Vaults in the cube.
    q_bits : int
        Width of one vault's PE-queue occupancy.
    gamma_bits : int
        Width of the impact factors.

    Attributes
    ----------
    q : In(ArrayLayout(q_bits, vaults))
        PE requests queued per vault.
    target : In(vaults)
        Vaults the host's pending requests target.
    gamma_v, gamma_h : In(gamma_bits)
        Impact factors of the PE and host operations.
    policy : In(2)
        :class:`Policy`.
    host_first : Out(vaults)
        Vaults that serve the host first.
    arrival : Out(1)
        Arbitrate by arrival order instead.
    n_h : Out
        Number of vaults granted (``policy = RMAS``).
    """

    def __init__(self, *, vaults: int, q_bits: int, gamma_bits: int = 8):
        if not isinstance(vaults, int) or not 1 <= vaults <= 64:
            raise ValueError(f"vaults must be an integer between 1 and 64, not {vaults!r}")
        if not isinstance(q_bits, int) or not 1 <= q_bits <= 8:
            raise ValueError(f"q_bits must be an integer between 1 and 8, not {q_bits!r}")
        if not isinstance(gamma_bits, int) or not 1 <= gamma_bits <= 16:
            raise ValueError(f"gamma_bits must be an integer between 1 and 16, "
                             f"not {gamma_bits!r}")
        self.vaults, self.q_bits, self.gamma_bits = vaults, q_bits, gamma_bits
        super().__init__({
            "q": In(data.ArrayLayout(q_bits, vaults)), "target": In(vaults),
            "gamma_v": In(gamma_bits), "gamma_h": In(gamma_bits), "policy": In(2),
            "host_first": Out(vaults), "arrival": Out(1), "n_h": Out(range(vaults + 1)),
        })
        self.latencies = {"grant": 1}

    def elaborate(self, platform):
        m = Module()
        V = self.vaults
        q = [self.q[v] for v in range(V)]
        tgt = [self.target[v] for v in range(V)]
        wn = len(self.n_h)
        n_max = Signal(wn)
        m.d.comb += n_max.eq(sum(tgt))
        sum_q = sum(Mux(tgt[v], q[v], 0) for v in range(V))      # over the targeted vaults
        lhs_unit = sum_q * self.gamma_v
        rhs = n_max * n_max * self.gamma_h
        # n_h counts the n in 1..V meeting both conditions (they hold for a prefix of n).
        conds = []
        for n in range(1, V + 1):
            c = Signal(name=f"ok{n}")
            m.d.comb += c.eq((n_max >= n) & (lhs_unit * (n * n) <= rhs))
            conds.append(c)
        n_h = Signal(wn)
        m.d.comb += n_h.eq(sum(conds))
        # Rank of each targeted vault by Q (ties by index); the n_h smallest are granted.
        grant = Signal(V)
        for v in range(V):
            rank = Signal(wn, name=f"rank{v}")
            before = [tgt[u] & ((q[u] < q[v]) if u > v else (q[u] <= q[v]))
                      for u in range(V) if u != v]
            m.d.comb += rank.eq(sum(before))
            m.d.comb += grant[v].eq(tgt[v] & (rank < n_h))
        with m.Switch(self.policy):
            with m.Case(Policy.RMAS):
                m.d.sync += [self.host_first.eq(grant), self.arrival.eq(0)]
            with m.Case(Policy.PIM_FIRST):
                m.d.sync += [self.host_first.eq(0), self.arrival.eq(0)]
            with m.Case(Policy.HOST_FIRST):
                m.d.sync += [self.host_first.eq(-1), self.arrival.eq(0)]
            with m.Case(Policy.ARRIVAL):
                m.d.sync += [self.host_first.eq(0), self.arrival.eq(1)]
        m.d.sync += self.n_h.eq(n_h)
        return m


def from_config(cfg) -> RMAS:
    """RMAS over the cube's vaults, Q as wide as a vault queue's occupancy."""
    return RMAS(vaults=cfg.hmc.vaults, q_bits=ceil_log2(cfg.hmc.queue_depth + 1))
