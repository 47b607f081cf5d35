"""PIM-CapsNet energy model: hand-checked breakdowns and the PE op counts per flow."""

import dataclasses
import types

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError
from pimforge.rtl.capsnet.params import f32_bits
from pimforge.sim.capsnet.energy import (
    COUNT_KEYS,
    DEFAULT_COEFFICIENTS,
    P100_POWER,
    EnergyCoefficients,
    energy_table,
    flow_unit_ops,
    gpu_energy,
    pim_energy,
)
from pimforge.verif.models.capsnet import pe as cpe

# Round coefficients so every expected value below is arithmetic one can do by hand.
ROUND = EnergyCoefficients(fp_add_pj=1.0, fp_mul_pj=2.0, shift_pj=0.5, act_pj_per_row_byte=1.0,
                           rw_pj_per_bit=1.0, xbar_pj_per_bit=1.0, link_pj_per_bit=2.0,
                           static_w_per_pe=0.001)


def test_default_coefficients_follow_their_sources():
    c = DEFAULT_COEFFICIENTS
    assert c.fp_add_pj == pytest.approx(0.9 * 24 / 45)          # 0.48 pJ
    assert c.fp_mul_pj == pytest.approx(3.7 * 24 / 45)          # 1.973 pJ
    assert c.act_pj_per_row_byte * 256 == pytest.approx(227.25)  # one 256 B HMC row
    assert c.rw_pj_per_bit == pytest.approx(2.68)
    assert c.link_pj_per_bit + c.xbar_pj_per_bit == pytest.approx(6.78)
    # 2.24 W - 512 PEs x 312.5 MHz x 2.4533 pJ = 1.8475 W over 512 PEs
    assert c.static_w_per_pe == pytest.approx((2.24 - 512 * 312.5e6 * 4.6 * 24 / 45 * 1e-12) / 512)
    assert 3.5e-3 < c.static_w_per_pe < 3.7e-3


def test_breakdown_by_hand():
    cfg = load_config("default")    # newton 1, recovery on, La 3, 2 vaults x 16 PEs
    counts = {"mac": 100, "mac_groups": 10, "exp": 10, "isqrt": 2, "recip": 3, "div": 4,
              "act": 4, "pre": 4, "rd": 2, "wr_bytes": 8, "ref": 1, "xbar_bytes": 10,
              "link_bytes": 5}
    e = pim_energy(counts, 1e-6, cfg, ROUND)
    pj = 1e-12
    assert e["pe_mac"] == pytest.approx(100 * 3 * pj)            # mul 2 + add 1
    assert e["pe_mac_groups"] == pytest.approx(10 * 2 * pj)      # La - 1 = 2 adds
    assert e["pe_exp"] == pytest.approx(10 * (2 * 2 + 1 + 0.5) * pj)
    assert e["pe_isqrt"] == pytest.approx(2 * (4 * 2 + 1 + 0.5) * pj)
    assert e["pe_recip"] == pytest.approx(3 * (2 * 2 + 1 + 0.5) * pj)
    assert e["pe_div"] == pytest.approx(4 * (3 * 2 + 1 + 0.5) * pj)
    assert e["pe"] == pytest.approx((300 + 20 + 55 + 19 + 16.5 + 30) * pj)
    assert e["dram_act"] == pytest.approx(4 * 256 * pj)          # 256 B rows, PRE free
    assert e["dram_rw"] == pytest.approx((2 * 16 + 8) * 8 * pj)  # rd x 16 B blocks + 8 B
    # 16384 rows per vault (4 MiB of 256 B rows) refreshed 64 ms / 7.8 us times per window
    assert cfg.hmc.capacity_per_vault // cfg.hmc.row_bytes == 16384
    assert e["dram_ref"] == pytest.approx(16384 * 7.8e-6 / 64e-3 * 256 * pj)
    assert e["crossbar"] == pytest.approx(80 * pj)
    assert e["link"] == pytest.approx(80 * pj)
    assert e["static"] == pytest.approx(0.001 * 32 * 1e-6)
    parts = e["pe"] + e["dram"] + e["crossbar"] + e["link"] + e["static"]
    assert e["total"] == pytest.approx(parts)
    assert e["power_w"] == pytest.approx(e["total"] / 1e-6)
    assert e["ops"] == {"mul": 100 + 20 + 8 + 6 + 12, "add": 100 + 20 + 10 + 2 + 3 + 4,
                        "shift": 10 + 2 + 3 + 4}
    assert "total" in energy_table(e)


def test_recovery_and_newton_steps_change_the_cost(preset):
    cfg = preset("default")
    off = cfg.replace(pe=dataclasses.replace(cfg.pe, exp_recovery=False, newton_steps=3))
    e_on = pim_energy({"exp": 1, "isqrt": 1}, 0, cfg, ROUND)
    e_off = pim_energy({"exp": 1, "isqrt": 1}, 0, off, ROUND)
    assert e_on["pe_exp"] - e_off["pe_exp"] == pytest.approx(2e-12)       # one multiply
    assert e_off["pe_isqrt"] == pytest.approx((10 * 2 + 3 + 0.5) * 1e-12)  # 1 + 3n mul, n add
    assert e_off["static"] == 0 and e_off["power_w"] == 0


