"""The registry: accelerators are discovered, and a new one plugs in without shared edits."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

from pimforge.gen import registry
from pimforge.gen.config import Config, _make_config, load_config


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "pimforge.gen.cli", *args],
                          capture_output=True, text=True)


def test_accelerators_discovered_shared_first():
    names = [a.name for a in registry.accelerators()]
    assert names[0] == "shared" and {"capsnet", "descnet"} <= set(names)


def test_every_config_section_comes_from_the_registry():
    fields = [f.name for f in dataclasses.fields(Config)]
    assert fields[:3] == ["name", "top", "freq_mhz"]
    assert set(fields[3:]) == set(registry.sections())


def test_tables_are_filled():
    assert {"fp32_add", "capsnet_vault", "descnet_spm", "hmc_mem"} <= set(registry.blocks())
    assert "capsnet" in registry.workloads()
    assert {"membench", "demo", "approx", "accuracy", "capsnet-dist"} <= set(
        registry.commands())
    assert "spm" in registry.explorers()
    for b in registry.benches().values():
        assert b.block in registry.blocks(), b


def test_unknown_block_is_a_clean_error():
    with pytest.raises(registry.UnknownNameError, match="unknown block 'nope'; available: .*"
                                                          "fp32_add"):
        registry.get_block("nope")


def test_a_new_accelerator_plugs_in(tmp_path, monkeypatch):
    """A module dropped into the accelerators package adds its section, blocks, workloads
    and commands; nothing else changes."""
    pkg = tmp_path / "plug"
    pkg.mkdir()
    (pkg / "toyacc.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from pimforge.gen.registry import Accelerator, Block, Command, Section, Workload

        @dataclass(frozen=True)
        class ToyConfig:
            lanes: int = 4

        ACCELERATOR = Accelerator(
            name="toyacc", doc="a toy",
            sections=(Section("toy", "pimforge.gen.accelerators.toyacc:ToyConfig"),),
            blocks=(Block("toy_block", "pimforge.rtl.fp.add:from_config", "a toy block"),),
            workloads=(Workload("toy", "a toy workload", "pimforge.sim.membench"),),
            commands=(Command("toy-cmd", "a toy command", "pimforge.sim.membench"),),
        )
    '''))
    from pimforge.gen import accelerators

    monkeypatch.setattr(accelerators, "__path__", [*accelerators.__path__, str(pkg)])
    registry.accelerators.cache_clear()
    try:
        assert "toyacc" in [a.name for a in registry.accelerators()]
        assert "toy_block" in registry.blocks() and "toy" in registry.workloads()
        cfg = _make_config()()
        assert cfg.toy.lanes == 4 and cfg.hmc.vaults == 2
    finally:
        monkeypatch.undo()
        registry.accelerators.cache_clear()
        sys.modules.pop("pimforge.gen.accelerators.toyacc", None)
    assert "toyacc" not in [a.name for a in registry.accelerators()]


def test_duplicate_names_are_refused(tmp_path, monkeypatch):
    pkg = tmp_path / "dup"
    pkg.mkdir()
    (pkg / "zdup.py").write_text(
        "from pimforge.gen.registry import Accelerator, Block\n"
        "ACCELERATOR = Accelerator(name='zdup', doc='x', blocks=(Block('fp32_add', "
        "'pimforge.rtl.fp.add:from_config', 'again'),))\n")
    from pimforge.gen import accelerators

    monkeypatch.setattr(accelerators, "__path__", [*accelerators.__path__, str(pkg)])
    registry.accelerators.cache_clear()
    try:
        with pytest.raises(ValueError, match="block 'fp32_add' is registered by both shared "
                                             "and zdup"):
            registry.accelerators()
    finally:
        monkeypatch.undo()
        registry.accelerators.cache_clear()
        sys.modules.pop("pimforge.gen.accelerators.zdup", None)


def test_run_list_and_set_from_the_command_line():
    r = run_cli("run", "--list")
    assert r.returncode == 0 and "capsnet" in r.stdout
    r = run_cli("config", "default", "--set", "hmc.vaults=8")
    assert r.returncode == 0 and '"vaults": 8' in r.stdout
    for bad, msg in ((["hmc.vault=8"], "unknown config key 'hmc.vault'"),
                     (["hmc.vaults=7"], "hmc.vaults must be a power of two"),
                     (["hmc.vaults=x"], "hmc.vaults must be an integer, not 'x'"),
                     (["pe.exp_recovery=\"no\""], "pe.exp_recovery must be true or false"),
                     (["hmcvaults"], "--set takes SECTION.FIELD=VALUE"),
                     (["hmc.vaults=4", "hmc.vaults=8"], "--set hmc.vaults is given twice")):
        r = run_cli("config", "default", *(x for b in bad for x in ("--set", b)))
        assert r.returncode == 2, (bad, r.stderr)
        assert msg in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_set_reaches_every_config_command(tmp_path):
    r = run_cli("verilog", "--top", "fp32_add", "--set", "fp.add_latency=2", "--out",
                str(tmp_path))
    assert r.returncode == 0, r.stderr
    import json
    m = json.loads((tmp_path / "fp32_add.json").read_text())
    assert m["config_values"]["fp"]["add_latency"] == 2
    assert load_config("default", {"fp.add_latency": 2}).fp.add_latency == 2
