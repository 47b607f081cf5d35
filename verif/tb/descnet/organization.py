"""cocotb bench of a DESCNet organization (block ``descnet_spm``: SMP, SEP or HY).

The data, weight and accumulator ports issue random reads and writes over
their whole address space (separate memory, shared memory and beyond),
while every memory's PMU gets random sleep/wake requests.
:class:`pimforge.verif.models.descnet.OrgModel` predicts every response: the
routing to the separate or the shared memory, the arbitration of a shared
memory with fewer than three ports (the loser is flagged), the OFF-access
flag, the lost contents after power-off, and each memory's ON-cycle counter.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from pimforge.verif.models.descnet import OrgModel, Req
from pimforge.verif.tb.common import bench, rng, start

KINDS = ("data", "weight", "acc")


@cocotb.test()
async def random_org_traffic(dut):
    b = bench()
    c, mm = b["config"]["spm"], b["memory_map"]
    model = OrgModel(mm, c["word_bits"], c["banks"], c["wakeup_cycles"], c["sleep_cycles"])
    r = rng("org")
    names = list(model.mems)
    req = {n: [0] * model.mems[n].sectors for n in names}
    space = {k: mm["words"][k]["separate"] + mm["words"][k]["shared"] for k in KINDS}
    width = {k: len(getattr(dut, f"{k}__addr")) for k in KINDS}
    await start(dut)
    await FallingEdge(dut.clk)
    base = {n: int(getattr(dut, f"{n}_on_cycles").value) for n in names}
    for n in names:
        m = model.mems[n]
        m.pmu.on_cycles = [(base[n] >> (32 * s)) & 0xFFFFFFFF for s in range(m.sectors)]
    counts = {"reads": 0, "errs": 0}
    for cyc in range(2500):
        if cyc:
            await FallingEdge(dut.clk)
        for n in names:
            pmu = model.mems[n].pmu
            for s in range(pmu.sectors):
                if pmu.ack[s] == req[n][s] and r.random() < 0.03:
                    req[n][s] ^= 1
            getattr(dut, f"{n}_sleep_req").value = sum(v << s for s, v in enumerate(req[n]))
        reqs = {}
        for k in KINDS:
            if r.random() < 0.75:
                hi = min(space[k] + 4, 1 << width[k])      # a few out-of-range words too
                a = r.randrange(hi) if r.random() < 0.6 else r.randrange(min(6, hi))
                reqs[k] = Req(1, int(r.random() < 0.45), a, r.getrandbits(c["word_bits"]))
            else:
                reqs[k] = Req()
            for f in ("en", "we", "addr", "wdata"):
                getattr(dut, f"{k}__{f}").value = getattr(reqs[k], f)
        exp = model.cycle(reqs, {n: list(req[n]) for n in names})
        await RisingEdge(dut.clk)
        await ReadOnly()
        for k in KINDS:
            e = exp[k]
            assert int(getattr(dut, f"{k}__rvalid").value) == e.rvalid, (cyc, k)
            if e.rvalid:
                err = int(getattr(dut, f"{k}__err").value)
                assert err == e.err, f"cycle {cyc} {k} {reqs[k]}: err {err}, expected {e.err}"
                counts["errs"] += err
            if e.rdata is not None:
                got = int(getattr(dut, f"{k}__rdata").value)
                assert got == e.rdata, (f"cycle {cyc} {k} read {reqs[k].addr:#x}: {got:#x}, "
                                        f"expected {e.rdata:#x}")
                counts["reads"] += 1
        for n in names:
            on = int(getattr(dut, f"{n}_on").value)
            ack = int(getattr(dut, f"{n}_sleep_ack").value)
            pmu = model.mems[n].pmu
            assert on == sum(v << s for s, v in enumerate(pmu.on)), (cyc, n, "on")
            assert ack == sum(v << s for s, v in enumerate(pmu.ack)), (cyc, n, "ack")
    await FallingEdge(dut.clk)
    for n in names:
        m = model.mems[n]
        v = int(getattr(dut, f"{n}_on_cycles").value)
        assert [(v >> (32 * s)) & 0xFFFFFFFF for s in range(m.sectors)] == m.pmu.on_cycles, n
    lost = sum(m.lost_reads for m in model.mems.values())
    dut._log.info("%s: %d reads checked, %d flagged, %d lost-word reads, %d lost arbitrations",
                  mm["organization"], counts["reads"], counts["errs"], lost,
                  model.lost_arbitration)
    assert counts["reads"] > 800 and counts["errs"] > 50 and lost > 5
    if mm["organization"] == "HY" and c["shared_ports"] < 3:
        assert model.lost_arbitration > 0
