"""The near-bank PE on the Amaranth simulator: random programs against the per-instruction
stand-in reference (verif/tb/ipim/pe.py), latencies, structural hazards, the INT ALU, remote
reads of the bank beside the PE's own requests."""

import gc
import random
import warnings

import pytest
from amaranth.hdl import Module, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.sim import Simulator

from pimforge.gen.config import load_config
from pimforge.rtl.ipim import pe as pe_mod
from pimforge.rtl.ipim import pgsm as pgsm_mod
from pimforge.rtl.ipim.bus import VECTOR_BITS, RemoteBankSignature
from pimforge.rtl.ipim.int_alu import IntALU
from pimforge.rtl.ipim.isa import DRAM_BITS, AluOp, DType, Instr, Mode, Opcode
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.verif.tb.amaranth_sim import simulate
from pimforge.verif.tb.ipim.pe import (
    INT_CORNERS,
    PEEnv,
    PEGeometry,
    RemoteReader,
    StandInPEModel,
    drain_program,
    fill_bank,
    int_op,
    random_program,
)

# Small storage, tREFI shortened so that refreshes land inside a short program.
SMALL = {"ipim.drf_bytes": 16 * 16, "ipim.arf_bytes": 16 * 4, "ipim.pgsm_bytes": 16 * 16,
         "ipim.vsm_bytes": 16 * 32, "ipim.bank_bytes": 16 * 1024, "ipim.row_bytes": 16 * 16,
         "ipim.timing.tREFI": 300.0, "ipim.timing.tRFC": 40.0, "ipim.inst_queue": 8}


def _port(dut, name):
    obj = dut
    for part in name.split("__"):
        obj = getattr(obj, part)
    return obj.as_value() if hasattr(obj, "as_value") else obj


def run_env(cfg, env: PEEnv, max_cycles: int, dut=None):
    dut = dut or pe_mod.from_config(cfg)
    return run_phases(dut, [[(dut, env)]], max_cycles)[0]


def run_phases(top, phases, max_cycles: int):
    """Simulate *top*; each phase is a list of (PE, env) run together until every env
    has finished (the next phase's envs take over the same PEs). Returns the PEs'
    performance counters at the end."""
    perf = []

    async def bench(ctx):
        prev = {}
        for pairs in phases:
            outs = [{n: _port(pe, n) for n in PEEnv.OUTS} for pe, _ in pairs]
            for pe, env in pairs:
                # The PE's clock and DRAM command history go on from its previous phase.
                if id(pe) in prev:
                    env.n, env.checker = prev[id(pe)].n, prev[id(pe)].checker
                prev[id(pe)] = env
            for pe, env in pairs:
                for k, v in env.inputs().items():
                    ctx.set(_port(pe, k), v)
            while not all(env.finished_all for _, env in pairs):
                for (pe, env), o in zip(pairs, outs):
                    got = {n: ctx.get(s) for n, s in o.items()}
                    for k, v in env.cycle(got).items():
                        ctx.set(_port(pe, k), v)
                await ctx.tick()
                assert pairs[0][1].n < max_cycles, \
                    f"not finished after {max_cycles} cycles " \
                    f"(pc {[(e.pc, len(e.program)) for _, e in pairs]})"
        await ctx.tick()
        for pe, _ in phases[-1]:
            perf.append({n: ctx.get(getattr(pe.perf, n)) for n in pe.PerfSignature.NAMES})

    simulate(top, bench, period=1e-9)
    return perf


