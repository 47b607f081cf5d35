"""cocotb test of the whole PIM-CapsNet cube: a compiled routing workload end to end.

A tiny routing workload (Caps-MN1 shrunk, see :data:`NET`) is compiled for
the bench's config by :func:`~pimforge.sim.capsnet.compiler.compile_routing`.
The host writes every non-zero block of each vault's memory image (``u``,
``W``, the constant 1.0) through the link ports, at the cube addresses of the
compiler's placement (both links, random request/response pauses); the
programs go through the instruction-memory load port; ``start`` runs them to
HALT; the host then reads every block of every vault's image back through the
links, and the images must equal the ISA golden model's
(:func:`~pimforge.verif.models.capsnet.isa.execute`) word for word, every
intermediate array included.

One coroutine per clock plays the DRAM arrays (blocks never written read as
zero), checks every vault's DRAM commands against the timing rules
(:class:`~pimforge.verif.models.dram_timing.TimingChecker`) and scores the PE
ports: tags unique while in flight, one response per request with its
``we``, addresses only inside the placed memory images, operand reads only
from the own vault, prefetches (the operand ports' requests for the vaults'
prefetch hints, tags from ``2 * lanes`` on) from the own vault and in every vault,
and the data of every read response that no write could have raced equal to
the blocks written so far. The run's cycle count is
logged beside the ISA timing model's count with an ideal memory
(:func:`~pimforge.sim.capsnet.timing.program_cycles`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from pimforge.rtl.capsnet.isa import encode
from pimforge.rtl.capsnet.operand_port import compiler_placement
from pimforge.rtl.mem.address_map import AddressMap
from pimforge.rtl.mem.rmas import Policy
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.sim.capsnet.compiler import compile_routing
from pimforge.sim.capsnet.networks import network
from pimforge.sim.capsnet.timing import program_cycles

from ...models.capsnet.isa import execute
from ...models.capsnet.pe import PEModel
from ...models.dram_timing import TimingChecker
from ..common import bench, rng, start
from ..vault_env import BitFields, VaultPins, bench_config

#: Caps-MN1 with batch 1 and 6 L-capsules (scaled by 200), 3 H-capsules, 2 iterations.
NET = dataclasses.replace(network("Caps-MN1").scaled(200), n_h=3, iterations=2)
DIM = "L"
MASK32 = (1 << 32) - 1


class CubeEnv:
    def __init__(self, dut, r, comp):
        self.dut, self.r, self.comp = dut, r, comp
        cfg = self.cfg = bench_config()
        h = self.h = cfg.hmc
        self.amap = AddressMap.from_config(h)
        _, self.place = compiler_placement(h)
        self.t = resolve_timing(h.timing, h.tck_ns)
        ab = self.amap.addr_bits
        self.req_f = BitFields([("we", 1), ("addr", ab), ("tag", 8), ("data", 128)])
        self.resp_f = BitFields([("we", 1), ("tag", 8), ("data", 128)])
        self.checkers = [TimingChecker(self.t, h.banks_per_vault, v) for v in range(h.vaults)]
        self.pins = [VaultPins(dut, self.checkers[v], v) for v in range(h.vaults)]
        # Placed blocks: cube block address -> (vault, vault-local block).
        self.where = {}
        for v in range(h.vaults):
            for j in range(-(-max(4, comp.words[v]) // 4)):
                self.where[self.place(v, 4 * j) >> 4] = (v, j)
        self.errors: list[str] = []
        self.cycle = 0
        # Host link model.
        self.links = [f"host{i}" for i in range(h.links)]
        self.host_q = {m: collections.deque() for m in self.links}
        self.host_wait = {m: {} for m in self.links}
        self.host_free = {m: list(range(64)) for m in self.links}
        self.read_back: dict[tuple[int, int], int] = {}
        # PE port scoreboard.
        self.pe_out = [{} for _ in range(h.vaults)]   # tag -> (we, block, version)
        self.shadow: dict[int, int] = {}               # cube block -> data (landed writes)
        self.version = collections.Counter()
        self.writes_in_flight = collections.Counter()
        self.pe_stats = collections.Counter()
        self.pe_prefetch: set[int] = set()     # vaults whose port issued a prefetch

    def arr_index(self, d):
        h = self.h
        return (d.bank << (h.row_bits + h.col_bits)) | (d.row << h.col_bits) | d.col

    def host_write(self, vault: int, j: int, data: int):
        m = self.links[(vault + j) % len(self.links)]
        self.host_q[m].append((1, self.place(vault, 4 * j), data, (vault, j)))

    def host_read(self, vault: int, j: int):
        m = self.links[(vault + j) % len(self.links)]
        self.host_q[m].append((0, self.place(vault, 4 * j), 0, (vault, j)))

    @property
    def host_busy(self) -> bool:
        return any(self.host_q.values()) or any(self.host_wait.values())

    async def run(self):
        d, h, r = self.dut, self.h, self.r
        while True:
            await RisingEdge(d.clk)
            for p in self.pins:
                p.drive()
            cur = {}
            for m in self.links:
                q = self.host_q[m]
                go = bool(q) and bool(self.host_free[m]) and r.random() < 0.8
                if go:
                    we, addr, data, _ = q[0]
                    cur[m] = self.host_free[m][-1]
                    getattr(d, f"{m}__payload").value = self.req_f.pack(
                        {"we": we, "addr": addr, "tag": cur[m], "data": data})
                getattr(d, f"{m}__valid").value = int(go)
                getattr(d, f"{m}_resp__ready").value = int(r.random() < 0.8)
            await ReadOnly()
            c = self.cycle
            for v in range(h.vaults):
                self.pins[v].sample(c)
                self.observe_pe(v, c)
            for m in self.links:
                if m in cur and int(getattr(d, f"{m}__ready").value):
                    we, addr, data, key = self.host_q[m].popleft()
                    self.host_free[m].pop()
                    self.host_wait[m][cur[m]] = (we, key)
                if int(getattr(d, f"{m}_resp__valid").value) and \
                        int(getattr(d, f"{m}_resp__ready").value):
                    rs = self.resp_f.unpack(int(getattr(d, f"{m}_resp__payload").value))
                    e = self.host_wait[m].pop(rs["tag"], None)
                    if e is None or e[0] != rs["we"]:
                        self.errors.append(f"{c}: {m} unexpected response {rs['tag']}")
                        continue
                    self.host_free[m].append(rs["tag"])
                    if not rs["we"]:
                        self.read_back[e[1]] = rs["data"]
            self.cycle += 1

    def observe_pe(self, v: int, c: int):
        d = self.dut
        out = self.pe_out[v]
        if int(getattr(d, f"pe{v}_resp_fire").value):
            rs = self.resp_f.unpack(int(getattr(d, f"pe{v}_resp").value))
            e = out.pop(rs["tag"], None)
            if e is None or e[0] != rs["we"]:
                self.errors.append(f"{c}: pe{v} response tag {rs['tag']} unexpected ({e})")
            else:
                we, blk, ver, data = e
                if we:
                    self.shadow[blk] = data
                    self.version[blk] += 1
                    self.writes_in_flight[blk] -= 1
                elif ver == self.version[blk] and not self.writes_in_flight[blk]:
                    self.pe_stats["checked_reads"] += 1
                    exp = self.shadow.get(blk, self.initial.get(blk, 0))
                    if rs["data"] != exp:
                        self.errors.append(f"{c}: pe{v} read of block {blk:#x}: got "
                                           f"{rs['data']:#x}, expected {exp:#x}")
        if int(getattr(d, f"pe{v}_req_fire").value):
            q = self.req_f.unpack(int(getattr(d, f"pe{v}_req").value))
            blk = q["addr"] >> 4
            if q["tag"] in out:
                self.errors.append(f"{c}: pe{v} tag {q['tag']} reused while in flight")
            if blk not in self.where or q["addr"] & 0xF != self.place(0, 0) & 0xF:
                self.errors.append(f"{c}: pe{v} address {q['addr']:#x} outside the images")
            elif not q["we"] and q["tag"] >= 2 * self.cfg.capsnet.pes_per_vault:
                self.pe_stats["prefetch_reads"] += 1
                self.pe_prefetch.add(v)
                if self.where[blk][0] != v:
                    self.errors.append(f"{c}: pe{v} prefetch of vault {self.where[blk][0]}'s "
                                       f"block {blk:#x}")
            elif not q["we"] and self.where[blk][0] != v:
                # Only the read-modify-write of a send into a partial block reads a peer.
                self.pe_stats["remote_reads"] += 1
            if q["we"]:
                self.writes_in_flight[blk] += 1
                self.version[blk] += 1
                self.pe_stats["remote_writes" if self.where.get(blk, (v,))[0] != v
                              else "writes"] += 1
            else:
                self.pe_stats["reads"] += 1
            out[q["tag"]] = (q["we"], blk, self.version[blk], q["data"])

    def check(self):
        msgs = [str(x) for ck in self.checkers for x in ck.violations][:20] + self.errors[:20]
        assert not msgs, "\n".join(msgs)


@cocotb.test()
async def routing_end_to_end(dut):
    """Host loads u/W over the links, the vaults route, the host reads every vault's memory
    image back: equal to the ISA model word for word; PE-port and DRAM protocol clean."""
    r = rng("cube")
    cfg = bench_config()
    comp = compile_routing(NET, DIM, cfg)
    nr = np.random.default_rng(r.getrandbits(32))
    u = nr.standard_normal((NET.batch, NET.n_l, NET.c_l)).astype(np.float32)
    W = (nr.standard_normal((NET.n_l, NET.n_h, NET.c_h, NET.c_l)) * 0.2).astype(np.float32)
    mems = comp.memories(u, W)
    res = execute(comp.programs, [m.copy() for m in mems], PEModel(cfg))
    ideal = program_cycles(res.stats, comp.vaults, res.phases, bench()["latencies"]["pe"], cfg)

    for name in ("start", "imem_we"):
        getattr(dut, name).value = 0
    for i in range(cfg.hmc.links):
        getattr(dut, f"host{i}__valid").value = 0
    dut.gamma_v.value, dut.gamma_h.value, dut.policy.value = 1, 1, Policy.RMAS
    await start(dut)
    env = CubeEnv(dut, r, comp)
    env.initial = {}
    cocotb.start_soon(env.run())

    # 1. Host writes every non-zero block of the images through the links.
    nblk = 0
    for v in range(comp.vaults):
        img = np.zeros(-(-len(mems[v]) // 4) * 4, dtype=np.uint32)
        img[:len(mems[v])] = mems[v]
        for j in range(len(img) // 4):
            w = [int(x) for x in img[4 * j:4 * j + 4]]
            if any(w):
                data = sum(x << (32 * k) for k, x in enumerate(w))
                env.host_write(v, j, data)
                env.initial[env.place(v, 4 * j) >> 4] = data
                nblk += 1
    t0 = env.cycle
    while env.host_busy:
        await RisingEdge(dut.clk)
    load_cycles = env.cycle - t0
    # 2. Programs into the instruction memories.
    for v, prog in enumerate(comp.programs):
        for k, ins in enumerate(prog):
            await RisingEdge(dut.clk)
            dut.imem_we.value, dut.imem_vault.value = 1, v
            dut.imem_addr.value, dut.imem_data.value = k, encode(ins)
    await RisingEdge(dut.clk)
    dut.imem_we.value = 0
    # 3. Run to HALT.
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    await RisingEdge(dut.clk)
    limit = 400 * ideal["cycles"] + 20000
    while int(dut.running.value):
        await RisingEdge(dut.clk)
        assert env.cycle < limit + t0 + load_cycles, "the run did not halt"
    cycles, barriers = int(dut.cycles.value), int(dut.barriers.value)
    assert int(dut.error.value) == 0, "an operand port lost a posted bundle"
    # 4. Read every block of every image back through the links.
    for v in range(comp.vaults):
        for j in range(-(-len(mems[v]) // 4)):
            env.host_read(v, j)
    while env.host_busy:
        await RisingEdge(dut.clk)
    env.check()
    for v in range(comp.vaults):
        exp = res.memories[v]
        got = np.array([(env.read_back[v, w >> 2] >> (32 * (w & 3))) & MASK32
                        for w in range(len(exp))], dtype=np.uint32)
        bad = np.nonzero(got != exp)[0]
        assert not bad.size, (f"vault {v}: {bad.size} words differ from the ISA model, first "
                              f"at word {bad[0]}: {got[bad[0]]:#x} != {exp[bad[0]]:#x}")
    assert not any(env.pe_out), "PE-port requests without a response"
    assert barriers == sum(1 for i in comp.programs[0] if i.op.name == "BAR")
    dut._log.info("%s %s on %d vaults x %d PEs: %d blocks loaded in %d cycles; run %d cycles "
                  "vs %d with the ideal memory (x%.1f); %d barriers; PE ports %s",
                  NET.name, DIM, comp.vaults, cfg.capsnet.pes_per_vault, nblk, load_cycles,
                  cycles, ideal["cycles"], cycles / ideal["cycles"], barriers,
                  dict(env.pe_stats))
    assert env.pe_stats["checked_reads"] > 100 and env.pe_stats["remote_writes"] > 0
    # Every vault's operand port serves its controller's prefetch hints (if it has any).
    want = set(range(comp.vaults)) if cfg.capsnet.prefetch_bundles else set()
    assert env.pe_prefetch == want, env.pe_prefetch
    if os.environ.get("PIMFORGE_TOP_JSON"):     # for scripts/capsnet/hmc_capsnet_cycles.py
        with open(os.environ["PIMFORGE_TOP_JSON"], "w") as f:
            json.dump({"net": NET.name, "dim": DIM, "batch": NET.batch, "n_l": NET.n_l,
                       "n_h": NET.n_h, "iterations": NET.iterations, "vaults": comp.vaults,
                       "pes_per_vault": cfg.capsnet.pes_per_vault,
                       "banks_per_vault": cfg.hmc.banks_per_vault, "cycles": cycles,
                       "ideal_cycles": ideal["cycles"], "load_cycles": load_cycles,
                       "pe_port": dict(env.pe_stats)}, f, indent=2)
