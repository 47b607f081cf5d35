import json
import subprocess
import sys

import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import preset_names
from pimforge.gen.registry import blocks


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


#: Presets whose top is an array of many copies of one node: the test lints the node at the
#: preset's own size (Verilator would spend minutes and gigabytes elaborating every copy;
#: `pimforge verilog PRESET --lint` still lints the whole array), and nicepim_small's
#: array lint covers the array's wiring.
LINT_NODE_ONLY = {"nicepim_4x4": "nicepim_node", "nicepim_gpu": "nicepim_node"}


@pytest.mark.parametrize("preset", preset_names())
def test_verilog_for_every_preset_lints(tmp_path, preset):
    top = LINT_NODE_ONLY.get(preset)
    if top is None:
        assert main(["verilog", preset, "--out", str(tmp_path), "--lint"]) == 0
    else:
        assert main(["verilog", "--top", top, "--config", preset, "--out", str(tmp_path),
                     "--lint"]) == 0
        assert main(["verilog", preset, "--out", str(tmp_path / "array")]) == 0
    manifest = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert manifest["config_name"] == preset
    assert manifest["top"] and manifest["ports"]


@pytest.mark.parametrize("block", sorted(blocks()))
def test_every_block_generates_and_lints(tmp_path, block):
    assert main(["verilog", "--top", block, "--out", str(tmp_path), "--lint"]) == 0
    manifest = json.loads((tmp_path / f"{block}.json").read_text())
    assert manifest["top"] == block
    names = {p["name"] for p in manifest["ports"]}
    assert {"clk", "rst"} <= names