def make_env(cfg, seed, n, **kw):
    c = cfg.ipim
    g = PEGeometry.of(c)
    r = random.Random(seed)
    span = min(g.bank // 2, 8 * g.row)
    bank0 = fill_bank(r, span)
    prog, pre = random_program(r, g, n, span=span)
    bank0 |= pre
    prog += drain_program(g, g.bank // 2)
    env = PEEnv(g, resolve_timing(c.timing, c.tck_ns), prog, r,
                tag_bits=max(1, (c.inst_queue - 1).bit_length()), bank=bank0,
                ids=(r.randrange(c.pes_per_pg), r.randrange(c.pgs), r.randrange(c.vaults),
                     r.randrange(c.cubes)),
                pgsm_latency=c.t_pgsm, vsm_latency=c.t_vsm, **kw)
    return env, bank0


@pytest.mark.parametrize("seed, over", [
    (1, {}),
    (2, {"ipim.scheduler": "fcfs", "ipim.page_policy": "close"}),
    (3, {"ipim.t_pgsm": 3, "ipim.t_vsm": 2, "ipim.t_add": 2, "ipim.t_mac": 3,
         "ipim.dram_queue": 2}),
    # Latencies past the rtl/fp units' 8 stages: padded pipelines, a 21-slot line.
    (4, {"ipim.t_add": 12, "ipim.t_mul": 10, "ipim.t_mac": 20, "ipim.t_logic": 3,
         "ipim.t_alu": 2, "ipim.t_drf": 2, "ipim.dram_queue": 16}),
])
def test_random_program_matches_reference(seed, over):
    print(f"seed {seed}")
    cfg = load_config("default", {**SMALL, **over})
    env, bank0 = make_env(cfg, seed, 180)
    perf = run_env(cfg, env, 40000)
    bad = env.compare(env.expected(bank0, ipim=cfg.ipim))     # the ISS and the stand-in
    assert not bad, "\n".join(bad[:20])
    print(env.n, "cycles", env.cmds, "ref during bank work", env.ref_busy, perf)
    assert env.cmds.get("REF", 0) > 0 and env.cmds.get("PRE", 0) > 0
    assert perf["rdwr"] == env.cmds.get("RD", 0) + env.cmds.get("WR", 0)
    assert perf["act"] == env.cmds.get("ACT", 0) and perf["ref"] == env.cmds.get("REF", 0)
    assert 0 < perf["simd"] and 0 < perf["alu"] and 0 < perf["drf"] and 0 < perf["arf"]
    # Instructions overlapped: some finished out of issue order.
    order = [i for i, *_ in env.finished]
    assert order != [i for i in env.program], "no instruction finished out of order"


def test_latencies_issue_to_done():
    """Each opcode alone on an idle PE (the core model waits for each to finish):
    issue-to-done cycles as published in ``SIMBPE.latencies``, and the memory ops."""
    cfg = load_config("default", SMALL)
    dut = pe_mod.from_config(cfg)
    lat = dut.latencies
    assert lat["comp_add"] == 5 and lat["comp_mul"] == 6 and lat["comp_mac"] == 9
    m = 1
    cases = [
        ("comp_add", Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.FP32, simb_mask=m)),
        ("comp_mul", Instr(Opcode.COMP, op=AluOp.MUL, dtype=DType.FP32, simb_mask=m)),
        ("comp_mac", Instr(Opcode.COMP, op=AluOp.MAC, dtype=DType.FP32, simb_mask=m)),
        ("comp_logic", Instr(Opcode.COMP, op=AluOp.XOR, simb_mask=m)),
        ("calc_arf", Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=5, simb_mask=m)),
        ("mov_drf", Instr(Opcode.MOV_DRF, simb_mask=m)),
        ("mov_arf", Instr(Opcode.MOV_ARF, arf=5, simb_mask=m)),
        ("reset", Instr(Opcode.RESET, simb_mask=m)),
        ("rd_pgsm", Instr(Opcode.RD_PGSM, simb_mask=m)),
        ("wr_pgsm", Instr(Opcode.WR_PGSM, simb_mask=m)),
        ("rd_vsm", Instr(Opcode.RD_VSM, simb_mask=m)),
        ("wr_vsm", Instr(Opcode.WR_VSM, simb_mask=m)),
        ("ld_rf_miss", Instr(Opcode.LD_RF, dram=3, simb_mask=m)),
        ("ld_rf_hit", Instr(Opcode.LD_RF, dram=4, simb_mask=m)),
        ("st_rf_hit", Instr(Opcode.ST_RF, dram=5, simb_mask=m)),
        ("ld_pgsm_hit", Instr(Opcode.LD_PGSM, dram=6, simb_mask=m)),
        ("st_pgsm_hit", Instr(Opcode.ST_PGSM, dram=7, pgsm=1, simb_mask=m)),
    ]
    g = PEGeometry.of(cfg.ipim)
    env = PEEnv(g, resolve_timing(cfg.ipim.timing, cfg.ipim.tck_ns), [i for _, i in cases],
                random.Random(0), tag_bits=3, bank={}, p_issue=1.0, p_pgsm=1.0, p_vsm=1.0)
    env.tags = 1          # one instruction in flight at a time
    run_env(cfg, env, 3000, dut)
    got = {name: d for (name, _), (_, d, _) in zip(cases, env.finished)}
    print(got)
    for name, _ in cases[:8]:
        assert got[name] == lat[name], name
    t = cfg.ipim.t_pgsm
    # decode, request, read latency, completion
    assert got["rd_pgsm"] == 3 + t and got["wr_pgsm"] == 3, got
    tm = resolve_timing(cfg.ipim.timing, cfg.ipim.tck_ns)
    assert tm.tRCD + tm.rd_latency < got["ld_rf_miss"] <= tm.tRCD + tm.rd_latency + 6, got
    assert got["ld_rf_hit"] == got["ld_rf_miss"] - tm.tRCD, got


