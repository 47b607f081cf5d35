"""Sec. 5.1 workload distribution (Eq. 6-12) and the execution score."""

import dataclasses

import numpy as np
import pytest

from pimforge.gen.config import Config, ConfigError, load_config
from pimforge.gen.config.base import from_dict
from pimforge.sim.capsnet.distribution import (
    FIG18_FREQS_MHZ,
    b_messages,
    choose_distribution,
    coefficients,
    movement_m,
    pre_aggregate,
    print_distribution_table,
    workload_e,
)
from pimforge.sim.capsnet.networks import NETWORKS, CapsNetSpec, network

# A hand-checkable network: N_B=5, N_L=4, N_H=3, I=2, C_L=2, C_H=3; 2 vaults.
TINY = CapsNetSpec("tiny", "none", batch=5, n_l=4, n_h=3, iterations=2, c_l=2, c_h=3)


def test_e_by_hand():
    # Eq. 6: ceil(5/2)=3; 3*4*3*3*(2*2-1)=324; per iteration 3*3*3*(2*4-1)=189,
    # 3*3*(3*3+19)=252, 3*4*3*(2*3-1)=180, ceil(log2 2)/2=0.5, 4*3=12 -> 633.5; 324 + 2*633.5
    assert workload_e(TINY, "B", 2) == 1591.0
    # Eq. 7: 3*4*3*((4*2-1)*3 + 2*2*3 - 2) = 36*31
    assert workload_e(TINY, "B", 2, simplified=True) == 36 * 31
    # Eq. 9: 5*ceil(4/2)*3*(2*2*(2*3-1) + 3*(2*2-1)) = 30*(20+9)
    assert workload_e(TINY, "L", 2) == 30 * 29
    # Eq. 11: 5*4*ceil(3/2)*3*(2*2-1+2*2) = 5*4*2*3*7
    assert workload_e(TINY, "H", 2) == 840


def test_m_by_hand():
    # Eq. 8: 2*[1*4*3*(4+16) + 1*4*3*(4+16)]
    assert movement_m(TINY, "B", 2) == 960
    # Eq. 10: 2*[5*1*3*(12+16) + 5*1*3*(12+16)]
    assert movement_m(TINY, "L", 2) == 1680
    # Eq. 12: 2*[1*4*(4+16) + 4*(4+16)]
    assert movement_m(TINY, "H", 2) == 320
    assert movement_m(TINY, "B", 2, packet_bytes=0) == 2 * (48 + 48)


def test_one_vault_moves_nothing_but_h_broadcast():
    assert movement_m(TINY, "B", 1) == 0 and movement_m(TINY, "L", 1) == 0
    assert movement_m(TINY, "H", 1) == 2 * 4 * 20
    assert workload_e(TINY, "L", 1) == 5 * 4 * 3 * 29


def test_eq7_is_close_to_eq6_for_table1():
    for n in NETWORKS:
        e6, e7 = workload_e(n, "B", 32), workload_e(n, "B", 32, simplified=True)
        assert abs(e6 - e7) / e6 < 0.01


def test_coefficients_and_score_units(preset):
    cfg = preset("hmc_gen3")
    alpha, beta = coefficients(cfg)
    assert alpha == pytest.approx(1 / (16 * 312.5e6))        # s per op
    assert beta == pytest.approx(1 / 16e9)                  # s per byte
    d = choose_distribution(TINY, cfg.replace(hmc=dataclasses.replace(cfg.hmc, vaults=2)))
    for dim, s in d.scores.items():
        assert s.time_s == pytest.approx(alpha * workload_e(TINY, dim, 2)
                                         + beta * movement_m(TINY, dim, 2))
        assert s.score == pytest.approx(1 / s.time_s)
    assert d.best == max("BLH", key=lambda k: d.scores[k].score)


def test_choice_moves_with_frequency_and_bandwidth(preset):
    cfg = preset("hmc_gen3")
    # compute-bound corner (huge bandwidth): smallest E wins; movement-bound: smallest M wins
    fast_net = cfg.replace(capsnet=dataclasses.replace(cfg.capsnet, intervault_bw_gbs=10_000.0))
    slow_net = cfg.replace(capsnet=dataclasses.replace(cfg.capsnet, intervault_bw_gbs=0.001))
    for n in NETWORKS:
        d = choose_distribution(n, fast_net)
        assert d.best == min("BLH", key=lambda k: d.scores[k].E)
        d = choose_distribution(n, slow_net)
        assert d.best == min("BLH", key=lambda k: d.scores[k].M)


def test_paper_fig18_caps_sv3(preset):
    """Sec. 6.4: for Caps-SV3 the L-dimension is best at 312.5 MHz, the H-dimension at 937.5 MHz.

    This is the only per-network choice the paper states in words; the rest of
    Fig. 18 is a heat map without numbers.
    """
    cfg = preset("hmc_gen3")
    assert choose_distribution("Caps-SV3", cfg, 312.5).best == "L"
    assert choose_distribution("Caps-SV3", cfg, 937.5).best == "H"


