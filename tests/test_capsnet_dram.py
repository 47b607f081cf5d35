"""The vault driver's banked DRAM model: block accounting against a Python count.

Runs a small routing (default config, both address mappings) on the Verilated
vault compute and checks the DRAM counters: the blocks read and written equal
the distinct 16-byte blocks of every lane bundle, computed here from the loop
descriptors alone (with the controller's port rules: the unused ``b`` port
repeats ``a``, a held operand past ``o2 = 0`` repeats the other, in the
held loop order); every block is a row hit or an ACT; stalls are what separates
the run from the always-ready memory; and the memories are unchanged by the
model. Also checks the ``hmc.vault_bw_gbs`` validation.
"""

import numpy as np
import pytest

from pimforge.gen.config import Config, load_config
from pimforge.gen.config.base import ConfigError, from_dict
from pimforge.rtl.capsnet.isa import Hold, Opcode
from pimforge.rtl.capsnet.pe import Flow
from pimforge.sim.capsnet.compiler import compile_routing
from pimforge.sim.capsnet.networks import CapsNetSpec
from pimforge.sim.capsnet.overhead import PARTS, cycles_over_ideal
from pimforge.sim.capsnet.rtl_run import build_vault_driver, run_on_rtl
from pimforge.sim.capsnet.timing import program_cycles
from pimforge.sim.capsnet.workload import pe_latency
from pimforge.verif.models.capsnet.isa import execute
from pimforge.verif.models.capsnet.pe import PEModel

SEED = 77


def _bundles(ins, lanes, hold_words):
    """Per issue step: (a lane words, b lane words, d lane words or None)."""
    g = 2 if ins.op is Opcode.ADD else ins.g
    uses_b = ((ins.op is Opcode.FLOW and ins.flow in (Flow.MAC, Flow.DIV))
              or ins.op is Opcode.SELPOS)
    hold = ins.hold if ins.hold is not Hold.NONE and g <= hold_words else None
    steps = [(o2, o3) for o2 in range(ins.n2) for o3 in range(0, ins.n3, lanes)]
    if hold:   # the held loop order: o2 inside the lane blocks
        steps.sort(key=lambda t: (t[1], t[0]))
    for o1 in range(ins.n1):
        for o2, o3 in steps:
            live = np.arange(o3, min(ins.n3, o3 + lanes))
            for e in range(g):
                def at(x, e=e, o1=o1, o2=o2, live=live):
                    s = {k: getattr(ins, f"{x}_{k}") for k in ("s1", "s2", "s3", "se")}
                    return (getattr(ins, x) + o1 * s["s1"] + o2 * s["s2"]
                            + live * s["s3"] + e * s["se"])
                a = at("b") if ins.op is Opcode.ADD and e == 1 else at("a")
                b = at("b") if uses_b or (ins.op is Opcode.ADD and e == 1) else a
                if hold is Hold.B and o2:
                    b = a
                elif hold is Hold.A and o2:
                    a = b
                last = e == g - 1 and ins.op is not Opcode.SEND
                yield a, b, (at("d", e=0) if last else None)


def _expected_blocks(comp, lanes, hold_words):
    rd = wr = 0
    for prog in comp.programs:
        for ins in prog:
            if ins.op in (Opcode.BAR, Opcode.HALT):
                continue
            for a, b, d in _bundles(ins, lanes, hold_words):
                rd += len(set((a >> 2).tolist()) | set((b >> 2).tolist()))
                if d is not None:
                    wr += len(set((d >> 2).tolist()))
    return rd, wr


@pytest.fixture(scope="module")
def cfg():
    return load_config()


