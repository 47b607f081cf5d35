"""Run a Table II benchmark end to end: compile it, place the image in the banks, run the
programs on the Verilated cube (or the instruction-set simulator), read the result back
and check it against the numpy reference.

Measured per run: ``cycles`` (RTL), ``ipc`` (instructions issued per cycle per vault,
Fig. 13), the control core's stall breakdown and issue classes, the PE counters as
unit utilizations (busy fraction of the cycles: SIMD unit, integer ALU, DataRF,
AddrRF, bank reads/writes), the dynamic instruction breakdown (Fig. 11, from the
instruction-set simulator, which executes the same programs) and an energy estimate
from Table III's per-access energies (``ipim.e_*``):

- DRAM: ``rdwr * e_rdwr_nj + act * e_act_pre_nj`` (every PE's bank counters);
- SIMD unit, integer ALU, DataRF and AddrRF: their access counters times
  ``e_simd_pj``, ``e_alu_pj``, ``e_drf_pj``, ``e_arf_pj``;
- TSV (``e_tsv_pj_bit``): near-bank (``ipim.pe_placement``), 128 bits per VSM access
  and per ``req`` line; on the base die (Fig. 8), 128 bits per bank RD/WR (every bank
  access crosses the TSVs, a remote read's too, and the PEs reach the VSM on the base
  die without them). PE bus: 128 bits per PGSM access (``e_pebus_pj_bit``). The control
  core and the NoC routers are not counted (Table III gives no figure for them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.args import WavesWindow
from pimforge.rtl.ipim.isa import LANES
from pimforge.verif.models.ipim.image import BENCHES, reference
from pimforge.verif.models.ipim.iss import SIMBMachine

from .backend import OPT_LEVELS, Options
from .image_benches import build
from .lang import CompileError
from .lower import Program, place
from .passes import compile_pipeline

__all__ = ["ImageRun", "compile_bench", "cube_driver", "run_bench", "run_program", "energy_nj",
           "tsv_vectors"]


@dataclass
class ImageRun:
    """One benchmark run (or one run of a pipeline of the user's: ``atol`` set, and
    ``reference`` ``None`` where its file defines none)."""

    bench: str
    shape: tuple[int, ...]
    opt: str
    output: np.ndarray
    reference: np.ndarray | None
    program: Program
    engine: str
    counts: dict[str, int]
    cycles: int | None = None
    ipc: float | None = None
    stalls: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)
    pe_counters: dict = field(default_factory=dict)
    energy: dict = field(default_factory=dict)
    wall_s: float = 0.0
    cycles_per_s: float | None = None
    #: the tolerance against the reference (``None``: the benchmark's ``atol``)
    atol: float | None = None
    #: the instruction-set simulator's output of an RTL run, read back as the RTL's is
    iss_output: np.ndarray | None = None

    @property
    def tolerance(self) -> float:
        return BENCHES[self.bench].atol if self.atol is None else self.atol

    @property
    def matches_iss(self) -> bool | None:
        """The RTL's output equals the instruction-set simulator's bit for bit (``None``:
        an ISS run, nothing to compare)."""
        if self.iss_output is None:
            return None
        a, b = np.ascontiguousarray(self.output), np.ascontiguousarray(self.iss_output)
        return (a.shape == b.shape and a.dtype == b.dtype
                and np.array_equal(a.view(np.uint8), b.view(np.uint8)))

    @property
    def max_abs_error(self) -> float | None:
        """The largest difference from the reference (``None`` without one); a NaN
        (interpolate's 0/0 where no opaque pixel reaches) matches a NaN and differs
        infinitely from a number."""
        if self.reference is None:
            return None
        if self.output.shape != self.reference.shape:
            return float("inf")
        out = self.output.astype(np.float64)
        ref = self.reference.astype(np.float64)
        nan_o, nan_r = np.isnan(out), np.isnan(ref)
        if (nan_o != nan_r).any():
            return float("inf")
        d = np.abs(np.where(nan_r, 0.0, out) - np.where(nan_r, 0.0, ref))
        return float(d.max()) if d.size else 0.0

    @property
    def matches_reference(self) -> bool | None:
        err = self.max_abs_error
        return None if err is None else err <= self.tolerance

    def to_json(self) -> dict:
        return {
            "bench": self.bench, "input_shape": list(self.shape), "opt": self.opt,
            "engine": self.engine, "output_shape": list(self.output.shape),
            "matches_reference": self.matches_reference,
            "max_abs_error": self.max_abs_error, "atol": self.tolerance,
            "matches_iss": self.matches_iss,
            "cycles": self.cycles, "ipc": self.ipc, "stalls": self.stalls,
            "unit_utilization": self.units, "pe_counters": self.pe_counters,
            "instruction_breakdown": self.counts,
            "static_instructions": {str(v): len(p) for v, p in self.program.programs.items()},
            "kernels": self.program.kernels, "energy_nj": self.energy,
            "wall_s": self.wall_s, "rtl_cycles_per_s": self.cycles_per_s,
            "options": {"regalloc": self.program.opts.regalloc,
                        "reorder": self.program.opts.reorder,
                        "mem_order": self.program.opts.mem_order},
        }


def compile_bench(name: str, H: int, W: int, cfg, opts: Options | str = "opt", *,
                  vaults: list[int] | None = None, observe: Callable | None = None,
                  **params) -> Program:
    """Compile benchmark *name* for an ``(H, W)`` input on *cfg* (*vaults*: only those
    vaults' programs; *observe*: see :func:`~.passes.compile_pipeline`)."""
    o = OPT_LEVELS[opts] if isinstance(opts, str) else opts
    ip = cfg.ipim
    out, layout, crop = build(name, H, W, ip.cubes * ip.vaults * ip.pes, **params)
    return compile_pipeline(out, layout, cfg, o, out_shape=crop, vaults=vaults, observe=observe)


def tsv_vectors(ip, pe: dict, core: dict) -> int:
    """128-bit vectors the vaults' TSVs moved (module docstring), from the summed PE and
    core counters."""
    if ip.base_die:
        return pe["rdwr"]
    return core.get("issued_vsm", 0) + core.get("issued_req", 0)


def energy_nj(ip, pe: dict, core: dict) -> dict[str, float]:
    """Table III energy of the counted events (module docstring), nJ."""
    s = {k: sum(v) for k, v in pe.items()}
    c = {k: sum(v) for k, v in core.items()}
    out = {
        "dram": s["rdwr"] * ip.e_rdwr_nj + s["act"] * ip.e_act_pre_nj,
        "simd": s["simd"] * ip.e_simd_pj / 1e3,
        "alu": s["alu"] * ip.e_alu_pj / 1e3,
        "drf": s["drf"] * ip.e_drf_pj / 1e3,
        "arf": s["arf"] * ip.e_arf_pj / 1e3,
        "tsv": tsv_vectors(ip, s, c) * 128 * ip.e_tsv_pj_bit / 1e3,
        "pe_bus": c.get("issued_pgsm", 0) * 128 * ip.e_pebus_pj_bit / 1e3,
    }
    out["total"] = sum(out.values())
    return out


_EXES: dict = {}


def cube_driver(cfg):
    """The Verilated cube of *cfg* with its driver, elaborated and built (or found in the
    build cache) once per process."""
    from .rtl_run import build_cube_driver  # the RTL path needs the Verilated cube

    if cfg not in _EXES:
        _EXES[cfg] = build_cube_driver(cfg)
    return _EXES[cfg]


def _crop(out: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return out[tuple(slice(0, n) for n in shape)]


def _iss(prog: Program, banks: dict, cfg) -> tuple[SIMBMachine, dict]:
    m = SIMBMachine(cfg)
    for v, p in prog.programs.items():
        m.load(p, vaults=[v])
    for (v, pe), blk in banks.items():
        for a, vec in blk.items():
            m.vaults[v].banks[pe][a] = vec.copy()
    m.run()
    return m, dict(m.counts)


def run_bench(name: str, img: np.ndarray, cfg, *, opt: Options | str = "opt",
              engine: str = "rtl", max_cycles: int = 50_000_000, exe=None,
              cube_cfg=None, waves: WavesWindow | None = None, **params) -> ImageRun:
    """Compile and run benchmark *name* on *img*; see the module docstring and
    :func:`run_program` (``engine``, ``cube_cfg``, ``waves``)."""
    _check_cube_cfg(cfg, cube_cfg)
    ref = reference(name, img, **params)
    H, W = img.shape[:2]
    prog = compile_bench(name, H, W, cfg, opt, **params)
    return run_program(name, prog, img, ref, cfg, opt=opt, engine=engine,
                       max_cycles=max_cycles, exe=exe, cube_cfg=cube_cfg, waves=waves)


def _check_cube_cfg(cfg, cube_cfg) -> None:
    ip = cfg.ipim
    if cube_cfg is not None:
        from dataclasses import replace

        if replace(cube_cfg.ipim, vaults=ip.vaults) != ip or cube_cfg.ipim.vaults < ip.vaults:
            raise CompileError("cube_cfg must be the config of the run with at least as "
                               f"many vaults ({ip.vaults}) and nothing else changed")


def rtl_words(banks: dict) -> dict:
    """*banks* (per ``(vault, PE)``: address -> the lanes' 32-bit values) as the cube
    driver takes them: address -> one word of :data:`LANES` lanes."""
    return {k: {a: sum(int(x) << (32 * i) for i, x in enumerate(vec)) for a, vec in blk.items()}
            for k, blk in banks.items()}


def rtl_fetch(banks: dict) -> Callable[[int, int, int, int], np.ndarray]:
    """A ``fetch(vault, pe, base, n)`` of the cube driver's final *banks*: *n* words from
    *base*, one row of lane values each (unwritten words read 0)."""
    def fetch(v, pe, base, n):
        b = banks.get((v, pe), {})
        words = [b.get(base + i, 0) for i in range(n)]
        return np.array([[(w >> (32 * k)) & 0xFFFFFFFF for k in range(LANES)] for w in words],
                        dtype=np.uint32).reshape(-1, LANES)
    return fetch


def run_program(name: str, prog: Program, img: np.ndarray, ref: np.ndarray | None, cfg, *,
                opt: Options | str = "opt", engine: str = "rtl", max_cycles: int = 50_000_000,
                exe=None, cube_cfg=None, atol: float | None = None,
                waves: WavesWindow | None = None) -> ImageRun:
    """Run *prog* (compiled for *cfg*) on *img* and compare its output with *ref*.

    ``engine`` is ``"rtl"`` (the Verilated cube, with the instruction-set simulator
    for the dynamic instruction counts and an output to compare bit for bit) or
    ``"iss"`` (the simulator alone: no cycles). ``cube_cfg`` runs the program compiled
    for *cfg* on the cube of another config that differs only in having more vaults:
    the extra vaults get no program and stay halted (a halted vault counts as arrived
    at every ``sync``), so a machine of one vault, which the cube RTL does not build
    alone, runs as vault 0 of two. ``atol`` is the tolerance against *ref* (``None``:
    benchmark *name*'s). ``waves``: write the cube's waves of these cycles (a separate
    trace build).
    """
    _check_cube_cfg(cfg, cube_cfg)
    ip = cfg.ipim
    opt_name = opt if isinstance(opt, str) else "custom"
    banks: dict = {}
    for arr in prog.inputs.values():
        for key, blk in place(arr, img, ip).items():
            banks.setdefault(key, {}).update({arr.base + i: vec for i, vec in enumerate(blk)})
    m, counts = _iss(prog, banks, cfg)

    def iss_fetch(v, pe, base, n):
        b = m.vaults[v].banks[pe]
        z = np.zeros(LANES, np.uint32)
        return np.array([b.get(base + i, z) for i in range(n)], dtype=np.uint32)
    iss_out = _crop(prog.read(iss_fetch, ip), prog.out_shape)
    if engine == "iss":
        return ImageRun(name, img.shape, opt_name, iss_out, ref, prog, "iss", counts, atol=atol)
    if ip.cubes != 1:
        raise CompileError("the RTL runs one cube: set ipim.cubes = 1 (or use --engine iss)")
    run_cfg = cube_cfg if cube_cfg is not None else cfg
    if waves is not None and exe is None:
        from .rtl_run import build_cube_driver

        exe = build_cube_driver(run_cfg, trace=True)
    exe = exe or cube_driver(run_cfg)
    from .rtl_run import run_cube

    t = time.perf_counter()
    run = run_cube(run_cfg, prog.programs, rtl_words(banks), max_cycles=max_cycles, exe=exe,
                   waves=waves)
    wall = time.perf_counter() - t
    fetch = rtl_fetch(run.banks)
    out = _crop(prog.read(fetch, ip), prog.out_shape)
    core_tot = {k: sum(v) for k, v in run.core.items()}
    vault_cycles = sum(run.core["cycles"]) or 1
    units = {}
    for k in ("simd", "alu", "drf", "arf", "rdwr"):
        units[k] = sum(run.pe[k]) / (vault_cycles * ip.pes)
    stalls = {k: core_tot[k] for k in core_tot if k.startswith("stall_")}
    stalls.update({k: core_tot[k] for k in core_tot if k.startswith("issued_")})
    return ImageRun(name, img.shape, opt_name, out, ref, prog, "rtl", counts, atol=atol,
                    iss_output=iss_out, cycles=run.cycles, ipc=run.ipc, stalls=stalls, units=units,
                    pe_counters={k: sum(v) for k, v in run.pe.items()},
                    energy=energy_nj(ip, run.pe, run.core), wall_s=wall,
                    cycles_per_s=run.cycles_per_s)

