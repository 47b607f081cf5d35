"""DESCNet DSE: Algorithms 1-2 on hand-checkable cases, Pareto front, selection."""

import numpy as np
import pytest

from pimforge.gen.errors import UnknownNameError
from pimforge.sim.descnet import dse as spm
from pimforge.sim.descnet import sram
from pimforge.sim.descnet.profiles import Op, Profile, profile

K = 1024


def test_rounding_and_sigma():
    assert spm.round_up(25 * K) == 25 * K and spm.round_up(25 * K + 1) == 32 * K
    assert spm.round_up(0) == 0
    assert spm.round_down(30 * K) == 25 * K and spm.round_down(100) == K
    assert spm.sigma(25 * K) == [2, 4, 8, 16]
    assert spm.sigma(25 * K, None) == [2, 4, 8, 16, 32, 64, 128]    # [2, 200]
    assert spm.sigma(256, None) == [2] and spm.sigma(255, None) == []
    assert len(spm.algorithm2(0, 4 * K, 2 * K, 512, None)) == 1 * 5 * 4 * 2


def test_algorithm1_by_hand():
    sizes = np.array([K, 2 * K, 4 * K, 8 * K])
    D = np.array([1 * K, 3 * K])
    W = np.array([2 * K, 1 * K])
    A = np.array([4 * K, 2 * K])
    got = {tuple(int(v) for v in t) for t in spm.algorithm1(D, W, A, sizes)}
    # sz_d in {1K, 2K, 4K} (min 1K .. round_up(3K) = 4K), sz_w in {1K, 2K}, sz_a in {2K, 4K}.
    exp = set()
    for d in (K, 2 * K, 4 * K):
        for w in (K, 2 * K):
            for a in (2 * K, 4 * K):
                need = max(max(0, Di - d) + max(0, Wi - w) + max(0, Ai - a)
                           for Di, Wi, Ai in zip(D, W, A))
                exp.add((int(spm.round_up(need, sizes)), d, w, a))
    assert got == exp
    assert (0, 4 * K, 2 * K, 4 * K) in got          # the SEP boundary case
    # sz = (d 1K, w 1K, a 2K): op 0 spills 0 + 1K + 2K, op 1 spills 2K: 3K -> 4K shared.
    assert (4 * K, K, K, 2 * K) in got


def tiny_profile():
    ops = [Op("a", "conv", D=4 * K, W=K, A=8 * K, rd=(100, 10, 50), wr=(10, 10, 50),
              cycles=1000, macs=10),
           Op("b", "conv", D=K, W=8 * K, A=K, rd=(10, 100, 5), wr=(1, 100, 5),
              cycles=3000, macs=10)]
    return Profile("tiny", ops)


def test_explore_boundaries_and_energy_by_hand():
    p = tiny_profile()
    sp = spm.explore(p, ("SMP", "SEP", "SEP-PG"))
    smp = np.flatnonzero(sp.org == 0)
    assert len(smp) == 1 and list(sp.size[smp[0]]) == [16 * K, 0, 0, 0]   # max(13K, 10K) -> 16K
    sep = np.flatnonzero(sp.org == 1)
    assert list(sp.size[sep[0]]) == [0, 4 * K, 8 * K, 8 * K]
    # Static energy of SEP = leakage x inference time.
    T_ms = p.total_seconds * 1e3
    leak = sum(float(sram.leak_mw(s)) for s in (4 * K, 8 * K, 8 * K))
    assert np.isclose(sp.parts[sep[0], 1], leak * T_ms * 1e-3)
    # Dynamic: accesses x bytes x pJ/byte.
    dyn = (float(sram.access_pj(4 * K)) * (110 + 11) + float(sram.access_pj(8 * K)) * (20 + 200)
           + float(sram.access_pj(8 * K)) * 4 * (100 + 10))
    assert np.isclose(sp.parts[sep[0], 0], dyn * 1e-9)
    pg = np.flatnonzero(sp.org == 2)
    assert len(pg) == 4 ** 3                       # sigma: {2, 4, 8, 16} for each memory
    # A 2-sector data memory: op a uses both sectors (4K of 4K), op b one (1K): the second
    # sector is ON for op a only.
    i = [j for j in pg if tuple(sp.sectors[j][1:]) == (2, 2, 2)][0]
    t = p.seconds * 1e3
    exp = 0.0
    for size, use in ((4 * K, (4 * K, K)), (8 * K, (K, 8 * K)), (8 * K, (8 * K, K))):
        lk = float(sram.leak_mw(size))
        for u, ti in zip(use, t):
            on = np.ceil(u / (size / 2))
            exp += lk * (on / 2 + sram.OFF_LEAK * (1 - on / 2)) * ti
        exp += float(sram.pg_leak_mw(size, 1, 2)) * t.sum()
    assert np.isclose(sp.parts[i, 1], exp * 1e-3)


def test_pareto_front_properties():
    rng = np.random.default_rng(1)
    a, e = rng.random(3000), rng.random(3000)
    a[:10] = a[10]                                  # ties in area
    f = spm.pareto_front(a, e)
    fa, fe = a[f], e[f]
    assert np.all(np.diff(fa) >= 0) and np.all(np.diff(fe) < 0)
    for i in f:                                     # nobody dominates a front point
        assert not np.any((a <= a[i]) & (e <= e[i]) & ((a < a[i]) | (e < e[i])))
    rest = np.setdiff1d(np.arange(3000), f)
    for i in rest[:300]:                            # every other point is dominated
        assert np.any((fa <= a[i]) & (fe <= e[i]))


def test_capsnet_dse_selection_and_speed():
    r = spm.run_dse(profile("capsnet"), list(spm.ORGANIZATIONS))
    sp = r.space
    assert r.seconds < 20
    for oi, org in enumerate(sp.orgs):
        ids = np.flatnonzero(sp.org == oi)
        assert sp.energy[r.selected[org]] == sp.energy[ids].min()
    # Power gating never makes the selected configuration worse than its ungated sizes.
    for org in ("SMP", "SEP", "HY"):
        assert sp.energy[r.selected[org + "-PG"]] < sp.energy[r.selected[org]]
    # The HY space contains no SEP duplicates, and shared-port limits hold.
    prof = profile("capsnet")
    for org, ps in (("HY-PS1", 1), ("HY-PG-PS2", 2)):
        i = r.selected[org]
        X = prof.usage
        over = (X > sp.size[i][1:][None, :]).sum(axis=1)
        assert over.max() <= ps
    hy = np.flatnonzero(sp.org == sp.orgs.index("HY"))
    assert np.all(sp.size[hy, 0] > 0)
    front = set(r.pareto.tolist())
    assert front and all(sp.area[i] > 0 for i in front)


def test_unknown_org():
    with pytest.raises(UnknownNameError, match="allowed: SMP"):
        spm.explore(tiny_profile(), ("XY",))
