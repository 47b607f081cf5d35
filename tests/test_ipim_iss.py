"""The SIMB instruction-set simulator against hand-computed results, and ``pimforge simb``."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import load_config
from pimforge.gen.errors import CapacityError
from pimforge.rtl.ipim.asm import assemble, to_hex
from pimforge.verif.models.fp32 import QNAN, bits_of, corner_values, ref_add, ref_mul
from pimforge.verif.models.ipim.iss import MachineError, SIMBMachine

SEED = 4242
M32 = 0xFFFF_FFFF
ONE = 0x3F80_0000


def machine(**over) -> SIMBMachine:
    """The default machine: 1 cube x 4 vaults, 2 PGs x 2 PEs, 64 DataRF entries."""
    return SIMBMachine(load_config("default", {f"ipim.{k}": v for k, v in over.items()}))


def run(m: SIMBMachine, text: str, vaults=None) -> SIMBMachine:
    m.load(assemble(text + "\nhalt"), vaults)
    m.run()
    return m


def drf(m: SIMBMachine, entry: int, vault: int = 0) -> np.ndarray:
    return m.vaults[vault].drf[:, entry].copy()


def comp1(op: str, a, b, d=0, *, dtype: str = "int32") -> np.ndarray:
    """``comp.DTYPE.OP d3, d1, d2`` on PE 0 with d1 = a, d2 = b, d3 = d (scalars or lanes)."""
    m = machine()
    v = m.vaults[0]
    v.drf[0, 1] = a
    v.drf[0, 2] = b
    v.drf[0, 3] = d
    run(m, f"comp.{dtype}.{op} d3, d1, d2 mask=1")
    return v.drf[0, 3].copy()


def u(x: int) -> int:
    return x & M32


# -- the integer ALU -------------------------------------------------------------------

@pytest.mark.parametrize("op, a, b, d, want", [
    ("add", M32, 1, 0, 0),                                  # wraps
    ("add", 0x7FFFFFFF, 1, 0, 0x80000000),
    ("sub", 0, 1, 0, M32),
    ("sub", 5, u(-3), 0, 8),
    ("mul", 0x10000, 0x10000, 0, 0),                        # low 32 bits of 2**32
    ("mul", u(-3), 5, 0, u(-15)),
    ("mul", 0x12345678, 0x9ABCDEF, 0, (0x12345678 * 0x9ABCDEF) & M32),
    ("mac", 3, 4, 10, 22),
    ("mac", M32, M32, 7, 8),                                # (-1)(-1) + 7
    ("shift", 1, 31, 0, 0x80000000),
    ("shift", 1, 32, 0, 0),                                 # |b| >= 32: 0
    ("shift", 0xF0, 100, 0, 0),
    ("shift", 0x80000000, u(-31), 0, M32),                  # arithmetic
    ("shift", 0x80000000, u(-32), 0, M32),                  # saturates to the sign
    ("shift", 0x7FFFFFFF, u(-32), 0, 0),
    ("shift", u(-8), u(-1), 0, u(-4)),
    ("shift", 0x40000000, u(-(1 << 31)), 0, 0),             # b = INT32_MIN
    ("shift", u(-1), 0x80000000, 0, M32),
    ("shift", 0x1234, 0, 0, 0x1234),
    ("and", 0xF0F0, 0xFF00, 0, 0xF000),
    ("or", 0xF0F0, 0xFF00, 0, 0xFFF0),
    ("xor", 0xF0F0, 0xFF00, 0, 0x0FF0),
    ("crop_lsb", 0xDEADBEEF, 8, 0, 0xEF),
    ("crop_lsb", 0xDEADBEEF, 0, 0, 0),
    ("crop_lsb", 0xDEADBEEF, 32, 0, 0xDEADBEEF),
    ("crop_lsb", 0xDEADBEEF, 40, 0, 0xDEADBEEF),            # clamped to 32
    ("crop_lsb", 0xDEADBEEF, u(-1), 0, 0),                  # negative: 0
    ("crop_msb", 0xDEADBEEF, 4, 0, 0xD0000000),
    ("crop_msb", 0xDEADBEEF, 0, 0, 0),
    ("crop_msb", 0xDEADBEEF, 32, 0, 0xDEADBEEF),
    ("crop_msb", 0xDEADBEEF, 33, 0, 0xDEADBEEF),
    ("crop_msb", 0xDEADBEEF, u(-5), 0, 0),
])
def test_int32_comp(op, a, b, d, want):
    assert list(comp1(op, a, b, d)) == [want] * 4


def test_int_alus_of_addrrf_and_ctrlrf():
    m = machine()
    v = m.vaults[0]
    v.arf[:, 5] = [10, 20, 30, 40]
    v.arf[:, 6] = u(-3)
    run(m, """
        calc_arf.mul a7, a5, a6
        calc_arf.shift a8, a5, a0        # a << peID
        calc_arf.crop_msb a9, a6, a1     # pgID bits of -3
        seti_crf c1, 0x7fffffff
        seti_crf c2, 1
        calc_crf.add c3, c1, c2
        calc_crf.shift c4, c3, c5        # c5 = 0
        seti_crf c6, -28
        calc_crf.shift c7, c3, c6
    """)
    assert list(v.arf[:, 7]) == [u(-30), u(-60), u(-90), u(-120)]
    assert list(v.arf[:, 8]) == [10, 40, 30, 80]
    assert list(v.arf[:, 9]) == [0, 0, 0x80000000, 0x80000000]
    assert v.crf[3] == 0x80000000 and v.crf[4] == 0x80000000
    assert v.crf[7] == u(-8)


# -- FP32 --------------------------------------------------------------------------------

def test_fp32_add_sub_mul_mac_against_the_integer_reference():
    # Corner operands in every lane combination, checked against the exact integer
    # model (not the numpy one the ISS uses), MAC as two roundings.
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    vals = corner_values()
    m = machine(drf_bytes=4096)         # 256 entries
    v = m.vaults[0]
    n = 200
    trip = [(rng.choice(vals), rng.choice(vals), rng.choice(vals)) for _ in range(n * 4)]
    arr = np.array(trip, dtype=np.uint32).reshape(n, 4, 3)
    # PE p holds batch p of 50 triples in entries 0..49 (a), 50..99 (b), 100..149 (d)
    per = n // 4
    for p in range(4):
        blk = arr[p * per:(p + 1) * per]
        v.drf[p, 0:per] = blk[..., 0]
        v.drf[p, per:2 * per] = blk[..., 1]
        v.drf[p, 2 * per:3 * per] = blk[..., 2]
    lines = []
    for i in range(per):
        lines.append(f"comp.fp32.add d{150 + i}, d{i}, d{per + i}")
    for i in range(per):
        lines.append(f"comp.fp32.mac d{2 * per + i}, d{i}, d{per + i}")
    m.load(assemble("\n".join(lines) + "\nhalt"))
    m.run()
    for p in range(4):
        blk = arr[p * per:(p + 1) * per]
        for i in range(per):
            for lane in range(4):
                a, b, d = (int(x) for x in blk[i, lane])
                assert v.drf[p, 150 + i, lane] == ref_add(a, b), (hex(a), hex(b))
                assert v.drf[p, 2 * per + i, lane] == ref_add(d, ref_mul(a, b)), \
                    (hex(a), hex(b), hex(d))
    # SUB and MUL one machine per vector of lanes, to keep the entry map above simple
    for op, ref in (("sub", lambda a, b: ref_add(a, b ^ 0x80000000)), ("mul", ref_mul)):
        for i in range(0, len(trip), 4):
            a = [t[0] for t in trip[i:i + 4]]
            b = [t[1] for t in trip[i:i + 4]]
            got = comp1(op, a, b, dtype="fp32")
            assert list(got) == [ref(x, y) for x, y in zip(a, b, strict=True)]


def test_fp32_mac_rounds_twice():
    # (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24 rounds (tie, to even) to 1 + 2**-11, so
    # adding -(1 + 2**-11) gives +0; a fused MAC would give 2**-24.
    a = 0x3F800800
    got = comp1("mac", a, a, 0xBF801000, dtype="fp32")
    assert list(got) == [0] * 4


@pytest.mark.parametrize("a, b, want", [
    (ONE, 3, bits_of(8.0)),
    (ONE, u(-1), bits_of(0.5)),
    (bits_of(-1.5), 2, bits_of(-6.0)),
    (0x7F7FFFFF, 1, 0x7F800000),             # overflow to inf
    (0xFF7FFFFF, 1, 0xFF800000),
    (0x00000001, u(-1), 0x00000000),         # 2**-150: tie to even, 0
    (0x00000003, u(-1), 0x00000002),         # 1.5 * 2**-149: tie to even, up
    (0x00800000, u(-1), 0x00400000),         # into the subnormals, exact
    (0x00000001, 149, ONE),                  # subnormal up to 1.0
    (ONE, 1000, 0x7F800000),                 # b beyond the unit's k: same result
    (ONE, u(-1000), 0),
    (0x80000001, u(-(1 << 31)), 0x80000000),  # -tiny, b = INT32_MIN: -0
    (0x00000001, 0x7FFFFFFF, 0x7F800000),
    (0x80000000, 5, 0x80000000),             # -0 stays -0
    (0x7F800000, u(-200), 0x7F800000),       # inf stays inf
    (0x7F800001, 3, QNAN),                   # NaN is made canonical
    (0xFFC00001, 0, QNAN),
])
def test_fp32_shift(a, b, want):
    assert list(comp1("shift", a, b, dtype="fp32")) == [want] * 4


# -- masks, modes, lanes ------------------------------------------------------------------

def test_ipim_mask_and_vec_mask_partial():
    m = machine()
    v = m.vaults[0]
    v.drf[:, 1] = np.arange(16, dtype=np.uint32).reshape(4, 4) + 100
    v.drf[:, 2] = 1
    v.drf[:, 3] = 7
    run(m, "comp.int32.add d3, d1, d2 mask=0b0110 vec=0b0101")
    want = np.full((4, 4), 7, dtype=np.uint32)
    for p in (1, 2):
        for lane in (0, 2):
            want[p, lane] = 100 + 4 * p + lane + 1
    assert (v.drf[:, 3] == want).all()


def test_mask_bits_beyond_the_pes_are_ignored():
    m = run(machine(), "seti_crf c0, 5\ncomp.int32.add d1, d1, d0 mask=all\n"
                       "comp.int32.add d2, d2, d0 mask=0xfffffffffffffff0")
    assert (drf(m, 1) == 0).all() and (drf(m, 2) == 0).all()   # d0 = 0: still 0
    m = machine()
    m.vaults[0].drf[:, 0] = 3
    run(m, "comp.int32.add d1, d1, d0\ncomp.int32.add d2, d2, d0 mask=0xfffffffffffffff0")
    assert (drf(m, 1) == 3).all() and (drf(m, 2) == 0).all()


def test_sv_mode_broadcasts_one_lane():
    m = machine()
    v = m.vaults[0]
    v.drf[:, 1] = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
    v.drf[:, 2] = [10, 100, 1000, 10000]
    run(m, "comp.int32.mul d3, d1[2], d2\ncomp.int32.sub d4, d1[0], d2 vec=0b1000")
    assert [list(r) for r in v.drf[:, 3]] == [[30, 300, 3000, 30000], [70, 700, 7000, 70000],
                                              [110, 1100, 11000, 110000],
                                              [150, 1500, 15000, 150000]]
    assert list(v.drf[:, 4, 3]) == [u(1 - 10000), u(5 - 10000), u(9 - 10000), u(13 - 10000)]
    assert (v.drf[:, 4, :3] == 0).all()


def test_mov_between_the_register_files_and_reset():
    m = machine()
    v = m.vaults[0]
    v.drf[:, 1] = np.arange(16, dtype=np.uint32).reshape(4, 4)
    v.drf[:, 5] = 9
    run(m, """
        mov_arf a10, d1[3]
        mov_drf d2[1], a10 mask=0b1001
        mov_drf d3[0], a0        # peID
        mov_drf d3[1], a1        # pgID
        mov_drf d3[2], a2        # vaultID
        mov_drf d3[3], a3        # chipID
        reset d5 mask=0b0100
    """)
    assert list(v.arf[:, 10]) == [3, 7, 11, 15]
    assert [list(r) for r in v.drf[:, 2]] == [[0, 3, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0],
                                              [0, 15, 0, 0]]
    assert [list(r) for r in v.drf[:, 3]] == [[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0],
                                              [1, 1, 0, 0]]
    assert list(v.drf[:, 5, 0]) == [9, 9, 0, 9]


def test_ids_in_the_reserved_addrrf_entries():
    m = machine(cubes=2, vaults=2, pgs=2, pes_per_pg=4)
    v = m.vaults[m.vault_index(1, 1)]
    assert list(v.arf[:, 0]) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert list(v.arf[:, 1]) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (v.arf[:, 2] == 1).all() and (v.arf[:, 3] == 1).all()
    assert m.vault_index(1, 1) == 3


# -- memories ----------------------------------------------------------------------------

def test_bank_direct_and_indirect():
    m = machine()
    for p in range(4):
        m.write_bank(0, p, 0x20, np.arange(8, dtype=np.uint32).reshape(2, 4) + 100 * p)
    v = m.vaults[0]
    v.arf[:, 5] = [0x20, 0x21, 0x21, 0x20]
    v.arf[:, 6] = [0x40, 0x41, 0x42, 0x43]
    run(m, """
        ld_rf d1, [0x21]
        ld_rf d4, [a5] mask=0x7
        st_rf [a6], d4
        st_rf [0x50], d1 mask=0x8
    """)
    assert [list(r) for r in v.drf[:, 1]] == [[4 + 100 * p + i for i in range(4)]
                                              for p in range(4)]
    want4 = [[0, 1, 2, 3], [104, 105, 106, 107], [204, 205, 206, 207], [0, 0, 0, 0]]
    assert [list(r) for r in v.drf[:, 4]] == want4
    for p in range(4):
        assert list(m.read_bank(0, p, 0x40 + p)[0]) == want4[p]
    assert list(m.read_bank(0, 3, 0x50)[0]) == [304, 305, 306, 307]
    assert not m.read_bank(0, 2, 0x50).any()
    assert not m.read_bank(1, 0, 0x20).any()       # other vaults untouched


def test_pgsm_sharing_and_the_highest_pe_wins():
    m = machine()
    v = m.vaults[0]
    for p in range(4):
        m.write_bank(0, p, 7, [p + 1] * 4)
    v.arf[:, 8] = [3, 4, 3, 4]
    run(m, """
        ld_pgsm [2], [7]               # PEs 0,1 -> PG0 line 2 (PE 1 wins), 2,3 -> PG1
        ld_pgsm [a8], [7] mask=0b0101  # PE0 -> PG0 line 3, PE2 -> PG1 line 3
        rd_pgsm d1, [2]
        rd_pgsm d2, pgsm[a8]
        st_pgsm [9], [2] mask=0b0001
        reset d3
        mov_drf d3[0], a0
        wr_pgsm [5], d3                # PE 1 writes PG0 line 5 last, PE 3 PG1 line 5
    """)
    assert [list(r[:, 0]) for r in v.pgsm[:, [2, 3, 4, 5]]] == [[2, 1, 0, 1], [4, 3, 0, 1]]
    assert list(v.drf[:, 1, 0]) == [2, 2, 4, 4]
    assert list(v.drf[:, 2, 0]) == [1, 0, 3, 0]
    assert list(m.read_bank(0, 0, 9)[0]) == [2] * 4


def test_vsm_and_seti_vsm_and_the_highest_pe_wins():
    m = machine()
    v = m.vaults[0]
    v.drf[:, 1] = np.arange(4, dtype=np.uint32)[:, None] + 10
    v.arf[:, 9] = [1, 2, 2, 1]
    run(m, """
        wr_vsm [3], d1 mask=0b0111     # PE 2 wins
        wr_vsm [a9], d1                # line 1: PE 3, line 2: PE 2
        seti_vsm [6], 0x55 vec=0b1010
        seti_vsm [7], fp32(1.0)
        rd_vsm d2, [3]
        rd_vsm d3, vsm[a9] mask=0b1000
    """)
    assert list(v.vsm[3]) == [12] * 4
    assert list(v.vsm[1]) == [13] * 4 and list(v.vsm[2]) == [12] * 4
    assert list(v.vsm[6]) == [0, 0x55, 0, 0x55]
    assert list(v.vsm[7]) == [ONE] * 4
    assert (v.drf[:, 2] == 12).all()
    assert list(v.drf[:, 3, 0]) == [0, 0, 0, 13]


# -- control flow ------------------------------------------------------------------------

def test_loop_with_labels_and_cjump():
    # sum bank vectors 0..4 of every PE into d0 (FP32), walking A4 by A5 = 1
    m = machine()
    for p in range(4):
        m.write_bank(0, p, 0, np.full((5, 4), bits_of(p + 0.5), dtype=np.uint32))
    prog = """
            seti_crf c0, 5
            seti_crf c1, @loop
            seti_crf c2, 1
    loop:   ld_rf d1, [a4]
            comp.fp32.add d0, d0, d1
            calc_arf.add a4, a4, a5
            calc_crf.sub c0, c0, c2
            cjump.nz c0, c1
    """
    m.vaults[0].arf[:, 5] = 1
    run(m, prog, vaults=[0])
    for p in range(4):
        assert list(m.vaults[0].drf[p, 0]) == [bits_of(5 * (p + 0.5))] * 4
    assert m.counts["ld_rf"] == 5 and m.counts["cjump"] == 5 and m.counts["halt"] == 1
    assert m.vaults[1].steps == 0 and m.vaults[1].halted   # no program: idle
    assert list(m.vaults[0].arf[:, 4]) == [5] * 4


@pytest.mark.parametrize("cond, value, taken", [
    ("z", 0, True), ("z", 1, False), ("nz", u(-1), True), ("nz", 0, False),
    ("ltz", u(-1), True), ("ltz", 0, False), ("ltz", 0x7FFFFFFF, False),
    ("gez", 0, True), ("gez", 0x80000000, False), ("gez", 5, True),
])
def test_cjump_conditions(cond, value, taken):
    m = machine()
    run(m, f"""
        seti_crf c0, {value}
        seti_crf c1, @skip
        cjump.{cond} c0, c1
        seti_crf c2, 1
    skip:
        seti_crf c3, 1
    """, vaults=[0])
    assert m.vaults[0].crf[2] == (0 if taken else 1)
    assert m.vaults[0].crf[3] == 1


def test_jump():
    m = run(machine(), "seti_crf c4, @end\njump c4\nseti_crf c5, 9\nend: nop", vaults=[0])
    assert m.vaults[0].crf[5] == 0 and m.counts["jump"] == 1


# -- sync and req ----------------------------------------------------------------------------

def neighbour_program(v: int, vaults: int, sync: str = "sync 1") -> str:
    """Write vault v's id to bank 0 of PE 0, sync, fetch the next vault's, sync, load it."""
    nxt = (v + 1) % vaults
    return f"""
        reset d1
        mov_drf d1[0], a2                # vaultID
        seti_crf c0, {v * 3}
        seti_crf c1, @spin
        seti_crf c2, 1
        seti_crf c3, @store
    spin:                                 # vaults reach the barrier at different times
        cjump.z c0, c3
        calc_crf.sub c0, c0, c2
        jump c1
    store:
        st_rf [0x10], d1 mask=1
        {sync}
        req [4], [0x10] vault={nxt} pg=0 pe=0
        sync 2
        rd_vsm d2, [4]
        halt
    """


def test_sync_orders_writes_before_remote_reads():
    m = machine(vaults=4)
    for v in range(4):
        m.load(assemble(neighbour_program(v, 4)), [v])
    m.run()
    for v in range(4):
        assert list(m.vaults[v].drf[:, 2, 0]) == [(v + 1) % 4] * 4, v
        assert m.vaults[v].halted
    assert m.syncs == 2 and m.counts["req"] == 4 and m.counts["sync"] == 8


def test_without_the_sync_the_remote_read_is_early():
    # The same exchange with the first sync removed reads a bank not yet written:
    # the test above would fail if sync did not hold vaults back.
    m = machine(vaults=4)
    for v in range(4):
        m.load(assemble(neighbour_program(v, 4, sync="nop")), [v])
    m.run()
    got = [int(m.vaults[v].drf[0, 2, 0]) for v in range(4)]
    assert got != [1, 2, 3, 0]


def test_req_from_another_cube_and_pe():
    m = machine(cubes=2, vaults=2)
    m.write_bank(m.vault_index(1, 0), 3, 0x33, [5, 6, 7, 8])    # PG 1, PE 1 of vault 0, cube 1
    run(m, "req [9], [0x33] chip=1 vault=0 pg=1 pe=1\nrd_vsm d1, [9]", vaults=[0])
    assert list(m.vaults[0].vsm[9]) == [5, 6, 7, 8]
    assert (m.vaults[0].drf[:, 1] == [5, 6, 7, 8]).all()


def test_halted_vaults_leave_the_barrier():
    m = machine(vaults=4)
    m.load(assemble("halt"), [0])
    m.load(assemble("sync 1\nsync 2\nseti_crf c1, 1\nhalt"), [1, 2, 3])
    m.run()
    assert all(v.halted for v in m.vaults) and m.syncs == 2
    assert [int(v.crf[1]) for v in m.vaults] == [0, 1, 1, 1]


def test_sync_phase_mismatch_is_an_error():
    m = machine(vaults=2)
    m.load(assemble("sync 1\nhalt"), [0])
    m.load(assemble("sync 2\nhalt"), [1])
    with pytest.raises(MachineError, match="different sync phases.*phase 1.*phase 2"):
        m.run()


# -- program errors, counts, state ------------------------------------------------------------

def test_runaway_program_stops():
    m = machine()
    m.load(assemble("seti_crf c0, 0\nloop: jump c0"), [0])
    m.load(assemble("halt"), [1, 2, 3])
    with pytest.raises(MachineError, match="vault 0 executed 500 instructions without halting"):
        m.run(max_steps=500)


def test_program_errors():
    with pytest.raises(MachineError, match="pc 1 is outside the program"):
        _run_all(assemble("nop"))
    with pytest.raises(MachineError, match=r"d64 is beyond the DataRF's 64 entries"):
        machine().load(assemble("reset d64"))
    with pytest.raises(MachineError, match=r"c32 is beyond the CtrlRF's 32 entries"):
        machine().load(assemble("seti_crf c32, 0"))
    with pytest.raises(MachineError, match=r"address 0x1000 is beyond the bank's 4096"):
        machine().load(assemble("ld_rf d1, [0x1000]"))
    with pytest.raises(MachineError, match=r"vault=4 names no vault"):
        machine().load(assemble("req [0], [0] vault=4"))
    with pytest.raises(CapacityError, match="program memory holds 16"):
        machine(imem_instructions=16).load(assemble("nop\n" * 17))
    m = machine()
    m.vaults[0].arf[2, 7] = 4096
    m.load(assemble("ld_rf d1, [a7]\nhalt"), [0])
    with pytest.raises(MachineError, match=r"PE 2 uses dram address A7 = 0x1000, beyond"):
        m.run()


def _run_all(prog):
    m = machine()
    m.load(prog)
    m.run()


def test_counts_and_state():
    m = machine(vaults=2)
    m.load(assemble("seti_crf c1, 7\nld_rf d1, [3]\nst_rf [4], d1\nst_rf [5], d2 mask=1\n"
                    "sync 0\nhalt"))
    m.write_bank(1, 2, 3, [1, 2, 3, 4])
    m.run()
    assert dict(m.counts) == {"seti_crf": 2, "ld_rf": 2, "st_rf": 4, "sync": 2, "halt": 2}
    s = m.state()
    assert s["drf"].shape == (2, 4, 64, 4) and s["arf"].shape == (2, 4, 64)
    assert s["pgsm"].shape == (2, 2, 64, 4) and s["vsm"].shape == (2, 256, 4)
    assert list(s["crf"][:, 1]) == [7, 7] and list(s["pc"]) == [5, 5]
    assert s["halted"].all()
    # the zero vector stored at bank 5 of PE 0 equals an unwritten one
    assert [list(r) for r in s["bank_addr"]] == [[1, 2, 3], [1, 2, 4]]
    assert (s["bank_data"] == [1, 2, 3, 4]).all()


# -- the command line --------------------------------------------------------------------------

PROGRAM = """
        seti_crf c0, 3
        seti_crf c1, @loop
        seti_crf c2, 1
        mov_drf d2[0], a0            # peID
