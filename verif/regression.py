"""The cocotb regression: every block testbench, one source for pytest and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Bench", "BENCHES"]


@dataclass(frozen=True)
class Bench:
    """One testbench run.

    Parameters
    ----------
    name : str
        Unique name (``pimforge regress -k`` matches it).
    block : str
        Registered block to generate (see :mod:`pimforge.gen.blocks`).
    module : str
        Dotted name of the cocotb test module.
    config : str
        Config preset (or TOML path) the block is generated from.
    overrides : dict
        ``{"section.field": value}`` applied on top of the preset, so one block
        is tested at several parameter points.
    """

    name: str
    block: str
    module: str
    config: str = "default"
    overrides: dict = field(default_factory=dict)

    def make_config(self):
        import dataclasses

        from ..gen.config import load_config

        cfg = load_config(self.config)
        sections: dict[str, dict] = {}
        top: dict = {}
        for key, value in self.overrides.items():
            if "." in key:
                sec, fld = key.split(".", 1)
                sections.setdefault(sec, {})[fld] = value
            else:
                top[key] = value
        for sec, changes in sections.items():
            top[sec] = dataclasses.replace(getattr(cfg, sec), **changes)
        return dataclasses.replace(cfg, **top) if top else cfg


BENCHES: list[Bench] = [
    Bench("fp32_add", "fp32_add", "pimforge.verif.tb.fp_units"),
    Bench("fp32_add_lat1", "fp32_add", "pimforge.verif.tb.fp_units",
          overrides={"fp.add_latency": 1}),
    Bench("fp32_mul", "fp32_mul", "pimforge.verif.tb.fp_units"),
    Bench("fp32_mul_lat5", "fp32_mul", "pimforge.verif.tb.fp_units",
          overrides={"fp.mul_latency": 5}),
    Bench("spm_pmu", "spm", "pimforge.verif.tb.test_spm"),
    Bench("spm_3port", "spm", "pimforge.verif.tb.test_spm",
          overrides={"spm.ports": 3, "spm.banks": 2, "spm.sectors": 4, "spm.wakeup_cycles": 5,
                     "spm.sleep_cycles": 1, "spm.size_bytes": 256}),
    Bench("descnet_spm_hy", "descnet_spm", "pimforge.verif.tb.test_descnet_spm"),
    Bench("descnet_spm_hy_ps1", "descnet_spm", "pimforge.verif.tb.test_descnet_spm",
          overrides={"spm.shared_ports": 1, "spm.wakeup_cycles": 1}),
    Bench("descnet_spm_smp", "descnet_spm", "pimforge.verif.tb.test_descnet_spm",
          overrides={"spm.organization": "SMP", "spm.shared_bytes": 1024,
                     "spm.shared_sectors": 4}),
    Bench("descnet_spm_sep", "descnet_spm", "pimforge.verif.tb.test_descnet_spm",
          overrides={"spm.organization": "SEP", "spm.data_sectors": 4}),
    Bench("fp32_shift", "fp32_shift", "pimforge.verif.tb.fp32_shift"),
    Bench("capsnet_pe", "capsnet_pe", "pimforge.verif.tb.capsnet_pe"),
    # Single-cycle adder (one MAC lane, no reduction), no Newton step, no recovery.
    Bench("capsnet_pe_la1_n0", "capsnet_pe", "pimforge.verif.tb.capsnet_pe",
          overrides={"fp.add_latency": 1, "fp.mul_latency": 2, "pe.newton_steps": 0,
                     "pe.exp_recovery": False}),
    # (Four lanes with two Newton steps is covered in the Amaranth simulator by
    # tests/test_capsnet_pe.py; its Verilator build alone takes two minutes.)
]

def _mem_benches() -> list[Bench]:
    from ..gen.config.hmc import DRAMTimingNs

    # A small vault (4 banks of 8 rows) with tREFI shortened to 1200 cycles so that
    # refreshes collide with traffic within a short run.
    small = {"hmc.banks_per_vault": 4, "hmc.capacity_per_vault": 4 * 256 * 8,
             "hmc.queue_depth": 8, "hmc.timing": DRAMTimingNs(tREFI=960.0)}
    return [
        Bench("vault_ctrl_frfcfs_open", "vault_ctrl", "pimforge.verif.tb.vault_ctrl",
              overrides=small),
        Bench("vault_ctrl_fcfs_close", "vault_ctrl", "pimforge.verif.tb.vault_ctrl",
              overrides={**small, "hmc.scheduler": "fcfs", "hmc.page_policy": "close"}),
        Bench("vault_ctrl_frfcfs_close", "vault_ctrl", "pimforge.verif.tb.vault_ctrl",
              overrides={**small, "hmc.page_policy": "close"}),
    ]


BENCHES += _mem_benches()
BENCHES += [Bench("rmas_8vaults", "rmas", "pimforge.verif.tb.rmas",
                  overrides={"hmc.vaults": 8})]
BENCHES += [Bench("hmc_mem_capsnet", "hmc_mem", "pimforge.verif.tb.hmc_mem",
                  overrides={"hmc.banks_per_vault": 4, "hmc.capacity_per_vault": 4 * 256 * 8,
                             "hmc.queue_depth": 8, "hmc.mapping": "capsnet"})]
# Four lanes keep the Verilator build short; the 16-lane port runs inside hmc_capsnet.
BENCHES += [Bench("operand_port_4lanes", "capsnet_operand_port", "pimforge.verif.tb.operand_port",
                  overrides={"capsnet.pes_per_vault": 4})]
# The whole cube on the default preset (2 vaults, 2 links) with the capsnet mapping,
# 4 PEs and 4 banks of 16 rows per vault (a shorter Verilator build): a compiled
# routing workload end to end.
BENCHES += [Bench("hmc_capsnet_routing", "hmc_capsnet", "pimforge.verif.tb.hmc_capsnet",
                  overrides={"capsnet.pes_per_vault": 4, "capsnet.imem_instructions": 64,
                             "hmc.mapping": "capsnet", "hmc.banks_per_vault": 4,
                             "hmc.capacity_per_vault": 4 * 16 * 256, "hmc.queue_depth": 8})]
