"""Memory system: timing resolution, config checks, address maps, protocol checker,
RMAS model, and membench on the RTL (trace checked offline)."""

import dataclasses
import random

import numpy as np
import pytest

from pimforge.gen.config import ConfigError, load_config
from pimforge.gen.config.hmc import DRAMTimingNs, HMCConfig
from pimforge.rtl.mem.address_map import HDL_OPS, NUMPY_OPS, AddressMap
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.verif.models.dram_timing import TimingChecker, check_trace, read_trace
from pimforge.verif.models.rmas import rmas_grant, rmas_nh

HMC21 = {"tCL": 17, "tRCD": 17, "tRP": 17, "tCWL": 13, "tRAS": 34, "tRC": 51, "tBL": 4,
         "tCCD": 4, "tRTP": 9, "tWTR": 3, "tWR": 19, "tRRD": 7, "tFAW": 17, "tRFC": 200,
         "tREFI": 9750}


@pytest.mark.parametrize("preset", ["default", "hmc_gen3"])
def test_timing_defaults_resolve_to_hmc21_cycles(preset):
    h = load_config(preset).hmc
    assert resolve_timing(h.timing, h.tck_ns).as_dict() == HMC21


def test_timing_rounds_up_at_a_slower_clock():
    t = resolve_timing(DRAMTimingNs(), 1.0)   # 13.6 ns at 1 ns -> 14 cycles
    assert t.tCL == 14 and t.tBL == 4 and t.tREFI == 7800


