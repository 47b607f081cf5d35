"""The sectored scratchpad scales with its capacity and keeps the per-word valid-bit behaviour.

The valid bits live in tag memories with a per-sector epoch and a scrubber
(see :class:`pimforge.rtl.descnet.scratchpad.SectoredSPM`): these tests check that
the generated Verilog does not grow with the capacity, that a 256 KiB
scratchpad loses exactly its powered-off sector, and, against the golden
model with many more power cycles than the epoch counter has values (and
resets), that a word stays lost however often its epoch wraps.
"""

import contextlib
import os
import random
import time

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import DomainReset

from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate
from pimforge.rtl.descnet.scratchpad import (
    SectoredSPM,
    macro_verilog,
    poison,
    valid_tag_layout,
)
from pimforge.verif.models.descnet import Req, SPMModel
from pimforge.verif.tb.amaranth_sim import simulate


def test_verilog_does_not_grow_with_capacity():
    """16 KiB to the validator's 16 MiB: the same Verilog text but for widths, in seconds."""
    texts = {}
    for size in (16384, 262144, 1 << 24):
        t0 = time.monotonic()
        el = elaborate("spm", load_config("default", {"spm.size_bytes": size}))
        took = time.monotonic() - t0
        assert took < 60, f"{size}-byte scratchpad took {took:.1f} s to elaborate"
        texts[size] = el.verilog
        assert el.manifest["memory_map"]["words"] == size // 4
        depth = size // 4 // 16
        # One macro module, shared by all 16 bank-sector macros.
        macros = [n for n in el.manifest["modules"] if n.startswith("spm_macro_")]
        assert macros == [f"spm_macro_d{depth}_w32_p1"], el.manifest["modules"]
    lines = {size: len(t.splitlines()) for size, t in texts.items()}
    assert len(set(lines.values())) == 1, lines
    assert max(map(len, texts.values())) < 1.05 * min(map(len, texts.values()))


def test_macro_verilog_has_no_per_word_text():
    text = macro_verilog("m", depth=1 << 20, word_bits=8, ports=3)
    assert len(text) < 20000 and "[0:1048575]" in text


@pytest.mark.parametrize("depth, want", [
    (1, (1, 1, 2)), (16, (16, 1, 2)), (64, (16, 4, 3)), (4096, (16, 256, 9)),
    (1 << 20, (16, 1 << 16, 17)),
])
def test_valid_tag_layout(depth, want):
    lanes, rows, k = valid_tag_layout(depth)
    assert (lanes, rows, k) == want
    # The scrubber's bound: a stale tag is cleared before its epoch can come back.
    assert 2 ** k >= rows + 3 and lanes * rows == depth


def _sim(top, dut, tb):
    simulate(top, tb, period=1e-8)


def _idle(ctx, dut):
    ctx.set(dut.p0.en, 0)
    ctx.set(dut.p0.we, 0)


def test_256k_poison_after_power_off():
    """A large scratchpad: the words of the sector that slept read as poison,
    the other sectors keep theirs, an access while it sleeps is flagged."""
    dut = SectoredSPM(size_bytes=262144, word_bits=32, banks=4, sectors=4, ports=1,
                      wakeup_cycles=2, sleep_cycles=2)
    per = dut.words // 4
    r = random.Random(0x5EC7)
    # The first and last words of every bank of every sector, and a few in between.
    addrs = sorted({s * per + o for s in range(4)
                    for o in (0, 1, 2, 3, per - 4, per - 3, per - 2, per - 1,
                              *(r.randrange(per) for _ in range(6)))})
    data = {a: r.getrandbits(32) for a in addrs}

    async def tb(ctx):
        for a in addrs:
            ctx.set(dut.p0.en, 1)
            ctx.set(dut.p0.we, 1)
            ctx.set(dut.p0.addr, a)
            ctx.set(dut.p0.wdata, data[a])
            await ctx.tick()
        _idle(ctx, dut)
        ctx.set(dut.sleep_req, 0b0100)
        await ctx.tick().repeat(4)
        assert ctx.get(dut.sleep_ack) == 0b0100
        ctx.set(dut.p0.en, 1)
        ctx.set(dut.p0.addr, 2 * per + 5)
        await ctx.tick()
        assert ctx.get(dut.p0.err) == 1 and ctx.get(dut.p0.rdata) == poison(32)
        _idle(ctx, dut)
        ctx.set(dut.sleep_req, 0)
        await ctx.tick().repeat(3)
        assert ctx.get(dut.on) == 0b1111
        ctx.set(dut.p0.en, 1)
        for a in addrs:
            ctx.set(dut.p0.addr, a)
            await ctx.tick()
            want = poison(32) if a // per == 2 else data[a]
            assert not ctx.get(dut.p0.err)
            assert ctx.get(dut.p0.rdata) == want, hex(a)

    _sim(dut, dut, tb)


