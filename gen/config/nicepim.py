"""NicePIM's DRAM-PIM accelerator: the PIM-node array, each node's NN engine and DRAM banks.

The fields follow NicePIM Table I (the design parameters: NA_row x NA_col nodes,
PEA_row x PEA_col PEs, Size_ibuf/wbuf/obuf) and Table II (the constants: 16x16
banks of 8 MiB and 128 bits, 400 MHz, 16-bit data, 32-bit partial sums, flits half
the width of a node's banks, 0.88 pJ/bit DRAM, 1.1 pJ/bit/hop NoC, 8 VCs). The
defaults are ``nicepim_small`` sized (2x2 nodes of 4x4 PEs, 2 small banks each) so
that the whole array builds in seconds; the paper's systems are the presets
``nicepim_4x4``, ``nicepim_16x16`` and ``nicepim_gpu``.

Clock: every unit of a node (engine, node controller, bank controller, router)
runs at ``freq_mhz``; the DRAM timing in ns is resolved once to cycles of it.
Node ``n`` sits at ``(x, y) = (n % na_cols, n // na_cols)`` of the mesh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pimforge.rtl.nicepim.params import DATA_BITS as _DATA_BITS
from pimforge.rtl.nicepim.params import PSUM_BITS as _PSUM_BITS

from .base import check, check_choice, check_float, check_int, check_pow2
from .hmc import PAGE_POLICIES, SCHEDULERS, DRAMTimingNs

__all__ = ["DATAFLOWS", "NicePIMTimingNs", "NicePIMConfig"]

#: Weight-stationary and output-stationary systolic dataflows.
DATAFLOWS = ("ws", "os")

#: Table II: 16x16 DRAM banks.
_MAX_BANKS = 256
_KIB = 1024


@dataclass(frozen=True)
class NicePIMTimingNs(DRAMTimingNs):
    """The banks' timing in ns: the HMC 2.1 part of Ramulator-PIM, which the paper's
    evaluation simulates (Sec. VIII-A); only the error messages' prefix differs."""

    WHERE: ClassVar[str] = "nicepim.timing"


