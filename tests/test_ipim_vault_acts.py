"""The ACTs of a whole iPIM vault against the power limits of each PG's DRAM die:
tRRDS between any two ACTs of a PG, tRRDL within a bank group, tFAW over the PG.

Every PE's DRAM commands are read off the vault's forwarded ``pe_cmd`` ports. The
programs make every PE of a PG open a row at the same time (``ld_rf``/``st_rf``
on every PE to another row, over and over), mixed with random vault programs; the
banks at the end are compared with the SIMB instruction-set simulator. The same
check is run on the vault built without its ACT windows, where it must fail.
"""

import logging
import math
import random

import pytest

from pimforge.gen.config import load_config
from pimforge.rtl.ipim.isa import Instr, Opcode
from pimforge.rtl.ipim.vault import from_config
from pimforge.rtl.mem.port import Cmd
from pimforge.rtl.mem.timing import resolve_timing
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

BANK_GROUPS = 4       # ActWindow's default, which the vault uses
NEVER = -(10**9)

# tests/test_ipim_vault_iss.py's small vault (2 PGs x 2 PEs, iPIM's Table III timing) ...
SMALL = SMALL_VAULT   # shared with the other vault tests
# ... and one of 2 PGs x 4 PEs whose banks cycle rows fast enough (tRC 14) for tFAW
# (40) to bind, tRRDL (9) above tRRDS (4), scratchpads for the 8 PEs' pointers.
FAST = SMALL | {"ipim.pes_per_pg": 4, "ipim.pgsm_bytes": 16 * 16, "ipim.vsm_bytes": 16 * 32,
                "ipim.timing.tRCD": 6.0, "ipim.timing.tCL": 6.0,
                "ipim.timing.tRP": 6.0, "ipim.timing.tRAS": 8.0, "ipim.timing.tRC": 14.0,
                "ipim.timing.tFAW": 40.0, "ipim.timing.tRRDL": 9.0}
CONFIGS = {"small": SMALL, "fast": FAST}


def window_of(c):
    """(t_rrd_s, t_rrd_l, t_faw) in cycles, rounded up from ``c.timing``."""
    tm = resolve_timing(c.timing, c.tck_ns)
    return tm.tRRD, max(1, math.ceil(round(c.timing.tRRDL / c.tck_ns, 6))), tm.tFAW


def pg_violations(acts, c):
    """The PG rules broken by *acts* (a list of (cycle, PE) of the vault, in order)."""
    t_rrd_s, t_rrd_l, t_faw = window_of(c)
    bad = []
    for pg in range(c.pgs):
        last, group, recent = NEVER, {}, []
        for cyc, p in acts:
            if p // c.pes_per_pg != pg:
                continue
            g = (p % c.pes_per_pg) % BANK_GROUPS
            where = f"PG {pg} PE {p} ACT at cycle {cyc}"
            if cyc - last < t_rrd_s:
                bad.append(f"{where}: tRRDS {t_rrd_s} (previous ACT at {last})")
            if cyc - group.get(g, NEVER) < t_rrd_l:
                bad.append(f"{where}: tRRDL {t_rrd_l} (bank group {g} at {group[g]})")
            if len(recent) == 4 and cyc - recent[0] < t_faw:
                bad.append(f"{where}: tFAW {t_faw} (four ACTs from {recent[0]})")
            last, group[g], recent = cyc, cyc, (recent + [cyc])[-4:]
    return bad


def row_storm(r, c, rounds):
    """``ld_rf`` and ``st_rf`` on every PE, each to a row other than the last one's:
    all PEs of a PG precharge and activate at once, round after round. Addresses stay
    below 4 rows (the span the drain leaves alone) and above vector 0."""
    every = (1 << c.pes) - 1
    rv = c.row_vectors
    prog, row = [], 0
    for k in range(rounds):
        row = (row + r.randrange(1, 4)) % 4
        addr = row * rv + r.randrange(1, rv)
        if r.random() < 0.7:
            prog.append(Instr(Opcode.LD_RF, dram=addr, drf=1 + k % 4, simb_mask=every))
        else:
            prog.append(Instr(Opcode.ST_RF, dram=addr, drf=1 + (k + 1) % 4, simb_mask=every))
    return prog


