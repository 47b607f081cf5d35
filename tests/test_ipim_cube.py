"""The iPIM cube (vaults, NICs, mesh, barrier) on Verilator with the native driver, against
the SIMB instruction-set simulator: ``req`` across the mesh, ``sync`` across the vaults,
random multi-vault programs compared bank by bank.

One Verilator build of the ``ipim_small``-shaped cube (4 vaults on a 2x2 mesh, 2 PGs x 2
PEs) serves every test of the module.
"""

import logging
import random

import pytest

from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import SimulationError
from pimforge.rtl.simb.isa import AluOp, DType, Instr, Opcode
from pimforge.sim import verilator as vl
from pimforge.sim.ipim.rtl_run import build_cube_driver, run_cube
from pimforge.verif.models.simb_iss import SIMBMachine
from pimforge.verif.tb.simb_pe import fill_bank, lanes_of, vec_of
from pimforge.verif.tb.simb_programs import drain_vault, random_vault_program

log = logging.getLogger(__name__)

SMALL = {"ipim.drf_bytes": 16 * 8, "ipim.arf_bytes": 16 * 4, "ipim.pgsm_bytes": 16 * 8,
         "ipim.vsm_bytes": 16 * 16, "ipim.bank_bytes": 16 * 1024, "ipim.row_bytes": 16 * 16,
         "ipim.inst_queue": 8, "ipim.dram_queue": 4, "ipim.imem_instructions": 1024}


@pytest.fixture(scope="module")
def cfg():
    return load_config("ipim_small", SMALL)


@pytest.fixture(scope="module")
def exe(cfg):
    return build_cube_driver(cfg)


def _iss(cfg, programs, banks):
    m = SIMBMachine(cfg)
    for (v, p), b in banks.items():
        for a, x in b.items():
            m.write_bank(v, p, a, lanes_of(x))
    for v, prog in programs.items():
        m.load(prog, vaults=[v])
    m.load([Instr(Opcode.HALT)], vaults=[v for v in range(cfg.ipim.vaults)
                                         if v not in programs])
    m.run()
    return {(v, p): {a: vec_of([int(x) for x in row]) for a, row in bank.items()
                     if row.any()}
            for v, vault in enumerate(m.vaults) for p, bank in enumerate(vault.banks)}


def _diff(got, exp) -> list[str]:
    bad = []
    for k in sorted(set(got) | set(exp)):
        g, e = got.get(k, {}), exp.get(k, {})
        for a in sorted(set(g) | set(e)):
            if g.get(a, 0) != e.get(a, 0):
                bad.append(f"vault {k[0]} PE {k[1]} bank[{a}] = {g.get(a, 0):#034x}, ISS "
                           f"{e.get(a, 0):#034x}")
    return bad


def test_cube_generates_and_lints(cfg, tmp_path):
    el = elaborate("ipim_cube", cfg)
    assert el.manifest["latencies"]["nic_reply_flits"] >= 2
    # One module per kind of block, whatever the number of vaults.
    assert sum(m.startswith("simb_vault") for m in el.manifest["modules"]) == 1
    assert sum(m.startswith("simb_nic") for m in el.manifest["modules"]) == 1
    path = tmp_path / "ipim_cube.v"
    path.write_text(el.verilog)
    vl.lint(path, el.top)


def test_req_reads_every_pe_of_every_vault(cfg, exe):
    """Each vault fetches one vector from every PE of every vault (itself included) into
    its VSM, then stores them in its PE 0's bank: exact words, the ISS agrees."""
    c = cfg.ipim
    V, P = c.vaults, c.pes
    banks = {(v, p): {3: vec_of([v, p, 0xC0DE, 7 * v + p])} for v in range(V)
             for p in range(P)}
    programs = {}
    for v in range(V):
        prog = [Instr(Opcode.SYNC, phase=1)]
        for k in range(V * P):
            u, p = divmod((k + v * P) % (V * P), P)     # start at a different vault each
            prog.append(Instr(Opcode.REQ, chip=0, vault=u, pg=p // c.pes_per_pg,
                              pe=p % c.pes_per_pg, dram=3, vsm=k))
        prog.append(Instr(Opcode.SYNC, phase=2))
        for k in range(V * P):
            prog += [Instr(Opcode.RD_VSM, vsm=k, drf=1, simb_mask=1),
                     Instr(Opcode.ST_RF, dram=100 + k, drf=1, simb_mask=1)]
        programs[v] = prog + [Instr(Opcode.HALT)]
    run = run_cube(cfg, programs, banks, exe=exe, max_cycles=50_000)
    for v in range(V):
        for k in range(V * P):
            u, p = divmod((k + v * P) % (V * P), P)
            assert lanes_of(run.banks[(v, 0)][100 + k]) == [u, p, 0xC0DE, 7 * u + p], (v, k)
    assert not _diff(run.banks, _iss(cfg, programs, banks))
    assert run.nic["sent"] == [V * P] * V
    assert run.nic["served"] == [V * P] * V
    assert run.nic["received"] == [V * P] * V
    assert sum(run.pe["remote"]) == V * V * P
    assert run.barriers == 2
    assert run.core["issued_req"] == [V * P] * V


