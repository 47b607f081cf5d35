"""iPIM control core + VSM in the Amaranth simulator, against PE, network and barrier models.

The PEs are Python models honouring :class:`~pimforge.rtl.ipim.bus.IssueSignature`
(random latencies, random ``ready`` back-pressure, ``done`` in any order). A
monitor checks every cycle that no instruction issues while it conflicts, by
:func:`~pimforge.rtl.ipim.isa.conflicts`, with one still in flight, that the
core never stalls without a cause, and counts what it saw to compare with the
core's counters. Jumps and the CtrlRF ALU are compared with
:func:`~pimforge.verif.tb.ipim.core.reference_run`, a tiny control-flow
interpreter kept beside the cocotb bench as a stand-in for the instruction-set
simulator (``verif/models/ipim/iss.py``) that is being written separately; the
random program generators are shared with that bench too.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

import pytest
from amaranth import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from pimforge.rtl.params import ParameterError
from pimforge.rtl.ipim.core import BUSY_UNITS, OPCODE_CLASSES, ControlCore
from pimforge.rtl.ipim.isa import (
    PE_OPS,
    AluOp,
    Cond,
    DType,
    Instr,
    Opcode,
    accesses,
    conflicts,
    encode,
)
from pimforge.rtl.ipim.vsm import VSM
from pimforge.verif.tb.ipim.core import (
    int_alu,
    loop_program,
    rand_instr,
    reference_run,
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
    sim = Simulator(h)
    sim.add_clock(1e-6)

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

    sim.add_testbench(tb)
    sim.run()
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

@pytest.mark.parametrize("seed, inst_queue, t_alu", [(1, 4, 1), (2, 8, 3), (3, 2, 2),
                                                     (4, 1, 1)])
def test_random_programs_hazards_and_counters(seed, inst_queue, t_alu):
    """Random programs full of hazards, random PE latencies and back-pressure: no
    conflicting pair is ever in flight together, no stall without its cause, every
    counter equals the monitor's count, VSM lines hold the seti/req results."""
    r = random.Random(seed)
    prog = [rand_instr(r, 4) for _ in range(80)]
    prog[40:40] = [Instr(Opcode.SYNC, phase=7)]
    prog.append(Instr(Opcode.HALT))
    states, out = run([prog], seed=seed, inst_queue=inst_queue, t_alu=t_alu)
    c = states[0].counts
    log.info("seed %d Q=%d: %s", seed, inst_queue, c)
    assert c["issued"] == len(prog)
    assert c["stall_dep"] > 0 and c["stall_unit"] > 0 and c["stall_sync"] > 0
    if inst_queue <= 4:
        assert c["stall_full"] > 0


@pytest.mark.parametrize("drop", ["war", "whole_store"])
def test_monitor_catches_a_broken_dependency_check(monkeypatch, drop):
    """Mutation check of the monitor: the core built with a hazard check that misses
    anti dependencies, or that compares indirect accesses by address, lets a
    conflicting instruction issue, and the monitor says so."""
    from pimforge.rtl.ipim import core as core_mod

    reg, mem = core_mod._reg_match, core_mod._mem_match

    def broken_mem(x, y):
        return x.en & y.en & (x.store == y.store) & (x.addr == y.addr)

    def broken_conflict(new, old):
        raw = reg(new.rd0, old.wr) | reg(new.rd1, old.wr) | reg(new.rd2, old.wr) \
            | mem(new.mrd, old.mwr)
        waw = reg(new.wr, old.wr) | mem(new.mwr, old.mwr)
        return raw | waw

    if drop == "war":
        monkeypatch.setattr(core_mod, "_conflict", broken_conflict)
    else:
        monkeypatch.setattr(core_mod, "_mem_match", broken_mem)
    r = random.Random(5)
    prog = [rand_instr(r, 4) for _ in range(80)] + [Instr(Opcode.HALT)]
    with pytest.raises(AssertionError, match="issued across a dependency"):
        run([prog], seed=5)


