"""The tensor DMA of a PIM-node: DRAM <-> NN-engine buffers in a chosen data layout."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..mem.port import VaultPortSignature
from ..params import check, check_int, check_pow2
from .params import C_BLOCK, DATA_BITS, PSUM_BITS, TASK_LAYOUT, Layout, Op

__all__ = ["TensorDMA"]

_ADDR_BITS = 40


def _min(a, b):
    return Mux(a < b, a, b)


def _span(n: int, lo, hi):
    """The *n* bits ``[lo, hi)`` set (by shifts: comparisons with each bit's index would be
    constant at the ends)."""
    ones = Const((1 << n) - 1, n)
    return (ones << lo)[:n] & ~(ones << hi)[:n]


class _Walk:
    """One walk of a task's loop nest ``(b, i, j, r, lane)``, a *group* of lanes a step.

    A group is a run of lanes of one buffer line whose elements are consecutive in one
    DRAM word (or all outside the tensor): in NHWC and NCHW[C8] the lanes of an input or
    output line are consecutive channels, so a group is up to the rest of the line, cut at
    the word's end, the tensor's channel count and (NCHW[C8]) the 8-channel block; in
    NCHW (and for weights, whose lanes are output channels) a group is one element and
    the lanes are walked outermost (consecutive elements are consecutive pixels).
    """

    def __init__(self, m: Module, t, *, R: int, C: int, WB: int, NB: int, NI: int,
                 name: str):
        D, P = DATA_BITS, PSUM_BITS
        is_i, is_w, is_s = t.op == Op.LOAD_I, t.op == Op.LOAD_W, t.op == Op.STORE
        is_kb = t.layout == Layout.KBLOCK
        L = max(R * NI, C)
        self.b, self.i, self.j = (Signal(16, name=f"{name}_{x}") for x in "bij")
        self.r = Signal(range(max(2, R)), name=f"{name}_r")
        self.lane = Signal(range(max(2, L)), name=f"{name}_lane")
        self.done = Signal(name=f"{name}_done")
        b, i, j, r, lane = self.b, self.i, self.j, self.r, self.lane
        self.lane_inner = lane_inner = Signal(name=f"{name}_lane_inner")
        m.d.comb += lane_inner.eq(Mux(is_w, (t.layout == Layout.CHWN) | is_kb,
                                      (t.layout == Layout.NHWC) | (t.layout == Layout.NCHWC8)))
        # KBLOCK weights with rows of NB > 1 lines: a group is NB whole lines, one DRAM word
        self.wide = wide = Signal(name=f"{name}_wide")
        m.d.comb += wide.eq(is_w & is_kb if NB > 1 else 0)
        r_step = Mux(wide, NB, 1)
        n_r = Mux(is_w, R, 1)
        # inputs with rows of NI > 1 lines: block b is line bs of its pixel's run of
        # gsize lines in its group of NI blocks (from block bg); in NHWC, where a pixel's
        # channels are consecutive in DRAM, a line of the walk is that whole run (the
        # other layouts walk block by block: NCHW[C8] would switch channel planes)
        self.gsize = gsize = Signal(range(NI + 1), name=f"{name}_gsize")
        grp = Signal(name=f"{name}_grp")
        if NI > 1:
            sb = exact_log2(NI)
            bg, bs = Cat(Const(0, sb), b[sb:]), b[:sb]
            left = Signal(17, name=f"{name}_left")
            m.d.comb += [left.eq(t.cb - bg), gsize.eq(Mux(left >= NI, NI, left)),
                         grp.eq(is_i & (t.layout == Layout.NHWC))]
        else:
            m.d.comb += gsize.eq(1)
        n_l = Mux(is_i, Mux(grp, gsize * R, R), C)
        b_step = Mux(grp, NI, 1)
        last_r, last_j, last_i, last_b = (r + r_step == n_r, j + 1 == t.nw, i + 1 == t.nh,
                                          b + b_step >= t.cb)

        # ---- coordinates and range checks -------------------------------------------
        n, c, h, w = (Signal(18, name=f"{name}_{x}") for x in "nchw")
        m.d.comb += [
            n.eq(t.n0.as_signed() + Mux(is_w, lane, 0)),
            c.eq(t.c0.as_signed() + b * Mux(is_s, C, R) + Mux(is_w, r, lane)),
            h.eq(t.h0.as_signed() + i),
            w.eq(t.w0.as_signed() + j),
        ]

        def ok(x, d):
            return (x[16:] == 0) & (x[:16] < d)

        # the lanes' coordinate (output channels of weights, else channels) and the others
        x = Signal(18, name=f"{name}_x")
        m.d.comb += x.eq(Mux(is_w, n, c))
        dx = Mux(is_w, t.dn, t.dc)
        pix_in = Mux(is_w, ok(c, t.dc), ok(n, t.dn)) & ok(h, t.dh) & ok(w, t.dw)
        x_in = ok(x, dx)
        self.inside = inside = Signal(name=f"{name}_inside")
        m.d.comb += inside.eq(pix_in & x_in)
        nn, cc, hh, ww = n[:16], c[:16], h[:16], w[:16]
        blocks = (t.dc + C_BLOCK - 1) >> exact_log2(C_BLOCK)
        off = Signal(_ADDR_BITS, name=f"{name}_off")
        with m.Switch(t.layout):
            with m.Case(Layout.NHWC):
                m.d.comb += off.eq(((nn * t.dh + hh) * t.dw + ww) * t.dc + cc)
            with m.Case(Layout.NCHWC8):
                m.d.comb += off.eq(
                    (((nn * blocks + (cc >> exact_log2(C_BLOCK))) * t.dh + hh) * t.dw + ww)
                    * C_BLOCK + cc[:exact_log2(C_BLOCK)])
            with m.Case(Layout.CHWN):
                m.d.comb += off.eq(((cc * t.dh + hh) * t.dw + ww) * t.dn + nn)
            with m.Case(Layout.KBLOCK):
                # the tile's blocks from base (n0 = c0 = 0): [cb][dh][dw][R][C]
                m.d.comb += off.eq(((b * t.dh + hh) * t.dw + ww) * (R * C) + r * C + nn)
            with m.Default():
                m.d.comb += off.eq(((nn * t.dc + cc) * t.dh + hh) * t.dw + ww)
        ea = t.base + off
        s16, s32 = exact_log2(WB // D), exact_log2(WB // P)
        # the element's word and its index in the word (16-bit loads, 32-bit stores)
        self.word = Signal(_ADDR_BITS, name=f"{name}_word")
        self.wl = Signal(max(1, s16), name=f"{name}_wl")
        m.d.comb += [self.word.eq(Mux(is_s, ea >> s32, ea >> s16)),
                     self.wl.eq(Mux(is_s, ea[:max(1, s32)], ea[:max(1, s16)]))]
        per = Mux(is_s, WB // P, WB // D)

        # ---- the group's length ----------------------------------------------------
        self.k = k = Signal(range(L + 1), name=f"{name}_k")
        k0 = Signal(range(L + 1), name=f"{name}_k0")
        rem = n_l - lane
        with m.If(~lane_inner):
            m.d.comb += k0.eq(1)
        with m.Elif(~pix_in | (~x[17] & ~x_in)):
            m.d.comb += k0.eq(rem)                      # the rest of the line is outside
        with m.Elif(x[17]):
            m.d.comb += k0.eq(_min(rem, (-x)[:16]))     # below channel 0
        with m.Else():
            run = _min(_min(rem, dx - x[:16]), per - self.wl)
            with m.If(t.layout == Layout.NCHWC8):
                m.d.comb += k0.eq(_min(run, C_BLOCK - cc[:exact_log2(C_BLOCK)]))
            with m.Else():
                m.d.comb += k0.eq(run)

        self.line = Signal(32, name=f"{name}_line")
        m.d.comb += self.line.eq(((b * t.nh + i) * t.nw + j) * n_r + r)
        if NI > 1:
            # an input's lanes from the first lane of the tile's buffer: the pixel's
            # first line of its group, then the lane; a run ends at its row's end
            si = exact_log2(NI * R)
            self.flat = flat = Signal(40, name=f"{name}_flat")
            m.d.comb += flat.eq((bg * (t.nh * t.nw) + (i * t.nw + j) * gsize + bs) * R + lane)
            self.rowlane = flat[:si]
            m.d.comb += k.eq(Mux(is_i, _min(k0, (NI * R) - self.rowlane), k0))
        else:
            m.d.comb += k.eq(k0)
        lane_end = lane + k == n_l
        self.last = lane_end & last_r & last_j & last_i & last_b
        self._order_inner = [(r, last_r, r_step), (j, last_j, 1), (i, last_i, 1),
                             (b, last_b, b_step)]
        # CHWN weights: input channels outside the kernel positions, in address order
        # (KBLOCK weights are in the buffer's line order, the inner order)
        self._order_weights = [(j, last_j, 1), (i, last_i, 1), (r, last_r, 1), (b, last_b, 1)]
        self._is_w_chwn = is_w & ~is_kb
        self._order_outer = [(j, last_j, 1), (i, last_i, 1), (r, last_r, 1),
                             (lane, lane_end, 1), (b, last_b, b_step)]
        self._m, self._lane_end = m, lane_end

    def reset(self):
        return [x.eq(0) for x in (self.b, self.i, self.j, self.r, self.lane, self.done)]

    def step(self):
        """Go to the next group (call inside the condition that steps)."""
        m = self._m

        def nest(order):
            (x, is_last, step), *rest = order
            m.d.sync += x.eq(x + step)
            if rest:
                with m.If(is_last):
                    m.d.sync += x.eq(0)
                    nest(rest)

        with m.If(self.last):
            m.d.sync += self.done.eq(1)
        with m.If(self.lane_inner):
            with m.If(self._lane_end):
                m.d.sync += self.lane.eq(0)
                with m.If(self._is_w_chwn):
                    nest(self._order_weights)
                with m.Else():
                    nest(self._order_inner)
            with m.Else():
                m.d.sync += self.lane.eq(self.lane + self.k)
        with m.Else():
            nest(self._order_outer)


class TensorDMA(wiring.Component):
    """Runs the ``LOAD_I``, ``LOAD_W`` and ``STORE`` tasks of
    :class:`~pimforge.rtl.nicepim.params.Op` between the node's DRAM (through its bank
    controller) and the engine's buffers, a DRAM word at a time and pipelined.

    Every element's tensor coordinates ``(n, c, h, w)`` come from the task's window
    and loop counts; its DRAM address from the layout (NCHW, NHWC or NCHW[C8]:
    :func:`~pimforge.rtl.nicepim.params.element_address`) and the task's element
    ``base``. The loop nest is walked a *group* a cycle (:class:`_Walk`): the lanes of
    one buffer line whose elements lie next to each other in one DRAM word, written
    with the buffer's lane enables in one cycle (inputs and outputs in NHWC and
    NCHW[C8], weights in CHWN: the lanes' channels are consecutive, up to a whole line
    a cycle) or one element (otherwise, e.g. NCHW: the lanes are channel planes apart,
    so a line's elements are in different words; consecutive elements go to
    consecutive lines, one a cycle).

    **Loads** walk the nest twice. The *issue* walk, ahead, requests every word its
    groups need once per run of groups in that word (several in flight: up to
    ``inflight``, tagged with their slot of a reorder buffer, since the bank
    controller may answer out of order); the *write* walk takes the words in the same
    order from the reorder buffer and writes one group a cycle into the buffer,
    stalling only while its word has not arrived. A group outside the tensor
    (padding, channel fill) writes 0 and reads nothing.

    **Stores** walk the nest once: a group's output-buffer line is read (one cycle,
    the read port is synchronous), its lanes merged into the word being gathered; a
    word is written whole when the walk moves to another word (or at the end) through
    a one-word write register, so the walk goes on while it waits for the bank. A
    word only partly covered by the task (the tensor's edges, an output-channel block
    narrower than the word) is read first and merged (read-modify-write; the bank
    port has no byte enables). Elements outside the tensor are skipped. The bank
    controller keeps requests to one word in order, so a read sees earlier writes.

    **Loads back to back.** A load started while the one before still writes (``ready``)
    issues its reads at once; its writes start after the last write of the one before.

    **Weights in KBLOCK** (:attr:`~pimforge.rtl.nicepim.params.Layout.KBLOCK`, the
    engine's own order) lie in DRAM as the weight buffer holds them, so with rows of
    ``wbuf_row_lines`` > 1 lines a group is a whole DRAM word: ``wbuf_row_lines`` lines
    written as one row a cycle. Such a task's weights start at ``base``, a DRAM word,
    as ``[cb][dh][dw][pe_rows][pe_cols]`` (``n0 = c0 = 0``, ``dn = pe_cols``,
    ``dc = cb * pe_rows``; kernel rows ``h0 .. h0 + nh``, all ``dw`` columns).

    Parameters
    ----------
    pe_rows, pe_cols : int
        The engine's PE array (buffer lanes).
    ibuf_lines, wbuf_lines, obuf_lines : int
        The engine's buffer depths.
    wbuf_row_lines : int
        Weight lines in a row of the weight buffer
        (:class:`~pimforge.rtl.nicepim.engine.NNEngine`): 1, or the lines of one DRAM
        word.
    port : VaultPortSignature
        The node's DRAM port (one bank: the node's banks bound together); its tag
        must hold a reorder-buffer slot.
    inflight : int
        Reads in flight (reorder-buffer slots).

    Attributes
    ----------
    task : In(TASK_LAYOUT)
        The task, held while ``busy``.
    start : In(1)
    busy, stall : Out(1)
        A task is running; it is waiting for the DRAM.
    ready : Out(1)
        A ``start`` is taken: idle, or a load whose reads are all issued and no load
        queued behind it. The next load's issue walk then runs while this one's last
        words arrive and are written (its writes follow in order), so back-to-back
        loads pay the DRAM's first-word latency once; a store waits for an idle DMA.
    dram : Out(port)
        Requests to the bank controller; its responses (a read's data; write
        acknowledgements, which this block ignores).
    ibuf_w, wbuf_w : In(WritePort.Signature)
    obuf_r : In(ReadPort.Signature)
        The engine's buffer ports.
    """

    def __init__(self, *, pe_rows: int, pe_cols: int, ibuf_lines: int, wbuf_lines: int,
                 obuf_lines: int, port: VaultPortSignature, inflight: int = 8,
                 wbuf_row_lines: int = 1, ibuf_row_lines: int = 1):
        check_int("pe_rows", pe_rows, 1, 256)
        check_int("pe_cols", pe_cols, 1, 256)
        check(wbuf_row_lines == 1 or (wbuf_row_lines * pe_cols * DATA_BITS == port.data_bits
                                      and pe_rows % wbuf_row_lines == 0
                                      and wbuf_lines % (2 * wbuf_row_lines) == 0),
              "wbuf_row_lines", wbuf_row_lines,
              "1 or the weight lines of one DRAM word, dividing pe_rows and half the buffer")
        self.wbuf_row_lines = wbuf_row_lines
        check(ibuf_row_lines == 1 or (ibuf_row_lines * pe_rows * DATA_BITS == port.data_bits
                                      and ibuf_lines % (2 * ibuf_row_lines) == 0),
              "ibuf_row_lines", ibuf_row_lines,
              "1 or the input lines of one DRAM word, dividing half the buffer")
        self.ibuf_row_lines = ibuf_row_lines
        check_pow2("inflight", inflight, 2, 64)
        if not isinstance(port, VaultPortSignature):
            raise TypeError(f"port must be a VaultPortSignature, not {port!r}")
        check(port.data_bits % PSUM_BITS == 0 and port.data_bits & (port.data_bits - 1) == 0,
              "port.data_bits", port.data_bits, "a power of two of at least 32")
        check(port.tag_bits >= exact_log2(inflight), "port.tag_bits", port.tag_bits,
              f"at least {exact_log2(inflight)} (a reorder-buffer slot of {inflight})")
        self.pe_rows, self.pe_cols, self.port = pe_rows, pe_cols, port
        self.ibuf_lines, self.wbuf_lines, self.obuf_lines = ibuf_lines, wbuf_lines, obuf_lines
        self.inflight = inflight
        D, P = DATA_BITS, PSUM_BITS
        super().__init__({
            "task": In(TASK_LAYOUT), "start": In(1), "busy": Out(1), "stall": Out(1),
            "ready": Out(1),
            "dram": Out(port),
            "ibuf_w": In(WritePort.Signature(
                addr_width=ceil_log2(ibuf_lines // ibuf_row_lines),
                shape=ibuf_row_lines * pe_rows * D, granularity=D)),
            "wbuf_w": In(WritePort.Signature(
                addr_width=ceil_log2(wbuf_lines // wbuf_row_lines),
                shape=wbuf_row_lines * pe_cols * D, granularity=D)),
            "obuf_r": In(ReadPort.Signature(addr_width=ceil_log2(obuf_lines),
                                            shape=pe_cols * P)),
        })

    def elaborate(self, platform):
        m = Module()
        R, C = self.pe_rows, self.pe_cols
        D, P = DATA_BITS, PSUM_BITS
        WB = self.port.data_bits
        Q = self.inflight
        qb = exact_log2(Q)
        # the task of the write walk (and of a store), taken at its start; the issue walk
        # follows the task input, which may already be the next load
        t = Signal(TASK_LAYOUT)
        req, resp = self.dram.req, self.dram.resp
        is_i, is_w = t.op == Op.LOAD_I, t.op == Op.LOAD_W
        col_bits, row_bits = self.port.col_bits, self.port.row_bits

        def dram_req(a, *, we=0, data=0, tag=0):
            return [req.valid.eq(1), req.payload.we.eq(we), req.payload.data.eq(data),
                    req.payload.col.eq(a[:col_bits]),
                    req.payload.row.eq(a[col_bits:col_bits + row_bits]),
                    req.payload.bank.eq(0), req.payload.cls.eq(1), req.payload.tag.eq(tag)]

        NB, NI = self.wbuf_row_lines, self.ibuf_row_lines
        iw = _Walk(m, self.task, R=R, C=C, WB=WB, NB=NB, NI=NI, name="iss")  # loads: issue
        cw = _Walk(m, t, R=R, C=C, WB=WB, NB=NB, NI=NI, name="wr")  # loads: writes; stores

        # ---- reorder buffer: a slot per read in flight ---------------------------------
        rob = m.submodules.rob = Memory(shape=WB, depth=Q, init=[])
        rob_w = rob.write_port()
        rob_r = rob.read_port(domain="comb")
        rob_v = Signal(Q)
        iss_ptr = Signal(qb + 1)
        pop_ptr = Signal(qb + 1)
        loading = Signal()
        m.d.comb += resp.ready.eq(1)
        got = loading & resp.valid & ~resp.payload.we
        m.d.comb += [rob_w.addr.eq(resp.payload.tag[:qb]), rob_w.data.eq(resp.payload.data),
                     rob_w.en.eq(got), rob_r.addr.eq(pop_ptr[:qb])]

        # ---- loads: issue walk ----------------------------------------------------------
        last_word = Signal(_ADDR_BITS)
        have_last = Signal()
        need_i = iw.inside & (~have_last | (iw.word != last_word))
        credit = (iss_ptr - pop_ptr)[:qb + 1] != Q

        # ---- loads: write walk ----------------------------------------------------------
        cur = Signal(WB)
        cur_word = Signal(_ADDR_BITS)
        have_cur = Signal()
        need_c = cw.inside & (~have_cur | (cw.word != cur_word))
        head_ok = rob_v.bit_select(pop_ptr[:qb], 1)
        src = Mux(need_c, rob_r.data, cur)
        s16 = exact_log2(WB // D)

        def lanes(n):
            """The group's elements at its lanes of an *n*-lane line, and the lane enables:
            lane ``L`` takes the word's element ``L - lane + wl`` (a selection per lane, not
            a shift of the whole word: a variable shift makes every output bit depend on
            every input bit, and a node of 2,048-bit words then takes minutes to
            elaborate and lint). Lanes outside the group are not enabled."""
            data = Signal(n * D)
            sel = [src.word_select((L - cw.lane + cw.wl)[:s16], D) for L in range(n)]
            m.d.comb += data.eq(Mux(cw.inside, Cat(*sel), 0))
            return data, _span(n, cw.lane, cw.lane + cw.k)

        wdata, wen = lanes(C)
        # the buffer halves of the task (TASK_LAYOUT's buf, obuf)
        ioff = Mux(t.buf, self.ibuf_lines // 2, 0)
        woff = Mux(t.buf, self.wbuf_lines // 2, 0)
        ooff = Mux(t.obuf, self.obuf_lines // 2, 0)
        if NI > 1:
            # a row is a DRAM word of lanes: the group's lanes from its row lane on take
            # the word's elements from wl on, i.e. the word rotated by wl - rowlane (in
            # log2 stages of fixed rotations, cheap to elaborate)
            n_lanes = NI * R
            sh = Signal(exact_log2(n_lanes), name="ibuf_rot")
            m.d.comb += sh.eq(cw.wl - cw.rowlane)
            # (each stage a Signal: an expression is emitted again at every use, and each
            # stage uses the one before twice)
            rot = Signal(WB, name="ibuf_rot_0")
            m.d.comb += rot.eq(Mux(cw.inside, src, 0))
            for k in range(exact_log2(n_lanes)):
                nxt = Signal(WB, name=f"ibuf_rot_{k + 1}")
                m.d.comb += nxt.eq(Mux(sh[k], rot.rotate_right((1 << k) * D), rot))
                rot = nxt
            ien = _span(n_lanes, cw.rowlane, cw.rowlane + cw.k)
            m.d.comb += [self.ibuf_w.addr.eq(Mux(t.buf, self.ibuf_lines // 2 // NI, 0)
                                             + (cw.flat >> exact_log2(n_lanes))),
                         self.ibuf_w.data.eq(rot)]
        else:
            idata, ien = lanes(R)
            m.d.comb += [self.ibuf_w.addr.eq(ioff + cw.line), self.ibuf_w.data.eq(idata)]
        # the weight buffer's rows: a whole word (KBLOCK, wide) or the group's line in its
        # slot of the row
        wline = Signal(32)
        m.d.comb += wline.eq(woff + cw.line)
        if NB > 1:
            sb = exact_log2(NB)
            m.d.comb += [self.wbuf_w.addr.eq(wline >> sb),
                         self.wbuf_w.data.eq(Mux(cw.wide, Mux(cw.inside, src, 0),
                                                 Cat(*[wdata] * NB)))]
            wen = Mux(cw.wide, Const(-1, NB * C),
                      Cat(*[Mux(wline[:sb] == k, wen, 0) for k in range(NB)]))
        else:
            m.d.comb += [self.wbuf_w.addr.eq(wline), self.wbuf_w.data.eq(wdata)]

        # ---- stores: the gathered word and the write register ---------------------------
        S = WB // P
        # stage B: the group whose line was read in the cycle before
        b_v, b_in = Signal(), Signal()
        b_word = Signal(_ADDR_BITS)
        b_wl = Signal(max(1, exact_log2(S)))
        b_lane = Signal(range(max(2, C)))
        b_k = Signal(range(C + 1))
        acc = Signal(WB)
        acc_word = Signal(_ADDR_BITS)
        emask = Signal(S)
        have_acc = Signal()
        wr_v = Signal()
        wr_word = Signal(_ADDR_BITS)
        wr_data = Signal(WB)
        gdata = Signal(WB)
        # element e of the word takes the output lane e - wl + lane (the lanes padded to
        # a power of two, so that every selection is in range; see lanes() above)
        cb = max(1, ceil_log2(C))
        olanes = Cat(self.obuf_r.data, Const(0, ((1 << cb) - C) * P))
        m.d.comb += gdata.eq(Cat(*[olanes.word_select((e - b_wl + b_lane)[:cb], P)
                                   for e in range(S)]))
        # Signals, not expressions: an expression is emitted again at every use, and
        # each of gbits' S x P bits uses gmask
        gmask, gbits, abits = Signal(S), Signal(WB), Signal(WB)
        m.d.comb += [gmask.eq(_span(S, b_wl, b_wl + b_k)),
                     gbits.eq(Cat(*[gmask[e].replicate(P) for e in range(S)])),
                     abits.eq(Cat(*[emask[e].replicate(P) for e in range(S)]))]
        full = emask.all()
        wr_free = ~wr_v | req.ready
        # (a read port's enable is 1 when not driven: it must hold the line while stalled)
        adv = Signal()
        m.d.comb += [self.obuf_r.addr.eq(ooff + cw.line), self.obuf_r.en.eq(adv)]

        with m.If(wr_v):
            m.d.comb += dram_req(wr_word, we=1, data=wr_data)
            with m.If(req.ready):
                m.d.sync += wr_v.eq(0)

        # a second load queued behind the one being written (its issue walk running)
        pending = Signal()
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.ready.eq(1)
                with m.If(self.start):
                    m.d.sync += [*iw.reset(), *cw.reset(), have_last.eq(0), have_cur.eq(0),
                                 iss_ptr.eq(0), pop_ptr.eq(0), rob_v.eq(0), b_v.eq(0),
                                 have_acc.eq(0), emask.eq(0), t.eq(self.task), pending.eq(0)]
                    with m.If(self.task.op == Op.STORE):
                        m.next = "STORE"
                    with m.Else():
                        m.next = "LOAD"
            with m.State("LOAD"):
                m.d.comb += [self.busy.eq(1), loading.eq(1),
                             self.ready.eq(iw.done & ~pending)]
                # the next load: its issue walk starts now, its writes after this task's
                with m.If(self.start):
                    m.d.sync += [*iw.reset(), have_last.eq(0), pending.eq(1)]
                # the issue walk
                with m.If(~iw.done):
                    with m.If(need_i):
                        with m.If(credit):
                            m.d.comb += dram_req(iw.word, tag=iss_ptr[:qb])
                            with m.If(req.ready):
                                m.d.sync += [last_word.eq(iw.word), have_last.eq(1),
                                             iss_ptr.eq(iss_ptr + 1)]
                                iw.step()
                    with m.Else():
                        iw.step()
                # the write walk
                with m.If(~need_c | head_ok):
                    with m.If(is_i):
                        m.d.comb += self.ibuf_w.en.eq(ien)
                    with m.If(is_w):
                        m.d.comb += self.wbuf_w.en.eq(wen)
                    with m.If(need_c):
                        m.d.sync += [cur.eq(rob_r.data), cur_word.eq(cw.word), have_cur.eq(1),
                                     pop_ptr.eq(pop_ptr + 1)]
                    cw.step()
                    with m.If(cw.last):
                        with m.If(pending | self.start):     # on to the next load's writes
                            m.d.sync += [*cw.reset(), have_cur.eq(0), t.eq(self.task),
                                         pending.eq(0)]
                        with m.Else():
                            m.next = "IDLE"
                with m.Else():
                    m.d.comb += self.stall.eq(1)
                # slots: filled by responses, freed as the write walk takes them
                with m.If(got):
                    m.d.sync += rob_v.bit_select(resp.payload.tag[:qb], 1).eq(1)
                with m.If(need_c & head_ok):
                    m.d.sync += rob_v.bit_select(pop_ptr[:qb], 1).eq(0)
            with m.State("STORE"):
                m.d.comb += self.busy.eq(1)
                # stage B: merge the group read in the cycle before into the gathered word
                flush = Signal()
                take = Signal()
                with m.If(b_v):
                    with m.If(~b_in):
                        m.d.comb += take.eq(1)
                    with m.Elif(have_acc & (b_word != acc_word)):
                        m.d.comb += flush.eq(1)
                    with m.Else():
                        m.d.comb += take.eq(1)
                        m.d.sync += [acc.eq((acc & ~gbits) | (gdata & gbits)),
                                     emask.eq(emask | gmask), acc_word.eq(b_word),
                                     have_acc.eq(1)]
                with m.Elif(cw.done & have_acc):
                    m.d.comb += flush.eq(1)
                with m.If(flush):
                    with m.If(~full):
                        m.next = "RMW_RD"
                    with m.Elif(wr_free):
                        m.d.sync += [wr_v.eq(1), wr_word.eq(acc_word), wr_data.eq(acc),
                                     have_acc.eq(0), emask.eq(0)]
                        with m.If(b_v):         # the next word starts with this group
                            m.d.comb += take.eq(1)
                            m.d.sync += [acc.eq(gdata & gbits), emask.eq(gmask),
                                         acc_word.eq(b_word), have_acc.eq(1)]
                    with m.Else():
                        m.d.comb += self.stall.eq(1)
                # stage A: read the next group's line
                m.d.comb += adv.eq(~b_v | take)
                with m.If(adv):
                    m.d.sync += b_v.eq(0)
                    with m.If(~cw.done):
                        m.d.sync += [b_v.eq(1), b_in.eq(cw.inside), b_word.eq(cw.word),
                                     b_wl.eq(cw.wl), b_lane.eq(cw.lane), b_k.eq(cw.k)]
                        cw.step()
                with m.If(cw.done & ~b_v & ~have_acc & ~wr_v):
                    m.next = "IDLE"
            with m.State("RMW_RD"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1)]
                with m.If(~wr_v):
                    m.d.comb += dram_req(acc_word)
                    with m.If(req.ready):
                        m.next = "RMW_WAIT"
            with m.State("RMW_WAIT"):
                m.d.comb += [self.busy.eq(1), self.stall.eq(1)]
                with m.If(resp.valid & ~resp.payload.we):
                    m.d.sync += [acc.eq((resp.payload.data & ~abits) | (acc & abits)),
                                 emask.eq(Const(-1, S))]
                    m.next = "STORE"
        return m
