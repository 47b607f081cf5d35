"""The SIMB (single-instruction-multiple-bank) instruction set of iPIM (Table I).

Defined once, as Amaranth ``enum``/``data`` layouts, and imported by the
control core's decoder (:mod:`pimforge.rtl.ipim`), the assembler and
disassembler (:mod:`pimforge.rtl.ipim.asm`), the instruction-set simulator
(:mod:`pimforge.verif.models.ipim.iss`) and the compiler.

Word format
-----------
Every instruction is one 128-bit word, the width of a VSM line and of the
vault's TSV transfer (Sec. IV-C), so the VSM can hold programs offloaded by the
host. The low :data:`OPCODE_BITS` bits are the :class:`Opcode`; the rest is the
format of that opcode, one ``StructLayout`` per format joined in a
``UnionLayout`` (:data:`INSTRUCTION`). Unused bits are zero.

Machine model
-------------
- A vault has up to :data:`MASK_BITS` PEs (``pgs x pes_per_pg``), PE ``p`` being
  bit ``p`` of ``simb_mask`` (PE ``p`` is PE ``p % pes_per_pg`` of PG
  ``p // pes_per_pg``). Mask bits at or above ``pgs x pes_per_pg`` name no PE
  and are ignored (so an all-ones mask means every PE of any config).
- DataRF: entries of 4 x 32 bits (a *vector*, one bank access of 128 bits).
  AddrRF: 32-bit scalars; A0..A3 are read-only and hold peID, pgID, vaultID,
  chipID (Sec. IV-E): the PE's number in its PG (``p % pes_per_pg``), the PG's
  in its vault, the vault's in its cube and the cube's, the numbering ``req``
  addresses a PE by. CtrlRF: 32-bit scalars on the control core.
- Bank, PGSM and VSM addresses count vectors (16 bytes).
- An address operand with its ``*_ind`` bit set names an AddrRF entry of each
  PE, whose value is the address (indirect addressing, Sec. IV-C); ``req``
  and ``seti_vsm`` run on the vault and take direct addresses only.
- Vector lanes are numbered 0..3 from the least significant 32 bits.
- A register entry or a (direct or indirect) address beyond the configured
  size of its store is a program error: the hardware's behaviour is undefined
  and the instruction-set simulator stops with an error naming it.

Semantics (``d``, ``a``, ``b`` = ``dst``, ``src1``, ``src2``)
-------------------------------------------------------------
COMP      for each lane ``i`` set in ``vec_mask``: ``d[i] = op(a[i], b[i])``
          (mode VV) or ``op(a[lane], b[i])`` (mode SV, ``a[lane]`` broadcast);
          lanes outside ``vec_mask`` keep their value. ``dtype`` picks FP32
          (IEEE-754, round to nearest even, the ``rtl/fp`` units) or INT32
          (two's complement, wrapping). MAC is ``d + a * b`` (FP32: the product
          is rounded, then the sum: a multiplier followed by an adder).
          SHIFT, CROP_LSB and CROP_MSB read ``b`` as INT32 in both dtypes.
          SHIFT: INT32 ``a << b`` for ``b >= 0``, arithmetic ``a >> -b``
          otherwise (``|b| >= 32`` saturates to 0 or the sign); FP32
          ``a * 2**b`` rounded once to nearest even (LDEXP of ``rtl/fp/shift``,
          ``b`` being the lane's bits read as an INT32, not as a float; ``b``
          beyond -512..511 gives the result of the nearer bound, which is
          already +-0 or +-inf for every finite nonzero ``a``). AND/OR/XOR:
          bitwise. CROP_LSB: the ``b`` least significant bits of ``a`` (others
          0); CROP_MSB: the ``b`` most significant bits (others 0); ``b``
          outside 0..32 is clamped (negative: 0). FP32 takes ADD SUB MUL MAC SHIFT; the
          logical ops are bitwise and take INT32.
CALC_ARF  ``A[d] = op(A[a], A[b])``, INT32 only (ADD SUB MUL SHIFT AND OR XOR
          CROP_LSB CROP_MSB).
LD_RF     ``D[drf] = bank[dram]``;  ST_RF ``bank[dram] = D[drf]``.
LD_PGSM   ``PGSM[pgsm] = bank[dram]`` (the PE's own bank into its PG's PGSM);
ST_PGSM   ``bank[dram] = PGSM[pgsm]``.
RD_PGSM   ``D[drf] = PGSM[pgsm]``;  WR_PGSM ``PGSM[pgsm] = D[drf]``.
RD_VSM    ``D[drf] = VSM[vsm]``;    WR_VSM ``VSM[vsm] = D[drf]``.
MOV_DRF   ``D[drf][lane] = A[arf]`` (into the DataRF);
MOV_ARF   ``A[arf] = D[drf][lane]`` (into the AddrRF).
RESET     ``D[drf] = 0``.
SETI_VSM  ``VSM[vsm][i] = imm`` for each lane ``i`` in ``vec_mask`` (vault unit).
REQ       ``VSM[vsm] = bank[dram]`` of PE ``pe`` of PG ``pg`` of vault ``vault``
          of cube ``chip``, over the network; asynchronous: the remote bank is
          read at some time between the issue and the commit of the issuing
          vault's next ``sync`` (or its ``halt``), and the line lands in the
          VSM before that commit. Later instructions of the issuing vault that
          touch ``VSM[vsm]`` see the landed line (the hazard check holds them).
          A program whose result depends on the exact time (a vault writes that
          bank vector between the enclosing syncs) is racy.
JUMP      ``pc = C[target]``.
CJUMP     ``pc = C[target]`` if ``cond(C[src])`` (Z, NZ, LTZ, GEZ on ``C[src]`` as
          INT32), else ``pc + 1``.
CALC_CRF  ``C[d] = op(C[a], C[b])``, INT32 (as CALC_ARF).
SETI_CRF  ``C[d] = imm``.
SYNC      barrier across the vaults of the machine on ``phase_id``: commits once
          every earlier instruction of every vault has finished (Sec. IV-D).
          A vault that has halted takes no part in later barriers (they commit
          when every vault still running has arrived); vaults meeting at one
          barrier with different ``phase_id`` is a program error.
HALT      end of the vault's program (not in Table I: the host needs to know when
          a vault is done); it waits for the vault's instructions (and
          ``req``) to finish.
NOP       does nothing (padding, not in Table I).

When several masked PEs of one PG write one PGSM address, or several PEs one
VSM address, in the same instruction, which write lands last is unspecified:
the hardware serializes them in its scratchpads' round-robin order, the
instruction-set simulator lets the highest-numbered PE win. Programs give such
writes per-PE addresses (indirect, from A0/A1) or a one-PE mask.
A two-instruction move between PEs is ``ld_pgsm`` from the source PE then
``rd_pgsm`` into the destination PE (Sec. IV-E).

Hazards
-------
:func:`accesses` gives, for each instruction, the storage it reads and writes
as :class:`Resource` items; the control core stalls an instruction that has a
true (RAW), anti (WAR) or output (WAW) dependency on one still in its
issued-instruction queue (Sec. IV-B). Register files are tracked per entry;
a scratchpad or bank access is tracked per address when direct and as the
whole memory when indirect (its address is unknown at issue).

Two bank accesses that both enter their PE's request queue when dispatched
(``ld_rf``, ``st_rf``, ``ld_pgsm``: :attr:`Resource.queued`) are no hazard for
each other: each PE has a single memory request queue (Sec. V-C), taken in issue
order, whose controller never reorders requests to the same address
(:class:`~pimforge.rtl.mem.vault_ctrl.VaultController`), so their memory
dependency holds without a stall, and the accesses reach the DRAM "with the same
order as they appear in the input program" (Sec. V-C) as the compiler ordered
them. ``st_pgsm`` writes the bank only after its PGSM read, later than its
dispatch, so it keeps its bank hazards against every bank access.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import NamedTuple

from amaranth.lib import data, enum

__all__ = ["ISA_VERSION", "WORD_BITS", "OPCODE_BITS", "MASK_BITS", "LANES", "DRAM_BITS",
           "SPM_BITS", "REG_BITS", "IMM_BITS", "RESERVED_ARF", "Opcode", "AluOp", "DType",
           "Mode", "Cond", "Store", "Resource", "INSTRUCTION", "FORMATS", "Instr", "encode",
           "decode", "accesses", "VAULT_OPS", "PE_OPS", "FP_OPS", "INT_ONLY_OPS"]

ISA_VERSION = 1
WORD_BITS = 128
OPCODE_BITS = 5
#: simb_mask width: the most PEs a vault can have.
MASK_BITS = 64
#: SIMD lanes of 32 bits (one 128-bit bank access).
LANES = 4
#: Bank address (vectors): 2**24 x 16 B = 256 MiB per bank at most.
DRAM_BITS = 24
#: PGSM / VSM address (vectors): 1 MiB per scratchpad at most.
SPM_BITS = 16
#: DataRF / AddrRF / CtrlRF entry numbers.
REG_BITS = 8
IMM_BITS = 32
#: AddrRF entries hardwired to peID, pgID, vaultID, chipID.
RESERVED_ARF = 4


class Opcode(enum.Enum, shape=OPCODE_BITS):
    NOP = 0
    COMP = 1
    CALC_ARF = 2
    LD_RF = 3
    ST_RF = 4
    LD_PGSM = 5
    ST_PGSM = 6
    RD_PGSM = 7
    WR_PGSM = 8
    RD_VSM = 9
    WR_VSM = 10
    MOV_DRF = 11
    MOV_ARF = 12
    SETI_VSM = 13
    RESET = 14
    REQ = 15
    JUMP = 16
    CJUMP = 17
    CALC_CRF = 18
    SETI_CRF = 19
    SYNC = 20
    HALT = 21


class AluOp(enum.Enum, shape=4):
    ADD = 0
    SUB = 1
    MUL = 2
    MAC = 3
    SHIFT = 4
    AND = 5
    OR = 6
    XOR = 7
    CROP_LSB = 8
    CROP_MSB = 9


class DType(enum.Enum, shape=1):
    INT32 = 0
    FP32 = 1


class Mode(enum.Enum, shape=1):
    VV = 0      # vector-vector
    SV = 1      # scalar-vector: a[lane] broadcast


class Cond(enum.Enum, shape=2):
    Z = 0
    NZ = 1
    LTZ = 2
    GEZ = 3


#: The ops each dtype of COMP takes.
FP_OPS = frozenset({AluOp.ADD, AluOp.SUB, AluOp.MUL, AluOp.MAC, AluOp.SHIFT})
#: Ops of the integer ALUs of CALC_ARF / CALC_CRF (no accumulator there).
INT_ONLY_OPS = frozenset(AluOp) - {AluOp.MAC}

_MASK = ("simb_mask", MASK_BITS)
_D = ("dram", DRAM_BITS), ("dram_ind", 1)
_P = ("pgsm", SPM_BITS), ("pgsm_ind", 1)
_V = ("vsm", SPM_BITS), ("vsm_ind", 1)
_R = ("drf", REG_BITS)

#: Operand fields of each format, in bit order after the opcode.
FORMATS: dict[str, tuple[tuple[str, object], ...]] = {
    "none": (),
    "comp": (("op", AluOp), ("dtype", DType), ("mode", Mode), ("lane", 2), ("dst", REG_BITS),
             ("src1", REG_BITS), ("src2", REG_BITS), ("vec_mask", LANES), _MASK),
    "calc": (("op", AluOp), ("dst", REG_BITS), ("src1", REG_BITS), ("src2", REG_BITS), _MASK),
    "rf_bank": (*_D, _R, _MASK),
    "pgsm_bank": (*_D, *_P, _MASK),
    "rf_pgsm": (*_P, _R, _MASK),
    "rf_vsm": (*_V, _R, _MASK),
    "mov": (("arf", REG_BITS), _R, ("lane", 2), _MASK),
    "reset": (_R, _MASK),
    "seti_vsm": (("vsm", SPM_BITS), ("vec_mask", LANES), ("imm", IMM_BITS)),
    "req": (("chip", 4), ("vault", 6), ("pg", 4), ("pe", 4), ("dram", DRAM_BITS),
            ("vsm", SPM_BITS)),
    "jump": (("cond", Cond), ("src", REG_BITS), ("target", REG_BITS)),
    "calc_crf": (("op", AluOp), ("dst", REG_BITS), ("src1", REG_BITS), ("src2", REG_BITS)),
    "seti_crf": (("dst", REG_BITS), ("imm", IMM_BITS)),
    "sync": (("phase", 16),),
}

_FORMAT_OF = {
    Opcode.NOP: "none", Opcode.HALT: "none", Opcode.COMP: "comp", Opcode.CALC_ARF: "calc",
    Opcode.LD_RF: "rf_bank", Opcode.ST_RF: "rf_bank", Opcode.LD_PGSM: "pgsm_bank",
    Opcode.ST_PGSM: "pgsm_bank", Opcode.RD_PGSM: "rf_pgsm", Opcode.WR_PGSM: "rf_pgsm",
    Opcode.RD_VSM: "rf_vsm", Opcode.WR_VSM: "rf_vsm", Opcode.MOV_DRF: "mov",
    Opcode.MOV_ARF: "mov", Opcode.RESET: "reset", Opcode.SETI_VSM: "seti_vsm",
    Opcode.REQ: "req", Opcode.JUMP: "jump", Opcode.CJUMP: "jump", Opcode.CALC_CRF: "calc_crf",
    Opcode.SETI_CRF: "seti_crf", Opcode.SYNC: "sync",
}

#: Opcodes the SIMB controller broadcasts to the PEs of simb_mask.
PE_OPS = frozenset(op for op, f in _FORMAT_OF.items() if "simb_mask" in dict(FORMATS[f]))
#: Opcodes executed by a vault-level unit or the control core itself.
VAULT_OPS = frozenset(Opcode) - PE_OPS

# Formats without operands (nop, halt) have no member: a zero-width member becomes a
# ``wire [-1:0]`` in the Verilog of every port that carries an instruction, which
# Verilator's lint rejects (ASCRANGE).
_PAYLOAD = data.UnionLayout({name: data.StructLayout(dict(f)) for name, f in FORMATS.items()
                             if f})

#: The 128-bit instruction word: opcode, then the opcode's format.
INSTRUCTION = data.StructLayout({"opcode": Opcode, "args": _PAYLOAD,
                                 "_pad": WORD_BITS - OPCODE_BITS - _PAYLOAD.size})
assert INSTRUCTION.size == WORD_BITS


def format_of(op: Opcode) -> str:
    """The name of *op*'s format in :data:`FORMATS`."""
    return _FORMAT_OF[op]


