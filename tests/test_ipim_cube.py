"""The iPIM cube (vaults, NICs, mesh, barrier) on Verilator with the native driver, against
the SIMB instruction-set simulator: ``req`` across the mesh, ``sync`` across the vaults,
random multi-vault programs compared bank by bank.

One Verilator build of the ``ipim_small`` cube (4 vaults on a 2x2 mesh, 2 PGs x 2 PEs)
serves every test of the module and of tests/test_ipim_image_rtl.py.
"""

import logging
import random

import pytest

from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate
from pimforge.gen.errors import SimulationError
from pimforge.rtl.ipim.isa import Instr, Opcode
from pimforge.sim.ipim.rtl_run import build_cube_driver, run_cube
from pimforge.verif.tb.ipim.pe import fill_bank, lanes_of, vec_of
from pimforge.verif.tb.ipim.programs import (
    bank_diff,
    drain_vault,
    iss_banks,
    random_vault_program,
    req_all_to_all,
    sync_then_req,
)

log = logging.getLogger(__name__)

@pytest.fixture(scope="module")
def cfg():
    # the preset itself, so that tests/test_ipim_image_rtl.py shares the Verilator build
    return load_config("ipim_small")


@pytest.fixture(scope="module")
def exe(cfg):
    return build_cube_driver(cfg)


def test_cube_is_one_module_per_kind_of_block(cfg):
    """Every vault, NIC and router is one Verilog module, whatever the number of vaults
    (the cube's lint runs in tests/test_cli.py with every block and preset)."""
    el = elaborate("ipim_cube", cfg)
    assert el.manifest["latencies"]["nic_reply_flits"] >= 2
    for kind in ("simb_vault", "simb_nic", "simb_pe", "noc_router"):
        assert sum(m.startswith(kind) for m in el.manifest["modules"]) == 1, kind


def test_req_reads_every_pe_of_every_vault(cfg, exe):
    """Each vault fetches one vector from every PE of every vault (itself included) into
    its VSM, then stores them in its PE 0's bank: exact words, the ISS agrees."""
    c = cfg.ipim
    V, P = c.vaults, c.pes
    programs, banks, expected = req_all_to_all(c)
    run = run_cube(cfg, programs, banks, exe=exe, max_cycles=50_000)
    for (v, a), x in expected.items():
        assert run.banks[(v, 0)][a] == x, (v, a)
    assert not bank_diff(run.banks, iss_banks(cfg, programs, banks))
    assert run.nic["sent"] == [V * P] * V
    assert run.nic["served"] == [V * P] * V
    assert run.nic["received"] == [V * P] * V
    assert sum(run.pe["remote"]) == V * V * P
    assert run.barriers == 2
    assert run.core["issued_req"] == [V * P] * V


def test_sync_orders_writes_before_remote_reads(cfg, exe):
    """Vault 0 computes a value late and stores it; the other vaults read it with req
    after a sync: they must see the new value, never the old one."""
    programs, banks, expected = sync_then_req(cfg.ipim)
    run = run_cube(cfg, programs, banks, exe=exe, max_cycles=50_000)
    for (v, a), x in expected.items():
        assert run.banks[(v, 0)][a] == x, (v, lanes_of(run.banks[(v, 0)].get(a, 0)))
    assert not bank_diff(run.banks, iss_banks(cfg, programs, banks))


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
    bad = bank_diff(run.banks, iss_banks(cfg, programs, banks))
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
