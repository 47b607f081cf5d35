import json
import os
import subprocess
import sys

import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import load_config, preset_names
from pimforge.gen.registry import benches, blocks


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "pimforge.gen.cli", *args],
                          capture_output=True, text=True)


def test_bad_config_is_clean_error(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[hmc]\nvaults = 48\n")
    r = run_cli("verilog", str(p), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    assert "hmc.vaults must be a power of two between 1 and 64, not 48" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_unknown_block_lists_available(tmp_path, capsys):
    assert main(["verilog", "--top", "nonesuch", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown block 'nonesuch'" in err and "fp32_add" in err


#: Presets whose whole top takes Verilator minutes and gigabytes: the test lints the top's
#: parts at the preset's own size and generates the whole top (so the preset elaborates
#: and its manifest is checked); PIMFORGE_LINT_ALL=1 lints the whole top too, and so does
#: `pimforge verilog PRESET --lint`. The wiring of the whole is linted at a smaller size:
#: nicepim_small's array for the NicePIM arrays, and for Table III's vault (a 1.5-minute
#: lint of 32 PEs) ipim_eval's cube, whose vaults have the same core, queues, PGSM and VSM.
LINT_PARTS = {"nicepim_4x4": ("nicepim_node",), "nicepim_gpu": ("nicepim_node",),
              "ipim_table3": ("simb_core", "simb_pe", "simb_pgsm", "simb_vsm")}
LINT_ALL = os.environ.get("PIMFORGE_LINT_ALL") == "1"


@pytest.mark.parametrize("preset", preset_names())
def test_verilog_for_every_preset_lints(tmp_path, preset):
    parts = () if LINT_ALL else LINT_PARTS.get(preset, ())
    for part in parts:
        assert main(["verilog", "--top", part, "--config", preset, "--out",
                     str(tmp_path / part), "--lint"]) == 0
    whole = ["verilog", preset, "--out", str(tmp_path)]
    assert main(whole if parts else [*whole, "--lint"]) == 0
    manifest = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert manifest["config_name"] == preset
    assert manifest["top"] and manifest["ports"]


#: Blocks that a preset's test above lints whole, at the size that preset gives them: the
#: block test generates them at the default config and checks the manifest, without a
#: second lint of nearly the same Verilog.
LINTED_AS_PRESET_TOPS = {load_config(p).top for p in preset_names() if p not in LINT_PARTS}


#: Whole-cube blocks whose default config (every vault of a full cube) takes minutes to
#: elaborate and lint: the test generates and lints them at the config their regression
#: bench builds, which has every kind of module they have (PIMFORGE_LINT_ALL=1, or
#: `pimforge verilog --top NAME --lint`, does the default).
LINT_AT_BENCH = {"hmc_capsnet": "hmc_capsnet_routing",
                 "capsnet_operand_port": "operand_port_4lanes"}


@pytest.mark.parametrize("block", sorted(blocks()))
def test_every_block_generates_and_lints(tmp_path, block):
    lint = [] if block in LINTED_AS_PRESET_TOPS and not LINT_ALL else ["--lint"]
    config = []
    if block in LINT_AT_BENCH and not LINT_ALL:
        bench = benches()[LINT_AT_BENCH[block]]
        assert bench.block == block
        config = ["--config", bench.config, *(a for k, v in bench.overrides.items()
                                              for a in ("--set", f"{k}={v}"))]
    assert main(["verilog", "--top", block, "--out", str(tmp_path), *config, *lint]) == 0
    manifest = json.loads((tmp_path / f"{block}.json").read_text())
    assert manifest["top"] == block
    names = {p["name"] for p in manifest["ports"]}
    assert {"clk", "rst"} <= names