#: The opcodes with rules beyond their fields' ranges (:meth:`Instr._check_special`).
_SPECIAL_OPS = frozenset({Opcode.COMP, Opcode.CALC_ARF, Opcode.CALC_CRF, Opcode.MOV_ARF})


@dataclass(frozen=True)
class Instr:
    """One instruction as Python values; fields outside the opcode's format stay 0.

    Field names are those of :data:`FORMATS`; ``op`` is the ALU operation of
    ``comp``/``calc_arf``/``calc_crf``.
    """

    opcode: Opcode
    op: AluOp = AluOp.ADD
    dtype: DType = DType.INT32
    mode: Mode = Mode.VV
    lane: int = 0
    dst: int = 0
    src1: int = 0
    src2: int = 0
    vec_mask: int = 0xF
    simb_mask: int = 0
    dram: int = 0
    dram_ind: int = 0
    pgsm: int = 0
    pgsm_ind: int = 0
    vsm: int = 0
    vsm_ind: int = 0
    drf: int = 0
    arf: int = 0
    imm: int = 0
    chip: int = 0
    vault: int = 0
    pg: int = 0
    pe: int = 0
    cond: Cond = Cond.Z
    src: int = 0
    target: int = 0
    phase: int = 0

    def __post_init__(self):
        if not isinstance(self.opcode, Opcode):
            raise ValueError(f"opcode must be an Opcode, not {self.opcode!r}")
        if isinstance(self.imm, int) and -(1 << 31) <= self.imm < 0:
            object.__setattr__(self, "imm", self.imm & 0xFFFF_FFFF)   # one form per word
        # by the member's value: an Enum member's hash is a Python call
        chk = _CHECKS[self.opcode._value_]
        if chk.outside(self) != chk.defaults:
            for n, d in zip(chk.names, chk.defaults):
                if getattr(self, n) != d:
                    raise ValueError(f"{self.opcode.name.lower()} has no field {n} "
                                     f"(given {_show(getattr(self, n))})")
        for n, check in chk.inside:
            v = getattr(self, n)
            if isinstance(check, tuple):               # an integer field: (lo, hi, range)
                lo, hi, rng = check
                if not ((n == "imm" or isinstance(v, int)) and lo <= v < hi):
                    raise ValueError(f"{self.opcode.name.lower()} field {n} must be {rng}, "
                                     f"not {v!r}")
            elif type(v) is not check:                 # an enum field (enums have no subclasses)
                raise ValueError(f"{self.opcode.name.lower()} field {n} must be a "
                                 f"{check.__name__}, not {v!r}")
        if chk.special:
            self._check_special()

    def _check_special(self):
        """The rules of the opcodes of :data:`_SPECIAL_OPS` beyond their fields' ranges."""
        if self.opcode is Opcode.COMP and self.dtype is DType.FP32 and self.op not in FP_OPS:
            raise ValueError(f"comp {self.op.name.lower()} is bitwise: it takes dtype int32, "
                             f"not fp32")
        if self.opcode in (Opcode.CALC_ARF, Opcode.CALC_CRF) and self.op not in INT_ONLY_OPS:
            raise ValueError(f"{self.opcode.name.lower()} has no {self.op.name.lower()} "
                             f"(allowed: {', '.join(o.name.lower() for o in INT_ONLY_OPS)})")
        if self.opcode is Opcode.CALC_ARF and self.dst < RESERVED_ARF:
            raise ValueError(f"calc_arf cannot write A{self.dst}: A0-A3 hold the PE's ids")
        if self.opcode is Opcode.MOV_ARF and self.arf < RESERVED_ARF:
            raise ValueError(f"mov_arf cannot write A{self.arf}: A0-A3 hold the PE's ids")

    @property
    def format(self) -> str:
        return _FORMAT_OF[self.opcode]

    def operands(self) -> dict[str, object]:
        """The fields of this instruction's format, by name."""
        return {n: getattr(self, n) for n, _ in FORMATS[self.format]}


