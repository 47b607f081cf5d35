"""The whole PIM-CapsNet cube: vault computes on the HMC memory system (Sec. 4-5).

Every vault ``v`` has its operation controller with ``capsnet.pes_per_vault``
PEs (:class:`~pimforge.rtl.capsnet.vault.VaultCompute`) and an
:class:`~pimforge.rtl.capsnet.operand_port.OperandPort` that turns the
controller's lane bundles into block requests on the vault's PE port of
:class:`~pimforge.rtl.mem.hmc_mem.HMCMemory` (crossbar, one vault controller
per vault, RMAS). Operands, results and inter-vault ``SEND`` copies all travel
through that port, so they pay the DRAM bank timing, the crossbar and RMAS
arbitration against the host links. Both per-vault blocks are one Verilog
module each, instantiated once per vault.

Around them:

* host links ``host{i}``/``host{i}_resp``: block reads and writes with cube byte
  addresses (how the host places ``u``/``W`` and reads ``v`` back);
* instruction memory load port: ``imem_we``/``imem_vault``/``imem_addr``/``imem_data``;
* barrier unit: ``start`` (while not ``running``) starts every vault at
  instruction 0; a barrier is released (``go`` to the vaults at it, which also
  empties their operand ports' read caches) when every
  vault is at its barrier or halted and every operand port is idle, i.e. every
  write and send issued before the barrier has been acknowledged by its vault
  controller; ``running`` falls when every vault has halted and every port is
  idle; ``cycles`` counts the cycles of the run, ``barriers`` its barriers;
* write lock: a block write (possibly a read-modify-write) into vault ``d``
  holds ``d``'s lock, granted round robin to the operand ports asking for it, so
  two ports merging words into one block cannot lose an update;
* DRAM array ports ``arr[v]`` (Verilog ``arr__{v}__re``..., served by the
  simulation's array model), command-observation ports ``cmd[v]`` (Verilog
  ``cmd__{v}__valid``...) and PE-port observation outputs
  ``pe{v}_req_*``/``pe{v}_resp_*`` (accepted requests and delivered responses)
  for protocol checkers;
* ``error``: sticky, an operand port lost a posted bundle.

Parameters
----------
cfg : Config
    ``hmc`` (organization, mapping, timing), ``capsnet`` (PEs per vault,
    instruction memory) and the PE parameters.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..hierarchy import Leaf, leaf_name
from ..mem.crossbar import rr_pick
from ..mem.hmc_mem import HMCMemory
from . import vault as vault_mod
from .isa import INSTR_BITS, ISA_VERSION
from .operand_port import OperandPort, port_config

__all__ = ["HMCCapsNet", "from_config"]

_LINK = ("we", "addr", "tag", "data")


class HMCCapsNet(wiring.Component):
    """PIM-CapsNet cube: N vaults x (vault compute + operand port) on HMCMemory."""

    def __init__(self, *, cfg):
        h = cfg.hmc
        self.cfg = cfg
        self.vaults = V = h.vaults
        self.lanes = cfg.capsnet.pes_per_vault
        self.memory = HMCMemory(hmc=h)
        kw = port_config(cfg)
        oname = leaf_name("capsnet_operand_port", digest=(
            kw["lanes"], kw["vault_bits"], kw["addr_bits"], kw["write_depth"], kw["prefetch"],
            self.memory.amap))
        self.ports = [Leaf(oname, lambda: OperandPort(**kw)) for _ in range(V)]
        self.computes = [vault_mod.vault_leaf(cfg) for _ in range(V)]
        self.pe_latency = self.computes[0].pe_latency
        self.vault_bits = vb = max(1, ceil_log2(V))
        mem = self.memory
        ports = {}
        for i in range(h.links):
            ports[f"host{i}"] = mem.signature.members[f"host{i}"]
            ports[f"host{i}_resp"] = mem.signature.members[f"host{i}_resp"]
        rq, rs = (mem.signature.members[n].signature.members["payload"].shape
                  for n in ("pe0", "pe0_resp"))
        # The memory system's per-vault DRAM array and command ports, passed through.
        ports["arr"] = mem.signature.members["arr"]
        ports["cmd"] = mem.signature.members["cmd"]
        for v in range(V):
            ports[f"pe{v}_req_fire"] = Out(1)
            ports[f"pe{v}_req"] = Out(rq)
            ports[f"pe{v}_resp_fire"] = Out(1)
            ports[f"pe{v}_resp"] = Out(rs)
        ports.update({
            "gamma_v": In(8), "gamma_h": In(8), "policy": In(2),
            "imem_we": In(1), "imem_vault": In(vb),
            "imem_addr": In(ceil_log2(cfg.capsnet.imem_instructions)),
            "imem_data": In(INSTR_BITS),
            "start": In(1), "running": Out(1), "halted": Out(V), "cycles": Out(40),
            "barriers": Out(16), "error": Out(1),
        })
        super().__init__(ports)
        self.latencies = {"read": mem.timing.rd_latency, "pe": self.pe_latency}
        self.memory_map = dict(mem.memory_map)
        self.isa_version = ISA_VERSION

    def elaborate(self, platform):
        m = Module()
        V, h = self.vaults, self.cfg.hmc
        m.submodules.memory = mem = self.memory
        for i in range(h.links):
            wiring.connect(m, wiring.flipped(getattr(self, f"host{i}")),
                           getattr(mem, f"host{i}"))
            wiring.connect(m, getattr(mem, f"host{i}_resp"),
                           wiring.flipped(getattr(self, f"host{i}_resp")))
        m.d.comb += [mem.gamma_v.eq(self.gamma_v), mem.gamma_h.eq(self.gamma_h),
                     mem.policy.eq(self.policy)]

        at_bar, halted, idle = Signal(V), Signal(V), Signal(V)
        go = Signal(V)
        lock_req = [Signal(name=f"lock_req{v}") for v in range(V)]
        lock_vault = [Signal(self.vault_bits, name=f"lock_vault{v}") for v in range(V)]
        lock_grant = [Signal(name=f"lock_grant{v}") for v in range(V)]
        errors = []
        for v in range(V):
            vc, op = self.computes[v], self.ports[v]
            m.submodules[f"compute{v}"] = vc
            m.submodules[f"port{v}"] = op
            # The lane bundles: reads, their prefetch hints, posted writes and sends.
            wiring.connect(m, vc.rd, op.rd)
            wiring.connect(m, vc.pf, op.pf)
            wiring.connect(m, vc.wr, op.wr)
            wiring.connect(m, vc.send, op.send)
            m.d.comb += [
                vc.imem_we.eq(self.imem_we & (self.imem_vault == v)),
                vc.imem_addr.eq(self.imem_addr), vc.imem_data.eq(self.imem_data),
                vc.go.eq(go[v]), at_bar[v].eq(vc.at_bar), halted[v].eq(vc.halted),
                idle[v].eq(op.idle), op.vault_id.eq(v), op.flush.eq(go[v]),
                lock_req[v].eq(op.lock_req), lock_vault[v].eq(op.lock_vault),
                op.lock_grant.eq(lock_grant[v]),
            ]
            pe, pe_resp = getattr(mem, f"pe{v}"), getattr(mem, f"pe{v}_resp")
            wiring.connect(m, op.mem, pe)
            wiring.connect(m, pe_resp, op.mem_resp)
            m.d.comb += [
                getattr(self, f"pe{v}_req_fire").eq(pe.valid & pe.ready),
                getattr(self, f"pe{v}_req").eq(pe.payload),
                getattr(self, f"pe{v}_resp_fire").eq(pe_resp.valid & pe_resp.ready),
                getattr(self, f"pe{v}_resp").eq(pe_resp.payload),
            ]
            wiring.connect(m, mem.arr[v], wiring.flipped(self.arr[v]))
            wiring.connect(m, mem.cmd[v], wiring.flipped(self.cmd[v]))
            errors.append(op.overflow)
        m.d.comb += [self.halted.eq(halted), self.error.eq(Cat(*errors).any())]

        # ---- write locks, one per destination vault, round robin -------------
        grants = [0] * V
        for d in range(V):
            reqs = [lock_req[v] & (lock_vault[v] == d) for v in range(V)]
            held = Signal(name=f"lock{d}_held")
            owner = Signal(range(max(2, V)), name=f"lock{d}_owner")
            any_, pick = rr_pick(m, reqs, ~held, f"lock{d}")
            with m.If(~held):
                with m.If(any_):
                    m.d.sync += held.eq(1)
                    for v in range(V):
                        with m.If(pick[v]):
                            m.d.sync += owner.eq(v)
            with m.Elif(~Cat(*reqs).bit_select(owner, 1)):
                m.d.sync += held.eq(0)
            for v in range(V):
                grants[v] = grants[v] | (held & (owner == v) & reqs[v])
        m.d.comb += [lock_grant[v].eq(grants[v]) for v in range(V)]

        # ---- barrier unit ------------------------------------------------------
        all_idle = idle.all()
        release = Signal()
        m.d.comb += release.eq((at_bar | halted).all() & at_bar.any() & all_idle)
        start = self.start & ~self.running
        m.d.comb += go.eq(Cat(*[start | (release & at_bar[v]) for v in range(V)]))
        with m.If(start):
            m.d.sync += [self.running.eq(1), self.cycles.eq(0), self.barriers.eq(0)]
        with m.Elif(self.running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If(release):
                m.d.sync += self.barriers.eq(self.barriers + 1)
            with m.If(halted.all() & all_idle):
                m.d.sync += self.running.eq(0)
        return m


def from_config(cfg) -> HMCCapsNet:
    """The PIM-CapsNet cube of *cfg*."""
    return HMCCapsNet(cfg=cfg)