def test_structural_hazard_one_completion_per_cycle():
    """A MUL then an ADD one cycle later would finish together: the ADD waits a cycle
    (ready low), both results are right, and done pulses once per cycle."""
    cfg = load_config("default", SMALL)
    g = PEGeometry.of(cfg.ipim)
    one = 0x3F800000
    bank = {0: one | one << 32 | one << 64 | one << 96}
    prog = [Instr(Opcode.LD_RF, dram=0, drf=1, simb_mask=1),
            Instr(Opcode.COMP, op=AluOp.MUL, dtype=DType.FP32, dst=2, src1=1, src2=1,
                  simb_mask=1),
            Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.FP32, dst=3, src1=1, src2=1,
                  simb_mask=1),
            Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, dst=4, src1=1, src2=1,
                  simb_mask=1, mode=Mode.SV, lane=2, vec_mask=0b0101),
            # Independent comps of one latency: one issued and one finished per cycle.
            *(Instr(Opcode.COMP, op=AluOp.MUL, dtype=DType.FP32, dst=5 + k, src1=1, src2=1,
                    simb_mask=1) for k in range(6)),
            *drain_program(g, 512)]
    env = PEEnv(g, resolve_timing(cfg.ipim.timing, cfg.ipim.tck_ns), prog, random.Random(0),
                tag_bits=3, bank=bank, p_issue=1.0)
    run_env(cfg, env, 4000)
    bad = env.compare(env.expected(bank, ipim=cfg.ipim))
    assert not bad, bad
    assert env.expected(bank).bank[512 + 3] == 0x40000000 * (1 + (1 << 32) + (1 << 64)
                                                               + (1 << 96))
    (mul, d_mul, t_mul), (add, d_add, t_add) = sorted(env.finished[1:4], key=lambda f: f[2])[:2]
    # MUL (6) issued first, ADD the next cycle: it would finish with the MUL, so it waits
    # one cycle in the decode register and finishes one cycle after it.
    assert mul.op is AluOp.MUL and add.op is AluOp.ADD and t_add == t_mul + 1, env.finished
    assert d_mul == 6 and t_add + d_add == t_mul + d_mul + 1, env.finished
    burst = sorted((t0, d) for i, d, t0 in env.finished if i.dst >= 5 and
                   i.opcode is Opcode.COMP)
    assert [t0 for t0, _ in burst] == list(range(burst[0][0], burst[0][0] + 6)), burst
    assert all(d == 6 for _, d in burst), burst


def _alu(op, a, b, c=0):
    dut = IntALU()
    res = []

    async def bench(ctx):
        ctx.set(dut.op, op)
        ctx.set(dut.a, a)
        ctx.set(dut.b, b)
        ctx.set(dut.c, c)
        res.append(ctx.get(dut.result))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return res[0]


def test_int_alu_corners():
    r = random.Random(7)
    vals = INT_CORNERS + [r.getrandbits(32) for _ in range(4)]
    ops = [o for o in AluOp]
    dut = IntALU()
    got, exp = [], []
    cases = [(o, a, b, r.getrandbits(32)) for o in ops for a in vals[:8] for b in vals]

    async def bench(ctx):
        for o, a, b, c in cases:
            ctx.set(dut.op, o)
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.c, c)
            got.append(ctx.get(dut.result))
            exp.append(int_op(o, a, b, c))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    bad = [(c, g, e) for c, g, e in zip(cases, got, exp) if g != e]
    assert not bad, bad[:5]
    # The corners themselves, independently of the reference.
    assert int_op(AluOp.SHIFT, 1, 32) == 0 and int_op(AluOp.SHIFT, 0x8000_0000, -40 & 0xFFFFFFFF) \
        == 0xFFFF_FFFF
    assert int_op(AluOp.CROP_MSB, 0xF000_000F, 32) == 0xF000_000F
    assert int_op(AluOp.CROP_LSB, 0xFFFF_FFFF, 0) == 0


