"""What the commands print is true and complete: counts that add up, a run that skipped
work fails and says why, a misspelled name is named first, and tool output shows this
run's numbers only."""

from __future__ import annotations

import json
import re
import types

from pimforge.gen.cli import main


def test_compile_breakdown_adds_up_to_the_count_above_it(tmp_path, capsys):
    assert main(["compile", "image", "--bench", "blur", "--size", "16x16", "-o",
                 str(tmp_path / "blur.s")]) == 0
    out = capsys.readouterr().out
    m = re.search(r"(\d+) instructions in vault 0 \((\d+) in all (\d+) vaults\)", out)
    assert m, out
    count, total, vaults = map(int, m.groups())
    rows = re.findall(r"^#   [a-z_]+ +(\d+) +[\d.]+%$", out, re.M)
    assert rows and sum(map(int, rows)) == count, out
    asm = (tmp_path / "blur.s").read_text().splitlines()
    assert len([line for line in asm if line.strip()]) == count
    assert count <= total <= vaults * count


def test_run_image_all_fails_when_a_benchmark_was_skipped(tmp_path, monkeypatch, capsys):
    from pimforge.sim.ipim import image_cli
    from pimforge.sim.ipim.lang import CompileError

    def fake(bench, img, config, **kw):
        if bench == "blur":
            raise CompileError("the program does not fit the instruction memory")
        return types.SimpleNamespace(matches_reference=True, max_abs_error=0.0,
                                     to_json=lambda: {"matches_reference": True,
                                                      "max_abs_error": 0.0, "cycles": None,
                                                      "ipc": None, "energy_nj": {}})

    monkeypatch.setattr(image_cli, "run_bench", fake)
    out = tmp_path / "r.json"
    assert main(["run", "image", "--bench", "all", "--engine", "iss", "--size", "16x16",
                 "--json", str(out)]) == 1
    printed = capsys.readouterr().out
    assert re.search(r"^blur +SKIPPED: .*does not fit the instruction memory", printed, re.M)
    assert "did not run (exit status 1)" in printed
    doc = json.loads(out.read_text())
    assert set(doc["skipped"]) == {"blur"} and "blur" not in doc["benches"]
    assert doc["benches"]


def test_a_misspelled_block_is_named_before_a_missing_out(capsys):
    assert main(["verilog", "--top", "fp32_ad"]) == 2
    err = capsys.readouterr().err
    assert "unknown block 'fp32_ad' (did you mean 'fp32_add'?)" in err
    assert "--out" not in err and len(err.strip().splitlines()) == 1


def test_dse_spm_prints_this_run_only(tmp_path, capsys):
    assert main(["dse", "spm", "--org", "HY,HY-PG", "--max-sectors", "2", "--out",
                 str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "HY-PG total energy" in out
    assert not re.search(r"\b(paper|ours)\b", out), out
    assert "paper" in json.loads((tmp_path / "results.json").read_text())
