"""Scheduler: what it may issue given the queue, the banks and a pending refresh."""

import logging
import random

import pytest

from pimforge.rtl.mem.port import Cmd, VaultPortSignature
from pimforge.rtl.mem.scheduler import Scheduler
from pimforge.rtl.mem.timing import Timing
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)

NB, Q = 4, 6
LAYOUT = VaultPortSignature(bank_bits=2, row_bits=3, col_bits=2, tag_bits=4, data_bits=8).req_layout
T = Timing(tRCD=2, tRP=2, tRAS=3, tRC=5, tCCD=2, tRRD=2, tFAW=6, tWR=2, tRTP=2, tWTR=2,
           tCL=3, tCWL=2, tBL=2, tRFC=6, tREFI=50)


def _sched(policy, page="open"):
    return Scheduler(timing=T, banks=NB, layout=LAYOUT, queue_depth=Q, scheduler=policy,
                     page_policy=page, starvation_limit=16)


def _set_state(ctx, dut, entries, banks, pending, space):
    for i in range(Q):
        ctx.set(dut.queue.valid[i], i < len(entries))
        e = entries[i] if i < len(entries) else {}
        ctx.set(dut.queue.entries[i], {"we": e.get("we", 0), "cls": 0, "bank": e.get("bank", 0),
                                       "row": e.get("row", 0), "col": e.get("col", 0),
                                       "tag": i, "data": 0})
    ctx.set(dut.queue.count, len(entries))
    for b, st in enumerate(banks):
        for k, v in st.items():
            ctx.set(getattr(dut.banks[b], k), v)
    ctx.set(dut.refresh.pending, pending)
    ctx.set(dut.resp_space, space)


@pytest.mark.parametrize("policy, page, seed", [("frfcfs", "open", 1), ("fcfs", "open", 2),
                                                ("frfcfs", "close", 3), ("fcfs", "close", 4)])
def test_scheduler_issues_only_legal_commands(policy, page, seed):
    r = random.Random(seed)
    log.info("seed %d", seed)
    dut = _sched(policy, page)
    kinds = {k: 0 for k in Cmd}

    async def tb(ctx):
        for cyc in range(600):
            n = r.randint(0, Q)
            idle = r.random() < 0.2  # every bank closed: REF may issue
            entries = [{"we": r.randrange(2), "bank": r.randrange(NB), "row": r.randrange(3),
                        "col": r.randrange(4)} for _ in range(n)]
            banks = []
            for _ in range(NB):
                is_open = not idle and r.random() < 0.6
                banks.append({"is_open": is_open, "open_row": r.randrange(3),
                              "act_ok": (not is_open) and (idle or r.random() < 0.8),
                              "pre_ok": is_open and r.random() < 0.8,
                              "col_ok": is_open and r.random() < 0.8})
            pending = r.random() < 0.15
            space = r.random() < 0.9
            _set_state(ctx, dut, entries, banks, pending, space)
            kind = Cmd(ctx.get(dut.cmd.kind))
            kinds[kind] += 1
            bank = ctx.get(dut.cmd.bank)
            sel = ctx.get(dut.sel)
            where = (seed, cyc, kind)
            assert ctx.get(dut.cmd.valid) == (kind != Cmd.NOP), where
            # Exactly the chosen bank sees the command; REF goes to all of them.
            for b in range(NB):
                for k, c in (("act", Cmd.ACT), ("pre", Cmd.PRE), ("rd", Cmd.RD), ("wr", Cmd.WR)):
                    assert ctx.get(getattr(dut.banks[b], k)) == (kind == c and b == bank), where
                assert ctx.get(dut.banks[b].ref) == (kind == Cmd.REF), where
            assert ctx.get(dut.refresh.issued) == (kind == Cmd.REF), where
            col = kind in (Cmd.RD, Cmd.WR)
            assert ctx.get(dut.queue.take) == col, where
            if pending:
                assert kind in (Cmd.NOP, Cmd.PRE, Cmd.REF), where
                if kind == Cmd.REF:
                    assert all(b["act_ok"] for b in banks), where
            if kind == Cmd.PRE:
                assert banks[bank]["is_open"] and banks[bank]["pre_ok"], where
            if kind in (Cmd.ACT, Cmd.RD, Cmd.WR):
                idx = ctx.get(dut.queue.take_index) if col else None
                # The served request is queued, and no older one waits for its bank.
                match = [i for i, e in enumerate(entries)
                         if e["bank"] == bank and e["row"] == sel.row]
                assert match, where
                if kind == Cmd.ACT:
                    assert not banks[bank]["is_open"] and banks[bank]["act_ok"], where
                    assert entries[match[0]]["bank"] == bank
                    assert all(e["bank"] != bank for e in entries[:match[0]]), where
                else:
                    e = entries[idx]
                    assert (e["bank"], e["row"], e["col"]) == (bank, sel.row, sel.col), where
                    assert kind == (Cmd.WR if e["we"] else Cmd.RD), where
                    assert banks[bank]["is_open"] and banks[bank]["open_row"] == e["row"], where
                    assert banks[bank]["col_ok"] and space, where
                    if policy == "fcfs":
                        assert all(o["bank"] != bank for o in entries[:idx]), where
            await ctx.tick()

    simulate(dut, tb)
    # Every command kind occurs, so none of the checks above is vacuous.
    assert all(kinds[k] for k in Cmd), kinds