def test_directed_corners():
    """Every FP32 corner against others through ADD/SUB/MUL/MAC, FP SHIFT by amounts past
    the clamp, every INT op with shift amounts 0/+-31/+-32/33 and crop widths 0/32/33/-1,
    VV and SV, full and partial masks; results stored and compared with the reference."""
    from pimforge.verif.models import fp32
    from pimforge.verif.tb.ipim.pe import vec_of
    cfg = load_config("default", SMALL)
    g = PEGeometry.of(cfg.ipim)
    c = fp32.corner_values()
    shifts = [31, 32, 33, -33, 0, -1, -32, 600, -600, 2**31 - 1, -2**31, 127]
    bank = {}
    nfp = (len(c) + 3) // 4
    for i in range(nfp):                       # FP corners, lanes of 4
        bank[i] = vec_of((c[4 * i:4 * i + 4] + c[:4])[:4])
    nsh = len(shifts) // 4
    for i in range(nsh):
        bank[nfp + i] = vec_of([v & 0xFFFFFFFF for v in shifts[4 * i:4 * i + 4]])
    ints = [INT_CORNERS[0:4], [0x8000_0000, 0xFFFF_FFFF, 0x1234_5678, 0x7FFF_FFFF]]
    for i, v in enumerate(ints):
        bank[nfp + nsh + i] = vec_of(v)
    m = 1
    prog, out = [], 700

    def store(dst):
        nonlocal out
        prog.append(Instr(Opcode.ST_RF, dram=out, drf=dst, simb_mask=m))
        out += 1

    fp_ops = [AluOp.ADD, AluOp.SUB, AluOp.MUL, AluOp.MAC]
    for va in range(nfp):
        vb = (5 * va + 1) % nfp
        prog += [Instr(Opcode.LD_RF, dram=va, drf=0, simb_mask=m),
                 Instr(Opcode.LD_RF, dram=vb, drf=1, simb_mask=m),
                 Instr(Opcode.LD_RF, dram=(va + 3) % nfp, drf=5, simb_mask=m),
                 Instr(Opcode.LD_RF, dram=nfp + va % nsh, drf=7, simb_mask=m)]
        for k, op in enumerate(fp_ops):
            prog.append(Instr(Opcode.COMP, op=op, dtype=DType.FP32,
                              mode=Mode.SV if (va + k) % 4 == 0 else Mode.VV, lane=k,
                              dst=2 + k, src1=0, src2=1,
                              vec_mask=0xF if (va + k) % 3 else 0b1011, simb_mask=m))
        prog.append(Instr(Opcode.COMP, op=AluOp.SHIFT, dtype=DType.FP32, dst=6, src1=0,
                          src2=7, simb_mask=m))
        for d in range(2, 7):
            store(d)
    for va in range(2):
        prog.append(Instr(Opcode.LD_RF, dram=nfp + nsh + va, drf=0, simb_mask=m))
        for sv in range(nsh):
            prog.append(Instr(Opcode.LD_RF, dram=nfp + sv, drf=1, simb_mask=m))
            for k, op in enumerate(AluOp):
                prog.append(Instr(Opcode.COMP, op=op, dtype=DType.INT32, dst=2 + k, src1=0,
                                  src2=1, mode=Mode.SV if k % 4 == 0 else Mode.VV,
                                  lane=sv, vec_mask=0xF if k % 3 else 0b0110, simb_mask=m))
                if op is not AluOp.MAC:
                    prog.append(Instr(Opcode.CALC_ARF, op=op, dst=4 + k % 12, src1=k % 4,
                                      src2=4 + (k + 5) % 12, simb_mask=m))
            for d in range(2, 2 + len(AluOp)):
                store(d)
    prog += drain_program(g, 512)
    env = PEEnv(g, resolve_timing(cfg.ipim.timing, cfg.ipim.tck_ns), prog, random.Random(1),
                tag_bits=3, bank=bank, ids=(45, 3, 17, 9), p_issue=1.0)
    run_env(cfg, env, 20000)
    print(len(prog), "instructions,", env.n, "cycles")
    ref = env.expected(bank)
    bad = env.compare(ref)
    assert not bad, "\n".join(bad[:20])
    assert len([a for a in ref.bank if 700 <= a < out]) == out - 700 == 155


