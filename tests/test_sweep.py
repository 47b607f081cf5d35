"""``pimforge sweep``: a small grid on a local Dask cluster with two workers (the combined
table, a failing point, resumption), spec checks, and the prepare groups.

The grid runs the ``capsnet`` workload with ``--model-only`` at 1/64 (the ISA-level
model: about a second a point, no Verilator build), so the test measures the sweep,
not the simulator.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from pimforge.gen.cli import main
from pimforge.sim.sweep import cli as sweep_cli
from pimforge.sim.sweep import engine
from pimforge.sim.sweep.engine import prepare_groups
from pimforge.sim.sweep.spec import SpecError, load_spec

SPEC = """
workload = "capsnet"
config = "default"
[options]
scale = 64
model-only = true
threads = 1
[axes]
net = ["Caps-SV1", "Caps-MN1", "Caps-NOPE"]
[report]
columns = ["cycles", "dimension"]
"""


def _write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _rows(out: Path) -> dict[str, dict]:
    with open(out / "results.csv", newline="") as f:
        assert f.readline().startswith('# {"schema": "pimforge.sweep"')
        return {r["net"]: r for r in csv.DictReader(f)}


def test_sweep_two_workers_table_failure_and_resume(tmp_path, capsys):
    spec, out = _write(tmp_path, SPEC), tmp_path / "out"
    # A failing point (a network the workload does not know) fails alone: exit status 1.
    assert main(["sweep", str(spec), "--workers", "2", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "3 points of capsnet, 0 already done, 3 to run" in text
    assert "executor local: 2 workers" in text
    assert "2 ok, 0 not ok, 1 failed, 0 skipped" in text

    rows = _rows(out)
    assert [rows[n]["status"] for n in ("Caps-SV1", "Caps-MN1", "Caps-NOPE")] == \
        ["ok", "ok", "error"]
    assert "Caps-NOPE" in rows["Caps-NOPE"]["error"]
    bad = json.loads((out / "points" / "net=Caps-NOPE.json").read_text())
    assert "unknown CapsNet benchmark 'Caps-NOPE'" in bad["error"] and "result" not in bad

    # Each point is what `pimforge run` gives for the same arguments.
    direct = tmp_path / "direct.json"
    assert main(["run", "capsnet", "--net", "Caps-MN1", "--scale", "64", "--model-only",
                 "--json", str(direct)]) == 0
    ref = json.loads(direct.read_text())
    mn1 = json.loads((out / "points" / "net=Caps-MN1.json").read_text())
    assert mn1["ok"] is True and mn1["sweep"]["point"] == {"net": "Caps-MN1"}
    drop = {"wall_s", "rtl_cycles_per_s", "argv"}     # the same options, in another order
    assert mn1["result"]["argv"][:2] == ["run", "capsnet"] and sorted(
        mn1["result"]["argv"][2:]) == sorted([*ref["argv"][2:-2], "--config", "default",
                                               "--threads", "1"])
    assert {k: v for k, v in mn1["result"].items() if k not in drop} == \
        {k: v for k, v in ref.items() if k not in drop}
    assert int(rows["Caps-MN1"]["result.cycles"]) == ref["cycles"]
    combined = json.loads((out / "results.json").read_text())
    assert [p["status"] for p in combined["points"]] == ["ok", "ok", "error"]
    assert combined["points"][1]["result"]["cycles"] == ref["cycles"]
    capsys.readouterr()

    # Resume: only the deleted point (and the failed one) run again.
    sv1 = out / "points" / "net=Caps-SV1.json"
    before = (sv1.read_bytes(), sv1.stat().st_mtime_ns)
    (out / "points" / "net=Caps-MN1.json").unlink()
    assert main(["sweep", str(spec), "--workers", "2", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "3 points of capsnet, 1 already done, 2 to run" in text
    assert "net=Caps-MN1: ok" in text and "net=Caps-SV1:" not in text
    assert (sv1.read_bytes(), sv1.stat().st_mtime_ns) == before
    assert json.loads((out / "points" / "net=Caps-MN1.json").read_text())["result"] \
        ["cycles"] == ref["cycles"]
    assert _rows(out)["Caps-MN1"]["status"] == "ok"

    # A changed spec changes the points' keys: a result recorded before is not reused.
    keys = {p.name: p.key for p in load_spec(spec, sweep_cli.workload_options).points}
    spec.write_text(SPEC.replace("threads = 1", "threads = 1\nseed = 3"))
    changed = load_spec(spec, sweep_cli.workload_options).points
    assert all(keys[p.name] != p.key and "--seed" in p.argv for p in changed)


@pytest.mark.parametrize("body, message", [
    ('workload = "nosuch"', "unknown workload 'nosuch'"),
    ('workload = "capsnet"\n[axes]\n"hmc.vaultz" = [2]', "unknown config field 'hmc.vaultz'"),
    ('workload = "capsnet"\n[options]\nbogus = 1', "'bogus' is neither a config field"),
    ('workload = "capsnet"\n[axes]\nnet = []', "[axes] net must be a non-empty list"),
    ('workload = "capsnet"\n[zip]\nnet = ["Caps-MN1"]\nscale = [1, 2]',
     "the [zip] lists must have the same length"),
    ('workload = "capsnet"\n[options]\nscale = 2\n[axes]\nscale = [1, 2]',
     "'scale' is both fixed and varied"),
    ('workload = "capsnet"\nextra = 1', "unknown key 'extra'"),
    ('workload = "capsnet"\n[options]\nmodel-only = 1', "model-only is a switch"),
    ('workload = "capsnet"\n[set]\nnet = "x"', "[set] takes config fields"),
    ('workload = [', "is not valid TOML"),
])
def test_spec_errors_are_one_line(tmp_path, capsys, body, message):
    spec = _write(tmp_path, body)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pimforge sweep: error: "), err
    assert message in err
    assert not (tmp_path / "out").exists()


def test_usage_errors(tmp_path, capsys):
    spec = _write(tmp_path, SPEC)
    assert main(["sweep", str(tmp_path / "missing.toml"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--executor", "yarn", "--out", str(tmp_path)]) == 2
    assert "--executor must be local, slurm, pbs or dask://HOST:PORT" in \
        capsys.readouterr().err
    assert main(["sweep", str(spec)]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--executor", "slurm", "--out", str(tmp_path / "o")]) == 2
    assert "needs --workers N" in capsys.readouterr().err
    if shutil.which("sbatch") is None:       # not on a Slurm login node: said up front
        assert main(["sweep", str(spec), "--executor", "slurm", "--workers", "2",
                     "--out", str(tmp_path / "o")]) == 2
        assert "submits jobs with sbatch, which is not on PATH" in capsys.readouterr().err


def test_grid_zip_and_prepare_groups(tmp_path):
    spec = load_spec(_write(tmp_path, """