def test_bad_counts_are_user_errors(preset):
    cfg = preset("default")
    with pytest.raises(PimforgeError, match="unknown energy count.*macs"):
        pim_energy({"macs": 1}, 1.0, cfg)
    with pytest.raises(PimforgeError, match="'act' must be a number >= 0"):
        pim_energy({"act": -1}, 1.0, cfg)
    with pytest.raises(PimforgeError, match="elapsed_s"):
        pim_energy({}, -1.0, cfg)
    with pytest.raises(PimforgeError, match="fp_add_pj"):
        EnergyCoefficients(fp_add_pj=-1)
    assert set(COUNT_KEYS) >= set(flow_unit_ops(cfg))


class _Counter:
    """Counts elements passed through the golden model's FP units."""

    def __init__(self, monkeypatch):
        self.n = {"mul": 0, "add": 0, "shift": 0}
        for name, unit in (("f32_mul", "mul"), ("f32_add", "add")):
            monkeypatch.setattr(cpe, name, self._wrap(getattr(cpe, name), unit))
        sh = cpe.sh
        monkeypatch.setattr(cpe, "sh", types.SimpleNamespace(
            fix=self._wrap(sh.fix, "shift"), isqrt_seed=self._wrap(sh.isqrt_seed, "shift"),
            recip_seed=self._wrap(sh.recip_seed, "shift")))

    def _wrap(self, fn, unit):
        def f(a, *rest, **kw):
            self.n[unit] += np.asarray(a).size
            return fn(a, *rest, **kw)
        return f


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
@pytest.mark.parametrize("recovery", [False, True])
def test_flow_unit_ops_match_the_golden_pe(monkeypatch, steps, recovery, preset):
    """The op table equals the multiplies/adds/shifts the bit-exact PE model performs."""
    base = preset("default")
    cfg = base.replace(pe=dataclasses.replace(base.pe, newton_steps=steps,
                                              exp_recovery=recovery))
    table = flow_unit_ops(cfg)
    one = np.array([f32_bits(2.5)], dtype=np.uint32)
    pe = cpe.PEModel(cfg)
    for flow, call in (("exp", lambda: pe.exp(one)), ("isqrt", lambda: pe.isqrt(one)),
                       ("recip", lambda: pe.recip(one)), ("div", lambda: pe.div(one, one))):
        c = _Counter(monkeypatch)
        call()
        assert c.n == table[flow], flow
        monkeypatch.undo()
    # one MAC group of 7 products: 7 mul, 7 lane adds and La - 1 reduction adds
    c = _Counter(monkeypatch)
    pe.mac(np.full(7, f32_bits(1.0)), np.full(7, f32_bits(2.0)))
    expect = {u: 7 * table["mac"][u] + table["mac_groups"][u] for u in table["mac"]}
    assert c.n == expect


def test_gpu_energy_model():
    assert gpu_energy(1e-3) == pytest.approx(0.25)                 # 250 W x 1 ms
    assert gpu_energy(1e-3, activity=0) == pytest.approx(0.030)
    assert gpu_energy(2.0, activity=0.5) == pytest.approx(2 * (30 + 110))
    assert P100_POWER.tdp_w == 250
    with pytest.raises(PimforgeError):
        gpu_energy(1.0, activity=1.5)


def test_routing_estimate_counts_by_hand(preset):
    from pimforge.sim.capsnet.distribution import choose_distribution
    from pimforge.sim.capsnet.energy import routing_counts_estimate, routing_energy_estimate
    from pimforge.sim.capsnet.networks import CapsNetSpec

    tiny = CapsNetSpec("tiny", "none", batch=5, n_l=4, n_h=3, iterations=2, c_l=2, c_h=3)
    cfg = preset("hmc_gen3")
    counts, t, dim = routing_counts_estimate(tiny, cfg)
    # u_hat = 5*4*3*3 = 180 words; reads W 72 + u 40 + 2 x 2 x 180 + 2 x (2*12 + 45) words
    assert counts["rd_bytes"] == 4 * (72 + 40 + 720 + 138)
    assert counts["wr_bytes"] == 4 * (180 + 2 * (24 + 90))
    assert counts["act"] == counts["pre"] == -(-(3880 + 1632) // 256)
    assert counts["link_bytes"] == 4 * (40 + 45)
    d = choose_distribution(tiny, cfg)
    assert dim == d.best and t == d.scores[dim].time_s and counts["xbar_bytes"] == d.scores[dim].M
    assert counts["exp"] == 2 * 12 and counts["isqrt"] == 2 * 15
    assert counts["mac"] == 5 * 4 * 3 * 3 * 2 + 2 * (24 + 12 + 180 + 45 + 30 + 30 + 45 + 180
                                                     + 60 + 24)
    r = routing_energy_estimate("Caps-MN1", cfg)
    p = r["pim"]
    assert all(p[k] > 0 for k in ("pe", "dram", "crossbar", "link", "static"))
    assert r["gpu_j"] == pytest.approx(250 * r["gpu_s"])
    assert 0 < r["saving"] < 1 and r["saving"] == pytest.approx(1 - p["total"] / r["gpu_j"])
