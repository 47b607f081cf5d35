"""Inter-vault workload distribution of PIM-CapsNet Sec. 5.1 (Eq. 6-12).

The routing workload is split across the vaults along ONE dimension -- the
batch (B), the low-level capsules (L) or the high-level capsules (H).  For each
choice the paper models

* ``E`` -- operations (every FP multiply and every FP add counts one) of the
  most loaded vault: Eq. 6 (B; Eq. 7 is its ``N_L >> 1`` simplification),
  Eq. 9 (L), Eq. 11 (H);
* ``M`` -- bytes moved between vaults: Eq. 8 (B), Eq. 10 (L), Eq. 12 (H);

and picks the dimension with the highest execution score
``S = 1 / (alpha * E + beta * M)``.  The paper only says that ``alpha`` is set by
the HMC frequency and ``beta`` by the inter-vault bandwidth; here both are made
concrete so that ``alpha * E + beta * M`` is an estimated time in seconds and
``S`` is in 1/s:

* ``alpha = 1 / (pes_per_vault * pe_ops_per_cycle * freq_hz)`` -- seconds per
  operation of one vault (``cfg.capsnet.pes_per_vault`` PEs at
  ``cfg.freq_mhz``, each finishing ``cfg.capsnet.pe_ops_per_cycle`` ops a cycle);
* ``beta = 1 / (intervault_bw_gbs * 1e9)`` -- seconds per byte
  (``cfg.capsnet.intervault_bw_gbs``).

Sizes in ``M``: ``SIZE_b = SIZE_c = 4`` bytes (one FP32 scalar),
``SIZE_s = SIZE_v = 4 * C_H`` bytes (one capsule vector), ``SIZE_pkt =
cfg.capsnet.packet_overhead_bytes``.

Both ``E`` and ``M`` depend only on the network and the config, so the
choice is made offline (:func:`choose_distribution`).  With the B-dimension the
per-sample agreements of Eq. 4 are pre-aggregated inside each vault before
the inter-vault reduction (:func:`pre_aggregate`); that is why Eq. 8 moves
``(N_vault - 1) * N_L * N_H`` partial ``b_ij`` per iteration and not one per sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pimforge.gen.config import Config, load_config
from pimforge.gen.errors import PimforgeError

from .networks import NETWORKS, CapsNetSpec, network

__all__ = ["DIMENSIONS", "workload_e", "movement_m", "coefficients", "DimensionScore",
           "Distribution", "choose_distribution", "pre_aggregate", "b_messages",
           "distribution_table", "print_distribution_table", "FIG18_FREQS_MHZ",
           "frequency_study"]

DIMENSIONS = ("B", "L", "H")
#: The PE frequencies of the paper's Fig. 18 study.
FIG18_FREQS_MHZ = (312.5, 625.0, 937.5)
WORD_BYTES = 4


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _check_dim(dim: str) -> str:
    d = str(dim).upper()
    if d not in DIMENSIONS:
        raise ValueError(f"dimension must be one of B, L, H, not {dim!r}")
    return d


def workload_e(net: CapsNetSpec, dim: str, vaults: int, *, simplified: bool = False) -> float:
    """``E`` of Eq. 6 (B), Eq. 9 (L) or Eq. 11 (H): operations of the busiest vault.

    Eq. 6 is evaluated as printed, including its last two terms
    ``ceil(log2 N_vault) / N_vault + 4 C_H`` (the vault's share of the
    unparallelizable operations; they are negligible next to the ``N_L N_H``
    terms, which is why Eq. 7 drops them).  ``simplified=True`` gives Eq. 7.
    """
    d = _check_dim(dim)
    nb, nl, nh, it, cl, ch = net.batch, net.n_l, net.n_h, net.iterations, net.c_l, net.c_h
    nv = vaults
    if d == "B":
        kb = _ceil_div(nb, nv)
        if simplified:                                                   # Eq. 7
            return float(kb * nl * nh * ((4 * it - 1) * ch + 2 * cl * ch - it))
        per_iter = (kb * nh * ch * (2 * nl - 1) + kb * nh * (3 * ch + 19)
                    + kb * nl * nh * (2 * ch - 1)
                    + math.ceil(math.log2(nv)) / nv + 4 * ch)
        return float(kb * nl * nh * ch * (2 * cl - 1) + it * per_iter)  # Eq. 6
    if d == "L":                                                         # Eq. 9
        return float(nb * _ceil_div(nl, nv) * nh * (2 * it * (2 * ch - 1) + ch * (2 * cl - 1)))
    return float(nb * nl * _ceil_div(nh, nv) * ch * (2 * cl - 1 + 2 * it))  # Eq. 11


def movement_m(net: CapsNetSpec, dim: str, vaults: int, *, packet_bytes: int = 16) -> int:
    """``M`` of Eq. 8 (B), Eq. 10 (L) or Eq. 12 (H): inter-vault bytes, all iterations."""
    d = _check_dim(dim)
    nb, nl, nh, it = net.batch, net.n_l, net.n_h, net.iterations
    nv, pkt = vaults, packet_bytes
    size_b = size_c = WORD_BYTES
    size_s = size_v = WORD_BYTES * net.c_h
    if d == "B":
        return it * ((nv - 1) * nl * nh * (size_b + pkt) + (nv - 1) * nl * nh * (size_c + pkt))
    if d == "L":
        return it * (nb * (nv - 1) * nh * (size_s + pkt) + nb * (nv - 1) * nh * (size_v + pkt))
    return it * ((nv - 1) * nl * (size_b + pkt) + nl * (size_c + pkt))


def coefficients(cfg: Config, freq_mhz: float | None = None) -> tuple[float, float]:
    """``(alpha, beta)``: seconds per vault operation and seconds per inter-vault byte."""
    f = (cfg.freq_mhz if freq_mhz is None else freq_mhz) * 1e6
    alpha = 1.0 / (cfg.capsnet.pes_per_vault * cfg.capsnet.pe_ops_per_cycle * f)
    beta = 1.0 / (cfg.capsnet.intervault_bw_gbs * 1e9)
    return alpha, beta


@dataclass(frozen=True)
class DimensionScore:
    """One dimension's model terms: ``time_s = alpha*E + beta*M``, ``score = 1/time_s``."""

    dim: str
    E: float
    M: int
    compute_s: float
    movement_s: float

    @property
    def time_s(self) -> float:
        return self.compute_s + self.movement_s

    @property
    def score(self) -> float:
        return 1.0 / self.time_s


