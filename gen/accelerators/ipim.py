"""iPIM: near-bank image-processing PIM with the SIMB ISA (Fig. 2, Table I, Table III)."""

from __future__ import annotations

from ..registry import Accelerator, Bench, Block, Command, Section, Workload

__all__ = ["ACCELERATOR"]

_TB = "pimforge.verif.tb.ipim"

# ---- simb-pe: the near-bank PE and the PGSM ------------------------------------------------
# A small PE (16 DataRF/AddrRF entries, 16 KiB bank of 64 rows) with tREFI shortened so that
# refreshes collide with bank traffic inside a short program.
_SMALL_PE = {"ipim.drf_bytes": 16 * 16, "ipim.arf_bytes": 16 * 4, "ipim.pgsm_bytes": 16 * 16,
             "ipim.vsm_bytes": 16 * 32, "ipim.bank_bytes": 16 * 1024,
             "ipim.row_bytes": 16 * 16, "ipim.timing.tREFI": 300.0, "ipim.timing.tRFC": 40.0}
# ipim_small's 2x2 mesh of vaults with one PG of 2 PEs each, small register files,
# scratchpads and banks (a Verilator build of about 3 minutes; the native-driver tests
# in tests/test_ipim_cube.py run 2 PGs).
_SMALL_CUBE = {"ipim.drf_bytes": 16 * 8, "ipim.arf_bytes": 16 * 4, "ipim.pgsm_bytes": 16 * 8,
               "ipim.vsm_bytes": 16 * 32, "ipim.bank_bytes": 16 * 1024,
               "ipim.row_bytes": 16 * 16, "ipim.pgs": 1}
_PE_BLOCKS = (
    Block("simb_pe", "pimforge.rtl.ipim.pe:from_config",
          "iPIM near-bank PE: DataRF, AddrRF, 4-lane FP32/INT32 SIMD, int ALU, bank controller"),
    Block("simb_pgsm", "pimforge.rtl.ipim.pgsm:from_config",
          "iPIM PG scratchpad: a read/write port per PE, banked, round-robin"),
)
_PE_BENCHES = (
    # One build (about 3 minutes of Verilator): FCFS, close page and other latencies are
    # covered on the Amaranth simulator (tests/test_ipim_pe.py).
    Bench("simb_pe", "simb_pe", f"{_TB}.pe", overrides=_SMALL_PE),
)

ACCELERATOR = Accelerator(
    name="ipim",
    doc="iPIM: SIMB control core, near-bank PEs, PGSM/VSM, sync and remote requests",
    sections=(Section("ipim", "pimforge.gen.config.ipim:IPIMConfig"),),
    blocks=(
        *_PE_BLOCKS,
        # simb-core: the vault's control core and its VSM.
        Block("simb_core", "pimforge.rtl.ipim.core:from_config",
              "iPIM vault control core: fetch, issued-instruction queue with dependency "
              "check, SIMB broadcast, CtrlRF, sync, req, counters"),
        Block("simb_vsm", "pimforge.rtl.ipim.vsm:from_config",
              "iPIM vault scratchpad: one TSV-side port shared round-robin by the PEs, "
              "the core and the network"),
        Block("simb_vault", "pimforge.rtl.ipim.vault:from_config",
              "iPIM vault: control core, PGs of near-bank PEs with their PGSMs, VSM"),
        Block("simb_nic", "pimforge.rtl.ipim.nic:from_config",
              "iPIM vault NIC: remote req out over the mesh, remote req served from "
              "the PEs' bank queues, replies into the VSM"),
        Block("ipim_cube", "pimforge.rtl.ipim.cube:from_config",
              "iPIM cube: vaults with their NICs on a 2D mesh, inter-vault sync barrier"),
    ),
    benches=(
        *_PE_BENCHES,
        # simb-core: PE models with random latencies and back-pressure, a network model.
        # (Table III's 64-entry queue elaborates and lints, but its Verilator build
        # takes minutes; queues of 1 to 8 slots run in tests/test_ipim_core.py.)
        Bench("simb_core", "simb_core", f"{_TB}.core"),
        # The cube: req across the mesh and sync across the vaults, against the ISS.
        Bench("ipim_cube", "ipim_cube", f"{_TB}.cube", config="ipim_small",
              overrides=_SMALL_CUBE),
    ),
    workloads=(
        Workload("image", "Table II image pipelines compiled to SIMB, run on the cube RTL "
                 "and checked against numpy", "pimforge.sim.ipim.image_cli",
                 default_config="ipim_small"),
    ),
    commands=(
        Command("compile", "the iPIM compiler: compile image --bench NAME prints the SIMB "
                "assembly and its instruction breakdown", "pimforge.sim.ipim.compile_cli",
                config="option", default_config="ipim_small"),
        # simb-tools: assembler, disassembler and instruction-set simulator
        Command("simb", "SIMB programs: asm FILE, disasm FILE.hex, run FILE on the "
                "instruction-set simulator", "pimforge.sim.ipim.simb_cli"),
    ),
)
