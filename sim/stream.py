"""A native Verilator stream driver for any top with flat ports and an ``out_valid``.

Given an elaborated block, the native driver ``stream_main.cpp`` of
:mod:`pimforge.sim.drivers` reads a binary file of per-cycle input records,
applies record ``c`` to the input ports in cycle ``c`` (one record per cycle,
then ``drain`` idle cycles with every input at 0), and whenever ``out_valid``
is high writes ``(cycle, outputs)`` to a binary output file. Python only packs
the stimulus and unpacks the results; the clock loop never leaves C++.

Timing: in cycle ``c`` the inputs are applied with the clock low, the outputs
are sampled (they show the state after ``c`` rising edges), then the clock
rises. An input of cycle ``c`` to a block of latency ``L`` (registered outputs
``L`` stages after the inputs) is therefore seen at output cycle ``c + L``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pimforge.gen.elaborate import Elaborated
from pimforge.gen.errors import SimulationError

from .build import build_verilated
from .drivers import params_header, sources
from .drivers.io import read_fields, write_fields
from .drivers.pins import driver_top

__all__ = ["StreamDriver", "StreamResult"]

_CLOCK, _RESET = "clk", "rst"


def _dtype(ports: list[dict]) -> np.dtype:
    fields = []
    for p in ports:
        if p["width"] > 64:
            raise SimulationError(f"port {p['name']} is {p['width']} bits wide; the stream "
                                  "driver handles ports of up to 64 bits")
        fields.append((p["name"], "<u4" if p["width"] <= 32 else "<u8"))
    return np.dtype(fields)


@dataclass
class StreamResult:
    """Outputs of one run: a structured array (``cycle`` plus every output port)."""

    outputs: np.ndarray
    cycles: int
    seconds: float
    wall_s: float

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.seconds if self.seconds > 0 else float("inf")


class StreamDriver:
    """A compiled stream driver for one elaborated block.

    Parameters
    ----------
    el : Elaborated
        The block (its manifest lists the ports).
    valid : str
        Output port that marks a cycle whose outputs are recorded.
    name : str, optional
        Name of the cached build folder.
    """

    def __init__(self, el: Elaborated, *, valid: str = "out_valid", name: str | None = None):
        ports = el.manifest["ports"]
        self.inputs = [p for p in ports if p["dir"] == "input"
                       and p["name"] not in (_CLOCK, _RESET)]
        self.outputs = [p for p in ports if p["dir"] == "output"]
        names = {p["name"] for p in ports}
        for need in (_CLOCK, _RESET, valid):
            if need not in names:
                raise SimulationError(f"{el.top} has no port {need!r}; the stream driver needs "
                                      f"{_CLOCK}, {_RESET} and {valid}")
        if not self.inputs:
            raise SimulationError(f"{el.top} has no input besides {_CLOCK} and {_RESET}; the "
                                  "stream driver needs one")
        self.in_dtype = _dtype(self.inputs)
        self.out_dtype = np.dtype([("cycle", "<u8")] + [(p["name"], d) for p, (_, d) in zip(
            self.outputs, _dtype(self.outputs).descr)])
        # Records hold each port as one or two 32-bit words (the dtype is packed).
        in_words = [self.in_dtype[p["name"]].itemsize // 4 for p in self.inputs]
        out_words = [self.out_dtype[p["name"]].itemsize // 4 for p in self.outputs]
        top = driver_top(el.verilog, el.top, ports,
                         {"ins": [p["name"] for p in self.inputs],
                          "outs": [p["name"] for p in self.outputs]},
                         name=f"{el.top}_stream")
        hdr = params_header(top.name, NIN=len(in_words), IN_WORDS=in_words,
                            IN_LANE=top.words["ins"], NOUT=len(out_words), OUT_WORDS=out_words,
                            OUT_LANE=top.words["outs"],
                            VALID=[p["name"] for p in self.outputs].index(valid))
        t0 = time.monotonic()
        self.exe = build_verilated(top.verilog, top.name, sources("stream_main.cpp", hdr),
                                   name=name or f"{el.top}-stream")
        self.build_s = time.monotonic() - t0

    def records(self, n: int) -> np.ndarray:
        """A zeroed input array of *n* cycles (fill its fields, one per input port)."""
        return np.zeros(n, dtype=self.in_dtype)

    def run(self, records: np.ndarray, *, drain: int, reset_cycles: int = 2) -> StreamResult:
        """Drive *records* (one per cycle), then *drain* idle cycles."""
        if records.dtype != self.in_dtype:
            raise SimulationError(f"records must have dtype {self.in_dtype}, not {records.dtype}")
        with tempfile.TemporaryDirectory(prefix="pimforge-stream-") as tmp:
            d = Path(tmp)
            records.tofile(d / "in.bin")
            write_fields(d / "run.txt", {"drain": drain, "reset_cycles": reset_cycles})
            t0 = time.monotonic()
            res = subprocess.run([str(self.exe), str(d)], capture_output=True, text=True,
                                 env=dict(os.environ))
            wall = time.monotonic() - t0
            if res.returncode != 0:
                raise SimulationError(f"{self.exe} failed ({res.returncode}):\n{res.stderr}")
            stats = read_fields(d / "stats.txt")
            out = np.fromfile(d / "out.bin", dtype=self.out_dtype)
        if len(out) != stats.int("outputs"):
            raise SimulationError(f"{self.exe} reported {stats.int('outputs')} outputs and "
                                  f"wrote {len(out)}")
        return StreamResult(out, stats.int("cycles"), stats.float("seconds"), wall)
