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

import pytest

from pimforge.rtl.ipim.core import OPCODE_CLASSES, ControlCore
from pimforge.rtl.ipim.core_units import VaultUnits
from pimforge.rtl.ipim.isa import (
    AluOp,
    Cond,
    DType,
    Instr,
    Opcode,
    Store,
    accesses,
    conflicts,
    encode,
)
from pimforge.rtl.ipim.issue_queue import IssueQueue
from pimforge.rtl.ipim.vsm import VSM
from pimforge.rtl.params import ParameterError
from pimforge.verif.tb.ipim.core import (
    int_alu,
    loop_program,
    rand_instr,
    reference_run,
)
from pimforge.verif.tb.ipim.core_harness import run

log = logging.getLogger(__name__)


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
    from pimforge.rtl.ipim import issue_queue as queue_mod

    reg, mem = queue_mod._reg_match, queue_mod._mem_match

    def broken_mem(x, y):
        return x.en & y.en & (x.store == y.store) & ~(x.queued & y.queued) \
            & (x.addr == y.addr)

    def broken_conflict(new, old):
        raw = reg(new.rd0, old.wr) | reg(new.rd1, old.wr) | reg(new.rd2, old.wr) \
            | mem(new.mrd, old.mwr)
        waw = reg(new.wr, old.wr) | mem(new.mwr, old.mwr)
        return raw | waw

    if drop == "war":
        monkeypatch.setattr(queue_mod, "_conflict", broken_conflict)
    else:
        monkeypatch.setattr(queue_mod, "_mem_match", broken_mem)
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
    "bank_raw_direct": (Instr(Opcode.ST_PGSM, dram=10, pgsm=0, simb_mask=_M),
                        Instr(Opcode.LD_RF, dram=10, drf=1, simb_mask=_M)),
    # both enter the PE's request queue in issue order: no hazard, direct or indirect
    "bank_queued_raw_none": (Instr(Opcode.ST_RF, dram=10, drf=0, simb_mask=_M),
                             Instr(Opcode.LD_RF, dram=10, drf=1, simb_mask=_M)),
    "bank_queued_waw_indirect_none": (Instr(Opcode.ST_RF, dram=5, dram_ind=1, drf=0,
                                            simb_mask=_M),
                                      Instr(Opcode.ST_RF, dram=99, drf=1, simb_mask=_M)),
    "bank_queued_war_ld_pgsm_none": (Instr(Opcode.LD_PGSM, dram=7, dram_ind=1, pgsm=1,
                                           simb_mask=_M),
                                     Instr(Opcode.ST_RF, dram=7, drf=1, simb_mask=_M)),
    "bank_direct_other_addr": (Instr(Opcode.ST_RF, dram=10, drf=0, simb_mask=_M),
                               Instr(Opcode.LD_RF, dram=11, drf=1, simb_mask=_M)),
    "bank_war_indirect": (Instr(Opcode.LD_RF, dram=10, drf=0, simb_mask=_M),
                          Instr(Opcode.ST_PGSM, dram=4, dram_ind=1, pgsm=3, simb_mask=_M)),
    "bank_waw_indirect": (Instr(Opcode.ST_RF, dram=5, dram_ind=1, drf=0, simb_mask=_M),
                          Instr(Opcode.ST_PGSM, dram=99, pgsm=2, simb_mask=_M)),
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


