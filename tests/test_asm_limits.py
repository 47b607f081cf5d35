"""Big or hostile program files: the assembler stops at the program memory's capacity
(naming the line, before reading the rest), echoes a bounded part of a garbage token,
and refuses fp32 literals that are not finite binary32 values."""

from __future__ import annotations

import pytest

from pimforge.gen.cli import main
from pimforge.rtl.ipim.asm import MAX_INSTRUCTIONS, AsmError, assemble, from_hex, to_hex
from pimforge.rtl.params import shown, shown_message


def test_assembly_stops_at_the_capacity_without_reading_on():
    read = 0

    def lines():
        nonlocal read
        for _ in range(1000):          # bounded, should the check be missing
            read += 1
            yield "nop\n"
    with pytest.raises(AsmError, match=r"p.s:17: .*instruction 17, and it holds 16"):
        assemble(lines(), source="p.s", capacity=16)
    assert read == 17
    assert len(assemble("nop\n" * 16, capacity=16)) == 16
    hexed = to_hex(assemble("nop\n" * 17))
    with pytest.raises(AsmError, match=r"line 17: .*holds 16"):
        from_hex(hexed, capacity=16)
    assert MAX_INSTRUCTIONS == 1 << 16


def test_simb_on_a_huge_file_names_the_line_past_the_program_memory(tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "big.s").write_text("nop\n" * 2_000_000)          # 8 MB
    (tmp_path / "long.s").write_text("nop " + "x" * (1 << 22) + "\n")
    for argv, where in ((["simb", "run", "big.s"], "big.s:257:"),   # default: 256 words
                        (["simb", "asm", "big.s"], f"big.s:{MAX_INSTRUCTIONS + 1}:"),
                        (["simb", "asm", "long.s"], "long.s:1: the line is longer")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and where in err[0] and len(err[0]) < 300, err


@pytest.mark.parametrize("line", ["x" * 65536, "nop " + "y" * 65536, "comp d0, d1, " + "z" * 65536,
                                  "seti_vsm [0], fp32(" + "1" * 65536 + ")"])
def test_garbage_token_is_echoed_bounded(line):
    with pytest.raises(AsmError) as e:
        assemble(line + "\n", source="g.s")
    msg = str(e.value)
    assert len(msg) < 400 and "65" in msg and "characters" in msg, msg[:500]


@pytest.mark.parametrize("lit", ["1e400", "-1e400", "inf", "-inf", "nan", "1e39"])
def test_fp32_literal_past_binary32_is_refused(lit):
    with pytest.raises(AsmError, match="binary32 range"):
        assemble(f"seti_vsm [0], fp32({lit})\n")


def test_fp32_largest_finite_literal_is_kept():
    (ins,) = assemble("seti_vsm [0], fp32(3.4028234e38)\n")
    assert ins.imm == 0x7F7FFFFF


def test_shown_bounds_what_is_echoed():
    assert shown("abc") == "'abc'"
    s = shown("q" * 100_000)
    assert len(s) < 100 and "100000 characters" in s
    m = shown_message("bad value " + "w" * 10_000 + " here")
    assert m.startswith("bad value www") and m.endswith("(10000 characters) here")
    assert shown_message("short message") == "short message"


def test_cli_errors_echo_bounded_values(capsys):
    junk = "x" * 70_000
    for argv in (["config", junk], ["config", junk + "/a.toml"],
                 ["config", "--set", "hmc.vaults=" + "9" * 70_000],
                 ["config", "--set", f"hmc.vaults={junk}"], ["run", "capsnet", "--net", junk],
                 ["membench", "--json", "r.json", "--requests", junk]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and len(err[0]) < 400 and "Traceback" not in err[0], err[0][:500]
