"""Cached builds are trusted only when finished: the shared discipline of
pimforge.sim.build.cached_build, and the cocotb runner's use of it on a real block."""

from __future__ import annotations

import os
import subprocess

import pytest

from pimforge.gen.config import bench_config
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import SimulationError
from pimforge.sim import build as sb

EXE = "bin/tool"


def _builder(calls: list, text: str = "#!/bin/sh\necho built\n", hook=None):
    def build(folder):
        calls.append(folder)
        if hook:
            hook(folder)
        (folder / "bin").mkdir()
        (folder / EXE).write_text(text)
        (folder / EXE).chmod(0o755)
    return build


def _leftovers(root):
    return sorted(p.name for p in root.iterdir() if ".tmp" in p.name)


@pytest.mark.parametrize("relocatable", [True, False])
def test_finished_build_is_reused_and_broken_ones_are_rebuilt(tmp_path, relocatable):
    bdir = tmp_path / "blk-0123"
    calls: list = []
    exe = sb.cached_build(bdir, EXE, _builder(calls), what="t", relocatable=relocatable)
    assert exe == bdir / EXE and len(calls) == 1
    assert subprocess.run([exe], capture_output=True, text=True).stdout == "built\n"
    assert (calls[0] != bdir) == relocatable        # built aside, then renamed into place
    sb.cached_build(bdir, EXE, _builder(calls), what="t", relocatable=relocatable)
    assert len(calls) == 1                           # finished: reused
    breakages = [lambda: (bdir / sb._STAMP).unlink(),                 # interrupted
                 lambda: exe.write_bytes(exe.read_bytes()[:5]),      # truncated
                 lambda: exe.unlink(),                                # missing
                 lambda: (bdir / sb._STAMP).write_text("0" * 64)]    # mismatching
    for n, breakage in enumerate(breakages, start=2):
        (bdir / "junk-of-the-broken-build").write_text("x")
        breakage()
        sb.cached_build(bdir, EXE, _builder(calls), what="t", relocatable=relocatable)
        assert len(calls) == n, f"breakage {n - 2} was not detected"
        assert exe.read_text() == "#!/bin/sh\necho built\n"
        assert not (bdir / "junk-of-the-broken-build").exists()   # rebuilt from scratch
    assert _leftovers(tmp_path) == []


def test_folder_without_stamp_left_by_an_in_place_build_is_rebuilt(tmp_path):
    # what the old in-place cocotb builds left when interrupted: files, but no stamp
    bdir = tmp_path / "blk-0123"
    (bdir / "bin").mkdir(parents=True)
    (bdir / EXE).write_text("half")
    calls: list = []
    exe = sb.cached_build(bdir, EXE, _builder(calls), what="t")
    assert len(calls) == 1 and exe.read_text().endswith("echo built\n")


@pytest.mark.parametrize("relocatable", [True, False])
def test_interrupted_build_leaves_nothing(tmp_path, relocatable):
    def interrupted(folder):
        (folder / "half.o").write_text("x")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sb.cached_build(tmp_path / "blk-0123", EXE, interrupted, what="t",
                        relocatable=relocatable)
    assert not (tmp_path / "blk-0123").exists() and _leftovers(tmp_path) == []


def test_build_without_executable_is_an_error_and_leaves_nothing(tmp_path):
    with pytest.raises(SimulationError, match="produced no bin/tool"):
        sb.cached_build(tmp_path / "blk-0123", EXE, lambda folder: None, what="t")
    # nothing but the (empty) lock file the builders of this folder take turns on
    assert [p.name for p in tmp_path.iterdir()] == ["blk-0123.lock"]


def test_loser_of_the_rename_race_uses_the_winners_folder(tmp_path):
    bdir = tmp_path / "blk-0123"
    winner: list = []

    def concurrent_builder_finishes_first(folder):
        # while this build runs, another process finishes the same build and renames it in
        other = tmp_path / "blk-0123.tmp-other"
        other.mkdir()
        _builder(winner, "#!/bin/sh\necho winner\n")(other)
        (other / sb._STAMP).write_text(sb._digest(other / EXE))
        other.rename(bdir)

    calls: list = []
    exe = sb.cached_build(bdir, EXE, _builder(calls, hook=concurrent_builder_finishes_first),
                          what="t")
    assert len(winner) == 1 and len(calls) == 1
    assert exe.read_text() == "#!/bin/sh\necho winner\n"     # the winner's, untouched
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("relocatable", [True, False])
def test_concurrent_builders_of_one_folder_build_it_once(tmp_path, relocatable):
    """Two test workers asking for one build at once: the second waits for the first
    and uses its folder (each takes its own lock file descriptor, as two processes do)."""
    import threading
    import time

    bdir = tmp_path / "blk-0123"
    calls: list = []
    started = threading.Event()

    def slow(folder):
        started.set()
        time.sleep(0.5)
    exes = []

    def ask():
        exes.append(sb.cached_build(bdir, EXE, _builder(calls, hook=slow), what="t",
                                    relocatable=relocatable))
    first = threading.Thread(target=ask)
    first.start()
    started.wait(5)                    # the first build is under way
    second = threading.Thread(target=ask)
    second.start()
    first.join(10)
    second.join(10)
    assert len(calls) == 1 and exes == [bdir / EXE] * 2
    assert _leftovers(tmp_path) == []


