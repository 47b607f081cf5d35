"""Assembler and disassembler of the SIMB ISA (:mod:`pimforge.rtl.ipim.isa`).

:func:`assemble` turns program text into :class:`~pimforge.rtl.ipim.isa.Instr`
values, :func:`disassemble` writes them back as text that assembles to the same
words, and :func:`to_hex` / :func:`from_hex` read and write the hex program
format (one 32-hex-digit, 128-bit word per line, as the VSM and the program
memory hold them). Every encoding comes from ``isa.py``: mnemonics are the
lower-case :class:`~pimforge.rtl.ipim.isa.Opcode` names, suffixes and keyword
values the lower-case names of its enums, keys its field names.

Grammar
-------
::

    line     := { LABEL ":" } [ instr ] [ "#" comment ]
    instr    := MNEMONIC { "." SUFFIX } [ operand { "," operand } ] { KEY "=" VALUE }
    operand  := REG | REG "[" LANE "]" | [ MEM ] "[" ADDR "]" | IMM
    REG      := "d" N (DataRF) | "a" N (AddrRF) | "c" N (CtrlRF)
    ADDR     := INT (direct) | "a" N (indirect: the address is AddrRF entry N of each PE)
    MEM      := "bank" | "dram" | "pgsm" | "vsm"   (optional; checked against the slot)
    IMM      := INT | "@" LABEL (the label's pc) | "fp32(" FLOAT ")" (its bit pattern)
    INT      := decimal, 0x hex, 0b binary or 0o octal, optionally negative

Commas and blanks both separate operands. Positional operands put the
destination first, as in the table below; every field can also be given as
``key=value`` (a field of the opcode's format in ``isa.FORMATS``, or the aliases
``mask`` = ``simb_mask`` and ``vec`` = ``vec_mask``), but not both ways.
``mask`` defaults to all ones (every PE: bits beyond the vault's PEs are
ignored) and also takes ``all``; ``vec`` defaults to ``0b1111``.

=================================  ================================================
form                               meaning
=================================  ================================================
``comp.DTYPE.OP dD, dA, dB``       ``D = A op B`` (mode VV); ``dA[l]`` is mode SV
                                   with lane ``l`` of A broadcast. DTYPE ``int32``
                                   (default) or ``fp32`` (aliases ``i32``/``f32``)
``calc_arf.OP aD, aA, aB``         AddrRF ALU (OP default ``add``)
``calc_crf.OP cD, cA, cB``         CtrlRF ALU
``ld_rf dR, [m]``                  ``st_rf [m], dR``
``ld_pgsm [p], [m]``               ``st_pgsm [m], [p]`` (``pgsm[p]``/``bank[m]``
                                   may name the memories)
``rd_pgsm dR, [p]``                ``wr_pgsm [p], dR``
``rd_vsm dR, [v]``                 ``wr_vsm [v], dR``
``mov_drf dR[l], aN``              ``mov_arf aN, dR[l]`` (lane ``l``, default 0)
``reset dR``
``seti_vsm [v], IMM vec=..``       direct address only
``req [v], [m] chip= vault= pg= pe=``   remote PE's bank vector into the VSM
                                   (direct addresses; ids default 0)
``jump cT``                        ``cjump.COND cS, cT`` (COND z, nz, ltz, gez)
``seti_crf cD, IMM``
``sync N``                         ``halt``, ``nop``
=================================  ================================================

Example::

    # sum 4 vectors of each PE's bank into d0
            seti_crf c0, 4          # trip count
            seti_crf c1, @loop
            seti_crf c2, 1
            reset d0
    loop:   ld_rf d1, [a4] mask=0xf
            comp.fp32.add d0, d0, d1
            calc_arf.add a4, a4, a5
            calc_crf.sub c0, c0, c2
            cjump.nz c0, c1
            halt

Errors are :class:`AsmError`, one line naming the source line and what to
change.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import fields

from amaranth.lib import enum

from ..params import shown
from .isa import (
    FORMATS,
    MASK_BITS,
    WORD_BITS,
    AluOp,
    Cond,
    DecodeError,
    DType,
    Instr,
    Mode,
    Opcode,
    decode,
    encode,
    format_of,
)

__all__ = ["AsmError", "DEFAULT_MASK", "MAX_INSTRUCTIONS", "MAX_LINE_CHARS", "assemble",
           "disassemble", "disassemble_one", "to_hex", "from_hex"]

#: ``mask`` when a line gives none: every PE.
DEFAULT_MASK = (1 << MASK_BITS) - 1
_VEC_DEFAULT = 0xF


class AsmError(ValueError):
    """A program text or hex file that is not a valid SIMB program (one line)."""


# Positional operand slots of each opcode, destination first. A slot is
# (kind, field): D/A/C a register of that file, DL a DataRF register with an
# optional [lane] (SV source or the mov lane), M/MD a memory operand (MD: direct
# only), I the immediate, N a plain integer.
_SLOTS: dict[Opcode, tuple[tuple[str, str], ...]] = {
    Opcode.NOP: (), Opcode.HALT: (),
    Opcode.COMP: (("D", "dst"), ("DS", "src1"), ("D", "src2")),
    Opcode.CALC_ARF: (("A", "dst"), ("A", "src1"), ("A", "src2")),
    Opcode.CALC_CRF: (("C", "dst"), ("C", "src1"), ("C", "src2")),
    Opcode.LD_RF: (("D", "drf"), ("M", "dram")),
    Opcode.ST_RF: (("M", "dram"), ("D", "drf")),
    Opcode.LD_PGSM: (("M", "pgsm"), ("M", "dram")),
    Opcode.ST_PGSM: (("M", "dram"), ("M", "pgsm")),
    Opcode.RD_PGSM: (("D", "drf"), ("M", "pgsm")),
    Opcode.WR_PGSM: (("M", "pgsm"), ("D", "drf")),
    Opcode.RD_VSM: (("D", "drf"), ("M", "vsm")),
    Opcode.WR_VSM: (("M", "vsm"), ("D", "drf")),
    Opcode.MOV_DRF: (("DL", "drf"), ("A", "arf")),
    Opcode.MOV_ARF: (("A", "arf"), ("DL", "drf")),
    Opcode.RESET: (("D", "drf"),),
    Opcode.SETI_VSM: (("MD", "vsm"), ("I", "imm")),
    Opcode.REQ: (("MD", "vsm"), ("MD", "dram")),
    Opcode.JUMP: (("C", "target"),),
    Opcode.CJUMP: (("C", "src"), ("C", "target")),
    Opcode.SETI_CRF: (("C", "dst"), ("I", "imm")),
    Opcode.SYNC: (("N", "phase"),),
}

#: The enum field a mnemonic suffix sets, per opcode.
_SUFFIXES: dict[Opcode, tuple[str, ...]] = {
    Opcode.COMP: ("dtype", "op"), Opcode.CALC_ARF: ("op",), Opcode.CALC_CRF: ("op",),
    Opcode.CJUMP: ("cond",),
}
_ENUMS: dict[str, type[enum.Enum]] = {"op": AluOp, "dtype": DType, "mode": Mode, "cond": Cond}
_DTYPE_ALIASES = {"i32": DType.INT32, "f32": DType.FP32}
_KEY_ALIASES = {"mask": "simb_mask", "vec": "vec_mask"}
_MEM_NAMES = {"dram": ("bank", "dram"), "pgsm": ("pgsm",), "vsm": ("vsm",)}
_REG_PREFIX = {"D": "d", "DS": "d", "DL": "d", "A": "a", "C": "c"}
#: Register fields of each file (their key values may be written as registers).
_REG_FIELDS = {"dst": None, "src1": None, "src2": None, "drf": "d", "arf": "a", "src": "c",
               "target": "c"}
_MNEMONICS = {op.name.lower(): op for op in Opcode}
_DEFAULTS = {f.name: f.default for f in fields(Instr)}

_LABEL = re.compile(r"\s*([A-Za-z_.$][\w.$]*)\s*:(?!=)")
_LABEL_NAME = re.compile(r"[A-Za-z_.$][\w.$]*\Z")
_REG = re.compile(r"([dac])(\d+)\Z")
_REG_LANE = re.compile(r"d(\d+)\[(.+)\]\Z")
_MEMORY = re.compile(r"([a-z]*)\[(.*)\]\Z")
_FP32 = re.compile(r"fp32\((.*)\)\Z")


class _Line:
    """Error reporting for one source line."""

    def __init__(self, source: str, number: int):
        self.where = f"{source}:{number}" if source else f"line {number}"

    def error(self, msg: str) -> AsmError:
        return AsmError(f"{self.where}: {msg}")


def _int(tok: str, ln: _Line, what: str) -> int:
    try:
        return int(tok, 0)
    except ValueError:
        raise ln.error(f"{what} must be an integer (decimal, 0x.., 0b..), not "
                       f"{shown(tok)}") from None


def _imm(tok: str, ln: _Line, labels: dict[str, int]) -> int:
    if tok.startswith("@"):
        name = tok[1:]
        if name not in labels:
            known = ", ".join(sorted(labels)) or "none defined"
            raise ln.error(f"unknown label {shown(name)} (labels: {known}); define it as "
                           f"'{name}:' before an instruction")
        return labels[name]
    m = _FP32.match(tok)
    if m:
        try:
            x = float(m.group(1))
            if not math.isfinite(x):     # 1e400 reads as inf: an overflow, not a value
                raise OverflowError
            return struct.unpack("<I", struct.pack("<f", x))[0]
        except (ValueError, OverflowError):
            raise ln.error(f"fp32(...) needs a number within the binary32 range, not "
                           f"{shown(m.group(1))}") from None
    try:
        v = int(tok, 0)
    except ValueError:
        raise ln.error(f"an immediate must be an integer, @label or fp32(number), not "
                       f"{shown(tok)}") from None
    if not -(1 << 31) <= v < (1 << 32):
        raise ln.error(f"an immediate must be between {-(1 << 31)} and {(1 << 32) - 1}, "
                       f"not {tok}")
    return v


def _reg(tok: str, prefix: str, ln: _Line, what: str) -> int:
    m = _REG.match(tok.lower())
    if not m or m.group(1) != prefix:
        file = {"d": "DataRF", "a": "AddrRF", "c": "CtrlRF"}[prefix]
        raise ln.error(f"{what} must be a {file} register {prefix}N, not {shown(tok)}")
    return int(m.group(2))


def _enum(name: str, value: str, ln: _Line):
    cls = _ENUMS[name]
    v = value.lower()
    if name == "dtype" and v in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[v]
    for member in cls:
        if member.name.lower() == v:
            return member
    raise ln.error(f"{name} must be one of {', '.join(m.name.lower() for m in cls)}, "
                   f"not {shown(value)}")


def _tokens(text: str) -> list[str]:
    # Blanks inside brackets and parentheses belong to their operand.
    out, cur, depth = [], "", 0
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if depth <= 0 and (ch.isspace() or ch == ","):
            if cur:
                out.append(cur)
            cur = ""
            depth = max(depth, 0)
        elif not ch.isspace():
            cur += ch
    if cur:
        out.append(cur)
    return out


def _set(vals: dict, field: str, value, ln: _Line) -> None:
    if field in vals:
        raise ln.error(f"{field} is given twice; give it once (positionally or as "
                       f"{field}=...)")
    vals[field] = value


def _positional(kind: str, field: str, tok: str, op: Opcode, vals: dict, ln: _Line,
                labels: dict[str, int]) -> None:
    name = op.name.lower()
    if kind in ("D", "A", "C"):
        _set(vals, field, _reg(tok, _REG_PREFIX[kind], ln, f"{name} operand {field}"), ln)
    elif kind in ("DS", "DL"):
        m = _REG_LANE.match(tok.lower())
        if m:
            lane = _int(m.group(2), ln, "a lane")
            _set(vals, field, int(m.group(1)), ln)
            _set(vals, "lane", lane, ln)
            if kind == "DS":
                _set(vals, "mode", Mode.SV, ln)
        else:
            _set(vals, field, _reg(tok, "d", ln, f"{name} operand {field}"), ln)
    elif kind in ("M", "MD"):
        m = _MEMORY.match(tok.lower())
        if not m:
            raise ln.error(f"{name} operand {field} must be a memory address [N] or [aN], "
                           f"not {shown(tok)}")
        if m.group(1) and m.group(1) not in _MEM_NAMES[field]:
            raise ln.error(f"{name} expects a {_MEM_NAMES[field][0]} address here, not "
                           f"{m.group(1)}[...]")
        inner = m.group(2)
        r = _REG.match(inner)
        if r and r.group(1) == "a":
            if kind == "MD":
                raise ln.error(f"{name} takes a direct {field} address only, not [{inner}]")
            _set(vals, field, int(r.group(2)), ln)
            _set(vals, f"{field}_ind", 1, ln)
        else:
            try:
                addr = int(inner, 0)
            except ValueError:
                how = "an integer" if kind == "MD" else "an integer or an AddrRF entry aN"
                raise ln.error(f"{name} {field} address must be {how}, not "
                               f"[{inner}]") from None
            _set(vals, field, addr, ln)
    elif kind == "I":
        _set(vals, field, _imm(tok, ln, labels), ln)
    else:
        _set(vals, field, _int(tok, ln, f"{name} {field}"), ln)


def _keyword(key: str, value: str, op: Opcode, vals: dict, ln: _Line,
             labels: dict[str, int]) -> None:
    name = op.name.lower()
    field = _KEY_ALIASES.get(key.lower(), key.lower())
    fmt = dict(FORMATS[format_of(op)])
    if field not in fmt:
        keys = sorted({*fmt, *(a for a, f in _KEY_ALIASES.items() if f in fmt)})
        raise ln.error(f"{name} has no field {shown(key)}; its fields: {', '.join(keys) or 'none'}")
    if field in _ENUMS:
        v = _enum(field, value, ln)
    elif field == "imm":
        v = _imm(value, ln, labels)
    elif field == "simb_mask" and value.lower() == "all":
        v = DEFAULT_MASK
    elif field in _REG_FIELDS and not value.lstrip("-").isdigit() and _REG.match(value.lower()):
        prefix = _REG_FIELDS[field] or {"comp": "d", "calc": "a", "calc_crf": "c",
                                         "seti_crf": "c"}[format_of(op)]
        v = _reg(value, prefix, ln, f"{name} {field}")
    else:
        v = _int(value, ln, f"{name} {field}")
    _set(vals, field, v, ln)


def _parse(body: str, ln: _Line, labels: dict[str, int]) -> Instr:
    head, *tail = body.split(None, 1)
    rest = tail[0] if tail else ""
    parts = head.lower().split(".")
    mnem, suffixes = parts[0], parts[1:]
    op = _MNEMONICS.get(mnem)
    if op is None:
        raise ln.error(f"unknown mnemonic {shown(mnem)}; use one of {', '.join(_MNEMONICS)}")
    vals: dict[str, object] = {}
    rest = re.sub(r"\s*=\s*", "=", rest)      # mask = 0xff is mask=0xff
    allowed = _SUFFIXES.get(op, ())
    for s in suffixes:
        for field in allowed:
            try:
                v = _enum(field, s, ln)
            except AsmError:
                continue
            _set(vals, field, v, ln)
            break
        else:
            if not allowed:
                raise ln.error(f"{mnem} takes no .suffix, not .{s}")
            opts = [(m.name.lower() for m in _ENUMS[f]) for f in allowed]
            raise ln.error(f"unknown suffix .{s} of {mnem}; use "
                           f"{' / '.join(', '.join(o) for o in opts)}")
    slots = _SLOTS[op]
    pos = 0
    for tok in _tokens(rest):
        if "=" in tok and not tok.startswith("["):
            key, _, value = tok.partition("=")
            if not key or not value:
                raise ln.error(f"write keyword operands as key=value, not {shown(tok)}")
            _keyword(key, value, op, vals, ln, labels)
            continue
        if pos >= len(slots):
            if not slots:
                raise ln.error(f"{mnem} takes no operands; remove {shown(tok)}")
            form = ", ".join(f for _, f in slots)
            raise ln.error(f"{mnem} takes {len(slots)} positional operand(s) ({form}); "
                           f"{shown(tok)} is one too many")
        kind, field = slots[pos]
        _positional(kind, field, tok, op, vals, ln, labels)
        pos += 1
    fmt = dict(FORMATS[format_of(op)])
    if "simb_mask" in fmt:
        vals.setdefault("simb_mask", DEFAULT_MASK)
    missing = [f for k, f in slots[pos:] if f not in vals]
    if missing:
        raise ln.error(f"{mnem} needs {', '.join(missing)}: write it as "
                       f"{_form(op)}")
    try:
        return Instr(op, **vals)
    except ValueError as e:
        raise ln.error(str(e)) from None


def _form(op: Opcode) -> str:
    """A usage line of *op*, from its slots."""
    show = {"D": "dN", "DS": "dN", "DL": "dN[lane]", "A": "aN", "C": "cN", "M": "[addr]",
            "MD": "[addr]", "I": "imm", "N": "n"}
    sfx = "".join(f".{f.upper()}" for f in _SUFFIXES.get(op, ()))
    ops = ", ".join(show[k] for k, _ in _SLOTS[op])
    return f"'{op.name.lower()}{sfx}{' ' + ops if ops else ''}'"


def _strip(line: str) -> str:
    return line.split("#", 1)[0]


#: The largest program memory of any config (``ipim.imem_instructions``).
MAX_INSTRUCTIONS = 1 << 16
#: The longest source line read; a longer one is an error, not a 50 MB allocation.
MAX_LINE_CHARS = 4096


def _lines(text: str | Iterable[str], source: str) -> Iterable[tuple[_Line, str]]:
    """Numbered lines of *text* (a string, or lines read lazily from a file)."""
    it = text.splitlines() if isinstance(text, str) else text
    for n, raw in enumerate(it, 1):
        ln = _Line(source, n)
        if len(raw) > MAX_LINE_CHARS:
            raise ln.error(f"the line is longer than {MAX_LINE_CHARS} characters "
                           f"({shown(raw)})")
        yield ln, raw.rstrip("\r\n")


def _full(ln: _Line, capacity: int) -> AsmError:
    return ln.error(f"the program does not fit the program memory: this is instruction "
                    f"{capacity + 1}, and it holds {capacity} (raise ipim.imem_instructions "
                    "or shorten the program)")


def assemble(text: str | Iterable[str], *, source: str = "",
             capacity: int = MAX_INSTRUCTIONS) -> list[Instr]:
    """Assemble program *text* (grammar in the module docstring).

    Parameters
    ----------
    text : str or iterable of str
        The program, or its lines (an open file is read lazily: reading stops at the
        first error, the capacity included).
    source : str
        File name used in error messages (``FILE:LINE: ...``).
    capacity : int
        Instructions the program memory holds; the line of the first one past it is
        an error (before the rest of the text is read).

    Returns
    -------
    list of Instr
        One per instruction line; a label's value is the index of the
        instruction that follows it.

    Raises
    ------
    AsmError
        Unknown mnemonic, suffix, key or label, a duplicate label, a field out
        of range, a missing or extra operand.
    """
    labels: dict[str, int] = {}
    bodies: list[tuple[_Line, str]] = []
    for ln, raw in _lines(text, source):
        body = _strip(raw)
        while True:
            m = _LABEL.match(body)
            if not m:
                break
            name = m.group(1)
            if name in labels:
                raise ln.error(f"label {shown(name)} is defined twice (first at pc "
                               f"{labels[name]}); rename one")
            labels[name] = len(bodies)
            body = body[m.end():]
        if body.strip():
            if len(bodies) == capacity:
                raise _full(ln, capacity)
            bodies.append((ln, body.strip()))
    return [_parse(body, ln, labels) for ln, body in bodies]


# -- Disassembly -----------------------------------------------------------------

def _mem(ins: Instr, field: str, name: str = "") -> str:
    v = getattr(ins, field)
    ind = getattr(ins, f"{field}_ind", 0)
    return f"{name}[a{v}]" if ind else f"{name}[{v:#x}]"


def disassemble_one(ins: Instr) -> str:
    """One instruction as assembly text (no label, no comment)."""
    op = ins.opcode
    name = op.name.lower()
    sfx = "".join(f".{getattr(ins, f).name.lower()}" for f in _SUFFIXES.get(op, ()))
    shown: set[str] = set(_SUFFIXES.get(op, ()))
    ops: list[str] = []
    for kind, field in _SLOTS[op]:
        v = getattr(ins, field)
        shown.add(field)
        if kind in ("D", "A", "C"):
            ops.append(f"{_REG_PREFIX[kind]}{v}")
        elif kind == "DS":
            if ins.mode is Mode.SV:
                ops.append(f"d{v}[{ins.lane}]")
                shown |= {"mode", "lane"}
            else:
                ops.append(f"d{v}")
                shown.add("mode")
        elif kind == "DL":
            ops.append(f"d{v}[{ins.lane}]")
            shown.add("lane")
        elif kind in ("M", "MD"):
            mem = ""
            if op in (Opcode.LD_PGSM, Opcode.ST_PGSM):
                mem = "bank" if field == "dram" else "pgsm"
            ops.append(_mem(ins, field, mem))
            shown.add(f"{field}_ind")
        elif kind == "I":
            ops.append(str(v) if v < 0x10000 else f"{v:#010x}")
        else:
            ops.append(str(v))
    keys: list[str] = []
    for field, _ in FORMATS[format_of(op)]:
        if field in shown:
            continue
        v = getattr(ins, field)
        if field == "simb_mask":
            if v != DEFAULT_MASK:
                keys.append(f"mask={v:#x}")
        elif field == "vec_mask":
            if v != _VEC_DEFAULT:
                keys.append(f"vec={v:#06b}")
        elif field == "lane":
            if v:
                keys.append(f"lane={v}")
        elif op is Opcode.REQ:
            keys.append(f"{field}={v}")
        elif v == _DEFAULTS[field]:
            continue
        elif isinstance(v, enum.Enum):
            keys.append(f"{field}={v.name.lower()}")
        else:
            keys.append(f"{field}={v}")
    text = f"{name}{sfx}"
    if ops:
        text += " " + ", ".join(ops)
    if keys:
        text += " " + " ".join(keys)
    return text


def disassemble(prog: Iterable[Instr], *, pcs: bool = False) -> str:
    """The assembly text of *prog*, one instruction per line.

    Parameters
    ----------
    prog : iterable of Instr
    pcs : bool
        Append each instruction's pc as a comment (targets of ``seti_crf``).

    Returns
    -------
    str
        Text that :func:`assemble` turns back into *prog*.
    """
    lines = []
    for pc, ins in enumerate(prog):
        line = disassemble_one(ins)
        lines.append(f"{line:48s} # {pc}" if pcs else line)
    return "\n".join(lines) + ("\n" if lines else "")


# -- Hex program files -------------------------------------------------------------

_HEX_DIGITS = WORD_BITS // 4


def to_hex(prog: Sequence[Instr]) -> str:
    """The hex program format: one ``WORD_BITS / 4``-digit word per line."""
    return "".join(f"{encode(i):0{_HEX_DIGITS}x}\n" for i in prog)


def from_hex(text: str | Iterable[str], *, source: str = "",
             capacity: int = MAX_INSTRUCTIONS) -> list[Instr]:
    """Read the hex program format (blank lines and ``#`` comments are allowed); *text*
    and *capacity* as in :func:`assemble`."""
    prog: list[Instr] = []
    for ln, raw in _lines(text, source):
        tok = _strip(raw).strip()
        if not tok:
            continue
        if len(prog) == capacity:
            raise _full(ln, capacity)
        if len(tok) != _HEX_DIGITS or not re.fullmatch(r"[0-9a-fA-F]+", tok):
            raise ln.error(f"a program word is {_HEX_DIGITS} hex digits, not {shown(tok)}")
        try:
            prog.append(decode(int(tok, 16)))
        except DecodeError as e:
            raise ln.error(str(e)) from None
    return prog
