"""``pimforge run capsnet`` end to end on the vault RTL (tiny scale, default config).

The first run builds the vault-compute Verilog with Verilator (a few minutes
on 2 cores, cached afterwards).
"""

import json

import numpy as np
import pytest

from pimforge.gen.cli import main
from pimforge.sim.capsnet.networks import NETWORKS
from pimforge.verif.models.capsnet.routing import route_f64

#: Documented bound of the PE approximations on v (exp by Eq. 13-14, one
#: Newton step for 1/x and 1/sqrt(x)), relative to max |v_float64|.
V_REL_BOUND = 0.1

#: Every Table 1 network at 1/64 of B and N_L (full size: scripts/capsnet/capsnet_sweep.py).
SUITE_NETS = [(n.name, 64) for n in NETWORKS]


@pytest.mark.parametrize("net,scale", SUITE_NETS)
def test_run_capsnet_end_to_end(tmp_path, net, scale):
    out, dump = tmp_path / "r.json", tmp_path / "dump"
    rc = main(["run", "capsnet", "--net", net, "--scale", str(scale), "--json", str(out),
               "--dump", str(dump)])
    res = json.loads(out.read_text())
    assert rc == 0 and res["rtl_matches_model"] is True
    # banked DRAM (default): the timing model's count plus the memory stalls
    dr = res["dram"]
    assert dr["model"] == "banked" and res["vault_request_stalls"] == dr["vault_request_stalls"]
    assert dr["blocks_read"] > 0 and dr["blocks_written"] > 0 and dr["activates"] > 0
    assert dr["row_hits"] + dr["row_misses"] == dr["blocks_read"] + dr["blocks_written"]
    assert res["cycles"] >= res["timing_model_cycles"]
    stalls = [a + b for a, b in zip(dr["per_vault"]["vault_request_stalls"],
                                    dr["per_vault"]["bandwidth_stalls"])]
    assert res["cycles"] > res["timing_model_cycles"] and max(stalls) > 0
    assert res["isa_model_matches_route_pim"] is True
    assert res["cycles"] > 0 and res["time_s"] == pytest.approx(res["cycles"] / 312.5e6)
    assert res["dimension"] in res["scores"]
    assert res["energy_j"]["total"] > 0 and res["energy_j"]["pe"] > 0
    # the dimension with the fewest compiled cycles, whose count is the timing model's
    cyc = res["dimension_cycles"]
    assert res["dimension_rule"] == "compiled" and res["dimension"] == min(cyc, key=cyc.get)
    assert cyc[res["dimension"]] == res["timing_model_cycles"]
    assert set(res["per_equation_cycles_busiest_vault"]) >= {"eq1", "eq2", "eq3", "eq4", "eq5"}
    u, W, v = (np.load(dump / f"{n}.npy") for n in ("u", "W", "v"))
    it = int((dump / "iterations.txt").read_text())
    s = res["shape"]
    assert u.shape == (s["B"], s["N_L"], 8) and W.shape == (s["N_L"], s["N_H"], 16, 8)
    assert v.shape == (s["B"], s["N_H"], 16) and it == s["iterations"]
    v64 = route_f64(u, W, it).v
    assert np.abs(v - v64).max() <= V_REL_BOUND * np.abs(v64).max()


