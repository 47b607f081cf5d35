"""cocotb tests of the iPIM control core (``simb_core``) on its Verilog.

The core's neighbours are models: PEs honouring
:class:`~pimforge.rtl.ipim.bus.IssueSignature` (random latencies, random
``ready`` back-pressure, ``done`` in any order), the VSM's ``seti_vsm`` port
with random ``ready``, a network that answers each ``req`` after a random
delay by reporting its tag on ``landed``, and a barrier. A monitor checks every
cycle that no instruction issues while it conflicts, by
:func:`~pimforge.rtl.ipim.isa.conflicts`, with one still in flight, and counts
issues and stalls by cause; the core's counters must equal those counts.

:func:`reference_run` is a tiny control-flow interpreter (CtrlRF, jumps, with the
instruction-set simulator's integer ALU) that follows a program's pcs without the
PEs' state; the simulator harness (:mod:`.core_harness`, run by
``tests/test_ipim_core.py``) shares it and the random program generators of this module.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from pimforge.rtl.ipim.isa import (
    PE_OPS,
    AluOp,
    Cond,
    DType,
    Instr,
    Mode,
    Opcode,
    accesses,
    conflicts,
    decode,
    encode,
)

from ...models.ipim.iss import int_alu as iss_int_alu
from ..common import bench, rng, start

__all__ = ["reference_run", "int_alu", "rand_pe_instr", "rand_instr", "loop_program",
           "UNIT_OPS", "STALL_NAMES", "unit_slot"]

M32 = 0xFFFF_FFFF
_EVERY_LANE = sum(1 << 32 * i for i in range(4))     # imm on each of the 4 lanes
#: Vault-level opcodes that hold an issued-instruction queue slot (the CtrlRF ones
#: only with a multi-cycle ALU, see :func:`unit_slot`).
UNIT_OPS = (Opcode.SETI_VSM, Opcode.REQ, Opcode.CALC_CRF, Opcode.SETI_CRF)


def unit_slot(op: Opcode, t_alu: int) -> bool:
    """Whether the vault-level opcode *op* holds a slot (a CtrlRF write takes one only
    when it is not written at the end of its issue cycle)."""
    return op in UNIT_OPS and (t_alu > 1 or op not in (Opcode.CALC_CRF, Opcode.SETI_CRF))
STALL_NAMES = ("stall_dep", "stall_full", "stall_unit", "stall_sync")


# ---- reference interpreter: control flow only ----------------------------------------

def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def int_alu(op: AluOp, a: int, b: int) -> int:
    """CALC_CRF / CALC_ARF of isa.py on 32-bit values (the instruction-set simulator's ALU)."""
    return int(iss_int_alu(op, [a & M32], [b & M32])[0])


def reference_run(prog: list[Instr], crf_entries: int,
                  limit: int = 100000) -> tuple[list[int], list[int]]:
    """Control flow and CtrlRF of *prog* (PE and vault-unit instructions do nothing
    here): ``(pc of every issued instruction, final CtrlRF)``."""
    crf = [0] * crf_entries
    pc, trace = 0, []
    for _ in range(limit):
        ins = prog[pc]
        trace.append(pc)
        op = ins.opcode
        nxt = pc + 1
        if op is Opcode.HALT:
            return trace, crf
        if op is Opcode.SETI_CRF:
            crf[ins.dst] = ins.imm & M32
        elif op is Opcode.CALC_CRF:
            crf[ins.dst] = int_alu(ins.op, crf[ins.src1], crf[ins.src2])
        elif op in (Opcode.JUMP, Opcode.CJUMP):
            c = _s32(crf[ins.src])
            take = op is Opcode.JUMP or {Cond.Z: c == 0, Cond.NZ: c != 0, Cond.LTZ: c < 0,
                                         Cond.GEZ: c >= 0}[ins.cond]
            if take:
                nxt = crf[ins.target]
        pc = nxt
    raise AssertionError("reference run did not halt")


# ---- random programs ------------------------------------------------------------------

def rand_pe_instr(r: random.Random, pes: int) -> Instr:
    """A PE instruction over few registers and addresses (many hazards), random mask
    (sometimes with bits beyond the vault's PEs, sometimes none of them)."""
    mask = r.choice([(1 << pes) - 1, r.randrange(1 << pes), 1 << r.randrange(pes),
                     (1 << 63) | r.randrange(1 << pes)])

    def reg() -> int:
        return r.randrange(10)

    def arf() -> int:
        return r.randrange(4, 8)

    def adr() -> int:
        return r.randrange(8)

    def ind() -> int:
        return int(r.random() < 0.2)

    op = r.choice(sorted(PE_OPS, key=lambda o: o.value))
    O = Opcode     # noqa: E741
    if op is O.COMP:
        return Instr(op, op=r.choice([AluOp.ADD, AluOp.MAC, AluOp.MUL]), dtype=DType.FP32,
                     mode=r.choice(list(Mode)), lane=r.randrange(4), dst=reg(), src1=reg(),
                     src2=reg(), vec_mask=r.randrange(1, 16), simb_mask=mask)
    if op is O.CALC_ARF:
        return Instr(op, op=AluOp.ADD, dst=arf(), src1=r.randrange(8), src2=arf(),
                     simb_mask=mask)
    if op in (O.LD_RF, O.ST_RF):
        i = ind()
        return Instr(op, dram=arf() if i else adr(), dram_ind=i, drf=reg(), simb_mask=mask)
    if op in (O.LD_PGSM, O.ST_PGSM):
        i, j = ind(), ind()
        return Instr(op, dram=arf() if i else adr(), dram_ind=i, pgsm=arf() if j else adr(),
                     pgsm_ind=j, simb_mask=mask)
    if op in (O.RD_PGSM, O.WR_PGSM):
        i = ind()
        return Instr(op, pgsm=arf() if i else adr(), pgsm_ind=i, drf=reg(), simb_mask=mask)
    if op in (O.RD_VSM, O.WR_VSM):
        i = ind()
        return Instr(op, vsm=arf() if i else adr(), vsm_ind=i, drf=reg(), simb_mask=mask)
    if op in (O.MOV_DRF, O.MOV_ARF):
        return Instr(op, arf=arf(), drf=reg(), lane=r.randrange(4), simb_mask=mask)
    return Instr(O.RESET, drf=reg(), simb_mask=mask)


def rand_instr(r: random.Random, pes: int) -> Instr:
    """Mostly PE instructions, some vault-unit and CtrlRF ones (no jumps)."""
    x = r.random()
    if x < 0.7:
        return rand_pe_instr(r, pes)
    if x < 0.78:
        return Instr(Opcode.SETI_VSM, vsm=r.randrange(4), vec_mask=r.randrange(16),
                     imm=r.getrandbits(32))
    if x < 0.86:
        return Instr(Opcode.REQ, chip=r.randrange(16), vault=r.randrange(64),
                     pg=r.randrange(16), pe=r.randrange(16), dram=r.getrandbits(24),
                     vsm=r.randrange(4))
    if x < 0.92:
        return Instr(Opcode.CALC_CRF, op=r.choice([AluOp.ADD, AluOp.XOR]), dst=r.randrange(4),
                     src1=r.randrange(4), src2=r.randrange(4))
    if x < 0.96:
        return Instr(Opcode.SETI_CRF, dst=r.randrange(4), imm=r.getrandbits(32))
    return Instr(Opcode.NOP)


def loop_program(r: random.Random, n: int) -> list[Instr]:
    """Random CtrlRF arithmetic in a counted loop of *n* turns, a forward jump and a
    random conditional jump (CtrlRF entries up to 14)."""
    ops = [o for o in AluOp if o is not AluOp.MAC]
    body = [Instr(Opcode.CALC_CRF, op=r.choice(ops), dst=r.randrange(8, 12),
                  src1=r.randrange(6, 12), src2=r.randrange(6, 12)) for _ in range(4)]
    body.insert(2, Instr(Opcode.COMP, dst=1, src1=1, src2=2, simb_mask=0x3))
    prog = [Instr(Opcode.SETI_CRF, dst=1, imm=n), Instr(Opcode.SETI_CRF, dst=2, imm=1)]
    prog += [Instr(Opcode.SETI_CRF, dst=k,
                   imm=r.choice([r.getrandbits(32), r.randrange(-40, 40)]))
             for k in range(6, 12)]
    loop = len(prog) + 1
    prog.append(Instr(Opcode.SETI_CRF, dst=3, imm=loop))
    prog += body
    prog.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=1, src1=1, src2=2))
    prog.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=1, target=3))
    # A forward jump over a poison seti, then a conditional on a random value.
    skip = len(prog) + 3
    prog += [Instr(Opcode.SETI_CRF, dst=4, imm=skip), Instr(Opcode.JUMP, target=4),
             Instr(Opcode.SETI_CRF, dst=13, imm=0xDEAD)]
    prog += [Instr(Opcode.SETI_CRF, dst=5, imm=len(prog) + 3),
             Instr(Opcode.CJUMP, cond=r.choice(list(Cond)), src=8, target=5),
             Instr(Opcode.SETI_CRF, dst=14, imm=77), Instr(Opcode.HALT)]
    return prog