@pytest.mark.parametrize("kw, msg", [
    ({"max_block_bytes": 48}, "hmc.max_block_bytes must be a power of two between 32 and 256"),
    ({"scheduler": "lifo"}, "hmc.scheduler must be one of 'fcfs', 'frfcfs'"),
    ({"page_policy": "half"}, "hmc.page_policy must be one of 'open', 'close'"),
    ({"queue_depth": 1}, "hmc.queue_depth must be an integer between 2 and 64"),
    ({"capacity_per_vault": 3000}, "hmc.capacity_per_vault must be a power of two"),
    ({"mapping": "capsnet", "row_bytes": 128, "max_block_bytes": 32},
     "hmc.row_bytes must be at least 256 with mapping 'capsnet'"),
])
def test_hmc_config_validation(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        HMCConfig(**kw)


def test_timing_validation():
    with pytest.raises(ConfigError, match="hmc.timing.tRC must be at least tRAS"):
        DRAMTimingNs(tRC=10.0)


@pytest.mark.parametrize("kind", ["default", "capsnet"])
def test_address_map_roundtrip_and_numpy(kind):
    h = load_config("hmc_gen3").hmc
    m = AddressMap.from_config(h, kind)
    r = random.Random(5)
    addrs = []
    for _ in range(3000):
        f = (r.randrange(h.vaults), r.randrange(16), r.randrange(h.rows), r.randrange(16))
        s = r.randrange(5)
        a = m.encode(*f, s)
        d = m.decode(a)
        assert (d.vault, d.bank, d.row, d.col) == f
        addrs.append(a)
    arr = np.array(addrs, dtype=np.int64)
    d = m.decode(arr, NUMPY_OPS)
    ints = [m.decode(a) for a in addrs]
    assert list(d.bank) == [x.bank for x in ints] and list(d.row) == [x.row for x in ints]


def test_capsnet_mapping_properties():
    h = load_config().hmc
    m = AddressMap.from_config(h, "capsnet")
    base = 1 * h.capacity_per_vault
    for s in range(5):
        blocks = 1 << s
        # consecutive blocks of one sub-page: one vault, bank and row
        sub = [m.decode((base + i * 16) | (s << 1)) for i in range(blocks)]
        assert len({(d.vault, d.bank, d.row) for d in sub}) == 1 and sub[0].vault == 1
        # consecutive sub-pages: different banks
        nxt = [m.decode((base + k * blocks * 16) | (s << 1)) for k in range(h.banks_per_vault)]
        assert sorted(d.bank for d in nxt) == list(range(h.banks_per_vault))
    # default mapping: consecutive sub-pages go to different vaults first
    dm = AddressMap.from_config(h, "default")
    assert [dm.decode(i * h.max_block_bytes).vault for i in range(2)] == [0, 1]


@pytest.mark.parametrize("kind", ["default", "capsnet"])
def test_address_map_hdl_matches_int(kind):
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    amap = AddressMap.from_config(load_config().hmc, kind)
    a = Signal(amap.addr_bits)
    d = amap.decode(a, HDL_OPS)
    outs = {n: Signal(16, name=n) for n in ("vault", "bank", "row", "col")}
    m = Module()
    m.d.comb += [outs[n].eq(getattr(d, n)) for n in outs]
    r = random.Random(kind)
    sim = Simulator(m)

    async def tb(ctx):
        for _ in range(300):
            x = r.randrange(1 << amap.addr_bits)
            ctx.set(a, x)
            ref = amap.decode(x)
            for n, s in outs.items():
                assert ctx.get(s) == getattr(ref, n), (kind, hex(x), n)

    sim.add_testbench(tb)
    sim.run()


def _t():
    h = load_config().hmc
    return resolve_timing(h.timing, h.tck_ns)


@pytest.mark.parametrize("cmds, rule", [
    ([(0, "ACT", 0, 1), (10, "RD", 0, 1)], "tRCD"),
    ([(0, "ACT", 0, 1), (20, "PRE", 0, 1)], "tRAS"),
    ([(0, "ACT", 0, 1), (34, "PRE", 0, 1), (40, "ACT", 0, 2)], "tRP"),
    ([(0, "ACT", 0, 1), (3, "ACT", 1, 1)], "tRRD"),
    # HMC's tFAW (17) never binds with tRRD 7; checked with tRRD 1.
    ([(0, "ACT", 0, 1), (1, "ACT", 1, 1), (2, "ACT", 2, 1), (3, "ACT", 3, 1),
      (4, "ACT", 4, 1)], "tFAW"),
    ([(0, "ACT", 0, 1), (7, "ACT", 1, 1), (17, "RD", 0, 1), (24, "RD", 1, 1),
      (26, "RD", 0, 1)], "tCCD"),
    ([(0, "ACT", 0, 1), (17, "WR", 0, 1), (25, "RD", 0, 1)], "tWTR"),
    ([(0, "ACT", 0, 1), (17, "RD", 0, 1), (20, "WR", 0, 1)], "read-to-write"),
    ([(0, "ACT", 0, 1), (17, "WR", 0, 1), (40, "PRE", 0, 1)], "tWR"),
    ([(0, "ACT", 0, 1), (30, "RD", 0, 1), (34, "PRE", 0, 1)], "tRTP"),
    ([(0, "ACT", 0, 1), (40, "REF", -1, 0)], "REF with a bank open"),
    ([(0, "REF", -1, 0), (100, "ACT", 0, 1)], "tRFC"),
    ([(0, "ACT", 0, 1), (17, "RD", 0, 2)], "column to row 2"),
])
def test_checker_catches_each_violation(cmds, rule):
    t = _t() if rule != "tFAW" else dataclasses.replace(_t(), tRRD=1)
    c = TimingChecker(t, 16)
    for cyc, cmd, bank, row in cmds:
        c.step(cyc, cmd, bank, row, 0)
    assert any(rule in v.rule for v in c.violations), [str(v) for v in c.violations]


def test_checker_accepts_legal_sequence():
    t = _t()
    c = TimingChecker(t, 16)
    seq = [(0, "ACT", 0), (t.tRCD, "RD", 0), (t.tRCD + t.tCCD, "RD", 0),
           (t.tRAS, "PRE", 0), (t.tRAS + t.tRP, "REF", -1), (t.tRAS + t.tRP + t.tRFC, "ACT", 0)]
    for cyc, cmd, bank in seq:
        c.step(cyc, cmd, bank, 1, 0)
    assert not c.violations, [str(v) for v in c.violations]


def test_rmas_model_formula_and_choice():
    r = random.Random(3)
    for _ in range(2000):
        V = r.choice([2, 8, 32])
        q = [r.randrange(17) for _ in range(V)]
        tgt = [r.random() < 0.4 for _ in range(V)]
        gv, gh = r.randrange(1, 256), r.randrange(256)
        n_max = sum(tgt)
        qs = sum(x for x, t in zip(q, tgt) if t)
        nh = rmas_nh(q, tgt, gv, gh)
        if n_max and qs:
            qbar = qs / n_max
            f = int(np.floor(np.sqrt(n_max * gh / (qbar * gv)) + 1e-9))
            assert nh == min(max(f, 0), n_max)
        g = rmas_grant(q, tgt, gv, gh)
        assert len(g) == nh and all(tgt[v] for v in g)
        rest = [q[v] for v in range(V) if tgt[v] and v not in g]
        assert not g or not rest or max(q[v] for v in g) <= min(rest)


@pytest.fixture(scope="module")
def small_cfg():
    cfg = load_config()
    return cfg.replace(hmc=dataclasses.replace(
        cfg.hmc, banks_per_vault=4, capacity_per_vault=4 * 256 * 16, queue_depth=8, links=1,
        timing=DRAMTimingNs(tREFI=640.0)))


@pytest.mark.cocotb
@pytest.mark.parametrize("pattern, mapping", [("random", "default"), ("pe-burst", "capsnet"),
                                              ("mixed", "capsnet")])
def test_membench_trace_obeys_timing(tmp_path, small_cfg, pattern, mapping):
    from pimforge.sim.membench import membench

    tr = tmp_path / "trace.csv"
    cfg = small_cfg.replace(hmc=dataclasses.replace(small_cfg.hmc, mapping=mapping))
    r = membench(cfg, pattern=pattern, requests=768, write_fraction=0.3, trace=tr, seed=7)
    assert r["errors"] == 0
    rows = read_trace(tr)
    t = resolve_timing(cfg.hmc.timing, cfg.hmc.tck_ns)
    bad, _checkers = check_trace(rows, t, cfg.hmc.banks_per_vault)
    assert not bad, [str(v) for v in bad[:10]]
    counts = {k: sum(1 for x in rows if x["cmd"] == k) for k in ("ACT", "RD", "WR", "PRE", "REF")}
    assert counts == r["commands"]
    assert counts["RD"] + counts["WR"] == r["requests"]
    assert counts["REF"] >= 1 and counts["WR"] > 0
    assert set(r["timing"]) == {"tRCD", "tRP", "tRAS", "tRC", "tCCD", "tRRD", "tFAW", "tWR",
                                "tRTP", "tWTR", "tCL", "tCWL", "tBL", "tRFC", "tREFI"}
    assert 0 < r["bandwidth_fraction"] <= 1 and 0 <= r["row_hit_rate"] <= 1
    if pattern == "mixed":
        assert r["host_requests"] + r["pe_requests"] == r["requests"] > 0


def test_vault_port_signature_family():
    from pimforge.rtl.mem.port import VaultPortSignature

    a = VaultPortSignature(bank_bits=4, row_bits=6, col_bits=4, tag_bits=8)
    assert a == VaultPortSignature(bank_bits=4, row_bits=6, col_bits=4, tag_bits=8)
    assert a != VaultPortSignature(bank_bits=4, row_bits=7, col_bits=4, tag_bits=8)
    assert "row_bits=6" in repr(a)
    assert a.members["req"].signature.members["payload"].shape.size == 1 + 1 + 4 + 6 + 4 + 8 + 128
    with pytest.raises(ValueError, match="tag_bits must be an integer between 1 and 32, not 0"):
        VaultPortSignature(bank_bits=4, row_bits=6, col_bits=4, tag_bits=0)


def test_vault_controller_parameter_checks():
    from pimforge.rtl.mem.vault_ctrl import VaultController

    t = _t()
    with pytest.raises(ValueError, match="banks must be a power of two between 1 and 64, not 12"):
        VaultController(timing=t, banks=12)
    with pytest.raises(ValueError, match="scheduler must be one of 'fcfs', 'frfcfs', not 'lifo'"):
        VaultController(timing=t, scheduler="lifo")
