"""cocotb tests of the vault operand port (lane bundles <-> 16 B block requests).

One coroutine per clock plays both neighbours of the adapter: the vault
compute (read bundles held until ``rd_ready``, posted write and send bundles,
some of them while a read is pending, on words that read does not touch, as
the compiler guarantees) and the PE port of the memory system (random
``ready``, responses after random delays and out of order, a block memory of
two vaults), plus the destination-vault lock (granted after random delays).

Scoreboard: every read lane equals a word memory updated in posting order;
after the run the block memory equals it word for word (so every
read-modify-write kept the other words of its block). Protocol checks: tags
unique while in flight, cube addresses carry the compiler's placement
(vault field, sub-page indicator), a read bundle requests each distinct block
exactly once, block writes only under the lock of their vault, ``overflow``
never rises unless the FIFO is overrun on purpose.

Prefetch hints (``hints=True``): like the vault compute, the bench announces
every read bundle on ``pf`` before (or in the cycle) it presents it, at most
``capsnet.prefetch_bundles`` announced and unread, while the posted writes may
hit announced words. Checks: a prefetch request (tag ``>= 2*lanes``) reads this
vault's block of an announced bundle that is not read yet (or was read in the
last few cycles, the walker's lag), never under a write lock; the lanes still
equal the word memory (a write drops a prefetched copy); and a stream of read
bundles with hints takes fewer cycles than the same stream without.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from pimforge.rtl.capsnet.operand_port import compiler_placement, port_config

from ..common import rng, start
from ..vault_env import BitFields, bench_config

M_WORDS = 128          # words of each vault the bundles touch (32 blocks: many shared)
STRIDES = (0, 1, 1, 1, -1, 2, 3, 4, 5, -3, 7, 8)
MASK32 = (1 << 32) - 1


class Env:
    def __init__(self, dut, r, vault_id: int):
        self.dut, self.r = dut, r
        cfg = bench_config()
        self.cfg = cfg
        self.amap, self.place = compiler_placement(cfg.hmc)
        kw = port_config(cfg)
        self.n, self.wdepth = kw["lanes"], kw["write_depth"]
        self.pf_depth = kw["prefetch"]
        self.vaults = cfg.hmc.vaults
        self.vault_id = vault_id
        a = self.amap
        self.req_f = BitFields([("we", 1), ("addr", a.addr_bits), ("tag", 8), ("data", 128)])
        self.resp_f = BitFields([("we", 1), ("tag", 8), ("data", 128)])
        self.ref = {(v, w): r.getrandbits(32) for v in range(self.vaults)
                    for w in range(M_WORDS)}
        # Every block the test region may touch, by its cube address (the compiler's
        # placement, so a request to any other address is an error).
        self.where = {self.place(v, 4 * b) >> 4: (v, b) for v in range(self.vaults)
                      for b in range(M_WORDS // 4)}
        self.dram = {}
        for v in range(self.vaults):
            for b in range(M_WORDS // 4):
                self.dram[v, b] = sum(self.ref[v, 4 * b + k] << (32 * k) for k in range(4))
        self.inflight = {}          # tag -> (due cycle, we, data)
        self.errors: list[str] = []
        self.cycle = 0
        self.lock_owned = False
        self.lock_wait = 0
        self.read = None             # pending read: (words, mask)
        self.read_reqs: list[int] = []
        self.reads_done = 0
        self.writes_done = 0
        self.posted = 0              # bundles posted since the adapter was last idle
        self.stats = {"rd_req": 0, "wr_req": 0, "rmw": 0, "cached": 0, "flushes": 0,
                      "pf_req": 0, "no_request": 0}
        self.was_idle = False
        self.last_read = None
        self.force_stream = False
        self.tokens = 2
        self.force_no_grant = False
        self.force_post = False
        self.hints = False
        self.hinted: list = []       # announced bundles not accepted yet, oldest first
        self.recent: list = []       # the last accepted bundles' blocks (walker lag)
        self.generated = 0
        self.lead = 0.6              # chance per cycle of announcing one more bundle
        self.br = r                  # the read bundles' generator
        self.at_barrier = False      # hints: announce nothing until the flush

    # ---- stimulus helpers -----------------------------------------------------
    def lane_words(self, base, stride):
        return [base + i * stride for i in range(self.n)]

    def gen_range(self, r=None):
        r = r or self.r
        stride = r.choice(STRIDES)
        span = stride * (self.n - 1)
        lo, hi = max(0, -span), min(M_WORDS, M_WORDS - span)
        return r.randrange(lo, hi), stride

    def gen_mask(self, r=None):
        r = r or self.r
        k = r.random()
        if k < 0.4:
            return (1 << self.n) - 1
        if k < 0.55:
            return 1 << r.randrange(self.n)
        return r.getrandbits(self.n) or 1

    def gen_bundle(self, stream_ok=True):
        """The next read bundle ``((a0, sa), (b0, sb), mask)``: mostly the next element
        of the last one's streams (``x_se = 1``: cached blocks), else random."""
        r = self.br
        self.generated += 1
        if self.last_read and stream_ok and (self.force_stream or r.random() < 0.5):
            self.force_stream = False
            (a0, sa), (b0, sb), mask = self.last_read
            words_a = (min(a0 + 1, M_WORDS - 1 - max(0, sa * (self.n - 1))), sa)
            words_b = (min(b0 + 1, M_WORDS - 1 - max(0, sb * (self.n - 1))), sb)
            if min(words_a[0] + sa * (self.n - 1), words_b[0] + sb * (self.n - 1),
                   words_a[0], words_b[0]) < 0:
                words_a, words_b = self.gen_range(r), self.gen_range(r)
        else:
            words_a, words_b = self.gen_range(r), self.gen_range(r)
            mask = self.gen_mask(r)
        self.last_read = (words_a, words_b, mask)
        return self.last_read

    def bundle_words(self, bundle):
        words_a, words_b, mask = bundle
        return self.lane_words(*words_a) + self.lane_words(*words_b), mask

    def blocks_of(self, bundle):
        ws, mask = self.bundle_words(bundle)
        return {ws[i] >> 2 for i in range(2 * self.n) if mask >> (i % self.n) & 1}

    def announce(self, bundle):
        d = self.dut
        (a0, sa), (b0, sb), mask = bundle
        d.pf__mask.value = mask
        d.pf__a_addr.value, d.pf__a_stride.value = a0, sa & 0xFFFFFF
        d.pf__b_addr.value, d.pf__b_stride.value = b0, sb & 0xFFFFFF
        d.pf__valid.value = 1
        self.hinted.append(bundle)

    def decode(self, addr):
        if addr & 0xF != self.place(0, 0) & 0xF or (addr >> 4) not in self.where:
            self.errors.append(f"{self.cycle}: address {addr:#x} is no placed block")
            return 0, 0
        v, b = self.where[addr >> 4]
        if self.amap.decode(addr).vault != v:
            self.errors.append(f"{self.cycle}: address {addr:#x} decodes to another vault")
        return v, b

    def post(self, kind: str, avoid=frozenset()):
        """Post a write (own vault) or a send (random vault) bundle, avoiding *avoid* words."""
        d, r = self.dut, self.r
        for _ in range(20):
            base, stride = self.gen_range()
            mask = self.gen_mask()
            vault = self.vault_id if kind == "wr" else r.randrange(self.vaults)
            words = self.lane_words(base, stride)
            if not any((vault, words[i]) in avoid for i in range(self.n) if mask >> i & 1):
                break
        else:
            return False
        vals = [r.getrandbits(32) for _ in range(self.n)]
        for i in range(self.n):           # in lane order: a later lane wins
            if mask >> i & 1:
                self.ref[vault, words[i]] = vals[i]
        packed = sum(v << (32 * i) for i, v in enumerate(vals))
        p = "wr" if kind == "wr" else "send"
        getattr(d, f"{p}__mask").value = mask
        getattr(d, f"{p}__addr").value = base
        getattr(d, f"{p}__stride").value = stride & ((1 << 24) - 1)
        getattr(d, f"{p}__data").value = packed
        d.wr__en.value = int(kind == "wr")
        d.send__valid.value = int(kind != "wr")
        d.send__peer.value = vault
        self.posted += 1
        return True

    # ---- the per-cycle model ----------------------------------------------------
    async def run(self, reads: int, p_post: float = 0.35):
        """Run until *reads* read bundles are done (posting meanwhile) and all is idle."""
        d, r = self.dut, self.r
        d.vault_id.value = self.vault_id
        started = 0
        while True:
            await RisingEdge(d.clk)
            d.wr__en.value = 0
            d.send__valid.value = 0
            d.flush.value = 0
            d.pf__valid.value = 0
            if self.read is None:
                d.rd__valid.value = 0
            # Lock: granted after a random delay, held while requested.
            want = int(d.lock_req.value)
            if want and not self.lock_owned and not self.force_no_grant:
                if self.lock_wait == 0:
                    self.lock_wait = r.randrange(1, 6)
                self.lock_wait -= 1
                if self.lock_wait == 0:
                    self.lock_owned = True
                    self.lock_vault = int(d.lock_vault.value)
            elif not want:
                self.lock_owned = False
            d.lock_grant.value = int(self.lock_owned)
            # Vault compute side.
            # Like the controller: about one posted bundle per read bundle.
            room = (self.posted < self.wdepth - 1 and self.tokens > 0) or self.force_post
            kind = "wr" if r.random() < 0.7 else "send"
            more = started < reads
            # Hints: one more bundle announced now and then, at most pf_depth unread.
            # Every 50 bundles a barrier: the announced ones are read, then a flush.
            if (self.hints and self.generated < reads and len(self.hinted) < self.pf_depth
                    and not self.at_barrier and r.random() < self.lead):
                self.announce(self.gen_bundle())
                self.at_barrier = self.generated % 50 == 0
            bundle = None
            if self.read is None and more and (self.force_stream or r.random() < 0.5):
                if not self.hints:
                    bundle = self.gen_bundle()
                elif self.hinted or not self.at_barrier:
                    if not self.hinted:     # announced in the cycle it is presented
                        self.announce(self.gen_bundle())
                        self.at_barrier = self.generated % 50 == 0
                    bundle = self.hinted[0]
            if bundle is not None:
                words_a, words_b, mask = bundle
                ws, mask = self.bundle_words(bundle)
                self.read = (ws, mask)
                self.read_reqs = []
                d.rd__mask.value = mask
                d.rd__a_addr.value, d.rd__a_stride.value = words_a[0], words_a[1] & 0xFFFFFF
                d.rd__b_addr.value, d.rd__b_stride.value = words_b[0], words_b[1] & 0xFFFFFF
                d.rd__valid.value = 1
                started += 1
                self.tokens += int(r.random() < 0.5)
            elif (more and self.read is None and self.was_idle and not self.hinted
                  and (self.at_barrier or r.random() < 0.1)):
                self.at_barrier = False
                # Another vault's send lands here (behind the port), then a barrier
                # flushes the port's read cache: later reads must see the new word.
                # Mostly a word that the last read's blocks hold (likely cached).
                w = r.randrange(M_WORDS)
                if self.last_read and r.random() < 0.8:
                    (a0, sa), _, _ = self.last_read
                    w = min(M_WORDS - 1, a0 + sa * r.randrange(self.n) + r.randrange(2))
                val = r.getrandbits(32)
                self.ref[self.vault_id, w] = val
                b = (self.vault_id, w >> 2)
                sh = 32 * (w & 3)
                self.dram[b] = self.dram[b] & ~(MASK32 << sh) | (val << sh)
                d.flush.value = 1
                self.stats["flushes"] += 1
                self.force_stream = True
            elif more and room and r.random() < p_post:
                avoid = set()
                if self.read is not None:
                    ws, mask = self.read
                    avoid = {(self.vault_id, ws[i]) for i in range(2 * self.n)
                             if mask >> (i % self.n) & 1}
                if self.post(kind, avoid):
                    self.tokens -= 1
            # Memory side: random ready, one due response per cycle, random order.
            ready = int(r.random() < 0.7)
            d.mem__ready.value = ready
            due = [t for t, (c, _, _) in self.inflight.items() if c <= self.cycle]
            resp_tag = r.choice(due) if due else None
            if resp_tag is not None:
                _, we, data = self.inflight[resp_tag]
                d.mem_resp__payload.value = self.resp_f.pack({"we": we, "tag": resp_tag,
                                                             "data": data})
            d.mem_resp__valid.value = int(resp_tag is not None)
            await ReadOnly()
            self.observe(ready, resp_tag)
            self.cycle += 1
            if not more and self.read is None and int(d.idle.value) \
                    and not self.inflight:
                return

    def observe(self, ready, resp_tag):
        d = self.dut
        c = self.cycle
        self.was_idle = bool(int(d.idle.value))
        if self.was_idle:
            self.posted = 0
        if int(d.overflow.value) and not self.force_post:
            self.errors.append(f"{c}: overflow")
        if resp_tag is not None:
            if not int(d.mem_resp__ready.value):
                self.errors.append(f"{c}: response not accepted")
            del self.inflight[resp_tag]
        if int(d.mem__valid.value) and ready:
            q = self.req_f.unpack(int(d.mem__payload.value))
            v, b = self.decode(q["addr"])
            if q["tag"] in self.inflight:
                self.errors.append(f"{c}: tag {q['tag']} reused while in flight")
            locked = int(d.lock_req.value)
            if q["we"]:
                self.stats["wr_req"] += 1
                if not (locked and self.lock_owned and self.lock_vault == v
                        and int(d.lock_vault.value) == v):
                    self.errors.append(f"{c}: block write to vault {v} without its lock")
                self.dram[v, b] = q["data"]
                data = 0
            elif q["tag"] >= 2 * self.n:
                data = self.dram[v, b]
                self.stats["pf_req"] += 1
                ok = {x for bundle in self.hinted for x in self.blocks_of(bundle)}
                ok |= {x for blocks in self.recent for x in blocks}
                if locked or v != self.vault_id or b not in ok:
                    self.errors.append(f"{c}: prefetch of vault {v} block {b} (locked "
                                       f"{locked}): no announced bundle's block")
            else:
                data = self.dram[v, b]
                if locked:
                    self.stats["rmw"] += 1
                else:
                    self.stats["rd_req"] += 1
                    if v != self.vault_id:
                        self.errors.append(f"{c}: operand read from vault {v}")
                    self.read_reqs.append(b)
            self.inflight[q["tag"]] = (c + self.r.randrange(1, 24), q["we"], data)
        if self.read is not None and int(d.rd__ready.value):
            ws, mask = self.read
            got = [int(d.rd__a_data.value) >> (32 * i) & MASK32 for i in range(self.n)]
            got += [int(d.rd__b_data.value) >> (32 * i) & MASK32 for i in range(self.n)]
            blocks = set()
            for i in range(2 * self.n):
                if mask >> (i % self.n) & 1:
                    blocks.add(ws[i] >> 2)
                    exp = self.ref[self.vault_id, ws[i]]
                    if got[i] != exp:
                        self.errors.append(f"{c}: read slot {i} word {ws[i]}: got "
                                           f"{got[i]:#x}, expected {exp:#x}")
            # Each distinct block at most once; the others came from the read cache.
            if len(set(self.read_reqs)) != len(self.read_reqs) or \
                    not set(self.read_reqs) <= blocks:
                self.errors.append(f"{c}: read bundle requested blocks {sorted(self.read_reqs)}"
                                   f", distinct blocks are {sorted(blocks)}")
            self.stats["cached"] += len(blocks) - len(self.read_reqs)
            self.stats["no_request"] += int(not self.read_reqs)
            if self.hints:
                self.hinted.pop(0)
                self.recent = (self.recent + [blocks])[-2:]
            self.read = None
            self.reads_done += 1

    def check_memory(self):
        for (v, w), exp in self.ref.items():
            got = self.dram[v, w >> 2] >> (32 * (w & 3)) & MASK32
            if got != exp:
                self.errors.append(f"final: vault {v} word {w}: {got:#x} != {exp:#x}")
                break

    def check(self):
        assert not self.errors, "\n".join(self.errors[:20])


