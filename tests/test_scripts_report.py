"""scripts/report.py, the ending every script shares: tables, geomean, checked and atomic
outputs, and the MISMATCH report with its exit status."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "report.py"
_spec = importlib.util.spec_from_file_location("report", _PATH)
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def test_geomean_matches_the_definition():
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    xs = [rng.uniform(0.01, 100.0) for _ in range(rng.randrange(1, 20))]
    assert report.geomean(xs) == pytest.approx(math.prod(xs) ** (1 / len(xs)), rel=1e-12), seed
    assert report.geomean(iter([2.0, 8.0])) == pytest.approx(4.0)


def test_markdown_table():
    assert report.md_table(["a", "b"], [[1, "x"], ["", 2.5]]) == [
        "| a | b |", "|---|---|", "| 1 | x |", "|  | 2.5 |"]
    assert report.md_header(["a", "b"], ["---", "---:"])[1] == "|---|---:|"
    assert report.md_header(["a"], "| --- |")[1] == "| --- |"
    assert report.verdict(True) == "ok" and report.verdict(False) == "MISMATCH"


def test_finish_writes_and_reports(tmp_path, capsys):
    res = {"x": 1}
    rc = report.finish("T", res, json=tmp_path / "r.json", md=tmp_path / "r.md", t0=0.0)
    assert rc == 0
    assert json.loads((tmp_path / "r.json").read_text())["x"] == 1
    assert "wall_s" in res and (tmp_path / "r.md").read_text() == "T\n"
    assert capsys.readouterr().out == "T\n"
    assert report.finish("T", res, bad=["blur/opt", "shift/opt"]) == 1
    assert capsys.readouterr().err == "MISMATCH: blur/opt, shift/opt\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temporaries


def test_check_outputs_is_a_one_line_usage_error(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    p = argparse.ArgumentParser(prog="s")
    report.check_outputs(p, json=tmp_path / "ok.json", md=None)
    with pytest.raises(SystemExit) as e:
        report.check_outputs(p, json=tmp_path / "f" / "x.json")
    assert e.value.code == 2
    assert "--json" in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "ok.json").exists()
