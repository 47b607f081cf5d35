"""Network interfaces on a small mesh in the Amaranth simulator: messages of every
length arrive whole, once, and (ordered interfaces) in order per flow, while the routers
allocate VCs per packet; request/reply traffic does not deadlock."""

import logging
import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring

from pimforge.rtl.noc.flit import NoCLink
from pimforge.rtl.noc.mesh import Mesh
from pimforge.rtl.noc.ni import NetworkInterface
from pimforge.rtl.params import ParameterError
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)


class MeshWithNIs(Elaboratable):
    def __init__(self, *, rows, cols, vcs, depth, packet_flits, classes, flit_bits=32,
                 ordered=False):
        link = NoCLink.Signature(rows=rows, cols=cols, vcs=vcs, flit_bits=flit_bits)
        self.mesh = Mesh(link=link, depth=depth, classes=classes)
        self.nis = [NetworkInterface(link=link, depth=depth, packet_flits=packet_flits,
                                     classes=classes, ordered=ordered)
                    for _ in range(rows * cols)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.mesh = self.mesh
        for n, ni in enumerate(self.nis):
            m.submodules[f"ni{n}"] = ni
            m.d.comb += ni.node.eq(n)
            wiring.connect(m, ni.net_out, self.mesh.local_in[n])
            wiring.connect(m, self.mesh.local_out[n], ni.net_in)
        return m


def _mask(flits, bits):
    return (1 << (flits * bits)) - 1


@pytest.mark.parametrize("seed, vcs, depth, classes, ordered, mesh, msgs", [
    (1, 2, 2, 2, True, (2, 2), 8), (2, 1, 3, 1, False, (2, 2), 8),
    (3, 4, 1, 2, False, (2, 2), 8), (4, 4, 2, 1, True, (3, 3), 12),
    (5, 4, 2, 1, False, (3, 3), 12)])
def test_ni_messages_arrive_whole_once_in_order(seed, vcs, depth, classes, ordered, mesh, msgs):
    r = random.Random(seed)
    log.info("seed %d vcs %d depth %d classes %d ordered %d", seed, vcs, depth, classes,
             ordered)
    (rows, cols), F, B = mesh, 3, 32
    dut = MeshWithNIs(rows=rows, cols=cols, vcs=vcs, depth=depth, packet_flits=F,
                      classes=classes, flit_bits=B, ordered=ordered)
    N = rows * cols
    todo = [[] for _ in range(N)]
    for n in range(N):
        for k in range(msgs):
            dest = r.randrange(N)              # itself too: the local port turns it around
            flits = r.randint(1, F)
            todo[n].append({"dest_x": dest % cols, "dest_y": dest // cols,
                            "cls": r.randrange(classes), "flits": flits,
                            "data": r.getrandbits(F * B) & _mask(flits, B), "k": k})
    total = sum(map(len, todo))
    got = []

    async def tb(ctx):
        cycle = 0
        holding = [False] * N
        while len(got) < total:
            assert cycle < 6000, f"seed {seed}: {total - len(got)} messages missing"
            for n, ni in enumerate(dut.nis):
                # a stream's valid, once up, stays up until ready
                go = bool(todo[n]) and (holding[n] or r.random() < 0.7)
                holding[n] = go
                cls = todo[n][0]["cls"] if todo[n] else 0
                for c in range(classes):
                    ctx.set(ni.send[c].valid, go and c == cls)
                if todo[n]:
                    msg = {k: v for k, v in todo[n][0].items() if k not in ("k", "cls")}
                    ctx.set(ni.send[cls].payload, msg)
                for c in range(classes):
                    ctx.set(ni.recv[c].ready, r.random() < 0.6)
            for n, ni in enumerate(dut.nis):
                for c in range(classes):
                    if ctx.get(ni.send[c].valid) and ctx.get(ni.send[c].ready):
                        todo[n][0]["sent"] = cycle
                    if ctx.get(ni.recv[c].valid) and ctx.get(ni.recv[c].ready):
                        p = ctx.get(ni.recv[c].payload)
                        got.append((n, p.src, c, p.flits, p.data))
            for n in range(N):
                if todo[n] and "sent" in todo[n][0]:
                    sent.append((n, todo[n].pop(0)))
                    holding[n] = False
            await ctx.tick()
            cycle += 1

    sent = []
    simulate(dut, tb)
    # every message once, whole, at its destination; in order per (source, dest, class)
    # from an ordered interface (else in any order)
    expect = {}
    for n, msg in sent:
        key = (msg["dest_y"] * cols + msg["dest_x"], n, msg["cls"])
        expect.setdefault(key, []).append((msg["flits"], msg["data"]))
    arrived = {}
    for dst, src, cls, flits, data in got:
        arrived.setdefault((dst, src, cls), []).append((flits, data))
    if not ordered:
        overtaken = sum(arrived[k] != expect.get(k) for k in arrived)
        log.info("seed %d: %d flows arrived out of order", seed, overtaken)
        arrived = {k: sorted(v) for k, v in arrived.items()}
        expect = {k: sorted(v) for k, v in expect.items()}
    assert arrived == expect, f"seed {seed}"
    assert any(f == F for f, _ in sum(expect.values(), [])) and any(
        f == 1 for f, _ in sum(expect.values(), []))


def test_request_reply_does_not_deadlock_with_two_classes():
    """Every node asks the others for data (class 0) and answers requests (class 1);
    a node takes no new request while its reply waits to be sent, which would deadlock
    one shared class once the network fills with requests."""
    r = random.Random(7)
    rows, cols, F, B = 2, 2, 2, 32
    dut = MeshWithNIs(rows=rows, cols=cols, vcs=2, depth=1, packet_flits=F, classes=2,
                      flit_bits=B)
    N = rows * cols
    ASKS = 8
    asks = [[r.randrange(N) for _ in range(ASKS)] for _ in range(N)]
    replies = {n: [] for n in range(N)}

    async def tb(ctx):
        pending = [None] * N           # the reply this node owes
        left = [list(a) for a in asks]
        cycle = 0
        while sum(map(len, replies.values())) < N * ASKS:
            assert cycle < 3000, "request/reply traffic stopped (deadlock)"
            for n, ni in enumerate(dut.nis):
                ctx.set(ni.send[1].valid, pending[n] is not None)
                if pending[n] is not None:
                    dest, val = pending[n]
                    ctx.set(ni.send[1].payload, {"dest_x": dest % cols, "dest_y": dest // cols,
                                                 "flits": 2, "data": val})
                ctx.set(ni.send[0].valid, bool(left[n]))
                if left[n]:
                    dest = left[n][0]
                    ctx.set(ni.send[0].payload, {"dest_x": dest % cols, "dest_y": dest // cols,
                                                 "flits": 1, "data": n * 1000 + len(left[n])})
                # busy with a reply: take no request until it has gone
                ctx.set(ni.recv[0].ready, pending[n] is None)
                ctx.set(ni.recv[1].ready, 1)
            for n, ni in enumerate(dut.nis):
                if ctx.get(ni.send[1].valid) and ctx.get(ni.send[1].ready):
                    pending[n] = None
                if ctx.get(ni.send[0].valid) and ctx.get(ni.send[0].ready):
                    left[n].pop(0)
                if ctx.get(ni.recv[1].valid):
                    replies[n].append(ctx.get(ni.recv[1].payload).data)
                if ctx.get(ni.recv[0].valid) and ctx.get(ni.recv[0].ready):
                    p = ctx.get(ni.recv[0].payload)
                    pending[n] = (p.src, (p.data << B) | (n + 1))
            await ctx.tick()
            cycle += 1

    simulate(dut, tb)
    for n in range(N):
        assert len(replies[n]) == ASKS
        # each reply carries the answering node and the request's data
        for val in replies[n]:
            assert (val >> B) // 1000 == n and 1 <= (val & 0xFFFF) <= N


def test_ni_parameter_checks():
    link = NoCLink.Signature(rows=2, cols=2, vcs=3, flit_bits=32)
    with pytest.raises(ParameterError, match="classes must be a divisor of the link's 3 VCs"):
        NetworkInterface(link=link, depth=2, packet_flits=2, classes=2)