workload = "capsnet"
[options]
threads = 1
[axes]
"hmc.vaults" = [2, 4]
[zip]
net = ["Caps-SV1", "Caps-MN1", "Caps-SV2"]
scale = [64, 32, 64]
"""), sweep_cli.workload_options)
    assert len(spec.points) == 6 and spec.axes == ("hmc.vaults", "net", "scale")
    assert spec.points[1].values == {"hmc.vaults": 2, "net": "Caps-MN1", "scale": 32}
    assert "--set" in spec.points[0].argv and "hmc.vaults=2" in spec.points[0].argv
    assert len({p.key for p in spec.points}) == 6
    # The vault driver is built once per config: the three runs of each share a task.
    flags = sweep_cli.prepare_options("capsnet")
    assert flags == ("--model-only", "--freq")
    groups = prepare_groups(list(spec.points), flags)
    assert sorted(len(g) for g in groups.values()) == [3, 3]
    assert {frozenset(p.values["hmc.vaults"] for p in g) for g in groups.values()} == \
        {frozenset({2}), frozenset({4})}
    # Without the workload's list every option counts: one group per point.
    assert len(prepare_groups(list(spec.points), None)) == 6


def test_prepare_and_run_point_contract():
    argv = ["--config", "default", "--net", "Caps-SV1", "--scale", "64", "--model-only"]
    assert "error" not in sweep_cli.prepare_point("capsnet", argv, None)
    res = sweep_cli.run_point("capsnet", argv, None, {"error": "build failed"})
    assert res["error"] == "prepare failed: build failed"
    bad = [*argv[:5], "0"]
    res = sweep_cli.run_point("capsnet", bad, None, None)
    assert res["error"] == "argument --scale: must be between 1 and 1048576, not 0"
    # A group prepared with a point whose arguments are refused: the others still run.
    prep = sweep_cli.prepare_point("capsnet", bad, None)
    assert prep["arguments"] and "--scale" in prep["error"]
    res = sweep_cli.run_point("capsnet", argv, None, prep)
    assert res["ok"] and res["result"]["network"] == "Caps-SV1"


def test_load_spec_rejects_missing_workload(tmp_path):
    with pytest.raises(SpecError, match="name the workload"):
        load_spec(_write(tmp_path, 'config = "default"'), sweep_cli.workload_options)


def test_ratio_column_and_means(tmp_path):
    spec = load_spec(_write(tmp_path, """
workload = "capsnet"
[axes]
net = ["Caps-MN1", "Caps-SV1"]
ablation = ["pim-capsnet", "pim-inter"]
[report]
columns = ["cycles"]
ratio = { column = "cycles", axis = "ablation", baseline = "pim-capsnet" }
"""), sweep_cli.workload_options)
    cycles = {("Caps-MN1", "pim-capsnet"): 100, ("Caps-MN1", "pim-inter"): 300,
              ("Caps-SV1", "pim-capsnet"): 50, ("Caps-SV1", "pim-inter"): None}
    rows = [{"point": p.values, "status": "ok" if cycles[tuple(p.values.values())] else
             "error", "result": {"cycles": cycles[tuple(p.values.values())]}, "wall_s": 1.0}
            for p in spec.points]
    engine._ratios(spec, rows)
    assert [r["ratio"] for r in rows] == [1.0, 3.0, 1.0, None]
    table = engine.summary_table(spec, rows)
    assert "cycles/pim-capsnet" in table.splitlines()[0]
    assert table.splitlines()[-1] == ("mean cycles at ablation=pim-inter over "
                                      "ablation=pim-capsnet: 3.000 (1 points)")
    with pytest.raises(SpecError, match="baseline 'x' is not a value of ablation"):
        load_spec(_write(tmp_path, spec.text.replace('baseline = "pim-capsnet"',
                                                     'baseline = "x"'), "b.toml"),
                  sweep_cli.workload_options)
