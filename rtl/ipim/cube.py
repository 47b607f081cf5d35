"""One iPIM cube (Fig. 2a): ``vaults`` vaults on a 2D mesh, each with its NIC, and the
inter-vault ``sync`` barrier.

Vault ``v`` is node ``v`` of the ``mesh_rows x mesh_cols`` mesh (column ``v % cols``,
row ``v // cols``); its PEs see ``vaultID = v`` and ``chipID = 0`` in A2/A3. A
``req`` leaves a vault's control core through its
:class:`~pimforge.rtl.ipim.nic.VaultNIC`, crosses the mesh as a class-0 message,
is queued at the remote PE's bank controller and comes back as a class-1
message into the requester's VSM. ``sync`` meets at the master-slave
:class:`~pimforge.rtl.ipim.barrier.SyncBarrier`, whose messages take each vault's
XY distance to vault 0 times ``t_noc_hop`` cycles.

Every vault is the same Verilog module (its ids are inputs), and so is every NIC
and every router: a cube compiles in the time of one of each.

The host interface is the vaults' program backdoor, ``start`` and ``halted``;
the DRAM arrays of the PEs are simulation models outside the RTL, reached on
``pe_arr``. The VSM's host port is tied off (a program fills the VSM itself).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..hierarchy import Leaf, leaf_name
from ..noc.flit import NoCLink
from ..noc.mesh import Mesh
from ..params import check
from .barrier import SyncBarrier
from .nic import from_config as nic_from_config
from .vault import from_config as vault_from_config

__all__ = ["IPIMCube", "from_config"]


class IPIMCube(wiring.Component):
    """Vaults, their NICs, the mesh and the barrier of one cube.

    Parameters
    ----------
    vaults : list of :class:`~pimforge.rtl.ipim.vault.SIMBVault` (or leaves of one)
        The cube's vaults, in node order.
    nics : list of :class:`~pimforge.rtl.ipim.nic.VaultNIC` (or leaves of one)
        One per vault.
    mesh : Mesh
        ``len(vaults)`` nodes.
    t_noc_hop : int
        Cycles per mesh hop of a barrier message.

    Attributes
    ----------
    imem_we, imem_addr, imem_data, start : In, ``.array(vaults)``
        Each vault's program backdoor and start pulse.
    halted : Out(vaults)
        Bit ``v``: vault ``v`` has halted.
    perf : Out(ControlCore.PerfSignature).array(vaults)
        Each vault's core counters.
    nic_perf : Out(VaultNIC.PerfSignature).array(vaults)
        Each vault's NIC counters.
    pe_arr : Out(DRAMArraySignature).array(vaults, pes)
        The DRAM array of every PE's bank.
    pe_perf : Out(SIMBPE.PerfSignature).array(vaults, pes)
        Every PE's counters.
    error : Out(1)
        Sticky: a barrier met with mismatched phases, a ``req`` named a vault, cube or
        PE that does not exist, or a router overflowed (each a program or protocol
        error the driver reports).
    barriers : Out(32)
        Barriers completed.
    """

    def __init__(self, *, vaults: list, nics: list, mesh: Mesh, t_noc_hop: int):
        n = len(vaults)
        check(n >= 2 and len(nics) == n and mesh.nodes == n, "vaults", n,
              f"one NIC per vault ({len(nics)}) and one mesh node per vault ({mesh.nodes})")
        self.vault_list, self.nic_list, self.mesh = list(vaults), list(nics), mesh
        cols = mesh.cols
        self.barrier = SyncBarrier(latency=tuple(
            max(1, (v % cols + v // cols) * t_noc_hop) for v in range(n)))
        vm = vaults[0].signature.members
        self.pes = vm["pe_arr"].dimensions[0]
        self.isa_version = vaults[0].isa_version
        self.latencies = {**vaults[0].latencies,
                          **{f"nic_{k}": v for k, v in nics[0].latencies.items()},
                          **{f"noc_{k}": v for k, v in mesh.latencies.items()}}
        ports = {name: vm[name].array(n) for name in ("imem_we", "imem_addr", "imem_data",
                                                      "start", "perf")}
        ports["halted"] = Out(n)
        ports["nic_perf"] = nics[0].signature.members["perf"].array(n)
        ports["pe_arr"] = vm["pe_arr"].array(n)
        ports["pe_perf"] = vm["pe_perf"].array(n)
        ports["error"] = Out(1)
        ports["barriers"] = Out(32)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        mesh = m.submodules.mesh = self.mesh
        bar = m.submodules.barrier = self.barrier
        errors = [mesh.overflow, bar.error]
        for v, (vault, nic) in enumerate(zip(self.vault_list, self.nic_list, strict=True)):
            m.submodules[f"vault{v}"] = vault
            m.submodules[f"nic{v}"] = nic
            m.d.comb += [vault.vault_id.eq(v), vault.chip_id.eq(0), nic.node.eq(v),
                         vault.imem_we.eq(self.imem_we[v]),
                         vault.imem_addr.eq(self.imem_addr[v]),
                         vault.imem_data.eq(self.imem_data[v]),
                         vault.start.eq(self.start[v]),
                         self.halted[v].eq(vault.halted), bar.halted[v].eq(vault.halted)]
            wiring.connect(m, vault.nic_req, nic.req)
            wiring.connect(m, nic.reply, vault.reply)
            for p in range(self.pes):
                wiring.connect(m, nic.pe[p], vault.pe_remote[p])
                wiring.connect(m, wiring.flipped(self.pe_arr[v][p]), vault.pe_arr[p])
                wiring.connect(m, wiring.flipped(self.pe_perf[v][p]), vault.pe_perf[p])
            wiring.connect(m, nic.net_out, mesh.local_in[v])
            wiring.connect(m, mesh.local_out[v], nic.net_in)
            wiring.connect(m, vault.sync, bar.vault[v])
            wiring.connect(m, wiring.flipped(self.perf[v]), vault.perf)
            wiring.connect(m, wiring.flipped(self.nic_perf[v]), nic.perf)
            # The VSM's host port is not used by programs run from the vault's backdoor.
            m.d.comb += vault.vsm_ext.valid.eq(0)
            errors.append(nic.error)
        m.d.comb += [self.error.eq(Cat(*errors).any()), self.barriers.eq(bar.barriers)]
        return m


def from_config(cfg) -> IPIMCube:
    """The cube of ``cfg.ipim`` (``ipim.cubes`` must be 1: a cube has no SERDES links),
    its mesh shaped by ``ipim.mesh_rows`` x ``ipim.mesh_cols`` with ``cfg.noc``'s VCs,
    flit width and buffers."""
    c, n = cfg.ipim, cfg.noc
    check(c.cubes == 1, "ipim.cubes", c.cubes,
          "1 for the cube RTL (one cube; cubes are joined by SERDES links, not modelled: "
          "generate --top simb_vault for a larger machine)")
    check(c.vaults >= 2, "ipim.vaults", c.vaults, "at least 2 for a cube on a mesh")
    mesh = Mesh(link=NoCLink.Signature(rows=c.mesh_rows, cols=c.mesh_cols, vcs=n.vcs,
                                       flit_bits=n.flit_bits), depth=n.buffer_depth,
                # the routers keep the NICs' request and reply classes on their own VCs
                classes=2)
    vname = leaf_name("simb_vault", digest=(c, n))
    nname = leaf_name("simb_nic", digest=(c, n))
    return IPIMCube(vaults=[Leaf(vname, lambda: vault_from_config(cfg))
                            for _ in range(c.vaults)],
                    nics=[Leaf(nname, lambda: nic_from_config(cfg)) for _ in range(c.vaults)],
                    mesh=mesh, t_noc_hop=c.t_noc_hop)