@pytest.mark.parametrize("over", [{}, {"ipim.scheduler": "fcfs"},
                                  {"ipim.dram_queue": 16, "ipim.page_policy": "close"}])
def test_same_address_bank_chains_issued_back_to_back(over):
    """``ld_rf``, ``st_rf`` and ``ld_pgsm`` to one bank address issue back to back (the core
    sees no hazard between them: isa.accesses marks them queued), direct and through
    AddrRF pointers, with other rows' accesses between them so that FR-FCFS has row hits
    to prefer: every read sees the last write before it in issue order (RAW, WAR, WAW
    through the request queue), against the reference."""
    from pimforge.rtl.ipim.isa import accesses, conflicts
    from pimforge.verif.tb.ipim.pe import vec_of
    cfg = load_config("default", {**SMALL, **over})
    g = PEGeometry.of(cfg.ipim)
    rng = random.Random(11)
    row = cfg.ipim.row_bytes // 16
    bank = {a: vec_of([rng.getrandbits(32) for _ in range(4)]) for a in range(8 * row)}
    m = 1
    prog = [Instr(Opcode.LD_RF, dram=a, drf=8 + a % 8, simb_mask=m) for a in range(8)]
    for i in range(24):
        a = (i * 5) % (6 * row) + row          # rows 1..6, changing from chain to chain
        other = (a + 3 * row) % (7 * row)      # another row: a hit for FR-FCFS to prefer
        p = 4 + i % 8                          # an AddrRF pointer to a
        bank[8 * row + i] = vec_of([a] * 4)
        prog += [Instr(Opcode.LD_RF, dram=other, drf=1, simb_mask=m),
                 Instr(Opcode.ST_RF, dram=a, drf=8 + i % 8, simb_mask=m),        # WAW ...
                 Instr(Opcode.ST_RF, dram=a, drf=8 + (i + 1) % 8, simb_mask=m),  # ... twice
                 Instr(Opcode.LD_RF, dram=a, drf=2 + i % 2, simb_mask=m),        # RAW
                 Instr(Opcode.ST_RF, dram=other, drf=2 + i % 2, simb_mask=m),
                 Instr(Opcode.LD_PGSM, dram=a, pgsm=i % 8, simb_mask=m),         # RAW
                 Instr(Opcode.ST_RF, dram=a, drf=1, simb_mask=m),                 # WAR
                 Instr(Opcode.LD_RF, dram=8 * row + i, drf=7, simb_mask=m),
                 Instr(Opcode.MOV_ARF, arf=p, drf=7, lane=i % 4, simb_mask=m),
                 Instr(Opcode.ST_RF, dram=p, dram_ind=1, drf=8 + (i + 2) % 8, simb_mask=m),
                 Instr(Opcode.LD_RF, dram=p, dram_ind=1, drf=6, simb_mask=m),
                 Instr(Opcode.ST_RF, dram=a, drf=6, simb_mask=m),
                 Instr(Opcode.LD_RF, dram=p, dram_ind=1, drf=5, simb_mask=m)]
    # the chains' pairs are no hazard for the core (so they issue back to back)
    st, ld = accesses(prog[10]), accesses(prog[11])
    assert not conflicts(st[1], ld[0] | ld[1]) and not conflicts(st[0], ld[1])
    prog += drain_program(g, 7 * row)
    env = PEEnv(g, resolve_timing(cfg.ipim.timing, cfg.ipim.tck_ns), prog, random.Random(2),
                tag_bits=3, bank=bank, ids=(45, 3, 17, 9), p_issue=1.0)
    run_env(cfg, env, 40000)
    ref = env.expected(bank)
    bad = env.compare(ref)
    assert not bad, "\n".join(bad[:20])


class _TwoPEsOnePGSM(wiring.Component):
    """Two PEs joined to one PGSM, as the vault joins a PG (the test's own top)."""

    def __init__(self, cfg):
        self.pes = [pe_mod.from_config(cfg) for _ in range(2)]
        self.pgsm = pgsm_mod.from_config(cfg, ports=2)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.pgsm = self.pgsm
        for i, pe in enumerate(self.pes):
            m.submodules[f"pe{i}"] = pe
            wiring.connect(m, pe.pgsm, self.pgsm.ports[i])
        return m


