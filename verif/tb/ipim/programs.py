"""SIMB programs for whole vaults and cubes, shared by the vault and cube tests (pytest
and cocotb), and the comparison of their banks with the instruction-set simulator.

Each program's state can be compared with the instruction-set simulator's bank by
bank: :func:`drain_vault` stores every DataRF, AddrRF, PGSM and the VSM into the
banks before the ``halt``.
"""

from __future__ import annotations

import random

from pimforge.rtl.ipim.isa import AluOp, DType, Instr, Mode, Opcode, encode

from ...models.ipim.iss import SIMBMachine

__all__ = ["random_vault_program", "drain_vault", "req_all_to_all", "sync_then_req",
           "iss_banks", "bank_diff"]


#: A vault small enough for Amaranth's simulator (2 PGs x 4 PEs on the ``ipim_small``
#: preset): scratchpads and banks shrunk, an 8-slot issued-instruction queue, a 4-slot
#: DRAM queue and a 256-instruction program memory.
SMALL_VAULT = {"ipim.drf_bytes": 16 * 8, "ipim.arf_bytes": 16 * 4, "ipim.pgsm_bytes": 16 * 8,
               "ipim.vsm_bytes": 16 * 16, "ipim.bank_bytes": 16 * 1024,
               "ipim.row_bytes": 16 * 16, "ipim.inst_queue": 8, "ipim.dram_queue": 4,
               "ipim.imem_instructions": 256}


async def load_and_start(ctx, vault, program: list[Instr]) -> None:
    """Write *program* into *vault*'s instruction memory, one word per cycle through its
    ``imem_*`` port, then pulse ``start`` (an Amaranth testbench's *ctx*)."""
    for a, ins in enumerate(program):
        ctx.set(vault.imem_we, 1)
        ctx.set(vault.imem_addr, a)
        ctx.set(vault.imem_data, encode(ins))
        await ctx.tick()
    ctx.set(vault.imem_we, 0)
    ctx.set(vault.start, 1)
    await ctx.tick()
    ctx.set(vault.start, 0)


def random_vault_program(r: random.Random, c, n: int, span: int) -> list[Instr]:
    """A random program of *n* instructions (after a 6-instruction prologue) for one vault
    of config section *c* (``cfg.ipim``): every opcode but ``req``, ``sync``, jumps and
    ``halt``, random simb_mask/vec_mask, direct and indirect addresses.

    The prologue loads bank vector 0 of each PE, which must hold ``[pes_per_pg, pes, 0,
    0]``, and sets the per-PE pointers ``A5 = p`` and ``A6 = p + pes``; masked PEs
    never write one scratchpad line in the same instruction (the ISA leaves the
    winner unspecified): such writes go through those pointers or name one PE. Bank
    addresses are below *span* (vector 0 is never written).
    """
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


def drain_vault(c, base: int) -> list[Instr]:
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


# ---- cube programs: req across the mesh, sync across the vaults ---------------------------

def req_all_to_all(c) -> tuple[dict, dict, dict]:
    """Each vault of a cube (config section *c*) fetches bank vector 3 of every PE of
    every vault, itself included, into its VSM (each vault starting at a different
    vault), then stores them in its PE 0's bank from vector 100.

    Returns
    -------
    programs, banks, expected
        ``{vault: program}``; ``{(vault, pe): {addr: vector}}``; ``{(vault, addr):
        vector}`` that PE 0 of each vault must hold afterwards.
    """
    V, P = c.vaults, c.pes
    banks = {(v, p): {3: _vec([v, p, 0xC0DE, 7 * v + p])} for v in range(V)
             for p in range(P)}
    programs, expected = {}, {}
    for v in range(V):
        prog = [Instr(Opcode.SYNC, phase=1)]
        for k in range(V * P):
            u, p = divmod((k + v * P) % (V * P), P)
            prog.append(Instr(Opcode.REQ, chip=0, vault=u, pg=p // c.pes_per_pg,
                              pe=p % c.pes_per_pg, dram=3, vsm=k))
            expected[(v, 100 + k)] = _vec([u, p, 0xC0DE, 7 * u + p])
        prog.append(Instr(Opcode.SYNC, phase=2))
        for k in range(V * P):
            prog += [Instr(Opcode.RD_VSM, vsm=k, drf=1, simb_mask=1),
                     Instr(Opcode.ST_RF, dram=100 + k, drf=1, simb_mask=1)]
        programs[v] = prog + [Instr(Opcode.HALT)]
    return programs, banks, expected


