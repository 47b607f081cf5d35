"""Run SIMB programs on the Verilated iPIM cube with the native driver ``ipim_main.cpp``.

One Verilog model of :class:`~pimforge.rtl.ipim.cube.IPIMCube` is built (cached)
with the driver, which loads each vault's program through its instruction-memory
backdoor, serves every PE's DRAM array from a sparse model, clocks the cube until
every vault with a program has halted and writes back the counters and the final
bank contents. Python only writes the programs and the banks and reads the
results: it is never woken per cycle.

The driver can also clock the same model from the same start for the same number of
cycles with nothing but the clock (``bare``): the ceiling of a native loop on this
Verilog, against which the driver's speed is reported.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pimforge.gen.args import WavesWindow
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import CapacityError, SimulationError
from pimforge.rtl.ipim.core import COUNTER_NAMES
from pimforge.rtl.ipim.isa import Instr, encode
from pimforge.rtl.ipim.nic import VaultNIC
from pimforge.rtl.ipim.pe import SIMBPE

from ..build import build_verilated
from ..drivers import params_header, sources
from ..drivers.io import read_fields, write_fields, write_table
from ..drivers.pins import driver_top
from ..drivers.waves import DriverWaves

__all__ = ["CubeRun", "build_cube_driver", "run_cube", "pins"]

_NIC_COUNTERS = tuple(VaultNIC.PerfSignature().members)
_PE_COUNTERS = tuple(SIMBPE.PerfSignature().members)


def pins(vaults: int, pes: int) -> dict[str, object]:
    """Driver pin -> port(s) of the cube: the only place the driver names its ports."""
    V, P = range(vaults), range(pes)
    out: dict[str, object] = {
        "halted": "halted", "error": "error", "barriers": "barriers"}
    for n in ("imem_we", "imem_addr", "imem_data", "start"):
        out[n] = [f"{n}__{v}" for v in V]
    for n in ("re", "we", "addr", "wdata", "rdata"):
        out[f"arr_{n}"] = [f"pe_arr__{v}__{p}__{n}" for v in V for p in P]
    for n in COUNTER_NAMES:
        out[f"core_{n}"] = [f"perf__{v}__{n}" for v in V]
    for n in _NIC_COUNTERS:
        out[f"nic_{n}"] = [f"nic_perf__{v}__{n}" for v in V]
    for n in _PE_COUNTERS:
        out[f"pe_{n}"] = [f"pe_perf__{v}__{p}__{n}" for v in V for p in P]
    return out


def build_cube_driver(cfg, *, trace: bool = False, opt: str = "-O2") -> Path:
    """The (cached) native driver of *cfg*'s iPIM cube (with *trace*: a separate build
    that can write waves). *opt* is the cycle loop's optimization
    (:func:`~pimforge.sim.build.build_verilated`): ``"-O0"`` takes 15 % less CPU to build
    (ipim_small: 288 against 338 s) and simulates several times slower, for runs of a
    few thousand cycles."""
    c = cfg.ipim
    el = elaborate("ipim_cube", cfg)
    top = driver_top(el.verilog, el.top, el.manifest["ports"], pins(c.vaults, c.pes),
                     name="ipim_cube_driver")
    words = {f"W_{k}": w for k, w in top.words.items() if k.startswith(("core_", "nic_",
                                                                        "pe_"))}
    hdr = params_header(top.name, V=c.vaults, P=c.pes, BANK_VECTORS=c.bank_vectors, **words)
    for macro, names in (("CORE_COUNTERS", COUNTER_NAMES), ("NIC_COUNTERS", _NIC_COUNTERS),
                         ("PE_COUNTERS", _PE_COUNTERS)):
        hdr += f"#define {macro}(X) " + " ".join(f"X({n})" for n in names) + "\n"
    # -fno-inline keeps the vault, NIC and router one C++ class each; hierarchical
    # Verilates and compiles each of them (and the PE) once instead of once per
    # instance: ipim_small's C++ goes from 49 MB to 8.6 MB, and it runs faster.
    return build_verilated(top.verilog, top.name, sources("ipim_main.cpp", hdr),
                           name=f"ipim_cube-{cfg.name}", extra_args=("-fno-inline",),
                           trace=trace, hierarchical=True, opt=opt)


@dataclass
class CubeRun:
    """What one run of the cube measured.

    Attributes
    ----------
    banks : dict
        ``(vault, pe) -> {vector address: 128-bit int}``: every nonzero bank vector.
    cycles : int
        Cycles from the start pulse until every vault with a program had halted.
    core, nic : dict
        Counter name -> per-vault values (:data:`~pimforge.rtl.ipim.core.COUNTER_NAMES`,
        :class:`~pimforge.rtl.ipim.nic.VaultNIC.PerfSignature`).
    pe : dict
        Counter name -> per-PE values, vault-major.
    barriers : int
    wall_s, cycles_per_s : float
        Wall time of the driver's cycle loop and its speed.
    bare_cycles_per_s : float or None
        Speed of a bare native loop on the same model (when asked for).
    """

    banks: dict
    cycles: int
    core: dict
    nic: dict
    pe: dict
    barriers: int
    wall_s: float
    cycles_per_s: float
    bare_cycles_per_s: float | None = None

    @property
    def issued(self) -> int:
        return sum(self.core["issued"])

    @property
    def ipc(self) -> float:
        """Instructions issued per cycle, per vault, averaged over the vaults that ran."""
        ran = [(i, c) for i, c in zip(self.core["issued"], self.core["cycles"], strict=True)
               if c]
        return sum(i / c for i, c in ran) / len(ran) if ran else 0.0


def _lanes(x: int) -> list[int]:
    return [(x >> (32 * k)) & 0xFFFFFFFF for k in range(4)]


def run_cube(cfg, programs: Mapping[int, Sequence[Instr]],
             banks: Mapping[tuple[int, int], Mapping[int, int]] | None = None, *,
             max_cycles: int = 1_000_000, bare: bool = False,
             exe: Path | None = None, waves: WavesWindow | None = None) -> CubeRun:
    """Run ``programs[v]`` on vault ``v`` of *cfg*'s cube from *banks*
    (``(vault, pe) -> {address: 128-bit vector}``) until every vault with a program
    has halted; the final banks and the counters. *waves*: write the waves of these
    cycles from the start pulse on (*exe* must then be a trace build).

    Raises
    ------
    CapacityError
        A program longer than the instruction memory, or a vault or PE the cube lacks.
    SimulationError
        The cube flagged an error (mismatched sync phases, a ``req`` to a vault or PE
        that does not exist, a router overflow) or did not halt in *max_cycles*.
    """
    c = cfg.ipim
    for v, prog in programs.items():
        if not 0 <= v < c.vaults:
            raise CapacityError(f"vault {v} is not in the cube (ipim.vaults = {c.vaults})")
        if len(prog) > c.imem_instructions:
            raise CapacityError(f"vault {v}'s program has {len(prog)} instructions but the "
                                f"program memory holds {c.imem_instructions}; raise "
                                "ipim.imem_instructions or shorten it")
    for (v, p), b in (banks or {}).items():
        if not (0 <= v < c.vaults and 0 <= p < c.pes):
            raise CapacityError(f"bank of vault {v}, PE {p} is not in the cube "
                                f"({c.vaults} vaults x {c.pes} PEs)")
        bad = [a for a in b if not 0 <= a < c.bank_vectors]
        if bad:
            raise CapacityError(f"bank address {bad[0]} of vault {v}, PE {p} is beyond the "
                                f"bank's {c.bank_vectors} vectors")
    exe = exe or build_cube_driver(cfg, trace=waves is not None)
    with tempfile.TemporaryDirectory() as td, DriverWaves(waves, Path(td)) as wv:
        d = Path(td)
        write_fields(d / "run.txt", {"max_cycles": max_cycles, "bare": int(bare),
                                     **wv.fields})
        write_table(d / "prog.tbl", ("vault", "addr", "w0", "w1", "w2", "w3"),
                    ((v, a, *_lanes(encode(ins))) for v in sorted(programs)
                     for a, ins in enumerate(programs[v])))
        write_table(d / "banks.tbl", ("vault", "pe", "addr", "w0", "w1", "w2", "w3"),
                    ((v, p, a, *_lanes(x)) for (v, p), b in sorted((banks or {}).items())
                     for a, x in sorted(b.items()) if x))
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True, check=False)
        if not (d / "stats.txt").exists():
            raise SimulationError(f"ipim driver failed (exit {res.returncode}): "
                                  f"{res.stderr[-2000:]}")
        f = read_fields(d / "stats.txt")
        wv.publish()        # a failed run's too: its waves show where
        out: dict = {}
        lines = (d / "banks_out.tbl").read_text().splitlines()[1:]
        for line in lines:
            v, p, a, *w = (int(x) for x in line.split())
            out.setdefault((v, p), {})[a] = sum(x << (32 * k) for k, x in enumerate(w))
    run = CubeRun(banks=out, cycles=f.int("cycles"),
                  core={n: f.ints(f"core_{n}") for n in COUNTER_NAMES},
                  nic={n: f.ints(f"nic_{n}") for n in _NIC_COUNTERS},
                  pe={n: f.ints(f"pe_{n}") for n in _PE_COUNTERS},
                  barriers=f.int("barriers"), wall_s=f.float("wall_s"),
                  cycles_per_s=f.float("cycles_per_s"),
                  bare_cycles_per_s=f.float("bare_cycles_per_s") if bare else None)
    if f.int("error"):
        raise SimulationError("the cube flagged a program error: vaults met at a sync with "
                              "different phases, or a req named a cube, vault or PE that "
                              "does not exist (or a router overflowed)")
    if res.returncode == 3 or not f.int("done"):
        raise SimulationError(f"the cube did not halt in {max_cycles} cycles (halted vaults "
                              f"{f.int('halted'):#x}); raise max_cycles or check the program")
    if res.returncode != 0:
        raise SimulationError(f"ipim driver failed (exit {res.returncode}): "
                              f"{res.stderr[-2000:]}")
    return run