@dataclass(frozen=True)
class NicePIMConfig:
    """One NicePIM DRAM-PIM accelerator (Fig. 3, Tables I and II).

    Parameters
    ----------
    na_rows, na_cols : int
        PIM-node array (NA_row x NA_col), a mesh of routers (Table II: 2 to 16).
    pe_rows, pe_cols : int
        PE array of one node's NN engine (PEA_row x PEA_col, 1 to 256). In the
        weight-stationary dataflow a PE row holds one input channel (the reduction
        dimension) and a PE column one output channel.
    ibuf_bytes, wbuf_bytes, obuf_bytes : int
        Input, weight and output (partial-sum) buffers of a node (Size_ibuf/wbuf/obuf);
        each a whole number of its lines (``pe_rows`` inputs, ``pe_cols`` weights,
        ``pe_cols`` partial sums).
    dataflow : str
        ``"ws"`` (weight-stationary systolic) or ``"os"`` (output-stationary).
    freq_mhz : float
        Clock of the PIM-nodes (Table II: 400 MHz).
    banks_per_node : int
        DRAM banks of one node, bound together into one port of
        ``banks_per_node * bank_width_bits`` bits (Sec. III-A).
    bank_bytes : int
        Capacity of one bank (Table II: 8 MiB; a sparse simulation model).
    bank_width_bits : int
        Width_bank, the data port of one bank (Table II: 128 bits).
    row_bytes : int
        Row-buffer (page) size of one bank.
    timing : NicePIMTimingNs
        DRAM timing in ns.
    page_policy, scheduler : str
        The node's bank controller: ``"open"``/``"close"``; ``"fcfs"``/``"frfcfs"``.
    dram_queue : int
        Requests the bank controller queues (the DMA and a ``SEND`` keep one read in
        flight each, the network's writes stream).
    task_entries : int
        Tasks in a node controller's task list.
    noc_vcs, noc_buffer_depth, noc_packet_flits : int
        The node routers' virtual channels (Table II: 8), flits per input VC buffer
        and the longest packet of the network interface.
    dram_pj_per_bit, noc_pj_per_bit_hop : float
        DRAM access energy (0.88 pJ/bit) and NoC energy (1.1 pJ/bit/hop).
    """

    na_rows: int = 2
    na_cols: int = 2
    pe_rows: int = 4
    pe_cols: int = 4
    ibuf_bytes: int = 1 * _KIB
    wbuf_bytes: int = 1 * _KIB
    obuf_bytes: int = 1 * _KIB
    dataflow: str = "ws"
    freq_mhz: float = 400.0
    banks_per_node: int = 2
    bank_bytes: int = 64 * _KIB
    bank_width_bits: int = 128
    row_bytes: int = 1024
    timing: NicePIMTimingNs = field(default_factory=NicePIMTimingNs)
    page_policy: str = "open"
    scheduler: str = "frfcfs"
    dram_queue: int = 4
    task_entries: int = 64
    noc_vcs: int = 1
    noc_buffer_depth: int = 4
    noc_packet_flits: int = 4
    dram_pj_per_bit: float = 0.88
    noc_pj_per_bit_hop: float = 1.1

    def __post_init__(self):
        check_int("nicepim.na_rows", self.na_rows, 1, 16)
        check_int("nicepim.na_cols", self.na_cols, 1, 16)
        check_int("nicepim.pe_rows", self.pe_rows, 1, 256)
        check_int("nicepim.pe_cols", self.pe_cols, 1, 256)
        for name, line in (("ibuf_bytes", self.ibuf_line_bytes),
                           ("wbuf_bytes", self.wbuf_line_bytes),
                           ("obuf_bytes", self.obuf_line_bytes)):
            value = getattr(self, name)
            check_int(f"nicepim.{name}", value, 64, 2048 * _KIB)
            check(value % line == 0 and value // line >= 2, f"nicepim.{name}", value,
                  f"a multiple of its {line}-byte line, at least two lines")
        check_choice("nicepim.dataflow", self.dataflow, DATAFLOWS)
        check_float("nicepim.freq_mhz", self.freq_mhz, 1.0, 5000.0)
        check_pow2("nicepim.banks_per_node", self.banks_per_node, 1, _MAX_BANKS)
        check(self.nodes * self.banks_per_node <= _MAX_BANKS, "nicepim.banks_per_node",
              self.banks_per_node,
              f"at most {_MAX_BANKS // self.nodes} with {self.nodes} nodes (Table II: "
              f"{_MAX_BANKS} banks in all)")
        check_pow2("nicepim.bank_width_bits", self.bank_width_bits, 32, 1024)
        # A flit carries a DRAM word address (data-sharing messages): at least 32 bits.
        check(self.node_bank_bits >= 64, "nicepim.bank_width_bits", self.bank_width_bits,
              f"at least {64 // self.banks_per_node} with {self.banks_per_node} banks per node "
              "(flits of at least 32 bits)")
        check_pow2("nicepim.row_bytes", self.row_bytes, max(64, self.bank_width_bits // 4),
                   16384)
        check_pow2("nicepim.bank_bytes", self.bank_bytes, self.row_bytes * 2, 1 << 30)
        check_choice("nicepim.page_policy", self.page_policy, PAGE_POLICIES)
        check_choice("nicepim.scheduler", self.scheduler, SCHEDULERS)
        check_int("nicepim.dram_queue", self.dram_queue, 2, 64)
        check_pow2("nicepim.task_entries", self.task_entries, 4, 4096)
        check_int("nicepim.noc_vcs", self.noc_vcs, 1, 8)
        check_int("nicepim.noc_buffer_depth", self.noc_buffer_depth, 2, 64)
        # A data-sharing message is an address flit and the two halves of a DRAM word.
        check_int("nicepim.noc_packet_flits", self.noc_packet_flits, 3, 16)
        check_float("nicepim.dram_pj_per_bit", self.dram_pj_per_bit, 0.0, 1e6)
        check_float("nicepim.noc_pj_per_bit_hop", self.noc_pj_per_bit_hop, 0.0, 1e6)

    # ---- derived ------------------------------------------------------------------------
    @property
    def nodes(self) -> int:
        """PIM-nodes of the array."""
        return self.na_rows * self.na_cols

    @property
    def data_bits(self) -> int:
        """Inputs, weights and outputs of DNN layers (Table II)."""
        return _DATA_BITS

    @property
    def psum_bits(self) -> int:
        """Intermediate partial sums (Table II)."""
        return _PSUM_BITS

    @property
    def node_bank_bits(self) -> int:
        """The node's DRAM port: its banks read in parallel."""
        return self.banks_per_node * self.bank_width_bits

    @property
    def flit_bits(self) -> int:
        """NoC flit payload: half the node's total bank width (Sec. VIII-B)."""
        return self.node_bank_bits // 2

    @property
    def node_bytes(self) -> int:
        """DRAM capacity of one node."""
        return self.banks_per_node * self.bank_bytes

    @property
    def word_bytes(self) -> int:
        """Bytes of one DRAM word (one access of all the node's banks)."""
        return self.node_bank_bits // 8

    @property
    def node_words(self) -> int:
        """DRAM words of one node (the address range of its bank port)."""
        return self.node_bytes // self.word_bytes

    @property
    def rows(self) -> int:
        """Rows per bank."""
        return self.bank_bytes // self.row_bytes

    @property
    def row_words(self) -> int:
        """DRAM words of one row (the banks of a node open the same row together)."""
        return self.row_bytes * 8 // self.bank_width_bits

    @property
    def ibuf_line_bytes(self) -> int:
        return self.pe_rows * _DATA_BITS // 8

    @property
    def wbuf_line_bytes(self) -> int:
        return self.pe_cols * _DATA_BITS // 8

    @property
    def obuf_line_bytes(self) -> int:
        return self.pe_cols * _PSUM_BITS // 8

    @property
    def ibuf_lines(self) -> int:
        return self.ibuf_bytes // self.ibuf_line_bytes

    @property
    def wbuf_lines(self) -> int:
        return self.wbuf_bytes // self.wbuf_line_bytes

    @property
    def obuf_lines(self) -> int:
        return self.obuf_bytes // self.obuf_line_bytes

    @property
    def tck_ns(self) -> float:
        """One clock cycle of a node, ns."""
        return 1000.0 / self.freq_mhz
