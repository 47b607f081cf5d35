"""``pimforge dse spm`` end to end into a temporary folder."""

import argparse
import csv
import json

import pytest

from pimforge.gen.errors import UnknownNameError
from pimforge.sim.descnet import dse_cli as cli


def parse(*argv):
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return p.parse_args(list(argv))


def test_dse_spm_capsnet(tmp_path, capsys):
    assert cli.run(parse("--net", "capsnet", "--out", str(tmp_path))) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    for key in ("configs_evaluated", "seconds", "pareto", "selected", "paper", "system",
                "baseline_8mib"):
        assert key in res
    assert set(res["selected"]) == {"SMP", "SMP-PG", "SEP", "SEP-PG", "HY", "HY-PG"}
    for p in res["pareto"]:
        assert {"size_kib", "sectors", "area_mm2", "energy_mj"} <= set(p)
    areas = [p["area_mm2"] for p in res["pareto"]]
    energies = [p["energy_mj"] for p in res["pareto"]]
    assert areas == sorted(areas) and energies == sorted(energies, reverse=True)
    with open(tmp_path / "points.csv") as f:
        assert f.readline().startswith('# {"schema": "pimforge.dse.spm.points"')
        rows = list(csv.reader(f))
    assert len(rows) - 1 == res["configs_evaluated"]
    assert (tmp_path / "energy_area.png").read_bytes()[:4] == b"\x89PNG"
    assert res["selected"]["HY-PG"]["energy_mj"] < res["selected"]["HY"]["energy_mj"]
    assert 0 < res["system"]["HY-PG"]["saving_vs_8mib"] < 1
    assert "HY-PG total energy" in capsys.readouterr().out


def test_dse_spm_one_org(tmp_path):
    assert cli.run(parse("--net", "deepcaps", "--org", "SEP,SEP-PG",
                         "--out", str(tmp_path))) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert set(res["selected"]) == {"SEP", "SEP-PG"}


@pytest.mark.parametrize("argv, msg", [
    (("--net", "lenet"), "unknown --net 'lenet'; allowed: capsnet, deepcaps"),
    (("--org", "HY,XX"), "unknown --org 'XX'; allowed: SMP, SMP-PG, SEP"),
])
def test_bad_values_are_clean_errors(tmp_path, argv, msg):
    with pytest.raises(UnknownNameError, match=msg.replace("(", r"\(")):
        cli.run(parse(*argv, "--out", str(tmp_path)))
    assert not (tmp_path / "results.json").exists()


def test_dse_is_registered_in_the_cli():
    from pimforge.gen.cli import build_parser
    from pimforge.gen.registry import explorers, resolve

    e = explorers()["spm"]
    assert resolve(e.cli).run is cli.run
    args = build_parser().parse_args(["dse", "spm", "--out", "x"])
    assert args.kind == "spm" and args.net == "capsnet"


def test_unknown_kind_is_a_usage_error(capsys):
    from pimforge.gen.cli import main

    assert main(["dse", "warp", "--out", "x"]) == 2
    assert "invalid choice: 'warp'" in capsys.readouterr().err
