"""Amaranth-simulator unit tests of the scratchpad, its PMU and the organizations."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from pimforge.rtl.descnet.organization import DESCNetSPM
from pimforge.rtl.descnet.pmu import SPMPowerManager
from pimforge.rtl.descnet.scratchpad import SectoredSPM, poison
from pimforge.verif.tb.amaranth_sim import simulate


def run(dut, tb):
    simulate(dut, tb, period=1e-8)


@pytest.mark.parametrize("wake, slp", [(1, 1), (3, 2), (7, 4)])
def test_pmu_latencies(wake, slp):
    dut = SPMPowerManager(sectors=2, wakeup_cycles=wake, sleep_cycles=slp)
    seen = {}

    async def tb(ctx):
        ctx.set(dut.sleep_req, 0b10)
        n = 0
        while True:
            await ctx.tick()
            n += 1
            assert ctx.get(dut.on) & 1       # the other sector is untouched
            if ctx.get(dut.sleep_ack) & 2:
                break
            assert not ctx.get(dut.on) & 2 and ctx.get(dut.sleep) & 2
        seen["sleep"] = n
        assert ctx.get(dut.lose) == 0b10 and ctx.get(dut.sleep) == 0b10
        await ctx.tick()
        assert ctx.get(dut.lose) == 0        # a one-cycle pulse
        ctx.set(dut.sleep_req, 0)
        n = 0
        while True:
            await ctx.tick()
            n += 1
            if ctx.get(dut.on) & 2:
                break
            assert ctx.get(dut.sleep_ack) & 2 and not ctx.get(dut.sleep) & 2
        seen["wake"] = n
        assert ctx.get(dut.sleep_ack) == 0 and ctx.get(dut.wakeups[1]) == 1
        on0, on1 = ctx.get(dut.on_cycles[0]), ctx.get(dut.on_cycles[1])
        assert on0 - on1 == slp + 1          # sleep = 1 from GOING_OFF to the release edge

    run(dut, tb)
    assert seen == {"sleep": slp, "wake": wake}


def test_spm_non_retention_two_ports():
    dut = SectoredSPM(size_bytes=128, word_bits=16, banks=2, sectors=4, ports=2,
                      wakeup_cycles=2, sleep_cycles=1)

    async def tb(ctx):
        for a in range(64):
            ctx.set(dut.p0.en, 1)
            ctx.set(dut.p0.we, 1)
            ctx.set(dut.p0.addr, a)
            ctx.set(dut.p0.wdata, 1000 + a)
            # Port 1 writes the same word: port 0 has priority.
            ctx.set(dut.p1.en, 1)
            ctx.set(dut.p1.we, 1)
            ctx.set(dut.p1.addr, a)
            ctx.set(dut.p1.wdata, 5)
            await ctx.tick()
        ctx.set(dut.p1.en, 0)
        ctx.set(dut.p0.we, 0)
        ctx.set(dut.sleep_req, 0b0100)          # sector 2: words 32..47
        ctx.set(dut.p0.en, 0)
        await ctx.tick().repeat(2)
        ctx.set(dut.p0.en, 1)
        ctx.set(dut.p0.addr, 40)
        await ctx.tick()
        assert ctx.get(dut.p0.err) and ctx.get(dut.p0.rdata) == poison(16)
        ctx.set(dut.sleep_req, 0)
        ctx.set(dut.p0.en, 0)
        await ctx.tick().repeat(3)
        ctx.set(dut.p0.en, 1)
        for a in range(64):
            ctx.set(dut.p0.addr, a)
            await ctx.tick()
            assert not ctx.get(dut.p0.err)
            want = poison(16) if 32 <= a < 48 else 1000 + a
            assert ctx.get(dut.p0.rdata) == want, a

    run(dut, tb)


def test_hy_routing_and_arbitration():
    dut = DESCNetSPM(organization="HY", word_bits=32, banks=2,
                     sizes={"shared": 64, "data": 32, "weight": 32, "acc": 32},
                     sectors={"shared": 2, "data": 2, "weight": 1, "acc": 1}, shared_ports=1)
    assert dut.memory_map["words"]["data"] == {"separate": 8, "shared_base": 8, "shared": 16}

    async def tb(ctx):
        # data word 3 -> separate; weight word 8 + 5 -> shared word 5.
        for port, addr, val in ((dut.data, 3, 11), (dut.weight, 13, 22)):
            ctx.set(port.en, 1)
            ctx.set(port.we, 1)
            ctx.set(port.addr, addr)
            ctx.set(port.wdata, val)
            await ctx.tick()
            ctx.set(port.en, 0)
        # Both go to the 1-port shared memory in the same cycle: acc loses.
        ctx.set(dut.data.en, 1)
        ctx.set(dut.data.we, 0)
        ctx.set(dut.data.addr, 8 + 5)
        ctx.set(dut.acc.en, 1)
        ctx.set(dut.acc.we, 0)
        ctx.set(dut.acc.addr, 8 + 5)
        await ctx.tick()
        assert ctx.get(dut.data.rdata) == 22 and not ctx.get(dut.data.err)
        assert ctx.get(dut.acc.err) == 1
        ctx.set(dut.acc.en, 0)
        ctx.set(dut.data.addr, 3)
        await ctx.tick()
        assert ctx.get(dut.data.rdata) == 11
        ctx.set(dut.data.addr, 30)               # beyond separate + shared
        await ctx.tick()
        assert ctx.get(dut.data.err) == 1

    run(dut, tb)


@pytest.mark.parametrize("kwargs, msg", [
    (dict(banks=3), "banks must be a power of two between 1 and 64, not 3"),
    (dict(ports=4), "ports must be an integer between 1 and 3, not 4"),
    (dict(size_bytes=48), "size_bytes must be a power of two"),
])
def test_parameter_validation(kwargs, msg):
    base = dict(size_bytes=256, word_bits=32, banks=4, sectors=4, ports=1)
    with warnings.catch_warnings():
        # The half-built components would warn that they were never elaborated.
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=msg):
            SectoredSPM(**{**base, **kwargs})
        with pytest.raises(ValueError, match="shared_ports must be 3 for the SMP"):
            DESCNetSPM(organization="SMP", word_bits=32, banks=2, sizes={"shared": 64},
                       sectors={"shared": 1}, shared_ports=2)
        gc.collect()


@pytest.mark.parametrize("section, msg", [
    ({"banks": 3}, "spm.banks must be a power of two between 1 and 64, not 3"),
    ({"organization": "XY"}, "spm.organization must be one of 'SMP', 'SEP', 'HY', not 'XY'"),
    ({"organization": "SMP", "shared_ports": 1}, "spm.shared_ports must be 3 for the SMP"),
    ({"data_bytes": 16}, "spm.data_bytes must be at least word_bits/8 x banks x sectors"),
])
def test_spm_config_validation(section, msg):
    from pimforge.gen.config import Config, ConfigError
    from pimforge.gen.config.base import from_dict

    with pytest.raises(ConfigError, match=msg.replace("(", r"\(")):
        from_dict(Config, {"spm": section})
