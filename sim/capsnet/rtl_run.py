"""Run compiled PIM-CapsNet routing programs on the Verilated vault compute.

One Verilog model of :class:`~pimforge.rtl.capsnet.vault.VaultCompute` is
built (cached) with the native driver ``vault_main.cpp``; the driver
instantiates it once per vault and clocks all of them in one C++ loop, serving
each vault's operand memory as lane vectors, delivering crossbar sends (each
vault port moves ``capsnet.intervault_bw_gbs`` worth of bytes per cycle; a
barrier is released no earlier than the busiest port allows) and releasing
barriers. Python only writes the memories, programs and DRAM tables and reads
the results back.

Operand memory (``dram``):

``"ideal"``   every read bundle is answered in the cycle it is asked for (the
              cycle count then equals :func:`~pimforge.sim.capsnet.timing.program_cycles`).
``"banked"``  (default) a throughput model of the vault's DRAM: each cycle's
              read bundle (live lanes of ``a`` and ``b``) and posted write bundle
              are split into distinct 16-byte blocks, each block's bank and row
              taken from a table computed here with the placement's shared
              :class:`~pimforge.rtl.mem.address_map.AddressMap`
              (:meth:`Compiled.bank_rows`). A bank serves a row hit in ``tCCD``
              and a miss in ``tRP + tRCD + tCCD`` (``hmc.timing``, converted to
              logic cycles at ``freq_mhz``; close page: ``tRCD + tCCD`` each),
              the banks in parallel, and the vault's TSVs move
              ``hmc.vault_bw_gbs`` per cycle. Latency is hidden, since the
              operand streams are fixed by the loop descriptors and can be
              prefetched; throughput and bank conflicts are not: ``rd_ready``
              stays low while the bundle's banks (vault request stall) or the
              TSVs (bandwidth stall) are behind. With ``hold_blocks`` (default)
              the read ports keep the last accepted bundle's blocks and fetch
              only the others. Refresh and the crossbar writes into a peer's
              DRAM are not charged.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...gen.errors import SimulationError
from ...rtl.capsnet.isa import INSTR_BITS, encode
from .compiler import Compiled

__all__ = ["RTLRun", "build_vault_driver", "run_on_rtl", "native_loop", "DRAM_MODES"]

IWORDS = -(-INSTR_BITS // 32)
DRAM_MODES = ("banked", "ideal")


def build_vault_driver(cfg, *, extra_args: tuple[str, ...] = ()) -> Path:
    """The cached native driver executable for *cfg*'s vault compute.

    ``extra_args`` go to Verilator (e.g. ``("-MAKEFLAGS", "OPT_FAST=-O2")``).
    """
    from ...gen.elaborate import elaborate
    from ..build import build_verilated

    el = elaborate("capsnet_vault", cfg)
    cpp = (Path(__file__).with_name("vault_main.cpp").read_text()
           .replace("@TOP@", "capsnet_vault").replace("@IWORDS@", str(IWORDS))
           .replace("@LANES@", str(cfg.capsnet.pes_per_vault)))
    return build_verilated(el.verilog, "capsnet_vault", {"vault_main.cpp": cpp},
                           name="capsnet_vault-run", extra_args=tuple(extra_args))


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
    row_hits: list[int] = field(default_factory=list)
    row_misses: list[int] = field(default_factory=list)             # = ACTs

    def dram_summary(self) -> dict:
        """The DRAM counters, summed over the vaults and per vault (for the run JSON)."""
        keys = ("vault_request_stalls", "bandwidth_stalls", "blocks_read", "blocks_written",
                "row_hits", "row_misses")
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


def _write_inputs(d: Path, comp: Compiled, mems, cfg, max_cycles: int, dram: str,
                  hold_blocks: bool = False) -> None:
    if dram not in DRAM_MODES:
        raise ValueError(f"dram must be one of {', '.join(DRAM_MODES)}, not {dram!r}")
    if cfg.hmc.banks_per_vault > 64:
        raise ValueError("the DRAM model holds at most 64 banks per vault")
    bw = cfg.capsnet.intervault_bw_gbs * 1e9 / (cfg.freq_mhz * 1e6)   # bytes per cycle
    p = dram_params(cfg)
    (d / "meta.txt").write_text(
        f"{comp.vaults} {max_cycles} {bw!r} {cfg.capsnet.packet_overhead_bytes} "
        f"{int(dram == 'banked')} {p['hit']!r} {p['miss']!r} {p['closed']!r} {p['tsv']!r} "
        f"{p['close_page']} {int(hold_blocks)} 1\n")
    for v in range(comp.vaults):
        mem = np.asarray(mems[v], dtype=np.uint32)
        mem.tofile(d / f"mem{v}.bin")
        _prog_words(comp.programs[v]).tofile(d / f"prog{v}.bin")
        if dram == "banked":
            bank, row = comp.bank_rows(v, mem.size)
            ((row.astype(np.uint64) << 6) | bank.astype(np.uint64)).astype(np.uint32).tofile(
                d / f"tab{v}.bin")


def run_on_rtl(comp: Compiled, mems: list[np.ndarray], cfg, *, exe: Path | None = None,
               max_cycles: int = 10**11, dram: str = "banked", hold_blocks: bool = True,
               progress_dir: str | None = None) -> RTLRun:
    """Run *comp*'s programs on the RTL from memories *mems* (not modified).

    ``dram`` is ``"banked"`` or ``"ideal"`` (see the module doc); the DRAM
    tables use the address mapping *comp* was placed with
    (``compile_routing(..., mapping=...)``). ``hold_blocks``: the read ports
    keep the blocks of the last accepted bundle, so a bundle only fetches the
    blocks it did not already have (an operand line buffer holding the last
    accepted bundle's blocks, on by default; the ``hmc_capsnet`` operand ports
    cache more, every block read since the last barrier).
    ``progress_dir``: run in this folder (kept), where the driver rewrites
    ``progress.txt`` (cycle, phase, seconds) every 10 s of a long run.
    """
    exe = exe or build_vault_driver(cfg)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="capsnet-run-") as td:
        d = Path(progress_dir or td)
        d.mkdir(parents=True, exist_ok=True)
        _write_inputs(d, comp, mems, cfg, max_cycles, dram, hold_blocks)
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True)
        if res.returncode != 0:
            raise SimulationError(f"vault driver failed (exit {res.returncode}): "
                                  f"{(res.stdout + res.stderr)[-2000:]}")
        out = [np.fromfile(d / f"out{v}.bin", dtype=np.uint32) for v in range(comp.vaults)]
        st = (d / "stats.txt").read_text().split("\n")
    kv, vaults, phases = {}, [], []
    for line in st:
        f = line.split()
        if not f:
            continue
        if f[0] == "vault":
            vaults.append(tuple(int(x) for x in f[2:]))
        elif f[0] == "phase":
            phases.append(int(f[2]))
        else:
            kv[f[0]] = float(f[1])
    col = list(zip(*vaults))
    return RTLRun(out, int(kv["cycles"]), kv["seconds"], phases, list(col[0]), list(col[1]),
                  list(col[2]), int(kv["xbar_wait"]), int(kv["sends"]),
                  time.monotonic() - t0, dram, *(list(c) for c in col[3:9]))


def native_loop(comp: Compiled, mems, cfg, cycles: int, *, exe: Path | None = None
                ) -> float:
    """Seconds a pure native clock loop of the same models takes for *cycles* cycles."""
    exe = exe or build_vault_driver(cfg)
    with tempfile.TemporaryDirectory(prefix="capsnet-native-") as td:
        d = Path(td)
        _write_inputs(d, comp, mems, cfg, cycles, "ideal")
        res = subprocess.run([str(exe), str(d), "native", str(cycles)], capture_output=True,
                             text=True, check=True)
    return float(res.stdout.split()[2])
