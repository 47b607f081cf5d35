"""``pimforge sweep`` refuses a bad spec or a command that cannot run before anything is
written: a TOML value of a type the spec does not take, a grid past ``--max-points``
(counted, not expanded), a config preset that does not exist, a cluster executor without
its submit command; Ctrl-C stops the sweep with one line and no worker traceback; a full
disk is one line naming the folder."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pimforge.gen.cli import main
from pimforge.sim.sweep import cli as sweep_cli
from pimforge.sim.sweep.spec import MAX_POINTS, SpecError, load_spec

HEAD = """
workload = "capsnet"
[options]
scale = 64
model-only = true
threads = 1
"""


def _spec(tmp_path: Path, body: str) -> str:
    (tmp_path / "spec.toml").write_text(HEAD + body)
    return "spec.toml"


def _refused(tmp_path, capsys, argv, *needles):
    before = sorted(tmp_path.rglob("*"))
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "Traceback" not in err[0]
    for n in needles:
        assert n in err[0], err[0]
    assert sorted(tmp_path.rglob("*")) == before, "wrote something"


@pytest.mark.parametrize("body, needle", [
    ('[axes]\nnet = [1979-05-27, "Caps-MN1"]\n', "axes.net[0] is a TOML date"),
    ('[set]\n"hmc.tck_ns" = 07:32:00\n[axes]\nnet = ["Caps-MN1"]\n', "hmc.tck_ns is a TOML"),
    ('[axes]\nnet = ["Caps-MN1"]\n"hmc.vaults" = [1979-05-27T07:32:00Z]\n', "TOML date"),
    ('[axes]\nnet = [{ name = "Caps-MN1" }]\n', "axes.net[0] is a table"),
    ('[set]\n"hmc.vaults" = { n = 4 }\n[axes]\nnet = ["Caps-MN1"]\n', "is a table"),
    ('[zip]\nnet = ["Caps-MN1"]\nseed = [[1, 1979-05-27]]\n', "zip.seed[0][1] is a TOML"),
    ('[report]\ncolumns = [1979-05-27]\n[axes]\nnet = ["Caps-MN1"]\n', "TOML date"),
])
def test_unexpected_toml_type_is_one_line(tmp_path, capsys, monkeypatch, body, needle):
    monkeypatch.chdir(tmp_path)
    _refused(tmp_path, capsys, ["sweep", _spec(tmp_path, body), "--out", "o"], needle)
    (tmp_path / "spec.toml").write_text("description = 1979-05-27\n" + HEAD
                                        + '[axes]\nnet = ["Caps-MN1"]\n')
    _refused(tmp_path, capsys, ["sweep", "spec.toml", "--out", "o"], "description is a TOML")


def test_huge_grid_is_counted_and_refused_before_it_is_expanded(tmp_path, capsys,
                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)
    ten = "[" + ", ".join(str(i) for i in range(1, 11)) + "]"
    axes = "\n".join(f"{k} = {ten}" for k in ("seed", "freq", "dim_x", "dim_y", "dim_z"))
    body = '[axes]\nnet = ["Caps-MN1", "Caps-SV1"]\n' + axes.replace(
        "dim_x", '"hmc.vaults"').replace("dim_y", '"hmc.tck_ns"').replace("dim_z", "freq_mhz")
    spec = _spec(tmp_path, body)
    t0 = time.monotonic()
    _refused(tmp_path, capsys, ["sweep", spec, "--out", "o"], "200,000 points",
             f"more than {MAX_POINTS:,}", "--max-points")
    assert time.monotonic() - t0 < 20
    with pytest.raises(SpecError, match="200,000 points"):
        load_spec(tmp_path / spec, sweep_cli.workload_options, max_points=199_999)


def test_max_points_can_be_raised(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, '[axes]\nnet = ["Caps-MN1", "Caps-SV1"]\nseed = [1, 2]\n')
    _refused(tmp_path, capsys, ["sweep", spec, "--max-points", "3", "--list"], "4 points")
    assert main(["sweep", spec, "--max-points", "4", "--list"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 4


@pytest.mark.parametrize("body", [
    'config = "no_such_preset"\n[axes]\nnet = ["Caps-MN1"]\n',
    '[axes]\nnet = ["Caps-MN1"]\nconfig = ["default", "no_such_preset"]\n',
    'config = "missing.toml"\n[axes]\nnet = ["Caps-MN1"]\n',
])
def test_unknown_config_preset_is_refused_before_anything_is_written(tmp_path, capsys,
                                                                     monkeypatch, body):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, body)
    for argv in (["sweep", spec, "--out", "o"], ["sweep", spec, "--list"]):
        _refused(tmp_path, capsys, argv, "config")


def test_cluster_executor_without_its_submit_command_writes_nothing(tmp_path, capsys,
                                                                    monkeypatch):
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is a test dependency")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    spec = _spec(tmp_path, '[axes]\nnet = ["Caps-MN1"]\n')
    for ex, tool in (("slurm", "sbatch"), ("pbs", "qsub")):
        _refused(tmp_path, capsys, ["sweep", spec, "--out", "o", "--executor", ex,
                                    "--workers", "2"], tool, "not on PATH")
    _refused(tmp_path, capsys, ["sweep", spec, "--out", "o", "--executor", "slurm"],
             "--workers")


def _sweep_proc(tmp_path: Path, spec: str, *extra: str, preexec=None):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen([sys.executable, "-m", "pimforge.gen.cli", "sweep", spec,
                             "--out", "o", "--workers", "2", *extra], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=preexec)


def test_ctrl_c_is_one_line_without_a_worker_traceback(tmp_path):
    nets = ", ".join(f'"Caps-{k}{i}"' for i in (1, 2, 3) for k in ("MN", "SV"))
    spec = _spec(tmp_path, f"[axes]\nnet = [{nets}]\n".replace("scale = 64", "scale = 16"))
    p = _sweep_proc(tmp_path, spec)
    seen = ""
    t0 = time.monotonic()
    while "executor local" not in seen and time.monotonic() - t0 < 120:
        seen += p.stdout.readline()
    time.sleep(2)                       # the workers are running points
    os.killpg(p.pid, signal.SIGINT)     # what a terminal's Ctrl-C does: the whole group
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines() == ["pimforge sweep: interrupted"], err


def test_full_disk_is_one_line_naming_the_folder(tmp_path):
    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
    spec = _spec(tmp_path, '[axes]\nnet = ["Caps-MN1"]\n')
    p = _sweep_proc(tmp_path, spec, preexec=limited)
    _, err = p.communicate(timeout=300)
    lines = err.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1, err
    assert f"cannot write to the folder '{tmp_path / 'o'}" in lines[0], err
    assert sorted(tmp_path.iterdir()) == [tmp_path / "spec.toml"]