def run_vault(cfg, prog, banks, limit, *, act_windows=True):
    """Run *prog* on the vault; returns the banks, the ACTs [(cycle, PE)] and the cycles."""
    vault = from_config(cfg, act_windows=act_windows)
    c = cfg.ipim
    banks = [dict(b) for b in banks]
    acts = []
    out = {}

    async def tb(ctx):
        await load_and_start(ctx, vault, prog)
        pending = [None] * c.pes
        mask = c.bank_vectors - 1
        for cyc in range(limit):
            if ctx.get(vault.halted):
                break
            for p in range(c.pes):
                cmd = vault.pe_cmd[p]
                if ctx.get(cmd.valid) and ctx.get(cmd.kind) == Cmd.ACT:
                    acts.append((cyc, p))
                arr = vault.pe_arr[p]
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
        out["cycles"] = cyc

    simulate(vault, tb, period=1e-9)
    return banks, acts, out["cycles"]


def _program(r, c, storm_rounds, random_n):
    span = 64
    banks = []
    for _ in range(c.pes):
        b = fill_bank(r, span)
        b[0] = vec_of([c.pes_per_pg, c.pes, 0, 0])
        banks.append(b)
    prog = random_vault_program(r, c, random_n, span)
    prog = prog[:6] + row_storm(r, c, storm_rounds) + prog[6:] + \
        row_storm(r, c, storm_rounds // 2) + drain_vault(c, 128)
    assert len(prog) <= c.imem_instructions
    return banks, prog


def _iss_diff(cfg, prog, banks, got):
    c = cfg.ipim
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
    return bad


@pytest.mark.parametrize("name, seed", [("small", 21), ("fast", 22)])
def test_pg_acts_keep_the_die_window(name, seed):
    """Row storms on every PE and a random program: every PG's ACTs keep tRRDS,
    tRRDL and tFAW, the window is pressed (ACTs of a PG exactly tRRDS apart, and in
    ``fast`` four ACTs exactly tFAW before a fifth), and the banks match the ISS."""
    r = random.Random(seed)
    log.info("seed %d", seed)
    print(f"seed {seed}")
    cfg = load_config("ipim_small", CONFIGS[name])
    c = cfg.ipim
    banks, prog = _program(r, c, 20, 20)
    got, acts, cycles = run_vault(cfg, prog, banks, 40000)
    bad = pg_violations(acts, c)
    assert not bad, "\n".join(bad[:20])
    t_rrd_s, _, t_faw = window_of(c)
    gaps, faw_hits = [], 0
    for pg in range(c.pgs):
        mine = [cyc for cyc, p in acts if p // c.pes_per_pg == pg]
        gaps += [b - a for a, b in zip(mine, mine[1:])]
        faw_hits += sum(1 for i in range(4, len(mine)) if mine[i] - mine[i - 4] == t_faw)
    print(f"{cycles} cycles, {len(acts)} ACTs, PG gaps of tRRDS {gaps.count(t_rrd_s)}, "
          f"5th ACTs at tFAW {faw_hits}")
    assert gaps.count(t_rrd_s) >= 10, gaps[:40]
    if name == "fast":
        assert faw_hits >= 5
    diff = _iss_diff(cfg, prog, banks, got)
    assert not diff, "\n".join(diff[:20])


@pytest.mark.parametrize("name, seed", [("small", 31), ("fast", 32)])
def test_check_fails_without_the_windows(name, seed):
    """The same kind of program on the vault built without ACT windows: the PEs open
    their rows together and the check above finds tRRDS (and, in ``fast``, tFAW)
    broken -- the check bites. The banks still match (the windows are timing only)."""
    r = random.Random(seed)
    log.info("seed %d", seed)
    print(f"seed {seed}")
    cfg = load_config("ipim_small", CONFIGS[name])
    c = cfg.ipim
    banks, prog = _program(r, c, 15, 10)
    got, acts, _ = run_vault(cfg, prog, banks, 40000, act_windows=False)
    bad = pg_violations(acts, c)
    print(len(bad), "violations, e.g.", bad[:3])
    assert any("tRRDS" in b for b in bad)
    if name == "fast":
        assert any("tFAW" in b for b in bad)
    diff = _iss_diff(cfg, prog, banks, got)
    assert not diff, "\n".join(diff[:20])
