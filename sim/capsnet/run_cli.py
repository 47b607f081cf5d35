"""``pimforge run capsnet``: CapsNet dynamic routing end to end on the vault RTL.

Steps: pick the distribution dimension offline (Sec. 5.1 scores, or ``--dim``),
compile the routing (:mod:`pimforge.sim.capsnet.compiler`), run the programs
on the Verilated vault compute of every vault (:mod:`pimforge.sim.capsnet.rtl_run`),
run the same programs on the ISA-level golden model
(:mod:`pimforge.verif.models.capsnet_isa`), and compare both with
``route_pim`` in the programs' order (``rtl_matches_model``) and with float64
Algorithm 1. ``u`` and ``W`` are random (``--seed``): ``u`` squashed capsules as
PrimaryCaps produces them, ``W`` normal with std ``0.5/sqrt(C_L)``.

Cycles are logic-die cycles at ``--freq`` (the vault RTL runs in that one clock
domain); the time and its DRAM-clock equivalent (``hmc.tck_ns``) are derived.
The per-equation breakdown is the controller's exact per-instruction cost
with an always-ready memory (``issue_cycles(lanes) + pe_latency + 6`` cycles,
:mod:`pimforge.sim.capsnet.timing`) of the most loaded vault; barrier,
crossbar and DRAM waits come from the RTL run (``phase_cycles``,
``crossbar_wait_cycles``, ``vault_request_stalls``).

Ablations (Sec. 6.1). Routing variants, each run on the RTL:
``pim-capsnet`` (inter- and intra-vault design, the config's address mapping;
the presets use the custom ``capsnet`` mapping), ``pim-inter`` (the same
distribution with the ``default`` mapping, so PE streams conflict in the banks)
and ``pim-intra`` (no inter-vault distribution, see :func:`run_capsnet`).
Whole-network variants (Sec. 6.3), from :func:`pimforge.sim.capsnet.pipeline.whole_network`
with this run's routing time and per-vault traffic: ``rmas-pim``, ``rmas-gpu``
(pipelined host and routing under the naive RTL arbitration policies),
``all-in-pim`` (host layers on the PEs too, a MODEL) and the GPU ``baseline``
(P100 roofline MODEL). ``--ablation all`` runs every one and reports
``speedup_vs`` of PIM-CapsNet over each, with ``speedup_scope`` saying whether
the ratio is of the routing or of the whole network.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

__all__ = ["ABLATIONS", "add_arguments", "network_ablations", "run", "run_ablations",
           "run_capsnet"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", choices=["capsnet"], help="workload (capsnet)")
    p.add_argument("--net", required=True, help="Table 1 network (Caps-MN1 ...)")
    p.add_argument("--config", help="config preset or TOML path (default: default)")
    p.add_argument("--scale", type=int, default=1, help="divide B and N_L by S (default 1)")
    p.add_argument("--freq", type=float, help="logic-die MHz (default: the config's)")
    p.add_argument("--dim", choices=["B", "L", "H"], help="force the distribution dimension")
    p.add_argument("--seed", type=int, default=1, help="seed of u and W (default 1)")
    p.add_argument("--dump", help="write u.npy, W.npy, v.npy, iterations.txt here")
    p.add_argument("--json", help="write the results JSON here")
    p.add_argument("--ablation", choices=[*ABLATIONS, "all"], default="pim-capsnet",
                   help="Sec. 6.1 variant (default pim-capsnet); all: every variant with "
                        "speedup_vs ratios")
    p.add_argument("--dram", choices=["banked", "ideal"], default="banked",
                   help="operand memory of the RTL run: banked DRAM throughput model "
                        "(default) or ideal (always ready)")
    p.add_argument("--operand-buffer", choices=["bundle", "none"], default="bundle",
                   help="banked DRAM: the read ports keep the last bundle's blocks "
                        "(bundle, default) or refetch every block (none)")
    p.add_argument("--model-only", action="store_true",
                   help="skip the RTL: run the ISA-level model and its exact cycle count "
                        "(for sizes the RTL cannot finish here)")


def _inputs(net, seed: int):
    from ...verif.models.routing import squash_f64

    rng = np.random.default_rng(seed)
    u = squash_f64(rng.normal(0, 1, (net.batch, net.n_l, net.c_l))).astype(np.float32)
    W = rng.normal(0, 0.5 / np.sqrt(net.c_l), (net.n_l, net.n_h, net.c_h, net.c_l)
                   ).astype(np.float32)
    return u, W


#: Routing-level Sec. 6.1 variants (see :func:`run_capsnet`) and the address
#: mapping each forces (None: the config's ``hmc.mapping``).
ROUTING_ABLATIONS = {"pim-capsnet": None, "pim-inter": "default", "pim-intra": "default"}
#: Whole-network variants (Sec. 6.3; :mod:`pimforge.sim.capsnet.pipeline` scenarios).
NETWORK_ABLATIONS = ("rmas-pim", "rmas-gpu", "all-in-pim")
ABLATIONS = (*ROUTING_ABLATIONS, *NETWORK_ABLATIONS)


def pe_latency(cfg) -> int:
    """The PE latency of *cfg* (cycles, every flow)."""
    from ...rtl.capsnet import pe as pe_mod

    p = pe_mod.from_config(cfg)
    p._MustUse__silence = True      # only its latency is read
    return p.latency


def run_capsnet(net_name, *, config=None, scale: int = 1, freq: float | None = None,
                dim: str | None = None, seed: int = 1, dump: str | None = None,
                model_only: bool = False, check_route_pim: bool = True,
                ablation: str = "pim-capsnet", dram: str = "banked",
                mapping: str | None = None, inputs=None, return_v: bool = False,
                operand_buffer: bool = True):
    """Run one network end to end and return the results dict (see the module doc).

    *net_name* is a Table 1 name or a :class:`~pimforge.sim.capsnet.networks.CapsNetSpec`;
    *config* a preset name, a TOML path or a :class:`~pimforge.gen.config.Config`.
    ``inputs=(u, W)`` routes the given float32 capsules ``(B, N_L, C_L)`` and
    weights ``(N_L, N_H, C_H, C_L)`` instead of the seeded random ones.
    ``return_v=True`` returns ``(results, v)`` with ``v`` the routed output
    (the RTL's, or the ISA model's with *model_only*).

    ``ablation="pim-inter"``: the same programs placed with the ``default``
    address mapping (no intra-vault bank-conflict optimization).
    ``ablation="pim-intra"`` (Sec. 6.1 PIM-Intra): no inter-vault distribution; the
    whole routing runs on vault 0's controller and PEs (compiled for one vault,
    simulated on the same RTL) while the data stays spread over all vaults, so
    the operands of the other ``N - 1`` vaults cross the crossbar. That traffic is
    charged analytically: ``(N-1)/N`` of the words read and written, at
    ``intervault_bw_gbs``, overlapped with the compute (time = the larger of the two).
    """
    import dataclasses

    from ...gen.config import Config, load_config
    from ...gen.errors import PimforgeError
    from ...verif.models.capsnet_isa import execute
    from ...verif.models.capsnet_pe import PEModel
    from ...verif.models.routing import route_f64, route_pim
    from .compiler import compile_routing, program_ops
    from .distribution import choose_distribution
    from .energy import pim_energy
    from .gpu_roofline import roofline
    from .networks import CapsNetSpec, network
    from .rtl_run import build_vault_driver, run_on_rtl
    from .timing import program_cycles

    t_start = time.monotonic()
    cfg = config if isinstance(config, Config) else load_config(config)
    if freq is not None:
        cfg = dataclasses.replace(cfg, freq_mhz=float(freq))
    full = net_name if isinstance(net_name, CapsNetSpec) else network(net_name)
    net = full.scaled(scale) if scale > 1 else full
    dist = choose_distribution(net, cfg, cfg.freq_mhz)
    d = dim or dist.best
    if ablation not in ROUTING_ABLATIONS:
        raise PimforgeError(f"routing ablation must be one of {', '.join(ROUTING_ABLATIONS)}, "
                            f"not {ablation!r}")
    intra = ablation == "pim-intra"
    mapping = mapping or ROUTING_ABLATIONS[ablation]
    if intra:
        # One vault computes; the data is held by all vaults (capacity of the cube).
        comp = compile_routing(net, d, cfg, vaults=1,
                               capacity_bytes=cfg.hmc.capacity_per_vault * cfg.hmc.vaults,
                               mapping=mapping)
    else:
        comp = compile_routing(net, d, cfg, mapping=mapping)
    if inputs is None:
        u, W = _inputs(net, seed)
    else:
        u, W = (np.ascontiguousarray(a, dtype=np.float32) for a in inputs)
        want = ((net.batch, net.n_l, net.c_l), (net.n_l, net.n_h, net.c_h, net.c_l))
        if (u.shape, W.shape) != want:
            raise PimforgeError(f"inputs must have shapes u {want[0]} and W {want[1]} for "
                                f"{net.name}, not {u.shape} and {W.shape}")
    mems = comp.memories(u, W)
    pe = PEModel(cfg)
    lat = pe_latency(cfg)
    t0 = time.monotonic()
    ex = execute(comp.programs, [m.copy() for m in mems], pe)
    model_s = time.monotonic() - t0
    timing = program_cycles(ex.stats, comp.vaults, ex.phases, lat, cfg)
    v_isa = comp.gather_v(ex.memories)
    isa_eq_pim = None
    if check_route_pim:
        v_pim = route_pim(u, W, net.iterations, program_ops(comp, pe)).v
        isa_eq_pim = bool(np.array_equal(v_isa.view(np.uint32), v_pim.view(np.uint32)))
    build_s = 0.0
    if model_only:
        rtl = None
        v_out, cycles, matches = v_isa, timing["cycles"], None
        phase_cycles, xwait, reads, writes, busy = (timing["phase_cycles"], timing["xbar_wait"],
                                                    None, None, None)
    else:
        t0 = time.monotonic()
        exe = build_vault_driver(cfg)
        build_s = time.monotonic() - t0
        rtl = run_on_rtl(comp, mems, cfg, exe=exe, dram=dram, hold_blocks=operand_buffer)
        v_out = comp.gather_v(rtl.memories)
        same_mem = all(np.array_equal(a, b) for a, b in zip(rtl.memories, ex.memories))
        matches = bool(same_mem and np.array_equal(v_out.view(np.uint32),
                                                   v_isa.view(np.uint32))
                       and isa_eq_pim is not False)
        cycles, phase_cycles, xwait = rtl.cycles, rtl.phase_cycles, rtl.xbar_wait
        reads, writes, busy = rtl.reads, rtl.writes, rtl.busy
    v64 = route_f64(u, W, net.iterations).v
    err = float(np.abs(v_out - v64).max())
    per_eq: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ops_by_flow: dict[str, int] = defaultdict(int)
    mac_groups = 0
    xbar = 0
    for st in ex.stats:
        lab = comp.labels[st.vault][st.pc]
        per_eq[lab][f"v{st.vault}"] += st.issue_cycles(cfg.capsnet.pes_per_vault) + lat + 6
        if st.op in ("FLOW", "ADD"):
            ops_by_flow[st.flow or "MAC"] += st.elements
            if (st.flow or "MAC") == "MAC":
                mac_groups += st.outputs
        if st.op == "SEND" and st.peer != st.vault:
            xbar += st.send_bytes + cfg.capsnet.packet_overhead_bytes
    breakdown = {k: max(v.values()) for k, v in sorted(per_eq.items())}
    f_hz = cfg.freq_mhz * 1e6
    ablation_info = None
    if intra:
        nv = cfg.hmc.vaults
        words = sum(2 * s.elements + s.outputs for s in ex.stats if s.op != "SEND")
        remote = 4 * words * (nv - 1) / nv
        bw = cfg.capsnet.intervault_bw_gbs * 1e9 / f_hz
        xcyc = int(np.ceil(remote / bw))
        ablation_info = {"compute_cycles": cycles, "remote_operand_bytes": int(remote),
                         "crossbar_cycles": xcyc, "modelled": "crossbar operand traffic"}
        xbar += int(remote)
        cycles = max(cycles, xcyc)
    time_s = cycles / f_hz
    if reads is None:      # the controller reads one a/b pair per non-send element
        reads = [sum(s.elements for s in ex.stats if s.vault == v and s.op != "SEND")
                 for v in range(comp.vaults)]
        writes = [sum(s.outputs for s in ex.stats if s.vault == v and s.op != "SEND")
                  for v in range(comp.vaults)]
    # Event counts for the energy model: the banked DRAM model's row misses are
    # the activations (an ideal memory or the ISA model count none); refresh is
    # not simulated.
    acts = rtl.dram_summary()["activates"] if rtl and rtl.dram == "banked" else 0
    events = {"act": int(acts), "mac": int(ops_by_flow.get("MAC", 0)),
              "mac_groups": int(mac_groups),
              **{f.lower(): int(ops_by_flow.get(f, 0)) for f in ("ISQRT", "EXP", "RECIP",
                                                                 "DIV")},
              "rd_bytes": int(8 * sum(reads)), "wr_bytes": int(4 * sum(writes)),
              "xbar_bytes": int(xbar)}
    energy = pim_energy(events, time_s, cfg)
    gpu = roofline(net)
    out = {
        "network": net.name, "config": cfg.name, "scale": scale, "vaults": comp.vaults,
        "active_vaults": len(comp.active),
        "shape": {"B": net.batch, "N_L": net.n_l, "N_H": net.n_h, "C_L": net.c_l,
                  "C_H": net.c_h, "iterations": net.iterations},
        "executed_on": "isa-model" if model_only else "rtl",
        "ablation": ablation, "ablation_detail": ablation_info,
        "freq_mhz": cfg.freq_mhz, "cycles": cycles, "time_s": time_s,
        "dram_clock_cycles": round(time_s / (cfg.hmc.tck_ns * 1e-9)),
        "per_equation_cycles_busiest_vault": breakdown,
        "phase_cycles": phase_cycles,
        "timing_model_cycles": timing["cycles"],
        "intervault_bytes": int(xbar),
        "crossbar_wait_cycles": xwait,
        "vault_request_stalls": (int(sum(rtl.vault_request_stalls)) if rtl and
                                 rtl.dram == "banked" else None),
        "dram": rtl.dram_summary() if rtl and rtl.dram == "banked" else
        {"model": "ideal" if rtl else None},
        "address_mapping": comp.amap.kind,
        "operand_buffer": (operand_buffer if rtl and rtl.dram == "banked" else None),
        "vault_busy_cycles": busy,
        "reads": [int(r) for r in reads], "writes": [int(w) for w in writes],
        "dimension": d, "dimension_forced": dim is not None,
        "scores": {k: {"E": s.E, "M": s.M, "time_s": s.time_s, "score": s.score}
                   for k, s in dist.scores.items()},
        "program_instructions": comp.program_words(),
        "events": events, "energy_j": {k: v for k, v in energy.items() if k != "ops"},
        "energy_note": "energy MODEL (sim/capsnet/energy.py); ACTs from the banked DRAM "
                       "model's row misses (0 with an ideal memory), refresh not charged",
        "rtl_matches_model": matches,
        "isa_model_matches_route_pim": isa_eq_pim,
        "max_abs_err_vs_float64": err, "max_abs_v_float64": float(np.abs(v64).max()),
        "gpu_model": {"gpu": gpu.gpu, "routing_s": gpu.routing_s, "total_s": gpu.total_s,
                      "note": "roofline model, not a measurement"},
        "speedup_vs_gpu_model": gpu.routing_s / time_s,
        "wall_s": {"build": build_s, "rtl": rtl.wall_s if rtl else None,
                   "rtl_loop": rtl.seconds if rtl else None,
                   "isa_model": model_s, "total": time.monotonic() - t_start},
        "rtl_cycles_per_s": rtl.cycles / max(rtl.seconds, 1e-9) if rtl else None,
    }
    if dump:
        p = Path(dump)
        p.mkdir(parents=True, exist_ok=True)
        np.save(p / "u.npy", u)
        np.save(p / "W.npy", W)
        np.save(p / "v.npy", v_out)
        (p / "iterations.txt").write_text(f"{net.iterations}\n")
    return (out, v_out) if return_v else out


def network_ablations(res: dict, cfg, scenarios=("baseline", "pim-capsnet",
                                                *NETWORK_ABLATIONS), **kw) -> dict:
    """Whole-network Sec. 6.3 variants around the routing run *res* (a
    :func:`run_capsnet` result): :func:`~pimforge.sim.capsnet.pipeline.whole_network`
    on the network *res* routed (the reduced one at ``--scale``), with *res*'s
    time and per-vault traffic as the routing of one batch."""
    from .networks import network
    from .pipeline import routing_from_run, whole_network

    net = network(res["network"])
    net = net.scaled(res["scale"]) if res.get("scale", 1) > 1 else net
    return whole_network(net, cfg, routing_from_run(res), scenarios=scenarios, **kw)


def run_ablations(net_name: str, which: str, *, dump: str | None = None, **kw) -> dict:
    """``--ablation`` *which*: the run of *which* (a routing variant) or of
    PIM-CapsNet plus the whole-network scenarios (a network variant, or ``all``),
    with ``speedup_vs`` (PIM-CapsNet over each variant) and ``speedup_scope``."""
    from ...gen.config import load_config
    from ...gen.errors import PimforgeError

    if which not in (*ABLATIONS, "all"):
        raise PimforgeError(f"--ablation must be one of {', '.join(ABLATIONS)} or all, "
                            f"not {which!r}")
    if which in ROUTING_ABLATIONS and which != "pim-capsnet":
        return run_capsnet(net_name, dump=dump, ablation=which, **kw)
    res = run_capsnet(net_name, dump=dump, **kw)
    if which == "pim-capsnet":
        return res
    routing = [a for a in ROUTING_ABLATIONS if a != "pim-capsnet"] if which == "all" else []
    others = {a: run_capsnet(net_name, ablation=a, **kw) for a in routing}
    res["variants"] = {a: {k: r[k] for k in ("cycles", "time_s", "intervault_bytes",
                                              "vault_request_stalls", "address_mapping",
                                              "ablation_detail", "rtl_matches_model",
                                              "energy_j")}
                       for a, r in others.items()}
    res["speedup_vs"] = {a: r["time_s"] / res["time_s"] for a, r in others.items()}
    res["energy_saving_vs"] = {a: 1 - res["energy_j"]["total"] / r["energy_j"]["total"]
                               for a, r in others.items()}
    res["speedup_scope"] = {a: "routing" for a in others}
    scen = ("baseline", "pim-capsnet", *(NETWORK_ABLATIONS if which == "all" else (which,)))
    cfg = load_config(kw.get("config"))
    if kw.get("freq") is not None:
        import dataclasses
        cfg = dataclasses.replace(cfg, freq_mhz=float(kw["freq"]))
    whole = network_ablations(res, cfg, scenarios=scen)
    res["whole_network"] = whole
    mine = whole["scenarios"]["pim-capsnet"]["time_s"]
    for s in scen:
        if s != "pim-capsnet":
            res["speedup_vs"][s] = whole["scenarios"][s]["time_s"] / mine
            res["speedup_scope"][s] = "whole network"
    return res


def run(args) -> int:
    from ...gen.errors import PimforgeError

    if args.scale < 1:
        raise PimforgeError(f"--scale must be >= 1, not {args.scale}")
    kw = dict(config=args.config, scale=args.scale, freq=args.freq, dim=args.dim,
              seed=args.seed, model_only=args.model_only, dram=args.dram,
              operand_buffer=args.operand_buffer == "bundle")
    res = run_ablations(args.net, args.ablation, dump=args.dump, **kw)
    for a, x in res.get("speedup_vs", {}).items():
        print(f"  speedup vs {a} ({res['speedup_scope'][a]}): {x:.3f}x")
    if "whole_network" in res:
        from .pipeline import whole_network_table
        print(whole_network_table(res["whole_network"]))
    sc = res["scores"]
    print(f"{res['network']} B={res['shape']['B']} N_L={res['shape']['N_L']} "
          f"N_H={res['shape']['N_H']} on {res['vaults']} vaults at {res['freq_mhz']} MHz")
    print("  dimension scores (1/s): " + ", ".join(f"{k} {v['score']:.4g}" for k, v in
                                                   sc.items()) + f" -> {res['dimension']}")
    print(f"  {res['cycles']} cycles = {res['time_s'] * 1e6:.2f} us; inter-vault "
          f"{res['intervault_bytes']} B; per equation {res['per_equation_cycles_busiest_vault']}")
    print(f"  on {res['executed_on']}; rtl_matches_model {res['rtl_matches_model']}; "
          f"max |v - v_float64| "
          f"{res['max_abs_err_vs_float64']:.3g}; speedup vs GPU model "
          f"{res['speedup_vs_gpu_model']:.3g}x; wall {res['wall_s']['total']:.1f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    key = "isa_model_matches_route_pim" if args.model_only else "rtl_matches_model"
    ok = res[key] and all(v["rtl_matches_model"] is not False
                          for v in res.get("variants", {}).values())
    return 0 if ok else 1
