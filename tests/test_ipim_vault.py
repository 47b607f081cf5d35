"""The iPIM vault's wiring, with port-only stand-ins for the PE and the PGSM.

``rtl/ipim/pe.py`` and ``rtl/ipim/pgsm.py`` are written separately; here a PE
is a component with the members the vault connects (``issue``, ``vsm``,
``pgsm``, ``units``, the id inputs, and a ``probe`` the vault forwards as
``pe_probe``), driven by a Python
model that moves VSM lines through its real VSM port.
"""

import logging
import random

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from pimforge.rtl.ipim.bus import BUSY_LAYOUT, IssueSignature, SPMPortSignature
from pimforge.rtl.ipim.core import ControlCore
from pimforge.rtl.ipim.isa import Instr, Opcode, decode
from pimforge.rtl.ipim.vault import SIMBVault
from pimforge.rtl.ipim.vsm import VSM
from pimforge.verif.tb.amaranth_sim import simulate
from pimforge.verif.tb.ipim.programs import load_and_start

log = logging.getLogger(__name__)
F = 0xF
ALL4 = sum(1 << 32 * i for i in range(4))


class _PortOnlyPE(wiring.Component):
    def __init__(self, tag_bits, vsm_bits, vsm_lat):
        super().__init__({"issue": In(IssueSignature(tag_bits=tag_bits)),
                          "vsm": Out(SPMPortSignature(addr_bits=vsm_bits, latency=vsm_lat)),
                          "pgsm": Out(SPMPortSignature(addr_bits=4, latency=2)),
                          "units": Out(BUSY_LAYOUT),
                          "pe_id": In(6), "pg_id": In(4), "vault_id": In(6),
                          "chip_id": In(4), "probe": Out(8)})

    def elaborate(self, platform):
        return Module()


class _PortOnlyPGSM(wiring.Component):
    def __init__(self, n):
        super().__init__({"ports": In(SPMPortSignature(addr_bits=4, latency=2)).array(n)})

    def elaborate(self, platform):
        return Module()


