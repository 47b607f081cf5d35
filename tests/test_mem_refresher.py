"""Refresher: one refresh owed per tREFI, counted until issued, never dropped."""

import logging
import random

import pytest

from pimforge.rtl.mem.refresher import MAX_OWED, Refresher
from pimforge.rtl.params import ParameterError
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_refresher_counts_owed_refreshes(seed):
    r = random.Random(seed)
    log.info("seed %d", seed)
    trefi = r.randint(3, 12)
    dut = Refresher(tREFI=trefi)
    seen = {"due_and_issued": 0, "max_owed": 0}

    async def tb(ctx):
        owed, refi = 0, trefi - 1
        # A slow scheduler lets refreshes pile up, a fast one answers at once:
        # both ends, and an issue in the very cycle a new one falls due.
        for cyc in range(40 * trefi):
            assert ctx.get(dut.pending) == (owed > 0), (seed, cyc, owed)
            slow = (cyc // (6 * trefi)) % 2 == 0
            issue = owed > 0 and r.random() < (0.05 if slow else 0.9)
            ctx.set(dut.issued, issue)
            due = refi == 0
            seen["due_and_issued"] += due and issue
            owed += due - issue
            refi = trefi - 1 if due else refi - 1
            seen["max_owed"] = max(seen["max_owed"], owed)
            assert owed <= MAX_OWED
            await ctx.tick()

    simulate(dut, tb)
    assert seen["max_owed"] >= 2


def test_refresher_parameter_check():
    with pytest.raises(ParameterError, match="tREFI must be an integer between 1 and 16777216"):
        Refresher(tREFI=0)
