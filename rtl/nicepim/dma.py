"""The tensor DMA of a PIM-node: DRAM <-> NN-engine buffers in a chosen data layout."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..mem.port import VaultPortSignature
from ..params import check, check_int
from .params import C_BLOCK, DATA_BITS, PSUM_BITS, TASK_LAYOUT, Layout, Op

__all__ = ["TensorDMA"]

_ADDR_BITS = 40


class TensorDMA(wiring.Component):
    """Runs the ``LOAD_I``, ``LOAD_W`` and ``STORE`` tasks of
    :class:`~pimforge.rtl.nicepim.params.Op`: element by element between the node's DRAM
    (through its bank controller) and the engine's buffers.

    Every element's tensor coordinates ``(n, c, h, w)`` come from the task's window
    and loop counts; its DRAM address from the layout (NCHW, NHWC or NCHW[C8]:
    :func:`~pimforge.rtl.nicepim.params.element_address`) and the task's element
    ``base``. A one-word cache in front of the DRAM serves the elements that share
    a DRAM word (a load reads a word once for all its elements; a store merges its
    elements into the word and writes it back when it moves to another word or at
    the end of the task). The lanes (channels; the output channels of weights) are
    walked outermost in NCHW and innermost in NHWC and NCHW[C8], so that the
    elements come in address order and each DRAM word is accessed once per run of
    its elements. A load writes 0 for an element outside the tensor (padding,
    channel fill); a store skips it. An element takes two cycles when its word is
    cached; a miss adds the DRAM access (a write-back first when the cached word is
    dirty). The cache starts empty with every task (the network may have written
    the DRAM since).

    Parameters
    ----------
    pe_rows, pe_cols : int
        The engine's PE array (buffer lanes).
    ibuf_lines, wbuf_lines, obuf_lines : int
        The engine's buffer depths.
    port : VaultPortSignature
        The node's DRAM port (one bank: the node's banks bound together).

    Attributes
    ----------
    task : In(TASK_LAYOUT)
        The task, held while ``busy``.
    start : In(1)
    busy, stall : Out(1)
        A task is running; it is waiting for the DRAM.
    dram : Out(port)
        Requests to the bank controller; its responses (a read's data; write
        acknowledgements, which this block ignores).
    ibuf_w, wbuf_w : In(WritePort.Signature)
    obuf_r : In(ReadPort.Signature)
        The engine's buffer ports.
    """

    def __init__(self, *, pe_rows: int, pe_cols: int, ibuf_lines: int, wbuf_lines: int,
                 obuf_lines: int, port: VaultPortSignature):
        check_int("pe_rows", pe_rows, 1, 256)
        check_int("pe_cols", pe_cols, 1, 256)
        if not isinstance(port, VaultPortSignature):
            raise TypeError(f"port must be a VaultPortSignature, not {port!r}")
        check(port.data_bits % PSUM_BITS == 0 and port.data_bits & (port.data_bits - 1) == 0,
              "port.data_bits", port.data_bits, "a power of two of at least 32")
        self.pe_rows, self.pe_cols, self.port = pe_rows, pe_cols, port
        self.ibuf_lines, self.wbuf_lines, self.obuf_lines = ibuf_lines, wbuf_lines, obuf_lines
        D, P = DATA_BITS, PSUM_BITS
        super().__init__({
            "task": In(TASK_LAYOUT), "start": In(1), "busy": Out(1), "stall": Out(1),
            "dram": Out(port),
            "ibuf_w": In(WritePort.Signature(addr_width=ceil_log2(ibuf_lines),
                                             shape=pe_rows * D, granularity=D)),
            "wbuf_w": In(WritePort.Signature(addr_width=ceil_log2(wbuf_lines),
                                             shape=pe_cols * D, granularity=D)),
            "obuf_r": In(ReadPort.Signature(addr_width=ceil_log2(obuf_lines),
                                            shape=pe_cols * P)),
        })

    def elaborate(self, platform):
        m = Module()
        R, C = self.pe_rows, self.pe_cols
        D, P = DATA_BITS, PSUM_BITS
        WB = self.port.data_bits
        t = self.task
        req, resp = self.dram.req, self.dram.resp
        is_i, is_w, is_s = t.op == Op.LOAD_I, t.op == Op.LOAD_W, t.op == Op.STORE

        # ---- loop nest (b, i, j, r, l) and the buffer line ---------------------------
        b, i, j = Signal(16), Signal(16), Signal(16)
        r = Signal(range(max(2, R)))
        lane = Signal(range(max(2, R, C)))
        line = Signal(32)
        # NCHW puts the lane's dimension (channels; output channels of weights) outside
        # the pixels: walking the lanes outermost reads and writes consecutive elements.
        lane_outer = t.layout == Layout.NCHW
        n_r = Mux(is_w, R, 1)
        n_l = Mux(is_i, R, C)
        last_l, last_r = lane + 1 == n_l, r + 1 == n_r
        last_j, last_i, last_b = j + 1 == t.nw, i + 1 == t.nh, b + 1 == t.cb
        last = last_l & last_r & last_j & last_i & last_b

        # ---- coordinates, range check, element address --------------------------------
        n = Signal(18)
        c = Signal(18)
        h = Signal(18)
        w = Signal(18)
        m.d.comb += [
            n.eq(t.n0.as_signed() + Mux(is_w, lane, 0)),
            c.eq(t.c0.as_signed() + b * Mux(is_s, C, R) + Mux(is_w, r, lane)),
            h.eq(t.h0.as_signed() + i),
            w.eq(t.w0.as_signed() + j),
        ]
        inside = Signal()
        m.d.comb += inside.eq(Cat(*[(x[16:] == 0) & (x[:16] < d) for x, d in
                                    ((n, t.dn), (c, t.dc), (h, t.dh), (w, t.dw))]).all())
        nn, cc, hh, ww = n[:16], c[:16], h[:16], w[:16]
        blocks = (t.dc + C_BLOCK - 1) >> exact_log2(C_BLOCK)
        off = Signal(_ADDR_BITS)
        with m.Switch(t.layout):
            with m.Case(Layout.NHWC):
                m.d.comb += off.eq(((nn * t.dh + hh) * t.dw + ww) * t.dc + cc)
            with m.Case(Layout.NCHWC8):
                m.d.comb += off.eq(
                    (((nn * blocks + (cc >> exact_log2(C_BLOCK))) * t.dh + hh) * t.dw + ww)
                    * C_BLOCK + cc[:exact_log2(C_BLOCK)])
            with m.Default():
                m.d.comb += off.eq(((nn * t.dc + cc) * t.dh + hh) * t.dw + ww)
        ea = Signal(_ADDR_BITS)
        m.d.comb += ea.eq(t.base + off)
        s16, s32 = exact_log2(WB // D), exact_log2(WB // P)

        # ---- the one-word cache -------------------------------------------------------
        word = Signal(_ADDR_BITS)
        wlane = Signal(max(1, s16))
        valid = Signal()
        tag = Signal(_ADDR_BITS)
        tag_ok = Signal()
        dirty = Signal()
        cache = Signal(WB)
        hit = tag_ok & (tag == word)

        # ---- buffers ---------------------------------------------------------------
        elem16 = cache.word_select(wlane, D)
        elem = Mux(valid, elem16, 0)
        m.d.comb += [
            self.ibuf_w.addr.eq(line), self.ibuf_w.data.eq(Cat(*[elem] * R)),
            self.wbuf_w.addr.eq(line), self.wbuf_w.data.eq(Cat(*[elem] * C)),
            self.obuf_r.addr.eq(line), self.obuf_r.en.eq(1),
        ]
        psum = self.obuf_r.data.word_select(lane, P)

        col_bits, row_bits = self.port.col_bits, self.port.row_bits

        def dram_addr(a):
            # Set in the states that request (a payload of constants only would be an
            # empty always block in the Verilog).
            return [req.payload.col.eq(a[:col_bits]),
                    req.payload.row.eq(a[col_bits:col_bits + row_bits]),
                    req.payload.bank.eq(0), req.payload.cls.eq(1), req.payload.tag.eq(0)]

        m.d.comb += line.eq(((b * t.nh + i) * t.nw + j) * n_r + r)

        def nest(order):
            """Step the counters of *order* (innermost first) like an odometer."""
            (x, is_last), *rest = order
            m.d.sync += x.eq(x + 1)
            if rest:
                with m.If(is_last):
                    m.d.sync += x.eq(0)
                    nest(rest)

        def advance():
            with m.If(lane_outer):
                nest([(j, last_j), (i, last_i), (r, last_r), (lane, last_l), (b, last_b)])
            with m.Else():
                nest([(lane, last_l), (r, last_r), (j, last_j), (i, last_i), (b, last_b)])

        m.d.comb += resp.ready.eq(1)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [b.eq(0), i.eq(0), j.eq(0), r.eq(0), lane.eq(0),
                                 tag_ok.eq(0), dirty.eq(0)]
                    m.next = "ADDR"
            with m.State("ADDR"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [valid.eq(inside),
                             word.eq(Mux(is_s, ea >> s32, ea >> s16)),
                             wlane.eq(Mux(is_s, ea[:max(1, s32)], ea[:max(1, s16)]))]
                m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                with m.If(~valid | hit):
                    with m.If(is_i):
                        m.d.comb += self.ibuf_w.en.eq(Const(1, R) << lane)
                    with m.If(is_w):
                        m.d.comb += self.wbuf_w.en.eq(Const(1, C) << lane)
                    with m.If(is_s & valid):
                        m.d.sync += [cache.word_select(wlane[:max(1, s32)], P).eq(psum),
                                     dirty.eq(1)]
                    advance()
                    with m.If(last):
                        with m.If(is_s & (dirty | valid)):
                            m.next = "FLUSH"
                        with m.Else():
                            m.next = "IDLE"
                    with m.Else():
                        m.next = "ADDR"
                with m.Elif(dirty):
                    m.next = "WB"
                with m.Else():
                    m.next = "RD"
            with m.State("WB"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1), req.valid.eq(1),
                             req.payload.we.eq(1), req.payload.data.eq(cache), *dram_addr(tag)]
                with m.If(req.ready):
                    m.d.sync += dirty.eq(0)
                    m.next = "RD"
            with m.State("RD"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1), req.valid.eq(1),
                             *dram_addr(word)]
                with m.If(req.ready):
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1)]
                with m.If(resp.valid & ~resp.payload.we):
                    m.d.sync += [cache.eq(resp.payload.data), tag.eq(word), tag_ok.eq(1)]
                    m.next = "CHECK"
            with m.State("FLUSH"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1), req.valid.eq(1),
                             req.payload.we.eq(1), req.payload.data.eq(cache), *dram_addr(tag)]
                with m.If(req.ready):
                    m.d.sync += dirty.eq(0)
                    m.next = "IDLE"
        return m
