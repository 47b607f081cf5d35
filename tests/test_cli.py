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


#: Presets whose whole top takes Verilator minutes and gigabytes: the test generates the
#: whole top (so the preset elaborates and its manifest is checked) and lints its parts at
#: the preset's own size. A part that is a leaf module of the whole (its kind names the
#: module, e.g. ``nicepim_node_<digest>``) is linted from the whole's own Verilog with that
#: module as the top, without converting it again; any other part is generated alone at
#: the preset. PIMFORGE_LINT_ALL=1 lints the whole top too, and so does `pimforge verilog
#: PRESET --lint`. The wiring of the whole is linted at a smaller size: nicepim_small's
#: array for the NicePIM arrays, ipim_small's cube for ipim_eval's (the same vaults, PEs
#: and mesh), and for Table III's vault (a 1.5-minute lint of 32 PEs) ipim_eval's vault,
#: which has the same core, queues, PGSM and VSM with 4 PEs.
LINT_PARTS = {"nicepim_4x4": ("nicepim_node",), "nicepim_gpu": ("nicepim_node",),
              "ipim_eval": ("simb_vault",),
              "ipim_table3": ("simb_pe", "simb_core", "simb_pgsm", "simb_vsm")}
LINT_ALL = os.environ.get("PIMFORGE_LINT_ALL") == "1"


def leaf_module(modules, kind):
    """The one module of *modules* that is a leaf of *kind* (``kind_...``), or None."""
    found = [m for m in modules if m.startswith(f"{kind}_")]
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.mark.parametrize("preset", preset_names())
def test_verilog_for_every_preset_lints(tmp_path, preset):
    from pimforge.sim.verilator import lint

    parts = () if LINT_ALL else LINT_PARTS.get(preset, ())
    whole = ["verilog", preset, "--out", str(tmp_path)]
    assert main(whole if parts else [*whole, "--lint"]) == 0
    manifest = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert manifest["config_name"] == preset
    assert manifest["top"] and manifest["ports"]
    for part in parts:
        module = leaf_module(manifest["modules"], part)
        if module is not None:
            lint(tmp_path / f"{manifest['top']}.v", module)
        else:
            assert main(["verilog", "--top", part, "--config", preset, "--out",
                         str(tmp_path / part), "--lint"]) == 0


#: Blocks that a preset's test above lints whole, at the size that preset gives them: the
#: block test generates them at that preset (the same elaboration, kept by the cache) and
#: checks the manifest, without a second lint of the same Verilog (the first such preset
#: in name order: ``default`` for the PE).
LINTED_AS_PRESET_TOPS = {}
for _p in preset_names():
    if _p not in LINT_PARTS:
        LINTED_AS_PRESET_TOPS.setdefault(load_config(_p).top, _p)


#: Whole-cube blocks whose default config (every vault of a full cube) takes minutes to
#: elaborate and lint: the test generates and lints them at the config their regression
#: bench builds, which has every kind of module they have (PIMFORGE_LINT_ALL=1, or
#: `pimforge verilog --top NAME --lint`, does the default).
LINT_AT_BENCH = {"hmc_capsnet": "hmc_capsnet_routing",
                 "capsnet_operand_port": "operand_port_4lanes"}

#: Blocks that a test here lints as a leaf module inside a larger top, at a config close to
#: their default (ipim_small is the default iPIM with a larger program memory; the
#: routing bench's vaults have the default PE): the block test generates them at the
#: default config and checks that the top, as the tests above generate it, has the leaf,
#: without a second lint of it.
LINTED_INSIDE = {"simb_vault": "ipim_cube", "simb_pe": "ipim_cube",
                 "capsnet_vault": "hmc_capsnet"}


def config_args(block):
    """The ``--config``/``--set`` arguments the block test generates *block* at."""
    if block in LINTED_AS_PRESET_TOPS and not LINT_ALL:
        return ["--config", LINTED_AS_PRESET_TOPS[block]]
    if block in LINT_AT_BENCH and not LINT_ALL:
        bench = benches()[LINT_AT_BENCH[block]]
        assert bench.block == block
        return ["--config", bench.config, *(a for k, v in bench.overrides.items()
                                            for a in ("--set", f"{k}={v}"))]
    return []


@pytest.mark.parametrize("block", sorted(blocks()))
def test_every_block_generates_and_lints(tmp_path, block):
    linted = not LINT_ALL and (block in LINTED_AS_PRESET_TOPS or block in LINTED_INSIDE)
    if block in LINTED_INSIDE and not LINT_ALL:
        top = LINTED_INSIDE[block]
        assert main(["verilog", "--top", top, "--out", str(tmp_path / top),
                     *config_args(top)]) == 0
        modules = json.loads((tmp_path / top / f"{top}.json").read_text())["modules"]
        assert leaf_module(modules, block) is not None, (top, modules)
    assert main(["verilog", "--top", block, "--out", str(tmp_path), *config_args(block),
                 *([] if linted else ["--lint"])]) == 0
    manifest = json.loads((tmp_path / f"{block}.json").read_text())
    assert manifest["top"] == block
    names = {p["name"] for p in manifest["ports"]}
    assert {"clk", "rst"} <= names