@pytest.mark.parametrize("policy, expect", [("frfcfs", Cmd.RD), ("fcfs", Cmd.PRE)])
def test_frfcfs_serves_a_younger_row_hit_first(policy, expect):
    dut = _sched(policy)

    async def tb(ctx):
        # Bank 0 holds row 1 open; the oldest request wants row 2, a younger one row 1.
        entries = [{"bank": 0, "row": 2}, {"bank": 0, "row": 1, "col": 3}]
        closed = {"is_open": 0, "open_row": 0, "act_ok": 1, "pre_ok": 0, "col_ok": 0}
        banks = [{"is_open": 1, "open_row": 1, "act_ok": 0, "pre_ok": 1, "col_ok": 1}]
        _set_state(ctx, dut, entries, banks + [closed] * (NB - 1), 0, 1)
        await ctx.tick().repeat(T.tFAW)  # every vault-wide counter has run out
        assert Cmd(ctx.get(dut.cmd.kind)) == expect
        assert ctx.get(dut.cmd.bank) == 0
        if expect == Cmd.RD:
            assert ctx.get(dut.queue.take_index) == 1 and ctx.get(dut.sel.col) == 3
        else:
            assert ctx.get(dut.cmd.row) == 1 and not ctx.get(dut.queue.take)

    simulate(dut, tb)


def _random_state(r):
    n = r.randint(0, Q)
    idle = r.random() < 0.2
    entries = [{"we": r.randrange(2), "bank": r.randrange(NB), "row": r.randrange(3),
                "col": r.randrange(4)} for _ in range(n)]
    banks = []
    for _ in range(NB):
        is_open = not idle and r.random() < 0.4
        banks.append({"is_open": is_open, "open_row": r.randrange(3),
                      "act_ok": (not is_open) and r.random() < 0.9,
                      "pre_ok": is_open and r.random() < 0.8,
                      "col_ok": is_open and r.random() < 0.8})
    return entries, banks, r.random() < 0.1, r.random() < 0.9


def _trace(policy, seed, gate, p_ok):
    """The scheduler's commands on one seeded random input sequence; with *gate*,
    ``act_ok`` is high with probability *p_ok*, and the gate's rules are checked."""
    r = random.Random(seed)
    ok_r = random.Random(seed + 1000)
    dut = Scheduler(timing=T, banks=NB, layout=LAYOUT, queue_depth=Q, scheduler=policy,
                    starvation_limit=16, act_gate=gate)
    out = []

    async def tb(ctx):
        for cyc in range(500):
            _set_state(ctx, dut, *_random_state(r))
            if gate:
                # act_want must not follow act_ok within the cycle.
                ctx.set(dut.act_ok, 0)
                want0 = ctx.get(dut.act_want)
                ctx.set(dut.act_ok, 1)
                assert ctx.get(dut.act_want) == want0, (seed, cyc)
                ok = ok_r.random() < p_ok
                ctx.set(dut.act_ok, ok)
                kind = Cmd(ctx.get(dut.cmd.kind))
                if want0:
                    assert kind == (Cmd.ACT if ok else Cmd.NOP), (seed, cyc, kind)
                    if not ok:
                        assert not ctx.get(dut.queue.take), (seed, cyc)
                        assert not any(ctx.get(getattr(dut.banks[b], k)) for b in range(NB)
                                       for k in ("act", "pre", "rd", "wr", "ref"))
                else:
                    assert kind != Cmd.ACT, (seed, cyc)
            out.append((ctx.get(dut.cmd.kind), ctx.get(dut.cmd.bank), ctx.get(dut.cmd.row),
                        ctx.get(dut.cmd.col), ctx.get(dut.queue.take_index)))
            await ctx.tick()

    simulate(dut, tb)
    return out


