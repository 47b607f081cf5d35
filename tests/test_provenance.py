"""Every JSON a command writes says what made it, and so does the first line of its CSVs.

The test walks every command the parser offers (the framework's, every registered
workload, command and design-space exploration) and runs each one that writes JSON on
a tiny input. Commands whose work needs a Verilator, Yosys or nextpnr build run with
that step replaced by a stand-in, so the test checks the command's own output path in
seconds. A new command fails the coverage test until it has a case here.
"""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import numpy as np
import pytest

from pimforge.gen import cli
from pimforge.gen.config import load_config
from pimforge.gen.provenance import (
    PROVENANCE_FIELDS,
    config_sha256,
    pimforge_version,
    read_csv_comment,
    stamp,
)
from pimforge.gen.registry import commands, explorers, workloads

#: Commands that write no JSON file, and why.
NO_JSON = {
    "config": "prints the resolved config itself",
    "compile": "writes SIMB assembly text",
    "examples": "copies the example files",
}

SWEEP = """
workload = "capsnet"
config = "default"
[options]
scale = 64
model-only = true
threads = 1
[axes]
net = ["Caps-SV1"]
"""


class _AnyKey(dict):
    """A stand-in result whose printed fields are all 1."""

    def __missing__(self, key):
        return 1


def _fake_regress(monkeypatch, tmp_path):
    from pimforge.verif import runner

    monkeypatch.setattr(runner, "run_testbench", lambda name, *a, **k: types.SimpleNamespace(
        name=name, tests=1, failed=0, seed=7, build_s=0.0, run_s=0.0, ok=True,
        results_xml=tmp_path / "results.xml"))


def _fake_synth(monkeypatch, tmp_path):
    from pimforge.gen import synth

    def fake(block, config):
        return synth.SynthResult(block, block, config.name, {}, {
            "cells": 1, "flops": 0, "memory_bits": 0, "nand2_eq": 10.0, "memories": []},
            "yosys", True, 0.0)

    monkeypatch.setattr(synth, "synth_block", fake)


def _fake_fpga(monkeypatch, tmp_path):
    from pimforge.gen import fpga

    monkeypatch.setattr(fpga, "check_board", lambda board: None)
    monkeypatch.setattr(fpga, "build_fpga", lambda block, config, board, out: fpga.FPGAResult(
        block, board, "LFE5U-85F", config.name, 1, 1, 0, 0, 0, {}, 100.0, 25.0, 1, 1, 1,
        "x.bit", 0.0))


def _fake_membench(monkeypatch, tmp_path):
    from pimforge.sim import membench, verilator

    monkeypatch.setattr(verilator, "preflight", lambda: None)
    monkeypatch.setattr(membench, "membench", lambda cfg, **kw: _AnyKey(
        config=cfg.name, pattern="seq", mapping="default"))


def _fake_noc(monkeypatch, tmp_path):
    from pimforge.sim import noc, verilator

    monkeypatch.setattr(verilator, "preflight", lambda: None)
    monkeypatch.setattr(noc, "noc_sweep", lambda cfg, **kw: {
        "config": cfg.name, "mesh": "2x2", "traffic": "uniform", "zero_load_latency": 1.0,
        "zero_load_latency_model": 1.0, "saturation_throughput": None,
        "max_accepted_throughput": 0.5})


def _cheap_mapper(monkeypatch, tmp_path):
    from pimforge.sim.nicepim import mapper

    def fake(net, cfg, **_):
        n = cfg.nicepim
        return mapper.Mapping(net.name, "fake", 1e9 / (n.nodes * n.pe_rows * n.pe_cols),
                              1e10 + (n.ibuf_bytes + n.wbuf_bytes + n.obuf_bytes) * 1e3)

    monkeypatch.setattr(mapper, "map_network", fake)


def _fake_accuracy(monkeypatch, tmp_path):
    from pimforge.sim.capsnet import accuracy

    monkeypatch.setattr(accuracy, "evaluate", lambda cfg: [])
    monkeypatch.setattr(accuracy, "accuracy_table", lambda rows: "")


def _own_toml(monkeypatch, tmp_path):
    (tmp_path / "mine.toml").write_text('extends = "hmc_gen3"\n[hmc]\nvaults = 16\n')


def _sweep_spec(monkeypatch, tmp_path):
    (tmp_path / "spec.toml").write_text(SWEEP)


STENCIL = Path(__file__).resolve().parents[1] / "sim" / "examples" / "ipim_stencil.s"