def test_back_to_back_issue_ipc_one():
    """Independent instructions with PEs always ready issue one per cycle."""
    P = 4
    prog = [Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.FP32, dst=i % 8 + 8,
                  src1=i % 8 + 16, src2=i % 8 + 24, simb_mask=0xF) for i in range(6)]
    prog += [Instr(Opcode.SETI_CRF, dst=1, imm=5), Instr(Opcode.NOP),
             Instr(Opcode.SETI_VSM, vsm=3, imm=9, vec_mask=0xF),
             Instr(Opcode.LD_RF, dram=1, drf=40, simb_mask=0x3),
             Instr(Opcode.LD_RF, dram=2, drf=41, simb_mask=0xC), Instr(Opcode.HALT)]
    states, out = run([prog], seed=6, pes=P, inst_queue=16, pe_lat=(1, 2), p_ready=1.0)
    cycles = [c for c, _ in states[0].trace]
    n = len(prog) - 1       # the halt waits for the last PE instructions to finish
    assert cycles[:n] == list(range(cycles[0], cycles[0] + n)), cycles
    perf = out["perf"][0]
    assert perf["issued"] == len(prog)
    assert perf["cycles"] - perf["stall_sync"] == len(prog)
    assert perf["stall_dep"] == perf["stall_full"] == perf["stall_unit"] == 0


# Pairs (A, B): A is held in flight for a while; B must wait for it exactly when
# isa.conflicts says so.
_M = 0xF
_PAIRS = {
    "drf_raw": (Instr(Opcode.COMP, dst=1, src1=2, src2=3, simb_mask=_M),
                Instr(Opcode.COMP, dst=4, src1=1, src2=5, simb_mask=_M)),
    "drf_war": (Instr(Opcode.COMP, dst=1, src1=2, src2=3, simb_mask=_M),
                Instr(Opcode.RESET, drf=2, simb_mask=_M)),
    "drf_waw": (Instr(Opcode.LD_RF, dram=5, drf=3, simb_mask=_M),
                Instr(Opcode.RD_VSM, vsm=1, drf=3, simb_mask=_M)),
    "drf_mac_reads_dst": (Instr(Opcode.RESET, drf=6, simb_mask=1),
                          Instr(Opcode.COMP, op=AluOp.MAC, dst=6, src1=1, src2=2,
                                simb_mask=2)),
    "drf_none": (Instr(Opcode.COMP, dst=1, src1=2, src2=3, simb_mask=_M),
                 Instr(Opcode.COMP, dst=4, src1=2, src2=3, simb_mask=_M)),
    "arf_raw": (Instr(Opcode.CALC_ARF, dst=5, src1=4, src2=6, simb_mask=_M),
                Instr(Opcode.LD_RF, dram=5, dram_ind=1, drf=0, simb_mask=_M)),
    "arf_war": (Instr(Opcode.MOV_DRF, arf=6, drf=0, simb_mask=_M),
                Instr(Opcode.MOV_ARF, arf=6, drf=1, simb_mask=_M)),
    "arf_waw": (Instr(Opcode.CALC_ARF, dst=7, src1=4, src2=4, simb_mask=_M),
                Instr(Opcode.MOV_ARF, arf=7, drf=1, simb_mask=_M)),
    "arf_big_indirect_none": (Instr(Opcode.CALC_ARF, dst=44, src1=4, src2=4, simb_mask=_M),
                              Instr(Opcode.LD_RF, dram=300, dram_ind=1, drf=0,
                                    simb_mask=_M)),
    "crf_raw": (Instr(Opcode.CALC_CRF, dst=1, src1=2, src2=3),
                Instr(Opcode.CJUMP, cond=Cond.NZ, src=1, target=2)),
    "crf_war": (Instr(Opcode.CALC_CRF, dst=1, src1=2, src2=3),
                Instr(Opcode.SETI_CRF, dst=2, imm=1)),
    "crf_waw": (Instr(Opcode.SETI_CRF, dst=3, imm=4),
                Instr(Opcode.CALC_CRF, dst=3, src1=0, src2=0)),
    "crf_none": (Instr(Opcode.SETI_CRF, dst=3, imm=4),
                 Instr(Opcode.CALC_CRF, dst=4, src1=0, src2=0)),
    "bank_raw_direct": (Instr(Opcode.ST_RF, dram=10, drf=0, simb_mask=_M),
                        Instr(Opcode.LD_RF, dram=10, drf=1, simb_mask=_M)),
    "bank_direct_other_addr": (Instr(Opcode.ST_RF, dram=10, drf=0, simb_mask=_M),
                               Instr(Opcode.LD_RF, dram=11, drf=1, simb_mask=_M)),
    "bank_war_indirect": (Instr(Opcode.LD_RF, dram=10, drf=0, simb_mask=_M),
                          Instr(Opcode.ST_PGSM, dram=4, dram_ind=1, pgsm=3, simb_mask=_M)),
    "bank_waw_indirect": (Instr(Opcode.ST_RF, dram=5, dram_ind=1, drf=0, simb_mask=_M),
                          Instr(Opcode.ST_RF, dram=99, drf=1, simb_mask=_M)),
    "pgsm_raw": (Instr(Opcode.WR_PGSM, pgsm=4, drf=0, simb_mask=_M),
                 Instr(Opcode.RD_PGSM, pgsm=4, drf=1, simb_mask=_M)),
    "pgsm_raw_indirect": (Instr(Opcode.LD_PGSM, dram=1, pgsm=4, simb_mask=_M),
                          Instr(Opcode.RD_PGSM, pgsm=6, pgsm_ind=1, drf=1, simb_mask=_M)),
    "pgsm_war": (Instr(Opcode.RD_PGSM, pgsm=5, drf=0, simb_mask=_M),
                 Instr(Opcode.LD_PGSM, dram=2, pgsm=5, simb_mask=_M)),
    "pgsm_none": (Instr(Opcode.RD_PGSM, pgsm=5, drf=0, simb_mask=_M),
                  Instr(Opcode.RD_PGSM, pgsm=5, drf=1, simb_mask=_M)),
    "vsm_raw_req": (Instr(Opcode.REQ, vsm=9, dram=3),
                    Instr(Opcode.RD_VSM, vsm=9, drf=1, simb_mask=_M)),
    "vsm_waw_indirect": (Instr(Opcode.REQ, vsm=9, dram=3),
                         Instr(Opcode.WR_VSM, vsm=5, vsm_ind=1, drf=1, simb_mask=_M)),
    "vsm_war": (Instr(Opcode.RD_VSM, vsm=2, drf=1, simb_mask=_M),
                Instr(Opcode.SETI_VSM, vsm=2, imm=3)),
    "vsm_other_line": (Instr(Opcode.REQ, vsm=9, dram=3),
                       Instr(Opcode.SETI_VSM, vsm=8, imm=3)),
}