class _Checks(NamedTuple):
    """What :class:`Instr` checks under one opcode: the fields outside its format keep
    their defaults (read at once by *outside*), and each field of the format is in range
    (``(lo, hi, range text)`` for an integer, the type of an enum)."""
    names: tuple[str, ...]
    defaults: tuple
    outside: Callable[[object], tuple]
    inside: tuple[tuple[str, object], ...]
    special: bool            # the opcode is one of _SPECIAL_OPS


def _checks(op: Opcode) -> _Checks:
    fmt = dict(FORMATS[_FORMAT_OF[op]])
    outside = [f for f in fields(Instr) if f.name != "opcode" and f.name not in fmt]
    inside = []
    for f in fields(Instr):
        n = f.name
        if n not in fmt:
            continue
        if not isinstance(fmt[n], int):
            inside.append((n, fmt[n]))
        elif n == "imm":
            inside.append((n, (-(1 << 31), 1 << 32,
                               f"between {-(1 << 31)} and {(1 << 32) - 1}")))
        else:
            inside.append((n, (0, 1 << fmt[n], f"between 0 and {(1 << fmt[n]) - 1}")))
    names = tuple(f.name for f in outside)
    # attrgetter of one name gives the value, not a 1-tuple
    get = attrgetter(*names) if len(names) > 1 else (lambda i: (getattr(i, names[0]),))
    return _Checks(names, tuple(f.default for f in outside), get, tuple(inside),
                   op in _SPECIAL_OPS)


