"""Run compiled PIM-CapsNet routing programs on the Verilated vault compute.

One Verilog model of :class:`~pimforge.rtl.capsnet.vault.VaultCompute` is
built (cached) with the native driver ``vault_main.cpp`` of
:mod:`pimforge.sim.drivers`; the driver
instantiates it once per vault and clocks all of them in one C++ loop, serving
each vault's operand memory as lane vectors, delivering crossbar sends (each
vault port moves ``capsnet.intervault_bw_gbs`` worth of bytes per cycle; a
barrier is released no earlier than the busiest port allows) and releasing
barriers. Python only writes the memories, programs and DRAM tables and reads
the results back.

Operand memory (``dram``):

``"ideal"``   every read bundle is answered in the cycle it is asked for (the
              cycle count then equals :func:`~pimforge.sim.capsnet.timing.program_cycles`).
``"banked"``  (default) a throughput model of the vault's DRAM and its
              operand port: see ``vault_main.cpp`` and scripts/capsnet/README.md, "DRAM path
              of the driver": announced bundles (prefetch hints) are fetched
              ahead across the banks, each block's bank and row taken from a
              table computed here with the placement's shared
              :class:`~pimforge.rtl.mem.address_map.AddressMap`
              (:meth:`Compiled.bank_rows`); banks serve hits in ``tCCD`` and
              misses in ``tRP + tRCD + tCCD`` (``hmc.timing`` in logic
              cycles; close page: ``tRCD + tCCD``), the TSVs move
              ``hmc.vault_bw_gbs``; ``rd_ready`` stays low while the oldest
              bundle's blocks have not arrived. ``hold_blocks`` (default) gives
              the port its buffers (``capsnet.read_buffer_blocks``,
              ``fetch_blocks``, ``write_buffer_blocks``; without prefetch: the
              last bundle's blocks). Refresh and the crossbar writes into a
              peer's DRAM are not charged.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pimforge.gen.args import WavesWindow
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import SimulationError
from pimforge.rtl.capsnet.isa import INSTR_BITS, encode

from ..build import build_verilated
from ..drivers import params_header, sources
from ..drivers.io import read_fields, write_fields
from ..drivers.pins import driver_top
from ..drivers.waves import DriverWaves
from .compiler import Compiled

__all__ = ["RTLRun", "build_vault_driver", "run_on_rtl", "native_loop", "default_threads",
           "central_crossbar", "DRAM_MODES", "PINS"]

IWORDS = -(-INSTR_BITS // 32)
DRAM_MODES = ("banked", "ideal")
#: A DRAM table entry (tab<v>.bin) is ``(remote << 31) | (row << TAB_BANK_BITS) | bank``.
TAB_BANK_BITS = 6
TAB_REMOTE_BIT = 31


#: Driver pin -> port of the vault compute: the only place the driver names its ports.
#: The lane bundles are the ``rd``, ``wr`` and ``send`` members of the vault compute
#: (Verilog ``rd__valid``...; see :mod:`pimforge.rtl.capsnet.lanes`).
PINS = {name: name for name in ("go", "at_bar", "halted", "imem_we", "imem_addr", "imem_data")}
PINS.update({f"{bundle}_{member}": f"{bundle}__{member}" for bundle, members in (
    ("rd", ("valid", "ready", "mask", "a_addr", "a_stride", "a_data", "b_addr", "b_stride",
            "b_data")),
    ("pf", ("valid", "mask", "a_addr", "a_stride", "b_addr", "b_stride")),
    ("wr", ("en", "addr", "mask", "stride", "data")),
    ("send", ("valid", "peer", "addr", "mask", "stride", "data"))) for member in members})


def build_vault_driver(cfg, *, extra_args: tuple[str, ...] = (), trace: bool = False) -> Path:
    """The cached native driver executable for *cfg*'s vault compute.

    ``extra_args`` go to Verilator (e.g. ``("-MAKEFLAGS", "OPT_FAST=-O2")``). With
    *trace*: a separate build that can write waves (Verilator ``--trace``), made the
    first time a run asks for waves (``run_on_rtl(..., waves=...)``); tracing doubles
    the build's time, so the runs without waves keep the untraced one.
    """

    el = elaborate("capsnet_vault", cfg)
    top = driver_top(el.verilog, el.top, el.manifest["ports"], PINS, name="capsnet_vault_driver")
    hdr = params_header(top.name, IWORDS=IWORDS, LANES=cfg.capsnet.pes_per_vault,
                        TAB_BANK_BITS=TAB_BANK_BITS)
    return build_verilated(top.verilog, top.name, sources("vault_main.cpp", hdr, ("vault_dram.h",)),
                           name="capsnet_vault-run", extra_args=tuple(extra_args), trace=trace,
                           # the 16 PEs compiled once (C++ 13.6 MB -> 1.6 MB), as fast
                           hierarchical=True)


@dataclass
class RTLRun:
    """What one driver run measured (per-vault lists are indexed by vault)."""

    memories: list[np.ndarray]
    cycles: int
    seconds: float
    phase_cycles: list[int]
    reads: list[int]          # lane operand pairs read
    writes: list[int]         # words written
    busy: list[int]
    xbar_wait: int
    sends: int
    wall_s: float
    dram: str = "ideal"
    vault_request_stalls: list[int] = field(default_factory=list)   # bank-bound cycles
    bandwidth_stalls: list[int] = field(default_factory=list)       # TSV-bound cycles
    blocks_read: list[int] = field(default_factory=list)
    blocks_written: list[int] = field(default_factory=list)
    blocks_remote: list[int] = field(default_factory=list)          # over the crossbar
    #: Cycles a bundle waited for the crossbar (later than its banks and TSV), and
    #: the bytes (packets, both directions) the centralized units moved over it.
    crossbar_stalls: list[int] = field(default_factory=list)
    crossbar_bytes: list[int] = field(default_factory=list)
    row_hits: list[int] = field(default_factory=list)
    row_misses: list[int] = field(default_factory=list)             # = ACTs
    #: Per phase, per vault: active (not at a barrier) cycles and the stall cycles
    #: among them (rd_ready low: banks behind, TSVs behind).
    phase_busy: list[list[int]] = field(default_factory=list)
    phase_vault_request_stalls: list[list[int]] = field(default_factory=list)
    phase_bandwidth_stalls: list[list[int]] = field(default_factory=list)
    phase_crossbar_stalls: list[list[int]] = field(default_factory=list)

    def dram_summary(self) -> dict:
        """The DRAM counters, summed over the vaults and per vault (for the run JSON)."""
        keys = ("vault_request_stalls", "bandwidth_stalls", "crossbar_stalls", "blocks_read",
                "blocks_written", "blocks_remote", "crossbar_bytes", "row_hits", "row_misses")
        out = {"model": self.dram, **{k: int(sum(getattr(self, k))) for k in keys}}
        out["activates"] = out["row_misses"]
        out["per_vault"] = {k: [int(x) for x in getattr(self, k)] for k in keys}
        return out


def _prog_words(prog) -> np.ndarray:
    out = np.zeros((len(prog), IWORDS), dtype=np.uint32)
    for k, ins in enumerate(prog):
        w = encode(ins)
        for j in range(IWORDS):
            out[k, j] = (w >> (32 * j)) & 0xFFFFFFFF
    return out


def dram_params(cfg) -> dict:
    """Bank service times (logic cycles) and TSV bytes per logic cycle of *cfg*."""
    t = cfg.hmc.timing
    cyc = cfg.freq_mhz / 1000.0          # logic cycles per ns
    return {"hit": t.tCCD * cyc, "miss": (t.tRP + t.tRCD + t.tCCD) * cyc,
            "closed": (t.tRCD + t.tCCD) * cyc,
            "tsv": cfg.hmc.vault_bw_gbs * 1e9 / (cfg.freq_mhz * 1e6),
            "close_page": int(cfg.hmc.page_policy == "close")}


def central_crossbar(cfg, groups: int) -> dict:
    """Bytes per logic cycle that each of *groups* centralized compute groups gets
    of the crossbar in each direction, and the packet overhead (PIM-Intra,
    Sec. 6.1). The units reach the vaults through the crossbar that switches the
    host links (``hmc.link_bw_gbs`` for both directions, half each way); while
    every group streams, round-robin arbitration gives each an equal share."""
    per_dir = cfg.hmc.link_bw_gbs / 2 * 1e9 / (cfg.freq_mhz * 1e6) / max(1, groups)
    return {"rd": per_dir, "wr": per_dir, "packet": cfg.capsnet.packet_overhead_bytes}


def _write_inputs(d: Path, comp: Compiled, mems, cfg, max_cycles: int, dram: str,
                  hold_blocks: bool = False, native_cycles: int = 0, threads: int = 1,
                  prefetch: bool = True, waves: dict | None = None) -> None:
    if dram not in DRAM_MODES:
        raise ValueError(f"dram must be one of {', '.join(DRAM_MODES)}, not {dram!r}")
    if cfg.hmc.banks_per_vault > 1 << TAB_BANK_BITS:
        raise ValueError(f"the DRAM model holds at most {1 << TAB_BANK_BITS} banks per vault")
    bw = cfg.capsnet.intervault_bw_gbs * 1e9 / (cfg.freq_mhz * 1e6)   # bytes per cycle
    p = dram_params(cfg)
    central = comp.placement == "central"
    xb = central_crossbar(cfg, len(comp.active))
    if central:     # the aggregation's sends cross the same crossbar share
        bw = min(bw, xb["rd"])
    write_fields(d / "run.txt", {
        "central": int(central), "xbar_rd_bytes_per_cycle": xb["rd"],
        "xbar_wr_bytes_per_cycle": xb["wr"], "packet_bytes": xb["packet"],
        "vaults": comp.vaults, "max_cycles": max_cycles, "xbar_bytes_per_cycle": bw,
        "dram": int(dram == "banked"), "hit_cycles": p["hit"], "miss_cycles": p["miss"],
        "closed_cycles": p["closed"], "tsv_bytes_per_cycle": p["tsv"],
        "close_page": p["close_page"], "hold": int(hold_blocks),
        "prefetch": cfg.capsnet.prefetch_bundles if prefetch else 0,
        "read_buffer_blocks": cfg.capsnet.read_buffer_blocks,
        "write_buffer_blocks": cfg.capsnet.write_buffer_blocks,
        "fetch_blocks": cfg.capsnet.fetch_blocks,
        "native_cycles": native_cycles,
        "threads": threads, **(waves or {})})
    for v in range(comp.vaults):
        mem = np.asarray(mems[v], dtype=np.uint32)
        mem.tofile(d / f"mem{v}.bin")
        _prog_words(comp.programs[v]).tofile(d / f"prog{v}.bin")
        if dram == "banked":
            bank, row, remote = comp.bank_rows(v, mem.size)
            if row.size and int(row.max()) >> (31 - TAB_BANK_BITS):
                raise ValueError(f"the DRAM model holds rows below {1 << (31 - TAB_BANK_BITS)}")
            tab = ((row.astype(np.uint64) << TAB_BANK_BITS) | bank.astype(np.uint64)
                   | (remote.astype(np.uint64) << TAB_REMOTE_BIT))
            tab.astype(np.uint32).tofile(d / f"tab{v}.bin")


def run_on_rtl(comp: Compiled, mems: list[np.ndarray], cfg, *, exe: Path | None = None,
               max_cycles: int = 10**11, dram: str = "banked", hold_blocks: bool = True,
               progress_dir: str | None = None, threads: int | None = None,
               prefetch: bool = True, waves: WavesWindow | None = None,
               waves_vault: int = 0) -> RTLRun:
    """Run *comp*'s programs on the RTL from memories *mems* (not modified).

    ``dram`` is ``"banked"`` or ``"ideal"`` (see the module doc); the DRAM
    tables use the address mapping *comp* was placed with
    (``compile_routing(..., mapping=...)``). ``hold_blocks``: the read ports
    keep the blocks of the last accepted bundle, so a bundle only fetches the
    blocks it did not already have (an operand line buffer holding the last
    accepted bundle's blocks, on by default; the ``hmc_capsnet`` operand ports
    cache more, every block read since the last barrier).
    ``prefetch=False``: the banked DRAM ignores the controller's prefetch
    hints and fetches each bundle when it is asked for.
    ``threads``: driver threads clocking the vaults (default: the cores this
    process may use, at most one per vault); the result does not depend on it.
    ``progress_dir``: run in this folder (kept), where the driver rewrites
    ``progress.txt`` (named fields ``cycle``, ``phase``, ``seconds``; see
    :func:`~pimforge.sim.drivers.io.read_fields`) every 10 s of a long run.
    ``waves``: write the waves of vault ``waves_vault``'s compute for these cycles of
    the run (cycle 0: the first cycle after the programs are loaded and started, as
    the run's cycle count); a vault waiting at a barrier is not clocked, so its
    signals hold there. The path is printed on stderr.
    """
    if waves is not None and not 0 <= waves_vault < comp.vaults:
        raise SimulationError(f"waves_vault must be between 0 and {comp.vaults - 1}, "
                              f"not {waves_vault}")
    exe = exe or build_vault_driver(cfg, trace=waves is not None)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="capsnet-run-") as td, \
            DriverWaves(waves, Path(td)) as wv:
        d = Path(progress_dir or td)
        d.mkdir(parents=True, exist_ok=True)
        if waves is not None and d != Path(td):     # the waves link lives in the run folder
            (d / "waves.vcd").unlink(missing_ok=True)
            (d / "waves.vcd").symlink_to(os.readlink(Path(td) / "waves.vcd"))
        _write_inputs(d, comp, mems, cfg, max_cycles, dram, hold_blocks,
                      threads=default_threads() if threads is None else threads,
                      prefetch=prefetch,
                      waves={**wv.fields, "waves_vault": waves_vault} if waves else None)
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True)
        if waves is not None:
            wv.publish()        # a failed run's too: its waves show where
        if res.returncode != 0:
            raise SimulationError(f"vault driver failed (exit {res.returncode}): "
                                  f"{(res.stdout + res.stderr)[-2000:]}")
        out = [np.fromfile(d / f"out{v}.bin", dtype=np.uint32) for v in range(comp.vaults)]
        st = read_fields(d / "stats.txt")
    per_vault = {k: st.ints(k) for k in ("reads", "writes", "busy", "vault_request_stalls",
                                         "bandwidth_stalls", "crossbar_stalls", "blocks_read",
                                         "blocks_written", "blocks_remote", "crossbar_bytes",
                                         "row_hits", "row_misses")}
    if any(len(x) != comp.vaults for x in per_vault.values()):
        raise SimulationError(f"vault driver reported {len(per_vault['reads'])} vaults, "
                              f"not {comp.vaults}")
    per_phase = {k: _phase_deltas(st.ints(k), comp.vaults)
                 for k in ("phase_busy", "phase_vault_request_stalls", "phase_bandwidth_stalls",
                           "phase_crossbar_stalls")}
    return RTLRun(out, st.int("cycles"), st.float("seconds"), st.ints("phase_cycles"),
                  xbar_wait=st.int("xbar_wait"), sends=st.int("sends"),
                  wall_s=time.monotonic() - t0, dram=dram, **per_vault, **per_phase)


def _phase_deltas(cumulative: list[int], vaults: int) -> list[list[int]]:
    """Per-phase counts of the driver's per-phase cumulative snapshots (phases x vaults)."""
    if len(cumulative) % vaults:
        raise SimulationError(f"vault driver reported {len(cumulative)} per-phase counters, "
                              f"not a multiple of {vaults} vaults")
    rows = np.asarray(cumulative, dtype=np.int64).reshape(-1, vaults)
    return np.diff(rows, axis=0, prepend=0).tolist()


def default_threads() -> int:
    """Cores this process may run on (the driver's default thread count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def native_loop(comp: Compiled, mems, cfg, cycles: int, *, exe: Path | None = None
                ) -> float:
    """Seconds a pure native clock loop of the same models takes for *cycles* cycles."""
    if cycles < 1:
        raise ValueError(f"cycles must be at least 1, not {cycles}")
    exe = exe or build_vault_driver(cfg)
    with tempfile.TemporaryDirectory(prefix="capsnet-native-") as td:
        d = Path(td)
        _write_inputs(d, comp, mems, cfg, cycles, "ideal", native_cycles=cycles)
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True)
        if res.returncode != 0:
            raise SimulationError(f"vault driver failed (exit {res.returncode}): "
                                  f"{(res.stdout + res.stderr)[-2000:]}")
        return read_fields(d / "stats.txt").float("seconds")
