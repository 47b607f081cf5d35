"""Host/PE memory contention of the pipelined PIM-CapsNet, replayed on the HMC RTL.

While the vault PEs route batch ``n``, the host runs the Conv/PrimaryCaps/FC
layers of the neighbouring batches, and its memory traffic enters the cube
through the host links (Sec. 4, 5.3.2).  This module builds both request
streams, replays them together on the Verilated ``hmc_mem`` (the membench
driver, :func:`pimforge.sim.membench.replay`) under each host/PE priority
policy (``rmas``, ``pim-first``, ``host-first``, ``arrival``), and measures
how much later each stream finishes than when it runs alone.

Streams (16 B block requests, controller cycles of ``hmc.tck_ns``):

host
    The host layers' bytes (reads and writes in their ratio) at their average
    rate: total bytes over the layers' roofline time, spread evenly over the
    cube's vaults.  Two sequential streams (one read, one written), requests
    dealt to the host links in turn.  Placement: the replay cube uses the
    PIM-CapsNet mapping (vault ID on top, Fig. 13b); the page table gives
    host data the default sub-page size (indicator ``log2(max_block / 16)``)
    and places the host's ``page_bytes`` pages round-robin over the vaults in
    the upper half of each vault, so a short stretch of host traffic targets
    one or two vaults (the situation RMAS exploits, Sec. 5.3.2).
pe
    Per vault, the routing's bytes read and written (from the vault RTL run)
    at its average rate over the routing time, in ``pe_burst``-byte requests
    (sub-page indicator = the burst size), vault-local, in the lower half of
    the vault.  At most ``pes_per_vault`` requests of a vault are in flight
    (one per PE).

Rate control: every request carries the gap its master waits after its
previous request was accepted (membench's optional GAP column), so that an
unstalled stream issues at its average rate and every stall delays all later
requests of that master, as a stalled PE or GPU memory pipeline would.  The
host may have 256 requests in flight per link (a GPU hides latency and stalls
only on back-pressure).

Window and scaling: each replay covers a window of about ``window_requests``
requests (the same simulated duration for both streams), on a cube of
``min(vaults, replay_vaults)`` vaults that carry the per-vault rates of the
full cube (the PE rates of the busiest vaults, which set the routing time).
The slowdown of a stream is ``finish(both) / finish(alone)`` over the window;
it is applied to the whole overlapped duration, which assumes the rates are
stationary (the routing's phases are averaged) and that the contention of
the replayed vaults is that of the others.
"""

from __future__ import annotations

import dataclasses
import math

from pimforge.gen.errors import PimforgeError
from pimforge.rtl.mem.address_map import AddressMap
from pimforge.rtl.mem.timing import resolve_timing

from ..membench import array_address, build_driver, replay

__all__ = ["POLICY_NAMES", "contention", "host_requests", "pe_requests", "replay_config"]

POLICY_NAMES = ("rmas", "pim-first", "host-first", "arrival")


def replay_config(cfg, replay_vaults: int = 4):
    """*cfg* on ``min(vaults, replay_vaults)`` vaults with the PIM-CapsNet mapping."""
    if replay_vaults < 1 or replay_vaults & (replay_vaults - 1):
        raise PimforgeError(f"replay_vaults must be a power of two >= 1, not {replay_vaults}")
    h = cfg.hmc
    return cfg.replace(hmc=dataclasses.replace(h, vaults=min(h.vaults, replay_vaults),
                                               mapping="capsnet"))


def _gaps(n: int, period: float, phase: float) -> list[int]:
    """Gaps after acceptance that issue request ``i`` at ``phase + i * period`` when unstalled."""
    out, prev = [], -1
    for i in range(n):
        t = int(math.floor(phase + i * period))
        out.append(max(0, t - prev - 1))
        prev = max(t, prev + 1)
    return out


def _req(amap, h, master: int, we: int, addr: int, gap: int) -> tuple:
    d = amap.decode(addr)
    return (master, we, addr, d.vault, array_address(h, d), gap)