def test_run_capsnet_forced_dimension_and_errors(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "capsnet", "--net", "Caps-MN1", "--scale", "64", "--dim", "B",
                 "--dram", "ideal", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["dimension"] == "B" and res["dimension_forced"] and res["rtl_matches_model"]
    # always-ready memory: the RTL count is exactly the timing model's
    assert res["cycles"] == res["timing_model_cycles"]
    assert res["dram"] == {"model": "ideal"} and res["vault_request_stalls"] is None
    assert res["intervault_bytes"] > 0
    assert main(["run", "capsnet", "--net", "Caps-XX9"]) == 2
    assert "Caps-XX9" in capsys.readouterr().err
    # Full-size Caps-MN1 does not fit the default config's 4 MiB vaults.
    assert main(["run", "capsnet", "--net", "Caps-MN1"]) == 2
    assert "capacity_per_vault" in capsys.readouterr().err


def test_run_capsnet_ablation_pim_intra(tmp_path):
    """PIM-Intra (centralized units, every operand over the crossbar) is slower."""
    out = tmp_path / "r.json"
    assert main(["run", "capsnet", "--net", "Caps-EN1", "--scale", "128", "--ablation", "all",
                 "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    intra = res["variants"]["pim-intra"]
    assert intra["rtl_matches_model"] is True
    det = intra["ablation_detail"]
    assert det["placement"] == "central" and intra["dimension"] == "L"
    # every block the units read or write crosses the crossbar, with packet headers
    dram = intra["dram"]
    moved = dram["blocks_read"] + dram["blocks_written"]
    assert dram["blocks_remote"] == moved
    assert det["remote_operand_bytes"] == 16 * moved
    assert det["crossbar_bytes"] == dram["crossbar_bytes"] > 16 * moved
    assert det["crossbar"]["link_bw_gbs"] == 320.0
    parts = intra["time_breakdown"]["parts"]
    assert sum(parts.values()) == intra["cycles"]
    assert res["dram"]["blocks_remote"] == 0
    assert res["speedup_vs"]["pim-intra"] == pytest.approx(intra["time_s"] / res["time_s"])
    assert res["speedup_vs"]["pim-intra"] > 1.0
    # PIM-Inter: the same distribution placed with the default HMC mapping
    inter = res["variants"]["pim-inter"]
    assert inter["rtl_matches_model"] is True and inter["address_mapping"] == "default"
    assert res["address_mapping"] == "capsnet"
    assert res["speedup_vs"]["pim-inter"] == pytest.approx(inter["time_s"] / res["time_s"])
    # whole-network variants around this routing (Sec. 6.3)
    whole = res["whole_network"]["scenarios"]
    assert set(whole) == {"baseline", "pim-capsnet", "rmas-pim", "rmas-gpu", "all-in-pim"}
    assert res["whole_network"]["routing"]["time_s"] == res["time_s"]
    for s in ("baseline", "rmas-pim", "rmas-gpu", "all-in-pim"):
        assert res["speedup_scope"][s] == "whole network"
        assert res["speedup_vs"][s] == pytest.approx(whole[s]["time_s"]
                                                     / whole["pim-capsnet"]["time_s"])
    assert res["speedup_scope"]["pim-intra"] == "routing"
    # per-vault counters add up to the energy model's byte counts
    assert len(res["reads"]) == res["vaults"] and len(res["writes"]) == res["vaults"]
    assert 8 * sum(res["reads"]) == res["events"]["rd_bytes"]
    assert 4 * sum(res["writes"]) == res["events"]["wr_bytes"]
    assert res["events"]["act"] == res["dram"]["activates"] > 0


def test_unknown_ablation_is_rejected(capsys):
    assert main(["run", "capsnet", "--net", "Caps-MN1", "--ablation", "pim-magic"]) == 2
    assert "pim-magic" in capsys.readouterr().err


def test_demo_classifies_digits_on_the_rtl(tmp_path, capsys):
    """``pimforge demo``: trained digits CapsNet, routing on the vault RTL, bit-exact."""
    out = tmp_path / "d.json"
    assert main(["demo", "--batch", "4", "--offset", "8", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "bit-exact" in text and "digits: RTL" in text
    res = json.loads(out.read_text())
    assert res["rtl_matches_model"] is True and res["shape"]["B"] == 4
    d = res["demo"]
    assert len(d["labels"]) == 4 and d["rtl_classes"] == d["float64_classes"]
    assert d["rtl_accuracy"] >= 0.75       # the trained net is ~97 % on held-out digits
    # where the cycles over the ideal memory went: measured parts that add up
    o = res["cycles_over_ideal"]
    assert o["over"] == res["cycles"] - res["timing_model_cycles"] > 0
    assert sum(o["parts"].values()) == o["over"] and o["parts"]["unaccounted"] == 0
    assert f"cycles over the ideal memory: {o['over']:,} = " in text
    assert res["cycles"] < 1.5 * res["timing_model_cycles"]
    assert main(["demo", "--batch", "0"]) == 2
    assert "--batch" in capsys.readouterr().err


def test_run_contract_of_the_dispatcher(tmp_path):
    """``run_cli.add_arguments`` adds only the workload's options; ``run(args, config)``
    returns the typed result and neither prints nor writes the JSON."""
    import argparse

    from pimforge.gen.config import load_config
    from pimforge.sim.capsnet import run_cli
    from pimforge.sim.capsnet.workload import CapsNetRun

    p = argparse.ArgumentParser()
    run_cli.add_arguments(p)
    for common in (["--config", "default"], ["--set", "freq_mhz=300"], ["--json", "r.json"]):
        with pytest.raises(SystemExit):      # the dispatcher's, not the workload's
            p.parse_args(["--net", "Caps-MN1", *common])
    args = p.parse_args(["--net", "Caps-MN1", "--scale", "64", "--model-only",
                         "--dump", str(tmp_path / "d")])
    res = run_cli.run(args, load_config("default"))
    assert isinstance(res, CapsNetRun) and res.ok and res.executed_on == "isa-model"
    assert (tmp_path / "d" / "v.npy").is_file()
    with pytest.raises(SystemExit):
        p.parse_args(["capsnet", "--net", "Caps-MN1"])