def test_two_pes_share_a_pgsm():
    """PE0 and PE1 fill their halves of one PGSM at the same time (ld_pgsm from their
    banks, wr_pgsm, direct and indirect, bank conflicts in the PGSM), then each reads
    the other's half (rd_pgsm + st_rf, st_pgsm): both banks equal the reference."""
    cfg = load_config("default", SMALL)
    g = PEGeometry.of(cfg.ipim)
    top = _TwoPEsOnePGSM(cfg)
    r = random.Random(21)
    tm = resolve_timing(cfg.ipim.timing, cfg.ipim.tck_ns)
    half = g.pgsm // 2
    m = 1

    def phase1(i):
        P = []
        for j in range(half // 2):
            P += [Instr(Opcode.LD_PGSM, dram=j, pgsm=half * i + j, simb_mask=m),
                  Instr(Opcode.LD_RF, dram=half + j, drf=j, simb_mask=m)]
            if j == 1:       # indirect through A6 = half * peID + half // 2 + 1
                P.append(Instr(Opcode.WR_PGSM, pgsm=6, pgsm_ind=1, drf=j, simb_mask=m))
            else:
                P.append(Instr(Opcode.WR_PGSM, pgsm=half * i + half // 2 + j, drf=j,
                               simb_mask=m))
        return P

    def phase2(i):
        P = []
        for j in range(half):
            src = half * (1 - i) + j
            P += [Instr(Opcode.RD_PGSM, pgsm=src, drf=j % g.drf, simb_mask=m),
                  Instr(Opcode.ST_RF, dram=100 + j, drf=j % g.drf, simb_mask=m),
                  Instr(Opcode.ST_PGSM, dram=200 + j, pgsm=src, simb_mask=m)]
        return P

    banks = [fill_bank(r, 64) for _ in range(2)]
    # A6 = half * peID + half // 2 + 1 (the indirect wr_pgsm of j = 1), built with calc_arf.
    pro = [Instr(Opcode.LD_RF, dram=40, drf=15, simb_mask=m),
           Instr(Opcode.MOV_ARF, arf=6, drf=15, lane=0, simb_mask=m),
           Instr(Opcode.CALC_ARF, op=AluOp.MUL, dst=7, src1=0, src2=6, simb_mask=m),
           Instr(Opcode.MOV_ARF, arf=6, drf=15, lane=1, simb_mask=m),
           Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=6, src1=7, src2=6, simb_mask=m)]
    for b in banks:
        b[40] = half | (half // 2 + 1) << 32
    envs1 = [PEEnv(g, tm, pro + phase1(i), random.Random(i), tag_bits=3, bank=banks[i],
                   ids=(i, 0, 0, 0), real_pgsm=True) for i in range(2)]
    envs2 = [PEEnv(g, tm, phase2(i), random.Random(9 + i), tag_bits=3, bank={},
                   ids=(i, 0, 0, 0), real_pgsm=True) for i in range(2)]
    for e1, e2 in zip(envs1, envs2):
        e2.bank = e1.bank     # the same dict: phase 2 continues phase 1's bank
    run_phases(top, [list(zip(top.pes, envs1)), list(zip(top.pes, envs2))], 40000)
    # Reference: both PEs on one shared PGSM dict, phase by phase.
    refs = [StandInPEModel(g, (i, 0, 0, 0), banks[i]) for i in range(2)]
    refs[1].pgsm = refs[0].pgsm
    for envs in (envs1, envs2):
        for ref, e in zip(refs, envs):
            for ins in e.program:
                ref.step(ins)
    for i in range(2):
        bad = [f"PE{i} bank[{k}]" for k in sorted(set(refs[i].bank) | set(envs2[i].bank))
               if refs[i].bank.get(k, 0) != envs2[i].bank.get(k, 0)]
        assert not bad, bad[:10]
        assert not envs1[i].errors and not envs2[i].errors
        assert not envs1[i].checker.violations and not envs2[i].checker.violations
    assert len(refs[0].pgsm) == g.pgsm
    # The other half really arrived: PE0's stores hold PE1's lines.
    assert refs[0].bank[100] == refs[0].pgsm[half] != 0


# ---- remote reads (the vault's request server on the ``remote`` port) ----------------------
def test_remote_signature():
    sig = RemoteBankSignature(dram_bits=DRAM_BITS, tag_bits=3)
    assert sig == RemoteBankSignature(dram_bits=24, tag_bits=3)
    assert sig != RemoteBankSignature(dram_bits=24, tag_bits=2)
    assert sig != RemoteBankSignature(dram_bits=20, tag_bits=3)
    assert hash(sig) == hash(RemoteBankSignature(dram_bits=24, tag_bits=3))
    assert repr(sig) == "RemoteBankSignature(dram_bits=24, tag_bits=3)"
    assert sig.members["req"].signature.members["payload"].shape.size == 24 + 3
    assert sig.members["resp"].signature.members["payload"].shape.size == 3 + VECTOR_BITS
    for kw in ({"dram_bits": 0, "tag_bits": 2}, {"dram_bits": 33, "tag_bits": 2},
               {"dram_bits": 24, "tag_bits": 0}, {"dram_bits": 24, "tag_bits": 9}):
        with pytest.raises(ValueError):
            RemoteBankSignature(**kw)
    cfg = load_config("default", SMALL)
    with warnings.catch_warnings():
        # These PEs are only looked at, never elaborated.
        warnings.simplefilter("ignore", UnusedElaboratable)
        pe = pe_mod.from_config(cfg, remote_tag_bits=5)
        assert pe.signature.members["remote"] == \
            wiring.In(RemoteBankSignature(dram_bits=DRAM_BITS, tag_bits=5))
        assert pe_mod.from_config(cfg).remote.signature.tag_bits == 2
        with pytest.raises(ValueError, match="remote_tag_bits must be"):
            pe_mod.from_config(cfg, remote_tag_bits=9)
        del pe
        gc.collect()


@pytest.mark.parametrize("queue, most", [(8, 4), (2, 3)])
def test_remote_reads_idle_pe(queue, most):
    """Remote reads alone: back to back with every response taken at once, then with
    ``resp.ready`` low for random stretches. Every read returns its bank vector (the
    address wraps to the bank) with its tag, once; the held response does not change;
    outstanding reads are bounded by the tags (4) or by the bank slots (*queue*) and the
    one-entry register in front of them; FR-FCFS
    answers the row hits among them first; no ``done`` pulses (the env flags one as a tag
    not in flight); ``perf.remote`` counts them."""
    cfg = load_config("default", {**SMALL, "ipim.dram_queue": queue})
    g = PEGeometry.of(cfg.ipim)
    tm = resolve_timing(cfg.ipim.timing, cfg.ipim.tck_ns)
    r = random.Random(5)
    bank = fill_bank(r, g.bank)
    # Two rows alternating: with several reads queued, the open row's come first.
    addrs = [(3, 9)[k % 2] * g.row + (k // 2) % g.row for k in range(32)]
    # The same vectors by addresses with bits above the bank's.
    addrs += [a + r.randrange(1, (1 << DRAM_BITS) // g.bank) * g.bank for a in addrs[:8]]
    readers = [RemoteReader(random.Random(6), tag_bits=2, addrs=addrs, p_req=1.0),
               RemoteReader(random.Random(7), tag_bits=2, addrs=addrs, p_req=0.7, stall=12)]
    envs = [PEEnv(g, tm, [], random.Random(8 + i), tag_bits=3, bank=bank, remote=rd)
            for i, rd in enumerate(readers)]
    envs[1].bank = envs[0].bank
    dut = pe_mod.from_config(cfg)
    perf = run_phases(dut, [[(dut, envs[0])], [(dut, envs[1])]], 8000)[0]
    print("cycles", envs[1].n, "perf", perf)
    for e in envs:
        bad = e.compare(e.expected(bank))
        assert not bad, "\n".join(bad[:20])
    for rd in readers:
        assert len(rd.served) == len(rd.accepted) == len(addrs)
        assert sorted(a for _, a, _, _ in rd.served) == sorted(addrs)
        assert {t for t, *_ in rd.served} == {0, 1, 2, 3}
        assert rd.most == most, rd.most
    assert perf["remote"] == 2 * len(addrs)
    # FR-FCFS: some read answered before one accepted earlier.
    order = [t0 for _, _, t0, _ in readers[0].served]
    assert order != sorted(order), "remote reads answered in request order only"
    # Back-pressure happened (the model checks that the response was held steady).
    assert readers[1].held > 20, readers[1].held
    # In request order every read would open a row; the scheduler grouped the row hits.
    assert perf["act"] < 0.8 * 2 * len(addrs), perf


def _remote_run(seed, over, n, **reader_kw):
    cfg = load_config("default", {**SMALL, **over})
    g = PEGeometry.of(cfg.ipim)
    rr = random.Random(seed + 1000)
    # A region the program never writes (it works below g.bank // 4, drains at
    # g.bank // 2): its vectors are fixed during the run.
    lo, hi = g.bank // 4, g.bank // 2
    region = {a: v for a, v in fill_bank(rr, hi).items() if a >= lo}
    rows = rr.sample(range(lo // g.row, hi // g.row), 3)
    addrs = []
    for _ in range(n):
        a = rr.choice(rows) * g.row + rr.randrange(g.row)
        if rr.random() < 0.2:
            a += rr.randrange(1, (1 << DRAM_BITS) // g.bank) * g.bank
        addrs.append(a)
    reader = RemoteReader(rr, tag_bits=2, addrs=addrs, **reader_kw)
    env, bank0 = make_env(cfg, seed, 180, remote=reader, p_issue=1.0)
    bank0 |= region
    env.bank |= region
    perf = run_env(cfg, env, 40000)
    return cfg, env, bank0, region, reader, perf


@pytest.mark.parametrize("seed, over, kw", [
    (11, {}, {"p_req": 0.12, "p_ready": 0.6}),
    (12, {"ipim.scheduler": "fcfs", "ipim.page_policy": "close"},
     {"p_req": 0.3, "stall": 8}),
    (13, {"ipim.dram_queue": 2, "ipim.t_pgsm": 3}, {"p_req": 0.08, "p_ready": 0.8}),
])
def test_remote_reads_during_random_program(seed, over, kw):
    """A random program runs while remote reads of a region it never writes arrive at
    random times (4 tags, random response back-pressure). Every read returns the bank's
    vector once; the program's result still equals the ISS; remote reads were taken
    while the PE's own bank instructions were in flight, and while one waited to
    dispatch: such a read went into the queue first (the priority), so that under FCFS
    it is answered first, every time; some remote reads overtook an older bank
    instruction of the PE; FR-FCFS answered remote reads out of their order."""
    print(f"seed {seed}")
    cfg, env, bank0, region, reader, perf = _remote_run(seed, over, 120, **kw)
    bad = env.compare(env.expected(bank0, ipim=cfg.ipim))
    assert not bad, "\n".join(bad[:20])
    assert all(env.bank[a] == v for a, v in region.items())
    assert len(reader.served) == 120 and perf["remote"] == 120
    answered = {ta: tr for _, _, ta, tr in reader.served}
    finished = {t0: t0 + d for _, d, t0 in env.finished}
    won = sum(answered[ta] < finished[t0] for ta, t0 in env.remote_races)
    # An older bank instruction of the PE finished after a remote read was answered.
    bank_ops = (Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM, Opcode.ST_PGSM)
    spans = [(t0, t0 + d) for i, d, t0 in env.finished if i.opcode in bank_ops]
    overtook = sum(any(t0 < ta and t1 > tr for t0, t1 in spans)
                   for _, _, ta, tr in reader.served)
    acc = [ta for _, _, ta, _ in reader.served]
    print(env.n, "cycles;", len(env.program), "instructions; remote reads taken with bank "
          "work in flight", env.remote_busy, "while a bank instruction waited",
          len(env.remote_races), "answered before it", won, "overtaking one", overtook,
          "out of request order", acc != sorted(acc), perf)
    assert env.remote_busy >= 40, env.remote_busy
    assert len(env.remote_races) >= 5, env.remote_races
    if cfg.ipim.scheduler == "fcfs":
        assert won == len(env.remote_races), (won, env.remote_races)
    else:
        assert won >= len(env.remote_races) // 2, (won, env.remote_races)
    assert overtook >= 5, overtook
    if cfg.ipim.scheduler == "frfcfs":
        assert acc != sorted(acc), "remote reads answered in request order only"