# ---- the environment ------------------------------------------------------------------

class _Flight:
    __slots__ = ("ins", "reads", "writes", "issued", "slot", "waiting", "done")

    def __init__(self, ins, issued, slot):
        self.ins, self.issued, self.slot = ins, issued, slot
        self.reads, self.writes = accesses(ins)
        self.waiting: set = set()
        self.done: int | None = None


class CoreEnv:
    """Models around one control core and the hazard monitor (see the module docstring)."""

    def __init__(self, dut, r: random.Random):
        self.dut, self.r = dut, r
        ip = bench()["config"]["ipim"]
        self.pes = ip["pgs"] * ip["pes_per_pg"]
        self.Q = ip["inst_queue"]
        self.t_alu = ip["t_alu"]
        self.p_ready, self.p_vsm, self.p_nic = 0.7, 0.7, 0.6
        self.pe_lat, self.reply_lat = (1, 12), (1, 20)
        self.pe_cap = 6             # instructions a PE model holds before dropping ready

    async def load(self, prog: list[Instr]) -> None:
        d = self.dut
        for a, ins in enumerate(prog):
            await FallingEdge(d.clk)
            d.imem_we.value, d.imem_addr.value, d.imem_data.value = 1, a, encode(ins)
        await FallingEdge(d.clk)
        d.imem_we.value = 0

    async def run(self, prog: list[Instr], max_cycles: int = 50000) -> dict:
        """Load and run *prog* to its halt; return what the monitor saw."""
        d, r, P, Q = self.dut, self.r, self.pes, self.Q
        await self.load(prog)
        d.start.value = 1
        await FallingEdge(d.clk)
        d.start.value = 0
        counts = {k: 0 for k in ("cycles", "issued", *STALL_NAMES)}
        trace: list[tuple[int, int]] = []
        flights: list[_Flight] = []
        by_slot: dict[int, _Flight] = {}
        pend: list[list] = [[] for _ in range(P)]
        seti_q: list[_Flight] = []
        req_q: list[_Flight] = []
        replies: list[tuple[int, int]] = []        # (due, tag)
        bar_wait = 0
        pe_port = [getattr(d, f"pe__{p}__valid") for p in range(P)]
        for cyc in range(max_cycles):
            # drive: PE ready/done, VSM ready, network, barrier
            ready = []
            for p in range(P):
                rdy = r.random() < self.p_ready and len(pend[p]) < self.pe_cap
                due = [x for x in pend[p] if x[0] <= cyc]
                done = r.choice(due) if due else None
                getattr(d, f"pe__{p}__ready").value = int(rdy)
                getattr(d, f"pe__{p}__done").value = int(done is not None)
                getattr(d, f"pe__{p}__done_tag").value = done[1] if done else 0
                if done:
                    pend[p].remove(done)
                    f = by_slot[done[1]]
                    assert p in f.waiting, (cyc, p, done)
                    f.waiting.discard(p)
                    if not f.waiting:
                        f.done = cyc
                ready.append(rdy)
            d.vsm__ready.value = int(r.random() < self.p_vsm)
            d.nic_req__ready.value = int(r.random() < self.p_nic)
            land = next((x for x in replies if x[0] <= cyc), None)
            d.landed__valid.value = int(land is not None)
            d.landed__tag.value = land[1] if land else 0
            if land:
                replies.remove(land)
                by_slot[land[1]].done = cyc
            arrive = int(d.sync__arrive.value)
            proceed = 0
            if arrive:
                if bar_wait == 0:
                    bar_wait = r.randint(1, 6)
                bar_wait -= 1
                proceed = int(bar_wait == 0)
            else:
                bar_wait = 0
            d.sync__proceed.value = proceed
            await ReadOnly()
            # observe
            if int(d.halted.value):
                break
            counts["cycles"] += 1
            live = [f for f in flights if f.done is None or f.done >= cyc]
            if arrive:
                assert not live, f"cycle {cyc}: arrive with instructions in flight"
            if int(d.vsm__valid.value) and int(d.vsm__ready.value):
                f = seti_q.pop(0)
                assert int(d.vsm__addr.value) == f.ins.vsm
                assert int(d.vsm__wmask.value) == f.ins.vec_mask
                assert int(d.vsm__wdata.value) == f.ins.imm * _EVERY_LANE
                f.done = cyc
            if int(d.nic_req__valid.value) and int(d.nic_req__ready.value):
                f = req_q.pop(0)
                pl = int(d.nic_req__payload.value)
                got = []
                for w in (4, 6, 4, 4, 24, 16):
                    got.append(pl & ((1 << w) - 1))
                    pl >>= w
                want = [f.ins.chip, f.ins.vault, f.ins.pg, f.ins.pe, f.ins.dram, f.ins.vsm]
                assert got == want and pl == f.slot, (cyc, got, want, pl, f.slot)
                replies.append((cyc + r.randint(*self.reply_lat), f.slot))
            for f in flights:
                if f.ins.opcode in (Opcode.CALC_CRF, Opcode.SETI_CRF) \
                        and f.issued + self.t_alu - 1 == cyc:
                    f.done = cyc
            pc = int(d.issue_pc.value)
            ins = prog[pc]
            fired = int(d.issue_valid.value)
            rd, wr = accesses(ins)
            dep = any(conflicts(f.writes, rd | wr) or conflicts(f.reads, wr) for f in live)
            mask = ins.simb_mask & ((1 << P) - 1) if ins.opcode in PE_OPS else 0
            need = bool(mask) or unit_slot(ins.opcode, self.t_alu)
            in_use = sum(1 for f in live if f.slot is not None)
            valids = [int(pe_port[p].value) for p in range(P)]
            if not fired:
                sync_like = ins.opcode in (Opcode.SYNC, Opcode.HALT)
                cause = ("stall_sync" if sync_like else "stall_dep" if dep else
                         "stall_full" if need and in_use == Q else "stall_unit")
                counts[cause] += 1
                assert not any(valids), f"cycle {cyc}: PE valid without issue"
                if cause == "stall_unit" and ins.opcode in PE_OPS:
                    assert not all(ready[p] for p in range(P) if mask >> p & 1), \
                        f"cycle {cyc}: {ins} stalled with every masked PE ready"
            else:
                assert not dep, f"cycle {cyc}: {ins} issued across a dependency"
                assert not (need and in_use == Q), f"cycle {cyc}: issued into a full queue"
                assert valids == [mask >> p & 1 for p in range(P)], (cyc, valids, mask)
                if mask:
                    assert decode(int(d.pe__0__instr.value)) == ins
                counts["issued"] += 1
                trace.append((cyc, pc))
                if need:
                    tag = int(d.pe__0__tag.value)
                    assert tag not in by_slot or by_slot[tag].done is not None, \
                        f"cycle {cyc}: slot {tag} reused while busy"
                    f = _Flight(ins, cyc, tag)
                    by_slot[tag] = f
                    flights.append(f)
                    f.waiting = {p for p in range(P) if mask >> p & 1}
                    for p in f.waiting:
                        pend[p].append((cyc + r.randint(*self.pe_lat), tag))
                    if ins.opcode is Opcode.SETI_VSM:
                        seti_q.append(f)
                    if ins.opcode is Opcode.REQ:
                        req_q.append(f)
            await FallingEdge(d.clk)
        else:
            raise AssertionError(f"no halt in {max_cycles} cycles")
        await FallingEdge(d.clk)
        perf = {k: int(getattr(d, f"perf__{k}").value) for k in counts}
        assert perf == counts, f"counters {perf} != monitor {counts}"
        assert all(f.done is not None for f in flights)
        return {"trace": trace, "counts": counts}


