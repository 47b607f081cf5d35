"""NicePIM: a DRAM-PIM DNN accelerator template, a mesh of PIM-nodes (Fig. 3, Tables I, II)."""

from __future__ import annotations

from ..registry import Accelerator, Command, Section

__all__ = ["ACCELERATOR"]

ACCELERATOR = Accelerator(
    name="nicepim",
    doc="NicePIM: PIM-nodes (NN engine, buffers, DRAM banks, router) on a mesh",
    sections=(Section("nicepim", "pimforge.gen.config.nicepim:NicePIMConfig"),),
    commands=(
        Command("schedule", "Data-Scheduler: data-sharing schedules on the mesh (ILP, TSP, "
                "SHP), optionally run on the NoC RTL", "pimforge.sim.nicepim.schedule_cli",
                config="option"),
    ),
)
