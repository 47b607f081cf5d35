"""The iPIM control core on Amaranth's simulator among models of its neighbours.

:func:`run` builds ``n`` control cores, each with its VSM (:class:`Harness`), and drives
them with Python models: PEs honouring :class:`~pimforge.rtl.ipim.bus.IssueSignature`
(random latencies, random ``ready`` back-pressure, ``done`` in any order), the network
and the barrier. A monitor checks every cycle that no instruction issues while it
conflicts (:func:`~pimforge.rtl.ipim.isa.conflicts`) with one still in flight and that
the core never stalls without a cause, and counts what it saw to compare with the
core's counters. ``tests/test_ipim_core.py`` runs it on random and hand-written programs.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

from amaranth import Elaboratable, Module
from amaranth.lib import wiring

from pimforge.rtl.ipim.core import BUSY_UNITS, OPCODE_CLASSES, ControlCore
from pimforge.rtl.ipim.isa import (
    PE_OPS,
    Instr,
    Opcode,
    accesses,
    conflicts,
    encode,
)
from pimforge.rtl.ipim.vsm import VSM
from pimforge.verif.tb.amaranth_sim import simulate

from .core import (
    unit_slot,
)

log = logging.getLogger(__name__)

M32 = 0xFFFF_FFFF

# ---- the design under test ------------------------------------------------------

class Harness(Elaboratable):
    """``n`` control cores, each with its VSM (``core.vsm`` -> ``vsm.core``,
    ``vsm.landed`` -> ``core.landed``); everything else is driven by the test."""

    def __init__(self, n: int = 1, **kw):
        self.cores = [ControlCore(**kw) for _ in range(n)]
        self.vsms = [VSM(pes=kw["pes"], lines=kw.get("vsm_lines", 256), t_vsm=1, t_tsv=1,
                         tag_bits=c.tag_bits) for c in self.cores]

    def elaborate(self, platform):
        m = Module()
        for i, (c, v) in enumerate(zip(self.cores, self.vsms)):
            m.submodules[f"core{i}"] = c
            m.submodules[f"vsm{i}"] = v
            wiring.connect(m, c.vsm, v.core)
            wiring.connect(m, v.landed, c.landed)
        return m


# ---- models and monitor -------------------------------------------------------------

@dataclass
class Flight:
    seq: int
    ins: Instr
    reads: frozenset
    writes: frozenset
    issued: int
    slot: int | None
    waiting: set = field(default_factory=set)   # PEs (or "unit") still to finish
    done: int | None = None                     # cycle of the last completion pulse


@dataclass
class CoreState:
    prog: list[Instr]
    flights: list[Flight] = field(default_factory=list)
    by_slot: dict = field(default_factory=dict)
    pe_pending: list = field(default_factory=list)   # per PE: [(finish, tag, seq)]
    trace: list = field(default_factory=list)        # (cycle, pc)
    counts: dict = field(default_factory=dict)
    running: bool = False
    halted_at: int | None = None
    seti_fifo: list = field(default_factory=list)
    req_fifo: list = field(default_factory=list)
    sent: list = field(default_factory=list)          # (payload dict, Flight)
    vsm_expect: dict = field(default_factory=dict)
    sync_commits: list = field(default_factory=list)
    arrive_cycles: list = field(default_factory=list)


def eff_mask(ins: Instr, pes: int) -> int:
    return ins.simb_mask & ((1 << pes) - 1) if ins.opcode in PE_OPS else 0


def needs_slot(ins: Instr, pes: int, t_alu: int) -> bool:
    return bool(eff_mask(ins, pes)) or unit_slot(ins.opcode, t_alu)


def class_of(op: Opcode) -> str:
    return next(c for c, ops in OPCODE_CLASSES.items() if op in ops)


def run(progs, *, seed: int, pes: int = 4, inst_queue: int = 4, t_alu: int = 1,
        pe_lat=(1, 12), p_ready: float = 0.7, p_nic: float = 0.6, reply_lat=(1, 20),
        barrier_delay=(0, 5), max_cycles: int = 20000, crf_entries: int = 16):
    """Run one program per core to its halt; return the per-core monitor states
    and the final counters and CtrlRFs."""
    r = random.Random(seed)
    log.info("seed %d", seed)
    n = len(progs)
    depth = max(16, 1 << (max(len(p) for p in progs) - 1).bit_length())
    h = Harness(n, pes=pes, inst_queue=inst_queue, imem_depth=depth, crf_entries=crf_entries,
                vsm_lines=256, t_alu=t_alu, t_vsm=1, counter_bits=32)
    Q = inst_queue
    states = [CoreState(prog=list(p), pe_pending=[[] for _ in range(pes)]) for p in progs]
    for st in states:
        st.counts = {k: 0 for k in ("cycles", "issued", "stall_dep", "stall_full",
                                     "stall_unit", "stall_sync")}
        st.counts.update({f"issued_{c}": 0 for c in OPCODE_CLASSES})
        st.counts.update({f"busy_{u}": 0 for u in BUSY_UNITS})
    out: dict = {}

    async def tb(ctx):
        # Load the programs through the backdoor, then start.
        for c, st in zip(h.cores, states):
            for a, ins in enumerate(st.prog):
                ctx.set(c.imem_we, 1)
                ctx.set(c.imem_addr, a)
                ctx.set(c.imem_data, encode(ins))
                await ctx.tick()
            ctx.set(c.imem_we, 0)
        for c in h.cores:
            ctx.set(c.start, 1)
        await ctx.tick()
        for c, st in zip(h.cores, states):
            ctx.set(c.start, 0)
            st.running = True
        nic_queue = [[] for _ in range(n)]   # (due, payload) per core
        barrier_wait = 0
        seq = 0
        for cyc in range(max_cycles):
            if all(not st.running for st in states):
                break
            # -- PEs: ready first (never from valid), then done pulses ---------------
            pe_ready = []
            for c, st in zip(h.cores, states):
                rdy = []
                for p in range(pes):
                    pend = st.pe_pending[p]
                    ready = r.random() < p_ready and len(pend) < 6
                    due = [x for x in pend if x[0] <= cyc]
                    done = r.choice(due) if due else None
                    ctx.set(c.pe[p].ready, ready)
                    ctx.set(c.pe[p].done, done is not None)
                    ctx.set(c.pe[p].done_tag, done[1] if done else 0)
                    if done:
                        pend.remove(done)
                        f = st.by_slot[done[1]]
                        assert f.seq == done[2] and p in f.waiting, (seed, cyc, p, done)
                        f.waiting.discard(p)
                        if not f.waiting:
                            f.done = cyc
                    rdy.append(ready)
                    busy = {u: r.random() < 0.5 for u in BUSY_UNITS}
                    ctx.set(c.pe_busy[p], busy)
                    if st.running:
                        for u in BUSY_UNITS:
                            st.counts[f"busy_{u}"] += busy[u]
                pe_ready.append(rdy)
            # -- network: requests out, replies into the VSM -------------------------
            for i, (c, v) in enumerate(zip(h.cores, h.vsms)):
                ctx.set(c.nic_req.ready, r.random() < p_nic)
                q = nic_queue[i]
                head = q[0] if q and q[0][0] <= cyc else None
                ctx.set(v.reply.valid, head is not None)
                if head:
                    ctx.set(v.reply.payload, head[1])
            # -- barrier: proceed to all once all arrived (after a random delay) -----
            arrived = [ctx.get(c.sync.arrive) for c in h.cores]
            proceed = False
            if all(arrived):
                phases = {ctx.get(c.sync.phase) for c in h.cores}
                assert len(phases) == 1, (seed, cyc, phases)
                if barrier_wait == 0:
                    barrier_wait = r.randint(*barrier_delay) + 1
                barrier_wait -= 1
                proceed = barrier_wait == 0
            else:
                barrier_wait = 0
            for c in h.cores:
                ctx.set(c.sync.proceed, proceed)
            # -- observe -------------------------------------------------------------
            for i, (c, v, st) in enumerate(zip(h.cores, h.vsms, states)):
                if not st.running:
                    continue
                st.counts["cycles"] += 1
                live = [f for f in st.flights if f.done is None or f.done >= cyc]
                if arrived[i]:
                    st.arrive_cycles.append(cyc)
                    assert not live, (seed, cyc, "arrive with instructions in flight")
                # completions of vault units this cycle
                if ctx.get(c.vsm.valid) and ctx.get(c.vsm.ready):
                    f = st.seti_fifo.pop(0)
                    assert ctx.get(c.vsm.addr) == f.ins.vsm
                    assert ctx.get(c.vsm.wmask) == f.ins.vec_mask
                    f.done = cyc
                if ctx.get(c.nic_req.valid) and ctx.get(c.nic_req.ready):
                    f = st.req_fifo.pop(0)
                    pl = ctx.get(c.nic_req.payload)
                    got = {k: getattr(pl, k) for k in ("chip", "vault", "pg", "pe", "dram",
                                                       "vsm", "tag")}
                    want = {k: getattr(f.ins, k) for k in ("chip", "vault", "pg", "pe",
                                                           "dram", "vsm")}
                    want["tag"] = f.slot
                    assert got == want, (seed, cyc, got, want)
                    data = r.getrandbits(128)
                    st.sent.append((got, f, data))
                    nic_queue[i].append((cyc + r.randint(*reply_lat),
                                         {"vsm": got["vsm"], "tag": got["tag"], "data": data}))
                    nic_queue[i].sort(key=lambda x: x[0])
                if ctx.get(v.reply.valid) and ctx.get(v.reply.ready):
                    nic_queue[i].pop(0)
                if ctx.get(c.landed.valid):
                    f = st.by_slot[ctx.get(c.landed.tag)]
                    assert f.ins.opcode is Opcode.REQ and f.done is None, (seed, cyc)
                    f.done = cyc
                for f in st.flights:
                    if f.ins.opcode in (Opcode.CALC_CRF, Opcode.SETI_CRF) \
                            and f.issued + t_alu - 1 == cyc:
                        f.done = cyc
                # the issue stage
                pc = ctx.get(c.issue_pc)
                ins = st.prog[pc]
                fired = bool(ctx.get(c.issue_valid))
                rd, wr = accesses(ins)
                dep = any(conflicts(f.writes, rd | wr) or conflicts(f.reads, wr) for f in live)
                in_use = sum(1 for f in live if f.slot is not None)
                slot_need = needs_slot(ins, pes, t_alu)
                mask = eff_mask(ins, pes)
                valids = [ctx.get(c.pe[p].valid) for p in range(pes)]
                if not fired:
                    sync_like = ins.opcode in (Opcode.SYNC, Opcode.HALT)
                    cause = ("stall_sync" if sync_like else "stall_dep" if dep else
                             "stall_full" if slot_need and in_use == Q else "stall_unit")
                    st.counts[cause] += 1
                    assert not any(valids), (seed, cyc, "PE valid without issue")
                    # No stall without a cause: a PE op whose PEs are all ready goes.
                    if cause == "stall_unit" and ins.opcode in PE_OPS:
                        assert not all(pe_ready[i][p] for p in range(pes) if mask >> p & 1), \
                            (seed, cyc, pc, ins, "stalled with every masked PE ready")
                    if cause == "stall_unit" and ins.opcode in (Opcode.NOP, Opcode.JUMP,
                                                                Opcode.CJUMP, Opcode.CALC_CRF,
                                                                Opcode.SETI_CRF):
                        raise AssertionError((seed, cyc, pc, ins, "stalled without cause"))
                    continue
                if dep:
                    older = [(f.ins, f.issued) for f in live
                             if conflicts(f.writes, rd | wr) or conflicts(f.reads, wr)]
                    raise AssertionError(f"seed {seed} cycle {cyc}: pc {pc} {ins} issued "
                                         f"across a dependency on {older}")
                assert not (slot_need and in_use == Q), (seed, cyc, "issued into a full queue")
                assert valids == [bool(mask >> p & 1) for p in range(pes)], \
                    (seed, cyc, valids, mask)
                assert all(pe_ready[i][p] for p in range(pes) if mask >> p & 1)
                st.trace.append((cyc, pc))
                st.counts["issued"] += 1
                st.counts[f"issued_{class_of(ins.opcode)}"] += 1
                tag = ctx.get(c.pe[0].tag)
                f = Flight(seq, ins, rd, wr, cyc, tag if slot_need else None)
                seq += 1
                if slot_need:
                    assert tag not in st.by_slot or st.by_slot[tag].done is not None \
                        and st.by_slot[tag].done < cyc, (seed, cyc, "slot reused while busy")
                    st.by_slot[tag] = f
                    st.flights.append(f)
                if mask:
                    f.waiting = {p for p in range(pes) if mask >> p & 1}
                    for p in f.waiting:
                        st.pe_pending[p].append((cyc + r.randint(*pe_lat), tag, f.seq))
                elif slot_need:
                    f.waiting = {"unit"}
                if ins.opcode is Opcode.SETI_VSM:
                    st.seti_fifo.append(f)
                    line = st.vsm_expect.get(ins.vsm, 0)
                    if isinstance(line, Flight):    # a req's line: it has landed (WAW)
                        line = next(d for _p, x, d in st.sent if x is line)
                    for lane in range(4):
                        if ins.vec_mask >> lane & 1:
                            line = line & ~(M32 << 32 * lane) | (ins.imm << 32 * lane)
                    st.vsm_expect[ins.vsm] = line
                if ins.opcode is Opcode.REQ:
                    st.req_fifo.append(f)
                    st.vsm_expect[ins.vsm] = f      # filled with the reply's data below
                if ins.opcode is Opcode.SYNC:
                    st.sync_commits.append(cyc)
                    assert proceed
                    assert all(x[1].done is not None and x[1].done < cyc
                               for x in st.sent), "a reply landed after its sync"
                if ins.opcode is Opcode.HALT:
                    st.running = False
                    st.halted_at = cyc
            await ctx.tick()
        else:
            raise AssertionError(f"seed {seed}: no halt in {max_cycles} cycles")
        await ctx.tick()
        for c, st in zip(h.cores, states):
            assert ctx.get(c.halted)
            out.setdefault("perf", []).append(
                {k: ctx.get(getattr(c.perf, k)) for k in st.counts})
            out.setdefault("crf", []).append([ctx.get(c.crf.data[i])
                                              for i in range(crf_entries)])
        # Read back the VSM lines the program wrote, through the ext port.
        lines = []
        for v, st in zip(h.vsms, states):
            got = {}
            for a in sorted(st.vsm_expect):
                ctx.set(v.ext.valid, 1)
                ctx.set(v.ext.we, 0)
                ctx.set(v.ext.addr, a)
                while not ctx.get(v.ext.ready):
                    await ctx.tick()
                await ctx.tick()
                ctx.set(v.ext.valid, 0)
                while not ctx.get(v.ext.rvalid):
                    await ctx.tick()
                got[a] = ctx.get(v.ext.rdata)
            lines.append(got)
        out["vsm"] = lines

    simulate(h, tb)
    for st, perf, got in zip(states, out["perf"], out["vsm"]):
        assert perf == st.counts, (seed, perf, st.counts)
        assert perf["cycles"] == perf["issued"] + sum(perf[k] for k in (
            "stall_dep", "stall_full", "stall_unit", "stall_sync"))
        data_of = {id(f): d for _p, f, d in st.sent}
        want = {a: (data_of[id(x)] if isinstance(x, Flight) else x)
                for a, x in st.vsm_expect.items()}
        assert got == want, (seed, "VSM contents")
        for f in st.flights:
            assert f.done is not None, (seed, f)
    return states, out


# ---- tests ------------------------------------------------------------------------------
