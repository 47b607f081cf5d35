"""PIM-CapsNet: HMC logic-layer PEs for capsule-network dynamic routing."""

from __future__ import annotations

from ..registry import Accelerator, Bench, Block, Command, Section, Workload

__all__ = ["ACCELERATOR"]

_TB = "pimforge.verif.tb.capsnet"

ACCELERATOR = Accelerator(
    name="capsnet",
    doc="PIM-CapsNet: reconfigurable FP32 PEs beside the HMC vaults, dynamic routing",
    sections=(
        Section("pe", "pimforge.gen.config.capsnet:PEConfig"),
        Section("capsnet", "pimforge.gen.config.capsnet:CapsNetConfig"),
    ),
    blocks=(
        Block("capsnet_pe", "pimforge.rtl.capsnet.pe:from_config",
              "PIM-CapsNet reconfigurable PE (MAC, inverse sqrt, exp, reciprocal flows)"),
        Block("capsnet_vault", "pimforge.rtl.capsnet.vault:from_config",
              "PIM-CapsNet vault compute: operation controller (vault ISA) and its PEs"),
        Block("capsnet_operand_port", "pimforge.rtl.capsnet.operand_port:from_config",
              "PIM-CapsNet vault operand port: lane bundles to 16 B block requests on a PE port"),
        Block("hmc_capsnet", "pimforge.rtl.capsnet.cube:from_config",
              "PIM-CapsNet cube: vault computes and operand ports on the HMC memory system"),
    ),
    benches=(
        Bench("capsnet_pe", "capsnet_pe", f"{_TB}.pe"),
        # Single-cycle adder (one MAC lane, no reduction), no Newton step, no recovery.
        # (Four lanes with two Newton steps is covered in the Amaranth simulator by
        # tests/test_capsnet_pe.py; its Verilator build alone takes two minutes.)
        Bench("capsnet_pe_la1_n0", "capsnet_pe", f"{_TB}.pe",
              overrides={"fp.add_latency": 1, "fp.mul_latency": 2, "pe.newton_steps": 0,
                         "pe.exp_recovery": False}),
        # Four lanes keep the Verilator build short; the 16-lane port runs inside hmc_capsnet.
        Bench("operand_port_4lanes", "capsnet_operand_port", f"{_TB}.operand_port",
              overrides={"capsnet.pes_per_vault": 4}),
        # The whole cube on the default preset (2 vaults, 2 links) with the capsnet
        # mapping, 4 PEs and 4 banks of 16 rows per vault (a shorter Verilator build):
        # a compiled routing workload end to end.
        Bench("hmc_capsnet_routing", "hmc_capsnet", f"{_TB}.cube",
              overrides={"capsnet.pes_per_vault": 4, "capsnet.imem_instructions": 64,
                         "hmc.mapping": "capsnet", "hmc.banks_per_vault": 4,
                         "hmc.capacity_per_vault": 4 * 16 * 256, "hmc.queue_depth": 8}),
    ),
    workloads=(
        Workload("capsnet", "CapsNet dynamic routing on the vault RTL (Table 1 networks)",
                 "pimforge.sim.capsnet.run_cli"),
    ),
    commands=(
        Command("demo", "a small CapsNet end to end: host layers in numpy, routing on the "
                "vault RTL", "pimforge.sim.demo", config="option"),
        Command("approx", "error table of the PIM-CapsNet PE approximations vs float64",
                "pimforge.sim.approx_cli", config="option"),
        Command("accuracy", "Table 5 study: digits CapsNet accuracy with the PE arithmetic "
                "(and on the RTL)", "pimforge.sim.capsnet.accuracy", config="option"),
        Command("capsnet-dist", "Fig. 18 study: B/L/H distribution scores and choice per PE "
                "frequency", "pimforge.sim.capsnet.dist_cli", config="option",
                default_config="hmc_gen3"),
    ),
)