@dataclass(frozen=True)
class Distribution:
    """The offline choice for one network on one config and frequency."""

    network: str
    freq_mhz: float
    vaults: int
    scores: dict[str, DimensionScore]

    @property
    def best(self) -> str:
        """Dimension with the highest score (ties resolved in B, L, H order)."""
        return max(DIMENSIONS, key=lambda d: (self.scores[d].score, -DIMENSIONS.index(d)))


def choose_distribution(net: CapsNetSpec | str, cfg: Config, freq_mhz: float | None = None, *,
                        simplified: bool = False) -> Distribution:
    """Score the B, L and H distributions of *net* and return all three with the best."""
    if isinstance(net, str):
        net = network(net)
    freq = cfg.freq_mhz if freq_mhz is None else float(freq_mhz)
    alpha, beta = coefficients(cfg, freq)
    nv = cfg.hmc.vaults
    scores = {}
    for d in DIMENSIONS:
        e = workload_e(net, d, nv, simplified=simplified)
        m = movement_m(net, d, nv, packet_bytes=cfg.capsnet.packet_overhead_bytes)
        scores[d] = DimensionScore(dim=d, E=e, M=m, compute_s=alpha * e, movement_s=beta * m)
    return Distribution(network=net.name, freq_mhz=freq, vaults=nv, scores=scores)


def pre_aggregate(agreement: np.ndarray, vaults: int) -> np.ndarray:
    """In-vault pre-aggregation of Eq. 4 under the B-dimension distribution.

    *agreement* is the per-sample ``v_j^k . u_hat_{j|i}^k`` of shape
    ``(N_B, N_L, N_H)``.  Samples go to vaults in contiguous snippets of
    ``ceil(N_B / N_vault)`` (the split Eq. 6 assumes); each vault sums its own
    samples, so only one ``(N_L, N_H)`` partial per vault crosses the crossbar.
    Returns the partials, shape ``(N_vault, N_L, N_H)``; their sum over vaults
    is the Eq. 4 increment.
    """
    agreement = np.asarray(agreement)
    nb = agreement.shape[0]
    per = _ceil_div(nb, vaults)
    out = np.zeros((vaults,) + agreement.shape[1:], dtype=agreement.dtype)
    for v in range(vaults):
        chunk = agreement[v * per:(v + 1) * per]
        if len(chunk):
            out[v] = chunk.sum(axis=0)
    return out


