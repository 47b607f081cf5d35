"""iPIM's machine: cubes, vaults, process groups, PEs, queues, storage, latencies, energies.

The defaults are ``ipim_small`` sized (one cube of 4 vaults on a 2x2 mesh, 2 PGs
of 2 PEs per vault, small banks) so that the whole machine elaborates and
builds in seconds; ``ipim_table3`` states iPIM Table III. Everything runs at
``tck_ns`` (1 ns, Table III): the control core, the PEs and the in-DRAM memory
controllers share the clock, so every latency below is in cycles of it and the
DRAM timing in ns is resolved once to those cycles.

The vault's network position: vault ``v`` of a cube sits at ``(x, y) =
(v % mesh_cols, v // mesh_cols)`` of a mesh whose shape follows from ``vaults``
(:attr:`IPIMConfig.mesh_cols`); the router's flit width, VCs and buffers are
the shared ``noc`` section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pimforge.rtl.ipim.isa import DRAM_BITS, LANES, MASK_BITS, REG_BITS, SPM_BITS

from .base import check, check_choice, check_float, check_int, check_pow2
from .hmc import PAGE_POLICIES, SCHEDULERS, DRAMTimingNs

__all__ = ["IPIMTimingNs", "IPIMConfig", "PE_PLACEMENTS"]

#: Where the PEs sit (Sec. VII-C1, Fig. 8): next to their banks on the PIM dies (iPIM),
#: or on the base die, reaching their banks through the vault's TSVs.
PE_PLACEMENTS = ("near-bank", "base-die")

_VEC = LANES * 4    # bytes of one vector (bank access, RF entry, scratchpad line)


@dataclass(frozen=True)
class IPIMTimingNs(DRAMTimingNs):
    """iPIM's DRAM timing in ns (Table III and Sec. VII-A).

    Table III gives tCK 1, tRCD 14, tCCD 2, tRTP 4, tRP 14, tRAS 33 and the
    power limits tRRDS 4, tRRDL 6, tFAW 16. The others are not stated and take
    HBM2-like values: tCL = tRCD, tRC = tRAS + tRP, tCWL 4, tBL 2 (128 bits at
    the CAS width in two beats, = tCCD), tWTR 4, tWR 15, tRFC 260, tREFI 3900.
    The PEs of one PG share a DRAM die, whose ACT window enforces them:
    ``tRRD`` is tRRDS, between any two ACTs of the PG's banks; ``tRRDL``
    between two ACTs of one bank group (PE ``p`` of a PG is in bank group
    ``p % 4``); tFAW over the PG's banks.
    """

    tCL: float = 14.0
    tRCD: float = 14.0
    tRP: float = 14.0
    tCWL: float = 4.0
    tRAS: float = 33.0
    tRC: float = 47.0
    tBL: float = 2.0
    tCCD: float = 2.0
    tRTP: float = 4.0
    tWTR: float = 4.0
    tWR: float = 15.0
    tRRD: float = 4.0
    tRRDL: float = 6.0
    tFAW: float = 16.0
    tRFC: float = 260.0
    tREFI: float = 3900.0

    WHERE: ClassVar[str] = "ipim.timing"

    def __post_init__(self):
        super().__post_init__()
        check(self.tRRDL >= self.tRRD, f"{self.WHERE}.tRRDL", self.tRRDL,
              f"at least tRRD (tRRDS, {self.tRRD} ns)")


@dataclass(frozen=True)
class IPIMConfig:
    """One iPIM machine (Fig. 2, Table III).

    Parameters
    ----------
    cubes : int
        Cubes joined by SERDES links.
    vaults : int
        Vaults per cube, each with a control core on the base die.
    pgs : int
        Process groups per vault (one per PIM die).
    pes_per_pg : int
        PEs (near-bank, one DRAM bank each) per process group;
        ``pgs * pes_per_pg`` is the simb_mask width in use (at most 64).
    inst_queue : int
        Entries of the control core's issued-instruction queue.
    dram_queue : int
        Request-queue entries of each PE's in-DRAM memory controller.
    imem_instructions : int
        Instructions of a vault's program memory (128-bit words).
    remote_slot_bits : int
        ``2**remote_slot_bits`` remote ``req`` reads a vault's NIC serves at once
        (its service slots; the tag width of each PE's remote bank port).
    bank_bytes, row_bytes : int
        DRAM bank capacity (a sparse simulation model: a large bank costs
        address bits only) and row-buffer size of one PE's bank.
    arf_bytes, drf_bytes : int
        AddrRF (32-bit entries) and DataRF (128-bit entries) per PE.
    crf_entries : int
        CtrlRF entries (32-bit) of the control core.
    pgsm_bytes, vsm_bytes : int
        PG scratchpad and vault scratchpad (128-bit lines).
    page_policy, scheduler : str
        In-DRAM controller policies (Table III: open page, FR-FCFS).
    t_add, t_mul, t_mac, t_logic : int
        SIMD unit latencies in cycles (tADD(SUB), tMUL, tMAC, tLOGIC).
    t_alu : int
        Integer ALU (AddrRF index calculation) latency.
    t_arf, t_drf, t_pgsm, t_vsm : int
        Register file and scratchpad access latencies.
    t_pebus, t_tsv : int
        PE bus (PE <-> PGSM) and TSV (PIM die <-> base die) traversal.
    tsv_bits : int
        Data bits the vault's TSVs move per cycle (Sec. IV-C: 128, one vector; the
        power of two ``8..128``): a vector crosses in ``128 / tsv_bits`` cycles.
    pe_placement : str
        ``"near-bank"`` (iPIM: each PE beside its bank; the TSVs carry the PEs' VSM
        traffic) or ``"base-die"`` (Fig. 8's process-on-base-die machine: PEs, PGSMs
        and their bank controllers on the base die, every bank RD/WR crossing the
        vault's shared TSVs, ``tsv_bits`` per cycle and ``t_tsv`` each way,
        arbitrated round robin among the vault's PEs).
    t_noc_hop : int
        On-chip network hop (router + link).
    t_serdes_ns : float
        Off-chip (cube-to-cube) hop in ns.
    tck_ns : float
        Clock of the whole machine.
    e_rdwr_nj, e_act_pre_nj : float
        DRAM energy of one RD/WR and of one ACT+PRE pair, nJ.
    e_arf_pj, e_drf_pj, e_simd_pj, e_alu_pj : float
        Energy per access of the AddrRF, DataRF, SIMD unit and integer ALU, pJ.
    e_pebus_pj_bit, e_tsv_pj_bit, e_serdes_pj_bit : float
        Energy per bit moved over the PE bus, a TSV and a SERDES link, pJ.
    timing : IPIMTimingNs
        DRAM timing constraints in ns.
    """

    cubes: int = 1
    vaults: int = 4
    pgs: int = 2
    pes_per_pg: int = 2
    inst_queue: int = 8
    dram_queue: int = 4
    imem_instructions: int = 256
    remote_slot_bits: int = 2
    bank_bytes: int = 64 * 1024
    row_bytes: int = 1024
    arf_bytes: int = 256
    drf_bytes: int = 1024
    crf_entries: int = 32
    pgsm_bytes: int = 1024
    vsm_bytes: int = 4096
    page_policy: str = "open"
    scheduler: str = "frfcfs"
    t_add: int = 4
    t_mul: int = 5
    t_mac: int = 8
    t_logic: int = 1
    t_alu: int = 1
    t_arf: int = 1
    t_drf: int = 1
    t_pgsm: int = 1
    t_vsm: int = 1
    t_pebus: int = 1
    t_tsv: int = 1
    tsv_bits: int = 128
    pe_placement: str = "near-bank"
    t_noc_hop: int = 1
    t_serdes_ns: float = 0.08
    tck_ns: float = 1.0
    e_rdwr_nj: float = 0.52
    e_act_pre_nj: float = 0.22
    e_arf_pj: float = 0.43
    e_drf_pj: float = 2.66
    e_simd_pj: float = 87.37
    e_alu_pj: float = 11.05
    e_pebus_pj_bit: float = 0.017
    e_tsv_pj_bit: float = 4.64
    e_serdes_pj_bit: float = 4.50
    timing: IPIMTimingNs = field(default_factory=IPIMTimingNs)

    def __post_init__(self):
        check_pow2("ipim.cubes", self.cubes, 1, 16)
        check_pow2("ipim.vaults", self.vaults, 1, 64)
        check_pow2("ipim.pgs", self.pgs, 1, 16)
        check_pow2("ipim.pes_per_pg", self.pes_per_pg, 1, 16)
        check(self.pes <= MASK_BITS, "ipim.pes_per_pg", self.pes_per_pg,
              f"at most {MASK_BITS // self.pgs} with {self.pgs} PGs (simb_mask has "
              f"{MASK_BITS} bits)")
        check_int("ipim.inst_queue", self.inst_queue, 1, 256)
        check_int("ipim.dram_queue", self.dram_queue, 1, 64)
        check_pow2("ipim.imem_instructions", self.imem_instructions, 16, 1 << 16)
        check_int("ipim.remote_slot_bits", self.remote_slot_bits, 1, 8)
        check_pow2("ipim.row_bytes", self.row_bytes, _VEC * 2, 16384)
        check_pow2("ipim.bank_bytes", self.bank_bytes, self.row_bytes * 2,
                   _VEC << DRAM_BITS)
        check_pow2("ipim.arf_bytes", self.arf_bytes, 4 * 8, 4 << REG_BITS)
        check_pow2("ipim.drf_bytes", self.drf_bytes, _VEC * 4, _VEC << REG_BITS)
        check_pow2("ipim.crf_entries", self.crf_entries, 4, 1 << REG_BITS)
        check_pow2("ipim.pgsm_bytes", self.pgsm_bytes, _VEC * 2, _VEC << SPM_BITS)
        check_pow2("ipim.vsm_bytes", self.vsm_bytes, _VEC * 2, _VEC << SPM_BITS)
        check_choice("ipim.page_policy", self.page_policy, PAGE_POLICIES)
        check_choice("ipim.scheduler", self.scheduler, SCHEDULERS)
        for n in ("t_add", "t_mul", "t_mac", "t_logic", "t_alu", "t_arf", "t_drf", "t_pgsm",
                  "t_vsm", "t_pebus", "t_tsv", "t_noc_hop"):
            check_int(f"ipim.{n}", getattr(self, n), 1, 64)
        check_pow2("ipim.tsv_bits", self.tsv_bits, 8, 128)
        check_choice("ipim.pe_placement", self.pe_placement, PE_PLACEMENTS)
        check_float("ipim.t_serdes_ns", self.t_serdes_ns, 0.0, 1000.0)
        check_float("ipim.tck_ns", self.tck_ns, 0.1, 100.0)
        for n in ("e_rdwr_nj", "e_act_pre_nj", "e_arf_pj", "e_drf_pj", "e_simd_pj",
                  "e_alu_pj", "e_pebus_pj_bit", "e_tsv_pj_bit", "e_serdes_pj_bit"):
            check_float(f"ipim.{n}", getattr(self, n), 0.0, 1e6)

    @property
    def pes(self) -> int:
        """PEs (banks) per vault = simb_mask bits in use."""
        return self.pgs * self.pes_per_pg

    @property
    def arf_entries(self) -> int:
        return self.arf_bytes // 4

    @property
    def drf_entries(self) -> int:
        return self.drf_bytes // _VEC

    @property
    def pgsm_lines(self) -> int:
        return self.pgsm_bytes // _VEC

    @property
    def vsm_lines(self) -> int:
        return self.vsm_bytes // _VEC

    @property
    def bank_vectors(self) -> int:
        """Addressable 128-bit vectors of one bank (``dram`` operand range)."""
        return self.bank_bytes // _VEC

    @property
    def rows(self) -> int:
        return self.bank_bytes // self.row_bytes

    @property
    def row_vectors(self) -> int:
        return self.row_bytes // _VEC

    @property
    def tsv_beats(self) -> int:
        """Cycles one 128-bit vector occupies the vault's TSVs."""
        return 128 // self.tsv_bits

    @property
    def base_die(self) -> bool:
        """The PEs sit on the base die (every bank access crosses the TSVs)."""
        return self.pe_placement == "base-die"

    @property
    def mesh_cols(self) -> int:
        """Columns of the cube's vault mesh (the squarest shape, cols >= rows)."""
        return 1 << ((self.vaults.bit_length() - 1 + 1) // 2)

    @property
    def mesh_rows(self) -> int:
        return self.vaults // self.mesh_cols
