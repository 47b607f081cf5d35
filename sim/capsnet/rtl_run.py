"""Run compiled PIM-CapsNet routing programs on the Verilated vault compute.

One Verilog model of :class:`~pimforge.rtl.capsnet.vault.VaultCompute` is
built (cached) with the native driver ``vault_main.cpp``; the driver
instantiates it once per vault and clocks all of them in one C++ loop, serving
each vault's operand memory, delivering crossbar sends (each vault port moves
``capsnet.intervault_bw_gbs`` worth of bytes per cycle; a barrier is released
no earlier than the busiest port allows) and releasing barriers. Python only
writes the memories and programs and reads the results back.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...gen.errors import SimulationError
from ...rtl.capsnet.isa import INSTR_BITS, encode
from .compiler import Compiled

__all__ = ["RTLRun", "build_vault_driver", "run_on_rtl", "native_loop"]

IWORDS = -(-INSTR_BITS // 32)


def build_vault_driver(cfg) -> Path:
    """The cached native driver executable for *cfg*'s vault compute."""
    from ...gen.elaborate import elaborate
    from ..build import build_verilated

    el = elaborate("capsnet_vault", cfg)
    cpp = (Path(__file__).with_name("vault_main.cpp").read_text()
           .replace("@TOP@", "capsnet_vault").replace("@IWORDS@", str(IWORDS)))
    return build_verilated(el.verilog, "capsnet_vault", {"vault_main.cpp": cpp},
                           name="capsnet_vault-run")


@dataclass
class RTLRun:
    memories: list[np.ndarray]
    cycles: int
    seconds: float
    phase_cycles: list[int]
    reads: list[int]
    writes: list[int]
    busy: list[int]
    xbar_wait: int
    sends: int
    wall_s: float


def _prog_words(prog) -> np.ndarray:
    out = np.zeros((len(prog), IWORDS), dtype=np.uint32)
    for k, ins in enumerate(prog):
        w = encode(ins)
        for j in range(IWORDS):
            out[k, j] = (w >> (32 * j)) & 0xFFFFFFFF
    return out


def _write_inputs(d: Path, comp: Compiled, mems, cfg, max_cycles: int) -> None:
    bw = cfg.capsnet.intervault_bw_gbs * 1e9 / (cfg.freq_mhz * 1e6)   # bytes per cycle
    (d / "meta.txt").write_text(f"{comp.vaults} {max_cycles} {bw!r} "
                                f"{cfg.capsnet.packet_overhead_bytes}\n")
    for v in range(comp.vaults):
        np.asarray(mems[v], dtype=np.uint32).tofile(d / f"mem{v}.bin")
        _prog_words(comp.programs[v]).tofile(d / f"prog{v}.bin")


def run_on_rtl(comp: Compiled, mems: list[np.ndarray], cfg, *, exe: Path | None = None,
               max_cycles: int = 10**11) -> RTLRun:
    """Run *comp*'s programs on the RTL from memories *mems* (not modified)."""
    exe = exe or build_vault_driver(cfg)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="capsnet-run-") as td:
        d = Path(td)
        _write_inputs(d, comp, mems, cfg, max_cycles)
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
    return RTLRun(out, int(kv["cycles"]), kv["seconds"], phases, [x[0] for x in vaults],
                  [x[1] for x in vaults], [x[2] for x in vaults], int(kv["xbar_wait"]),
                  int(kv["sends"]), time.monotonic() - t0)


def native_loop(comp: Compiled, mems, cfg, cycles: int, *, exe: Path | None = None
                ) -> float:
    """Seconds a pure native clock loop of the same models takes for *cycles* cycles."""
    exe = exe or build_vault_driver(cfg)
    with tempfile.TemporaryDirectory(prefix="capsnet-native-") as td:
        d = Path(td)
        _write_inputs(d, comp, mems, cfg, cycles)
        res = subprocess.run([str(exe), str(d), "native", str(cycles)], capture_output=True,
                             text=True, check=True)
    return float(res.stdout.split()[2])
