"""cocotb tests of the iPIM cube (``ipim_cube``: vaults, NICs, mesh, barrier) on its Verilog.

The bench plays the host and the DRAM dies: it writes each vault's program through
the instruction-memory backdoor, pulses ``start``, and serves every PE's DRAM array
(a read's vector on ``rdata`` in the next cycle, a write at once) from a sparse
model until every vault with a program has halted. The programs of
:mod:`~pimforge.verif.tb.ipim.programs` exercise ``req`` across the mesh (every
vault reads every PE of every vault) and ``sync`` across the vaults (a late write
must be seen by remote reads after the barrier); the final banks are compared with
the instruction-set simulator's, and the NIC and barrier counters with the
programs' counts. Long random programs run on the native driver instead
(``tests/test_ipim_cube.py``): this bench wakes Python every cycle.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from pimforge.gen.config import Config
from pimforge.gen.config.base import from_dict
from pimforge.rtl.ipim.isa import encode

from ..common import bench, start
from .programs import bank_diff, iss_banks, req_all_to_all, sync_then_req

__all__ = ["run_programs"]


async def run_programs(dut, cfg, programs: dict, banks: dict, max_cycles: int):
    """Load *programs*, run the cube to completion from *banks*; the final banks (as
    :func:`~pimforge.verif.tb.ipim.programs.iss_banks` gives them) and the cycles."""
    c = cfg.ipim
    V, P = c.vaults, c.pes
    await start(dut)
    longest = max(len(p) for p in programs.values())
    for i in range(longest):
        for v in range(V):
            prog = programs.get(v, [])
            getattr(dut, f"imem_we__{v}").value = int(i < len(prog))
            getattr(dut, f"imem_addr__{v}").value = i
            getattr(dut, f"imem_data__{v}").value = encode(prog[i]) if i < len(prog) else 0
        await RisingEdge(dut.clk)
    for v in range(V):
        getattr(dut, f"imem_we__{v}").value = 0
        getattr(dut, f"start__{v}").value = int(v in programs)
    await RisingEdge(dut.clk)
    for v in range(V):
        getattr(dut, f"start__{v}").value = 0
    want = sum(1 << v for v in programs)
    mem = {(v, p): dict(banks.get((v, p), {})) for v in range(V) for p in range(P)}
    arr = [(k, {n: getattr(dut, f"pe_arr__{k[0]}__{k[1]}__{n}")
                for n in ("re", "we", "addr", "wdata", "rdata")}) for k in mem]
    mask = c.bank_vectors - 1
    pending = {}
    for cycle in range(max_cycles):
        await FallingEdge(dut.clk)
        if cycle > 1 and int(dut.halted.value) & want == want:
            break
        served = {}
        for k, pins in arr:
            pins["rdata"].value = pending.get(k, 0)
            if int(pins["re"].value):
                served[k] = mem[k].get(int(pins["addr"].value) & mask, 0)
            if int(pins["we"].value):
                mem[k][int(pins["addr"].value) & mask] = int(pins["wdata"].value)
        pending = served
    else:
        raise AssertionError(f"the cube did not halt in {max_cycles} cycles")
    assert not int(dut.error.value), "the cube flagged a program or protocol error"
    return {k: {a: x for a, x in b.items() if x} for k, b in mem.items()}, cycle


def _counters(dut, name: str, n: int) -> list[int]:
    return [int(getattr(dut, f"nic_perf__{v}__{name}").value) for v in range(n)]


@cocotb.test()
async def req_across_the_mesh(dut):
    """Every vault reads one vector of every PE of every vault (itself included)."""
    cfg = from_dict(Config, bench()["config"])
    c = cfg.ipim
    programs, banks, expected = req_all_to_all(c)
    got, cycles = await run_programs(dut, cfg, programs, banks, 20_000)
    dut._log.info("%d req in %d cycles", c.vaults * c.vaults * c.pes, cycles)
    for (v, a), x in expected.items():
        assert got[(v, 0)].get(a) == x, f"vault {v} vector {a}"
    bad = bank_diff(got, iss_banks(cfg, programs, banks))
    assert not bad, "\n".join(bad[:20])
    n = c.vaults * c.pes
    for name in ("sent", "served", "received"):
        assert _counters(dut, name, c.vaults) == [n] * c.vaults, name
    assert int(dut.barriers.value) == 2


@cocotb.test()
async def sync_orders_remote_reads(dut):
    """A late write of vault 0 before a sync is what the others' req read after it."""
    cfg = from_dict(Config, bench()["config"])
    programs, banks, expected = sync_then_req(cfg.ipim)
    got, cycles = await run_programs(dut, cfg, programs, banks, 20_000)
    dut._log.info("%d cycles", cycles)
    for (v, a), x in expected.items():
        assert got[(v, 0)].get(a) == x, f"vault {v} vector {a}: {got[(v, 0)].get(a, 0):#x}"
    bad = bank_diff(got, iss_banks(cfg, programs, banks))
    assert not bad, "\n".join(bad[:20])
    assert int(dut.barriers.value) == 2