def sync_then_req(c, adds: int = 40) -> tuple[dict, dict, dict]:
    """Vault 0 computes a value late (*adds* dependent INT32 adds of 2 onto 1) and
    stores it over the old one; the other vaults read it with ``req`` after a ``sync``
    and store it at vector 9 of their PE 0: a barrier that let them through early
    would give them the old value. Same returns as :func:`req_all_to_all`."""
    banks = {(0, 0): {5: _vec([1, 1, 1, 1]), 6: _vec([2, 2, 2, 2])}}
    slow = [Instr(Opcode.LD_RF, dram=5, drf=0, simb_mask=1),
            Instr(Opcode.LD_RF, dram=6, drf=1, simb_mask=1)]
    slow += [Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, dst=0, src1=0, src2=1,
                   vec_mask=0xF, simb_mask=1) for _ in range(adds)]
    slow += [Instr(Opcode.ST_RF, dram=5, drf=0, simb_mask=1)]
    programs = {0: slow + [Instr(Opcode.SYNC, phase=7), Instr(Opcode.HALT)]}
    expected = {}
    for v in range(1, c.vaults):
        programs[v] = [Instr(Opcode.SYNC, phase=7),
                       Instr(Opcode.REQ, chip=0, vault=0, pg=0, pe=0, dram=5, vsm=2),
                       Instr(Opcode.SYNC, phase=8),
                       Instr(Opcode.RD_VSM, vsm=2, drf=3, simb_mask=1),
                       Instr(Opcode.ST_RF, dram=9, drf=3, simb_mask=1),
                       Instr(Opcode.HALT)]
        expected[(v, 9)] = _vec([1 + 2 * adds] * 4)
    return programs, banks, expected


def iss_banks(cfg, programs: dict, banks: dict) -> dict:
    """The banks after *programs* (``{vault: program}``, the other vaults halt at once)
    run on the instruction-set simulator of *cfg*'s first cube from *banks*; the same
    form as *banks*, nonzero vectors only."""
    m = SIMBMachine(cfg)
    for (v, p), b in banks.items():
        for a, x in b.items():
            m.write_bank(v, p, a, [(x >> (32 * k)) & 0xFFFFFFFF for k in range(4)])
    for v, prog in programs.items():
        m.load(prog, vaults=[v])
    m.load([Instr(Opcode.HALT)], vaults=[v for v in range(len(m.vaults)) if v not in programs])
    m.run()
    return {(v, p): {a: _vec([int(x) for x in row]) for a, row in bank.items() if row.any()}
            for v, vault in enumerate(m.vaults) for p, bank in enumerate(vault.banks)}


def bank_diff(got: dict, exp: dict) -> list[str]:
    """Every vector where two sets of banks (as :func:`iss_banks` gives) differ."""
    bad = []
    for k in sorted(set(got) | set(exp)):
        g, e = got.get(k, {}), exp.get(k, {})
        for a in sorted(set(g) | set(e)):
            if g.get(a, 0) != e.get(a, 0):
                bad.append(f"vault {k[0]} PE {k[1]} bank[{a}] = {g.get(a, 0):#034x}, ISS "
                           f"{e.get(a, 0):#034x}")
    return bad


def _vec(lanes) -> int:
    return sum((int(x) & 0xFFFFFFFF) << (32 * i) for i, x in enumerate(lanes))
