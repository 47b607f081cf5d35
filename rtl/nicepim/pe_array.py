"""The weight-stationary systolic PE array of a NicePIM NN engine."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..hierarchy import Leaf, leaf_name
from ..params import check_int
from .params import DATA_BITS, PSUM_BITS

__all__ = ["PEArray", "from_config"]


class PEArray(wiring.Component):
    """``rows x cols`` multiply-accumulate PEs, weight-stationary and systolic.

    PE ``(r, c)`` holds two weights (banks 0 and 1) of input channel ``r`` and output
    channel ``c``. An input vector (one pixel's ``rows`` channels) enters skewed:
    channel ``r`` ``r`` cycles late, then moves one PE right per cycle with its bank
    select ``x_sel``; partial sums move one PE down per cycle, so column ``c``
    finishes ``rows + c`` cycles after the vector entered. The columns are de-skewed,
    so that the output vector ``y[c] = sum_r w[x_sel][r][c] * x[r]`` (16-bit signed
    operands, 32-bit wrapping sums) leaves ``latency = rows + cols - 1`` cycles after
    its input, one vector per cycle.

    The bank select travels with the data, so one bank can be loaded while vectors
    that use the other stream through (the next pass's weights in the background): a
    vector entering in cycle ``s`` uses row ``r``'s weights in cycles ``s + r`` to
    ``s + r + cols - 1``.

    Parameters
    ----------
    rows, cols : int
        PE_row (reduction: input channels) and PE_col (output channels).

    Attributes
    ----------
    w_we : In(1)
        Load ``w_data`` (``cols`` weights) into bank ``w_bank`` of PE row ``w_row``
        (from the next cycle on). Only while no vector in flight uses that bank of
        that row: a weight changes every sum that has not passed it.
    x_valid, x, x_sel : In(1), In(rows * 16), In(1)
        An input vector, channel ``r`` in bits ``16 r``, and the weight bank it uses.
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
            "w_we": In(1), "w_bank": In(1), "w_row": In(range(max(2, rows))),
            "w_data": In(cols * DATA_BITS),
            "x_valid": In(1), "x": In(rows * DATA_BITS), "x_sel": In(1),
            "y_valid": Out(1), "y": Out(cols * PSUM_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        R, C, D, P = self.rows, self.cols, DATA_BITS, PSUM_BITS
        # Every row is the same Verilog module (a 32 x 32 array is one row of 32 PEs
        # instantiated 32 times, not 1024 PEs flattened).
        rows = [Leaf(leaf_name("nn_pe_row", f"c{C}"), lambda: PERow(cols=C)) for _ in range(R)]
        # The skew as a triangle of wide registers (few signals for the simulator to keep
        # per node): stage k holds channels k + 1 .. rows - 1, k + 1 cycles late, each
        # with its bank select (lanes of D + 1 bits).
        E = D + 1
        stage = Cat(*[Cat(self.x[r * D:(r + 1) * D], self.x_sel) for r in range(R)])
        for r, row in enumerate(rows):
            m.submodules[f"row{r}"] = row
            m.d.comb += [row.w_we.eq(self.w_we & (self.w_row == r)),
                         row.w_bank.eq(self.w_bank), row.w_data.eq(self.w_data),
                         row.x.eq(stage[:D]), row.sel.eq(stage[D]),
                         row.p_in.eq(0 if r == 0 else rows[r - 1].p_out)]
            if r + 1 < R:
                nxt = Signal((R - 1 - r) * E, name=f"skew_{r}")
                m.d.sync += nxt.eq(stage[E:])
                stage = nxt
        # The de-skew: column c is ready rows + c cycles after its vector and waits
        # cols - 1 - c more; stage k holds columns 0 .. k.
        last = rows[-1].p_out
        acc = None
        for c in range(C - 1):
            col = last[c * P:(c + 1) * P]
            nxt = Signal((c + 1) * P, name=f"deskew_{c}")
            m.d.sync += nxt.eq(col if acc is None else Cat(acc, col))
            acc = nxt
        top = last[(C - 1) * P:]
        m.d.comb += self.y.eq(top if acc is None else Cat(acc, top))
        valid = Signal(self.latency, name="valid")
        m.d.sync += valid.eq(Cat(self.x_valid, valid[:-1]))
        m.d.comb += self.y_valid.eq(valid[-1])
        return m


class PERow(wiring.Component):
    """One row of the array: ``cols`` PEs sharing an input channel.

    PE ``c`` keeps two weights, passes its input and the input's bank select right and
    its partial sum down, all registered: ``p_out[c] <= p_in[c] + w[sel_c][c] * x_c``
    where ``x_c`` and ``sel_c`` are the row's input and select ``c`` cycles late.

    Parameters
    ----------
    cols : int
        PEs in the row.

    Attributes
    ----------
    w_we, w_bank, w_data : In(1), In(1), In(cols * 16)
        Load the row's weights into bank ``w_bank``.
    x, sel : In(16), In(1)
        The row's input (signed) and the weight bank it uses.
    p_in, p_out : In(cols * 32), Out(cols * 32)
        Partial sums from the row above, to the row below.
    """

    def __init__(self, *, cols: int):
        check_int("cols", cols, 1, 256)
        self.cols = cols
        super().__init__({"w_we": In(1), "w_bank": In(1), "w_data": In(cols * DATA_BITS),
                          "x": In(DATA_BITS), "sel": In(1),
                          "p_in": In(cols * PSUM_BITS), "p_out": Out(cols * PSUM_BITS)})

    def elaborate(self, platform):
        m = Module()
        C, D, P = self.cols, DATA_BITS, PSUM_BITS
        # One register each for the row's two weight banks, its inputs in flight and
        # their selects.
        w0, w1 = Signal(C * D), Signal(C * D)
        xs = Signal(C * D)                  # xs lane c: the input PE c passes right
        ss = Signal(C)                      # ss bit c: its bank select
        with m.If(self.w_we & ~self.w_bank):
            m.d.sync += w0.eq(self.w_data)
        with m.If(self.w_we & self.w_bank):
            m.d.sync += w1.eq(self.w_data)
        ins = [self.x] + [xs[c * D:(c + 1) * D] for c in range(C - 1)]
        sels = [self.sel] + [ss[c] for c in range(C - 1)]
        m.d.sync += [xs.eq(Cat(*ins)), ss.eq(Cat(*sels))]
        sums = []
        for c in range(C):
            xi = ins[c].as_signed()
            wc = Mux(sels[c], w1[c * D:(c + 1) * D], w0[c * D:(c + 1) * D]).as_signed()
            pi = self.p_in[c * P:(c + 1) * P].as_signed()
            sums.append((pi + wc * xi)[:P])
        m.d.sync += self.p_out.eq(Cat(*sums))
        return m


def from_config(cfg) -> PEArray:
    """The PE array of a PIM-node of ``cfg.nicepim``."""
    return PEArray(rows=cfg.nicepim.pe_rows, cols=cfg.nicepim.pe_cols)