@pytest.mark.parametrize("name", sorted(_PAIRS))
def test_dependency_pair(name):
    """B issues right after A when independent; when they conflict (RAW, WAR, WAW on
    DataRF/AddrRF/CtrlRF, bank/PGSM/VSM, direct or indirect) B waits for A to finish."""
    a, b = _PAIRS[name]
    want = conflicts(accesses(a)[1], accesses(b)[0] | accesses(b)[1]) or \
        conflicts(accesses(a)[0], accesses(b)[1])
    assert want == (not name.endswith("none") and "other" not in name)
    prog = [a, b, Instr(Opcode.HALT)]
    states, _ = run([prog], seed=7, pes=4, inst_queue=4, t_alu=6, pe_lat=(15, 15),
                    p_ready=1.0, p_nic=1.0, reply_lat=(15, 15))
    st = states[0]
    (ca, _), (cb, _) = st.trace[:2]
    fa = st.flights[0]
    if want:
        assert cb == fa.done + 1, (name, ca, cb, fa.done)
    else:
        assert cb == ca + 1, (name, ca, cb)


def test_partial_mask_retires_after_every_pe():
    """A slot of a partial mask frees only after each selected PE's done: with a
    one-slot queue the next instruction issues the cycle after the slowest PE."""
    prog = [Instr(Opcode.COMP, dst=1, src1=2, src2=3, simb_mask=0b1010),
            Instr(Opcode.COMP, dst=4, src1=5, src2=6, simb_mask=0b0101),
            Instr(Opcode.HALT)]
    for seed in range(3):
        states, out = run([prog], seed=seed, inst_queue=1, pe_lat=(2, 30), p_ready=1.0)
        st = states[0]
        f0 = st.flights[0]
        assert st.trace[1][0] == f0.done + 1
        assert out["perf"][0]["stall_full"] == f0.done + 1 - st.trace[0][0] - 1


