"""The vault compute RTL (operation controller + PEs) against the ISA-level executor.

Amaranth-simulator test (no Verilator build): a program using every opcode runs
on a small vault whose operand memory is served by the testbench through the
lane-vector ports, and the memory afterwards must equal the executor's bit for
bit (sends go to a second memory image). Instructions have ``n3`` below, at and
above the lane count, so masked lanes and several lane steps are covered; one
run holds ``rd.ready`` low at random (the controller must hold everything),
the other never does and must take exactly the timing model's cycle count.
Held operands (``hold``) are covered with their group in and over the register
file; every read bundle must be the oldest announced prefetch hint, with never
more hints outstanding than the prefetch depth.
"""

import random

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.rtl.capsnet import pe as pe_mod
from pimforge.rtl.capsnet.isa import Hold, Instr, Opcode, encode
from pimforge.rtl.capsnet.lanes import OPERAND_FIELDS
from pimforge.rtl.capsnet.pe import Flow
from pimforge.rtl.capsnet.vault import VaultCompute
from pimforge.verif.models.capsnet.isa import ONE_BITS, execute, issue_cycles
from pimforge.verif.models.capsnet.pe import PEModel
from pimforge.verif.tb.amaranth_sim import simulate

SEED = 4242


def _program(rng: random.Random) -> list[Instr]:
    n = rng.randint(2, 4)
    g = rng.randint(1, 5)
    return [
        # MAC groups of g over rows of a 2-D block, one output per row (lane loop)
        Instr(Opcode.FLOW, flow=Flow.MAC, n3=n, g=g, a=0, a_s3=g, a_se=1, b=40, b_s3=1,
              b_se=2, d=100, d_s3=1),
        Instr(Opcode.FLOW, flow=Flow.EXP, n3=n, a=100, a_s3=1, d=110, d_s3=1),
        Instr(Opcode.FLOW, flow=Flow.DIV, n2=2, n3=2, a=0, a_s2=3, a_s3=1, b=41, b_s2=1,
              d=120, d_s2=2, d_s3=1),
        Instr(Opcode.ADD, sign=1, n3=n, a=100, a_s3=1, b=20, b_s3=-1, d=130, d_s3=1),
        Instr(Opcode.ADD, n1=2, n3=3, a=5, a_s1=3, a_s3=1, b=30, b_s1=1, d=135, d_s1=3,
              d_s3=1),
        Instr(Opcode.MAXR, n3=2, g=g, a=10, a_s3=g, a_se=1, d=140, d_s3=1),
        Instr(Opcode.MAXR, n1=5, g=1, a=0, a_s1=2, d=142, d_s1=1),
        Instr(Opcode.SELPOS, n3=6, a=0, a_s3=1, b=20, b_s3=1, d=150, d_s3=1),
        Instr(Opcode.FLOW, flow=Flow.ISQRT, n3=3, a=41, a_s3=1, d=160, d_s3=1),
        # outputs in the o1 loop only: one lane live per cycle
        Instr(Opcode.FLOW, flow=Flow.RECIP, n1=3, a=0, a_s1=1, d=163, d_s1=1),
        Instr(Opcode.FLOW, flow=Flow.MAC, n1=2, n2=2, n3=2, g=2, a=0, a_s1=8, a_s2=4,
              a_s3=2, a_se=1, b=63, d=170, d_s1=4, d_s2=2, d_s3=1),
        # 7 outputs over the lanes, a negative d stride
        Instr(Opcode.FLOW, flow=Flow.MAC, n3=7, g=3, a=1, a_s3=3, a_se=2, b=2, b_s3=1,
              b_se=1, d=186, d_s3=-1),
        Instr(Opcode.SEND, peer=1, n2=3, n3=2, a=100, a_s2=2, a_s3=1, d=5, d_s2=3, d_s3=1),
        # stationary operands: a over o2 (group of 3), b over o2 (group of 5: longer
        # than a 4-word register file, which must then run unheld), DIV's b
        Instr(Opcode.FLOW, flow=Flow.MAC, hold=Hold.A, n1=2, n2=3, n3=3, g=3, a=0, a_s1=9,
              a_s3=3, a_se=1, b=20, b_s1=1, b_s2=5, b_s3=2, b_se=1, d=192, d_s1=9, d_s2=3,
              d_s3=1),
        Instr(Opcode.FLOW, flow=Flow.MAC, hold=Hold.B, n2=4, n3=2, g=5, a=1, a_s2=5, a_s3=7,
              a_se=1, b=30, b_s3=5, b_se=1, d=210, d_s2=2, d_s3=1),
        Instr(Opcode.FLOW, flow=Flow.DIV, hold=Hold.B, n2=3, n3=2, a=0, a_s2=2, a_s3=1,
              b=41, b_s3=1, d=220, d_s2=2, d_s3=1),
        Instr(Opcode.HALT),
    ]


def _lane_words(mem, base, stride, mask, lanes):
    word = 0
    for i in range(lanes):
        if mask >> i & 1:
            word |= int(mem[(base + i * stride) & 0xFFFFFFFF]) << (32 * i)
    return word


def _signed(v, bits=24):
    # the stride ports are signed; a raw two's-complement value is accepted too
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


