"""SIMB assembler, disassembler and hex format: round trips over random programs and errors."""

from __future__ import annotations

import enum
import random

import pytest

from pimforge.rtl.ipim.asm import (
    DEFAULT_MASK,
    AsmError,
    assemble,
    disassemble,
    from_hex,
    to_hex,
)
from pimforge.rtl.ipim.isa import (
    FORMATS,
    FP_OPS,
    INSTRUCTION,
    INT_ONLY_OPS,
    RESERVED_ARF,
    AluOp,
    Cond,
    DType,
    Instr,
    Mode,
    Opcode,
    decode,
    encode,
    format_of,
)

SEED = 20261123


def random_instr(rng: random.Random, op: Opcode) -> Instr:
    """A random valid instruction of *op*: every field of its format drawn over its range."""
    vals = {}
    for name, shape in FORMATS[format_of(op)]:
        if isinstance(shape, int):
            # the ends of each range are likelier than the middle
            vals[name] = rng.choice([0, (1 << shape) - 1, rng.getrandbits(shape)])
        else:
            vals[name] = rng.choice(list(shape))
    if op is Opcode.COMP and vals["dtype"] is DType.FP32:
        vals["op"] = rng.choice(sorted(FP_OPS, key=lambda o: o.value))
    if op in (Opcode.CALC_ARF, Opcode.CALC_CRF):
        vals["op"] = rng.choice(sorted(INT_ONLY_OPS, key=lambda o: o.value))
    if op is Opcode.CALC_ARF:
        vals["dst"] = max(vals["dst"], RESERVED_ARF)
    if op is Opcode.MOV_ARF:
        vals["arf"] = max(vals["arf"], RESERVED_ARF)
    return Instr(op, **vals)


def random_program(rng: random.Random, n: int) -> list[Instr]:
    return [random_instr(rng, rng.choice(list(Opcode))) for _ in range(n)]


def test_encode_decode_every_opcode():
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for op in Opcode:
        for _ in range(50):
            ins = random_instr(rng, op)
            word = encode(ins)
            assert 0 <= word < 1 << 128
            assert word & 0x1F == op.value
            assert decode(word) == ins


def test_every_field_is_checked_under_every_opcode():
    """Instr's per-opcode checks (made once, read by value) against the plain rule: a
    field outside the opcode's format must keep its default, an integer field must be in
    its range, an enum field must be of its enum; each break is its own one-line error."""
    import dataclasses

    rng = random.Random(SEED + 5)
    print(f"seed {SEED + 5}")
    defaults = {f.name: f.default for f in dataclasses.fields(Instr) if f.name != "opcode"}
    for op in Opcode:
        fmt = dict(FORMATS[format_of(op)])
        ok = random_instr(rng, op)
        for n, d in defaults.items():
            vals = {k: getattr(ok, k) for k in fmt}
            if n not in fmt:
                bad = 1 if isinstance(d, int) and not isinstance(d, enum.Enum) else (
                    next(m for m in type(d) if m is not d))
                with pytest.raises(ValueError, match=f"has no field {n} "):
                    Instr(op, **vals, **{n: bad})
            elif isinstance(fmt[n], int):
                hi = (1 << 32) if n == "imm" else (1 << fmt[n])
                for bad in (hi, -(1 << 31) - 1 if n == "imm" else -1):
                    with pytest.raises(ValueError, match=f"field {n} must be between"):
                        Instr(op, **{**vals, n: bad})
                assert Instr(op, **{**vals, n: hi - 1}) is not None
            else:
                with pytest.raises(ValueError, match=f"field {n} must be a {fmt[n].__name__}"):
                    Instr(op, **{**vals, n: int(getattr(ok, n).value)})
    with pytest.raises(ValueError, match="is bitwise"):
        Instr(Opcode.COMP, op=AluOp.AND, dtype=DType.FP32)
    with pytest.raises(ValueError, match="cannot write A0"):
        Instr(Opcode.CALC_ARF, op=next(iter(INT_ONLY_OPS)), dst=0)
    with pytest.raises(ValueError, match="cannot write A1"):
        Instr(Opcode.MOV_ARF, arf=1)
    with pytest.raises(ValueError, match="opcode must be an Opcode"):
        Instr(1)