def test_issue_queue_holds_a_slot_until_every_bit_clears(simulate):
    """The queue on its own: a slot taken with two PE bits blocks a dependent instruction
    (RAW on a DataRF entry) until both PEs report it done, and an independent one never;
    the lowest free slot is offered; the unit bit clears on a unit's finish."""
    q = IssueQueue(slots=2, pes=2)
    D = Store.DRF.value

    async def bench(ctx):
        def hazard(**regs):
            v = {"rd0": {}, "rd1": {}, "rd2": {}, "wr": {}, "mrd": {}, "mwr": {}}
            for k, idx in regs.items():
                v[k] = {"en": 1, "store": D, "idx": idx}
            ctx.set(q.hazard, v)

        assert ctx.get(q.slot) == 0 and ctx.get(q.drained)
        hazard(wr=5)
        ctx.set(q.take, 1)
        ctx.set(q.take_pending, 0b011)
        await ctx.tick()
        ctx.set(q.take, 0)
        assert ctx.get(q.slot) == 1 and not ctx.get(q.drained) and ctx.get(q.any_free)
        hazard(rd0=5)
        assert ctx.get(q.dep)
        hazard(rd0=6)
        assert not ctx.get(q.dep)
        hazard(rd1=5)
        for p in (0, 1):
            ctx.set(q.pe_done[p].valid, 1)
            ctx.set(q.pe_done[p].tag, 0)
            assert ctx.get(q.dep)           # cleared at the end of the cycle: no bypass
            await ctx.tick()
            ctx.set(q.pe_done[p].valid, 0)
        assert not ctx.get(q.dep) and ctx.get(q.drained) and ctx.get(q.slot) == 0
        ctx.set(q.take, 1)
        ctx.set(q.take_pending, 0b100)       # a vault-unit instruction
        await ctx.tick()
        ctx.set(q.take, 0)
        ctx.set(q.unit_done[2].valid, 1)
        ctx.set(q.unit_done[2].tag, 0)
        assert not ctx.get(q.drained)
        await ctx.tick()
        ctx.set(q.unit_done[2].valid, 0)
        assert ctx.get(q.drained)

    simulate(q, bench)


def test_vault_units_latency_and_output_registers(simulate):
    """The units on their own: a ``seti_crf`` writes the CtrlRF at the end of its
    ``t_alu``-th cycle and reports its slot then; a ``seti_vsm`` waits in its register
    (``seti_ready`` low) until the VSM takes it, and reports its slot in that cycle."""
    u = VaultUnits(tag_bits=3, crf_entries=16, vsm_bits=8, t_alu=3)

    async def bench(ctx):
        ctx.set(u.instr.as_value(), encode(Instr(Opcode.SETI_CRF, dst=5, imm=77)))
        ctx.set(u.tag, 2)
        ctx.set(u.go, 1)
        await ctx.tick()
        ctx.set(u.go, 0)
        assert not ctx.get(u.crf_we) and not ctx.get(u.alu_done.valid)
        await ctx.tick()
        assert ctx.get(u.crf_we) and ctx.get(u.crf_addr) == 5 and ctx.get(u.crf_data) == 77
        assert ctx.get(u.alu_done.valid) and ctx.get(u.alu_done.tag) == 2
        await ctx.tick()
        assert not ctx.get(u.crf_we)

        ctx.set(u.instr.as_value(), encode(Instr(Opcode.SETI_VSM, vsm=9, imm=3,
                                                 vec_mask=0b0101)))
        ctx.set(u.tag, 6)
        ctx.set(u.go, 1)
        assert ctx.get(u.seti_ready)
        await ctx.tick()
        ctx.set(u.go, 0)
        for _ in range(3):          # the VSM refuses: the write waits
            assert ctx.get(u.vsm.valid) and not ctx.get(u.seti_ready)
            assert not ctx.get(u.seti_done.valid)
            await ctx.tick()
        ctx.set(u.vsm.ready, 1)
        assert ctx.get(u.seti_ready) and ctx.get(u.seti_done.valid)
        assert ctx.get(u.seti_done.tag) == 6 and ctx.get(u.vsm.addr) == 9
        assert ctx.get(u.vsm.wdata) == 3 * 0x0000_0001_0000_0001_0000_0001_0000_0001
        assert ctx.get(u.vsm.wmask) == 0b0101
        await ctx.tick()
        assert not ctx.get(u.vsm.valid)

    simulate(u, bench)
