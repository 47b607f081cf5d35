"""The weight-stationary systolic PE array of a NicePIM NN engine."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..hierarchy import Leaf, leaf_name
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
        # Every row is the same Verilog module (a 32 x 32 array is one row of 32 PEs
        # instantiated 32 times, not 1024 PEs flattened).
        rows = [Leaf(leaf_name("nn_pe_row", f"c{C}"), lambda: PERow(cols=C)) for _ in range(R)]
        for r, row in enumerate(rows):
            m.submodules[f"row{r}"] = row
            # Row r's input, delayed r cycles (the skew).
            s = self.x[r * D:(r + 1) * D]
            for k in range(r):
                d = Signal(D, name=f"skew_{r}_{k}")
                m.d.sync += d.eq(s)
                s = d
            m.d.comb += [row.w_we.eq(self.w_we & (self.w_row == r)),
                         row.w_data.eq(self.w_data), row.x.eq(s),
                         row.p_in.eq(0 if r == 0 else rows[r - 1].p_out)]
        # Column c is ready rows + c cycles after its vector: delay it cols - 1 - c more.
        outs = []
        last = rows[-1].p_out
        for c in range(C):
            s = last[c * P:(c + 1) * P]
            for k in range(C - 1 - c):
                d = Signal(P, name=f"deskew_{c}_{k}")
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


class PERow(wiring.Component):
    """One row of the array: ``cols`` PEs sharing an input channel.

    PE ``c`` keeps its weight, passes its input right and its partial sum down, both
    registered: ``p_out[c] <= p_in[c] + w[c] * x_c`` where ``x_c`` is the row's input
    ``c`` cycles late.

    Parameters
    ----------
    cols : int
        PEs in the row.

    Attributes
    ----------
    w_we, w_data : In(1), In(cols * 16)
        Load the row's weights.
    x : In(16)
        The row's input (signed).
    p_in, p_out : In(cols * 32), Out(cols * 32)
        Partial sums from the row above, to the row below.
    """

    def __init__(self, *, cols: int):
        check_int("cols", cols, 1, 256)
        self.cols = cols
        super().__init__({"w_we": In(1), "w_data": In(cols * DATA_BITS), "x": In(DATA_BITS),
                          "p_in": In(cols * PSUM_BITS), "p_out": Out(cols * PSUM_BITS)})

    def elaborate(self, platform):
        m = Module()
        C, D, P = self.cols, DATA_BITS, PSUM_BITS
        xi = self.x.as_signed()
        for c in range(C):
            w = Signal(signed(D), name=f"w_{c}")
            with m.If(self.w_we):
                m.d.sync += w.eq(self.w_data[c * D:(c + 1) * D])
            xo = Signal(signed(D), name=f"x_{c}")
            po = self.p_out[c * P:(c + 1) * P]
            pi = self.p_in[c * P:(c + 1) * P].as_signed()
            m.d.sync += [xo.eq(xi), po.eq(pi + w * xi)]
            xi = xo
        return m


def from_config(cfg) -> PEArray:
    """The PE array of a PIM-node of ``cfg.nicepim``."""
    return PEArray(rows=cfg.nicepim.pe_rows, cols=cfg.nicepim.pe_cols)
