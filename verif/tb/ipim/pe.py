"""Tests of the near-bank PE (:class:`~pimforge.rtl.ipim.pe.SIMBPE`): random SIMB programs
issued as the control core would, against a per-instruction reference.

The environment (:class:`PEEnv`) is simulator-neutral: once per clock it takes
the PE's outputs and returns its inputs, so the same code drives the
generated Verilog under cocotb (this module's tests) and the Amaranth
simulator (``tests/test_ipim_pe.py``). It plays

* the control core: issues a program in order, never an instruction that
  conflicts (:func:`~pimforge.rtl.ipim.isa.accesses`) with an unfinished one,
  with random issue gaps, and checks that every tag finishes exactly once;
* the bank's DRAM array (one-cycle synchronous read) with every command fed
  to the protocol checker of :mod:`pimforge.verif.models.dram_timing`;
* the PGSM and VSM ports (random back-pressure, the ports' read latency);
* optionally the vault's remote request server on the ``remote`` port
  (:class:`RemoteReader`: reads of bank vectors at random times, random
  response back-pressure); without it the port is held idle.

Expected values come from the SIMB instruction-set simulator
(``verif/models/ipim/iss.py``, :func:`iss_run`), the golden model, and from
:class:`StandInPEModel`, a small per-instruction reference built on the FP32
golden models (``verif/models/fp32.py``, ``fp32_shift.py``) that wraps
addresses as the RTL does; the two must agree. The final
DataRF/AddrRF are compared by a drain program (``st_rf`` of every DataRF
entry, ``mov_drf`` + ``st_rf`` of the AddrRF) run on both, then the whole bank,
PGSM and VSM.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from pimforge.gen.config import Config
from pimforge.gen.config.base import from_dict
from pimforge.rtl.ipim.isa import (
    DRAM_BITS,
    LANES,
    AluOp,
    DType,
    Instr,
    Mode,
    Opcode,
    accesses,
    conflicts,
    encode,
)
from pimforge.rtl.mem.port import Cmd
from pimforge.rtl.mem.timing import resolve_timing

from ...models import fp32, fp32_shift
from ...models.dram_timing import TimingChecker
from ...models.ipim.iss import SIMBMachine
from ..common import bench, start
from ..common import rng as bench_rng

__all__ = ["PEGeometry", "StandInPEModel", "PEEnv", "RemoteReader", "random_program",
           "drain_program", "INT_CORNERS"]

M32 = 0xFFFF_FFFF
SIGN = 0x8000_0000
#: Lane values that hit the INT corners: shift amounts around +-32, crop widths 0/32,
#: wraparound.
INT_CORNERS = [0, 1, 2, 31, 32, 33, 64, M32, (-31) & M32, (-32) & M32, (-33) & M32,
               0x7FFF_FFFF, SIGN, 0x8000_0001, 16, 3]


@dataclass(frozen=True)
class PEGeometry:
    """Storage sizes of the PE under test (from the ``ipim`` config section)."""

    drf: int
    arf: int
    pgsm: int
    vsm: int
    bank: int
    row: int

    @classmethod
    def of(cls, ipim) -> PEGeometry:
        return cls(ipim.drf_entries, ipim.arf_entries, ipim.pgsm_lines, ipim.vsm_lines,
                   ipim.bank_vectors, ipim.row_vectors)


def lanes_of(v: int) -> list[int]:
    return [(v >> (32 * i)) & M32 for i in range(LANES)]


def vec_of(lanes: list[int]) -> int:
    return sum((x & M32) << (32 * i) for i, x in enumerate(lanes))


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x & SIGN else x


def int_op(op: AluOp, a: int, b: int, c: int = 0) -> int:
    """INT32 semantics of :mod:`pimforge.rtl.ipim.isa`."""
    sb = _s32(b)
    if op is AluOp.ADD:
        return (a + b) & M32
    if op is AluOp.SUB:
        return (a - b) & M32
    if op is AluOp.MUL:
        return (a * b) & M32
    if op is AluOp.MAC:
        return (c + a * b) & M32
    if op is AluOp.SHIFT:
        if sb >= 0:
            return 0 if sb >= 32 else (a << sb) & M32
        return (_s32(a) >> min(-sb, 31)) & M32
    if op is AluOp.AND:
        return a & b
    if op is AluOp.OR:
        return a | b
    if op is AluOp.XOR:
        return a ^ b
    w = min(max(sb, 0), 32)
    if op is AluOp.CROP_LSB:
        return a & ((1 << w) - 1)
    if op is AluOp.CROP_MSB:
        return a & (((1 << w) - 1) << (32 - w))
    raise ValueError(op)


def fp_op(op: AluOp, a: int, b: int, c: int = 0) -> int:
    """FP32 semantics on the golden models (MAC: the product rounded, then the sum)."""
    if op is AluOp.ADD:
        return fp32.ref_add(a, b)
    if op is AluOp.SUB:
        return fp32.ref_add(a, b ^ SIGN)
    if op is AluOp.MUL:
        return fp32.ref_mul(a, b)
    if op is AluOp.MAC:
        return fp32.ref_add(c, fp32.ref_mul(a, b))
    if op is AluOp.SHIFT:
        # The clamp changes no result: 2**+-511 over- or underflows every finite non-zero.
        k = min(max(_s32(b), -512), 511)
        return int(fp32_shift.ldexp([a], k)[0])
    raise ValueError(op)


class StandInPEModel:
    """Per-instruction reference of one PE (stand-in for the SIMB ISS).

    Storage wraps as the RTL does: register numbers and addresses keep their
    low bits; A0..A3 are the ids and ignore writes. The bank, PGSM and VSM are
    dicts of 128-bit vectors (absent = *fill*).
    """

    def __init__(self, g: PEGeometry, ids: tuple[int, int, int, int], bank: dict[int, int],
                 pgsm: dict[int, int] | None = None, vsm: dict[int, int] | None = None):
        self.g = g
        self.drf = [0] * g.drf
        self.arf = [*ids, *([0] * (g.arf - 4))]
        self.bank, self.pgsm, self.vsm = dict(bank), dict(pgsm or {}), dict(vsm or {})

    def _a(self, i: int) -> int:
        return self.arf[i % self.g.arf]

    def _addr(self, a: int, ind: int, size: int) -> int:
        return (self._a(a) if ind else a) % size

    def step(self, ins: Instr) -> None:
        g, op = self.g, ins.opcode
        D = self.drf
        nd = g.drf
        if op is Opcode.COMP:
            a, b, d = lanes_of(D[ins.src1 % nd]), lanes_of(D[ins.src2 % nd]), \
                lanes_of(D[ins.dst % nd])
            f = fp_op if ins.dtype is DType.FP32 else int_op
            out = list(d)
            for i in range(LANES):
                if ins.vec_mask >> i & 1:
                    ai = a[ins.lane] if ins.mode is Mode.SV else a[i]
                    out[i] = f(ins.op, ai, b[i], d[i])
            D[ins.dst % nd] = vec_of(out)
        elif op is Opcode.CALC_ARF:
            r = int_op(ins.op, self._a(ins.src1), self._a(ins.src2))
            if ins.dst % g.arf >= 4:
                self.arf[ins.dst % g.arf] = r
        elif op in (Opcode.LD_RF, Opcode.ST_RF):
            addr = self._addr(ins.dram, ins.dram_ind, g.bank)
            if op is Opcode.LD_RF:
                D[ins.drf % nd] = self.bank.get(addr, 0)
            else:
                self.bank[addr] = D[ins.drf % nd]
        elif op in (Opcode.LD_PGSM, Opcode.ST_PGSM):
            addr = self._addr(ins.dram, ins.dram_ind, g.bank)
            p = self._addr(ins.pgsm, ins.pgsm_ind, g.pgsm)
            if op is Opcode.LD_PGSM:
                self.pgsm[p] = self.bank.get(addr, 0)
            else:
                self.bank[addr] = self.pgsm.get(p, 0)
        elif op in (Opcode.RD_PGSM, Opcode.WR_PGSM):
            p = self._addr(ins.pgsm, ins.pgsm_ind, g.pgsm)
            if op is Opcode.RD_PGSM:
                D[ins.drf % nd] = self.pgsm.get(p, 0)
            else:
                self.pgsm[p] = D[ins.drf % nd]
        elif op in (Opcode.RD_VSM, Opcode.WR_VSM):
            p = self._addr(ins.vsm, ins.vsm_ind, g.vsm)
            if op is Opcode.RD_VSM:
                D[ins.drf % nd] = self.vsm.get(p, 0)
            else:
                self.vsm[p] = D[ins.drf % nd]
        elif op is Opcode.MOV_DRF:
            v = lanes_of(D[ins.drf % nd])
            v[ins.lane] = self._a(ins.arf)
            D[ins.drf % nd] = vec_of(v)
        elif op is Opcode.MOV_ARF:
            if ins.arf % g.arf >= 4:
                self.arf[ins.arf % g.arf] = lanes_of(D[ins.drf % nd])[ins.lane]
        elif op is Opcode.RESET:
            D[ins.drf % nd] = 0
        else:
            raise ValueError(f"{op.name} is not a PE instruction")


def random_program(rng: random.Random, g: PEGeometry, n: int, *, span: int,
                   rows: int = 4) -> tuple[list[Instr], dict[int, int]]:
    """*n* random PE instructions over the bank's first *span* vectors, mostly within
    *rows* rows (row hits and misses), every opcode, dtype, mode and partial mask;
    and the bank vectors the program expects (``{0: pointers}``).

    Indirect addresses go through AddrRF pointer entries that a prologue loads
    (``ld_rf`` of bank vector 0, ``mov_arf`` of its lanes, plus peID by
    ``calc_arf``); the program never overwrites them."""
    mask = 1
    ptrs = list(range(4, min(g.arf, 12)))
    lim = min(g.pgsm, g.vsm, span)
    # The odd pointers get peID added (below): their lanes (1 and 3) are drawn in the
    # lower half, so they stay in range for any peID below lim / 2 (the ISS rejects an
    # address past a scratchpad's end, the RTL would wrap it).
    ptr_vec = vec_of([rng.randrange(lim) // (1 + i % 2) for i in range(LANES)])
    P = [Instr(Opcode.LD_RF, dram=0, drf=0, simb_mask=mask)]
    for i, r in enumerate(ptrs):
        P.append(Instr(Opcode.MOV_ARF, arf=r, drf=0, lane=i % LANES, simb_mask=mask))
        if i % 2:
            P.append(Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=r, src1=r, src2=0,
                           simb_mask=mask))
    free_arf = list(range(max(ptrs) + 1, g.arf))

    def dram():
        row = rng.randrange(rows)
        return (row * g.row + rng.randrange(g.row)) % span

    def ind(size):
        """(address field, ind bit): direct, or a pointer entry (in range by construction)."""
        if rng.random() < 0.25:
            return rng.choice(ptrs), 1
        return rng.randrange(size), 0

    def drf():
        return rng.randrange(g.drf)

    ops = [Opcode.COMP] * 6 + [Opcode.LD_RF] * 3 + [Opcode.ST_RF] * 2 + [
        Opcode.CALC_ARF, Opcode.LD_PGSM, Opcode.ST_PGSM, Opcode.RD_PGSM, Opcode.WR_PGSM,
        Opcode.RD_VSM, Opcode.WR_VSM, Opcode.MOV_DRF, Opcode.MOV_ARF, Opcode.RESET]
    for _ in range(n):
        op = rng.choice(ops)
        if op is Opcode.COMP:
            dt = rng.choice([DType.FP32, DType.INT32])
            alu = rng.choice(sorted((AluOp if dt is DType.INT32 else
                                     [AluOp.ADD, AluOp.SUB, AluOp.MUL, AluOp.MAC, AluOp.SHIFT]),
                                    key=lambda o: o.value))
            P.append(Instr(op, op=alu, dtype=dt, mode=rng.choice([Mode.VV, Mode.SV]),
                           lane=rng.randrange(4), dst=drf(), src1=drf(), src2=drf(),
                           vec_mask=rng.choice([0xF, 0xF, rng.randrange(16)]),
                           simb_mask=mask))
        elif op is Opcode.CALC_ARF:
            alu = rng.choice(sorted(set(AluOp) - {AluOp.MAC}, key=lambda o: o.value))
            P.append(Instr(op, op=alu, dst=rng.choice(free_arf), src1=rng.randrange(g.arf),
                           src2=rng.randrange(g.arf), simb_mask=mask))
        elif op in (Opcode.LD_RF, Opcode.ST_RF):
            a, i = (dram(), 0) if rng.random() < 0.8 else (rng.choice(ptrs), 1)
            P.append(Instr(op, dram=a, dram_ind=i, drf=drf(), simb_mask=mask))
        elif op in (Opcode.LD_PGSM, Opcode.ST_PGSM):
            a, i = (dram(), 0) if rng.random() < 0.8 else (rng.choice(ptrs), 1)
            p, pi = ind(g.pgsm)
            P.append(Instr(op, dram=a, dram_ind=i, pgsm=p, pgsm_ind=pi, simb_mask=mask))
        elif op in (Opcode.RD_PGSM, Opcode.WR_PGSM):
            p, pi = ind(g.pgsm)
            P.append(Instr(op, pgsm=p, pgsm_ind=pi, drf=drf(), simb_mask=mask))
        elif op in (Opcode.RD_VSM, Opcode.WR_VSM):
            p, pi = ind(g.vsm)
            P.append(Instr(op, vsm=p, vsm_ind=pi, drf=drf(), simb_mask=mask))
        elif op is Opcode.MOV_DRF:
            P.append(Instr(op, arf=rng.randrange(g.arf), drf=drf(), lane=rng.randrange(4),
                           simb_mask=mask))
        elif op is Opcode.MOV_ARF:
            P.append(Instr(op, arf=rng.choice(free_arf), drf=drf(), lane=rng.randrange(4),
                           simb_mask=mask))
        else:
            P.append(Instr(op, drf=drf(), simb_mask=mask))
    return P, {0: ptr_vec}


def drain_program(g: PEGeometry, base: int) -> list[Instr]:
    """Store every DataRF entry at ``bank[base + i]``, then the AddrRF, four entries per
    vector, after them (through DataRF entry 0)."""
    P = [Instr(Opcode.ST_RF, dram=base + i, drf=i, simb_mask=1) for i in range(g.drf)]
    for j in range(g.arf // 4):
        P += [Instr(Opcode.MOV_DRF, arf=4 * j + ln, drf=0, lane=ln, simb_mask=1)
              for ln in range(4)]
        P.append(Instr(Opcode.ST_RF, dram=base + g.drf + j, drf=0, simb_mask=1))
    return P


class _SPMModel:
    """A scratchpad port: random ``ready``, reads answered ``latency`` cycles later."""

    def __init__(self, rng: random.Random, latency: int, p_ready: float):
        self.rng, self.latency, self.p_ready = rng, latency, p_ready
        self.mem: dict[int, int] = {}
        self.pending: list[tuple[int, int]] = []   # (cycle due, data)
        self.accesses = 0

    def cycle(self, n: int, o: dict, pre: str) -> dict:
        ins = {f"{pre}__ready": 0, f"{pre}__rvalid": 0, f"{pre}__rdata": 0}
        if self.pending and self.pending[0][0] == n:
            ins[f"{pre}__rvalid"], ins[f"{pre}__rdata"] = 1, self.pending.pop(0)[1]
        if o[f"{pre}__valid"] and self.rng.random() < self.p_ready:
            ins[f"{pre}__ready"] = 1
            a = o[f"{pre}__addr"]
            self.accesses += 1
            if o[f"{pre}__we"]:
                old, new, msk = lanes_of(self.mem.get(a, 0)), lanes_of(o[f"{pre}__wdata"]), \
                    o[f"{pre}__wmask"]
                self.mem[a] = vec_of([new[i] if msk >> i & 1 else old[i] for i in range(4)])
            else:
                self.pending.append((n + self.latency, self.mem.get(a, 0)))
        return ins


class RemoteReader:
    """The vault's request server on a PE's ``remote`` port: reads of bank vectors.

    Requests go out in the order of *addrs*, each after a random gap (probability
    *p_req* per cycle), with a random free tag, up to ``2**tag_bits`` outstanding,
    each held until ``req.ready``. ``resp.ready`` is high with probability
    *p_ready*, or, with *stall*, low for random stretches of up to *stall* cycles.
    Checked here: every response carries an outstanding tag and the bank's vector
    (the caller reads only vectors nothing writes while they are outstanding),
    ``resp.valid`` and its payload stay put until taken, and ``busy`` is high while
    a read is outstanding.

    Parameters
    ----------
    rng : random.Random
    tag_bits : int
        The port's tag width.
    addrs : list of int
        The ``dram`` addresses to read (they may have bits above the bank's size).
    p_req, p_ready : float
    stall : int
        Longest stretch of ``resp.ready`` low (0: no stretches, *p_ready* per cycle).
    """

    def __init__(self, rng: random.Random, *, tag_bits: int, addrs: list[int],
                 p_req: float = 0.3, p_ready: float = 1.0, stall: int = 0):
        self.rng, self.tag_bits = rng, tag_bits
        self.todo = list(addrs)
        self.p_req, self.p_ready, self.stall = p_req, p_ready, stall
        self.req: tuple[int, int] | None = None          # (tag, addr) held on req
        self.outstanding: dict[int, tuple[int, int]] = {}  # tag -> (addr, accept cycle)
        # (tag, addr, accept cycle, response cycle), in the order the responses came
        self.served: list[tuple[int, int, int, int]] = []
        self.accepted: list[int] = []     # accept cycles
        self.errors: list[str] = []
        self._held: tuple[int, int] | None = None   # a response seen and not taken
        self._stalled = 0
        self.most = 0        # most reads outstanding at once
        self.held = 0        # cycles a response waited for resp.ready

    @property
    def finished(self) -> bool:
        return not self.todo and self.req is None and not self.outstanding

    def cycle(self, n: int, o: dict, bank: dict[int, int], size: int) -> tuple[dict, bool]:
        """This cycle's inputs of the port, and whether a request was taken."""
        if self.outstanding and not o["busy"]:
            self.errors.append(f"cycle {n}: busy low with remote reads outstanding")
        ins = {"remote__resp__ready": 0}
        if o["remote__resp__valid"]:
            pay = o["remote__resp__payload"]
            tag, dat = pay & ((1 << self.tag_bits) - 1), pay >> self.tag_bits
            if self._held is not None and self._held != (tag, dat):
                self.errors.append(f"cycle {n}: remote response changed while not taken")
            if self.stall:
                if self._stalled == 0 and self.rng.random() < 0.3:
                    self._stalled = self.rng.randint(1, self.stall)
                take = self._stalled == 0
                self._stalled = max(0, self._stalled - 1)
            else:
                take = self.rng.random() < self.p_ready
            if take:
                ins["remote__resp__ready"] = 1
                self._held = None
                if tag not in self.outstanding:
                    self.errors.append(f"cycle {n}: remote response for tag {tag}, "
                                       f"which is not outstanding")
                else:
                    addr, t0 = self.outstanding.pop(tag)
                    want = bank.get(addr & (size - 1), 0)
                    if dat != want:
                        self.errors.append(f"cycle {n}: remote read of {addr:#x} (tag {tag}) "
                                           f"returned {dat:#034x}, expected {want:#034x}")
                    self.served.append((tag, addr, t0, n))
            else:
                self._held = (tag, dat)
                self.held += 1
        elif self._held is not None:
            self.errors.append(f"cycle {n}: remote response withdrawn before it was taken")
            self._held = None
        # The request: held until ready (ready depends on the PE's registers only).
        if self.req is None and self.todo and self.rng.random() < self.p_req:
            free = [t for t in range(1 << self.tag_bits) if t not in self.outstanding]
            if free:
                self.req = (self.rng.choice(free), self.todo.pop(0))
        taken = False
        if self.req is not None:
            tag, addr = self.req
            ins |= {"remote__req__valid": 1,
                    "remote__req__payload": addr | tag << DRAM_BITS}
            if o["remote__req__ready"]:
                self.outstanding[tag] = (addr, n)
                self.most = max(self.most, len(self.outstanding))
                self.accepted.append(n)
                self.req, taken = None, True
        else:
            ins |= {"remote__req__valid": 0, "remote__req__payload": 0}
        return ins, taken


class PEEnv:
    """One PE's world, one call of :meth:`cycle` per clock (see the module docstring).

    Parameters
    ----------
    g : PEGeometry
    timing : Timing
        The bank's timing (for the protocol checker).
    program : list of Instr
    rng : random.Random
    tag_bits : int
    bank : dict
        Initial bank contents (vector index -> 128-bit value).
    ids : tuple
        peID, pgID, vaultID, chipID.
    p_issue, p_pgsm, p_vsm : float
        Probability of issuing when possible; of a scratchpad taking a request.
    remote : RemoteReader, optional
        Plays the ``remote`` port (held idle without it). Its requests taken while a
        bank instruction was in flight are counted in ``remote_busy``; those taken
        while one waited in the PE's decode register (``issue.ready`` low, the last
        instruction issued a bank access) are listed in ``remote_races`` as (cycle
        taken, issue cycle of the waiting instruction).
    """

    OUTS = ("issue__ready", "issue__done", "issue__done_tag", "arr__re", "arr__we",
            "arr__addr", "arr__wdata", "cmd__valid", "cmd__kind", "cmd__row", "cmd__col",
            *(f"{p}__{n}" for p in ("pgsm", "vsm") for n in ("valid", "we", "addr", "wdata",
                                                               "wmask")),
            "remote__req__ready", "remote__resp__valid", "remote__resp__payload", "busy")

    def __init__(self, g: PEGeometry, timing, program: list[Instr], rng: random.Random, *,
                 tag_bits: int, bank: dict[int, int], ids=(1, 0, 0, 0), pgsm_latency: int = 1,
                 vsm_latency: int = 1, p_issue: float = 0.8, p_pgsm: float = 0.7,
                 p_vsm: float = 0.5, real_pgsm: bool = False,
                 remote: RemoteReader | None = None):
        self.g, self.rng, self.program = g, rng, list(program)
        self.ids = ids
        self.tags = 1 << tag_bits
        self.bank = dict(bank)
        self.checker = TimingChecker(timing, banks=1)
        # real_pgsm: the PE's pgsm port is joined to a PGSM block, not played here.
        self.pgsm = None if real_pgsm else _SPMModel(rng, pgsm_latency, p_pgsm)
        self.vsm = _SPMModel(rng, vsm_latency, p_vsm)
        self.p_issue = p_issue
        self.pc = 0
        self.inflight: dict[int, tuple[Instr, frozenset, frozenset, int]] = {}
        # (instr, issue-to-done cycles, issue cycle), in the order they finished
        self.finished: list[tuple[Instr, int, int]] = []
        self.n = 0
        self._rd: int | None = None
        self.errors: list[str] = []
        self.cmds: dict[str, int] = {}
        self.ref_busy = 0          # REFs issued while an instruction waited on the bank
        self.remote = remote
        self.remote_busy = 0
        self.remote_races: list[tuple[int, int]] = []
        self._last: tuple[Instr, int] | None = None      # the last instruction issued, when

    @property
    def finished_all(self) -> bool:
        return self.pc == len(self.program) and not self.inflight and \
            (self.remote is None or self.remote.finished)

    def inputs(self) -> dict:
        """Inputs that are constant (ids; ``act_ok`` high: a PE alone on its die)."""
        return {"pe_id": self.ids[0], "pg_id": self.ids[1], "vault_id": self.ids[2],
                "chip_id": self.ids[3], "act_ok": 1}

    def cycle(self, o: dict) -> dict:
        n = self.n
        ins = {"issue__valid": 0, "issue__tag": 0, "issue__instr": 0, "arr__rdata": 0}
        # DRAM array: one-cycle synchronous read.
        if self._rd is not None:
            ins["arr__rdata"] = self._rd
            self._rd = None
        mask = self.g.bank - 1
        if o["arr__re"]:
            self._rd = self.bank.get(o["arr__addr"] & mask, 0)
        if o["arr__we"]:
            self.bank[o["arr__addr"] & mask] = o["arr__wdata"]
        if o["cmd__valid"]:
            kind = Cmd(o["cmd__kind"]).name
            self.cmds[kind] = self.cmds.get(kind, 0) + 1
            if kind == "REF":
                self.checker.step(n, "REF")
                if any(i.opcode in (Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM, Opcode.ST_PGSM)
                       for i, *_ in self.inflight.values()):
                    self.ref_busy += 1
            else:
                self.checker.step(n, kind, 0, o["cmd__row"], o["cmd__col"])
        if self.pgsm is not None:
            ins |= self.pgsm.cycle(n, o, "pgsm")
        ins |= self.vsm.cycle(n, o, "vsm")
        if self.remote is None:
            ins |= {"remote__req__valid": 0, "remote__req__payload": 0,
                    "remote__resp__ready": 1}
        else:
            r_ins, taken = self.remote.cycle(n, o, self.bank, self.g.bank)
            ins |= r_ins
            bank_ops = (Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM, Opcode.ST_PGSM)
            if taken and any(i.opcode in bank_ops for i, *_ in self.inflight.values()):
                self.remote_busy += 1
            # issue__ready low: the last instruction issued waits in the decode register.
            if taken and not o["issue__ready"] and self._last is not None and \
                    self._last[0].opcode in bank_ops[:3]:
                self.remote_races.append((n, self._last[1]))
        # The control core: retire, then issue (a retired slot is reusable at once).
        if o["issue__done"]:
            t = o["issue__done_tag"]
            if t not in self.inflight:
                self.errors.append(f"cycle {n}: done for tag {t}, which is not in flight")
            else:
                ins_, _, _, t0 = self.inflight.pop(t)
                self.finished.append((ins_, n - t0, t0))
        if self.pc < len(self.program) and o["issue__ready"] and \
                self.rng.random() < self.p_issue:
            nxt = self.program[self.pc]
            r, w = accesses(nxt)
            ok = all(not (conflicts(r, w2) or conflicts(w, r2) or conflicts(w, w2))
                     for _, r2, w2, _ in self.inflight.values())
            free = [t for t in range(self.tags) if t not in self.inflight]
            if ok and free:
                t = self.rng.choice(free)
                self.inflight[t] = (nxt, r, w, n)
                self._last = (nxt, n)
                self.pc += 1
                ins |= {"issue__valid": 1, "issue__tag": t, "issue__instr": encode(nxt)}
        self.n += 1
        return ins

    def expected(self, bank: dict[int, int], pgsm: dict[int, int] | None = None,
                 ipim=None) -> StandInPEModel:
        """The reference run of the whole program from *bank* (and *pgsm*).

        With *ipim* (the config section the PE was built from), the program also
        runs on the SIMB instruction-set simulator, the project's golden model,
        as the PE its ids name, and the two references must agree exactly (the
        stand-in wraps addresses as the RTL does, the ISS rejects them; the
        random programs stay in range).
        """
        ref = StandInPEModel(self.g, self.ids, bank, pgsm)
        for ins in self.program:
            ref.step(ins)
        if ipim is not None:
            got = iss_run(ipim, self.ids, self.program, bank, pgsm)
            for name in ("bank", "pgsm", "vsm"):
                a, b = getattr(ref, name), got[name]
                diff = [k for k in set(a) | set(b) if a.get(k, 0) != b.get(k, 0)]
                assert not diff, (f"stand-in and ISS differ in {name} at "
                                  f"{sorted(diff)[:8]}")
        return ref

    def compare(self, ref: StandInPEModel) -> list[str]:
        """Differences between this run's storage and *ref*'s (empty when equal)."""
        bad = list(self.errors) + (self.remote.errors if self.remote else [])
        stores = [("bank", self.bank, ref.bank), ("vsm", self.vsm.mem, ref.vsm)]
        if self.pgsm is not None:
            stores.append(("pgsm", self.pgsm.mem, ref.pgsm))
        for name, got, exp in stores:
            for k in sorted(set(got) | set(exp)):
                if got.get(k, 0) != exp.get(k, 0):
                    bad.append(f"{name}[{k}] = {got.get(k, 0):#034x}, expected "
                               f"{exp.get(k, 0):#034x}")
        bad += [str(v) for v in self.checker.violations]
        return bad


def iss_run(ipim, ids: tuple[int, int, int, int], program: list[Instr], bank: dict[int, int],
            pgsm: dict[int, int] | None = None) -> dict[str, dict[int, int]]:
    """*program* (written for ``simb_mask = 1``) on the instruction-set simulator as PE
    ``ids = (pe, pg, vault, chip)`` of a machine of config section *ipim*; its bank, its
    PG's PGSM and its vault's VSM afterwards, as dicts of 128-bit vectors."""
    pe, pg, vault, chip = ids
    for name, val, top in (("pe", pe, ipim.pes_per_pg), ("pg", pg, ipim.pgs),
                           ("vault", vault, ipim.vaults), ("chip", chip, ipim.cubes)):
        if val >= top:
            raise ValueError(f"PE ids {ids}: {name} {val} is not in the config (< {top})")
    p = pg * ipim.pes_per_pg + pe
    # The bench issues the program to the PE itself, not from a vault's instruction
    # memory: the machine's program memory only has to hold it.
    words = 1 << len(program).bit_length()
    if words > ipim.imem_instructions:
        ipim = dataclasses.replace(ipim, imem_instructions=words)
    m = SIMBMachine(ipim)
    vi = m.vault_index(chip, vault)
    v = m.vaults[vi]
    for a, x in bank.items():
        m.write_bank(vi, p, a, lanes_of(x))
    for a, x in (pgsm or {}).items():
        v.pgsm[pg, a] = lanes_of(x)
    prog = [dataclasses.replace(i, simb_mask=1 << p) if "simb_mask" in i.operands() else i
            for i in program]
    m.load([*prog, Instr(Opcode.HALT)], vaults=[vi])
    m.run()

    def vec(row) -> int:
        return vec_of([int(x) for x in row])

    return {"bank": {a: vec(x) for a, x in v.banks[p].items()},
            "pgsm": {a: vec(x) for a, x in enumerate(v.pgsm[pg]) if x.any()},
            "vsm": {a: vec(x) for a, x in enumerate(v.vsm) if x.any()}}


def fill_bank(rng: random.Random, span: int) -> dict[int, int]:
    """Initial bank contents: FP32 corners, INT corners and random words in the lanes."""
    corners = fp32.corner_values()
    pools = [corners, INT_CORNERS, None]
    out = {}
    for a in range(span):
        lanes = []
        for _ in range(LANES):
            pool = rng.choice(pools)
            lanes.append(rng.getrandbits(32) if pool is None else rng.choice(pool))
        out[a] = vec_of(lanes)
    return out


__all__ += ["fill_bank", "int_op", "fp_op", "lanes_of", "vec_of", "iss_run"]


# ---- the cocotb tests ---------------------------------------------------------------------
def _bench_env(tag: str, n: int, **kw) -> tuple[PEEnv, dict]:
    cfg = from_dict(Config, bench()["config"])
    c = cfg.ipim
    g = PEGeometry.of(c)
    r = bench_rng(tag)
    span = min(g.bank // 2, 8 * g.row)
    bank0 = fill_bank(r, span)
    prog, pre = random_program(r, g, n, span=span)
    bank0 |= pre
    prog += drain_program(g, g.bank // 2)
    tag_bits = max(1, (c.inst_queue - 1).bit_length())
    env = PEEnv(g, resolve_timing(c.timing, c.tck_ns), prog, r, tag_bits=tag_bits,
                bank=bank0, ids=(r.randrange(c.pes_per_pg), r.randrange(c.pgs),
                                 r.randrange(c.vaults), r.randrange(c.cubes)),
                pgsm_latency=c.t_pgsm, vsm_latency=c.t_vsm, **kw)
    return env, bank0

async def _run(dut, env: PEEnv, max_cycles: int) -> None:
    sig = {n: getattr(dut, n) for n in PEEnv.OUTS}
    for k, v in env.inputs().items():
        getattr(dut, k).value = v
    while not env.finished_all:
        await FallingEdge(dut.clk)
        o = {n: int(s.value) for n, s in sig.items()}
        for k, v in env.cycle(o).items():
            getattr(dut, k).value = v
        assert env.n < max_cycles, f"program not finished after {max_cycles} cycles " \
                                   f"(pc {env.pc}/{len(env.program)})"
    await RisingEdge(dut.clk)

@cocotb.test()
async def random_programs_match_reference(dut):
    """Random SIMB programs (every PE opcode, FP32/INT32 corners, partial masks, SV
    mode, indirect addressing, row hits and misses, refreshes) issued by a hazard-
    respecting core model: final bank/PGSM/VSM (and, drained, DataRF/AddrRF) equal
    the reference; every DRAM command meets the timing; each tag finishes once."""
    env, bank0 = _bench_env("random", 300)
    await start(dut)
    await _run(dut, env, 60000)
    bad = env.compare(env.expected(bank0, ipim=from_dict(Config, bench()["config"]).ipim))
    dut._log.info("%d instructions in %d cycles, commands %s, %d REF during bank "
                  "work", len(env.program), env.n, env.cmds, env.ref_busy)
    assert not bad, "\n".join(bad[:20])
    assert env.cmds.get("REF", 0) > 0, "no refresh happened"
    assert env.cmds.get("PRE", 0) > 0, "no row miss happened"
    perf = {n: int(getattr(dut, f"perf__{n}").value) for n in
            ("simd", "alu", "drf", "arf", "rdwr", "act", "pre", "ref")}
    dut._log.info("perf %s", perf)
    assert perf["rdwr"] == env.cmds.get("RD", 0) + env.cmds.get("WR", 0)
    assert perf["act"] == env.cmds.get("ACT", 0)


@cocotb.test()
async def back_pressure_and_dense_issue(dut):
    """The same check with scratchpads that rarely take a request and a core that issues
    whenever it may: the decode register, the completion port and the bank slots fill."""
    env, bank0 = _bench_env("dense", 200, p_issue=1.0, p_pgsm=0.25, p_vsm=0.15)
    await start(dut)
    await _run(dut, env, 60000)
    bad = env.compare(env.expected(bank0, ipim=from_dict(Config, bench()["config"]).ipim))
    dut._log.info("%d instructions in %d cycles, commands %s", len(env.program), env.n,
                  env.cmds)
    assert not bad, "\n".join(bad[:20])


@cocotb.test()
async def remote_reads_beside_a_program(dut):
    """Remote reads (4 tags, random response back-pressure, some addresses with bits above
    the bank's) of a region the program never writes, while it runs: each returns the
    bank's vector once, the program's result is unchanged, and some were taken while a
    bank instruction of the PE waited to dispatch."""
    env, bank0 = _bench_env("remote", 200, p_issue=1.0)
    g, r = env.g, bench_rng("remote-reads")
    lo, hi = g.bank // 4, g.bank // 2      # the program stays below lo, drains at hi
    region = {a: v for a, v in fill_bank(r, hi).items() if a >= lo}
    bank0 |= region
    env.bank |= region
    rows = r.sample(range(lo // g.row, hi // g.row), 3)
    addrs = [r.choice(rows) * g.row + r.randrange(g.row) +
             (r.randrange(1, (1 << DRAM_BITS) // g.bank) * g.bank if r.random() < 0.2 else 0)
             for _ in range(100)]
    env.remote = RemoteReader(r, tag_bits=len(dut.remote__req__payload) - DRAM_BITS,
                              addrs=addrs, p_req=0.15, stall=6)
    await start(dut)
    await _run(dut, env, 60000)
    bad = env.compare(env.expected(bank0, ipim=from_dict(Config, bench()["config"]).ipim))
    dut._log.info("%d instructions in %d cycles, %d remote reads, %d taken while a bank "
                  "instruction waited", len(env.program), env.n, len(env.remote.served),
                  len(env.remote_races))
    assert not bad, "\n".join(bad[:20])
    assert len(env.remote.served) == len(addrs)
    assert int(dut.perf__remote.value) == len(addrs)
    assert env.remote_races, "no remote read met a waiting bank instruction"