async def _setup(dut, tag):
    r = rng(tag)
    for name in ("rd__valid", "pf__valid", "wr__en", "send__valid", "lock_grant",
                 "mem__ready", "mem_resp__valid", "flush"):
        getattr(dut, name).value = 0
    await start(dut)
    return Env(dut, r, r.randrange(bench_config().hmc.vaults)), r


@cocotb.test()
async def random_bundles(dut):
    """Random read bundles (any stride, partial masks, shared blocks) interleaved with
    posted writes and sends, against an out-of-order memory and a slow lock."""
    env, _ = await _setup(dut, "random")
    await env.run(400)
    env.check_memory()
    env.check()
    dut._log.info("%d reads, %d cycles, %s", env.reads_done, env.cycle, env.stats)
    assert env.reads_done == 400 and env.stats["rmw"] > 0 and env.stats["wr_req"] > 0
    assert env.stats["cached"] > 0 and env.stats["flushes"] > 0


@cocotb.test()
async def writes_then_read(dut):
    """A burst of posted writes (the FIFO almost full) followed by reads of the same words:
    the reads wait for every older write."""
    env, r = await _setup(dut, "burst")
    d = dut
    d.vault_id.value = env.vault_id
    for _ in range(env.wdepth - 1):
        await RisingEdge(d.clk)
        env.post("wr" if r.random() < 0.7 else "send")
    await RisingEdge(d.clk)
    d.wr__en.value = 0
    await env.run(30, p_post=0.2)
    env.check_memory()
    env.check()
    assert env.reads_done == 30