@pytest.mark.parametrize("seed, t_alu", [(11, 1), (12, 3), (13, 2), (14, 1)])
def test_jump_loops_match_reference(seed, t_alu):
    """Loops of calc_crf/seti_crf/jump/cjump: the issued pc trace and the CtrlRF
    equal the reference interpreter's."""
    r = random.Random(seed)
    prog = loop_program(r, r.randrange(2, 6))
    trace, crf = reference_run(prog, 16)
    states, out = run([prog], seed=seed, t_alu=t_alu, inst_queue=4)
    assert [pc for _, pc in states[0].trace] == trace
    assert out["crf"][0] == crf
    perf = out["perf"][0]
    assert perf["issued_ctrl"] == sum(1 for pc in trace if prog[pc].opcode in
                                      OPCODE_CLASSES["ctrl"])
    if t_alu > 1:
        assert perf["stall_dep"] > 0     # cjump waits for the counter's calc_crf


def test_int_alu_corners():
    """The CtrlRF ALU on shift and crop corners, against the reference."""
    vals = [0, 1, 31, 32, 33, -1, -31, -32, -33, 0x8000_0000, 0x7FFF_FFFF, 17]
    ops = [AluOp.SHIFT, AluOp.CROP_LSB, AluOp.CROP_MSB, AluOp.MUL, AluOp.SUB]
    r = random.Random(15)
    prog, want = [], {}
    k = 0
    for op in ops:
        for _ in range(2):
            a, b = r.choice(vals + [r.getrandbits(32)]), r.choice(vals)
            prog += [Instr(Opcode.SETI_CRF, dst=1, imm=a), Instr(Opcode.SETI_CRF, dst=2, imm=b),
                     Instr(Opcode.CALC_CRF, op=op, dst=3 + k, src1=1, src2=2)]
            want[3 + k] = int_alu(op, a, b)
            k += 1
    prog.append(Instr(Opcode.HALT))
    _, crf = reference_run(prog, 16)
    _, out = run([prog], seed=15)
    assert out["crf"][0] == crf
    assert all(crf[d] == v for d, v in want.items())


@pytest.mark.parametrize("seed", [21, 22])
def test_sync_barrier_across_cores(seed):
    """Three cores with different work between syncs: each arrives only with its
    queue drained, all commit together, replies of earlier reqs have landed."""
    r = random.Random(seed)
    progs = []
    for _ in range(3):
        p = []
        for phase in range(3):
            p += [rand_instr(r, 4) for _ in range(r.randrange(2, 12))]
            p.append(Instr(Opcode.SYNC, phase=phase))
        p.append(Instr(Opcode.HALT))
        progs.append(p)
    states, out = run(progs, seed=seed)
    commits = [st.sync_commits for st in states]
    assert len(commits[0]) == 3 and all(c == commits[0] for c in commits), commits
    for perf in out["perf"]:
        assert perf["issued_sync"] == 3 and perf["stall_sync"] > 0


def test_parameter_checks():
    with pytest.raises(ParameterError, match="inst_queue must be an integer between 1 and 256"):
        ControlCore(pes=4, inst_queue=0, imem_depth=64)
    with pytest.raises(ParameterError, match="imem_depth must be a power of two"):
        ControlCore(pes=4, inst_queue=4, imem_depth=100)
    with pytest.raises(ParameterError, match="lines must be a power of two"):
        VSM(pes=4, lines=3)
    sig = ControlCore.PerfSignature(32)
    assert sig == ControlCore.PerfSignature(32) and sig != ControlCore.PerfSignature(48)
    assert repr(sig) == "ControlCore.PerfSignature(32)"
