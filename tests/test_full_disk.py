"""A full disk while the outputs are written: one line naming the folder, exit status 1
(the work was done, its result could not be stored), no traceback, and the earlier
result left whole.

A file-size limit (``RLIMIT_FSIZE`` in the child, with ``SIGXFSZ`` ignored so that a
write past it fails with ``EFBIG``) stands in for the full disk.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pimforge.gen.output import FileSet, OutputWriteError, write_text


def _limited(nbytes: int):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return pre


def pimforge(cwd: Path, *argv: str, limit: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "pimforge.gen.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=_limited(limit) if limit is not None else None)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def assert_one_line_naming(res: subprocess.CompletedProcess, folder: Path) -> None:
    err = res.stderr.strip().splitlines()
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    assert len(err) == 1, res.stderr
    assert f"cannot write to the folder '{folder}'" in err[0], err[0]


# -- the writers ---------------------------------------------------------------------

def test_write_text_failure_names_the_folder_and_keeps_the_old_file(tmp_path):
    code = ("import sys; from pimforge.gen.output import write_text\n"
            "write_text(sys.argv[1], 'new' * 1000)\n")
    (tmp_path / "r.txt").write_text("old")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.txt")],
                         capture_output=True, text=True, preexec_fn=_limited(100))
    assert "OutputWriteError" in res.stderr and str(tmp_path) in res.stderr, res.stderr
    assert snapshot(tmp_path) == {"r.txt": b"old"}


def test_file_set_failure_keeps_the_old_set_and_removes_a_folder_it_made(tmp_path):
    code = ("import sys; from pimforge.gen.output import FileSet\n"
            "with FileSet(sys.argv[1], marker='m.txt') as fs:\n"
            "    fs.path('a.txt').write_text('A' * 10)\n"
            "    fs.path('b.txt').write_text('B' * 1000)\n"
            "    fs.path('m.txt').write_text('done')\n")
    old = tmp_path / "old"
    with FileSet(old, marker="m.txt") as fs:
        for n in ("a.txt", "b.txt", "m.txt"):
            fs.path(n).write_text("old " + n)
    before = snapshot(tmp_path)
    for folder in (old, tmp_path / "new" / "sub"):
        res = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                             text=True, preexec_fn=_limited(100))
        assert "OutputWriteError" in res.stderr and str(folder) in res.stderr, res.stderr
        assert snapshot(tmp_path) == before


def test_write_error_in_process_is_an_output_write_error(tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OutputWriteError, match="No space left on device"):
        write_text(tmp_path / "r.json", "{}")
    assert list(tmp_path.iterdir()) == []


# -- the commands --------------------------------------------------------------------

CAPS = ("run", "capsnet", "--net", "Caps-MN1", "--model-only", "--scale", "64")


def test_capsnet_dump_on_a_full_disk_keeps_the_earlier_dump(tmp_path):
    # u.npy (1.3 kB) fits under the limit, W.npy (92 kB) does not: written one by one in
    # place, the old W.npy would sit beside a new u.npy
    assert pimforge(tmp_path, *CAPS, "--seed", "1", "--dump", "d").returncode == 0
    before = snapshot(tmp_path)
    res = pimforge(tmp_path, *CAPS, "--seed", "2", "--dump", "d", limit=8192)
    assert_one_line_naming(res, tmp_path / "d")
    assert snapshot(tmp_path) == before


IMAGE = ("run", "image", "--bench", "brighten", "--engine", "iss", "--size", "16x16")


@pytest.mark.parametrize("argv, folder", [
    ((*CAPS, "--json", "r.json"), "."),
    (("compile", "image", "--bench", "blur", "-o", "b.s"), "."),
    (("schedule", "sharing", "--mesh", "4x4", "--method", "tsp", "--json", "s.json"), "."),
    (("simb", "run", "p.s", "--dump", "sd"), "sd"),
    ((*IMAGE, "--json", "i.json"), "."),
    ((*IMAGE, "--dump", "id"), "id/brighten"),
], ids=["capsnet-json", "compile-image", "schedule", "simb-dump", "image-json",
        "image-dump"])
def test_command_on_a_full_disk_is_one_line_and_writes_nothing(tmp_path, argv, folder):
    (tmp_path / "p.s").write_text("halt\n")
    before = snapshot(tmp_path)
    res = pimforge(tmp_path, *argv, limit=64)
    assert_one_line_naming(res, (tmp_path / folder).resolve() if folder == "." else
                           tmp_path / folder)
    assert snapshot(tmp_path) == before


def test_verilog_on_a_full_disk_keeps_the_earlier_pair(tmp_path, monkeypatch, capsys):
    # in this process: Yosys (under Amaranth) maps its memory through files, which a
    # file-size limit would stop before any output is written
    from pimforge.gen.cli import main

    out = tmp_path / "v"
    assert main(["verilog", "--top", "fp32_add", "--out", str(out)]) == 0
    before = snapshot(tmp_path)
    write = Path.write_text

    def full(self, text, *a, **k):
        if self.suffix == ".json":       # the manifest, after the Verilog
            raise OSError(28, "No space left on device")
        return write(self, text, *a, **k)
    monkeypatch.setattr(Path, "write_text", full)
    capsys.readouterr()
    assert main(["verilog", "--top", "fp32_add", "--config", "ipim_small",
                 "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot write to the folder '{out}'" in err[0], err
    assert "No space left on device" in err[0]
    assert snapshot(tmp_path) == before


def test_synthesis_result_survives_a_cache_that_cannot_store_it(tmp_path, monkeypatch,
                                                                capsys):
    from pimforge.gen import synth

    raw = {"stat": {"modules": {"\\t": {"num_cells_by_type": {"$_AND_": 2}}}},
           "memories": {}}
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(synth, "yosys_version", lambda: "0")
    monkeypatch.setattr(synth, "_run_yosys", lambda *a: dict(raw))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "synth").write_text("a file where the folder goes")
    got, cached = synth.synth_verilog("module t(); endmodule\n", "t")
    assert not cached and got["stat"] == raw["stat"]
    assert "was not cached" in capsys.readouterr().err