#: By opcode value, the checks :meth:`Instr.__post_init__` makes (made once: a compile
#: makes hundreds of thousands of instructions).
_CHECKS: list[_Checks | None] = [None] * (1 << OPCODE_BITS)
for _op in Opcode:
    _CHECKS[_op.value] = _checks(_op)
del _op


def _show(v):
    return v.name.lower() if isinstance(v, enum.Enum) else repr(v)


def _fields_offsets(fmt: str):
    if not FORMATS[fmt]:
        return
    lay = _PAYLOAD[fmt].shape
    base = OPCODE_BITS
    for n, _ in FORMATS[fmt]:
        f = lay[n]
        yield n, base + f.offset, f.width


def encode(ins: Instr) -> int:
    """The 128-bit instruction word of *ins* (layout :data:`INSTRUCTION`)."""
    word = ins.opcode.value
    for n, off, width in _fields_offsets(ins.format):
        v = getattr(ins, n)
        v = v.value if isinstance(v, enum.Enum) else int(v)
        word |= (v & ((1 << width) - 1)) << off
    return word


class DecodeError(ValueError):
    """A word that is not an instruction of this ISA version."""


def decode(word: int) -> Instr:
    """Inverse of :func:`encode` (``imm`` comes back unsigned)."""
    if not 0 <= word < (1 << WORD_BITS):
        raise DecodeError(f"an instruction word has {WORD_BITS} bits, not {word!r}")
    try:
        opcode = Opcode(word & ((1 << OPCODE_BITS) - 1))
    except ValueError:
        raise DecodeError(f"unknown opcode {word & ((1 << OPCODE_BITS) - 1)} in word "
                          f"{word:#034x}") from None
    fmt = dict(FORMATS[_FORMAT_OF[opcode]])
    vals: dict[str, object] = {}
    used = (1 << OPCODE_BITS) - 1
    for n, off, width in _fields_offsets(_FORMAT_OF[opcode]):
        v = (word >> off) & ((1 << width) - 1)
        used |= ((1 << width) - 1) << off
        shape = fmt[n]
        vals[n] = v if isinstance(shape, int) else shape(v)
    if word & ~used:
        raise DecodeError(f"{opcode.name.lower()} word {word:#034x} sets bits outside its "
                          f"format")
    try:
        return Instr(opcode, **vals)
    except ValueError as e:
        raise DecodeError(f"word {word:#034x}: {e}") from None