@pytest.mark.parametrize("pes,stall,hold_words,prefetch",
                         [(2, 0.0, 16, 4), (3, 0.4, 4, 2), (3, 0.2, 0, 0)])
def test_vault_compute_matches_executor(pes, stall, hold_words, prefetch):
    rng = random.Random(SEED + pes)
    print("seed", SEED + pes)
    cfg = load_config()
    pe_model = PEModel(cfg)
    dut = VaultCompute(pes=pes, imem_depth=32, pe_factory=lambda: pe_mod.from_config(cfg),
                       pe_latency=pe_mod.latency_from_config(cfg), hold_words=hold_words,
                       prefetch=prefetch)
    prog = _program(rng)
    nrng = np.random.default_rng(SEED)
    mem = np.zeros(232, np.uint32)
    vals = nrng.normal(0, 1.5, 64).astype(np.float32)
    vals[[3, 17, 22]] = [0.0, -0.0, 0.0]      # SELPOS and MAXR corners
    vals[41:44] = np.abs(vals[41:44]) + 0.1   # ISQRT of positives
    mem[:64] = vals.view(np.uint32)
    mem[63] = ONE_BITS
    peer = np.zeros(16, np.uint32)
    want = [mem.copy(), peer.copy()]
    execute([prog, [Instr(Opcode.HALT)]], want, pe_model)
    got = [mem.copy(), peer.copy()]
    counted = {}
    hints = []

    async def tb(ctx):
        for k, ins in enumerate(prog):
            ctx.set(dut.imem_we, 1)
            ctx.set(dut.imem_addr, k)
            ctx.set(dut.imem_data, encode(ins))
            await ctx.tick()
        ctx.set(dut.imem_we, 0)
        ctx.set(dut.go, 1)
        await ctx.tick()
        ctx.set(dut.go, 0)
        held = 0
        for cyc in range(3000):
            if ctx.get(dut.halted):
                counted["cycles"] = cyc
                break
            if ctx.get(dut.wr.en):
                base, st = ctx.get(dut.wr.addr), _signed(ctx.get(dut.wr.stride))
                mask, data = ctx.get(dut.wr.mask), ctx.get(dut.wr.data)
                for i in range(pes):
                    if mask >> i & 1:
                        got[0][base + i * st] = (data >> (32 * i)) & 0xFFFFFFFF
            if ctx.get(dut.send.valid):
                p = ctx.get(dut.send.peer)
                base, st = ctx.get(dut.send.addr), _signed(ctx.get(dut.send.stride))
                mask, data = ctx.get(dut.send.mask), ctx.get(dut.send.data)
                for i in range(pes):
                    if mask >> i & 1:
                        got[p][base + i * st] = (data >> (32 * i)) & 0xFFFFFFFF
            ready = int(rng.random() >= stall)
            ctx.set(dut.rd.ready, ready)
            if ctx.get(dut.pf.valid):
                assert prefetch, "a hint from a vault without prefetch"
                hints.append(tuple(ctx.get(getattr(dut.pf, f)) for f in OPERAND_FIELDS))
            assert len(hints) <= prefetch, "more hints outstanding than the prefetch depth"
            if prefetch and ctx.get(dut.rd.valid) and ready:
                got_rd = tuple(ctx.get(getattr(dut.rd, f)) for f in OPERAND_FIELDS)
                assert hints and hints.pop(0) == got_rd, "read bundle is not the oldest hint"
            if ctx.get(dut.rd.valid):
                mask = ctx.get(dut.rd.mask)
                assert mask and mask < (1 << pes)
                if ready:
                    ctx.set(dut.rd.a_data, _lane_words(got[0], ctx.get(dut.rd.a_addr),
                                                       _signed(ctx.get(dut.rd.a_stride)),
                                                       mask, pes))
                    ctx.set(dut.rd.b_data, _lane_words(got[0], ctx.get(dut.rd.b_addr),
                                                       _signed(ctx.get(dut.rd.b_stride)),
                                                       mask, pes))
                else:   # garbage on the data ports must not be taken
                    held += 1
                    ctx.set(dut.rd.a_data, rng.getrandbits(32 * pes))
                    ctx.set(dut.rd.b_data, rng.getrandbits(32 * pes))
            await ctx.tick()
        assert ctx.get(dut.halted), "program did not halt"
        counted["held"] = held

    simulate(dut, tb)
    for k in range(2):
        diff = np.nonzero(got[k] != want[k])[0]
        assert diff.size == 0, f"memory {k} differs at words {diff[:10]}"
    assert np.any(want[0][100:190] != 0) and np.any(want[1] != 0)
    assert np.all(want[0][192:218] != 0) and np.count_nonzero(want[0][220:226]) >= 5
    # The timing model: issue cycles + PE latency + 6 per instruction, 3 for HALT,
    # plus every cycle the memory held the bundle back.
    expect = sum(issue_cycles(i, pes) + dut.pe_latency + 6 for i in prog[:-1]) + 3
    if stall == 0:
        assert counted["held"] == 0
    else:
        assert counted["held"] > 0
    assert counted["cycles"] == expect + counted["held"]