@cocotb.test()
async def random_programs_hazards_and_counters(dut):
    """Random hazard-dense programs with syncs under random back-pressure: nothing
    issues across a dependency, no stall without its cause, counters = monitor."""
    r = rng("random")
    await start(dut)
    env = CoreEnv(dut, r)
    total = {k: 0 for k in ("cycles", "issued", *STALL_NAMES)}
    for _ in range(3):
        prog = [rand_instr(r, env.pes) for _ in range(60)]
        prog.insert(30, Instr(Opcode.SYNC, phase=r.randrange(1 << 16)))
        prog.append(Instr(Opcode.HALT))
        got = await env.run(prog)
        assert got["counts"]["issued"] == len(prog)
        for k, v in got["counts"].items():
            total[k] += v
    dut._log.info("monitor totals %s (IPC %.2f)", total, total["issued"] / total["cycles"])
    assert total["stall_dep"] and total["stall_unit"] and total["stall_sync"]
    # More independent long instructions than slots: the queue fills.
    env.pe_lat, env.p_ready, env.pe_cap = (2 * env.Q + 10, 2 * env.Q + 20), 1.0, 1 << 20
    prog = [Instr(Opcode.LD_RF, dram=i, drf=i % 200, simb_mask=r.randrange(1, 1 << env.pes))
            for i in range(env.Q + 4)]
    got = await env.run(prog + [Instr(Opcode.HALT)])
    assert got["counts"]["stall_full"] > 0, got["counts"]


@cocotb.test()
async def jump_loops_match_reference(dut):
    """CtrlRF loops and jumps: the issued pc trace equals the reference interpreter's."""
    r = rng("loops")
    await start(dut)
    env = CoreEnv(dut, r)
    for _ in range(4):
        prog = loop_program(r, r.randrange(2, 7))
        trace, _crf = reference_run(prog, bench()["config"]["ipim"]["crf_entries"])
        got = await env.run(prog)
        assert [pc for _, pc in got["trace"]] == trace


@cocotb.test()
async def independent_instructions_ipc_one(dut):
    """Independent instructions with every unit ready issue one per cycle."""
    r = rng("ipc")
    await start(dut)
    env = CoreEnv(dut, r)
    env.p_ready = env.p_vsm = env.p_nic = 1.0
    env.pe_lat = (1, 2)
    n = min(env.Q, 12)
    prog = [Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.FP32, dst=i + 8, src1=i + 32,
                  src2=i + 64, simb_mask=(1 << env.pes) - 1) for i in range(n)]
    prog.append(Instr(Opcode.HALT))
    got = await env.run(prog)
    cycles = [c for c, _ in got["trace"]][:n]
    assert cycles == list(range(cycles[0], cycles[0] + n)), cycles