def host_requests(rcfg, blocks_per_cycle: float, write_fraction: float, duration: int, *,
                  page_bytes: int = 4096) -> list[tuple]:
    """The host stream of *duration* cycles at *blocks_per_cycle* (whole replay cube)."""

    h = rcfg.hmc
    amap = AddressMap.from_config(h)
    n = int(round(blocks_per_cycle * duration))
    if n == 0:
        return []
    half = h.capacity_per_vault // 2
    if page_bytes < h.max_block_bytes or page_bytes > half or page_bytes & (page_bytes - 1):
        raise PimforgeError(f"page_bytes must be a power of two between {h.max_block_bytes} "
                            f"and {half}, not {page_bytes}")
    pages_per_vault = half // page_bytes
    s = amap.default_subpage_log
    L, V = h.links, h.vaults

    def addr(stream: int, blk: int) -> int:
        lin = blk * 16
        page = lin // page_bytes + stream * (pages_per_vault * V // 2)   # read / write regions
        v, pv = page % V, (page // V) % pages_per_vault
        return (v * h.capacity_per_vault + half + pv * page_bytes + lin % page_bytes) | (s << 1)

    per_link: list[list[tuple[int, int]]] = [[] for _ in range(L)]
    nrd = nwr = 0
    for i in range(n):
        # Bresenham mix: write when the writes so far fall behind the fraction.
        we = int(nwr < write_fraction * (i + 1) - 1e-9)
        if we:
            a, nwr = addr(1, nwr), nwr + 1
        else:
            a, nrd = addr(0, nrd), nrd + 1
        per_link[i % L].append((we, a))
    out = []
    period = L / blocks_per_cycle
    for k, seq in enumerate(per_link):
        gaps = _gaps(len(seq), period, phase=k * period / L)
        out += [_req(amap, h, k, we, a, g) for (we, a), g in zip(seq, gaps)]
    return out


def pe_requests(rcfg, blocks_per_cycle: list[float], write_fraction: list[float],
                duration: int, *, burst: int = 64) -> list[tuple]:
    """Vault ``v``'s PE stream at ``blocks_per_cycle[v]`` for *duration* cycles."""

    h = rcfg.hmc
    if burst not in (16, 32, 64, 128, 256):
        raise PimforgeError(f"pe_burst must be a power of two between 16 and 256, not {burst}")
    amap = AddressMap.from_config(h)
    s = (burst // 16).bit_length() - 1
    nb = burst // 16
    quarter = h.capacity_per_vault // 4
    out = []
    for v, (rate, wf) in enumerate(zip(blocks_per_cycle, write_fraction)):
        bursts = int(round(rate * duration / nb))
        if not bursts:
            continue
        period = nb / rate
        starts = _gaps(bursts, period, phase=v * period / max(1, len(blocks_per_cycle)))
        nrd = nwr = 0
        for i in range(bursts):
            we = int(nwr < wf * (i + 1) - 1e-9)
            j = nwr if we else nrd
            base = v * h.capacity_per_vault + we * quarter + (j * burst) % quarter
            # the burst's own nb - 1 back-to-back acceptances are part of the period
            lead = max(0, starts[i] - (nb - 1)) if i else starts[i]
            for b in range(nb):
                out.append(_req(amap, h, h.links + v, we, (base + 16 * b) | (s << 1),
                                lead if b == 0 else 0))
            nwr, nrd = nwr + we, nrd + (1 - we)
    return out


def _class(stats: dict, masters) -> dict:
    n = sum(stats[f"m{m}_n"] for m in masters)
    if not n:
        return {"requests": 0, "finish": 0, "mean_latency": 0.0}
    return {"requests": n, "finish": max(stats[f"m{m}_last"] for m in masters) + 1,
            "mean_latency": sum(stats[f"m{m}_lat"] for m in masters) / n}


def contention(cfg, *, host_bytes_per_s_per_vault: float, host_write_fraction: float,
               pe_read_bytes_per_s: list[float], pe_write_bytes_per_s: list[float],
               window_requests: int = 3000, policies=POLICY_NAMES, replay_vaults: int = 4,
               page_bytes: int = 4096, pe_burst: int = 64, gamma_v: int = 1,
               gamma_h: int = 1, exe=None) -> dict:
    """Replay host and PE streams alone and together; slowdowns per policy.

    Parameters
    ----------
    cfg : Config
        The cube (its ``hmc`` section; the replay uses :func:`replay_config`).
    host_bytes_per_s_per_vault : float
        Host traffic per vault of the full cube.
    host_write_fraction : float
        Share of the host's bytes that are writes.
    pe_read_bytes_per_s, pe_write_bytes_per_s : list of float
        Per-vault PE traffic of the full cube (the busiest vaults are replayed).
    window_requests : int
        Requests of one replay window (both streams together).

    Returns
    -------
    dict
        ``window_cycles``, request counts, ``alone`` (finish cycle and mean
        latency per class) and per policy ``host_slowdown``, ``pe_slowdown``,
        latencies and the extra cycles of each class.
    """

    unknown = [p for p in policies if p not in POLICY_NAMES]
    if unknown:
        raise PimforgeError(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICY_NAMES)}")
    if not 100 <= window_requests <= 200_000:
        raise PimforgeError(f"window_requests must be between 100 and 200000, "
                            f"not {window_requests}")
    if not 0.0 <= host_write_fraction <= 1.0:
        raise PimforgeError(f"host_write_fraction must be in [0, 1], not {host_write_fraction}")
    if len(pe_read_bytes_per_s) != len(pe_write_bytes_per_s) or not pe_read_bytes_per_s:
        raise PimforgeError("pe_read_bytes_per_s and pe_write_bytes_per_s need one entry per "
                            "vault")
    rcfg = replay_config(cfg, replay_vaults)
    h = rcfg.hmc
    tck = h.tck_ns * 1e-9
    busiest = sorted(zip(pe_read_bytes_per_s, pe_write_bytes_per_s), key=lambda x: -sum(x))
    busiest = (busiest * h.vaults)[:h.vaults]   # fewer routing vaults than replayed: reuse
    pe_rate = [(r + w) * tck / 16 for r, w in busiest]
    pe_wf = [w / (r + w) if r + w else 0.0 for r, w in busiest]
    host_rate = host_bytes_per_s_per_vault * h.vaults * tck / 16
    total = host_rate + sum(pe_rate)
    if total <= 0:
        raise PimforgeError("no traffic to replay (host and PE rates are 0)")
    peak = h.vaults / resolve_timing(h.timing, h.tck_ns).col_gap   # blocks per cycle at most
    duration = max(64, int(window_requests / total))
    hreq = host_requests(rcfg, host_rate, host_write_fraction, duration, page_bytes=page_bytes)
    preq = pe_requests(rcfg, pe_rate, pe_wf, duration, burst=pe_burst)
    exe = exe or build_driver(rcfg)
    hm, pm = range(h.links), range(h.links, h.links + h.vaults)
    kw = dict(gamma_v=gamma_v, gamma_h=gamma_h, max_inflight_pe=rcfg.capsnet.pes_per_vault,
              exe=exe)
    alone_h = _class(replay(rcfg, hreq, **kw), hm) if hreq else None
    alone_p = _class(replay(rcfg, preq, **kw), pm) if preq else None
    out = {"replay_vaults": h.vaults, "links": h.links, "window_cycles": duration,
           "host_requests": len(hreq), "pe_requests": len(preq),
           "host_blocks_per_cycle": host_rate, "pe_blocks_per_cycle": pe_rate,
           "demand_of_peak": total / peak,
           "alone": {"host": alone_h, "pe": alone_p}, "policies": {}}
    for pol in policies:
        st = replay(rcfg, hreq + preq, policy=pol, **kw)
        hb, pb = _class(st, hm), _class(st, pm)
        res = {"host": hb, "pe": pb, "commands": {k: st[k] for k in ("ACT", "RD", "WR", "REF")},
               "bank_conflict_stalls": st["conflict"]}
        for cls, alone, both in (("host", alone_h, hb), ("pe", alone_p, pb)):
            if alone:
                res[f"{cls}_slowdown"] = both["finish"] / alone["finish"]
                res[f"{cls}_extra_cycles"] = both["finish"] - alone["finish"]
            else:
                res[f"{cls}_slowdown"], res[f"{cls}_extra_cycles"] = 1.0, 0
        out["policies"][pol] = res
    return out