def test_fig18_study_table(capsys, preset):
    text = print_distribution_table(None, load_config("hmc_gen3"), FIG18_FREQS_MHZ)
    out = capsys.readouterr().out
    assert text in out
    assert len(text.splitlines()) == 3 + 12 * 3
    for n in NETWORKS:
        assert n.name in out
    # scores grow with frequency for every network and dimension
    cfg = preset("hmc_gen3")
    for n in NETWORKS:
        lo, hi = choose_distribution(n, cfg, 312.5), choose_distribution(n, cfg, 937.5)
        assert all(hi.scores[d].score > lo.scores[d].score for d in "BLH")


def test_print_one_network(capsys):
    print_distribution_table("Caps-MN1")
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 + 3 and all("Caps-MN1" in line for line in out[3:])


@pytest.mark.parametrize("seed", [5, 6])
def test_pre_aggregation_equals_eq4(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(13, 7, 4))
    for vaults in (1, 2, 4, 32):
        parts = pre_aggregate(a, vaults)
        assert parts.shape == (vaults, 7, 4)
        np.testing.assert_allclose(parts.sum(axis=0), a.sum(axis=0), rtol=1e-12)
    parts = pre_aggregate(a, 4)                          # snippets of ceil(13/4) = 4 samples
    np.testing.assert_allclose(parts[3], a[12], rtol=1e-12)


def test_pre_aggregation_cuts_b_messages():
    n = network("Caps-MN1")
    # snippets of ceil(100/32) = 4 samples fill only 25 vaults: 24 partials per (i, j),
    # below Eq. 8's (N_vault - 1) bound
    assert b_messages(n, 32) == 24 * 1152 * 10
    assert b_messages(network("Caps-MN3"), 32) == 29 * 1152 * 10  # 30 vaults of 10 samples
    assert b_messages(network("Caps-MN1"), 4) == 3 * 1152 * 10    # all 4 vaults: Eq. 8 exact
    assert b_messages(n, 32, pre_aggregated=False) == (100 - 4) * 1152 * 10
    small = CapsNetSpec("s", "none", batch=3, n_l=2, n_h=2, iterations=1)
    assert b_messages(small, 32) == 2 * 2 * 2                    # only 3 vaults hold samples


def test_config_fields_validated():
    with pytest.raises(ConfigError, match="capsnet.intervault_bw_gbs must be a number"):
        from_dict(Config, {"capsnet": {"intervault_bw_gbs": 0}})
    with pytest.raises(ConfigError, match="capsnet.pe_ops_per_cycle must be an integer"):
        from_dict(Config, {"capsnet": {"pe_ops_per_cycle": 0}})
    with pytest.raises(ConfigError, match="capsnet.packet_overhead_bytes"):
        from_dict(Config, {"capsnet": {"packet_overhead_bytes": -1}})
    for preset in ("default", "hmc_gen3"):
        c = load_config(preset).capsnet
        assert (c.pe_ops_per_cycle, c.intervault_bw_gbs, c.packet_overhead_bytes) == (1, 16.0, 16)


def test_frequency_study_data_and_cli(tmp_path, capsys, preset):
    import json

    from pimforge.gen.cli import main
    from pimforge.sim.capsnet.distribution import frequency_study

    cfg = preset("hmc_gen3")
    st = frequency_study(cfg)
    assert [n["network"] for n in st["networks"]] == [n.name for n in NETWORKS]
    for n in st["networks"]:
        for p in n["per_freq"]:
            d = choose_distribution(n["network"], cfg, p["freq_mhz"])
            assert p["best"] == d.best
            assert p["scores"]["L"]["score"] == pytest.approx(d.scores["L"].score)
            best = max("BLH", key=lambda k: p["scores"][k]["score"])
            assert p["best"] == best
    sv3 = next(n for n in st["networks"] if n["network"] == "Caps-SV3")
    assert sv3["choices"][0] == "L" and sv3["choices"][-1] == "H" and sv3["changes"]
    assert sum(st["choice_counts"]["312.5"].values()) == 12
    # alpha halves when the frequency doubles
    assert st["alpha_s_per_op"]["625"] == pytest.approx(st["alpha_s_per_op"]["312.5"] / 2)

    out = tmp_path / "dist.json"
    assert main(["capsnet-dist", "--freq", "312.5", "--freq", "937.5", "--net", "Caps-SV3",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Caps-SV3" in text and "changes with frequency" in text and "Caps-MN1" not in text
    data = json.loads(out.read_text())
    assert data["freqs_mhz"] == [312.5, 937.5]
    assert data["networks"][0]["choices"] == ["L", "H"]
    assert main(["capsnet-dist", "--net", "Caps-XX1"]) == 2
    assert main(["capsnet-dist", "--freq", "0"]) == 2
    assert "unknown network" in capsys.readouterr().err