class Store(enum.Enum):
    """Storage classes of the hazard check."""

    DRF = 0
    ARF = 1
    CRF = 2
    BANK = 3
    PGSM = 4
    VSM = 5


class Resource(NamedTuple):
    """One tracked piece of storage; ``index`` None = the whole store. ``queued``: a
    bank access that enters its PE's request queue in issue order (see Hazards)."""

    store: Store
    index: int | None
    queued: bool = False


def _mem(store: Store, addr: int, ind: int) -> Resource:
    return Resource(store, None if ind else addr)


def accesses(ins: Instr) -> tuple[frozenset[Resource], frozenset[Resource]]:
    """``(reads, writes)`` of *ins* for the dependency check (see the module docstring).

    Register entries are per entry; indirect addresses also read their AddrRF
    entry. ``mac`` reads its destination; writes under ``vec_mask`` or of one
    lane (``mov_drf``) use per-lane write enables and read nothing. Jumps read
    their CtrlRF entries (the core resolves them at issue). A ``sync`` is
    ordered by the core itself (it waits for the queue to drain), so it lists
    nothing.
    """
    op = ins.opcode
    r: set[Resource] = set()
    w: set[Resource] = set()
    D, A, C = Store.DRF, Store.ARF, Store.CRF

    def addr(store: Store, a: int, ind: int) -> Resource:
        if ind:
            r.add(Resource(A, a))
        return _mem(store, a, ind)

    if op is Opcode.COMP:
        r |= {Resource(D, ins.src1), Resource(D, ins.src2)}
        if ins.op is AluOp.MAC:
            r.add(Resource(D, ins.dst))
        w.add(Resource(D, ins.dst))
    elif op is Opcode.CALC_ARF:
        r |= {Resource(A, ins.src1), Resource(A, ins.src2)}
        w.add(Resource(A, ins.dst))
    elif op in (Opcode.LD_RF, Opcode.ST_RF):
        bank = addr(Store.BANK, ins.dram, ins.dram_ind)._replace(queued=True)
        (w if op is Opcode.LD_RF else r).add(Resource(D, ins.drf))
        (r if op is Opcode.LD_RF else w).add(bank)
    elif op in (Opcode.LD_PGSM, Opcode.ST_PGSM):
        bank = addr(Store.BANK, ins.dram, ins.dram_ind)
        pgsm = addr(Store.PGSM, ins.pgsm, ins.pgsm_ind)
        if op is Opcode.LD_PGSM:
            bank = bank._replace(queued=True)
        r.add(bank if op is Opcode.LD_PGSM else pgsm)
        w.add(pgsm if op is Opcode.LD_PGSM else bank)
    elif op in (Opcode.RD_PGSM, Opcode.WR_PGSM):
        pgsm = addr(Store.PGSM, ins.pgsm, ins.pgsm_ind)
        (r if op is Opcode.RD_PGSM else w).add(pgsm)
        (w if op is Opcode.RD_PGSM else r).add(Resource(D, ins.drf))
    elif op in (Opcode.RD_VSM, Opcode.WR_VSM):
        vsm = addr(Store.VSM, ins.vsm, ins.vsm_ind)
        (r if op is Opcode.RD_VSM else w).add(vsm)
        (w if op is Opcode.RD_VSM else r).add(Resource(D, ins.drf))
    elif op is Opcode.MOV_DRF:
        r.add(Resource(A, ins.arf))
        w.add(Resource(D, ins.drf))
    elif op is Opcode.MOV_ARF:
        r.add(Resource(D, ins.drf))
        w.add(Resource(A, ins.arf))
    elif op is Opcode.RESET:
        w.add(Resource(D, ins.drf))
    elif op is Opcode.SETI_VSM:
        w.add(Resource(Store.VSM, ins.vsm))
    elif op is Opcode.REQ:
        w.add(Resource(Store.VSM, ins.vsm))
    elif op in (Opcode.JUMP, Opcode.CJUMP):
        r.add(Resource(C, ins.target))
        if op is Opcode.CJUMP:
            r.add(Resource(C, ins.src))
    elif op is Opcode.CALC_CRF:
        r |= {Resource(C, ins.src1), Resource(C, ins.src2)}
        w.add(Resource(C, ins.dst))
    elif op is Opcode.SETI_CRF:
        w.add(Resource(C, ins.dst))
    return frozenset(r), frozenset(w)


def conflicts(a: frozenset[Resource], b: frozenset[Resource]) -> bool:
    """Whether two resource sets overlap (an index of None covers its whole store; two
    queued bank accesses never do)."""
    for x in a:
        for y in b:
            if x.store is y.store and not (x.queued and y.queued) and (
                    x.index is None or y.index is None or x.index == y.index):
                return True
    return False


__all__ += ["format_of", "DecodeError", "conflicts"]
