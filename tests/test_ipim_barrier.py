"""The iPIM sync barrier: nobody proceeds early, everybody proceeds once, phases checked."""

import gc
import logging
import random
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from pimforge.rtl.ipim.barrier import SyncBarrier
from pimforge.rtl.params import ParameterError
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)


def _run(latency, arrive_at, phases, halted=(), rounds=1, limit=400):
    """Vault v raises arrive at cycle arrive_at[r][v] of round r (None: never); returns the
    cycles each vault saw proceed, per round, and the error output at the end."""
    n = len(latency)
    dut = SyncBarrier(latency=tuple(latency))
    seen = [[[] for _ in range(n)] for _ in range(rounds)]
    out = {}

    async def tb(ctx):
        for v in halted:
            ctx.set(dut.halted.bit_select(v, 1), 1)
        rnd = [0] * n
        waiting = [False] * n
        base = [0] * n
        for cyc in range(limit):
            for v in range(n):
                port = dut.vault[v]
                if ctx.get(port.proceed):
                    assert waiting[v], f"vault {v} got proceed without arriving (cycle {cyc})"
                    seen[rnd[v]][v].append(cyc)
                    waiting[v] = False
                    ctx.set(port.arrive, 0)
                    rnd[v] += 1
                    base[v] = cyc
                if (not waiting[v] and rnd[v] < rounds and v not in halted
                        and arrive_at[rnd[v]][v] is not None
                        and cyc >= base[v] + arrive_at[rnd[v]][v]):
                    waiting[v] = True
                    ctx.set(port.arrive, 1)
                    ctx.set(port.phase, phases[rnd[v]][v])
            await ctx.tick()
        out["error"] = ctx.get(dut.error)
        out["barriers"] = ctx.get(dut.barriers)

    simulate(dut, tb)
    return seen, out


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_barrier_releases_everyone_once_after_the_last_arrival(seed):
    r = random.Random(seed)
    log.info("seed %d", seed)
    n = r.choice([2, 3, 4, 8])
    latency = [1] + [r.randint(1, 6) for _ in range(n - 1)]
    rounds = 3
    arrive_at = [[r.randint(0, 20) for _ in range(n)] for _ in range(rounds)]
    phases = [[k] * n for k in range(rounds)]
    seen, out = _run(latency, arrive_at, phases, rounds=rounds)
    assert out["error"] == 0
    assert out["barriers"] == rounds
    for k in range(rounds):
        assert all(len(s) == 1 for s in seen[k]), seen[k]
        # One broadcast: proceed reaches vault v latency[v] after it, so
        # proceed - latency is the same for every vault ...
        go = {seen[k][v][0] - latency[v] for v in range(n)}
        assert len(go) == 1, (seen[k], latency)
        # ... and no earlier than the last arrival message landed.
        prev = [seen[k - 1][v][0] if k else 0 for v in range(n)]
        last_landing = max(prev[v] + arrive_at[k][v] + latency[v] for v in range(n))
        assert go.pop() >= last_landing


def test_barrier_latency_is_exact():
    # Two vaults: vault 1 arrives at cycle 5, 3 cycles from the master; vault 0 at 0.
    seen, _ = _run([1, 3], [[0, 5]], [[0, 0]])
    # Vault 1's message: raised in cycle 5, lands after 3 cycles, broadcast the
    # cycle after; proceed 3 cycles later at vault 1 and 1 at the master.
    go = seen[0][1][0] - 3
    assert seen[0][0][0] == go + 1
    assert go == 5 + 3 + 1


def test_halted_vault_does_not_hold_the_barrier():
    seen, out = _run([1, 2, 2], [[3, 4, None]], [[7, 7, 0]], halted=(2,))
    assert len(seen[0][0]) == len(seen[0][1]) == 1 and seen[0][2] == []
    assert out["error"] == 0 and out["barriers"] == 1


def test_nobody_proceeds_while_one_vault_is_missing():
    seen, out = _run([1, 2, 2], [[0, 1, None]], [[0, 0, 0]], limit=200)
    assert seen[0] == [[], [], []] and out["barriers"] == 0


def test_phase_mismatch_is_flagged():
    seen, out = _run([1, 2], [[0, 0]], [[1, 2]])
    assert out["error"] == 1
    assert all(len(s) == 1 for s in seen[0])


def test_barrier_parameters():
    with warnings.catch_warnings():
        # The rejected component would warn that it was never elaborated.
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ParameterError, match=r"latency\[1\] must be an integer number"):
            SyncBarrier(latency=(1, 0))
        gc.collect()
