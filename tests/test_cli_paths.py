"""Paths a command is given: no output clobbers an input or another output, a link loop
or a broken cache folder is one line before any work, a broken cache entry is redone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pimforge.gen import args as A
from pimforge.gen.cli import main
from pimforge.gen.errors import ToolMissingError


def run(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() and not p.is_symlink()
            else b"<other>" for p in sorted(folder.rglob("*"))}


# -- outputs that clobber inputs or each other ----------------------------------------

def test_output_that_is_the_input_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("p.s").write_text("halt\n")
    os.symlink("p.s", "link.s")
    before = snapshot(tmp_path)
    for out in ("p.s", "./p.s", str(tmp_path / "p.s"), "link.s"):
        code, err = run(capsys, "simb", "asm", "p.s", "-o", out)
        assert code == 2 and len(err) == 1, err
        assert "is the same file as the input 'p.s'" in err[0], err
    code, err = run(capsys, "simb", "disasm", "p.s", "-o", "p.s")
    assert code == 2 and "same file" in err[0]
    assert snapshot(tmp_path) == before


def test_two_outputs_of_one_command_on_one_path_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = run(capsys, "noc", "--json", "r.json", "--png", "./r.json")
    assert code == 2 and len(err) == 1 and "same file as the output 'r.json'" in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_config_file_as_an_output_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("c.toml").write_text('[hmc]\nvaults = 4\n')
    code, err = run(capsys, "membench", "--json", "c.toml", "c.toml")
    assert code == 2 and "same file as the input 'c.toml'" in err[0], err
    assert Path("c.toml").read_text() == '[hmc]\nvaults = 4\n'


def test_check_distinct_paths_passes_distinct_ones(tmp_path):
    ns = A.argparse.Namespace(file=A.in_file(str(tmp_path / "a.s")),
                              out=A.out_file(str(tmp_path / "a.hex")),
                              more=[A.out_file(str(tmp_path / "b"))], config="default")
    A.check_distinct_paths(ns)
    ns.more.append(A.out_dir(str(tmp_path / "b")))
    with pytest.raises(A.OutputError, match="same file"):
        A.check_distinct_paths(ns)


# -- paths and caches ------------------------------------------------------------------

def test_symlink_loop_or_broken_link_in_out_is_refused_while_parsing(tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("loop2", "loop1")
    os.symlink("loop1", "loop2")
    os.symlink("nowhere", "dangling")
    before = snapshot(tmp_path)
    for argv in (["verilog", "--out", "loop1"], ["verilog", "--out", "loop1/sub"],
                 ["verilog", "--out", "dangling"], ["noc", "--json", "loop1/r.json"],
                 ["noc", "--json", "dangling/r.json"]):
        code, err = run(capsys, *argv)
        assert code == 2 and len(err) == 1, (argv, err)
        # "argument --out": refused while parsing, before any elaboration
        assert "symbolic link" in err[0] and "argument" in err[0], (argv, err)
    assert snapshot(tmp_path) == before


def test_empty_config_name_is_refused_not_taken_as_the_default(tmp_path, capsys):
    for argv in (["verilog", "", "--out", str(tmp_path / "o")],
                 ["verilog", "--top", "fp32_add", "--config", "", "--out", str(tmp_path / "o")]):
        code, err = run(capsys, *argv)
        assert code == 2 and len(err) == 1 and "config name is empty" in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_unwritable_cache_subfolder_is_named_before_the_work(tmp_path, capsys, monkeypatch):
    from pimforge.sim import verilator as vl
    from pimforge.sim.build import cached_build

    cache = tmp_path / "cache"
    (cache / "cocotb").mkdir(parents=True)
    (cache / "verilated").write_text("a file where a folder goes")
    monkeypatch.setenv("PIMFORGE_CACHE", str(cache))
    with pytest.raises(ToolMissingError, match=r"verilated' is not a folder.*PIMFORGE_CACHE"):
        vl.preflight()
    (cache / "verilated").unlink()
    (cache / "verilated").mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: real(p, m) and Path(p).name != "verilated")
    with pytest.raises(ToolMissingError, match=r"verilated' is not writable.*PIMFORGE_CACHE"):
        vl.preflight()
    monkeypatch.setattr(os, "access", real)
    # the lock file of a build in a folder that cannot be written: one line, not a traceback
    (cache / "afile").write_text("x")
    with pytest.raises(ToolMissingError, match=r"afile' cannot be written.*PIMFORGE_CACHE"):
        cached_build(cache / "afile" / "b", "exe", lambda d: None, what="a build")


def test_cache_subfolder_that_is_a_file_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "verilated").write_text("x")
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path / "cache"))
    code, err = run(capsys, "membench", "--json", "r.json")
    assert code == 2 and len(err) == 1, err
    assert "verilated" in err[0] and "PIMFORGE_CACHE" in err[0], err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("entry", ["{}", "[]", '{"stat": {}}', "null", '{"stat": {"modules":'])
def test_broken_synthesis_cache_entry_is_redone(tmp_path, monkeypatch, entry):
    from pimforge.gen import synth

    raw = {"stat": {"modules": {"\\t": {"num_cells_by_type": {"$_AND_": 2}}}}, "memories": {}}
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path))
    monkeypatch.setattr(synth, "yosys_version", lambda: "0")
    monkeypatch.setattr(synth, "_run_yosys", lambda *a: dict(raw))
    got, cached = synth.synth_verilog("module t(); endmodule\n", "t")
    assert not cached
    (path,) = (tmp_path / "synth").iterdir()
    assert synth.synth_verilog("module t(); endmodule\n", "t") == (got, True)
    path.write_text(entry)
    got2, cached = synth.synth_verilog("module t(); endmodule\n", "t")
    assert not cached and got2["stat"] == raw["stat"]
    assert synth.synth_verilog("module t(); endmodule\n", "t")[1]    # stored again
