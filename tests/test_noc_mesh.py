"""The mesh NoC on Verilator under random traffic, every link watched by the driver.

The native driver (sim/drivers/noc_main.cpp) checks at every cycle that each
flit arrives intact at its destination, each packet whole and on one VC, nothing
twice and, for ordered flows, each (source, destination) flow in order; that every hop between
routers goes the X-then-Y way and each packet takes exactly its Manhattan
number of hops; that no link carries a flit without a credit nor returns a
credit for no flit; and that no packet arrives sooner than the router pipeline
allows. In check mode the sources stop after the measurement window and every
packet must arrive within a bound (no loss, no deadlock). Any violation makes
the driver fail, which raises here.
"""

import json
import logging

import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import load_config
from pimforge.sim import noc

log = logging.getLogger(__name__)

# A 3x3 mesh (coordinates that are not powers of two), 32-bit flits, two VCs of
# two flits: small enough to compile quickly, and every router port is used.
SMALL = {"noc.rows": 3, "noc.cols": 3, "noc.flit_bits": 32, "noc.buffer_depth": 2}


@pytest.fixture(scope="module")
def small():
    cfg = load_config("default", SMALL)
    return cfg, noc.build_driver(cfg, probes=True)


@pytest.mark.parametrize("traffic, seed, stall", [("uniform", 1, 0.3), ("transpose", 2, 0.0),
                                                  ("uniform", 3, 0.0)])
def test_random_traffic_at_and_above_saturation(small, traffic, seed, stall):
    cfg, exe = small
    log.info("traffic %s seed %d stall %.2f", traffic, seed, stall)
    rates = [0.2, 0.6, 1.0]
    pts = noc.run_driver(cfg, rates, traffic=traffic, packet_flits=3, warmup=100, measure=1500,
                         drain=5000, check=True, stall=stall, seed=seed, exe=exe)
    for p in pts:
        assert p["errors"] == 0 and p["drained"] == 1, p
        assert p["delivered"] == p["generated"] > 0, p
        assert p["packets_hopped"] == p["delivered"] and p["excess_min"] >= 0, p
    # above saturation the sources queue and wait for credits, so flow control is tested
    top = pts[-1]
    assert top["credit_stalls"] > 1000, top
    assert top["accepted_flits"] < 0.9 * 1500 * (9 if traffic == "uniform" else 6), top
    if stall:
        assert top["sink_stalls"] > 0


def test_ordered_flows_stay_in_order_and_others_overtake(small):
    """Near saturation, packets with a free VC per hop overtake older ones of their flow
    (so the driver's order check can fail), and with the ordered flag none do (the
    driver fails on any)."""
    cfg, exe = small
    seen = {}
    for ordered in (False, True):
        pts = noc.run_driver(cfg, [0.5], traffic="uniform", packet_flits=1, warmup=100,
                             measure=1500, check=True, seed=4, ordered=ordered, exe=exe)
        (p,) = pts
        assert p["errors"] == 0 and p["drained"] == 1 and p["delivered"] == p["generated"], p
        seen[ordered] = p["overtaken"]
    assert seen[False] > 0 and seen[True] == 0, seen


def test_zero_load_latency_is_the_pipeline(small):
    """At a very low load some packets meet nobody: their latency is exactly
    2 (H + 1) + L - 1 cycles, and none is faster (the driver fails otherwise)."""
    cfg, exe = small
    (p,) = noc.run_driver(cfg, [0.004], traffic="uniform", packet_flits=2, warmup=0,
                          measure=4000, drain=1000, check=True, seed=5, exe=exe)
    assert p["delivered"] > 20 and p["excess_min"] == 0, p
    assert p["excess_sum"] / p["delivered"] < 0.5, p


def test_noc_command_writes_json_and_png(tmp_path, small):
    cfg, _ = small
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    sets = [x for k, v in SMALL.items() if k not in ("noc.rows", "noc.cols")
            for x in ("--set", f"{k}={v}")]
    assert main(["noc", "--config", "default", *sets, "--mesh", "3x3", "--packet-flits", "3",
                 "--step", "0.5", "--warmup", "100", "--measure", "500", "--json", str(out),
                 "--png", str(png)]) == 0
    r = json.loads(out.read_text())
    assert r["mesh"] == "3x3" and r["traffic"] == "uniform" and r["vcs"] == 2
    offered = [c["offered"] for c in r["curve"]]
    assert offered == sorted(offered) and {0.5, 1.0} <= set(offered)
    assert r["zero_load_latency_model"] == pytest.approx(
        2 * (noc.mean_hops(3, 3, "uniform") + 1) + 2)
    # without contention the measured packets' latency is the model's, up to sampling
    assert r["zero_load_latency"] - r["zero_load_contention"] == pytest.approx(
        r["zero_load_latency_model"], rel=0.15)
    sat = r["saturation_throughput"]
    assert 0 < sat <= r["max_accepted_throughput"] and sat <= r["ideal_throughput_xy"] <= 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ideal_bounds():
    # uniform on k x k (other nodes only): 4 (k^2 - 1) / k^3; transpose under XY: 1/(k - 1)
    assert noc.channel_bound(8, 8, "uniform") == pytest.approx(4 * 63 / 512)
    assert noc.channel_bound(4, 4, "uniform") == pytest.approx(4 * 15 / 64)
    assert noc.channel_bound(8, 8, "transpose") == pytest.approx(1 / 7)
    assert noc.mean_hops(8, 8, "uniform") == pytest.approx(2 * 8 / 3)


@pytest.mark.parametrize("argv, msg", [
    (["--mesh", "4by4"], "--mesh must be ROWSxCOLS such as 4x4, not '4by4'"),
    (["--mesh", "40x4"], "noc.rows must be an integer between 1 and 16, not 40"),
    (["--mesh", "2x4", "--traffic", "transpose"], "transpose traffic needs a square mesh"),
    (["--packet-flits", "9"], "--packet-flits must be at most noc.packet_flits = 4, not 9"),
])
def test_noc_command_bad_input_is_one_line(tmp_path, capsys, argv, msg):
    out = tmp_path / "r.json"
    assert main(["noc", *argv, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("sets, msg", [
    ({"noc.buffer_depth": 1}, "noc.buffer_depth must be an integer between 2 and 64, not 1"),
    ({"noc.vcs": 3}, "noc.vcs must be a multiple of noc.classes = 2, not 3"),
    ({"noc.rows": 1, "noc.cols": 1}, "noc.cols must be at least 2 when noc.rows is 1"),
    ({"noc.flit_bits": 48}, "noc.flit_bits must be a power of two between 32 and 512, not 48"),
])
def test_noc_config_checks(sets, msg):
    from pimforge.gen.config import ConfigError

    with pytest.raises(ConfigError, match=msg):
        load_config("default", sets)
