"""The PG's ACT window: random ``want`` patterns against the tRRDS/tRRDL/tFAW rules,
work conservation, liveness and round-robin order."""

import gc
import logging
import random
import re
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from pimforge.rtl.ipim.act_window import ActWindow
from pimforge.rtl.params import ParameterError
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)

NEVER = -(10**9)

# pes, t_rrd_s, t_rrd_l, t_faw, bank_groups: iPIM's Table III (each PE its own bank
# group), bank groups shared by PEs with tRRDL binding, tFAW binding hard, one cycle
# everywhere (an ACT every cycle), one PE, groups that do not divide the PEs.
PARAMS = [(4, 4, 6, 16, 4), (8, 2, 5, 12, 2), (6, 3, 9, 10, 3), (3, 1, 1, 1, 4),
          (1, 3, 3, 20, 4), (5, 1, 4, 30, 2)]


class WindowModel:
    """The rules of :class:`ActWindow`'s docstring, on the grants seen so far."""

    def __init__(self, pes, t_rrd_s, t_rrd_l, t_faw, bank_groups):
        self.pes, self.bg = pes, bank_groups
        self.t_rrd_s, self.t_rrd_l, self.t_faw = t_rrd_s, t_rrd_l, t_faw
        self.last = NEVER
        self.group = {}
        self.acts = []

    def allows(self, c, p):
        g = p % self.bg
        return (c - self.last >= self.t_rrd_s and c - self.group.get(g, NEVER) >= self.t_rrd_l
                and (len(self.acts) < 4 or c - self.acts[-4] >= self.t_faw))

    def grant(self, c, p):
        self.last = c
        self.group[p % self.bg] = c
        self.acts = (self.acts + [c])[-4:]


def run_window(params, want_of, cycles, seed):
    """Simulate; *want_of(c, granted_last)* gives the want bits of cycle c. Returns the
    grant list [(cycle, pe)] and the violations found."""
    pes = params[0]
    dut = ActWindow(pes=pes, t_rrd_s=params[1], t_rrd_l=params[2], t_faw=params[3],
                    bank_groups=params[4])
    model = WindowModel(*params)
    grants, bad = [], []

    async def tb(ctx):
        last = None
        for c in range(cycles):
            want = want_of(c, last)
            ctx.set(dut.want, sum(1 << p for p in want))
            ok = ctx.get(dut.ok)
            got = [p for p in range(pes) if ok >> p & 1]
            where = f"seed {seed} params {params} cycle {c}"
            if len(got) > 1:
                bad.append(f"{where}: {len(got)} grants {got}")
            for p in got:
                if p not in want:
                    bad.append(f"{where}: grant to PE {p}, which does not want")
                if not model.allows(c, p):
                    bad.append(f"{where}: grant to PE {p} breaks the window (last "
                               f"{model.last}, group {model.group}, last four {model.acts})")
            if not got and any(model.allows(c, p) for p in want):
                bad.append(f"{where}: no grant, though {want} want and the window allows")
            last = got[0] if got else None
            if last is not None:
                model.grant(c, last)
                grants.append((c, last))
            await ctx.tick()

    simulate(dut, tb, period=1e-9)
    return grants, bad


@pytest.mark.parametrize("params", PARAMS)
def test_sticky_wants_are_granted_in_time(params):
    """Each PE wants with some probability and keeps wanting until granted (a
    controller's ACT waits for its grant): window rules, work conservation, and
    every wait below the docstring's bound."""
    seed = 100 + PARAMS.index(params)
    r = random.Random(seed)
    log.info("seed %d", seed)
    print(f"seed {seed}")
    pes, t_rrd_s, t_rrd_l, t_faw, _ = params
    bound = pes * (t_rrd_l + max(t_rrd_s, t_faw))
    p_new = r.choice([0.05, 0.3, 0.9])
    since = {}
    waits = []

    def want_of(c, granted):
        if granted is not None:
            waits.append(c - 1 - since.pop(granted))
        for p in range(pes):
            if p not in since and r.random() < p_new:
                since[p] = c
        return set(since)

    grants, bad = run_window(params, want_of, 3000, seed)
    for p, c0 in since.items():
        if 3000 - c0 > bound:
            bad.append(f"PE {p} wants from cycle {c0} and is not granted by the end")
    assert not bad, "\n".join(bad[:10])
    print(f"{len(grants)} grants, longest wait {max(waits)} (bound {bound})")
    assert max(waits) <= bound, (seed, max(waits), bound)
    assert {p for _, p in grants} == set(range(pes))


@pytest.mark.parametrize("params", PARAMS)
def test_random_wants_keep_the_window(params):
    """``want`` bits that come and go at random in any cycle: the rules and work
    conservation still hold."""
    seed = 200 + PARAMS.index(params)
    r = random.Random(seed)
    log.info("seed %d", seed)
    print(f"seed {seed}")
    pes = params[0]
    density = r.choice([0.1, 0.5, 1.0])
    grants, bad = run_window(params, lambda c, _: {p for p in range(pes)
                                                   if r.random() < density}, 3000, seed)
    assert not bad, "\n".join(bad[:10])
    assert grants


@pytest.mark.parametrize("params", PARAMS)
def test_everyone_wanting_is_served_round_robin(params):
    """Every PE wants in every cycle: where the bank groups divide the PEs, the grants
    go 0, 1, ..., pes - 1, 0, ...; otherwise (a group wraps from the last PE to the
    first) no PE gets less than half of another's share. Either way at the rate the
    window allows."""
    pes, bg = params[0], params[4]
    grants, bad = run_window(params, lambda c, _: set(range(pes)), 600, 0)
    assert not bad, "\n".join(bad[:10])
    order = [p for _, p in grants]
    if pes % bg == 0 or pes <= bg:
        assert order == [i % pes for i in range(len(order))], order[:20]
    else:
        counts = [order.count(p) for p in range(pes)]
        assert 2 * min(counts) + 2 >= max(counts), counts
    assert len(order) >= 600 // max(params[1:4]) - 1


@pytest.mark.parametrize("kw, msg", [
    ({"pes": 0}, "pes must be an integer between 1 and 64, not 0"),
    ({"t_rrd_l": 2}, "t_rrd_l must be at least t_rrd_s (4), not 2"),
    ({"t_faw": 0}, "t_faw must be an integer between 1 and 4096, not 0"),
    ({"bank_groups": 0}, "bank_groups must be an integer between 1 and 64, not 0"),
])
def test_parameters_are_checked(kw, msg):
    args = {"pes": 4, "t_rrd_s": 4, "t_rrd_l": 6, "t_faw": 16} | kw
    with warnings.catch_warnings():
        # The rejected component would warn that it was never elaborated.
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ParameterError, match=re.escape(msg)):
            ActWindow(**args)
        gc.collect()
