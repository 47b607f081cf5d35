"""NicePIM: a DRAM-PIM DNN accelerator template, a mesh of PIM-nodes (Fig. 3, Tables I, II)."""

from __future__ import annotations

from ..registry import Accelerator, Block, Command, Section

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
    blocks=(
        Block("nn_pe_array", "pimforge.rtl.nn.pe_array:from_config",
              "NicePIM PE array: PE_row x PE_col 16-bit MACs, weight-stationary systolic"),
        Block("nn_engine", "pimforge.rtl.nn.engine:from_config",
              "NicePIM NN engine: PE array, input/weight/output buffers, conv/matmul tiles"),
        Block("nicepim_node", "pimforge.rtl.nn.node:from_config",
              "NicePIM PIM-node: engine, bank controller, tensor DMA, data sharing, NI, "
              "task-list controller, counters"),
        Block("nicepim_array", "pimforge.rtl.top.nicepim_array:from_config",
              "NicePIM accelerator: NA_row x NA_col PIM-nodes on a mesh, link counters"),
    ),
)