def b_messages(net: CapsNetSpec, vaults: int, *, pre_aggregated: bool = True) -> int:
    """``b`` scalars sent to the aggregating vault (vault 0) per iteration.

    With pre-aggregation every other vault that holds samples sends one partial
    per ``(i, j)``: ``(N_vault - 1) N_L N_H`` when all vaults hold samples (Eq. 8
    charges this bound; snippets of ``ceil(N_B / N_vault)`` may leave vaults empty).
    Without it each sample held outside vault 0 sends its own:
    ``(N_B - ceil(N_B / N_vault)) N_L N_H``.
    """
    if pre_aggregated:
        busy = min(vaults, _ceil_div(net.batch, _ceil_div(net.batch, vaults)))
        return (busy - 1) * net.n_l * net.n_h
    return (net.batch - min(net.batch, _ceil_div(net.batch, vaults))) * net.n_l * net.n_h


def distribution_table(nets: list[CapsNetSpec | str] | None, cfg: Config,
                       freqs_mhz: tuple[float, ...] = FIG18_FREQS_MHZ) -> str:
    """A text table: for each network and frequency, ``S`` of B/L/H and the choice."""
    nets = [network(n) if isinstance(n, str) else n
            for n in (nets if nets is not None else [n.name for n in _all()])]
    head = (f"{'network':<10} {'MHz':>6}  {'S_B (1/s)':>10} {'S_L (1/s)':>10} "
            f"{'S_H (1/s)':>10}  best")
    title = (f"execution score S = 1/(alpha E + beta M); {cfg.hmc.vaults} vaults, "
             f"{cfg.capsnet.pes_per_vault} PEs/vault x {cfg.capsnet.pe_ops_per_cycle} op/cycle, "
             f"inter-vault {cfg.capsnet.intervault_bw_gbs:g} GB/s")
    lines = [title, head, "-" * len(head)]
    for n in nets:
        for f in freqs_mhz:
            d = choose_distribution(n, cfg, f)
            s = d.scores
            lines.append(f"{n.name:<10} {f:>6g}  {s['B'].score:>10.1f} {s['L'].score:>10.1f} "
                         f"{s['H'].score:>10.1f}  {d.best}")
    return "\n".join(lines)


def frequency_study(cfg: Config, freqs_mhz: tuple[float, ...] = FIG18_FREQS_MHZ,
                    nets: list[CapsNetSpec | str] | None = None) -> dict:
    """The Fig. 18 study as plain data: per network and frequency, E, M, S and the choice.

    Returns ``{"config", "vaults", "alpha_s_per_op", "beta_s_per_byte", "freqs_mhz",
    "networks": [{"network", "per_freq": [{"freq_mhz", "best", "scores": {dim: {"E",
    "M", "compute_s", "movement_s", "score"}}}], "choices": [best per freq],
    "changes": bool}], "choice_counts": {freq: {dim: n}}}`` (JSON-ready).
    """
    for f in freqs_mhz:
        if not (isinstance(f, (int, float)) and 1.0 <= f <= 5000.0):
            raise PimforgeError(f"frequency must be between 1 and 5000 MHz, not {f!r}")
    nets = [network(n) if isinstance(n, str) else n
            for n in (nets if nets is not None else list(_all()))]
    rows = []
    counts = {f"{f:g}": {d: 0 for d in DIMENSIONS} for f in freqs_mhz}
    for n in nets:
        per = []
        for f in freqs_mhz:
            d = choose_distribution(n, cfg, f)
            counts[f"{f:g}"][d.best] += 1
            per.append({"freq_mhz": float(f), "best": d.best, "scores": {
                k: {"E": float(v.E), "M": int(v.M), "compute_s": v.compute_s,
                    "movement_s": v.movement_s, "score": v.score}
                for k, v in d.scores.items()}})
        choices = [p["best"] for p in per]
        rows.append({"network": n.name, "per_freq": per, "choices": choices,
                     "changes": len(set(choices)) > 1})
    return {"config": cfg.name, "vaults": cfg.hmc.vaults,
            "alpha_s_per_op": {f"{f:g}": coefficients(cfg, f)[0] for f in freqs_mhz},
            "beta_s_per_byte": coefficients(cfg)[1], "freqs_mhz": [float(f) for f in freqs_mhz],
            "networks": rows, "choice_counts": counts}


def _all() -> tuple[CapsNetSpec, ...]:
    return NETWORKS


def print_distribution_table(nets: list[CapsNetSpec | str] | CapsNetSpec | str | None = None,
                             cfg: Config | None = None,
                             freqs_mhz: tuple[float, ...] = FIG18_FREQS_MHZ) -> str:
    """Print (and return) :func:`distribution_table`; one network, a list, or all of Table 1."""
    if isinstance(nets, (str, CapsNetSpec)):
        nets = [nets]
    text = distribution_table(nets, cfg if cfg is not None else load_config("hmc_gen3"),
                              freqs_mhz)
    print(text)
    return text
