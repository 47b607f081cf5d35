"""A whole iPIM vault (control core, near-bank PEs, PGSMs, VSM) against the SIMB
instruction-set simulator: random multi-PE programs, every bank compared at the end.

The program's last part drains every PE's DataRF and AddrRF, every PGSM and the
VSM into the banks, so comparing the banks compares the whole architectural
state. Two masked PEs never write one scratchpad line in the same instruction
(the ISA leaves the winner unspecified): such writes go through per-PE pointers
(``A5 = p``, ``A6 = p + pes``) or name a single PE.
"""

import logging
import random

import pytest
from amaranth.sim import Simulator

from pimforge.gen.config import load_config
from pimforge.rtl.simb.isa import AluOp, DType, Instr, Mode, Opcode, encode
from pimforge.rtl.simb.vault import from_config
from pimforge.verif.models.simb_iss import SIMBMachine
from pimforge.verif.tb.simb_pe import fill_bank, lanes_of, vec_of

log = logging.getLogger(__name__)

SMALL = {"ipim.drf_bytes": 16 * 8, "ipim.arf_bytes": 16 * 4, "ipim.pgsm_bytes": 16 * 8,
         "ipim.vsm_bytes": 16 * 16, "ipim.bank_bytes": 16 * 1024, "ipim.row_bytes": 16 * 16,
         "ipim.inst_queue": 8, "ipim.dram_queue": 4, "ipim.imem_instructions": 256}