@pytest.mark.parametrize("mapping", ["capsnet", "default"])
def test_dram_block_accounting(cfg, mapping):
    rng = np.random.default_rng(SEED)
    print("seed", SEED)
    net = CapsNetSpec("tiny", "none", batch=3, n_l=20, n_h=3, iterations=2)
    u = rng.normal(0, 1, (net.batch, net.n_l, 8)).astype(np.float32)
    W = rng.normal(0, 0.3, (net.n_l, net.n_h, 16, 8)).astype(np.float32)
    comp = compile_routing(net, "L", cfg, mapping=mapping)
    mems = comp.memories(u, W)
    want = [m.copy() for m in mems]
    execute(comp.programs, want, PEModel(cfg))
    exe = build_vault_driver(cfg)
    ideal = run_on_rtl(comp, mems, cfg, exe=exe, dram="ideal")
    banked = run_on_rtl(comp, mems, cfg, exe=exe, hold_blocks=False)
    held = run_on_rtl(comp, mems, cfg, exe=exe, threads=1)   # the default keeps them
    for r in (ideal, banked, held):
        assert all(np.array_equal(a, b) for a, b in zip(r.memories, want))
    d = banked.dram_summary()
    rd, wr = _expected_blocks(comp, cfg.capsnet.pes_per_vault, cfg.capsnet.hold_words)
    assert any(i.hold is not Hold.NONE for p in comp.programs for i in p)
    assert (d["blocks_read"], d["blocks_written"]) == (rd, wr)
    assert d["row_hits"] + d["row_misses"] == rd + wr and d["activates"] > 0
    stalls = d["vault_request_stalls"] + d["bandwidth_stalls"]
    assert banked.cycles > ideal.cycles and stalls > 0
    # every vault's extra busy cycles are its stall cycles
    for v in range(comp.vaults):
        extra = banked.busy[v] - ideal.busy[v]
        assert extra == (banked.vault_request_stalls[v] + banked.bandwidth_stalls[v])
    # holding the last bundle's blocks never fetches more and is never slower
    h = held.dram_summary()
    assert h["blocks_read"] < rd and h["blocks_written"] <= wr   # port buffers merge
    assert held.cycles <= banked.cycles
    assert ideal.reads == banked.reads and ideal.writes == banked.writes
    # the driver's worker threads change nothing (2 vaults: one each, sends cross)
    two = run_on_rtl(comp, mems, cfg, exe=exe, threads=2)
    assert all(np.array_equal(a, b) for a, b in zip(two.memories, want))
    assert (two.cycles, two.busy, two.dram_summary()) == (held.cycles, held.busy, h)


def test_vault_bw_validation():
    with pytest.raises(ConfigError, match="hmc.vault_bw_gbs must be a positive number"):
        from_dict(Config, {"hmc": {"vault_bw_gbs": 0}})
    assert load_config("hmc_gen3").hmc.vault_bw_gbs == 16.0


def test_cycles_over_ideal_breakdown(cfg):
    """The demo's breakdown: with an always-ready memory every vault's per-phase busy
    cycles are the timing model's; with the banked DRAM the last vault at each barrier
    is late by exactly its counted stalls, and the parts sum to the cycles over ideal."""
    rng = np.random.default_rng(SEED + 1)
    print("seed", SEED + 1)
    net = CapsNetSpec("tiny", "none", batch=4, n_l=24, n_h=3, iterations=2)
    u = rng.normal(0, 1, (net.batch, net.n_l, 8)).astype(np.float32)
    W = rng.normal(0, 0.3, (net.n_l, net.n_h, 16, 8)).astype(np.float32)
    comp = compile_routing(net, "B", cfg)
    mems = comp.memories(u, W)
    ex = execute(comp.programs, [m.copy() for m in mems], PEModel(cfg))
    timing = program_cycles(ex.stats, comp.vaults, ex.phases, pe_latency(cfg), cfg)
    exe = build_vault_driver(cfg)
    ideal = run_on_rtl(comp, mems, cfg, exe=exe, dram="ideal")
    assert ideal.phase_busy == timing["phase_busy"]
    assert ideal.phase_cycles == timing["phase_cycles"] and ideal.cycles == timing["cycles"]
    zero = cycles_over_ideal(ideal, timing)
    assert zero["over"] == 0 and set(zero["parts"].values()) == {0}
    for kw in ({}, {"hold_blocks": False}, {"prefetch": False}):
        run = run_on_rtl(comp, mems, cfg, exe=exe, **kw)
        b = cycles_over_ideal(run, timing)
        assert b["over"] == run.cycles - timing["cycles"] > 0, kw
        assert sum(b["parts"].values()) == b["over"], (kw, b)
        assert b["parts"]["unaccounted"] == 0, (kw, b)
        for ph in b["per_phase"]:
            assert ph["over"] == sum(ph[k] for k in PARTS), (kw, ph)
        assert b["parts"]["hidden_by_other_vaults"] <= 0
        assert (b["parts"]["bandwidth_stalls"] + b["parts"]["vault_request_stalls"]
                <= sum(run.bandwidth_stalls) + sum(run.vault_request_stalls))
        # per phase and vault: active cycles = the model's + the counted stalls
        for p, busy in enumerate(run.phase_busy):
            for v, n in enumerate(busy):
                assert n == (timing["phase_busy"][p][v] + run.phase_vault_request_stalls[p][v]
                             + run.phase_bandwidth_stalls[p][v]), (kw, p, v)


