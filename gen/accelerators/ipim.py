"""iPIM: near-bank image-processing PIM with the SIMB ISA (Fig. 2, Table I, Table III)."""

from __future__ import annotations

from ..registry import Accelerator, Command, Section

__all__ = ["ACCELERATOR"]

_TB = "pimforge.verif.tb"

ACCELERATOR = Accelerator(
    name="ipim",
    doc="iPIM: SIMB control core, near-bank PEs, PGSM/VSM, sync and remote requests",
    sections=(Section("ipim", "pimforge.gen.config.ipim:IPIMConfig"),),
    blocks=(),
    benches=(),
    commands=(
        # simb-tools: assembler, disassembler and instruction-set simulator
        Command("simb", "SIMB programs: asm FILE, disasm FILE.hex, run FILE on the "
                "instruction-set simulator", "pimforge.sim.ipim.simb_cli"),
    ),
)
