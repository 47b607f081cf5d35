"""Host/PIM pipelining (Sec. 4) and the whole-network ablations of Sec. 6.3 (Fig. 17).

Pipeline MODEL.  A batch goes through three stages: ``pre`` (Conv +
PrimaryCaps on the host), the routing ``R`` (vault PEs) and ``post`` (the FC
decoder on the host).  With ``N`` batches the host runs ``post(k-1)`` and
``pre(k+1)`` while the cube routes batch ``k``::

    total = pre + sum_{k=1..N} stage(host_k, R) + post
    host_1 = pre (if N > 1),  host_k = pre + post (1 < k < N),  host_N = post (if N > 1)

so ``N = 1`` is the sequential ``pre + R + post``.  :func:`stage_time` runs
the two sides of one step together: while both are busy the host advances
``host_slowdown`` times and the routing ``pe_slowdown`` times slower than
alone (the contention measured by :mod:`pimforge.sim.capsnet.contention`);
once one side finishes the other runs alone at full speed.

Host times are the GPU roofline MODEL of the host layers; in the pipelined
scenarios the host's data lives in the cube, so its bandwidth is the smaller
of the GPU's and the cube's peak column bandwidth (``vaults x block_bytes``
per column-to-column gap).

Scenarios (:data:`SCENARIOS`):

``baseline``
    Everything on the GPU: the P100 roofline MODEL of the whole inference
    (:mod:`pimforge.sim.capsnet.gpu_roofline`), batches one after another.
``all-in-pim``
    The host layers too run on the vault PEs: a MODEL, per layer
    ``max(MACs / (vaults * PEs * f) + other FLOPs / (vaults * PEs * f),
    bytes / internal bandwidth)`` with the internal bandwidth
    ``vaults * capsnet.intervault_bw_gbs`` (512 GB/s for 32 vaults, Table 4),
    then the routing; no overlap (the same PEs do both).
``rmas-pim``, ``rmas-gpu``, ``pim-capsnet``, ``pim-arrival``
    Pipelined, with the contention slowdowns replayed on the HMC RTL under the
    ``pim-first``, ``host-first``, ``rmas`` and ``arrival`` policies.

Energy (a MODEL, :mod:`pimforge.sim.capsnet.energy`): the GPU at board TDP
while it computes and at idle power while it waits; the routing's energy per
batch from the routing run (``routing["energy_j"]["total"]``) or the analytic
estimate; for All-in-PIM the PE and DRAM energy of the host layers' MACs and
bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError, UnknownNameError
from pimforge.rtl.mem.timing import resolve_timing

from .contention import contention
from .energy import P100_POWER, gpu_energy, pim_energy, routing_energy_estimate
from .gpu_roofline import GPU, P100, roofline
from .host import host_layers, host_times
from .networks import CapsNetSpec, network

if TYPE_CHECKING:
    from .workload import CapsNetRun

__all__ = ["PAPER", "POLICY_OF", "SCENARIOS", "pipeline_time", "routing_from_run",
           "stage_time", "whole_network", "whole_network_table"]

#: Pipelined scenarios and the RMAS policy each replays.
POLICY_OF = {"rmas-pim": "pim-first", "rmas-gpu": "host-first", "pim-capsnet": "rmas",
             "pim-arrival": "arrival"}
SCENARIOS = ("baseline", "all-in-pim", *POLICY_OF)
#: Sec. 6.3 averages over the 12 networks: speed relative to the baseline.
PAPER = {"all-in-pim": 1 - 0.4759, "pim-capsnet": 2.44}


def stage_time(host_s: float, routing_s: float, host_slowdown: float = 1.0,
               pe_slowdown: float = 1.0) -> float:
    """Seconds of one pipeline step in which the host and the cube work concurrently."""
    for name, v in (("host_s", host_s), ("routing_s", routing_s)):
        if v < 0:
            raise PimforgeError(f"{name} must be >= 0, not {v}")
    for name, v in (("host_slowdown", host_slowdown), ("pe_slowdown", pe_slowdown)):
        if v < 1.0:
            raise PimforgeError(f"{name} must be >= 1, not {v}")
    if host_s == 0 or routing_s == 0:
        return host_s + routing_s
    th, tr = host_s * host_slowdown, routing_s * pe_slowdown
    if th <= tr:   # the host finishes first; the routing did th/pe_slowdown of its work
        return th + routing_s - th / pe_slowdown
    return tr + host_s - tr / host_slowdown


def pipeline_time(pre_s: float, post_s: float, routing_s: float, batches: int,
                  host_slowdown: float = 1.0, pe_slowdown: float = 1.0) -> dict:
    """Total seconds of *batches* pipelined batches (module doc), with its parts."""
    if not isinstance(batches, int) or batches < 1:
        raise PimforgeError(f"batches must be an integer >= 1, not {batches!r}")
    steps = []
    for k in range(1, batches + 1):
        host = (pre_s if k < batches else 0.0) + (post_s if k > 1 else 0.0)
        steps.append(stage_time(host, routing_s, host_slowdown, pe_slowdown))
    steady = stage_time(pre_s + post_s, routing_s, host_slowdown, pe_slowdown)
    return {"total_s": pre_s + sum(steps) + post_s, "fill_s": pre_s, "drain_s": post_s,
            "steps_s": sum(steps), "steady_stage_s": steady,
            "bound": "host" if (pre_s + post_s) * host_slowdown >= routing_s * pe_slowdown
            else "routing"}


def _routing_energy_j(net: CapsNetSpec, cfg, routing: dict) -> tuple[float, str]:
    e = routing.get("energy_j")
    if isinstance(e, dict) and "total" in e:
        return float(e["total"]), "routing run"
    return float(routing_energy_estimate(net, cfg)["pim"]["total"]), "analytic estimate"


def _pe_rates(routing: dict) -> tuple[list[float], list[float]]:
    """Per-vault PE bytes/s read and written (run capsnet's counters: a read event
    fetches an operand pair, 8 B; a write stores one word, 4 B; or explicit
    ``read_bytes`` / ``write_bytes`` lists)."""
    t = float(routing["time_s"])
    if t <= 0:
        raise PimforgeError(f"routing time_s must be > 0, not {t}")
    rb = routing.get("read_bytes") or [8 * r for r in routing["reads"]]
    wb = routing.get("write_bytes") or [4 * w for w in routing["writes"]]
    if len(rb) != len(wb):
        raise PimforgeError("routing reads and writes need one entry per vault each")
    return [r / t for r in rb], [w / t for w in wb]


def routing_from_run(res: CapsNetRun | Mapping) -> dict:
    """The ``routing`` input of :func:`whole_network` from a ``run capsnet`` result.

    *res* is a :class:`~pimforge.sim.capsnet.workload.CapsNetRun` or a dict of
    its JSON form (also a partial one, e.g. a file of an older run). Uses its
    per-vault ``reads``/``writes`` when present; otherwise (a result that
    carries only the ``events`` totals) the totals ``rd_bytes / 8`` and
    ``wr_bytes / 4`` are split evenly over the ``active_vaults`` (marked
    ``"per_vault": "even split of totals"``).
    """
    if not isinstance(res, Mapping):
        res = res.to_json()
    out = {k: res[k] for k in ("time_s", "cycles", "vaults") if k in res}
    for k in ("energy_j", "executed_on", "network", "config"):
        if k in res:
            out[k] = res[k]
    if "reads" in res and "writes" in res:
        out["reads"], out["writes"] = list(res["reads"]), list(res["writes"])
        out["per_vault"] = "run"
    else:
        ev = res["events"]
        n = int(res.get("active_vaults") or res["vaults"])
        out["reads"] = [ev["rd_bytes"] / 8 / n] * n
        out["writes"] = [ev["wr_bytes"] / 4 / n] * n
        out["per_vault"] = "even split of totals"
    return out


def whole_network(net_spec: CapsNetSpec | str, cfg, routing: dict, *,
                  policy_windows: int = 3000, exe=None, batches: int = 16,
                  scenarios=SCENARIOS, gpu=None, replay_vaults: int = 4,
                  gamma_v: int = 1, gamma_h: int = 1) -> dict:
    """The Sec. 6.3 scenarios of one network: time, energy and ``speedup_vs`` each.

    Parameters
    ----------
    net_spec : CapsNetSpec or str
        The network (its full Table 1 size sets the host layers).
    cfg : Config or str
        The cube (preset name or config).
    routing : dict
        One routing of one batch on the cube: ``time_s``, ``cycles``, per-vault
        ``reads`` and ``writes`` (``run capsnet`` counters), ``vaults``; optional
        ``energy_j`` (with ``total``).
    policy_windows : int
        Requests per contention replay window on the HMC RTL.
    exe : path, optional
        A prebuilt membench driver of :func:`contention.replay_config` (cfg).
    batches : int
        Batches pipelined.
    scenarios : iterable of str
        Subset of :data:`SCENARIOS`.

    Returns
    -------
    dict
        ``scenarios`` (name -> ``time_s``, ``per_batch_s``, ``energy_j``, parts and
        ``speedup_vs`` other scenarios), ``host`` (layers, roofline times),
        ``contention`` (the RTL replay), ``paper`` (the Sec. 6.3 figures) and notes.
    """

    scenarios = tuple(scenarios)
    bad = [s for s in scenarios if s not in SCENARIOS]
    if bad:
        raise UnknownNameError(f"unknown scenario {bad[0]!r}; known: {', '.join(SCENARIOS)}")
    for k in ("time_s", "cycles", "reads", "writes", "vaults"):
        if k not in routing:
            raise PimforgeError(f"routing result lacks {k!r} (needs time_s, cycles, reads, "
                                f"writes, vaults)")
    net = network(net_spec) if isinstance(net_spec, str) else net_spec
    cfg = load_config(cfg) if isinstance(cfg, str) or cfg is None else cfg
    gpu = gpu or P100
    R = float(routing["time_s"])
    layers = host_layers(net)
    # Pipelined, the host's data lives in the cube: its roofline bandwidth is the
    # smaller of the GPU's and the cube's peak column bandwidth.
    h = cfg.hmc
    cube_bw = h.vaults * h.block_bytes / (resolve_timing(h.timing, h.tck_ns).col_gap
                                          * h.tck_ns * 1e-9)
    host_gpu = GPU(f"{gpu.name} on the cube", gpu.peak_flops, min(gpu.bandwidth, cube_bw))
    ht = host_times(net, host_gpu)
    pre, post = ht["pre_s"], ht["post_s"]
    hbytes = sum(layer.bytes for layer in layers)
    hwrite = sum(layer.write_bytes for layer in layers)
    rj, rj_src = _routing_energy_j(net, cfg, routing)
    out: dict = {"network": net.name, "config": cfg.name, "batches": batches,
                 "routing": {"time_s": R, "cycles": routing["cycles"],
                             "vaults": routing["vaults"], "energy_j": rj,
                             "energy_source": rj_src,
                             "executed_on": routing.get("executed_on")},
                 "host": {"gpu": host_gpu.name, "bandwidth": host_gpu.bandwidth,
                          "pre_s": pre, "post_s": post,
                          "layers": [{"name": la.name, "stage": la.stage, "flops": la.flops,
                                      "macs": la.macs, "weight_bytes": la.weight_bytes,
                                      "act_read_bytes": la.act_read_bytes,
                                      "act_write_bytes": la.act_write_bytes,
                                      "time_s": ht["layers"][la.name]} for la in layers]},
                 "scenarios": {}, "paper": PAPER,
                 "notes": ["baseline and host times: P100 roofline MODEL",
                           "all-in-pim: analytic PE/bandwidth MODEL",
                           "contention: host and PE streams replayed on the hmc_mem RTL "
                           "(a window, scaled; see pimforge.sim.capsnet.contention)",
                           "energy: MODEL (sim/capsnet/energy.py)"]}
    sc = out["scenarios"]
    if "baseline" in scenarios:
        t1 = roofline(net, gpu).total_s
        sc["baseline"] = {"time_s": batches * t1, "per_batch_s": t1,
                          "energy_j": gpu_energy(batches * t1)}
    if "all-in-pim" in scenarios:
        f = cfg.freq_mhz * 1e6
        pes = cfg.hmc.vaults * cfg.capsnet.pes_per_vault
        bw = cfg.hmc.vaults * cfg.capsnet.intervault_bw_gbs * 1e9
        per = {la.name: max((la.macs + (la.flops - 2 * la.macs)) / (pes * f), la.bytes / bw)
               for la in layers}
        t1 = sum(per.values()) + R
        counts = {"mac": sum(la.macs for la in layers),
                  "rd_bytes": sum(la.read_bytes for la in layers),
                  "wr_bytes": hwrite}
        ej = pim_energy(counts, sum(per.values()), cfg)["total"] + rj
        sc["all-in-pim"] = {"time_s": batches * t1, "per_batch_s": t1,
                            "host_layers_on_pim_s": per, "energy_j": batches * ej}
    pipelined = [s for s in scenarios if s in POLICY_OF]
    if pipelined:
        rd, wr = _pe_rates(routing)
        H = pre + post
        cont = contention(cfg, host_bytes_per_s_per_vault=hbytes / H / cfg.hmc.vaults,
                          host_write_fraction=hwrite / hbytes, pe_read_bytes_per_s=rd,
                          pe_write_bytes_per_s=wr, window_requests=policy_windows,
                          policies=[POLICY_OF[s] for s in pipelined],
                          replay_vaults=replay_vaults, gamma_v=gamma_v, gamma_h=gamma_h,
                          exe=exe)
        out["contention"] = cont
        out["ideal_pipeline_s"] = pipeline_time(pre, post, R, batches)["total_s"]
        idle = P100_POWER.idle_w
        for s in pipelined:
            pol = cont["policies"][POLICY_OF[s]]
            sh, sr = pol["host_slowdown"], pol["pe_slowdown"]
            p = pipeline_time(pre, post, R, batches, sh, sr)
            # The GPU is busy for its layers stretched by the contention, idle otherwise.
            busy = batches * H * sh
            gj = gpu_energy(min(busy, p["total_s"])) + idle * max(0.0, p["total_s"] - busy)
            sc[s] = {"time_s": p["total_s"], "per_batch_s": p["total_s"] / batches,
                     "policy": POLICY_OF[s], "host_slowdown": sh, "pe_slowdown": sr,
                     "steady_stage_s": p["steady_stage_s"], "bound": p["bound"],
                     "energy_j": gj + batches * rj, "gpu_energy_j": gj}
    for s, r in sc.items():
        r["speedup_vs"] = {o: sc[o]["time_s"] / r["time_s"] for o in sc if o != s}
        if "baseline" in sc:
            r["energy_vs_baseline"] = r["energy_j"] / sc["baseline"]["energy_j"]
    return out


def whole_network_table(res: dict) -> str:
    """A short text table of a :func:`whole_network` result (speed vs baseline, paper)."""
    sc = res["scenarios"]
    base = sc.get("baseline")
    lines = [f"{res['network']} on {res['config']}: {res['batches']} batches, routing "
             f"{1e3 * res['routing']['time_s']:.3f} ms/batch ({res['routing']['executed_on']}), "
             f"host pre {1e3 * res['host']['pre_s']:.3f} ms + post "
             f"{1e3 * res['host']['post_s']:.3f} ms/batch (P100 roofline model)",
             f"{'scenario':<12} {'ms/batch':>9} {'speed vs base':>13} {'paper':>6} "
             f"{'energy vs base':>14} {'host slow':>9} {'PE slow':>8} {'bound':>7}"]
    for s, r in sc.items():
        sp = base["time_s"] / r["time_s"] if base else float("nan")
        en = r.get("energy_vs_baseline", float("nan"))
        paper = f"{PAPER[s]:.2f}" if s in PAPER else ("1.00" if s == "baseline" else "-")
        lines.append(f"{s:<12} {1e3 * r['per_batch_s']:>9.3f} {sp:>13.3f} {paper:>6} "
                     f"{en:>14.3f} {r.get('host_slowdown', 1.0):>9.4f} "
                     f"{r.get('pe_slowdown', 1.0):>8.4f} {r.get('bound', '-'):>7}")
    return "\n".join(lines)
