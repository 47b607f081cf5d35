"""A cycle-accurate cocotb environment for a vault controller.

One coroutine per clock drives requests (with pauses), back-pressures
responses, plays the DRAM array model (a dict, one-cycle synchronous read) and
feeds every issued command to the protocol checker of
:mod:`pimforge.verif.models.dram_timing`. A shadow memory updated in request
order gives the expected data of each read (same-block requests keep their
order in the controller).
"""

from __future__ import annotations

import collections
import random

from cocotb.triggers import ReadOnly, RisingEdge

from pimforge.gen.config import Config
from pimforge.gen.config.base import from_dict
from pimforge.rtl.mem.port import Cmd
from pimforge.rtl.mem.timing import resolve_timing

from ..models.dram_timing import TimingChecker
from .common import bench

__all__ = ["VaultEnv", "VaultPins", "bench_config"]


def bench_config() -> Config:
    return from_dict(Config, bench()["config"])


class BitFields:
    def __init__(self, spec):
        self.spec, off = [], 0
        for name, w in spec:
            self.spec.append((name, off, w))
            off += w

    def pack(self, d):
        v = 0
        for name, off, w in self.spec:
            v |= (d.get(name, 0) & ((1 << w) - 1)) << off
        return v

    def unpack(self, v):
        return {name: (v >> off) & ((1 << w) - 1) for name, off, w in self.spec}


class VaultPins:
    """One vault controller's DRAM array port and command-observation port.

    The array model is a dict of column words (one-cycle synchronous read;
    *fill(addr)* gives a word never written) and every issued command goes to
    *checker*. Signals are the members of the ``arr`` and ``cmd`` ports of
    *dut* (:class:`~pimforge.rtl.mem.port.DRAMArraySignature`,
    :class:`~pimforge.rtl.mem.port.CmdSignature`): ``arr__re``... of a lone
    controller (``vault=None``), ``arr__3__re``... for vault 3 of a cube.
    Call :meth:`drive` right after the rising edge and :meth:`sample` in
    ``ReadOnly`` of every cycle.
    """

    def __init__(self, dut, checker: TimingChecker, vault: int | None = None, fill=None):
        self.checker = checker
        self.fill = fill or (lambda addr: 0)
        self.array: dict[int, int] = {}
        at = "__" if vault is None else f"__{vault}__"
        self._s = {f"{port}_{n}": getattr(dut, f"{port}{at}{n}") for port, names in (
            ("arr", ("rdata", "addr", "re", "we", "wdata")),
            ("cmd", ("valid", "kind", "bank", "row", "col"))) for n in names}
        self._rdata = None

    def drive(self) -> None:
        """Present the word read in the previous cycle."""
        if self._rdata is not None:
            self._s["arr_rdata"].value = self._rdata
            self._rdata = None

    def sample(self, cycle: int) -> tuple | None:
        """Check this cycle's command and serve the array; the command
        ``(kind, bank, row, col)`` (bank -1 for REF) or None."""
        s = self._s
        cmd = None
        if int(s["cmd_valid"].value):
            kind = Cmd(int(s["cmd_kind"].value)).name
            bank = -1 if kind == "REF" else int(s["cmd_bank"].value)
            cmd = (kind, bank, int(s["cmd_row"].value), int(s["cmd_col"].value))
            self.checker.step(cycle, *cmd)
        a = int(s["arr_addr"].value)
        if int(s["arr_re"].value):
            w = self.array.get(a)
            self._rdata = self.fill(a) if w is None else w
        if int(s["arr_we"].value):
            self.array[a] = int(s["arr_wdata"].value)
        return cmd