def test_encode_matches_the_amaranth_layout():
    # encode() computes offsets itself; the layout the RTL decodes must agree bit for bit.
    rng = random.Random(SEED + 1)
    for op in Opcode:
        for _ in range(5):
            ins = random_instr(rng, op)
            fmt = format_of(op)
            args = {n: getattr(ins, n) for n, _ in FORMATS[fmt]}
            # An operand-less format (nop, halt) has no member of the union.
            const = INSTRUCTION.const({"opcode": op, "args": {fmt: args} if args else {}})
            assert const.as_value().value == encode(ins), (op, ins)


def test_round_trip_random_programs():
    rng = random.Random(SEED + 2)
    print(f"seed {SEED + 2}")
    for _ in range(20):
        prog = random_program(rng, 60)
        text = disassemble(prog)
        assert assemble(text) == prog, text
        assert from_hex(to_hex(prog)) == prog
        # and the text form is a fixed point
        assert disassemble(assemble(text)) == text
        assert assemble(disassemble(prog, pcs=True)) == prog


def test_hand_written_forms():
    prog = assemble("""
        # the forms of the module docstring
        start:  comp.fp32.mac d3, d1, d2 mask=0xff vec=0b1111
                ld_rf d4, [a5] mask=0x3     # indirect
                ld_rf d4, [0x100]
        loop:   seti_crf c1, @loop
                cjump.nz c2, c1
                comp.fp32.mul d3, d1[2], d2
                st_rf [a6], d7
                ld_pgsm pgsm[a8], bank[9]
                st_pgsm [10], [a11]
                mov_drf d1[3], a7
                mov_arf a7, d1[2]
                seti_vsm [4], fp32(-2.0) vec=0b0010
                req [5], [0x40] chip=1 vault=2 pg=3 pe=1
                seti_crf c9, -1
                calc_arf.crop_msb a9, a1, a2 mask=all
                sync 12
                comp d1, d2, d3
                halt
        """)
    i = prog
    assert i[0] == Instr(Opcode.COMP, op=AluOp.MAC, dtype=DType.FP32, dst=3, src1=1, src2=2,
                         vec_mask=0xF, simb_mask=0xFF)
    assert i[1] == Instr(Opcode.LD_RF, drf=4, dram=5, dram_ind=1, simb_mask=0x3)
    assert i[2] == Instr(Opcode.LD_RF, drf=4, dram=0x100, simb_mask=DEFAULT_MASK)
    assert i[3] == Instr(Opcode.SETI_CRF, dst=1, imm=3)
    assert i[4] == Instr(Opcode.CJUMP, cond=Cond.NZ, src=2, target=1)
    assert i[5].mode is Mode.SV and i[5].lane == 2 and i[5].src1 == 1
    assert i[6] == Instr(Opcode.ST_RF, drf=7, dram=6, dram_ind=1, simb_mask=DEFAULT_MASK)
    assert (i[7].pgsm, i[7].pgsm_ind, i[7].dram, i[7].dram_ind) == (8, 1, 9, 0)
    assert (i[8].dram, i[8].dram_ind, i[8].pgsm, i[8].pgsm_ind) == (10, 0, 11, 1)
    assert (i[9].drf, i[9].lane, i[9].arf) == (1, 3, 7)
    assert (i[10].arf, i[10].drf, i[10].lane) == (7, 1, 2)
    assert i[11] == Instr(Opcode.SETI_VSM, vsm=4, imm=0xC0000000, vec_mask=0b0010)
    assert i[12] == Instr(Opcode.REQ, vsm=5, dram=0x40, chip=1, vault=2, pg=3, pe=1)
    assert i[13].imm == 0xFFFFFFFF
    assert i[14].op is AluOp.CROP_MSB and i[14].simb_mask == DEFAULT_MASK
    assert i[15] == Instr(Opcode.SYNC, phase=12)
    assert i[16].dtype is DType.INT32 and i[16].op is AluOp.ADD
    assert i[17] == Instr(Opcode.HALT)