#: command path -> (argv, JSON files, CSV files, set-up, the config it names)
CASES = {
    "verilog": (["verilog", "--top", "fp32_add", "--out", "v"], ["v/fp32_add.json"], [],
                None, "default"),
    "regress": (["regress", "-k", "fp32_add_lat1", "--json", "r.json"], ["r.json"], [],
                _fake_regress, None),
    "run capsnet": (["run", "capsnet", "--net", "Caps-SV1", "--scale", "64", "--model-only",
                     "--threads", "1", "--json", "r.json"], ["r.json"], [], None, "default"),
    "run image": (["run", "image", "--bench", "brighten", "--size", "16x16", "--engine", "iss",
                   "--dump", "d", "--json", "r.json"], ["r.json", "d/brighten/params.json"],
                  [], None, "ipim_small"),
    "run dnn": (["run", "dnn", "--net", "vgg16", "--scale", "1", "--layers", "1", "--json",
                 "r.json"], ["r.json"], [], None, "nicepim_small"),
    "sweep": (["sweep", "spec.toml", "--workers", "1", "--out", "out"],
              ["out/results.json", "out/points/*.json"], ["out/results.csv"], _sweep_spec,
              None),
    "dse spm": (["dse", "spm", "--org", "HY", "--max-sectors", "2", "--out", "o"],
                ["o/results.json"], ["o/points.csv"], None, None),
    "dse nicepim": (["dse", "nicepim", "--nets", "vgg16", "--iterations", "1", "--init", "2",
                     "--method", "random", "--candidates", "16", "--area-samples", "16",
                     "--out", "o"], ["o/results.json"], ["o/points.csv"], _cheap_mapper,
                    "nicepim_4x4"),
    "synth": (["synth", "fp32_add", "--json", "s.json"], ["s.json"], [], _fake_synth,
              "default"),
    # a config as the target: the config named is the target, not --config's default
    "synth hmc_gen3": (["synth", "hmc_gen3", "--json", "s.json"], ["s.json"], [],
                       _fake_synth, "hmc_gen3"),
    "fpga": (["fpga", "--board", "ulx3s-85f", "--top", "fp32_add", "--json", "f.json"],
             ["f.json"], [], _fake_fpga, "default"),
    "membench": (["membench", "--json", "m.json"], ["m.json"], [], _fake_membench, "default"),
    "noc": (["noc", "--json", "n.json"], ["n.json"], [], _fake_noc, "default"),
    "approx": (["approx", "--samples", "100", "--json", "a.json"], ["a.json"], [], None,
               "default"),
    "accuracy": (["accuracy", "--json", "a.json"], ["a.json"], [], _fake_accuracy, "default"),
    "demo": None,               # see test_demo_json_says_what_made_it
    "capsnet-dist": (["capsnet-dist", "--config", "mine.toml", "--net", "Caps-SV1", "--json",
                      "c.json"], ["c.json"], [], _own_toml, "mine.toml"),
    "simb": (["simb", "run", str(STENCIL), "--dump", "st"], ["st/state.json"], [], None,
             "default"),
    "schedule": (["schedule", "sharing", "--mesh", "2x2", "--set-size", "4", "--method", "tsp",
                  "--json", "s.json"], ["s.json"], [], None, "default"),
}


def _command_paths() -> set[str]:
    paths = set(cli.CORE) - {"run", "dse"} | set(commands())
    paths |= {f"run {w}" for w in workloads()} | {f"dse {e}" for e in explorers()}
    return paths


def test_every_command_has_a_case():
    assert _command_paths() == {c.split()[0] if c.startswith("synth") else c
                                for c in CASES} | set(NO_JSON)


def _check(doc: dict, argv: list[str], config: str | None, tmp_path: Path) -> None:
    assert list(doc)[:len(PROVENANCE_FIELDS)] == list(PROVENANCE_FIELDS), list(doc)
    assert re.fullmatch(r"pimforge\.[a-z.-]+", doc["schema"]), doc["schema"]
    assert isinstance(doc["schema_version"], int)
    assert doc["pimforge_version"] == pimforge_version()
    if config is None:
        return
    if config.endswith(".toml"):
        path = tmp_path / config
        assert doc["config"] == str(path.resolve())
        assert doc["config_sha256"] == config_sha256(load_config(str(path)))
    else:
        assert doc["config"] == config
        assert re.fullmatch(r"[0-9a-f]{64}", doc["config_sha256"])


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c is not None])
def test_json_outputs_say_what_made_them(name, tmp_path, monkeypatch, capsys):
    argv, outputs, csvs, setup, config = CASES[name]
    monkeypatch.chdir(tmp_path)
    if setup is not None:
        setup(monkeypatch, tmp_path)
    assert cli.main(argv) == 0, capsys.readouterr().err
    for pattern in outputs:
        files = sorted(tmp_path.glob(pattern))
        assert files, pattern
        for f in files:
            doc = json.loads(f.read_text())
            _check(doc, argv, config, tmp_path)
            assert doc["argv"] == argv
            if name == "sweep" and "points" in pattern:       # a point: its run's config
                _check(doc["result"], [], "default", tmp_path)
                assert doc["result"]["argv"][:2] == ["run", "capsnet"]
                assert doc["config"] == "default" and doc["config_sha256"] == doc[
                    "result"]["config_sha256"]
    for pattern in csvs:
        prov, rest = read_csv_comment((tmp_path / pattern).read_text())
        _check(prov, argv, config, tmp_path)
        assert rest and not rest.startswith("#")


def test_demo_json_says_what_made_it():
    from pimforge.sim.demo import demo_json

    cfg = load_config("default")
    res = types.SimpleNamespace(to_json=lambda: {"schema": "pimforge.run.capsnet",
                                                 "schema_version": 1, "cycles": 5})
    y = np.array([1, 2])
    doc = demo_json(res, y, y, np.array([1, 3]), cfg)
    _check(doc, [], "default", Path("."))
    assert doc["demo"]["float64_accuracy"] == 0.5 and doc["cycles"] == 5


def test_stamp_replaces_a_config_name_and_keeps_the_rest():
    doc = stamp({"config": "x", "a": 1}, "pimforge.t", 3)
    assert doc["config"] is None and doc["a"] == 1 and doc["schema_version"] == 3
    with pytest.raises(ValueError):
        stamp({"a": 1})
