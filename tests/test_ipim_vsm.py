"""iPIM vault scratchpad: one shared port, round-robin, per-port read latency, lane masks."""

import logging
import random

import pytest

from pimforge.gen.config import load_config
from pimforge.rtl.ipim import vsm as vsm_mod
from pimforge.rtl.ipim.vsm import VSM
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)
M32 = 0xFFFF_FFFF


def _lanes(old: int, new: int, mask: int) -> int:
    for lane in range(4):
        if mask >> lane & 1:
            old = old & ~(M32 << 32 * lane) | (new & (M32 << 32 * lane))
    return old


@pytest.mark.parametrize("seed, pes, t_vsm, t_tsv", [(1, 4, 1, 1), (2, 2, 2, 3), (3, 8, 1, 0)])
def test_vsm_random_clients_against_model(seed, pes, t_vsm, t_tsv):
    """Every client requests at random: one grant per cycle, round-robin (a waiting
    client is served within ``pes + 2`` grants), reads return the model's line at
    the port's latency, writes honour the lane mask, replies write whole lines and
    report their tag in the grant cycle."""
    r = random.Random(seed)
    log.info("seed %d", seed)
    lines = 16
    dut = VSM(pes=pes, lines=lines, t_vsm=t_vsm, t_tsv=t_tsv, tag_bits=3)
    ports = [*dut.pe, dut.core, dut.ext]
    lat = [t_tsv + t_vsm] * pes + [t_vsm, t_vsm]
    N = pes + 3                              # clients of the arbiter, reply included
    stats = {"grants": 0, "reads": 0, "replies": 0, "max_wait": 0}

    async def tb(ctx):
        model = [0] * lines
        cur = [None] * len(ports)            # the request each port holds
        waited = [0] * N
        expect = [[] for _ in ports]         # (cycle due, data)
        reply = None
        for cyc in range(1500):
            for i, p in enumerate(ports):
                if cur[i] is None and r.random() < 0.4:
                    cur[i] = (r.random() < 0.5, r.randrange(lines), r.getrandbits(128),
                              r.randrange(16))
                ctx.set(p.valid, cur[i] is not None)
                if cur[i]:
                    we, a, d, mk = cur[i]
                    ctx.set(p.we, we)
                    ctx.set(p.addr, a)
                    ctx.set(p.wdata, d)
                    ctx.set(p.wmask, mk)
            if reply is None and r.random() < 0.3:
                reply = {"vsm": r.randrange(lines), "tag": r.randrange(8),
                         "data": r.getrandbits(128)}
            ctx.set(dut.reply.valid, reply is not None)
            if reply:
                ctx.set(dut.reply.payload, reply)
            # Read returns due now.
            for i, p in enumerate(ports):
                due = [e for e in expect[i] if e[0] == cyc]
                assert ctx.get(p.rvalid) == bool(due), (seed, cyc, i)
                if due:
                    assert ctx.get(p.rdata) == due[0][1], (seed, cyc, i)
                    expect[i].remove(due[0])
                    stats["reads"] += 1
            readies = [ctx.get(p.ready) for p in ports]
            r_ready = ctx.get(dut.reply.ready)
            granted = [i for i, x in enumerate(readies) if x]
            assert len(granted) + r_ready <= 1, (seed, cyc, readies, r_ready)
            reqs = [cur[i] is not None for i in range(len(ports))]
            req_all = reqs[:pes + 1] + [reply is not None] + reqs[pes + 1:]
            g_all = readies[:pes + 1] + [r_ready] + readies[pes + 1:]
            assert any(g_all) == any(req_all), (seed, cyc)
            for k in range(N):
                if req_all[k] and not g_all[k]:
                    waited[k] += 1
                    stats["max_wait"] = max(stats["max_wait"], waited[k])
                    assert waited[k] <= N - 1, (seed, cyc, k, "starved")
                elif g_all[k]:
                    waited[k] = 0
            assert ctx.get(dut.landed.valid) == r_ready
            if r_ready:
                assert ctx.get(dut.landed.tag) == reply["tag"]
                model[reply["vsm"]] = reply["data"]
                reply = None
                stats["replies"] += 1
            for i in granted:
                we, a, d, mk = cur[i]
                if we:
                    model[a] = _lanes(model[a], d, mk)
                else:
                    expect[i].append((cyc + lat[i], model[a]))
                cur[i] = None
                stats["grants"] += 1
            await ctx.tick()

    simulate(dut, tb)
    log.info("%s", stats)
    assert stats["reads"] > 100 and stats["replies"] > 50 and stats["max_wait"] >= 2


def test_vsm_from_config():
    cfg = load_config("default", {"ipim.t_tsv": 2, "ipim.vsm_bytes": 2048})
    v = vsm_mod.from_config(cfg)
    assert v.lines == 128 and v.latencies == {"pe": 3, "core": 1, "ext": 1}
    assert v.pe[0].signature.latency == 3 and v.core.signature.latency == 1