@pytest.mark.parametrize("params", [
    # 64-word macros: 4 tag rows, a 3-bit epoch that wraps every 8 losses.
    dict(size_bytes=1024, word_bits=32, banks=2, sectors=2, ports=2, wakeup_cycles=1,
         sleep_cycles=1),
    # 1-word macros (one tag row, a 2-bit epoch), three ports.
    dict(size_bytes=4, word_bits=8, banks=1, sectors=4, ports=3, wakeup_cycles=1,
         sleep_cycles=1),
    dict(size_bytes=512, word_bits=16, banks=1, sectors=4, ports=1, wakeup_cycles=2,
         sleep_cycles=3),
])
def test_matches_model_through_epoch_wraps_and_resets(params):
    """Random traffic, fast power cycling (far more losses than epoch values) and
    resets, checked cycle by cycle against the golden model of per-word valid bits."""
    seed = int(os.environ.get("PIMFORGE_SEED") or random.randrange(2**31))
    print(f"seed {seed}")
    r = random.Random(seed)
    dut = SectoredSPM(**params)
    m = Module()
    m.domains.sync = cd = ClockDomain("sync")
    m.submodules.dut = dut
    n_ports, sectors, words = params["ports"], params["sectors"], dut.words

    def new_model():
        return SPMModel(words=words, word_bits=params["word_bits"], banks=params["banks"],
                        sectors=sectors, ports=n_ports, wakeup_cycles=params["wakeup_cycles"],
                        sleep_cycles=params["sleep_cycles"])

    # Words that are written once at the start and then only read: they must stay
    # lost through every later wrap of their sector's epoch.
    cold = [r.randrange(words) for _ in range(4)]
    # A few words most traffic goes to, so reads often find written data.
    hot = [r.randrange(words) for _ in range(8)]
    stats = {"lost": 0, "reads": 0, "resets": 0}
    losses = [0] * sectors

    async def tb(ctx):
        model = new_model()
        req = [0] * sectors
        quiet = 0
        for cyc in range(1500):
            # (a seed that drew no reset by cycle 1000 gets one there: P = 0.2 % a run)
            if (cyc and r.random() < 0.004) or (cyc == 1000 and not stats["resets"]):
                # Reset for a few cycles; the model restarts with no valid words.
                ctx.set(cd.rst, 1)
                for p in range(n_ports):
                    ctx.set(getattr(dut, f"p{p}").en, 0)
                for _ in range(r.randrange(1, 20)):
                    with contextlib.suppress(DomainReset):   # a tick while in reset
                        await ctx.tick()
                ctx.set(cd.rst, 0)
                model, req = new_model(), [0] * sectors
                ctx.set(dut.sleep_req, 0)
                stats["resets"] += 1
                quiet = cyc + 30
            # Phases of fast power cycling (epoch wraps) and of long ON stretches; no
            # sleep requests for a while after a reset, so words written before it
            # are read back (they must be lost).
            rate = 0.3 if (cyc // 200) % 2 == 0 else 0.01
            for s in range(sectors):
                if cyc < quiet:
                    break
                if (model.pmu.ack[s] == req[s] and r.random() < rate) or r.random() < 0.01:
                    req[s] ^= 1
            reqs = []
            for _ in range(n_ports):
                if r.random() < 0.8:
                    u = r.random()
                    a = (r.choice(cold) if u < 0.2 else r.choice(hot) if u < 0.6
                         else r.randrange(words))
                    we = int(r.random() < 0.4 and (cyc < 40 or a not in cold))
                    reqs.append(Req(1, we, a, r.getrandbits(params["word_bits"])))
                else:
                    reqs.append(Req())
            for p, q in enumerate(reqs):
                port = getattr(dut, f"p{p}")
                ctx.set(port.en, q.en)
                ctx.set(port.we, q.we)
                ctx.set(port.addr, q.addr)
                ctx.set(port.wdata, q.wdata)
            ctx.set(dut.sleep_req, sum(b << s for s, b in enumerate(req)))
            lost0 = model.lost_reads
            exp = model.cycle(reqs, list(req))
            losses[:] = [n + model.pmu.lose[s] for s, n in enumerate(losses)]
            await ctx.tick()
            for p, e in enumerate(exp):
                port = getattr(dut, f"p{p}")
                assert ctx.get(port.rvalid) == e.rvalid, (cyc, p)
                if e.rvalid:
                    assert ctx.get(port.err) == e.err, (cyc, p, reqs[p])
                if e.rdata is not None:
                    got = ctx.get(port.rdata)
                    assert got == e.rdata, (f"seed {seed} cycle {cyc} port {p} read "
                                            f"{reqs[p].addr}: {got:#x}, expected {e.rdata:#x}")
                    stats["reads"] += 1
            assert ctx.get(dut.on) == sum(b << s for s, b in enumerate(model.pmu.on))
            stats["lost"] += model.lost_reads - lost0

    _sim(m, dut, tb)
    # Enough power cycles to wrap every epoch several times, and real coverage.
    assert stats["reads"] > 500 and stats["lost"] > 50 and stats["resets"] >= 1, stats
    assert min(losses) > 4 * 2 ** dut.epoch_bits, losses


@pytest.mark.parametrize("sets", [
    # One 16 MiB macro of bytes (the validator's largest), 1-word macros, three ports.
    ["spm.size_bytes=16777216", "spm.banks=1", "spm.sectors=1", "spm.word_bits=8"],
    ["spm.size_bytes=16", "spm.banks=2", "spm.sectors=2", "spm.ports=3"],
    ["spm.size_bytes=262144", "spm.ports=2"],
])
def test_edge_shapes_lint(tmp_path, sets):
    from pimforge.gen.cli import main

    argv = ["verilog", "--top", "spm", "--out", str(tmp_path), "--lint"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0


def test_reset_as_long_as_the_epoch_period_loses_every_word():
    """The tightest case of the scrubber's bound: a reset held for exactly the
    epoch's period (every reset cycle steps the epoch, so it comes back to the
    value of the words written before) must still leave every word lost,
    whatever row the scrubber was on when the reset began."""
    dut = SectoredSPM(size_bytes=512, word_bits=32, banks=1, sectors=2, ports=1)
    _, rows, k = valid_tag_layout(dut.depth)
    assert rows > 1
    m = Module()
    m.domains.sync = cd = ClockDomain("sync")
    m.submodules.dut = dut
    seen = []

    async def tb(ctx):
        for hold in (2 ** k - 1, 2 ** k, 2 ** k + 1):
            for phase in range(rows + 2):
                for a in range(0, dut.depth, 16):       # one word in every tag row
                    ctx.set(dut.p0.en, 1)
                    ctx.set(dut.p0.we, 1)
                    ctx.set(dut.p0.addr, a)
                    ctx.set(dut.p0.wdata, 0x1000 + a)
                    await ctx.tick()
                _idle(ctx, dut)
                await ctx.tick().repeat(phase + 1)
                ctx.set(cd.rst, 1)
                for _ in range(hold):
                    with contextlib.suppress(DomainReset):
                        await ctx.tick()
                ctx.set(cd.rst, 0)
                ctx.set(dut.p0.en, 1)
                for a in range(0, dut.depth, 16):
                    ctx.set(dut.p0.addr, a)
                    await ctx.tick()
                    seen.append(ctx.get(dut.p0.rdata))
                _idle(ctx, dut)

    _sim(m, dut, tb)
    assert seen == [poison(32)] * len(seen), [hex(v) for v in seen]
