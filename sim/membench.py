"""``pimforge membench``: memory-system traffic on the Verilated HMC RTL.

Python writes the request stream (addresses generated and placed with the shared
:class:`~pimforge.rtl.mem.address_map.AddressMap`), a native C++ driver
(``membench_main.cpp`` of :mod:`pimforge.sim.drivers`) replays it on the
Verilated ``hmc_mem`` block with its own clock loop, plays the DRAM arrays
(sparse, contents by a backdoor function), checks every tag and every read's
data, and logs every DRAM command the vault controllers issue. Units: controller
cycles of ``hmc.tck_ns``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from pimforge.gen.args import (
    WavesWindow,
    add_waves_options,
    count_in_ram,
    fraction,
    int_range,
    max_count_in_ram,
    out_file,
    power_of_two,
    seed,
    waves_window,
)
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import CapacityError, PimforgeError, SimulationError
from pimforge.gen.output import write_json
from pimforge.gen.provenance import stamp
from pimforge.rtl.mem.address_map import AddressMap
from pimforge.rtl.mem.timing import resolve_timing

from . import verilator as vl
from .build import build_verilated
from .drivers import params_header, sources
from .drivers.io import read_fields, write_fields, write_table
from .drivers.pins import driver_top
from .drivers.waves import DriverWaves

__all__ = ["PATTERNS", "POLICIES", "REQUEST_BYTES", "add_arguments", "build_driver",
           "driver_pins", "make_requests", "membench", "replay", "run"]

#: Memory per request: 152 bytes measured for the Python request list (which lives
#: through the run) plus the driver's 40-byte queue entry, with a margin. Bounds
#: --requests by the RAM; the simulated memory bounds it per pattern (_check_fits).
REQUEST_BYTES = 256
_BASE_BYTES = 512 << 20     # the interpreter, numpy and the Verilated model

PATTERNS = ("seq", "random", "strided", "pe-burst", "mixed")
#: Host/PE priority policies and their code on the ``policy`` input of ``hmc_mem``.
POLICIES = {"rmas": 0, "pim-first": 1, "host-first": 2, "arrival": 3}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pattern", choices=PATTERNS, default="seq")
    p.add_argument("--mapping", choices=("default", "capsnet"), help="override hmc.mapping")
    p.add_argument("--requests", type=count_in_ram(1, REQUEST_BYTES, "request", _BASE_BYTES),
                   default=4096,
                   help="16 B block requests in all")
    p.add_argument("--write-fraction", type=fraction, default=0.0,
                   help="fraction of requests that are writes")
    p.add_argument("--stride", type=int_range(16, 1 << 32), default=4096,
                   help="bytes between strided requests")
    p.add_argument("--burst", type=power_of_two(16, 256), default=64,
                   help="bytes of one PE request (pe-burst), 16-256, a power of two")
    p.add_argument("--policy", choices=("rmas", "pim-first", "host-first", "arrival"),
                   default="rmas", help="host/PE priority policy")
    p.add_argument("--gamma-v", type=int_range(0, 255), default=1,
                   help="RMAS impact factor of PE work (0-255)")
    p.add_argument("--gamma-h", type=int_range(0, 255), default=1,
                   help="RMAS impact factor of host work (0-255)")
    p.add_argument("--seed", type=seed, default=1)
    p.add_argument("--trace", type=out_file, help="write every DRAM command as CSV here")
    p.add_argument("--json", type=out_file, required=True, help="write the results here")
    add_waves_options(p)


def array_address(hmc, d) -> int:
    return (d.bank << (hmc.row_bits + hmc.col_bits)) | (d.row << hmc.col_bits) | d.col


def _check_fits(cfg, pattern: str, n: int, stride: int, burst: int) -> None:
    """Refuse a traffic pattern whose addresses would pass the end of the memory (they
    would wrap around onto data already touched, and the figures would be wrong)."""
    h = cfg.hmc
    cap = h.vaults * h.capacity_per_vault
    if pattern == "mixed":
        _check_fits(cfg, "seq", n // 2, stride, burst)
        _check_fits(cfg, "pe-burst", n - n // 2, stride, burst)
        return
    span = {"seq": 16 * n, "strided": stride * (n - 1) + 16}.get(pattern)
    what, room = "the cube", f"{cap} (hmc.vaults x hmc.capacity_per_vault)"
    if pattern == "pe-burst":
        blocks = max(1, burst // 16)
        span, what = max(1, n // (h.vaults * blocks)) * burst, "one vault"
        room = f"{h.capacity_per_vault} (hmc.capacity_per_vault)"
    if span is not None and span > int(room.split()[0]):
        raise CapacityError(f"--pattern {pattern} with {n} requests spans {span} bytes; "
                            f"{what} holds {room}: use fewer --requests, a smaller --stride, "
                            "or a larger memory")


def make_requests(cfg, amap, pattern: str, n: int, *, write_fraction: float = 0.0,
                  stride: int = 4096, burst: int = 64, seed: int = 1) -> list[tuple]:
    """Requests as (master, we, byte address, vault, array address); masters
    ``0..links-1`` are host links, ``links+v`` vault v's PE port."""
    h = cfg.hmc
    r = random.Random(seed)
    cap = h.vaults * h.capacity_per_vault
    host_s = (h.max_block_bytes // 16).bit_length() - 1
    _check_fits(cfg, pattern, n, stride, burst)
    out = []

    def add(master, addr):
        d = amap.decode(addr)
        out.append((master, int(r.random() < write_fraction), addr, d.vault, array_address(h, d)))

    def host_addr(lin):
        lin %= cap
        return amap.with_subpage(lin & ~15, host_s) if amap.kind == "capsnet" else lin & ~15

    if pattern == "mixed":
        # half host sequential reads, half PE bursts, issued concurrently
        host = make_requests(cfg, amap, "seq", n // 2, write_fraction=write_fraction,
                             seed=seed)
        pe = make_requests(cfg, amap, "pe-burst", n - n // 2, write_fraction=write_fraction,
                           burst=burst, seed=seed + 1)
        return host + pe
    if pattern in ("seq", "random", "strided"):
        for i in range(n):
            lin = {"seq": i * 16, "random": r.randrange(cap // 16) * 16,
                   "strided": i * stride}[pattern]
            add(i % h.links, host_addr(lin))
        return out
    if burst not in (16, 32, 64, 128, 256):
        raise PimforgeError(f"--burst must be a power of two between 16 and 256, not {burst}")
    # pe-burst: every vault's PEs issue requests of `burst` bytes in turn; the data of
    # PE k's j-th request is the (j*P + k)-th request-sized chunk of its vault's data
    # (concurrent requests of different PEs are neighbours in the logical layout).
    P = cfg.capsnet.pes_per_vault
    s = (burst // 16).bit_length() - 1
    blocks = burst // 16
    per_vault = max(1, n // (h.vaults * blocks))
    for j in range(per_vault // P + 1):
        for k in range(P):
            idx = j * P + k
            if idx >= per_vault:
                break
            for v in range(h.vaults):
                for b in range(blocks):
                    off = (idx * burst + b * 16) % h.capacity_per_vault
                    if amap.kind == "capsnet":
                        # vault-local placement: vault on top, sub-page = request size
                        addr = (v * h.capacity_per_vault + off) | (s << 1)
                    else:
                        addr = v * h.capacity_per_vault + off  # a linear address space
                    add(h.links + v, addr)
    return out


def driver_pins(links: int, vaults: int) -> dict[str, list[str] | str]:
    """Driver pin -> ``hmc_mem`` port(s): the only place the driver names its ports.

    Lane pins list one port per master (host links, then vault PE ports) or
    per vault.
    """
    masters = [f"host{i}" for i in range(links)] + [f"pe{v}" for v in range(vaults)]
    pins: dict[str, list[str] | str] = {k: k for k in ("policy", "gamma_v", "gamma_h")}
    for pin, suffix in (("req_valid", "__valid"), ("req_ready", "__ready"),
                        ("req_payload", "__payload"), ("resp_valid", "_resp__valid"),
                        ("resp_ready", "_resp__ready"), ("resp_payload", "_resp__payload")):
        pins[pin] = [m + suffix for m in masters]
    pins["conflict"] = [f"v{v}_conflict" for v in range(vaults)]
    # The per-vault DRAM command and array ports are arrays: cmd__<v>__kind, arr__<v>__re...
    for pin in ("cmd_valid", "cmd_kind", "cmd_bank", "cmd_row", "cmd_col",
                "arr_re", "arr_we", "arr_addr", "arr_wdata", "arr_rdata"):
        bundle, member = pin.split("_", 1)
        pins[pin] = [f"{bundle}__{v}__{member}" for v in range(vaults)]
    return pins


def build_driver(cfg, *, trace: bool = False) -> Path:
    """The (cached) native membench driver of *cfg*'s ``hmc_mem`` (with *trace*: a
    separate build that can write waves)."""

    el = elaborate("hmc_mem", cfg)
    h = cfg.hmc
    top = driver_top(el.verilog, el.top, el.manifest["ports"], driver_pins(h.links, h.vaults),
                     name="hmc_mem_driver")
    w = top.words
    for pin in ("cmd_kind", "cmd_bank", "cmd_row", "cmd_col", "conflict"):
        if w[pin] != 1:
            raise SimulationError(f"the membench driver reads {pin} as 32 bits; it has "
                                  f"{32 * w[pin]}")
    if w["arr_addr"] > 2 or w["arr_wdata"] != w["arr_rdata"]:
        raise SimulationError("the membench driver needs array addresses of at most 64 bits "
                              "and read and write data of one width")
    hdr = params_header(top.name, NV=h.vaults, NM=h.links + h.vaults, NL=h.links, TAGS=256,
                        ADDR_BITS=AddressMap.from_config(h).addr_bits, TAG_BITS=8,
                        REQ_WORDS=w["req_payload"], RESP_WORDS=w["resp_payload"],
                        ADDR_WORDS=w["arr_addr"], BLOCK_WORDS=w["arr_wdata"])
    return build_verilated(top.verilog, top.name, sources("membench_main.cpp", hdr),
                           name=f"membench-{cfg.name}", trace=trace)


def replay(cfg, reqs: list[tuple], *, policy: str = "rmas", gamma_v: int = 1, gamma_h: int = 1,
           trace: Path | None = None, max_inflight_host: int | None = None,
           max_inflight_pe: int | None = None, exe: Path | None = None,
           waves: WavesWindow | None = None) -> dict:
    """Replay *reqs* on *cfg*'s Verilated ``hmc_mem``; returns the driver's raw counters.

    Each request is ``(master, we, byte address, vault, array address[, gap])`` as
    :func:`make_requests` makes them; the optional ``gap`` is the number of
    cycles its master waits after its previous request was accepted before
    offering it (a stall therefore delays all later requests of that master).
    ``max_inflight_host`` / ``max_inflight_pe`` cap the requests one host link /
    one PE port has in flight (default: the 256 tags). *waves*: write the waves of
    these cycles (*exe* must then be a trace build). Raises
    :class:`SimulationError` when a response is missing or wrong.
    """
    if policy not in POLICIES:
        raise PimforgeError(f"--policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    for name, g in (("--gamma-v", gamma_v), ("--gamma-h", gamma_h)):
        if not 0 <= g <= 255:
            raise PimforgeError(f"{name} must be an integer between 0 and 255, not {g}")
    for name, c in (("max_inflight_host", max_inflight_host),
                    ("max_inflight_pe", max_inflight_pe)):
        if c is not None and not 1 <= c <= 256:
            raise PimforgeError(f"{name} must be between 1 and 256, not {c}")
    exe = exe or build_driver(cfg, trace=waves is not None)
    with tempfile.TemporaryDirectory() as td, DriverWaves(waves, Path(td)) as wv:
        d = Path(td)
        write_table(d / "requests.txt", ("master", "we", "addr", "vault", "arr", "gap"),
                    (r if len(r) > 5 else (*r, 0) for r in reqs))
        write_fields(d / "run.txt", {
            "policy": POLICIES[policy], "gamma_v": gamma_v, "gamma_h": gamma_h,
            "max_inflight_host": max_inflight_host or 256,
            "max_inflight_pe": max_inflight_pe or 256,
            # The driver writes the trace here; it replaces --trace only once complete.
            **({"trace": str(d / "trace.csv")} if trace else {}), **wv.fields})
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True, check=False)
        if not (d / "stats.txt").exists():
            raise SimulationError(f"membench driver failed: {res.stderr[-2000:]}")
        f = read_fields(d / "stats.txt")
        wv.publish()        # a failed run's too: its waves show where
        if trace and res.returncode == 0:
            Path(trace).parent.mkdir(parents=True, exist_ok=True)
            part = Path(trace).with_name(f".{Path(trace).name}.tmp")
            shutil.move(d / "trace.csv", part)      # the temp folder may be another disk
            os.replace(part, trace)
    stats = {k: f.int(k) for k in ("cycles", "first", "last", "done", "total", "errors",
                                   "conflict", "ACT", "RD", "WR", "PRE", "REF")}
    per_master = zip(f.ints("latency_sum"), f.ints("responses"), f.ints("last_response"))
    for m, (lat, n, last) in enumerate(per_master):
        stats.update({f"m{m}_lat": lat, f"m{m}_n": n, f"m{m}_last": last})
    if res.returncode != 0:
        raise SimulationError(f"membench: {stats['done']}/{stats['total']} responses, "
                              f"{stats['errors']} errors:\n{res.stderr[-2000:]}")
    return stats


def membench(cfg, *, pattern: str, mapping: str | None = None, requests: int = 4096,
             write_fraction: float = 0.0, stride: int = 4096, burst: int = 64,
             policy: str = "rmas", gamma_v: int = 1, gamma_h: int = 1, seed: int = 1,
             trace: Path | None = None, waves: WavesWindow | None = None) -> dict:
    """Build (cached) and run one membench; returns the JSON-able result."""

    if pattern not in PATTERNS:
        raise PimforgeError(f"--pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
    most = max_count_in_ram(REQUEST_BYTES, _BASE_BYTES)
    if not 1 <= requests <= most:
        raise PimforgeError(f"--requests must be between 1 and {most} (what fits in this "
                            f"machine's RAM at {REQUEST_BYTES} bytes each), not {requests}")
    if pattern in ("pe-burst", "mixed") and burst not in (16, 32, 64, 128, 256):
        raise PimforgeError(f"--burst must be a power of two between 16 and 256, not {burst}")
    if stride < 16 or stride % 16:
        raise PimforgeError(f"--stride must be a positive multiple of 16 bytes, not {stride}")
    if mapping:
        cfg = cfg.replace(hmc=replace(cfg.hmc, mapping=mapping))
    h = cfg.hmc
    amap = AddressMap.from_config(h)
    t = resolve_timing(h.timing, h.tck_ns)
    reqs = make_requests(cfg, amap, pattern, requests, write_fraction=write_fraction,
                         stride=stride, burst=burst, seed=seed)
    stats = replay(cfg, reqs, policy=policy, gamma_v=gamma_v, gamma_h=gamma_h, trace=trace,
                   waves=waves)
    cycles = stats["last"] - stats["first"] + 1
    nbytes = len(reqs) * h.block_bytes
    seconds = cycles * h.tck_ns * 1e-9
    bw = nbytes / seconds
    peak_vault = h.block_bytes / (t.col_gap * h.tck_ns * 1e-9)
    vaults_used = len({v for _, _, _, v, _ in reqs})
    cols = stats["RD"] + stats["WR"]
    return {
        "config": cfg.name, "pattern": pattern, "mapping": h.mapping, "requests": len(reqs),
        "write_fraction": write_fraction, "policy": policy, "seed": seed,
        "unit": f"controller cycle of {h.tck_ns} ns",
        "timing": t.as_dict(),
        "cycles": cycles,
        "bytes": nbytes,
        "bandwidth_bytes_per_s": bw,
        "peak_bytes_per_s": peak_vault * h.vaults,
        "bandwidth_fraction": bw / (peak_vault * h.vaults),
        "vaults_used": vaults_used,
        "bandwidth_fraction_of_used_vaults": bw / (peak_vault * vaults_used),
        "row_hit_rate": max(0.0, 1 - stats["ACT"] / cols) if cols else 0.0,
        "bank_conflict_stalls": stats["conflict"],
        "commands": {k: stats[k] for k in ("ACT", "RD", "WR", "PRE", "REF")},
        "errors": stats["errors"],
        **{f"{cls}_{k}": v for cls, masters in (
            ("host", range(h.links)), ("pe", range(h.links, h.links + h.vaults)))
           for k, v in _class_stats(stats, masters, stats["first"]).items()},
    }


def _class_stats(stats: dict, masters, first: int) -> dict:
    n = sum(stats[f"m{m}_n"] for m in masters)
    if not n:
        return {"requests": 0}
    return {"requests": n,
            "mean_latency_cycles": sum(stats[f"m{m}_lat"] for m in masters) / n,
            "finish_cycles": max(stats[f"m{m}_last"] for m in masters) - first + 1}


def run(args) -> int:
    waves = waves_window(args)
    cfg = args.config
    vl.preflight()              # the driver build needs them; say so before the work
    if not 0.0 <= args.write_fraction <= 1.0:
        raise PimforgeError(f"--write-fraction must be between 0 and 1, not {args.write_fraction}")
    r = membench(cfg, pattern=args.pattern, mapping=args.mapping, requests=args.requests,
                 write_fraction=args.write_fraction, stride=args.stride, burst=args.burst,
                 policy=args.policy, gamma_v=args.gamma_v, gamma_h=args.gamma_h,
                 seed=args.seed, trace=args.trace, waves=waves)
    write_json(args.json, stamp(r, "pimforge.membench", 1, cfg))
    print(f"{r['pattern']:8s} mapping {r['mapping']:8s} {r['requests']} requests in "
          f"{r['cycles']} cycles: {r['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s "
          f"({100 * r['bandwidth_fraction']:.1f}% of {r['peak_bytes_per_s'] / 1e9:.1f} GB/s peak,"
          f" {100 * r['bandwidth_fraction_of_used_vaults']:.1f}% of the {r['vaults_used']} "
          f"vault(s) used), row hits {100 * r['row_hit_rate']:.1f}%, bank-conflict stalls "
          f"{r['bank_conflict_stalls']}")
    return 0
