"""The PG scratchpad memory (PGSM) of iPIM: one per process group, a port per PE."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2, exact_log2

from ..mem.sram import sram_leaf
from ..params import check_int, check_pow2
from .bus import SPMPortSignature
from .isa import LANES, SPM_BITS

__all__ = ["PGSM", "from_config"]


class PGSM(wiring.Component):
    """A PG's scratchpad shared by its PEs, one read/write port per PE.

    The paper gives each PE a separate read port and write port; here the
    storage is ``banks`` single-read, single-write memories interleaved on the
    low line-address bits (line ``a`` lives in bank ``a % banks``), so that each
    cycle every bank serves one read and one write. A PE's request waits (its
    ``ready`` low) while another PE holds the bank's read or write side; each
    bank side grants round-robin among the PEs asking. A write is stored at the
    end of the cycle it is granted (a read granted later sees it); a read's line
    comes back ``latency`` cycles after its grant, with ``rvalid``.

    Two PEs writing one line in the same cycle are granted one after the other
    in round-robin order, so the later grant wins (the ISA's "highest PE wins"
    holds when no other write to that bank is pending; the PEs of one PG do not
    dispatch a broadcast instruction in one cycle anyway).

    Parameters
    ----------
    ports : int
        PEs of the PG.
    lines : int
        128-bit lines.
    latency : int
        Read latency of the ports (``t_pgsm``), at least 1.
    banks : int
        Storage banks (default: ``ports`` rounded up to a power of two, at most ``lines``).

    Attributes
    ----------
    ports : In(SPMPortSignature).array(ports)
        The PEs' ports.
    """

    def __new__(cls, *args, ports: int, lines: int, latency: int = 1,
                banks: int | None = None, **kwargs):
        # Checked before the block exists, so a bad parameter leaves no unused block
        # behind (Amaranth would warn about it).
        cls._banks(ports, lines, latency, banks)
        return super().__new__(cls, *args, src_loc_at=1, **kwargs)

    @staticmethod
    def _banks(ports: int, lines: int, latency: int, banks: int | None) -> int:
        check_int("ports", ports, 1, 64)
        check_pow2("lines", lines, 2, 1 << SPM_BITS)
        check_int("latency", latency, 1, 64)
        if banks is None:
            banks = min(lines, 1 << ceil_log2(ports))
        check_pow2("banks", banks, 1, lines)
        return banks

    def __init__(self, *, ports: int, lines: int, latency: int = 1, banks: int | None = None):
        banks = self._banks(ports, lines, latency, banks)
        self.n_ports, self.lines, self.latency, self.banks = ports, lines, latency, banks
        self.addr_bits = max(1, ceil_log2(lines))
        self.port_signature = SPMPortSignature(addr_bits=self.addr_bits, latency=latency)
        super().__init__({"ports": In(self.port_signature).array(ports)})

    def elaborate(self, platform):
        m = Module()
        P, B = self.n_ports, self.banks
        bb = exact_log2(B)
        ports = self.ports
        lane = data.ArrayLayout(32, LANES)

        def bank_of(p):
            return p.addr[:bb] if bb else 0

        def row_of(p):
            return p.addr[bb:]

        granted = [Signal(name=f"granted{p}") for p in range(P)]
        rd_bank = [Signal(range(max(B, 2)), name=f"rd_bank{p}") for p in range(P)]
        rd_go = [Signal(name=f"rd_go{p}") for p in range(P)]
        mems = []
        for b in range(B):
            mem = m.submodules[f"bank{b}"] = sram_leaf(width=lane.size, depth=self.lines // B,
                                                       lanes=LANES, read_en=True)
            mems.append(mem)
            for side, want in (("r", lambda p: ~p.we), ("w", lambda p: p.we)):
                req = Cat(ports[p].valid & want(ports[p]) & (bank_of(ports[p]) == b)
                          for p in range(P))
                grant = Signal(range(max(P, 2)), name=f"g{side}{b}")
                any_req = req.any()
                ptr = Signal(range(max(P, 2)), name=f"ptr{side}{b}")
                # Round-robin: the first requester at or after the pointer.
                with m.Switch(ptr):
                    for pv in range(P):
                        with m.Case(pv):
                            for off in reversed(range(P)):
                                i = (pv + off) % P
                                with m.If(req[i]):
                                    m.d.comb += grant.eq(i)
                with m.If(any_req):
                    m.d.sync += ptr.eq(Mux(grant == P - 1, 0, grant + 1))
                port_addr = Array(row_of(ports[p]) for p in range(P))
                port_data = Array(ports[p].wdata for p in range(P))
                port_mask = Array(ports[p].wmask for p in range(P))
                for p in range(P):
                    with m.If(any_req & (grant == p)):
                        m.d.comb += granted[p].eq(1)
                        if side == "r":
                            m.d.comb += [rd_go[p].eq(1), rd_bank[p].eq(b)]
                if side == "r":
                    m.d.comb += [mem.r_addr.eq(port_addr[grant]), mem.r_en.eq(any_req)]
                else:
                    m.d.comb += [mem.w_addr.eq(port_addr[grant]), mem.w_data.eq(port_data[grant]),
                                 mem.w_en.eq(Cat(port_mask[grant][i] & any_req
                                              for i in range(LANES)))]
        rdata = Array(mem.r_data for mem in mems)
        for p in range(P):
            m.d.comb += ports[p].ready.eq(granted[p])
            v1 = Signal(name=f"rv{p}_0")
            b1 = Signal(range(max(B, 2)), name=f"rb{p}_0")
            m.d.sync += [v1.eq(rd_go[p]), b1.eq(rd_bank[p])]
            v, d = v1, Signal(128, name=f"rd{p}_0")
            m.d.comb += d.eq(rdata[b1])
            for k in range(1, self.latency):
                v2, d2 = Signal(name=f"rv{p}_{k}"), Signal(128, name=f"rd{p}_{k}")
                m.d.sync += [v2.eq(v), d2.eq(d)]
                v, d = v2, d2
            m.d.comb += [ports[p].rvalid.eq(v), ports[p].rdata.eq(d)]
        return m


def from_config(cfg, **overrides) -> PGSM:
    """The PGSM of ``cfg.ipim`` (``pes_per_pg`` ports, ``pgsm_lines``, ``t_pgsm``)."""
    c = cfg.ipim
    kw = {"ports": c.pes_per_pg, "lines": c.pgsm_lines, "latency": c.t_pgsm}
    kw.update(overrides)
    return PGSM(**kw)
