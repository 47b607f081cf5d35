"""Outputs are checked before the work and written atomically; an interrupted multi-file
result leaves the previous one intact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pimforge.gen.output import (
    FileSet,
    OutputError,
    check_output_dir,
    check_output_file,
    write_json,
)


def test_output_file_checks(tmp_path):
    assert check_output_file(tmp_path / "new" / "r.json") == tmp_path / "new" / "r.json"
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.geteuid() != 0:           # root writes anywhere
        with pytest.raises(OutputError, match="not a writable folder"):
            check_output_file(tmp_path / "ro" / "sub" / "r.json", "--json")
    with pytest.raises(OutputError, match="is a folder"):
        check_output_file(tmp_path, "--json")
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="is a file; give a folder"):
        check_output_dir(tmp_path / "f")
    with pytest.raises(OutputError, match="cannot be created"):
        check_output_dir(tmp_path / "f" / "sub")
    with pytest.raises(OutputError, match="is a file; give a folder"):
        check_output_file(tmp_path / "f" / "r.json")
    assert check_output_file(tmp_path / "ok.json") == tmp_path / "ok.json"


def test_write_json_replaces_whole_files(tmp_path):
    p = tmp_path / "r.json"
    write_json(p, {"a": 1})
    write_json(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2}
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]     # no temporaries left


def test_fileset_error_keeps_the_old_set(tmp_path):
    with FileSet(tmp_path, marker="results.json") as fs:
        fs.path("points.csv").write_text("old\n")
        fs.path("results.json").write_text("{}")
    with pytest.raises(RuntimeError), FileSet(tmp_path, marker="results.json") as fs:
        fs.path("points.csv").write_text("new, cut off")
        raise RuntimeError("interrupted")
    assert (tmp_path / "points.csv").read_text() == "old\n"
    assert (tmp_path / "results.json").exists()
    assert sorted(f.name for f in tmp_path.iterdir()) == ["points.csv", "results.json"]


_SLOW_WRITER = """
import signal, sys, time
from pimforge.gen.output import FileSet
# Ctrl-C raises KeyboardInterrupt even when this test runs in a background job (which
# starts its children with SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
with FileSet(sys.argv[1], marker="results.json") as fs:
    with open(fs.path("points.csv"), "w") as f:
        f.write("new row\\n"); f.flush()
        print("writing", flush=True)
        time.sleep(60)
    fs.path("results.json").write_text("{}")
"""


def test_sigint_during_a_multi_file_write_keeps_the_finished_result(tmp_path):
    with FileSet(tmp_path, marker="results.json") as fs:
        fs.path("points.csv").write_text("complete\n")
        fs.path("results.json").write_text('{"done": true}')
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(tmp_path)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    finally:
        p.kill()
    assert p.returncode != 0
    assert (tmp_path / "points.csv").read_text() == "complete\n"
    assert json.loads((tmp_path / "results.json").read_text()) == {"done": True}
    assert sorted(f.name for f in tmp_path.iterdir()) == ["points.csv", "results.json"]


def test_dse_checks_out_before_the_work(tmp_path):
    (tmp_path / "file").write_text("x")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pimforge.gen.cli", "dse", "spm", "--out",
                        str(tmp_path / "file")], capture_output=True, text=True,
                       env={**os.environ})
    assert r.returncode == 2 and "is a file; give a folder" in r.stderr
    assert "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 30


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "pimforge.gen.cli", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_missing_build_tool_is_one_line_whatever_verilator(tmp_path):
    """With no perl/make/C++ compiler on PATH the error names the tool, with or without
    VERILATOR_ROOT, before anything is built."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, bindir / "python3")
    for extra in ({}, {"VERILATOR_ROOT": str(tmp_path)}):
        r = _cli("verilog", "--top", "fp32_add", "--lint", "--out", str(tmp_path / "o"),
                 env={"PATH": str(bindir), **extra})
        assert r.returncode == 2, r.stderr
        assert "Verilator builds need perl" in r.stderr and "Traceback" not in r.stderr
        assert not (tmp_path / "o").exists()


def test_cache_that_is_a_file_is_one_line(tmp_path):
    f = tmp_path / "cache"
    f.write_text("x")
    r = _cli("membench", "--requests", "16", "--json", str(tmp_path / "m.json"),
             env={"PIMFORGE_CACHE": str(f)})
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m.json").exists()


def test_written_files_follow_the_umask(tmp_path):
    p = write_json(tmp_path / "r.json", {})
    mask = os.umask(0)
    os.umask(mask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~mask