class VaultEnv:
    def __init__(self, dut, rng: random.Random, tag_bits: int = 8):
        self.dut, self.rng = dut, rng
        cfg = bench_config()
        h = self.hmc = cfg.hmc
        self.t = resolve_timing(h.timing, h.tck_ns)
        self.banks, self.rows, self.cols = h.banks_per_vault, h.rows, h.columns
        bb, rb, cb = h.bank_bits, h.row_bits, h.col_bits
        self.bb, self.rb, self.cb = bb, rb, cb
        self.req_f = BitFields([("we", 1), ("cls", 1), ("bank", bb), ("row", rb), ("col", cb),
                              ("tag", tag_bits), ("data", 128)])
        self.resp_f = BitFields([("we", 1), ("tag", tag_bits), ("data", 128)])
        self.tag_bits = tag_bits
        self.checker = TimingChecker(self.t, self.banks)
        self.pins = VaultPins(dut, self.checker)
        self.array = self.pins.array
        self.shadow: dict[int, int] = {}
        self.pending: collections.deque = collections.deque()
        self.expect: dict[int, tuple] = {}
        self.responses: list[tuple] = []   # (cycle, tag, we, data)
        self.cmds: list[tuple] = []        # (cycle, cmd, bank, row, col)
        self.errors: list[str] = []
        self.cycle = 0
        self.p_req, self.p_resp = 1.0, 1.0
        self.full_cycles = 0
        self.ref_with_queue = 0
        self.next_tag = 0
        self.sent = 0

    def addr(self, bank, row, col):
        return (bank << (self.rb + self.cb)) | (row << self.cb) | col

    def request(self, we, bank, row, col, data=None, cls=0) -> int:
        """Queue a request for sending; returns its tag."""
        tag = self.next_tag
        self.next_tag = (self.next_tag + 1) % (1 << self.tag_bits)
        if tag in self.expect:
            raise RuntimeError("tag space exhausted: too many requests outstanding")
        if data is None:
            data = self.rng.getrandbits(128)
        a = self.addr(bank, row, col)
        if we:
            self.shadow[a] = data
            exp = None
        else:
            exp = self.shadow.get(a, 0)
        self.expect[tag] = (we, exp, a)
        self.pending.append({"we": we, "cls": cls, "bank": bank, "row": row, "col": col, "tag": tag,
                                 "data": data if we else 0})
        return tag

    @property
    def outstanding(self) -> int:
        return len(self.expect)

    async def run(self, cycles: int | None = None, until_idle: bool = False,
                  max_cycles: int = 200_000) -> None:
        d = self.dut
        n = 0
        while True:
            await RisingEdge(d.clk)
            self.pins.drive()
            send = bool(self.pending) and self.rng.random() < self.p_req
            d.bus__req__valid.value = int(send)
            d.bus__req__payload.value = self.req_f.pack(self.pending[0]) if send else 0
            d.bus__resp__ready.value = int(self.rng.random() < self.p_resp)
            await ReadOnly()
            c = self.cycle
            cmd = self.pins.sample(c)
            if cmd is not None:
                self.cmds.append((c, *cmd))
                if cmd[0] == "REF" and int(d.occupancy.value):
                    self.ref_with_queue += 1
            if send:
                if int(d.bus__req__ready.value):
                    self.pending.popleft()
                    self.sent += 1
                else:
                    self.full_cycles += 1
            if int(d.bus__resp__valid.value) and int(d.bus__resp__ready.value):
                r = self.resp_f.unpack(int(d.bus__resp__payload.value))
                self.responses.append((c, r["tag"], r["we"], r["data"]))
                if r["tag"] not in self.expect:
                    self.errors.append(f"cycle {c}: unexpected or duplicate tag {r['tag']}")
                else:
                    we, exp, a = self.expect.pop(r["tag"])
                    if we != r["we"]:
                        self.errors.append(f"cycle {c}: tag {r['tag']} came back with we="
                                           f"{r['we']}, sent we={we}")
                    elif not we and exp != r["data"]:
                        self.errors.append(f"cycle {c}: read tag {r['tag']} addr {a:#x} "
                                           f"data {r['data']:#x}, expected {exp:#x}")
            self.cycle += 1
            n += 1
            if cycles is not None and n >= cycles:
                return
            if until_idle and not self.pending and not self.expect:
                return
            if n >= max_cycles:
                raise AssertionError(f"no progress: {self.outstanding} requests outstanding "
                                     f"after {n} cycles")

    def check(self) -> None:
        msgs = [str(v) for v in self.checker.violations[:20]] + self.errors[:20]
        assert not msgs, "\n".join(msgs)