loop:   comp.int32.add d1, d1, d2
        calc_crf.sub c0, c0, c2
        cjump.nz c0, c1
        st_rf [7], d1
        sync 1
        halt
"""


def test_cli_asm_disasm_run(tmp_path, capsys):
    src = tmp_path / "p.s"
    src.write_text(PROGRAM)
    hexf = tmp_path / "out" / "p.hex"
    hexf.parent.mkdir()
    assert main(["simb", "asm", str(src), "-o", str(hexf)]) == 0
    assert hexf.read_text() == to_hex(assemble(PROGRAM))
    capsys.readouterr()
    assert main(["simb", "disasm", str(hexf)]) == 0
    text = capsys.readouterr().out
    assert assemble(text) == assemble(PROGRAM)
    back = tmp_path / "back.s"
    assert main(["simb", "disasm", str(hexf), "--pcs", "-o", str(back)]) == 0
    assert assemble(back.read_text()) == assemble(PROGRAM)
    dump = tmp_path / "dump"
    assert main(["simb", "run", str(hexf), "--set", "ipim.vaults=2", "--dump", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "2 vaults" in out and "comp" in out
    summary = json.loads((dump / "state.json").read_text())
    assert summary["counts"]["comp"] == 6 and summary["syncs"] == 1
    drf_ = np.load(dump / "drf.npy")
    assert list(drf_[1, :, 1, 0]) == [0, 3, 0, 3]
    assert (np.load(dump / "bank_addr.npy")[:, 2] == 7).all()
    assert not list(dump.glob(".partial-*"))


def test_cli_errors(tmp_path, capsys):
    bad = tmp_path / "bad.s"
    bad.write_text("nop\ncmop d1\n")
    assert main(["simb", "asm", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.s:2: unknown mnemonic 'cmop'" in err
    assert main(["simb", "run", str(tmp_path / "missing.s")]) == 2
    assert "cannot read" in capsys.readouterr().err
    loop = tmp_path / "loop.s"
    loop.write_text("seti_crf c0, 0\njump c0\n")
    assert main(["simb", "run", str(loop), "--max-steps", "50"]) == 2
    assert "without halting" in capsys.readouterr().err
    assert main(["simb", "run", str(loop), "--set", "ipim.pgs=3"]) == 2
    assert "ipim.pgs" in capsys.readouterr().err
