"""The HMC memory system: crossbar, one vault controller per vault, RMAS."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .address_map import AddressMap
from .crossbar import Crossbar, master_request_layout, master_response_layout
from .rmas import RMAS
from .timing import resolve_timing
from .vault_ctrl import vault_leaf

__all__ = ["HMCMemory", "from_config"]


class HMCMemory(wiring.Component):
    """Host links and per-vault PE ports -> crossbar -> vault controllers, with RMAS
    choosing per vault whether host or PE requests go first.

    Parameters
    ----------
    hmc : HMCConfig
        Organization, policies and timing.
    mapping : str or None
        Address mapping (default: ``hmc.mapping``).
    pes_per_vault : int
        Unused by the hardware here; recorded for drivers.
    tag_bits : int
        Tag width of each master port.

    Attributes
    ----------
    host{i}, host{i}_resp : link ports (byte address, tag, data)
    pe{v}, pe{v}_resp : vault v's PE port (its requests may target any vault)
    arr[v] : vault v's DRAM array port (simulation model outside; Verilog ``arr__{v}__re``...)
    cmd[v] : vault v's command-observation port (Verilog ``cmd__{v}__valid``...)
    v{v}_conflict : queued requests of vault v blocked by another open row
    v{v}_pe_q : PE requests queued in vault v (RMAS's Q)
    gamma_v, gamma_h, policy : RMAS inputs; ``rmas_nh`` its current n_h
    busy : any vault has work queued or in flight
    """

    def __init__(self, *, hmc, mapping: str | None = None, tag_bits: int = 8):
        self.hmc = hmc
        self.amap = AddressMap.from_config(hmc, mapping)
        self.timing = resolve_timing(hmc.timing, hmc.tck_ns)
        self.tag_bits = tag_bits
        V, L = hmc.vaults, hmc.links
        self.mbits = max(1, ceil_log2(L + V))
        dbits = hmc.block_bytes * 8
        # One Verilog module for all vault controllers, instantiated per vault.
        vault_kw = dict(
            timing=self.timing, banks=hmc.banks_per_vault, rows=hmc.rows, columns=hmc.columns,
            queue_depth=hmc.queue_depth, tag_bits=tag_bits + self.mbits,
            scheduler=hmc.scheduler, page_policy=hmc.page_policy,
            starvation_limit=hmc.starvation_limit, block_bytes=hmc.block_bytes)
        self.vaults = [vault_leaf(**vault_kw) for _ in range(V)]
        vc = self.vaults[0]
        self.xbar = Crossbar(amap=self.amap, links=L, vaults=V, tag_bits=tag_bits,
                             vault_signature=vc.port_signature, data_bits=dbits)
        self.rmas = RMAS(vaults=V, q_bits=len(vc.pe_count))
        rq = master_request_layout(self.amap.addr_bits, tag_bits, dbits)
        rs = master_response_layout(tag_bits, dbits)
        ports = {}
        for i in range(L):
            ports[f"host{i}"] = In(stream.Signature(rq))
            ports[f"host{i}_resp"] = Out(stream.Signature(rs))
        for v in range(V):
            ports[f"pe{v}"] = In(stream.Signature(rq))
            ports[f"pe{v}_resp"] = Out(stream.Signature(rs))
        # Every vault's DRAM array port and command-observation port.
        ports["arr"] = Out(vc.arr_signature).array(V)
        ports["cmd"] = Out(vc.cmd_signature).array(V)
        for v in range(V):
            ports.update({
                f"v{v}_conflict": Out(len(vc.conflict_now)), f"v{v}_pe_q": Out(len(vc.pe_count)),
            })
        ports.update({"gamma_v": In(8), "gamma_h": In(8), "policy": In(2),
                      "rmas_nh": Out(range(V + 1)), "busy": Out(1)})
        super().__init__(ports)
        self.latencies = {"read": self.timing.rd_latency}
        self.memory_map = {"mapping": self.amap.kind, "addr_bits": self.amap.addr_bits,
                           "vault_bits": self.amap.vault_bits, "bank_bits": self.amap.bank_bits,
                           "row_bits": self.amap.row_bits, "col_bits": self.amap.col_bits,
                           "max_block_bytes": self.amap.max_block_bytes}

    def elaborate(self, platform):
        m = Module()
        V, L = self.hmc.vaults, self.hmc.links
        m.submodules.xbar = xb = self.xbar
        m.submodules.rmas = rm = self.rmas
        for i in range(L):
            wiring.connect(m, wiring.flipped(getattr(self, f"host{i}")), getattr(xb, f"m{i}"))
            wiring.connect(m, getattr(xb, f"m{i}_resp"),
                           wiring.flipped(getattr(self, f"host{i}_resp")))
        for v in range(V):
            wiring.connect(m, wiring.flipped(getattr(self, f"pe{v}")), getattr(xb, f"m{L + v}"))
            wiring.connect(m, getattr(xb, f"m{L + v}_resp"),
                           wiring.flipped(getattr(self, f"pe{v}_resp")))
        busy = 0
        for v, vc in enumerate(self.vaults):
            m.submodules[f"vault{v}"] = vc
            wiring.connect(m, getattr(xb, f"v{v}"), vc.bus)
            wiring.connect(m, vc.arr, wiring.flipped(self.arr[v]))
            wiring.connect(m, vc.cmd, wiring.flipped(self.cmd[v]))
            m.d.comb += [getattr(self, f"v{v}_conflict").eq(vc.conflict_now),
                         getattr(self, f"v{v}_pe_q").eq(vc.pe_count),
                         rm.q[v].eq(vc.pe_count)]
            busy = busy | vc.busy
        m.d.comb += [
            rm.target.eq(xb.host_target), rm.gamma_v.eq(self.gamma_v),
            rm.gamma_h.eq(self.gamma_h), rm.policy.eq(self.policy),
            xb.host_first.eq(rm.host_first), xb.arrival.eq(rm.arrival),
            self.rmas_nh.eq(rm.n_h), self.busy.eq(busy),
        ]
        return m


def from_config(cfg, mapping: str | None = None) -> HMCMemory:
    return HMCMemory(hmc=cfg.hmc, mapping=mapping)