def test_vault_moves_lines_through_core_vsm_and_network():
    """seti_vsm, a PE's wr_vsm, a req whose reply lands, reads of those lines by the PEs
    (RAW on each), a sync, a write of the remote line: the VSM and the PEs' DataRFs
    end as the program says."""
    seed = 31
    r = random.Random(seed)
    log.info("seed %d", seed)
    P, PGS = 4, 2
    core = ControlCore(pes=P, inst_queue=4, imem_depth=16, vsm_lines=16)
    vsm = VSM(pes=P, lines=16, t_vsm=1, t_tsv=2, tag_bits=core.tag_bits)
    pes = [_PortOnlyPE(core.tag_bits, vsm.addr_bits, 3) for _ in range(P)]
    vault = SIMBVault(core=core, vsm=vsm, pes=pes,
                      pgsms=[_PortOnlyPGSM(P // PGS) for _ in range(PGS)])
    remote = r.getrandbits(128)
    prog = [Instr(Opcode.SETI_VSM, vsm=1, imm=0x11, vec_mask=F),
            Instr(Opcode.WR_VSM, vsm=2, drf=3, simb_mask=0b0010),
            Instr(Opcode.REQ, chip=1, vault=2, pg=0, pe=1, dram=0x1234, vsm=4),
            Instr(Opcode.RD_VSM, vsm=1, drf=5, simb_mask=0b1111),
            Instr(Opcode.RD_VSM, vsm=4, drf=6, simb_mask=0b0001),
            Instr(Opcode.SYNC, phase=3),
            Instr(Opcode.WR_VSM, vsm=5, drf=6, simb_mask=0b0001),
            Instr(Opcode.HALT)]
    drf = [{3: (p + 1) * 0x0101_0101 * ALL4 & ((1 << 128) - 1)} for p in range(P)]
    seen = {}

    async def tb(ctx):
        await load_and_start(ctx, vault, prog)
        queues = [[] for _ in range(P)]
        cur = [None] * P
        reply = None
        for p in range(P):
            ctx.set(pes[p].probe, 0x40 + p)
        for cyc in range(400):
            if ctx.get(vault.halted):
                break
            # PEs: present VSM accesses first (the arbiter looks at every valid) ...
            for p in range(P):
                if cur[p] is None and queues[p]:
                    cur[p] = [*queues[p].pop(0), 0, r.randint(1, 3)]
                port = pes[p].vsm
                c = cur[p]
                acc = c is not None and c[0].opcode in (Opcode.WR_VSM, Opcode.RD_VSM) \
                    and c[2] == 0
                ctx.set(port.valid, acc)
                if acc:
                    ins = c[0]
                    ctx.set(port.we, ins.opcode is Opcode.WR_VSM)
                    ctx.set(port.addr, ins.vsm)
                    ctx.set(port.wdata, drf[p].get(ins.drf, 0))
                    ctx.set(port.wmask, F)
            # ... then take the grants and data and finish instructions.
            for p in range(P):
                c, port, done = cur[p], pes[p].vsm, None
                if c is not None:
                    ins, tag = c[0], c[1]
                    if ins.opcode is Opcode.WR_VSM and ctx.get(port.ready):
                        done = tag
                    elif ins.opcode is Opcode.RD_VSM:
                        if c[2] == 0 and ctx.get(port.ready):
                            c[2] = 1
                        elif c[2] == 1 and ctx.get(port.rvalid):
                            drf[p][ins.drf] = ctx.get(port.rdata)
                            done = tag
                    elif ins.opcode not in (Opcode.WR_VSM, Opcode.RD_VSM):
                        c[3] -= 1
                        done = tag if c[3] == 0 else None
                if done is not None:
                    cur[p] = None
                ctx.set(pes[p].issue.ready, 1)
                ctx.set(pes[p].issue.done, done is not None)
                ctx.set(pes[p].issue.done_tag, done or 0)
            # network and barrier
            ctx.set(vault.nic_req.ready, 1)
            ctx.set(vault.reply.valid, reply is not None and reply[0] <= cyc)
            if reply:
                ctx.set(vault.reply.payload, reply[1])
            ctx.set(vault.sync.proceed, ctx.get(vault.sync.arrive))
            if ctx.get(vault.nic_req.valid):
                pl = ctx.get(vault.nic_req.payload)
                seen["req"] = {k: getattr(pl, k) for k in ("chip", "vault", "pg", "pe",
                                                           "dram", "vsm")}
                reply = (cyc + 12, {"vsm": pl.vsm, "tag": pl.tag, "data": remote})
            if ctx.get(vault.reply.valid) and ctx.get(vault.reply.ready):
                reply = None
            for p in range(P):
                if ctx.get(pes[p].issue.valid):
                    ins = decode(ctx.get(pes[p].issue.instr.as_value()))
                    queues[p].append((ins, ctx.get(pes[p].issue.tag)))
                assert ctx.get(vault.pe_probe[p]) == 0x40 + p
                # the ids of A0..A1 are the PE's place in the vault
                assert (ctx.get(pes[p].pe_id), ctx.get(pes[p].pg_id)) == (p % 2, p // 2)
            await ctx.tick()
        else:
            raise AssertionError("the vault did not halt")
        seen["issued"] = ctx.get(vault.perf.issued)
        lines = {}
        for a in (1, 2, 4, 5):
            ctx.set(vault.vsm_ext.valid, 1)
            ctx.set(vault.vsm_ext.we, 0)
            ctx.set(vault.vsm_ext.addr, a)
            await ctx.tick()
            ctx.set(vault.vsm_ext.valid, 0)
            while not ctx.get(vault.vsm_ext.rvalid):
                await ctx.tick()
            lines[a] = ctx.get(vault.vsm_ext.rdata)
        seen["lines"] = lines

    simulate(vault, tb)
    assert seen["req"] == {"chip": 1, "vault": 2, "pg": 0, "pe": 1, "dram": 0x1234, "vsm": 4}
    assert seen["issued"] == len(prog)
    assert seen["lines"] == {1: 0x11 * ALL4, 2: drf[1][3], 4: remote, 5: remote}
    assert all(drf[p][5] == 0x11 * ALL4 for p in range(P))
    assert drf[0][6] == remote
