"""Instruction-set simulator of the SIMB ISA: the golden model of iPIM's hardware.

:class:`SIMBMachine` holds the architectural state of a whole iPIM machine
(``cubes x vaults`` vaults, each with its CtrlRF, pc and program, every PE's
DataRF and AddrRF, one PGSM per PG, its VSM, and one bank per PE) and runs
programs with the semantics of the :mod:`pimforge.rtl.ipim.isa` docstring,
one instruction at a time, with no timing. FP32 arithmetic is that of
:mod:`pimforge.verif.models.fp32` (bit-exact with ``rtl/fp`` add and mul) and
:mod:`pimforge.verif.models.fp32_shift` (``rtl/fp/shift``'s LDEXP); MAC is a
multiplication then an addition, two roundings.

Scheduling
----------
:meth:`SIMBMachine.run` runs the vaults in order, each until it reaches a
``sync`` or ``halt``. When every vault that has not halted waits at a
``sync``, the barrier commits (all of them must name the same ``phase_id``,
else :class:`MachineError`), every waiting vault moves past its ``sync`` and
the round repeats, until every vault has halted. A halted vault takes no part
in later barriers: the others synchronize among themselves. A vault given no
program (:meth:`SIMBMachine.load` with a list of vaults) counts as halted.

A ``req`` takes effect when it is executed: it reads the remote bank and
writes the local VSM at once, which lands it before the issuing vault's next
``sync`` commits, as the ISA requires. A race-free program (no vault writes
the requested bank vector between the ``sync`` before the ``req`` and the one
after it) gets the same result from the hardware; a racy one gets the result
of the schedule above.

Storage
-------
DataRFs are ``uint32`` arrays ``[pes, drf_entries, 4]``, AddrRFs
``[pes, arf_entries]`` (A0..A3 = peID in the PG, pgID, vaultID in the cube,
chipID), PGSMs ``[pgs, lines, 4]``, the VSM ``[lines, 4]``, the CtrlRF
``[crf_entries]``: a test reads and writes them directly on
:attr:`SIMBMachine.vaults` (a backdoor). Banks are sparse, one dict per PE
from vector address to a ``uint32[4]``; a vector never written reads as
zero. A program error (a register or an address beyond the configured
sizes, a pc past the program, mismatched sync phases, a runaway loop) raises
:class:`MachineError` naming the vault, pc, instruction and what to change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.errors import CapacityError, SimulationError
from pimforge.rtl.ipim.asm import disassemble_one
from pimforge.rtl.ipim.isa import (
    FORMATS,
    LANES,
    RESERVED_ARF,
    AluOp,
    Cond,
    DType,
    Instr,
    Mode,
    Opcode,
    format_of,
)

from ..fp32 import fp32_add, fp32_mul
from ..fp32_shift import ldexp

__all__ = ["MachineError", "SIMBMachine", "Vault", "int_alu", "fp_alu", "DEFAULT_MAX_STEPS"]

#: Instructions one vault may execute in one :meth:`SIMBMachine.run` by default.
DEFAULT_MAX_STEPS = 1_000_000

_M32 = np.uint64(0xFFFF_FFFF)
_SIGN = np.uint32(0x8000_0000)
#: FP32 SHIFT clamps b to the 10-bit k of rtl/fp/shift: every larger |b| rounds alike.
_K_MIN, _K_MAX = -512, 511
_COND_TESTS = {Cond.Z: lambda c: c == 0, Cond.NZ: lambda c: c != 0,
               Cond.LTZ: lambda c: c < 0, Cond.GEZ: lambda c: c >= 0}
#: The vec_mask bits as lane-enable vectors.
_LANE_ENABLES = [np.array([m >> i & 1 for i in range(LANES)], dtype=bool)
                 for m in range(1 << LANES)]


class MachineError(SimulationError):
    """A program did something the ISA leaves undefined or never ended."""


# -- ALUs ------------------------------------------------------------------------

def _u32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint32)


def _signed(x: np.ndarray) -> np.ndarray:
    return _u32(x).view(np.int32).astype(np.int64)


def int_alu(op: AluOp, a, b, d=None) -> np.ndarray:
    """INT32 *op* on ``uint32`` arrays (two's complement, wrapping); *d* is MAC's addend."""
    a, b = _u32(a), _u32(b)
    if op is AluOp.ADD:
        r = a.astype(np.uint64) + b
    elif op is AluOp.SUB:
        r = a.astype(np.uint64) - b.astype(np.uint64)
    elif op is AluOp.MUL:
        r = a.astype(np.uint64) * b
    elif op is AluOp.MAC:
        r = _u32(d).astype(np.uint64) + ((a.astype(np.uint64) * b) & _M32)
    elif op is AluOp.SHIFT:
        k = _signed(b)
        left = (a.astype(np.uint64) << np.clip(k, 0, 32).astype(np.uint64)) & _M32
        # an arithmetic shift by 31 already leaves only copies of the sign
        right = (_signed(a) >> np.clip(-k, 0, 31)).astype(np.uint64)
        r = np.where(k >= 0, left, right)
    elif op is AluOp.AND:
        r = a & b
    elif op is AluOp.OR:
        r = a | b
    elif op is AluOp.XOR:
        r = a ^ b
    elif op in (AluOp.CROP_LSB, AluOp.CROP_MSB):
        n = np.clip(_signed(b), 0, 32).astype(np.uint64)
        keep = (np.uint64(1) << n) - np.uint64(1)
        if op is AluOp.CROP_MSB:
            keep = keep << (np.uint64(32) - n)
        r = a.astype(np.uint64) & keep
    else:  # pragma: no cover - every AluOp is handled above
        raise ValueError(f"no integer {op}")
    return (np.asarray(r, dtype=np.uint64) & _M32).astype(np.uint32)


def fp_alu(op: AluOp, a, b, d=None) -> np.ndarray:
    """FP32 *op* on bit patterns (``uint32`` arrays), bit-exact with the ``rtl/fp`` units."""
    a, b = _u32(a), _u32(b)
    if op is AluOp.ADD:
        r = fp32_add(a, b)
    elif op is AluOp.SUB:
        r = fp32_add(a, b ^ _SIGN)
    elif op is AluOp.MUL:
        r = fp32_mul(a, b)
    elif op is AluOp.MAC:
        r = fp32_add(_u32(d), fp32_mul(a, b))
    elif op is AluOp.SHIFT:
        r = ldexp(a, np.clip(_signed(b), _K_MIN, _K_MAX))
    else:
        raise ValueError(f"comp {op.name.lower()} takes int32, not fp32")
    return _u32(r)


# -- State -------------------------------------------------------------------------

@dataclass
class Vault:
    """The architectural state of one vault (arrays are the backdoor)."""

    index: int
    chip: int
    vault: int
    crf: np.ndarray
    drf: np.ndarray
    arf: np.ndarray
    pgsm: np.ndarray
    vsm: np.ndarray
    banks: list[dict[int, np.ndarray]]
    program: list[Instr] = field(default_factory=list)
    code: list[tuple] = field(default_factory=list, repr=False)
    pc: int = 0
    halted: bool = True            # a vault given no program stays idle
    waiting: int | None = None     # the phase of the sync it waits at
    steps: int = 0


class SIMBMachine:
    """Every vault of an iPIM machine, run instruction by instruction.

    Parameters
    ----------
    cfg : Config or IPIMConfig
        A config (its ``ipim`` section is used) or the section itself.
    max_steps : int
        Instructions one vault may execute per :meth:`run` before it is
        stopped as a runaway program.

    Attributes
    ----------
    ipim : IPIMConfig
    vaults : list of Vault
        Vault ``chip * ipim.vaults + vault``.
    counts : Counter
        Executed instructions per lower-case opcode name, all vaults.
    syncs : int
        Barriers committed.
    """

    def __init__(self, cfg, *, max_steps: int = DEFAULT_MAX_STEPS):
        ip = getattr(cfg, "ipim", cfg)
        self.ipim = ip
        self.max_steps = max_steps
        self._counts = [0] * (max(o.value for o in Opcode) + 1)
        self.syncs = 0
        self._pe_pg = np.arange(ip.pes) // ip.pes_per_pg
        self._masks: dict[int, np.ndarray] = {}
        self.vaults = []
        for chip in range(ip.cubes):
            for v in range(ip.vaults):
                arf = np.zeros((ip.pes, ip.arf_entries), dtype=np.uint32)
                arf[:, 0] = np.arange(ip.pes) % ip.pes_per_pg
                arf[:, 1] = self._pe_pg
                arf[:, 2] = v
                arf[:, 3] = chip
                self.vaults.append(Vault(
                    index=chip * ip.vaults + v, chip=chip, vault=v,
                    crf=np.zeros(ip.crf_entries, dtype=np.uint32),
                    drf=np.zeros((ip.pes, ip.drf_entries, LANES), dtype=np.uint32), arf=arf,
                    pgsm=np.zeros((ip.pgs, ip.pgsm_lines, LANES), dtype=np.uint32),
                    vsm=np.zeros((ip.vsm_lines, LANES), dtype=np.uint32),
                    banks=[{} for _ in range(ip.pes)]))
        self._exec: dict[Opcode, Callable[[Vault, Instr], None]] = {
            Opcode.COMP: self._comp,
            Opcode.CALC_ARF: self._calc_arf, Opcode.LD_RF: self._ld_rf,
            Opcode.ST_RF: self._st_rf, Opcode.LD_PGSM: self._ld_pgsm,
            Opcode.ST_PGSM: self._st_pgsm, Opcode.RD_PGSM: self._rd_pgsm,
            Opcode.WR_PGSM: self._wr_pgsm, Opcode.RD_VSM: self._rd_vsm,
            Opcode.WR_VSM: self._wr_vsm, Opcode.MOV_DRF: self._mov_drf,
            Opcode.MOV_ARF: self._mov_arf, Opcode.SETI_VSM: self._seti_vsm,
            Opcode.RESET: self._reset, Opcode.REQ: self._req, Opcode.CALC_CRF: self._calc_crf,
            Opcode.SETI_CRF: self._seti_crf,
        }

    # -- programs ------------------------------------------------------------------

    def vault_index(self, chip: int, vault: int) -> int:
        """The index in :attr:`vaults` of vault *vault* of cube *chip*."""
        return chip * self.ipim.vaults + vault

    def load(self, program: Sequence[Instr], vaults: Sequence[int] | None = None) -> None:
        """Give *program* to *vaults* (default: every vault), reset their pc and status.

        Raises
        ------
        CapacityError
            The program is longer than the program memory.
        MachineError
            An instruction names a register, a direct address or a remote PE
            the config does not have.
        """
        prog = list(program)
        if len(prog) > self.ipim.imem_instructions:
            raise CapacityError(f"the program has {len(prog)} instructions but the program "
                                f"memory holds {self.ipim.imem_instructions}; raise "
                                f"ipim.imem_instructions or shorten it")
        for pc, ins in enumerate(prog):
            self._check_static(pc, ins)
        code = self._compile(prog)
        for i in range(len(self.vaults)) if vaults is None else vaults:
            v = self.vaults[i]
            v.program, v.pc, v.halted, v.waiting, v.steps = prog, 0, False, None, 0
            v.code = code

    def _check_static(self, pc: int, ins: Instr) -> None:
        ip = self.ipim
        limits = {"d": (ip.drf_entries, "DataRF", "ipim.drf_bytes"),
                  "a": (ip.arf_entries, "AddrRF", "ipim.arf_bytes"),
                  "c": (ip.crf_entries, "CtrlRF", "ipim.crf_entries")}

        def bad(msg: str) -> MachineError:
            return MachineError(f"pc {pc} ({disassemble_one(ins)}): {msg}")

        def reg(file: str, n: int) -> None:
            size, name, knob = limits[file]
            if n >= size:
                raise bad(f"{file}{n} is beyond the {name}'s {size} entries; use a lower "
                          f"entry or raise {knob}")

        fmt = format_of(ins.opcode)
        op = ins.opcode
        if op is Opcode.COMP:
            for n in (ins.dst, ins.src1, ins.src2):
                reg("d", n)
        elif op is Opcode.CALC_ARF:
            for n in (ins.dst, ins.src1, ins.src2):
                reg("a", n)
        elif op is Opcode.CALC_CRF:
            for n in (ins.dst, ins.src1, ins.src2):
                reg("c", n)
        elif op is Opcode.SETI_CRF:
            reg("c", ins.dst)
        elif op is Opcode.JUMP:
            reg("c", ins.target)
        elif op is Opcode.CJUMP:
            reg("c", ins.src)
            reg("c", ins.target)
        if fmt in ("rf_bank", "rf_pgsm", "rf_vsm", "mov", "reset"):
            reg("d", ins.drf)
        if fmt == "mov":
            reg("a", ins.arf)
        sizes = {"dram": (ip.bank_vectors, "bank", "ipim.bank_bytes"),
                 "pgsm": (ip.pgsm_lines, "PGSM", "ipim.pgsm_bytes"),
                 "vsm": (ip.vsm_lines, "VSM", "ipim.vsm_bytes")}
        fields = dict(FORMATS[fmt])
        for mem, (size, name, knob) in sizes.items():
            if mem not in fields:
                continue
            addr = getattr(ins, mem)
            if getattr(ins, f"{mem}_ind", 0):
                reg("a", addr)
            elif addr >= size:
                raise bad(f"address {addr:#x} is beyond the {name}'s {size} vectors; use a "
                          f"lower address or raise {knob}")
        if op is Opcode.REQ:
            for name, val, size, knob in (("chip", ins.chip, ip.cubes, "ipim.cubes"),
                                          ("vault", ins.vault, ip.vaults, "ipim.vaults"),
                                          ("pg", ins.pg, ip.pgs, "ipim.pgs"),
                                          ("pe", ins.pe, ip.pes_per_pg, "ipim.pes_per_pg")):
                if val >= size:
                    raise bad(f"{name}={val} names no {name} (the machine has {size}: "
                              f"{knob})")

    # -- running -------------------------------------------------------------------

    def run(self, max_steps: int | None = None) -> int:
        """Run every vault until all have halted (see the module docstring).

        Parameters
        ----------
        max_steps : int, optional
            Overrides the constructor's per-vault instruction limit.

        Returns
        -------
        int
            Instructions executed in this call, all vaults.
        """
        limit = self.max_steps if max_steps is None else max_steps
        total = 0
        start = {v.index: v.steps for v in self.vaults}
        while True:
            for v in self.vaults:
                if not v.halted and v.waiting is None:
                    self._run_vault(v, start[v.index] + limit)
            waiting = [v for v in self.vaults if not v.halted]
            if not waiting:
                break
            phases = sorted({v.waiting for v in waiting})
            if len(phases) > 1:
                where = ", ".join(f"vault {v.index} (pc {v.pc}) at phase {v.waiting}"
                                  for v in waiting)
                raise MachineError(f"vaults meet at one barrier with different sync phases: "
                                   f"{where}; give the matching syncs the same phase_id")
            for v in waiting:
                v.waiting = None
                v.pc += 1
            self.syncs += 1
        for v in self.vaults:
            total += v.steps - start[v.index]
        return total

    @property
    def counts(self) -> Counter[str]:
        """Executed instructions per lower-case opcode name, all vaults (a copy)."""
        return Counter({op.name.lower(): self._counts[op.value] for op in Opcode
                        if self._counts[op.value]})

    def _compile(self, prog: list[Instr]) -> list[tuple]:
        # (kind, handler, instr, opcode value): enum hashing and lookups per executed
        # instruction would cost more than most instructions themselves
        kinds = {Opcode.JUMP: 1, Opcode.CJUMP: 2, Opcode.SYNC: 3, Opcode.HALT: 4}
        return [(kinds.get(i.opcode, 0), self._exec.get(i.opcode), i, i.opcode.value,
                 _COND_TESTS[i.cond]) for i in prog]

    def _run_vault(self, v: Vault, stop_at: int) -> None:
        code, counts, n = v.code, self._counts, len(v.code)
        crf = v.crf
        while True:
            pc = v.pc
            if not 0 <= pc < n:
                raise MachineError(f"vault {v.index}: pc {pc} is outside the program "
                                   f"({n} instructions); end it with halt and check "
                                   f"the jump targets in the CtrlRF")
            if v.steps >= stop_at:
                raise MachineError(f"vault {v.index} executed {v.steps} instructions without "
                                   f"halting (now at pc {pc}); check its loop exit or raise "
                                   f"max_steps")
            kind, f, ins, opv, cond = code[pc]
            v.steps += 1
            counts[opv] += 1
            if kind == 0:
                if f is not None:
                    f(v, ins)
                v.pc = pc + 1
            elif kind == 1:
                v.pc = int(crf[ins.target])
            elif kind == 2:
                take = cond(int(crf[ins.src:ins.src + 1].view(np.int32)[0]))
                v.pc = int(crf[ins.target]) if take else pc + 1
            elif kind == 3:
                v.waiting = ins.phase
                return
            else:                       # halt
                v.halted = True
                return

    # -- helpers ---------------------------------------------------------------------

    def _pes(self, mask: int) -> np.ndarray:
        """The PEs of *mask* in increasing order (bits beyond the PEs are ignored)."""
        r = self._masks.get(mask)
        if r is None:
            r = np.array([p for p in range(self.ipim.pes) if mask >> p & 1], dtype=np.intp)
            self._masks[mask] = r
        return r

    def _addrs(self, v: Vault, ins: Instr, mem: str, pes: np.ndarray) -> list[int]:
        addr = getattr(ins, mem)
        if not getattr(ins, f"{mem}_ind", 0):
            return [addr] * len(pes)
        vals = [int(x) for x in v.arf[pes, addr]]
        size, name = {"dram": (self.ipim.bank_vectors, "bank"),
                      "pgsm": (self.ipim.pgsm_lines, "PGSM"),
                      "vsm": (self.ipim.vsm_lines, "VSM")}[mem]
        for p, a in zip(pes, vals, strict=True):
            if a >= size:
                raise MachineError(f"vault {v.index} pc {v.pc} ({disassemble_one(ins)}): PE "
                                   f"{p} uses {mem} address A{addr} = {a:#x}, beyond the "
                                   f"{name}'s {size} vectors; fix the AddrRF value")
        return vals

    @staticmethod
    def _bank_get(bank: dict[int, np.ndarray], addr: int) -> np.ndarray:
        vec = bank.get(addr)
        return np.zeros(LANES, dtype=np.uint32) if vec is None else vec.copy()

    # -- PE instructions ---------------------------------------------------------------

    def _comp(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        if not len(pes):
            return
        a = v.drf[pes, ins.src1]
        if ins.mode is Mode.SV:
            a = np.repeat(a[:, ins.lane:ins.lane + 1], LANES, axis=1)
        b = v.drf[pes, ins.src2]
        d = v.drf[pes, ins.dst]
        alu = fp_alu if ins.dtype is DType.FP32 else int_alu
        r = alu(ins.op, a, b, d)
        v.drf[pes, ins.dst] = np.where(_LANE_ENABLES[ins.vec_mask], r, d)

    def _calc_arf(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        if len(pes):
            assert ins.dst >= RESERVED_ARF   # Instr refuses it: A0..A3 are the ids
            v.arf[pes, ins.dst] = int_alu(ins.op, v.arf[pes, ins.src1], v.arf[pes, ins.src2])

    def _ld_rf(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        for p, a in zip(pes, self._addrs(v, ins, "dram", pes), strict=True):
            v.drf[p, ins.drf] = self._bank_get(v.banks[p], a)

    def _st_rf(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        for p, a in zip(pes, self._addrs(v, ins, "dram", pes), strict=True):
            v.banks[p][a] = v.drf[p, ins.drf].copy()

    def _ld_pgsm(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        dram = self._addrs(v, ins, "dram", pes)
        pgsm = self._addrs(v, ins, "pgsm", pes)
        # every PE reads before any writes; the highest PE's write lands last
        data = [self._bank_get(v.banks[p], a) for p, a in zip(pes, dram, strict=True)]
        for p, a, d in zip(pes, pgsm, data, strict=True):
            v.pgsm[self._pe_pg[p], a] = d

    def _st_pgsm(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        dram = self._addrs(v, ins, "dram", pes)
        pgsm = self._addrs(v, ins, "pgsm", pes)
        for p, d, s in zip(pes, dram, pgsm, strict=True):
            v.banks[p][d] = v.pgsm[self._pe_pg[p], s].copy()

    def _rd_pgsm(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        for p, a in zip(pes, self._addrs(v, ins, "pgsm", pes), strict=True):
            v.drf[p, ins.drf] = v.pgsm[self._pe_pg[p], a]

    def _wr_pgsm(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        for p, a in zip(pes, self._addrs(v, ins, "pgsm", pes), strict=True):
            v.pgsm[self._pe_pg[p], a] = v.drf[p, ins.drf]

    def _rd_vsm(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        for p, a in zip(pes, self._addrs(v, ins, "vsm", pes), strict=True):
            v.drf[p, ins.drf] = v.vsm[a]

    def _wr_vsm(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        for p, a in zip(pes, self._addrs(v, ins, "vsm", pes), strict=True):
            v.vsm[a] = v.drf[p, ins.drf]

    def _mov_drf(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        v.drf[pes, ins.drf, ins.lane] = v.arf[pes, ins.arf]

    def _mov_arf(self, v: Vault, ins: Instr) -> None:
        pes = self._pes(ins.simb_mask)
        v.arf[pes, ins.arf] = v.drf[pes, ins.drf, ins.lane]

    def _reset(self, v: Vault, ins: Instr) -> None:
        v.drf[self._pes(ins.simb_mask), ins.drf] = 0

    # -- vault instructions ------------------------------------------------------------

    def _seti_vsm(self, v: Vault, ins: Instr) -> None:
        for i in range(LANES):
            if ins.vec_mask >> i & 1:
                v.vsm[ins.vsm, i] = ins.imm

    def _req(self, v: Vault, ins: Instr) -> None:
        src = self.vaults[self.vault_index(ins.chip, ins.vault)]
        pe = ins.pg * self.ipim.pes_per_pg + ins.pe
        v.vsm[ins.vsm] = self._bank_get(src.banks[pe], ins.dram)

    def _calc_crf(self, v: Vault, ins: Instr) -> None:
        v.crf[ins.dst] = int_alu(ins.op, v.crf[ins.src1:ins.src1 + 1],
                                 v.crf[ins.src2:ins.src2 + 1])[0]

    def _seti_crf(self, v: Vault, ins: Instr) -> None:
        v.crf[ins.dst] = ins.imm

    # -- backdoors -----------------------------------------------------------------------

    def write_bank(self, vault: int, pe: int, addr: int, data) -> None:
        """Write vectors ``data`` (``[n, 4]`` or ``[4]`` uint32) at *addr*.. of a PE's bank."""
        rows = np.atleast_2d(_u32(data))
        if addr < 0 or addr + len(rows) > self.ipim.bank_vectors:
            raise MachineError(f"bank addresses {addr}..{addr + len(rows) - 1} are beyond the "
                               f"bank's {self.ipim.bank_vectors} vectors")
        bank = self.vaults[vault].banks[pe]
        for i, row in enumerate(rows):
            bank[addr + i] = row.copy()

    def read_bank(self, vault: int, pe: int, addr: int, n: int = 1) -> np.ndarray:
        """``[n, 4]`` uint32 vectors from *addr* of a PE's bank (unwritten ones read 0)."""
        bank = self.vaults[vault].banks[pe]
        return np.stack([self._bank_get(bank, addr + i) for i in range(n)])

    def state(self) -> dict[str, np.ndarray]:
        """The whole architectural state as arrays, for exact comparisons.

        Keys ``crf`` [V, entries], ``pc`` [V] (a halted vault's is its ``halt``'s),
        ``halted`` [V] (also true for a vault given no program), ``drf``
        [V, pes, entries, 4], ``arf`` [V, pes, entries], ``pgsm`` [V, pgs,
        lines, 4], ``vsm`` [V, lines, 4], and the banks' nonzero vectors as
        ``bank_addr`` [N, 3] (vault, pe, address; sorted) with ``bank_data``
        [N, 4] (a vector written with zeros equals one never written).
        """
        vs = self.vaults
        addrs, data = [], []
        for v in vs:
            for p, bank in enumerate(v.banks):
                for a in sorted(bank):
                    if bank[a].any():
                        addrs.append((v.index, p, a))
                        data.append(bank[a])
        return {
            "crf": np.stack([v.crf for v in vs]),
            "pc": np.array([v.pc for v in vs], dtype=np.int64),
            "halted": np.array([v.halted for v in vs], dtype=bool),
            "drf": np.stack([v.drf for v in vs]),
            "arf": np.stack([v.arf for v in vs]),
            "pgsm": np.stack([v.pgsm for v in vs]),
            "vsm": np.stack([v.vsm for v in vs]),
            "bank_addr": np.array(addrs, dtype=np.int64).reshape(-1, 3),
            "bank_data": np.array(data, dtype=np.uint32).reshape(-1, LANES),
        }
