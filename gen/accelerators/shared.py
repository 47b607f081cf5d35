"""Shared hardware: the FP32 units, the HMC-like memory system and the mesh NoC (no
accelerator owns them)."""

from __future__ import annotations

from ..registry import Accelerator, Bench, Block, Command, Section

__all__ = ["ACCELERATOR"]

_TB = "pimforge.verif.tb"

# A small vault (4 banks of 8 rows) with tREFI shortened to 1200 cycles so that
# refreshes collide with traffic within a short run.
_SMALL_VAULT = {"hmc.banks_per_vault": 4, "hmc.capacity_per_vault": 4 * 256 * 8,
                "hmc.queue_depth": 8, "hmc.timing.tREFI": 960.0}

ACCELERATOR = Accelerator(
    name="shared",
    doc="FP32 units, the HMC memory system (vault controllers, crossbar, RMAS) and the mesh NoC",
    sections=(
        Section("fp", "pimforge.gen.config.fp:FPConfig"),
        Section("hmc", "pimforge.gen.config.hmc:HMCConfig"),
        Section("noc", "pimforge.gen.config.noc:NoCConfig"),
    ),
    blocks=(
        Block("fp32_add", "pimforge.rtl.fp.add:from_config",
              "pipelined IEEE-754 binary32 adder (RNE)"),
        Block("fp32_mul", "pimforge.rtl.fp.mul:from_config",
              "pipelined IEEE-754 binary32 multiplier (RNE)"),
        Block("dram_bank", "pimforge.rtl.mem.bank:from_config",
              "one DRAM bank's state machine with its tRCD/tRAS/tRC/tRP/tRTP/tWR/tRFC counters"),
        Block("vault_ctrl", "pimforge.rtl.mem.vault_ctrl:from_config",
              "HMC vault controller: queue, FCFS/FR-FCFS, open/close page, refresh, banks"),
        Block("rmas", "pimforge.rtl.mem.rmas:from_config",
              "PIM-CapsNet runtime memory access scheduler (Eq. 15) and naive policies"),
        Block("hmc_mem", "pimforge.rtl.mem.hmc_mem:from_config",
              "HMC memory system: crossbar, vault controllers, address decoders, RMAS"),
        Block("noc_router", "pimforge.rtl.noc.router:from_config",
              "mesh router: input-queued, wormhole VCs, XY routing, credit flow control"),
        Block("noc_mesh", "pimforge.rtl.noc.mesh:from_config",
              "noc.rows x noc.cols mesh of routers, local ports exposed"),
        Block("noc_ni", "pimforge.rtl.noc.ni:from_config",
              "network interface: packetizes messages into flits and reassembles them"),
    ),
    benches=(
        Bench("fp32_add", "fp32_add", f"{_TB}.fp_units"),
        Bench("fp32_add_lat1", "fp32_add", f"{_TB}.fp_units", overrides={"fp.add_latency": 1}),
        Bench("fp32_mul", "fp32_mul", f"{_TB}.fp_units"),
        Bench("fp32_mul_lat5", "fp32_mul", f"{_TB}.fp_units", overrides={"fp.mul_latency": 5}),
        Bench("vault_ctrl_frfcfs_open", "vault_ctrl", f"{_TB}.vault_ctrl",
              overrides=_SMALL_VAULT),
        Bench("vault_ctrl_fcfs_close", "vault_ctrl", f"{_TB}.vault_ctrl",
              overrides={**_SMALL_VAULT, "hmc.scheduler": "fcfs", "hmc.page_policy": "close"}),
        Bench("vault_ctrl_frfcfs_close", "vault_ctrl", f"{_TB}.vault_ctrl",
              overrides={**_SMALL_VAULT, "hmc.page_policy": "close"}),
        Bench("rmas_8vaults", "rmas", f"{_TB}.rmas", overrides={"hmc.vaults": 8}),
        Bench("hmc_mem_capsnet", "hmc_mem", f"{_TB}.hmc_mem",
              overrides={"hmc.banks_per_vault": 4, "hmc.capacity_per_vault": 4 * 256 * 8,
                         "hmc.queue_depth": 8, "hmc.mapping": "capsnet"}),
    ),
    commands=(
        Command("membench", "drive the HMC memory-system RTL with a traffic pattern",
                "pimforge.sim.membench", config="positional"),
        Command("noc", "latency against injection rate of the mesh NoC RTL (uniform, transpose)",
                "pimforge.sim.noc", config="option"),
    ),
)
