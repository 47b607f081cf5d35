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

from pimforge.gen.config import load_config
from pimforge.rtl.ipim.isa import AluOp, DType, Instr, Opcode
from pimforge.rtl.ipim.vault import from_config
from pimforge.verif.models.ipim.iss import SIMBMachine
from pimforge.verif.tb.amaranth_sim import simulate
from pimforge.verif.tb.ipim.pe import fill_bank, lanes_of, vec_of
from pimforge.verif.tb.ipim.programs import (
    SMALL_VAULT,
    drain_vault,
    load_and_start,
    random_vault_program,
)

log = logging.getLogger(__name__)

SMALL = SMALL_VAULT   # shared with the other vault tests


def _run_rtl(cfg, prog, banks, limit):
    vault = from_config(cfg)
    c = cfg.ipim
    banks = [dict(b) for b in banks]
    out = {}

    async def tb(ctx):
        await load_and_start(ctx, vault, prog)
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

    simulate(vault, tb, period=1e-9)
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
    prog = random_vault_program(r, c, 70, span) + drain_vault(c, 128)
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