def _program(r: random.Random, c, n: int, span: int) -> list[Instr]:
    pes = c.pes
    every = (1 << pes) - 1
    P = [Instr(Opcode.LD_RF, dram=0, drf=0, simb_mask=every),       # [ppg, pes, 0, 0]
         Instr(Opcode.MOV_ARF, arf=4, drf=0, lane=0, simb_mask=every),
         Instr(Opcode.MOV_ARF, arf=7, drf=0, lane=1, simb_mask=every),
         Instr(Opcode.CALC_ARF, op=AluOp.MUL, dst=5, src1=1, src2=4, simb_mask=every),
         Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=5, src1=5, src2=0, simb_mask=every),
         Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=6, src1=5, src2=7, simb_mask=every)]
    ptrs = (5, 6)
    free_arf = list(range(8, c.arf_entries))

    def mask():
        return r.randrange(1, every + 1)

    def one():
        return 1 << r.randrange(pes)

    def drf():
        return r.randrange(c.drf_entries)

    def spm(lines, write):
        """(address, ind, mask) of a scratchpad access; writes never collide."""
        if r.random() < 0.5:
            return r.choice(ptrs), 1, mask()
        return r.randrange(lines), 0, one() if write else mask()

    for _ in range(n):
        op = r.choice([Opcode.COMP] * 6 + [Opcode.LD_RF] * 2 + [Opcode.ST_RF] * 2 + [
            Opcode.CALC_ARF, Opcode.LD_PGSM, Opcode.ST_PGSM, Opcode.RD_PGSM, Opcode.WR_PGSM,
            Opcode.RD_VSM, Opcode.WR_VSM, Opcode.MOV_DRF, Opcode.MOV_ARF, Opcode.RESET,
            Opcode.SETI_VSM, Opcode.SETI_CRF, Opcode.CALC_CRF, Opcode.NOP])
        if op is Opcode.COMP:
            dt = r.choice([DType.FP32, DType.INT32])
            ops = sorted(AluOp if dt is DType.INT32 else
                         [AluOp.ADD, AluOp.SUB, AluOp.MUL, AluOp.MAC, AluOp.SHIFT],
                         key=lambda o: o.value)
            P.append(Instr(op, op=r.choice(ops), dtype=dt, mode=r.choice([Mode.VV, Mode.SV]),
                           lane=r.randrange(4), dst=drf(), src1=drf(), src2=drf(),
                           vec_mask=r.choice([0xF, r.randrange(16)]), simb_mask=mask()))
        elif op is Opcode.CALC_ARF:
            alu = r.choice(sorted(set(AluOp) - {AluOp.MAC}, key=lambda o: o.value))
            P.append(Instr(op, op=alu, dst=r.choice(free_arf), src1=r.randrange(c.arf_entries),
                           src2=r.randrange(c.arf_entries), simb_mask=mask()))
        elif op in (Opcode.LD_RF, Opcode.ST_RF):
            a, i = (r.randrange(1, span), 0) if r.random() < 0.8 else (r.choice(ptrs), 1)
            if i == 0 or op is Opcode.LD_RF:
                P.append(Instr(op, dram=a, dram_ind=i, drf=drf(), simb_mask=mask()))
            else:                      # p and p + pes: store beside, not over, vector 0
                P.append(Instr(op, dram=a, dram_ind=i, drf=drf(), simb_mask=mask() & ~1))
        elif op in (Opcode.LD_PGSM, Opcode.ST_PGSM):
            p, pi, m = spm(c.pgsm_lines, op is Opcode.LD_PGSM)
            P.append(Instr(op, dram=r.randrange(1, span), pgsm=p, pgsm_ind=pi, simb_mask=m))
        elif op in (Opcode.RD_PGSM, Opcode.WR_PGSM):
            p, pi, m = spm(c.pgsm_lines, op is Opcode.WR_PGSM)
            P.append(Instr(op, pgsm=p, pgsm_ind=pi, drf=drf(), simb_mask=m))
        elif op in (Opcode.RD_VSM, Opcode.WR_VSM):
            p, pi, m = spm(c.vsm_lines, op is Opcode.WR_VSM)
            P.append(Instr(op, vsm=p, vsm_ind=pi, drf=drf(), simb_mask=m))
        elif op is Opcode.MOV_DRF:
            P.append(Instr(op, arf=r.randrange(c.arf_entries), drf=drf(), lane=r.randrange(4),
                           simb_mask=mask()))
        elif op is Opcode.MOV_ARF:
            P.append(Instr(op, arf=r.choice(free_arf), drf=drf(), lane=r.randrange(4),
                           simb_mask=mask()))
        elif op is Opcode.RESET:
            P.append(Instr(op, drf=drf(), simb_mask=mask()))
        elif op is Opcode.SETI_VSM:
            P.append(Instr(op, vsm=r.randrange(c.vsm_lines), imm=r.getrandbits(32),
                           vec_mask=r.randrange(16)))
        elif op is Opcode.SETI_CRF:
            P.append(Instr(op, dst=r.randrange(c.crf_entries), imm=r.getrandbits(32)))
        elif op is Opcode.CALC_CRF:
            alu = r.choice(sorted(set(AluOp) - {AluOp.MAC}, key=lambda o: o.value))
            P.append(Instr(op, op=alu, dst=r.randrange(c.crf_entries),
                           src1=r.randrange(c.crf_entries), src2=r.randrange(c.crf_entries)))
        else:
            P.append(Instr(op))
    return P