@pytest.mark.parametrize("policy, seed", [("frfcfs", 5), ("fcfs", 6)])
def test_act_gate(policy, seed):
    """With ``act_gate`` and ``act_ok`` always high the scheduler issues exactly what it
    issues without the gate; with ``act_ok`` at random, ``act_want`` marks the cycles
    whose pick is an ACT, independent of ``act_ok``, and a refused ACT issues nothing."""
    log.info("seed %d", seed)
    print(f"seed {seed}")
    plain = _trace(policy, seed, False, 1.0)
    assert _trace(policy, seed, True, 1.0) == plain
    assert sum(k == Cmd.ACT for k, *_ in plain) >= 20
    _trace(policy, seed, True, 0.5)


def _col_trace(policy, seed, p_ok, act_gate):
    """As :func:`_trace` with ``col_gate``: ``col_ok`` high with probability *p_ok* (and,
    with *act_gate*, ``act_ok`` always high); the column gate's rules are checked."""
    r = random.Random(seed)
    ok_r = random.Random(seed + 2000)
    dut = Scheduler(timing=T, banks=NB, layout=LAYOUT, queue_depth=Q, scheduler=policy,
                    starvation_limit=16, act_gate=act_gate, col_gate=True)
    out = []

    async def tb(ctx):
        for cyc in range(500):
            _set_state(ctx, dut, *_random_state(r))
            if act_gate:
                ctx.set(dut.act_ok, 1)
            # col_want must not follow col_ok within the cycle.
            ctx.set(dut.col_ok, 0)
            want0 = ctx.get(dut.col_want)
            ctx.set(dut.col_ok, 1)
            assert ctx.get(dut.col_want) == want0, (seed, cyc)
            ok = ok_r.random() < p_ok
            ctx.set(dut.col_ok, ok)
            kind = Cmd(ctx.get(dut.cmd.kind))
            if want0:
                assert kind in ((Cmd.RD, Cmd.WR) if ok else (Cmd.NOP,)), (seed, cyc, kind)
                if not ok:
                    assert not ctx.get(dut.queue.take), (seed, cyc)
                    assert not any(ctx.get(getattr(dut.banks[b], k)) for b in range(NB)
                                   for k in ("act", "pre", "rd", "wr", "ref"))
            else:
                assert kind not in (Cmd.RD, Cmd.WR), (seed, cyc)
            out.append((ctx.get(dut.cmd.kind), ctx.get(dut.cmd.bank), ctx.get(dut.cmd.row),
                        ctx.get(dut.cmd.col), ctx.get(dut.queue.take_index)))
            await ctx.tick()

    simulate(dut, tb)
    return out


@pytest.mark.parametrize("policy, seed", [("frfcfs", 7), ("fcfs", 8)])
def test_col_gate(policy, seed):
    """With ``col_gate`` and ``col_ok`` always high the scheduler issues exactly what it
    issues without the gate (beside the ACT gate); with ``col_ok`` at random,
    ``col_want`` marks the cycles whose pick is a RD or WR, independent of ``col_ok``,
    and a refused column command issues nothing (the base-die PEs' TSV grant)."""
    log.info("seed %d", seed)
    print(f"seed {seed}")
    plain = _trace(policy, seed, False, 1.0)
    assert _col_trace(policy, seed, 1.0, True) == plain
    assert sum(k in (Cmd.RD, Cmd.WR) for k, *_ in plain) >= 20
    _col_trace(policy, seed, 0.5, policy == "frfcfs")
