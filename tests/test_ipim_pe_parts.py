"""The parts of the near-bank PE on their own: the completion port's priorities and the
fixed-latency path's booked completion cycles (the whole PE against the ISS is
tests/test_ipim_pe.py)."""

from __future__ import annotations

import gc
import random
import warnings

import pytest
from amaranth.hdl import ClockDomain, Module, UnusedElaboratable
from amaranth.lib import wiring

from pimforge.rtl.ipim.isa import AluOp, Instr, Opcode, encode
from pimforge.rtl.ipim.pe_bank import PEBankPath
from pimforge.rtl.ipim.pe_completion import PECompletion
from pimforge.rtl.ipim.pe_fixed import PEFixedPath
from pimforge.rtl.ipim.pe_spm_engine import PESpmEngine
from pimforge.rtl.mem.timing import resolve_timing
from pimforge.rtl.params import ParameterError


def test_completion_priority(simulate):
    """The booked fixed-latency completion first, then the engine, then the bank; each
    source's ``ready`` depends on the others' ``valid`` only; nothing valid gives an
    all-zero payload."""
    seed = 11
    print(f"seed {seed}")
    r = random.Random(seed)
    dut = PECompletion(tag_bits=3)
    srcs = ("fixed", "engine", "bank")

    async def bench(ctx):
        for _ in range(200):
            v = {s: r.getrandbits(1) for s in srcs}
            p = {s: {"tag": r.getrandbits(3), "drf": r.getrandbits(1), "arf": r.getrandbits(1),
                     "idx": r.getrandbits(8), "mask": r.getrandbits(4),
                     "data": r.getrandbits(128)} for s in srcs}
            for s in srcs:
                port = getattr(dut, s)
                ctx.set(port.valid, v[s])
                ctx.set(port.payload, p[s])
            win = next((s for s in srcs if v[s]), None)
            assert ctx.get(dut.done.valid) == (win is not None)
            got = ctx.get(dut.done.payload)
            want = p[win] if win else dict.fromkeys(p["bank"], 0)
            assert {k: getattr(got, k) for k in want} == want
            assert ctx.get(dut.engine.ready) == (not v["fixed"])
            assert ctx.get(dut.bank.ready) == (not v["fixed"] and not v["engine"])
            await ctx.tick()

    # The port is combinational: a clock domain only to step the testbench.
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    simulate(top, bench)


@pytest.mark.parametrize("t_alu, t_drf", [(1, 1), (3, 2)])
def test_fixed_path_books_its_completion_cycle(simulate, t_alu, t_drf):
    """Each instruction finishes exactly its latency after it is taken, with its tag; one
    whose completion cycle is booked already is refused (``ready`` low) until it is free."""
    seed = 12 + t_alu
    print(f"seed {seed}")
    r = random.Random(seed)
    lat = {"add": 4, "mul": 5, "mac": 8, "logic": 1}
    dut = PEFixedPath(tag_bits=4, t_alu=t_alu, t_arf=1, t_drf=t_drf)
    progs = [Instr(Opcode.COMP, op=AluOp.ADD, dst=1, src1=2, src2=3),
             Instr(Opcode.COMP, op=AluOp.MAC, dst=1, src1=2, src2=3),
             Instr(Opcode.COMP, op=AluOp.XOR, dst=1, src1=2, src2=3),
             Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=5, src1=6, src2=7),
             Instr(Opcode.MOV_ARF, arf=5, drf=2, lane=1),
             Instr(Opcode.MOV_DRF, arf=5, drf=2, lane=3),
             Instr(Opcode.RESET, drf=9)]
    lat_of = [lat["add"], lat["mac"], lat["logic"], t_alu, 1, t_drf, t_drf]

    async def bench(ctx):
        due: dict[int, int] = {}        # cycle -> tag
        n = 0
        for _ in range(300):
            k = r.randrange(len(progs))
            tag = r.getrandbits(4)
            ctx.set(dut.instr.valid, r.random() < 0.7)
            ctx.set(dut.instr.payload.instr.as_value(), encode(progs[k]))
            ctx.set(dut.instr.payload.tag, tag)
            assert ctx.get(dut.instr.ready) == (n + lat_of[k] not in due)
            took = ctx.get(dut.instr.valid) and ctx.get(dut.instr.ready)
            if n in due:
                assert ctx.get(dut.done.valid) and ctx.get(dut.done.payload.tag) == due.pop(n)
            else:
                assert not ctx.get(dut.done.valid)
            if took:
                due[n + lat_of[k]] = tag
            await ctx.tick()
            n += 1

    simulate(dut, bench)


def _timing(preset):
    c = preset().ipim
    return resolve_timing(c.timing, c.tck_ns)


def test_parts_check_their_parameters(preset):
    with warnings.catch_warnings():
        # Blocks refused by their checks are never elaborated.
        warnings.simplefilter("ignore", UnusedElaboratable)
        _check_parameters(preset)
        gc.collect()


def _check_parameters(preset):
    with pytest.raises(ParameterError, match="t_alu must be an integer between 1 and 64"):
        PEFixedPath(tag_bits=2, t_alu=0)
    with pytest.raises(ParameterError, match="queue must be an integer between 2 and 64"):
        PEBankPath(tag_bits=2, remote_tag_bits=2, timing=_timing(preset), rows=4, columns=4,
                   queue=1)
    with pytest.raises(ParameterError, match="slot_bits must be"):
        PESpmEngine(tag_bits=2, slot_bits=0, pgsm_bits=4, vsm_bits=4)
    with pytest.raises(ParameterError, match="tag_bits must be an integer between 1 and 16"):
        PECompletion(tag_bits=17)


def test_parts_join(preset):
    """The streams between the parts have one signature at both ends."""
    with warnings.catch_warnings():
        # These parts are only looked at, never elaborated.
        warnings.simplefilter("ignore", UnusedElaboratable)
        _check_joins(preset)
        gc.collect()


def _check_joins(preset):
    eng = PESpmEngine(tag_bits=3, slot_bits=2, pgsm_bits=4, vsm_bits=5)
    bank = PEBankPath(tag_bits=3, remote_tag_bits=2, timing=_timing(preset), rows=4, columns=4,
                      queue=4)
    for n, out, into in (("reserve", eng, bank), ("write", eng, bank), ("ldp", bank, eng)):
        a, b = out.signature.members[n], into.signature.members[n]
        assert a.flow == wiring.Out and b.flow == wiring.In and a.signature == b.signature.flip()
