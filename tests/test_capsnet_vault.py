"""The vault compute RTL (operation controller + PEs) against the ISA-level executor.

Amaranth-simulator test (no Verilator build): a program using every opcode runs
on a 2-PE vault whose operand memory is served by the testbench, and the
memory afterwards must equal the executor's bit for bit (sends go to a second
memory image).
"""

import random

import numpy as np
from amaranth.sim import Simulator

from pimforge.gen.config import load_config
from pimforge.rtl.capsnet import pe as pe_mod
from pimforge.rtl.capsnet.isa import Instr, Opcode, encode
from pimforge.rtl.capsnet.pe import Flow
from pimforge.rtl.capsnet.vault import VaultCompute
from pimforge.verif.models.capsnet_isa import ONE_BITS, execute
from pimforge.verif.models.capsnet_pe import PEModel

SEED = 4242


def _program(rng: random.Random) -> list[Instr]:
    n = rng.randint(2, 4)
    g = rng.randint(1, 5)
    return [
        # MAC groups of g over rows of a 2-D block, one output per row
        Instr(Opcode.FLOW, flow=Flow.MAC, n1=n, g=g, a=0, a_s1=g, a_se=1, b=40, b_s1=1,
              b_se=2, d=100, d_s1=1),
        Instr(Opcode.FLOW, flow=Flow.EXP, n1=n, a=100, a_s1=1, d=110, d_s1=1),
        Instr(Opcode.FLOW, flow=Flow.DIV, n1=2, n2=2, a=0, a_s1=3, a_s2=1, b=41, b_s1=1,
              d=120, d_s1=2, d_s2=1),
        Instr(Opcode.ADD, sign=1, n1=n, a=100, a_s1=1, b=20, b_s1=-1, d=130, d_s1=1),
        Instr(Opcode.MAXR, n1=2, g=g, a=10, a_s1=g, a_se=1, d=140, d_s1=1),
        Instr(Opcode.SELPOS, n1=6, a=0, a_s1=1, b=20, b_s1=1, d=150, d_s1=1),
        Instr(Opcode.FLOW, flow=Flow.ISQRT, n1=3, a=41, a_s1=1, d=160, d_s1=1),
        Instr(Opcode.FLOW, flow=Flow.RECIP, n1=3, a=0, a_s1=1, d=163, d_s1=1),
        Instr(Opcode.FLOW, flow=Flow.MAC, n1=2, n2=2, n3=2, g=2, a=0, a_s1=8, a_s2=4,
              a_s3=2, a_se=1, b=63, d=170, d_s1=4, d_s2=2, d_s3=1),
        Instr(Opcode.SEND, peer=1, n1=3, g=2, a=100, a_s1=2, a_se=1, d=5, d_s1=3, d_se=1),
        Instr(Opcode.HALT),
    ]


def test_vault_compute_matches_executor():
    rng = random.Random(SEED)
    print("seed", SEED)
    cfg = load_config()
    pe_model = PEModel(cfg)
    proto = pe_mod.from_config(cfg)
    proto._MustUse__silence = True
    dut = VaultCompute(pes=2, imem_depth=16, pe_factory=lambda: pe_mod.from_config(cfg),
                       pe_latency=proto.latency)
    prog = _program(rng)
    nrng = np.random.default_rng(SEED)
    mem = np.zeros(192, np.uint32)
    vals = nrng.normal(0, 1.5, 64).astype(np.float32)
    vals[[3, 17, 22]] = [0.0, -0.0, 0.0]      # SELPOS and MAXR corners
    vals[41:44] = np.abs(vals[41:44]) + 0.1   # ISQRT of positives
    mem[:64] = vals.view(np.uint32)
    mem[63] = ONE_BITS
    peer = np.zeros(16, np.uint32)
    want = [mem.copy(), peer.copy()]
    execute([prog, [Instr(Opcode.HALT)]], want, pe_model)
    got = [mem.copy(), peer.copy()]

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
        for _ in range(2000):
            if ctx.get(dut.halted):
                break
            if ctx.get(dut.rd_en):
                ctx.set(dut.rd_a_data, int(got[0][ctx.get(dut.rd_a_addr)]))
                ctx.set(dut.rd_b_data, int(got[0][ctx.get(dut.rd_b_addr)]))
            if ctx.get(dut.wr_en):
                got[0][ctx.get(dut.wr_addr)] = ctx.get(dut.wr_data)
            if ctx.get(dut.send_valid):
                got[ctx.get(dut.send_peer)][ctx.get(dut.send_addr)] = ctx.get(dut.send_data)
            await ctx.tick()
        assert ctx.get(dut.halted), "program did not halt"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    for k in range(2):
        diff = np.nonzero(got[k] != want[k])[0]
        assert diff.size == 0, f"memory {k} differs at words {diff[:10]}"
    assert np.any(want[0][100:180] != 0)
