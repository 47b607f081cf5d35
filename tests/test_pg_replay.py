"""Simulated power gating on the Verilated organization RTL (one native build, cached)."""

import numpy as np

from pimforge.sim.descnet import dse as spm
from pimforge.sim.descnet.pg_replay import WAKEUP_CYCLES, replay, schedule
from pimforge.sim.descnet.profiles import Op, Profile

K = 1024


def three_ops():
    def mk(n, d, w, a, c):
        return Op(n, "conv", D=d, W=w, A=a, rd=(10, 10, 10), wr=(1, 1, 1),
                                      cycles=c, macs=1)
    return Profile("tiny", [mk("a", 4 * K, K, 8 * K, 3000),
                            mk("b", K, 8 * K, K, 5000),
                            mk("c", 2 * K, 2 * K, 3 * K, 2000)])


def test_schedule_on_sectors():
    rows = schedule(three_ops(), (0, 4 * K, 8 * K, 8 * K), (1, 4, 4, 8))
    assert [r[0] for r in rows] == [3000, 5000, 2000]
    assert [r[1] for r in rows] == [[0, 4, 1, 8], [0, 1, 4, 1], [0, 2, 1, 3]]


def test_replay_counts_on_cycles():
    prof = three_ops()
    sizes, sectors = (0, 4 * K, 8 * K, 8 * K), (1, 4, 4, 8)
    rep = replay(prof, "SEP-PG", sizes, sectors)
    assert rep["errors"] == 0 and rep["accesses"] == 3 * 10000
    assert rep["cycles_simulated"] == 10000
    on = rep["on_cycles"]
    lead = WAKEUP_CYCLES + 1
    # Data sector 0 is needed in every op; sector 3 only in op a.
    assert on["data"][0] == 10000
    assert 3000 <= on["data"][3] <= 3000 + 2
    # Weight sectors 1..3 are needed from op b on: woken `lead` cycles early, asleep in c.
    for s in (1, 2, 3):
        assert 5000 + lead - WAKEUP_CYCLES - 2 <= on["weight"][s] - 1 <= 5000 + lead
    # The analytical estimate switches instantly; the simulation differs by the edges.
    sp = spm.explore(prof, ("SEP-PG",))
    i = [j for j in range(len(sp)) if tuple(sp.sectors[j][1:]) == (4, 4, 8)][0]
    assert np.isclose(rep["static_mj_simulated"], sp.parts[i, 1], rtol=0.01)
