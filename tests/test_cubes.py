"""The whole-cube blocks (rtl/top) without a Verilator build.

The end-to-end and adapter benches are cocotb benches of the regression
(``hmc_capsnet_routing``, ``operand_port_4lanes``); here: the operand port's
hardware placement equals the compiler's, the parameter checks, and the cube's
ports follow the config.
"""

import gc
import random
import warnings

import pytest
from amaranth.hdl import Module, Signal, UnusedElaboratable
from amaranth.sim import Simulator

from pimforge.gen.config import bench_config, load_config
from pimforge.rtl.capsnet.operand_port import OperandPort, compiler_placement, port_config
from pimforge.sim.capsnet.compiler import compile_routing
from pimforge.sim.capsnet.networks import network
from pimforge.verif.regression import Bench

SEED = 2718


@pytest.mark.parametrize("preset,mapping", [("default", "default"), ("default", "capsnet"),
                                            ("hmc_gen3", "capsnet")])
def test_hardware_placement_is_the_compilers(preset, mapping):
    """word_address evaluated by the RTL (Amaranth simulator) = Compiled.cube_address."""
    cfg = bench_config(Bench("p", "p", "p", config=preset, overrides={"hmc.mapping": mapping}))
    comp = compile_routing(network("Caps-MN1").scaled(100), "L", cfg)
    amap, fn = compiler_placement(cfg.hmc)
    assert amap == comp.amap
    vault = Signal(max(1, amap.vault_bits))
    word = Signal(32)
    addr = Signal(amap.addr_bits)
    m = Module()
    m.d.comb += addr.eq(fn(vault, word))
    r = random.Random(SEED)
    cases = [(v, r.randrange(cfg.hmc.capacity_per_vault // 4)) for v in range(cfg.hmc.vaults)
             for _ in range(40)]

    async def bench(ctx):
        for v, w in cases:
            ctx.set(vault, v)
            ctx.set(word, w)
            assert ctx.get(addr) == comp.cube_address(v, w), (v, w)
            assert amap.decode(ctx.get(addr)).vault == v

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.filterwarnings("ignore:.*created but never used")   # the rejected ports
def test_operand_port_parameters_are_checked():
    amap, fn = compiler_placement(load_config().hmc)
    kw = dict(vault_bits=1, addr_bits=amap.addr_bits, word_address=fn)
    with pytest.raises(ValueError, match="lanes must be an integer between 1 and 64, not 0"):
        OperandPort(lanes=0, **kw)
    with pytest.raises(ValueError, match="tag_bits must give at least 2\\*lanes \\+ "
                                         "prefetch_blocks = 64 tags"):
        OperandPort(lanes=32, tag_bits=5, **kw)
    # with hints, the prefetch buffer's tags follow the read slots' (2*lanes + 2*lanes)
    with pytest.raises(ValueError, match="prefetch_blocks = 128 tags"):
        OperandPort(lanes=32, tag_bits=6, prefetch=8, **kw)
    with pytest.raises(ValueError, match="prefetch must be an integer between 0 and 1024"):
        OperandPort(lanes=4, prefetch=-1, **kw)
    with pytest.raises(ValueError, match="write_depth must be an integer between 2 and 1024"):
        OperandPort(lanes=4, write_depth=1, **kw)


def test_port_config_follows_the_config(preset):
    cfg = preset("hmc_gen3")
    kw = port_config(cfg)
    assert kw["lanes"] == cfg.capsnet.pes_per_vault
    assert kw["vault_bits"] == 5 and kw["write_depth"] >= 8
    assert kw["prefetch"] == cfg.capsnet.prefetch_bundles      # the vault's hint depth


def test_cube_ports_follow_the_config():
    from pimforge.rtl.capsnet.cube import HMCCapsNet

    cfg = load_config()
    top = HMCCapsNet(cfg=cfg)
    names = set(top.signature.members)
    for v in range(cfg.hmc.vaults):
        assert {f"pe{v}_req", f"pe{v}_resp_fire"} <= names
    # One DRAM array port and one command port per vault.
    for port in ("arr", "cmd"):
        assert top.signature.members[port].dimensions == (cfg.hmc.vaults,)
    assert "re" in top.signature.members["arr"].signature.members
    assert {f"host{i}" for i in range(cfg.hmc.links)} <= names
    assert {"start", "running", "cycles", "imem_we", "imem_vault", "error"} <= names
    assert len(top.computes) == len(top.ports) == cfg.hmc.vaults
    # Nothing is elaborated here: drop the blocks without Amaranth's unused-block warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        del top
        gc.collect()