def _drain(c, base: int) -> list[Instr]:
    """Every PE's DataRF and AddrRF, then (by PE 0 of each PG) its PGSM and (by PE 0)
    the VSM, into the banks from *base*."""
    every = (1 << c.pes) - 1
    first = sum(1 << (g * c.pes_per_pg) for g in range(c.pgs))
    P = [Instr(Opcode.ST_RF, dram=base + i, drf=i, simb_mask=every)
         for i in range(c.drf_entries)]
    b = base + c.drf_entries
    for j in range(c.arf_entries // 4):
        P += [Instr(Opcode.MOV_DRF, arf=4 * j + k, drf=0, lane=k, simb_mask=every)
              for k in range(4)]
        P.append(Instr(Opcode.ST_RF, dram=b + j, drf=0, simb_mask=every))
    b += c.arf_entries // 4
    P += [Instr(Opcode.ST_PGSM, dram=b + k, pgsm=k, simb_mask=first)
          for k in range(c.pgsm_lines)]
    b += c.pgsm_lines
    for k in range(c.vsm_lines):
        P += [Instr(Opcode.RD_VSM, vsm=k, drf=1, simb_mask=1),
              Instr(Opcode.ST_RF, dram=b + k, drf=1, simb_mask=1)]
    return P + [Instr(Opcode.HALT)]


def _run_rtl(cfg, prog, banks, limit):
    vault = from_config(cfg)
    c = cfg.ipim
    sim = Simulator(vault)
    sim.add_clock(1e-9)
    banks = [dict(b) for b in banks]
    out = {}

    async def tb(ctx):
        for a, ins in enumerate(prog):
            ctx.set(vault.imem_we, 1)
            ctx.set(vault.imem_addr, a)
            ctx.set(vault.imem_data, encode(ins))
            await ctx.tick()
        ctx.set(vault.imem_we, 0)
        ctx.set(vault.start, 1)
        await ctx.tick()
        ctx.set(vault.start, 0)
        pending = [None] * c.pes
        mask = c.bank_vectors - 1
        for _ in range(limit):
            if ctx.get(vault.halted):
                break
            for p in range(c.pes):
                arr = vault.pe_arr[p]
                # The DRAM array of PE p's bank: a one-cycle synchronous read.
                ctx.set(arr.rdata, pending[p] or 0)
                pending[p] = None
                addr = ctx.get(arr.addr) & mask
                if ctx.get(arr.re):
                    pending[p] = banks[p].get(addr, 0)
                if ctx.get(arr.we):
                    banks[p][addr] = ctx.get(arr.wdata)
            await ctx.tick()
        else:
            raise AssertionError(f"the vault did not halt in {limit} cycles")
        out["cycles"] = ctx.get(vault.perf.cycles)
        out["issued"] = ctx.get(vault.perf.issued)

    sim.add_testbench(tb)
    sim.run()
    return banks, out


@pytest.mark.parametrize("seed", [11, 12])
def test_vault_matches_the_iss(seed):
    r = random.Random(seed)
    log.info("seed %d", seed)
    print(f"seed {seed}")
    cfg = load_config("ipim_small", SMALL)
    c = cfg.ipim
    span = 64
    banks = []
    for _ in range(c.pes):
        b = fill_bank(r, span)
        b[0] = vec_of([c.pes_per_pg, c.pes, 0, 0])
        banks.append(b)
    prog = _program(r, c, 70, span) + _drain(c, 128)
    assert len(prog) <= c.imem_instructions
    got, out = _run_rtl(cfg, prog, banks, 30000)
    m = SIMBMachine(cfg)
    for p in range(c.pes):
        for a, x in banks[p].items():
            m.write_bank(0, p, a, lanes_of(x))
    m.load(prog, vaults=[0])
    m.run()
    bad = []
    for p in range(c.pes):
        exp = {a: vec_of([int(v) for v in x]) for a, x in m.vaults[0].banks[p].items()}
        for a in sorted(set(exp) | set(got[p])):
            if exp.get(a, 0) != got[p].get(a, 0):
                bad.append(f"PE {p} bank[{a}] = {got[p].get(a, 0):#034x}, ISS "
                           f"{exp.get(a, 0):#034x}")
    print(out, "IPC", out["issued"] / out["cycles"])
    assert not bad, "\n".join(bad[:20])
    assert out["issued"] == len(prog)


def test_vault_partial_mask_directed():
    """A load on every PE, an add on PEs 1 and 2 only, a store on every PE: exact words."""
    cfg = load_config("ipim_small", SMALL)
    c = cfg.ipim
    banks = [{0: vec_of([c.pes_per_pg, c.pes, 0, 0]), 1: vec_of([1, 2, 3, 4])}
             for _ in range(c.pes)]
    prog = [Instr(Opcode.LD_RF, dram=1, drf=2, simb_mask=0b1111),
            Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, dst=3, src1=2, src2=2,
                  simb_mask=0b0110),
            Instr(Opcode.ST_RF, dram=9, drf=3, simb_mask=0b1111), Instr(Opcode.HALT)]
    got, _ = _run_rtl(cfg, prog, banks, 3000)
    assert [lanes_of(got[p][9]) for p in range(c.pes)] == [
        [0] * 4, [2, 4, 6, 8], [2, 4, 6, 8], [0] * 4]
