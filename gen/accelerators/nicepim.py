"""NicePIM: a DRAM-PIM DNN accelerator template, a mesh of PIM-nodes (Fig. 3, Tables I, II)."""

from __future__ import annotations

from ..registry import Accelerator, Bench, Block, Command, Explorer, Section, Workload

__all__ = ["ACCELERATOR"]

_TB = "pimforge.verif.tb.nicepim"

ACCELERATOR = Accelerator(
    name="nicepim",
    doc="NicePIM: PIM-nodes (NN engine, buffers, DRAM banks, router) on a mesh",
    sections=(Section("nicepim", "pimforge.gen.config.nicepim:NicePIMConfig"),),
    commands=(
        Command("schedule", "Data-Scheduler: data-sharing schedules on the mesh (ILP, TSP, "
                "SHP), optionally run on the NoC RTL", "pimforge.sim.nicepim.schedule_cli"),
    ),
    workloads=(
        Workload("dnn", "NicePIM networks (or your ONNX model) mapped onto the array and run "
                 "on its RTL, every layer checked against numpy (at --scale 1: the cost "
                 "model only)",
                 "pimforge.sim.nicepim.dnn_cli", default_config="nicepim_small"),
    ),
    explorers=(
        Explorer("nicepim", "PIM-Tuner: Table I's parameters under the area constraint "
                 "(DKL, GP, random search; Fig. 9)", "pimforge.sim.nicepim.dse_cli",
                 config="option", default_config="nicepim_4x4"),
    ),
    blocks=(
        Block("nn_pe_array", "pimforge.rtl.nicepim.pe_array:from_config",
              "NicePIM PE array: PE_row x PE_col 16-bit MACs, weight-stationary systolic"),
        Block("nn_engine", "pimforge.rtl.nicepim.engine:from_config",
              "NicePIM NN engine: PE array, input/weight/output buffers, conv/matmul tiles"),
        Block("nicepim_node", "pimforge.rtl.nicepim.node:from_config",
              "NicePIM PIM-node: engine, bank controller, tensor DMA, data sharing, NI, "
              "task-list controller, counters"),
        Block("nicepim_array", "pimforge.rtl.nicepim.array:from_config",
              "NicePIM accelerator: NA_row x NA_col PIM-nodes on a mesh, link counters"),
    ),
    benches=(
        # The engine of a nicepim_small node (4x4 PEs, 1 KiB buffers); the node and the
        # array run under the native driver (tests/test_nicepim_array.py).
        Bench("nn_engine", "nn_engine", f"{_TB}.engine", config="nicepim_small"),
    ),
)