def test_keyword_forms_equal_positional():
    a = assemble("comp.fp32.sub d3, d1[1], d2 vec=0b0110 mask=0x5")
    b = assemble("comp op=sub dtype=f32 dst=d3 src1=1 src2=d2 mode=sv lane=1 vec=6 "
                 "simb_mask=5")
    assert a == b
    assert assemble("ld_rf drf=4 dram=5 dram_ind=1") == assemble("ld_rf d4, [a5]")
    assert assemble("jump target=c3") == assemble("jump c3")
    assert assemble("ld_rf\td1 ,[ a5 ]  mask = 0x3") == assemble("ld_rf d1, [a5] mask=0x3")
    # a label may share a line with its instruction, several labels one pc
    p = assemble("a: b: nop\nc:\n  seti_crf c0, @c\n seti_crf c1, @b")
    assert [x.imm for x in p[1:]] == [1, 0]


def test_labels_count_instructions_only():
    p = assemble("# header\n\n  nop\nx:  # comment\n\n  seti_crf c0, @x\n  seti_crf c1, @end\n"
                 "end: halt\n")
    assert [i.imm for i in p[1:3]] == [1, 3]


@pytest.mark.parametrize("text, line, words", [
    ("nop\ncmop d1, d2, d3", 2, ["unknown mnemonic 'cmop'", "comp"]),
    ("comp.fp32.and d1, d2, d3", 1, ["int32"]),
    ("comp.fp32.frob d1, d2, d3", 1, ["unknown suffix .frob", "mac"]),
    ("reset d300", 1, ["between 0 and 255", "300"]),
    ("comp d1, d2, d3 vec=0x1f", 1, ["vec_mask", "between 0 and 15"]),
    ("mov_drf d1[4], a5", 1, ["lane", "between 0 and 3"]),
    ("comp d1, d2, d3 mask=0x10000000000000000", 1, ["simb_mask"]),
    ("sync 70000", 1, ["phase", "65535"]),
    ("seti_crf c1, 0x100000000", 1, ["immediate", "4294967295"]),
    ("\n\nseti_crf c1, @nowhere", 3, ["unknown label 'nowhere'"]),
    ("x: nop\nx: halt", 2, ["label 'x' is defined twice"]),
    ("reset d1, d2", 1, ["one too many"]),
    ("ld_rf d1", 1, ["needs dram"]),
    ("ld_rf a1, [0]", 1, ["DataRF register"]),
    ("seti_vsm [a3], 1", 1, ["direct"]),
    ("req [1], [a2]", 1, ["direct"]),
    ("ld_rf d1, vsm[3]", 1, ["bank address"]),
    ("ld_rf d1, [3] dram=4", 1, ["dram is given twice"]),
    ("comp d1, d2, d3 imm=4", 1, ["no field 'imm'"]),
    ("calc_arf.add a2, a4, a5", 1, ["A2"]),
    ("calc_crf.mac c1, c2, c3", 1, ["no mac"]),
    ("comp d1, d2, d3 mode=xx", 1, ["mode must be one of vv, sv"]),
    ("ld_rf d1, [zz]", 1, ["integer"]),
    ("halt.now", 1, ["takes no .suffix"]),
    ("halt d1", 1, ["halt takes no operands"]),
    ("seti_crf c1, 1.5", 1, ["@label or fp32(number)"]),
    ("seti_vsm [0], fp32(1e99)", 1, ["binary32 range"]),
])
def test_errors(text, line, words):
    with pytest.raises(AsmError) as e:
        assemble(text)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"line {line}:"), msg
    for w in words:
        assert w in msg, msg


def test_error_names_the_source_file():
    with pytest.raises(AsmError, match=r"^prog\.s:1: unknown mnemonic"):
        assemble("frob", source="prog.s")


def test_hex_format():
    prog = assemble("comp.fp32.add d1, d2, d3\nhalt")
    text = to_hex(prog)
    lines = text.splitlines()
    assert [len(x) for x in lines] == [32, 32]
    assert int(lines[1], 16) == Opcode.HALT.value
    assert from_hex("# a comment\n\n" + text.upper()) == prog
    with pytest.raises(AsmError, match=r"^line 1: a program word is 32 hex digits"):
        from_hex("abc\n")
    with pytest.raises(AsmError, match=r"^line 2: unknown opcode 31"):
        from_hex(f"{21:032x}\n{31:032x}\n")
    with pytest.raises(AsmError, match="outside its format"):
        from_hex(f"{(1 << 127) | 21:032x}\n")
