"""PIM-CapsNet compute parameters: the PE and its vault-level organization."""

from __future__ import annotations

from dataclasses import dataclass

from .base import check_float, check_int, check_pow2

__all__ = ["PEConfig", "CapsNetConfig"]


@dataclass(frozen=True)
class PEConfig:
    """The reconfigurable PE of PIM-CapsNet Sec. 5.2.2.

    Parameters
    ----------
    newton_steps : int
        Newton-Raphson refinements after the magic-constant seed in the
        inverse-square-root and reciprocal flows.
    exp_recovery : bool
        Apply the accuracy-recovery multiply of the exponential flow (Eq. 14).
    calibration_samples : int
        Samples used to derive the approximation constants (the paper uses 10,000).
    calibration_seed : int
        Seed of the calibration sample draw, so the constants are reproducible.
    """

    newton_steps: int = 1
    exp_recovery: bool = True
    calibration_samples: int = 10_000
    calibration_seed: int = 2019

    def __post_init__(self):
        check_int("pe.newton_steps", self.newton_steps, 0, 3)
        check_int("pe.calibration_samples", self.calibration_samples, 100, 10_000_000)
        check_int("pe.calibration_seed", self.calibration_seed, 0, 2**32 - 1)


@dataclass(frozen=True)
class CapsNetConfig:
    """Vault-level PIM-CapsNet organization.

    Parameters
    ----------
    pes_per_vault : int
        PEs beside each vault controller (16 in the paper).
    pe_ops_per_cycle : int
        FP operations (one multiply or one add each, the unit in which Eq. 6-11
        count the workload E) that one PE completes per cycle.  Sets the
        execution-score coefficient ``alpha = 1 / (pes_per_vault *
        pe_ops_per_cycle * freq)`` in seconds per operation.
    intervault_bw_gbs : float
        Bandwidth in GB/s (1e9 bytes/s) available to inter-vault transfers,
        ``beta = 1 / (intervault_bw_gbs * 1e9)`` seconds per byte.  The
        default, 16 GB/s, is one vault's share of the 512 GB/s internal
        bandwidth (PIM-CapsNet Table 4 / Sec. 4): every gather to or
        broadcast from one vault passes through that vault's TSVs.
    packet_overhead_bytes : int
        ``SIZE_pkt`` of Eq. 8, 10, 12: head plus tail of one HMC packet
        (8 + 8 bytes, one 16-byte FLIT).
    imem_instructions : int
        Depth of each vault's operation-controller instruction memory; a
        compiled routing program longer than this is rejected.
    hold_words : int
        Words per lane of the stationary-operand registers (``hold`` of the
        ISA: W of Eq. 1 stays in the PEs while u streams over the batch);
        0 removes them (every operand is read from memory every time).
    prefetch_bundles : int
        Read bundles the controller announces ahead of their use (prefetch
        hints), i.e. the depth of the operand prefetch queue; 0: no hints,
        every bundle is fetched when it is asked for.
    read_buffer_blocks, write_buffer_blocks : int
        Blocks (16 B) of the vault operand port's read buffer (LRU; what was
        fetched is not fetched again while it is there) and write-combining
        buffer (posted writes to a block merge until it is evicted), used
        with prefetch by the banked DRAM model of the native driver.
    fetch_blocks : int
        Blocks the port fetches per missing block (the aligned run holding
        it, one request of a sub-page run; 1 = single blocks).
    """

    pes_per_vault: int = 16
    pe_ops_per_cycle: int = 1
    intervault_bw_gbs: float = 16.0
    packet_overhead_bytes: int = 16
    imem_instructions: int = 256
    hold_words: int = 16
    prefetch_bundles: int = 32
    read_buffer_blocks: int = 256
    write_buffer_blocks: int = 64
    fetch_blocks: int = 4

    def __post_init__(self):
        check_int("capsnet.pes_per_vault", self.pes_per_vault, 1, 64)
        check_int("capsnet.pe_ops_per_cycle", self.pe_ops_per_cycle, 1, 16)
        check_float("capsnet.intervault_bw_gbs", self.intervault_bw_gbs, 0.001, 10_000.0)
        check_int("capsnet.packet_overhead_bytes", self.packet_overhead_bytes, 0, 256)
        check_int("capsnet.imem_instructions", self.imem_instructions, 16, 65536)
        check_int("capsnet.hold_words", self.hold_words, 0, 1024)
        check_int("capsnet.prefetch_bundles", self.prefetch_bundles, 0, 1024)
        check_int("capsnet.read_buffer_blocks", self.read_buffer_blocks, 0, 1 << 20)
        check_int("capsnet.write_buffer_blocks", self.write_buffer_blocks, 0, 1 << 20)
        check_pow2("capsnet.fetch_blocks", self.fetch_blocks, 1, 16)
