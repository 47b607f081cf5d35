"""The weight-stationary systolic PE array of a NicePIM NN engine."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int
from .params import DATA_BITS, PSUM_BITS

__all__ = ["PEArray", "from_config"]


class PEArray(wiring.Component):
    """``rows x cols`` multiply-accumulate PEs, weight-stationary and systolic.

    PE ``(r, c)`` holds the weight of input channel ``r`` and output channel ``c``.
    An input vector (one pixel's ``rows`` channels) enters skewed: channel ``r``
    ``r`` cycles late, then moves one PE right per cycle; partial sums move one
    PE down per cycle, so column ``c`` finishes ``rows + c`` cycles after the
    vector entered. The columns are de-skewed, so that the output vector
    ``y[c] = sum_r w[r][c] * x[r]`` (16-bit signed operands, 32-bit wrapping
    sums) leaves ``latency = rows + cols - 1`` cycles after its input, one vector
    per cycle.

    Parameters
    ----------
    rows, cols : int
        PE_row (reduction: input channels) and PE_col (output channels).

    Attributes
    ----------
    w_we : In(1)
        Load ``w_data`` (``cols`` weights) into PE row ``w_row``. Only while no
        vector is in flight: a weight changes every sum that has not passed it.
    x_valid, x : In(1), In(rows * 16)
        An input vector, channel ``r`` in bits ``16 r``.
    y_valid, y : Out(1), Out(cols * 32)
        The output vector of the input ``latency`` cycles earlier.
    latency : int
        ``rows + cols - 1``.
    """

    def __init__(self, *, rows: int, cols: int):
        check_int("rows", rows, 1, 256)
        check_int("cols", cols, 1, 256)
        self.rows, self.cols = rows, cols
        self.latency = rows + cols - 1
        super().__init__({
            "w_we": In(1), "w_row": In(range(max(2, rows))), "w_data": In(cols * DATA_BITS),
            "x_valid": In(1), "x": In(rows * DATA_BITS),
            "y_valid": Out(1), "y": Out(cols * PSUM_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        R, C, D, P = self.rows, self.cols, DATA_BITS, PSUM_BITS
        w = [[Signal(signed(D), name=f"w_{r}_{c}") for c in range(C)] for r in range(R)]
        for r in range(R):
            with m.If(self.w_we & (self.w_row == r)):
                m.d.sync += [w[r][c].eq(self.w_data[c * D:(c + 1) * D]) for c in range(C)]
        # Row r's input, delayed r cycles (the skew).
        xin = []
        for r in range(R):
            s = self.x[r * D:(r + 1) * D].as_signed()
            for k in range(r):
                d = Signal(signed(D), name=f"skew_{r}_{k}")
                m.d.sync += d.eq(s)
                s = d
            xin.append(s)
        # x moves right, partial sums move down; both registered in every PE.
        xo = [[Signal(signed(D), name=f"x_{r}_{c}") for c in range(C)] for r in range(R)]
        po = [[Signal(signed(P), name=f"p_{r}_{c}") for c in range(C)] for r in range(R)]
        for r in range(R):
            for c in range(C):
                xi = xin[r] if c == 0 else xo[r][c - 1]
                pi = 0 if r == 0 else po[r - 1][c]
                m.d.sync += [xo[r][c].eq(xi), po[r][c].eq(pi + w[r][c] * xi)]
        # Column c is ready rows + c cycles after its vector: delay it cols - 1 - c more.
        outs = []
        for c in range(C):
            s = po[R - 1][c]
            for k in range(C - 1 - c):
                d = Signal(signed(P), name=f"deskew_{c}_{k}")
                m.d.sync += d.eq(s)
                s = d
            outs.append(s)
        m.d.comb += self.y.eq(Cat(*outs))
        v = self.x_valid
        for k in range(self.latency):
            d = Signal(name=f"valid_{k}")
            m.d.sync += d.eq(v)
            v = d
        m.d.comb += self.y_valid.eq(v)
        return m


def from_config(cfg) -> PEArray:
    """The PE array of a PIM-node of ``cfg.nicepim``."""
    return PEArray(rows=cfg.nicepim.pe_rows, cols=cfg.nicepim.pe_cols)
