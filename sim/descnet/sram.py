"""Analytical 32 nm SRAM scratchpad model: area, leakage, access and wake-up energy.

DESCNet evaluates its memories with CACTI-P; this module replaces it with a
closed-form model whose coefficients are documented here and checked against
the published values of DESCNet Table III (``tests/test_descnet_sram.py``
prints the per-entry errors). Sizes are in bytes, the memory is organized in
16 banks (Sec. V-C), energies in pJ/nJ/mJ as named.

Area (mm^2) of a single-port memory of ``S`` KiB::

    A1(S) = AREA_LIN * S + AREA_SQRT * sqrt(S)

(the linear term is the cell array, the square-root term the periphery that
grows with the array's edge). Fitted by relative least squares to the eleven
single-port areas of Table III (8 KiB ... 8 MiB): errors within +-15 %.

Ports: a ``p``-port cell grows in both directions by a wordline and a bitline
pair per extra port, ``A(S, p) = A1(S) * (1 + PORT_K * (p - 1))**2``.
``PORT_K`` makes the factor 4.81 at three ports, the geometric mean of
Table III's 3-port/1-port ratios (4.46-5.41); two ports give 2.55.

Power gating with ``SC`` sectors adds a sleep-transistor network and the
per-sector periphery::

    A_pg = A * (1 + PG_AREA_REL) + PG_AREA_PER_SECTOR * SC

fitted to the fifteen -PG areas of Table III (errors -27 % ... +13 %).
The sleep-transistor network and the per-sector periphery it adds are not
gated: that added area leaks ``PG_LEAK_MW_PER_MM2`` all the time (high-Vt
devices, a quarter of the array's leakage density), which is what makes
very fine sectoring lose energy.

Leakage (mW) with every sector ON: ``LEAK_MW_PER_KIB * S * (1 + LEAK_PORT_K
* (p - 1))``: Table III's static energies divided by the inference time of
the paper (116 FPS CapsNet, 9.7 FPS DeepCaps) give 0.80-0.92 mW/KiB for every
single-port memory and about 1.6 mW/KiB at three ports. An OFF sector keeps
``OFF_LEAK`` of its leakage (the sleep transistor's own leakage).

Dynamic energy per access of ``b`` bytes to a memory of ``S`` KiB in 16
banks: ``b * (E_FIX + E_BANK * sqrt(S / 16)) * port_factor`` pJ: the
bitline/wordline energy of one bank grows with the bank's edge, and a
multi-port cell has the longer lines of its larger area. These are a-priori
values (Table III's dynamic energies depend on access counts the paper does
not list) and the comparison with Table III is reported, not fitted.

Wake-up: recharging a sector's virtual ground costs ``WAKE_NJ_PER_MM2`` per
mm^2 of the sector, and takes ``WAKE_NS`` (0.072 ns in Sec. VI-A).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "AREA_LIN",
    "AREA_SQRT",
    "BANKS",
    "E_BANK",
    "E_DRAM_PJ_PER_BYTE",
    "E_FIX",
    "E_MAC_PJ",
    "LEAK_MW_PER_KIB",
    "LEAK_PORT_K",
    "OFF_LEAK",
    "PAPER_FPS",
    "PG_AREA_PER_SECTOR",
    "PG_AREA_REL",
    "PG_LEAK_MW_PER_MM2",
    "PORT_K",
    "TABLE_III",
    "WAKE_NJ_PER_MM2",
    "WAKE_NS",
    "access_pj",
    "area_mm2",
    "leak_mw",
    "pg_leak_mw",
    "port_factor",
    "wake_nj",
]

BANKS = 16
AREA_LIN = 0.00418956        # mm^2 per KiB (cell array)
AREA_SQRT = 0.00134078       # mm^2 per sqrt(KiB) (periphery)
PORT_K = 0.5962              # (1 + 2 * PORT_K)**2 = 4.805
PG_AREA_REL = 0.0677         # sleep transistors in proportion to the array
PG_AREA_PER_SECTOR = 0.0223  # mm^2 per sector: its switch driver and isolation
LEAK_MW_PER_KIB = 0.85
LEAK_PORT_K = 0.35           # 1.7x per KiB at three ports
OFF_LEAK = 0.05
PG_LEAK_MW_PER_MM2 = 48.0    # a quarter of the ~190 mW/mm^2 of the single-port arrays
E_FIX = 0.25                 # pJ per byte, decoders and I/O
E_BANK = 0.12                # pJ per byte per sqrt(KiB of one bank)
WAKE_NJ_PER_MM2 = 0.3
WAKE_NS = 0.072
E_MAC_PJ = 0.5               # 8-bit MAC with its pipeline registers, 32 nm
E_DRAM_PJ_PER_BYTE = 160.0   # 20 pJ/bit off-chip DRAM access including I/O


def port_factor(ports) -> np.ndarray:
    return (1.0 + PORT_K * (np.asarray(ports, dtype=float) - 1.0)) ** 2


def area_mm2(size_bytes, ports=1, sectors=1) -> np.ndarray:
    """Area of a memory; 0 for size 0 (absent). ``sectors > 1`` adds the PG circuitry."""
    s = np.asarray(size_bytes, dtype=float) / 1024.0
    sc = np.asarray(sectors, dtype=float)
    a = (AREA_LIN * s + AREA_SQRT * np.sqrt(s)) * port_factor(ports)
    a = np.where(sc > 1, a * (1.0 + PG_AREA_REL) + PG_AREA_PER_SECTOR * sc, a)
    return np.where(s > 0, a, 0.0)


def leak_mw(size_bytes, ports=1) -> np.ndarray:
    """Leakage power with every sector ON."""
    s = np.asarray(size_bytes, dtype=float) / 1024.0
    return LEAK_MW_PER_KIB * s * (1.0 + LEAK_PORT_K * (np.asarray(ports, dtype=float) - 1.0))


def pg_leak_mw(size_bytes, ports=1, sectors=1) -> np.ndarray:
    """Leakage of the (never gated) power-gating circuitry; 0 without sectors."""
    extra = area_mm2(size_bytes, ports, sectors) - area_mm2(size_bytes, ports, 1)
    return PG_LEAK_MW_PER_MM2 * np.where(np.asarray(sectors) > 1, extra, 0.0)


def access_pj(size_bytes, ports=1, nbytes=1) -> np.ndarray:
    """Energy of one access of ``nbytes`` bytes."""
    s = np.asarray(size_bytes, dtype=float) / 1024.0
    e = nbytes * (E_FIX + E_BANK * np.sqrt(s / BANKS)) * port_factor(ports)
    return np.where(s > 0, e, 0.0)


def wake_nj(size_bytes, ports=1, sectors=1) -> np.ndarray:
    """Energy of waking one sector (OFF -> ON)."""
    sc = np.maximum(np.asarray(sectors, dtype=float), 1.0)
    a = area_mm2(size_bytes, ports, 1)
    return WAKE_NJ_PER_MM2 * a / sc


# Table III (DESCNet), per memory: (net, organization, memory, size KiB, ports, sectors,
# area mm^2, dynamic mJ, static mJ, wakeup nJ or None). Sizes, ports and sectors from
# Tables I-II (the shared memory has three ports unless PS says otherwise).
TABLE_III = [
    ("capsnet", "SEP", "W", 64, 1, 1, 0.314, 0.051, 0.501, None),
    ("capsnet", "SEP", "D", 25, 1, 1, 0.104, 0.011, 0.188, None),
    ("capsnet", "SEP", "A", 32, 1, 1, 0.125, 0.196, 0.238, None),
    ("capsnet", "SEP-PG", "W", 64, 1, 8, 0.469, 0.053, 0.135, 0.044),
    ("capsnet", "SEP-PG", "D", 25, 1, 2, 0.173, 0.012, 0.083, 0.048),
    ("capsnet", "SEP-PG", "A", 32, 1, 2, 0.200, 0.205, 0.148, 0.064),
    ("capsnet", "SMP", "S", 108, 3, 1, 2.521, 1.859, 1.529, None),
    ("capsnet", "SMP-PG", "S", 108, 3, 2, 2.958, 1.875, 0.668, 0.352),
    ("capsnet", "HY", "S", 25, 3, 1, 0.519, 0.068, 0.348, None),
    ("capsnet", "HY", "W", 32, 1, 1, 0.125, 0.044, 0.238, None),
    ("capsnet", "HY", "D", 8, 1, 1, 0.041, 0.009, 0.068, None),
    ("capsnet", "HY", "A", 16, 1, 1, 0.067, 0.120, 0.130, None),
    ("capsnet", "HY-PG", "S", 32, 3, 2, 1.061, 0.004, 0.046, 0.080),
    ("capsnet", "HY-PG", "W", 25, 1, 4, 0.213, 0.045, 0.083, 0.032),
    ("capsnet", "HY-PG", "D", 25, 1, 2, 0.173, 0.012, 0.083, 0.048),
    ("capsnet", "HY-PG", "A", 32, 1, 2, 0.200, 0.205, 0.148, 0.064),
    ("deepcaps", "SEP", "W", 128, 1, 1, 0.617, 0.039, 12.172, None),
    ("deepcaps", "SEP", "D", 256, 1, 1, 1.165, 0.098, 22.266, None),
    ("deepcaps", "SEP", "A", 8192, 1, 1, 31.392, 34.268, 673.562, None),
    ("deepcaps", "SEP-PG", "W", 128, 1, 16, 0.896, 0.040, 2.277, 0.044),
    ("deepcaps", "SEP-PG", "D", 256, 1, 8, 1.223, 0.099, 4.695, 0.247),
    ("deepcaps", "SEP-PG", "A", 8192, 1, 16, 32.905, 34.464, 256.029, 0.642),
    ("deepcaps", "SMP", "S", 8192, 3, 1, 153.474, 213.961, 1214.223, None),
    ("deepcaps", "SMP-PG", "S", 8192, 3, 8, 167.077, 214.115, 555.102, 1.234),
    ("deepcaps", "HY", "S", 2048, 3, 1, 41.067, 3.143, 315.671, None),
    ("deepcaps", "HY", "W", 8, 1, 1, 0.041, 0.003, 0.810, None),
    ("deepcaps", "HY", "D", 108, 1, 1, 0.547, 0.074, 10.453, None),
    ("deepcaps", "HY", "A", 4096, 1, 1, 16.168, 20.954, 339.713, None),
    ("deepcaps", "HY-PG", "S", 128, 3, 2, 3.293, 0.125, 1.211, 0.464),
    ("deepcaps", "HY-PG", "W", 64, 1, 8, 0.469, 0.019, 1.619, 0.044),
    ("deepcaps", "HY-PG", "D", 128, 1, 8, 0.816, 0.079, 3.898, 0.064),
    ("deepcaps", "HY-PG", "A", 8192, 1, 16, 32.905, 34.464, 256.029, 0.642),
    ("deepcaps", "HY-PS1", "S", 4096, 1, 1, 16.168, 6.108, 339.713, None),
    ("deepcaps", "HY-PS1", "W", 8, 1, 1, 0.041, 0.003, 0.810, None),
    ("deepcaps", "HY-PS1", "D", 256, 1, 1, 1.165, 0.098, 22.266, None),
    ("deepcaps", "HY-PS1", "A", 2048, 1, 1, 8.949, 11.037, 173.698, None),
    ("deepcaps", "HY-PG-PS1", "S", 4096, 1, 8, 17.731, 6.019, 120.913, 0.642),
    ("deepcaps", "HY-PG-PS1", "W", 128, 1, 16, 0.896, 0.040, 2.277, 0.044),
    ("deepcaps", "HY-PG-PS1", "D", 256, 1, 8, 1.223, 0.099, 4.695, 0.247),
    ("deepcaps", "HY-PG-PS1", "A", 2048, 1, 4, 8.338, 11.091, 128.696, 0.642),
]
# Frames per second of the paper's runs (Sec. IV): the time base of Table III's static energy.
PAPER_FPS = {"capsnet": 116.0, "deepcaps": 9.7}
