"""Counts that size memory are bounded by the RAM they need, refused in one line
(naming the option and the largest value that fits) before any work starts."""

from __future__ import annotations

import pytest

from pimforge.gen import args as A
from pimforge.gen.cli import build_parser, main
from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError
from pimforge.sim import approx_cli, membench

GIB = 2**30


@pytest.fixture
def ram_1gib(monkeypatch):
    monkeypatch.setattr(A, "physical_memory", lambda: GIB)


@pytest.mark.parametrize("cmd, opt, bytes_each, base", [
    (["approx"], "--samples", approx_cli.BYTES_PER_SAMPLE, approx_cli._BASE_BYTES),
    (["membench", "--json", "r.json"], "--requests", membench.REQUEST_BYTES,
     membench._BASE_BYTES),
])
def test_count_past_the_ram_is_one_line_naming_the_largest_that_fits(
        ram_1gib, cmd, opt, bytes_each, base, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    most = (GIB - base) // bytes_each
    assert A.max_count_in_ram(bytes_each, base) == most > 1000
    args = build_parser().parse_args([*cmd, opt, str(most)])     # the largest fits
    assert getattr(args, opt.lstrip("-")) == most
    assert main([*cmd, opt, str(most + 1)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"argument {opt}: must be at most {most} " in err and "1.0 GiB of RAM" in err, err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def test_bound_follows_the_machine(monkeypatch):
    monkeypatch.setattr(A, "physical_memory", lambda: 64 * GIB)
    big = A.max_count_in_ram(64)
    monkeypatch.setattr(A, "physical_memory", lambda: 2 * GIB)
    assert A.max_count_in_ram(64) == 2 * GIB // 64 and big == 32 * A.max_count_in_ram(64)
    monkeypatch.setattr(A, "physical_memory", lambda: GIB // 2)
    assert A.max_count_in_ram(1, base=GIB) == 0        # never negative
    real = A.physical_memory()
    assert real > 0 and real % 4096 == 0


def test_membench_library_call_is_bounded_too(ram_1gib):
    most = A.max_count_in_ram(membench.REQUEST_BYTES, membench._BASE_BYTES)
    with pytest.raises(PimforgeError, match=f"--requests must be between 1 and {most} "):
        membench.membench(load_config("default"), pattern="random", requests=most + 1)


@pytest.mark.parametrize("value, ok", [("16", True), ("256", True), ("64", True), ("24", False),
                                       ("48", False), ("8", False), ("512", False),
                                       ("abc", False)])
def test_membench_burst_is_a_power_of_two_for_every_pattern(value, ok, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["membench", "--json", "r.json", "--burst", value]
    if ok:
        assert build_parser().parse_args(argv).burst == int(value)
    else:
        assert main(argv) == 2
        assert "argument --burst: must be" in capsys.readouterr().err


def test_image_counts_are_checked_against_the_held_out_digits_without_loading_them(
        tmp_path, monkeypatch, capsys):
    from pimforge.sim.capsnet import digits_net as dn

    assert len(dn.load_digits_split()[2]) == dn.TEST_IMAGES
    monkeypatch.chdir(tmp_path)
    # the split is not loaded for these: a loader that fails proves it
    monkeypatch.setattr(dn, "load_digits_split", lambda: pytest.fail("loaded the digits"))
    for argv, want in (
            (["demo", "--batch", str(dn.TEST_IMAGES + 1)], "argument --batch: must be between "
                                                          f"1 and {dn.TEST_IMAGES}"),
            (["demo", "--offset", str(dn.TEST_IMAGES - 1)], f"--offset must be between 0 and "
                                                           f"{dn.TEST_IMAGES - 16} for --batch 16"),
            (["accuracy", "--rtl-images", str(dn.TEST_IMAGES + 1)],
             f"argument --rtl-images: must be between 1 and {dn.TEST_IMAGES}")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert want in err and len(err.strip().splitlines()) == 1, err


def test_dse_space_past_the_ram_is_refused_naming_the_largest_cap_that_fits(
        tmp_path, monkeypatch, capsys):
    from pimforge.sim.descnet import dse, dse_cli
    from pimforge.sim.descnet.profiles import profile

    prof = profile("capsnet")
    for orgs, cap in ((("HY-PG",), 16), (("SEP-PG", "SMP"), 4)):
        assert dse_cli.count_configs(prof, orgs, cap) == len(dse.explore(prof, orgs,
                                                                         max_sectors=cap))
    orgs = dse.MAIN_ORGS
    counts = {m: dse_cli.count_configs(prof, orgs, m) for m in (16, 32, 64)}
    assert counts[16] < counts[32] < counts[64] < dse_cli.count_configs(prof, orgs, None)
    # RAM for the 32-sector space but not the 64-sector one
    ram = dse_cli._BASE_BYTES + (counts[32] + counts[64]) // 2 * dse_cli.BYTES_PER_CONFIG
    monkeypatch.setattr(A, "physical_memory", lambda: ram)
    out = tmp_path / "o"
    assert main(["dse", "spm", "--max-sectors", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "--max-sectors 0 (no cap) explores" in err and "use --max-sectors 32 or less" in err
    assert not out.exists()