@cocotb.test()
async def overflow_is_flagged(dut):
    """More posted writes than the FIFO holds (lock withheld): the sticky flag rises."""
    env, _ = await _setup(dut, "overflow")
    d = dut
    env.force_no_grant = env.force_post = True
    for _ in range(env.wdepth + 2):
        await RisingEdge(d.clk)
        env.post("wr")
    await RisingEdge(d.clk)
    d.wr__en.value = 0
    await RisingEdge(d.clk)
    await ReadOnly()
    assert int(d.overflow.value) == 1 and int(d.idle.value) == 0


@cocotb.test()
async def random_bundles_with_hints(dut):
    """As random_bundles, every read bundle announced on ``pf`` first (up to the
    prefetch depth ahead), writes and sends also hitting announced words."""
    env, _ = await _setup(dut, "hints")
    env.hints = True
    await env.run(400)
    env.check_memory()
    env.check()
    dut._log.info("%d reads, %d cycles, %s", env.reads_done, env.cycle, env.stats)
    assert env.reads_done == 400 and env.stats["pf_req"] > 0 and env.stats["no_request"] > 0
    assert env.stats["rmw"] > 0 and env.stats["flushes"] > 0


@cocotb.test()
async def hints_shorten_a_stream(dut):
    """The same random read bundles (no writes) with and without hints: with them the
    port fetches ahead, so the stream takes fewer cycles."""
    env, r = await _setup(dut, "stream")
    seed = r.getrandbits(32)
    cycles, pf = {}, {}
    for hints in (True, False):
        env.stats = dict.fromkeys(env.stats, 0)
        env.br = random.Random(seed)          # the same bundles in both runs
        env.hints, env.lead, env.last_read, env.generated = hints, 1.0, None, 0
        env.at_barrier = False
        env.cycle = env.reads_done = 0
        await env.run(60, p_post=0.0)
        env.check()
        cycles[hints], pf[hints] = env.cycle, env.stats["pf_req"]
        dut._log.info("hints %s: %d cycles, %s", hints, env.cycle, env.stats)
        await RisingEdge(dut.clk)
        dut.rst.value = 1
        await ClockCycles(dut.clk, 2)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
    assert pf[True] > 0 and pf[False] == 0, pf
    assert cycles[True] < cycles[False], cycles
