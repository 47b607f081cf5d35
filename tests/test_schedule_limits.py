"""``pimforge schedule sharing``: a model too big to build within --time-limit is refused
up front with an estimate, the time limit covers building the model, and a set size whose
exact cycles take minutes is warned about before the work."""

from __future__ import annotations

import time

import pytest

from pimforge.gen.cli import main
from pimforge.sim.nicepim import sharing as sh


def test_huge_ilp_is_refused_up_front_with_an_estimate(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t0 = time.monotonic()
    code = main(["schedule", "sharing", "--mesh", "64x64", "--set-size", "256",
                 "--time-limit", "10", "--json", "r.json"])
    took = time.monotonic() - t0
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err[-1].startswith("pimforge schedule: error: the ILP of 16 set(s) of 256 nodes")
    assert "1,044,480 binaries" in err[-1] and "GiB" in err[-1] and "--time-limit 10" in err[-1]
    assert took < 10, took          # counted, not built (building took 70 s and 1.2 GB)
    assert list(tmp_path.iterdir()) == []


def test_size_check_passes_what_builds_in_time_and_counts_memory():
    m = sh.Mesh(16, 16)
    sets = sh.sharing_sets(m, 16, 1)
    assert sh.ilp_size(m, sets) == (3840, 10240)
    sh.check_ilp_size(m, sets, 1.0)
    with pytest.raises(sh.SharingError, match="GiB"):
        sh.check_ilp_size(m, sets, 60.0, memory=10240 * sh.BUILD_BYTES_PER_ENTRY)


def test_time_limit_covers_building_the_model(monkeypatch):
    m = sh.Mesh(8, 8)
    sets = sh.sharing_sets(m, 16, 1)
    real = sh._cycle_vars
    def slow(model, members):
        time.sleep(0.3)
        return real(model, members)
    monkeypatch.setattr(sh, "_cycle_vars", slow)
    t0 = time.monotonic()
    with pytest.raises(sh.SharingError, match=r"ran out while building the model"):
        sh.schedule_ilp(m, sets, 8, time_limit=0.5, warm_start=False)
    assert time.monotonic() - t0 < 1.5


def test_big_sets_are_warned_about_before_the_work(capsys, monkeypatch):
    assert sh.size_warning("shp", 256) is None and sh.size_warning("ilp", 16) is None
    assert "64 nodes" in sh.size_warning("tsp", 64)
    ran = []
    monkeypatch.setattr(sh, "schedule", lambda *a, **k: ran.append(capsys.readouterr().err)
                        or (_ for _ in ()).throw(sh.SharingError("stop")))
    assert main(["schedule", "sharing", "--mesh", "8x8", "--set-size", "64",
                 "--method", "tsp"]) == 2
    assert "warning: the exact minimum-hop cycle of a set of 64 nodes" in ran[0]
