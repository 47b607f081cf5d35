"""Command queue: oldest first, any entry may leave, the rest keep their order."""

import logging
import random

import pytest
from amaranth.lib import data

from pimforge.rtl.mem.cmd_queue import CommandQueue
from pimforge.rtl.params import ParameterError
from pimforge.verif.tb.amaranth_sim import simulate

log = logging.getLogger(__name__)

LAYOUT = data.StructLayout({"bank": 2, "row": 3, "tag": 8})


@pytest.mark.parametrize("seed, depth", [(1, 2), (2, 4), (3, 7)])
def test_cmd_queue_matches_list_model(seed, depth):
    r = random.Random(seed)
    log.info("seed %d depth %d", seed, depth)
    dut = CommandQueue(layout=LAYOUT, depth=depth)
    seen = {"full": 0, "take_mid": 0, "take_and_push": 0}

    async def tb(ctx):
        model: list[int] = []
        for cyc in range(1500):
            # Phases of heavy pushing fill the queue, phases of heavy taking drain it.
            push_p = 0.9 if (cyc // 100) % 2 == 0 else 0.3
            push = r.random() < push_p
            tag = r.randrange(256)
            ctx.set(dut.req.valid, push)
            ctx.set(dut.req.payload, {"bank": r.randrange(4), "row": r.randrange(8), "tag": tag})
            take = bool(model) and r.random() < 0.5
            idx = r.randrange(len(model)) if take else r.randrange(depth)
            ctx.set(dut.view.take, take)
            ctx.set(dut.view.take_index, idx)

            assert ctx.get(dut.view.count) == len(model), (seed, cyc)
            assert ctx.get(dut.req.ready) == (len(model) < depth), (seed, cyc)
            for i in range(depth):
                assert ctx.get(dut.view.valid[i]) == (i < len(model)), (seed, cyc, i)
                if i < len(model):
                    assert ctx.get(dut.view.entries[i].tag) == model[i], (seed, cyc, i)
            seen["full"] += len(model) == depth
            seen["take_mid"] += take and 0 < idx < len(model) - 1
            seen["take_and_push"] += take and push and len(model) == depth

            if take:
                del model[idx]
            if push and ctx.get(dut.req.ready):
                model.append(tag)
            await ctx.tick()

    simulate(dut, tb)
    assert seen["full"] and seen["take_and_push"]
    assert depth <= 2 or seen["take_mid"]


def test_cmd_queue_parameter_checks():
    with pytest.raises(ParameterError, match="depth must be an integer between 2 and 64, not 1"):
        CommandQueue(layout=LAYOUT, depth=1)
    sig = CommandQueue.Signature(layout=LAYOUT, depth=4)
    assert sig == CommandQueue.Signature(layout=LAYOUT, depth=4)
    assert sig != CommandQueue.Signature(layout=LAYOUT, depth=5)
    assert repr(sig).startswith("CommandQueue.Signature(layout=")
