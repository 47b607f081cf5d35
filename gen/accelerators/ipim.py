"""iPIM: near-bank image-processing PIM with the SIMB ISA (Fig. 2, Table I, Table III)."""

from __future__ import annotations

from ..registry import Accelerator, Bench, Block, Section

__all__ = ["ACCELERATOR"]

_TB = "pimforge.verif.tb"

ACCELERATOR = Accelerator(
    name="ipim",
    doc="iPIM: SIMB control core, near-bank PEs, PGSM/VSM, sync and remote requests",
    sections=(Section("ipim", "pimforge.gen.config.ipim:IPIMConfig"),),
    blocks=(
        # simb-core: the vault's control core and its VSM.
        Block("simb_core", "pimforge.rtl.simb.core:from_config",
              "iPIM vault control core: fetch, issued-instruction queue with dependency "
              "check, SIMB broadcast, CtrlRF, sync, req, counters"),
        Block("simb_vsm", "pimforge.rtl.simb.vsm:from_config",
              "iPIM vault scratchpad: one TSV-side port shared round-robin by the PEs, "
              "the core and the network"),
    ),
    benches=(
        # simb-core: PE models with random latencies and back-pressure, a network model.
        # (Table III's 64-entry queue elaborates and lints, but its Verilator build
        # takes minutes; queues of 1 to 8 slots run in tests/test_simb_core.py.)
        Bench("simb_core", "simb_core", f"{_TB}.simb_core"),
    ),
    commands=(),
)