def test_pim_intra_central_crossbar(cfg):
    """PIM-Intra (Sec. 6.1): centralized units, every block over the crossbar as HMC
    packets. The blocks that cross are the ones the same programs read and write
    with the data in the vaults (counted by the local run), spread evenly over the
    vaults by the low interleave (counted here from the address bits); the
    crossbar's bytes are those blocks plus one packet header per request; a slower
    crossbar is slower; and the Fig. 16(a) breakdown adds up to the cycles."""
    import dataclasses

    from pimforge.sim.capsnet.overhead import BREAKDOWN, time_breakdown

    rng = np.random.default_rng(SEED + 2)
    print("seed", SEED + 2)
    net = CapsNetSpec("tiny", "none", batch=3, n_l=20, n_h=3, iterations=2)
    u = rng.normal(0, 1, (net.batch, net.n_l, 8)).astype(np.float32)
    W = rng.normal(0, 0.3, (net.n_l, net.n_h, 16, 8)).astype(np.float32)
    local = compile_routing(net, "L", cfg, mapping="default")
    central = dataclasses.replace(local, placement="central")
    mems = local.memories(u, W)
    want = [m.copy() for m in mems]
    execute(local.programs, want, PEModel(cfg))
    exe = build_vault_driver(cfg)

    def with_link(gbs):
        return cfg.replace(hmc=dataclasses.replace(cfg.hmc, link_bw_gbs=gbs))

    # The default cube's 320 GB/s links outrun its two vaults' TSVs; 20 GB/s (5 GB/s
    # per group each way) makes the crossbar the bottleneck, 10 GB/s more so.
    base = run_on_rtl(local, mems, cfg, exe=exe, threads=1)
    runs = {g: run_on_rtl(central, mems, with_link(g), exe=exe, threads=1)
            for g in (320.0, 20.0, 10.0)}
    b = base.dram_summary()
    assert b["blocks_remote"] == b["crossbar_bytes"] == b["crossbar_stalls"] == 0
    for g, r in runs.items():
        assert all(np.array_equal(a, w) for a, w in zip(r.memories, want)), g
        d = r.dram_summary()
        moved = d["blocks_read"] + d["blocks_written"]
        assert (d["blocks_read"], d["blocks_written"]) == (b["blocks_read"], b["blocks_written"])
        assert d["blocks_remote"] == moved
        # headers: one per written block, two per read request (request and response);
        # a read request fetches 1..fetch_blocks blocks of one aligned run
        head = d["crossbar_bytes"] - 16 * moved - 16 * d["blocks_written"]
        assert head % 32 == 0
        fetch = cfg.capsnet.fetch_blocks
        assert -(-d["blocks_read"] // fetch) <= head // 32 <= d["blocks_read"], g
        tb = time_breakdown(r)
        assert set(tb["parts"]) == set(BREAKDOWN)
        assert sum(tb["parts"].values()) == r.cycles and min(tb["parts"].values()) >= 0
    assert runs[20.0].cycles > runs[320.0].cycles and sum(runs[20.0].crossbar_stalls) > 0
    assert runs[10.0].cycles > runs[20.0].cycles
    assert sum(runs[10.0].crossbar_stalls) > sum(runs[20.0].crossbar_stalls)
    comm = {g: time_breakdown(r)["parts"]["inter_vault_communication"] for g, r in runs.items()}
    assert comm[10.0] > comm[20.0] > 0
    # the local run's breakdown: no crossbar stalls, its parts add up too
    tb = time_breakdown(base)
    assert sum(tb["parts"].values()) == base.cycles
    # the data the central units touch is spread over the vaults by the low
    # interleave: max_block_bytes runs go round the vaults (address bits, not the map)
    vb = cfg.hmc.max_block_bytes.bit_length() - 1
    for v in central.active:
        home = central.home_vaults(v, central.words[v])
        addr = (v << (local.amap.bank_bits + local.amap.row_bits + local.amap.col_bits + 4)) \
            + 16 * np.arange(home.size)
        assert (home == (addr >> vb) % cfg.hmc.vaults).all()
        counts = np.bincount(home, minlength=cfg.hmc.vaults)
        assert counts.max() - counts.min() <= cfg.hmc.max_block_bytes // 16


def test_link_bw_validation():
    with pytest.raises(ConfigError, match="hmc.link_bw_gbs"):
        from_dict(Config, {"hmc": {"link_bw_gbs": 0}})
    assert load_config("hmc_gen3").hmc.link_bw_gbs == 320.0
