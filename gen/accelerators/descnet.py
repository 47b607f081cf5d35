"""DESCNet: power-gated sectored scratchpads and their design-space exploration."""

from __future__ import annotations

from ..registry import Accelerator, Bench, Block, Explorer, Section

__all__ = ["ACCELERATOR"]

_TB = "pimforge.verif.tb.descnet"

ACCELERATOR = Accelerator(
    name="descnet",
    doc="DESCNet: power-gated multi-bank sectored scratchpads, SMP/SEP/HY organizations, DSE",
    sections=(Section("spm", "pimforge.gen.config.descnet:SPMConfig"),),
    blocks=(
        Block("spm", "pimforge.rtl.descnet.scratchpad:from_config",
              "DESCNet power-gated sectored multi-bank scratchpad with its PMU"),
        Block("spm_pmu", "pimforge.rtl.descnet.pmu:from_config",
              "DESCNet PMU: sleep request/acknowledge handshake, wake-up latency, ON counters"),
        Block("descnet_spm", "pimforge.rtl.descnet.organization:from_config",
              "DESCNet SMP/SEP/HY scratchpad organization with data, weight and accumulator "
              "ports"),
    ),
    benches=(
        Bench("spm_pmu", "spm", f"{_TB}.spm"),
        Bench("spm_3port", "spm", f"{_TB}.spm",
              overrides={"spm.ports": 3, "spm.banks": 2, "spm.sectors": 4,
                         "spm.wakeup_cycles": 5, "spm.sleep_cycles": 1, "spm.size_bytes": 256}),
        # 128-word macros: the valid-tag scrubber walks 8 tag rows while the 4-bit
        # epochs wrap many times under the fastest power cycling.
        Bench("spm_deep", "spm", f"{_TB}.spm",
              overrides={"spm.ports": 2, "spm.size_bytes": 8192, "spm.wakeup_cycles": 1,
                         "spm.sleep_cycles": 1}),
        Bench("descnet_spm_hy", "descnet_spm", f"{_TB}.organization"),
        Bench("descnet_spm_hy_ps1", "descnet_spm", f"{_TB}.organization",
              overrides={"spm.shared_ports": 1, "spm.wakeup_cycles": 1}),
        Bench("descnet_spm_smp", "descnet_spm", f"{_TB}.organization",
              overrides={"spm.organization": "SMP", "spm.shared_bytes": 1024,
                         "spm.shared_sectors": 4}),
        Bench("descnet_spm_sep", "descnet_spm", f"{_TB}.organization",
              overrides={"spm.organization": "SEP", "spm.data_sectors": 4}),
    ),
    explorers=(
        Explorer("spm", "DESCNet scratchpads: Algorithms 1-2 over energy and area",
                 "pimforge.sim.descnet.dse_cli"),
    ),
)