def test_sync_orders_writes_before_remote_reads(cfg, exe):
    """Vault 0 computes a value late (a chain of dependent adds) and stores it; the other
    vaults read it with req after a sync: they must see the new value, never the old
    one (a barrier that let them through early would fail)."""
    c = cfg.ipim
    old = vec_of([1, 1, 1, 1])
    banks = {(0, 0): {5: old, 6: vec_of([2, 2, 2, 2])}}
    slow = [Instr(Opcode.LD_RF, dram=5, drf=0, simb_mask=1),
            Instr(Opcode.LD_RF, dram=6, drf=1, simb_mask=1)]
    slow += [Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, dst=0, src1=0, src2=1,
                   vec_mask=0xF, simb_mask=1) for _ in range(40)]
    slow += [Instr(Opcode.ST_RF, dram=5, drf=0, simb_mask=1)]
    programs = {0: slow + [Instr(Opcode.SYNC, phase=7), Instr(Opcode.HALT)]}
    for v in range(1, c.vaults):
        programs[v] = [Instr(Opcode.SYNC, phase=7),
                       Instr(Opcode.REQ, chip=0, vault=0, pg=0, pe=0, dram=5, vsm=2),
                       Instr(Opcode.SYNC, phase=8),
                       Instr(Opcode.RD_VSM, vsm=2, drf=3, simb_mask=1),
                       Instr(Opcode.ST_RF, dram=9, drf=3, simb_mask=1),
                       Instr(Opcode.HALT)]
    run = run_cube(cfg, programs, banks, exe=exe, max_cycles=50_000)
    for v in range(1, c.vaults):
        assert lanes_of(run.banks[(v, 0)][9]) == [81] * 4, v
    assert not _diff(run.banks, _iss(cfg, programs, banks))


@pytest.mark.parametrize("seed", [21, 22])
def test_random_cube_programs_match_the_iss(cfg, exe, seed):
    """Random local program segments on every vault, each followed by a sync, a burst of
    req to random PEs of random vaults (reads of vectors no vault writes until the next
    sync: race-free) and another sync; then every vault drains its state into its banks.
    The whole cube's banks equal the ISS's."""
    r = random.Random(seed)
    log.info("seed %d", seed)
    print(f"seed {seed}")
    c = cfg.ipim
    span = 48
    banks = {}
    for v in range(c.vaults):
        for p in range(c.pes):
            b = fill_bank(r, span)
            b[0] = vec_of([c.pes_per_pg, c.pes, 0, 0])
            banks[(v, p)] = b
    programs = {}
    for v in range(c.vaults):
        prog = random_vault_program(r, c, 25, span)
        phase = 1
        for _ in range(3):
            prog += [Instr(Opcode.SYNC, phase=phase)]
            lines = r.sample(range(c.vsm_lines), 6)
            prog += [Instr(Opcode.REQ, chip=0, vault=r.randrange(c.vaults),
                           pg=r.randrange(c.pgs), pe=r.randrange(c.pes_per_pg),
                           dram=r.randrange(span), vsm=k) for k in lines]
            prog += [Instr(Opcode.SYNC, phase=phase + 1)]
            # The next local segment reads what came in (the VSM is in its reach).
            prog += random_vault_program(r, c, 20, span)[6:]
            phase += 2
        programs[v] = prog + drain_vault(c, 128)
    run = run_cube(cfg, programs, banks, exe=exe, max_cycles=400_000, bare=True)
    bad = _diff(run.banks, _iss(cfg, programs, banks))
    log.info("%d cycles, IPC %.3f, %.0f cycles/s (bare loop %.0f)", run.cycles, run.ipc,
             run.cycles_per_s, run.bare_cycles_per_s)
    assert not bad, "\n".join(bad[:20])
    assert run.core["issued"] == [len(p) for p in programs.values()]
    assert sum(run.nic["served"]) == 3 * 6 * c.vaults
    assert run.barriers == 6
    assert run.bare_cycles_per_s > 0


def test_mismatched_sync_phases_are_reported(cfg, exe):
    programs = {0: [Instr(Opcode.SYNC, phase=1), Instr(Opcode.HALT)],
                1: [Instr(Opcode.SYNC, phase=2), Instr(Opcode.HALT)]}
    with pytest.raises(SimulationError, match="different phases"):
        run_cube(cfg, programs, {}, exe=exe, max_cycles=10_000)


def test_req_to_a_missing_vault_is_reported(cfg, exe):
    programs = {0: [Instr(Opcode.REQ, chip=1, vault=0, pg=0, pe=0, dram=0, vsm=0),
                    Instr(Opcode.HALT)]}
    with pytest.raises(SimulationError, match="cube, vault or PE"):
        run_cube(cfg, programs, {}, exe=exe, max_cycles=2_000)