def test_temporaries_of_dead_builders_are_swept_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = [tmp_path / f"other-1.tmp{dead.pid}", tmp_path / f"other-2.tmp{dead.pid}-old"]
    live = tmp_path / f"other-3.tmp{os.getppid()}"
    for d in (*stale, live):
        d.mkdir()
    sb.cached_build(tmp_path / "blk-0123", EXE, _builder([]), what="t")
    assert _leftovers(tmp_path) == [live.name]


def test_finished_build_keeps_no_intermediates(tmp_path):
    def with_objects(folder):
        for name in ("a.o", "lib.a", "x.h.gch", "a.d"):
            (folder / name).write_text("x" * 100)
        (folder / "V.cpp").write_text("generated")
    exe = sb.cached_build(tmp_path / "blk-0123", EXE, _builder([], hook=with_objects),
                          what="t")
    kept = sorted(p.name for p in exe.parents[1].iterdir())
    assert kept == sorted(["V.cpp", "bin", sb._SECONDS, sb._STAMP])


def _finished(cache, kind, name, *, size, age_s):
    """A finished build of *size* bytes under *cache*/*kind*, last used *age_s* ago."""
    bdir = cache / kind / name
    (bdir / "bin").mkdir(parents=True)
    (bdir / EXE).write_bytes(b"\0" * size)
    (bdir / "old.gch").write_bytes(b"\0" * size)          # kept by an older version
    (bdir / sb._STAMP).write_text(sb._digest(bdir / EXE))
    when = os.path.getmtime(bdir / sb._STAMP) - age_s
    os.utime(bdir / sb._STAMP, (when, when))
    return bdir


def test_cache_is_kept_under_its_limit_by_evicting_the_least_recently_used(
        tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PIMFORGE_CACHE", str(cache))
    monkeypatch.setenv("PIMFORGE_CACHE_GB", str(35_000 / 1e9))
    monkeypatch.setattr(sb, "_TIDIED", set())
    hour = 3600
    oldest = _finished(cache, "cocotb", "b-1", size=10_000, age_s=5 * hour)
    old = _finished(cache, "verilated", "a-1", size=10_000, age_s=4 * hour)
    used = _finished(cache, "verilated", "a-2", size=10_000, age_s=3 * hour)
    recent = _finished(cache, "cocotb", "b-2", size=10_000, age_s=60)   # maybe running
    # using a build makes it the most recent
    assert sb.cached_build(used, EXE, _builder([]), what="t") == used / EXE
    # a new build: the intermediates of every finished build go first (40 kB left of
    # 80), then the least recently used until 35 kB (the new one aside)
    calls: list = []
    sb.cached_build(cache / "verilated" / "a-3", EXE, _builder(calls), what="t")
    assert len(calls) == 1
    assert not oldest.exists() and old.exists()
    assert used.exists() and recent.exists()            # recently used: never evicted
    assert not list(cache.rglob("*.gch"))
    # once per process: the next build (over the limit again) does not look again
    sb.cached_build(cache / "cocotb" / "b-3", EXE, _builder(calls), what="t")
    assert old.exists() and len(calls) == 2


@pytest.mark.parametrize("text", ["0", "-1", "ten", "nan"])
def test_bad_cache_limit_is_one_line_before_any_work(tmp_path, monkeypatch, text):
    from pimforge.gen.errors import ToolMissingError
    from pimforge.sim import verilator as vl

    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIMFORGE_CACHE_GB", text)
    with pytest.raises(ToolMissingError, match="PIMFORGE_CACHE_GB must be a positive"):
        vl.preflight()


@pytest.mark.cocotb
def test_cocotb_build_interrupted_in_place_is_rebuilt(tmp_path, monkeypatch):
    """A half build folder of a real block (no stamp, a broken executable) is not
    trusted: the bench rebuilds it, in a temporary folder renamed into place, and
    the renamed Verilator build runs its cocotb tests."""
    from pimforge.verif import runner
    from pimforge.verif.regression import select

    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path))
    bench = select("fp32_add")[0]
    el = elaborate(bench.block, bench_config(bench))
    bdir = runner._build_folder(el.verilog, el.top, "verilator", False)
    bdir.mkdir(parents=True)
    (bdir / f"{el.top}.v").write_text(el.verilog)
    (bdir / el.top).write_text("not an executable")       # cut off by Ctrl-C
    r = runner.run_testbench(bench.name, bench.block, bench.module,
                             config=bench_config(bench))
    assert r.tests > 0 and r.failed == 0, f"seed {r.seed}: {r.results_xml}"
    assert (bdir / sb._STAMP).read_text() == sb._digest(bdir / el.top)
    assert _leftovers(bdir.parent) == []
    # the compiler's intermediates are gone; the executable runs without them
    assert not [f.name for f in bdir.rglob("*") if f.suffix in sb._INTERMEDIATES]
    built = (bdir / el.top).stat().st_mtime_ns
    again = runner.run_testbench(bench.name, bench.block, bench.module,
                                 config=bench_config(bench))
    assert again.ok and (bdir / el.top).stat().st_mtime_ns == built   # reused, not rebuilt
