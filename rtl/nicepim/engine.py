"""The NicePIM NN engine: PE array with its input, weight and output buffers."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..params import check, check_int, check_pow2
from .params import DATA_BITS, PSUM_BITS, TASK_LAYOUT, ibuf_row_lines, wbuf_row_lines
from .pe_array import PEArray

__all__ = ["NNEngine", "from_config", "pass_gap", "tile_cycles"]


def pass_gap(pe_rows: int, pe_cols: int) -> int:
    """The fewest cycles between the starts of two passes of a tile (see :class:`NNEngine`):
    the next pass's weights take ``pe_rows`` cycles to load and can start loading only
    once the pass before the current one has left the array's columns."""
    return max(pe_rows, pe_cols - 1, 2)


def tile_cycles(*, pe_rows: int, pe_cols: int, cb: int, kh: int, kw: int, oh: int,
                ow: int) -> int:
    """Cycles of one convolution tile on the engine (see :class:`NNEngine`)."""
    passes, n = cb * kh * kw, oh * ow
    return (pe_rows + 1 + (passes - 1) * max(n, pass_gap(pe_rows, pe_cols)) + n
            + pe_rows + pe_cols)


class NNEngine(wiring.Component):
    """A weight-stationary systolic PE array fed from its input, weight and output
    buffers, computing one convolution (or matrix-multiplication) tile per start.

    A tile (the ``COMPUTE`` task of :class:`~pimforge.rtl.nicepim.params.Op`) is a
    dense convolution of ``cb * pe_rows`` input channels (``cb`` channel blocks)
    of an ``nh x nw`` input window into ``pe_cols`` output channels over
    ``oh x ow`` output pixels, with a ``kh x kw`` kernel, ``stride`` and
    ``pad``. The input buffer holds line ``(b * nh + i) * nw + j`` = the block
    ``b`` channels of pixel ``(i, j)`` (with rows of ``ibuf_row_lines = nb > 1``
    lines: line ``(b - b % nb) * nh * nw + (i * nw + j) * g + b % nb``, ``g`` the
    blocks of ``b``'s group of ``nb``, so that a pixel's blocks of a group are one run
    of lines; :func:`~pimforge.rtl.nicepim.params.ibuf_row_lines`); the weight buffer line
    ``((b * kh + u) * kw + v) * pe_rows + r`` = the ``pe_cols`` weights of input
    channel ``b * pe_rows + r`` at kernel position ``(u, v)``; output pixel
    ``(o, q)`` accumulates into output-buffer line ``o * ow + q`` (32-bit lanes).
    A matrix-multiplication tile ``[M x K] @ [K x N]`` is the tile with
    ``nh = oh = 1``, ``nw = ow = M``, ``kh = kw = stride = 1``, ``pad = 0``,
    ``K = cb * pe_rows`` and ``N <= pe_cols``. Grouped convolutions are one tile
    per group (a group is a dense convolution of its channels).

    The tile runs one *pass* per channel block and kernel position ``(b, u, v)``,
    streaming the ``N = oh * ow`` input pixels ``(o * stride + u - pad, q * stride +
    v - pad)`` one per cycle (0 outside the window: the padding) through the array.
    The first pass's ``pe_rows`` weight rows are loaded before it (``pe_rows + 1``
    cycles, the buffer read being synchronous). The PEs hold two weight banks and
    every pixel carries the bank it uses, so each later pass's weights are loaded
    into the other bank while the pass before streams (weights loaded in the
    background, as a double-buffered weight-stationary array does): a pass starts
    ``max(N, G)`` cycles after the one before, ``G = max(pe_rows, pe_cols - 1, 2)``
    (:func:`pass_gap`) being the loading's own pace. After the last pass the array
    drains until the last sum has been added into the output buffer (``pe_rows +
    pe_cols`` cycles: the array's latency ``pe_rows + pe_cols - 1`` plus the
    read-add-write of the output buffer). The first pass writes the output buffer,
    the others add to it (``acc``: the first pass adds too); a pass's sums reach a
    line at least one cycle after the pass before wrote it, which the transparent
    read sees. Cycles of a tile, from the cycle after ``start`` until ``busy``
    falls, with ``passes = cb * kh * kw``::

        T = pe_rows + 1 + (passes - 1) * max(N, G) + N + pe_rows + pe_cols

    (:func:`tile_cycles`); the array is streaming in ``passes * N`` of them.

    Parameters
    ----------
    pe_rows, pe_cols : int
        PE array.
    ibuf_lines, wbuf_lines, obuf_lines : int
        Buffer depths in lines of ``pe_rows`` inputs, ``pe_cols`` weights and
        ``pe_cols`` partial sums.
    ibuf_row_lines : int
        Input lines in one row of the input buffer's SRAM (a power of two dividing
        ``ibuf_lines / 2``): line ``l`` is slot ``l % ibuf_row_lines`` of row
        ``l / ibuf_row_lines``. The DMA writes runs of lanes within a row (up to a DRAM
        word a cycle); the engine reads a row and takes the slot of its line.
    wbuf_row_lines : int
        Weight lines in one row of the weight buffer's SRAM (a power of two dividing
        ``wbuf_lines / 2``; :func:`~pimforge.rtl.nicepim.params.wbuf_row_lines`): line
        ``l`` is slot ``l % wbuf_row_lines`` of row ``l / wbuf_row_lines``. The DMA writes
        whole rows (a DRAM word of weights a cycle) or single slots; the engine reads a
        row and takes the slot of its line.

    Attributes
    ----------
    task : In(TASK_LAYOUT)
        The tile's fields (``cb, nh, nw, kh, kw, stride, pad, oh, ow, acc``), held
        while ``busy``.
    start : In(1)
        Start the tile (while not ``busy``).
    busy, streaming : Out(1)
        A tile is running; input pixels are entering the array this cycle.
    ibuf_w, wbuf_w : Out(WritePort.Signature)
        Write ports of the input buffer (a row of ``ibuf_row_lines`` lines) and of the
        weight buffer (a row of ``wbuf_row_lines`` lines), in 16-bit lanes, for the DMA
        (the memory's own port signature: its members are inputs).
    obuf_r : Out(ReadPort.Signature)
        A read port of the output buffer, for the DMA.
    """

    def __init__(self, *, pe_rows: int, pe_cols: int, ibuf_lines: int, wbuf_lines: int,
                 obuf_lines: int, wbuf_row_lines: int = 1, ibuf_row_lines: int = 1):
        check_int("pe_rows", pe_rows, 1, 256)
        check_int("pe_cols", pe_cols, 1, 256)
        for n, v in (("ibuf_lines", ibuf_lines), ("wbuf_lines", wbuf_lines),
                     ("obuf_lines", obuf_lines)):
            check_int(n, v, 2, 1 << 20)
        check(wbuf_lines >= pe_rows, "wbuf_lines", wbuf_lines,
              f"at least pe_rows = {pe_rows} (the weights of one pass)")
        check_pow2("wbuf_row_lines", wbuf_row_lines, 1, 256)
        check(wbuf_lines % (2 * wbuf_row_lines) == 0 or wbuf_row_lines == 1, "wbuf_row_lines",
              wbuf_row_lines, f"a divisor of half of wbuf_lines = {wbuf_lines}")
        check_pow2("ibuf_row_lines", ibuf_row_lines, 1, 256)
        check(ibuf_lines % (2 * ibuf_row_lines) == 0 or ibuf_row_lines == 1, "ibuf_row_lines",
              ibuf_row_lines, f"a divisor of half of ibuf_lines = {ibuf_lines}")
        self.wbuf_row_lines, self.ibuf_row_lines = wbuf_row_lines, ibuf_row_lines
        self.pe_rows, self.pe_cols = pe_rows, pe_cols
        self.ibuf_lines, self.wbuf_lines, self.obuf_lines = ibuf_lines, wbuf_lines, obuf_lines
        D, P = DATA_BITS, PSUM_BITS
        self.latencies = {"pe_array": pe_rows + pe_cols - 1}
        super().__init__({
            "task": In(TASK_LAYOUT), "start": In(1), "busy": Out(1), "streaming": Out(1),
            "ibuf_w": Out(WritePort.Signature(
                addr_width=ceil_log2(ibuf_lines // ibuf_row_lines),
                shape=ibuf_row_lines * pe_rows * D, granularity=D)),
            "wbuf_w": Out(WritePort.Signature(
                addr_width=ceil_log2(wbuf_lines // wbuf_row_lines),
                shape=wbuf_row_lines * pe_cols * D, granularity=D)),
            "obuf_r": Out(ReadPort.Signature(addr_width=ceil_log2(obuf_lines),
                                            shape=pe_cols * P)),
        })

    def elaborate(self, platform):
        m = Module()
        R, C = self.pe_rows, self.pe_cols
        D, P = DATA_BITS, PSUM_BITS
        t = self.task

        NI = self.ibuf_row_lines
        ibuf = m.submodules.ibuf = Memory(shape=NI * R * D, depth=self.ibuf_lines // NI,
                                          init=[])
        NB = self.wbuf_row_lines
        wbuf = m.submodules.wbuf = Memory(shape=NB * C * D, depth=self.wbuf_lines // NB,
                                          init=[])
        obuf = m.submodules.obuf = Memory(shape=C * P, depth=self.obuf_lines, init=[])
        wiring.connect(m, wiring.flipped(self.ibuf_w), ibuf.write_port(granularity=D))
        wiring.connect(m, wiring.flipped(self.wbuf_w), wbuf.write_port(granularity=D))
        wiring.connect(m, wiring.flipped(self.obuf_r), obuf.read_port())
        ir, wr = ibuf.read_port(), wbuf.read_port()
        # the halves of the buffers the tile uses (TASK_LAYOUT's buf, obuf)
        ioff = Mux(t.buf, self.ibuf_lines // 2, 0)
        woff = Mux(t.buf, self.wbuf_lines // 2, 0)
        ooff = Mux(t.obuf, self.obuf_lines // 2, 0)
        ow_ = obuf.write_port()
        orp = obuf.read_port(transparent_for=(ow_,))

        pea = m.submodules.pe_array = PEArray(rows=R, cols=C)
        L = pea.latency

        # ---- pass counters ---------------------------------------------------------
        b = Signal(16)
        u = Signal(8)
        v = Signal(8)
        k = Signal(range(R + 1))
        o = Signal(16)
        q = Signal(16)
        pix = Signal(16)
        wbase = Signal(24)
        ibase = Signal(32)
        ih0 = Signal(signed(20))        # o * stride + u - pad
        iw = Signal(signed(20))         # q * stride + v - pad
        drain = Signal(range(L + 2))
        first = Signal()
        bank = Signal()                 # the weight bank of the pass streaming
        G, LSTART = pass_gap(R, C), max(C - 3, 0)
        gap = Signal(range(LSTART + R + 1))     # cycles since the pass's first pixel
        last_pass = (b + 1 == t.cb) & (u + 1 == t.kh) & (v + 1 == t.kw)
        window = t.nh * t.nw

        # ---- stream: input pixel -> array -> output buffer --------------------------
        inside = (ih0 >= 0) & (ih0 < t.nh) & (iw >= 0) & (iw < t.nw)
        pixel = ih0.as_unsigned() * t.nw + iw.as_unsigned()
        if NI > 1:
            # block b's group: its first line ibase, g = its blocks, b's slot in it
            si = exact_log2(NI)
            bslot = b[:si]
            gsize = Signal(range(NI + 1))
            left = t.cb - Cat(Const(0, si), b[si:])
            m.d.comb += gsize.eq(Mux(left >= NI, NI, left))
            iline = Signal(32)
            islot = Signal(si)
            m.d.comb += [iline.eq(ioff + ibase + pixel * gsize + bslot),
                         ir.addr.eq(iline >> si)]
            m.d.sync += islot.eq(iline[:si])
            idata = ir.data.word_select(islot, R * D)
        else:
            m.d.comb += ir.addr.eq(ioff + ibase + pixel)
            idata = ir.data
        streaming = Signal()
        m.d.comb += self.streaming.eq(streaming)
        # Metadata of the pixel read in cycle s: stage 0 holds it at s + 1 (array input).
        meta = [Signal(1 + 1 + 16 + 1 + 1, name=f"meta_{i}") for i in range(L + 1)]
        m.d.sync += meta[0].eq(Cat(streaming, ~inside, pix, first, bank))
        for i in range(1, L + 1):
            m.d.sync += meta[i].eq(meta[i - 1])
        zero = meta[0][1]
        m.d.comb += [pea.x_valid.eq(meta[0][0]), pea.x.eq(Mux(zero, 0, idata)),
                     pea.x_sel.eq(meta[0][19])]
        m.d.comb += orp.addr.eq(ooff + meta[L - 1][2:18])
        out_pix, out_first = meta[L][2:18], meta[L][18]
        sums = Cat(*[(pea.y[c * P:(c + 1) * P] +
                      Mux(out_first, 0, orp.data[c * P:(c + 1) * P]))[:P] for c in range(C)])
        m.d.comb += [ow_.en.eq(pea.y_valid), ow_.addr.eq(ooff + out_pix), ow_.data.eq(sums)]

        # ---- weights ----------------------------------------------------------------
        # The first pass's rows are loaded before it streams (WLOAD: row k - 1 gets the
        # line read in the cycle before). Each later pass's rows are loaded into the
        # other bank while the pass before streams: a loader started LSTART cycles into
        # that pass reads row r at LSTART + 1 + r and writes it at LSTART + 2 + r, once
        # the last pixel of the pass before that (same bank) has left row r (at
        # C - 1 + r) and before the next pass's first pixel reaches it (at its own
        # 1 + r); so passes start at least G cycles apart.
        lact = Signal()
        lrow = Signal(range(R + 1))
        lbase = Signal(24)
        lbank = Signal()
        lw_en = Signal()
        lw_row = Signal(range(max(2, R)))
        lw_bank = Signal()
        m.d.sync += [lw_en.eq(lact), lw_row.eq(lrow), lw_bank.eq(lbank)]
        with m.If(lact):
            m.d.sync += lrow.eq(lrow + 1)
            with m.If(lrow + 1 == R):
                m.d.sync += lact.eq(0)
        wload = Signal()
        # the weight line read: its row, and its slot one cycle later (with the data)
        wline = Signal(ceil_log2(self.wbuf_lines) + 25)
        m.d.comb += wline.eq(woff + Mux(wload, wbase + k, lbase + lrow))
        if NB > 1:
            slot = Signal(exact_log2(NB))
            m.d.sync += slot.eq(wline[:exact_log2(NB)])
            m.d.comb += [wr.addr.eq(wline >> exact_log2(NB)),
                         pea.w_data.eq(wr.data.word_select(slot, C * D))]
        else:
            m.d.comb += [wr.addr.eq(wline), pea.w_data.eq(wr.data)]
        m.d.comb += [pea.w_we.eq(Mux(wload, k != 0, lw_en)),
                     pea.w_row.eq(Mux(wload, k - 1, lw_row)),
                     pea.w_bank.eq(Mux(wload, 0, lw_bank))]

        def next_pass():
            """Counters of the next pass (its first pixel is read in the next STREAM)."""
            m.d.sync += [first.eq(0), wbase.eq(wbase + R), bank.eq(~bank),
                         o.eq(0), q.eq(0), pix.eq(0)]
            with m.If(v + 1 == t.kw):
                m.d.sync += [v.eq(0), iw.eq(0 - t.pad)]
                with m.If(u + 1 == t.kh):
                    m.d.sync += [u.eq(0), b.eq(b + 1), ih0.eq(0 - t.pad)]
                    if NI > 1:      # the next group's lines follow this group's
                        with m.If(b[:exact_log2(NI)] == NI - 1):
                            m.d.sync += ibase.eq(ibase + (window << exact_log2(NI)))
                    else:
                        m.d.sync += ibase.eq(ibase + window)
                with m.Else():
                    m.d.sync += [u.eq(u + 1), ih0.eq(u + 1 - t.pad)]
            with m.Else():
                m.d.sync += [v.eq(v + 1), iw.eq(v + 1 - t.pad), ih0.eq(u - t.pad)]

        with m.If(gap != LSTART + R):
            m.d.sync += gap.eq(gap + 1)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [b.eq(0), u.eq(0), v.eq(0), k.eq(0), wbase.eq(0),
                                 ibase.eq(0), first.eq(~t.acc), bank.eq(0)]
                    m.next = "WLOAD"
            with m.State("WLOAD"):
                m.d.comb += [self.busy.eq(1), wload.eq(1)]
                m.d.sync += k.eq(k + 1)
                with m.If(k == R):
                    m.d.sync += [o.eq(0), q.eq(0), pix.eq(0), k.eq(0), gap.eq(0),
                                 ih0.eq(u - t.pad), iw.eq(v - t.pad)]
                    m.next = "STREAM"
            with m.State("STREAM"):
                m.d.comb += [self.busy.eq(1), streaming.eq(1)]
                m.d.sync += [pix.eq(pix + 1), q.eq(q + 1), iw.eq(iw + t.stride)]
                with m.If((gap == LSTART) & ~last_pass):
                    m.d.sync += [lact.eq(1), lrow.eq(0), lbase.eq(wbase + R), lbank.eq(~bank)]
                with m.If(q + 1 == t.ow):
                    m.d.sync += [q.eq(0), o.eq(o + 1), iw.eq(v - t.pad),
                                 ih0.eq(ih0 + t.stride)]
                    with m.If(o + 1 == t.oh):
                        with m.If(last_pass):
                            m.d.sync += drain.eq(0)
                            m.next = "DRAIN"
                        with m.Else():
                            next_pass()
                            with m.If(gap + 1 >= G):
                                m.d.sync += gap.eq(0)
                            with m.Else():
                                m.next = "WAIT"
            with m.State("WAIT"):
                # the next pass's counters are set; it waits for its weights
                m.d.comb += self.busy.eq(1)
                with m.If(gap == LSTART):       # a pass shorter than LSTART cycles
                    m.d.sync += [lact.eq(1), lrow.eq(0), lbase.eq(wbase), lbank.eq(bank)]
                with m.If(gap + 1 >= G):
                    m.d.sync += gap.eq(0)
                    m.next = "STREAM"
            with m.State("DRAIN"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain == L):
                    m.next = "IDLE"
        return m


def from_config(cfg) -> NNEngine:
    """The NN engine of one PIM-node of ``cfg.nicepim``."""
    n = cfg.nicepim
    check(n.dataflow == "ws", "nicepim.dataflow", n.dataflow,
          "'ws' (the engine is built weight-stationary; 'os' is a mapper option only)")
    return NNEngine(pe_rows=n.pe_rows, pe_cols=n.pe_cols, ibuf_lines=n.ibuf_lines,
                    wbuf_lines=n.wbuf_lines, obuf_lines=n.obuf_lines,
                    wbuf_row_lines=wbuf_row_lines(n.pe_rows, n.pe_cols, n.wbuf_lines,
                                                  n.node_bank_bits),
                    ibuf_row_lines=ibuf_row_lines(n.pe_rows, n.ibuf_lines, n.node_bank_bits))
