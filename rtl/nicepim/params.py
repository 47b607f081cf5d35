"""Constants of the NicePIM PIM-node: data widths, data layouts and the task format.

A node runs a task list (:class:`Op`); every task is one word of
:data:`TASK_LAYOUT`, whose fields each kind of task reads as listed in
:class:`Op`. The golden model, the drivers and the RTL import them from here.

Tensors in a node's DRAM are addressed in elements (16-bit for loads, 32-bit for
stores of partial sums) from an element ``base``; a tensor has the logical
dimensions ``(n, c, h, w)`` (``dn, dc, dh, dw``) and one of the
:class:`Layout` orders. A weight tensor ``[Cout, Cin, KH, KW]`` is read as
``n = Cout, c = Cin, h = KH, w = KW``.
"""

from __future__ import annotations

import enum

from amaranth.lib import data

__all__ = ["C_BLOCK", "DATA_BITS", "PSUM_BITS", "SIGNED_FIELDS", "TASK_LAYOUT", "TASK_WORDS",
           "Layout", "Op", "element_address", "ibuf_line", "ibuf_row_lines", "kblock_address",
           "kblock_elems", "wbuf_row_lines"]

#: Inputs, weights and outputs (NicePIM Sec. VIII-B).
DATA_BITS = 16
#: Partial sums.
PSUM_BITS = 32
#: Channels in a block of the NCHW[C8] layout.
C_BLOCK = 8


class Layout(enum.IntEnum):
    """Element order of a tensor in DRAM."""

    NCHW = 0
    NHWC = 1
    NCHWC8 = 2     # NCHW[C8]: channel blocks of 8, the 8 channels of a pixel adjacent
    CHWN = 3       # weights with the output channels innermost (IHWO), for a line a cycle
    # weights in the engine's own order, [Cout/C][Cin/R][KH][KW][R][C] for an engine of
    # R x C PEs (zero-padded to whole blocks): a tile's weight lines lie one after the
    # other, so a LOAD_W writes a whole DRAM word a cycle (:func:`kblock_address`)
    KBLOCK = 4


class Op(enum.IntEnum):
    """Task kinds of the node controller.

    * ``END``: the task list is finished.
    * ``LOAD_I``: DRAM -> input buffer. Line ``(b * nh + i) * nw + j`` of the
      buffer gets the ``pe_rows`` channels ``c0 + b * pe_rows + lane`` of pixel
      ``(h0 + i, w0 + j)`` of image ``n0``, for ``b < cb``, ``i < nh``, ``j < nw``;
      elements outside the tensor are 0 (padding, channel fill).
    * ``LOAD_W``: DRAM -> weight buffer. Line ``((b * nh + i) * nw + j) * pe_rows + r``
      gets the weights of output channels ``n0 + lane`` (``lane < pe_cols``) for input
      channel ``c0 + b * pe_rows + r`` at kernel position ``(h0 + i, w0 + j)``. In
      :attr:`Layout.KBLOCK` the tile's weights start at ``base`` as
      ``[cb][dh][dw][pe_rows][pe_cols]`` (``n0 = c0 = 0``, ``dn = pe_cols``,
      ``dc = cb * pe_rows``).
    * ``COMPUTE``: a convolution tile (:class:`~pimforge.rtl.nicepim.engine.NNEngine`):
      ``cb`` channel blocks of an ``nh x nw`` input window in the input buffer,
      kernel ``kh x kw``, ``stride``, ``pad``, ``oh x ow`` outputs into output-buffer
      lines ``o * ow + q``; ``acc``: add to what the output buffer holds.
    * ``STORE``: output buffer -> DRAM, 32-bit elements: line ``i * nw + j`` lane
      ``l`` (``l < pe_cols``) goes to channel ``c0 + l`` of pixel ``(h0 + i, w0 + j)``
      of image ``n0``; elements outside the tensor are not written.
    * ``SEND``: ``count`` DRAM words from word ``base`` to node ``node``'s DRAM
      words from ``dest``, one message per word over the NoC.
    * ``WAIT``: until the node has received ``dest`` words in all (since start).

    The input, weight and output buffers can be used as two halves each (double
    buffering): ``buf`` = 1 puts a ``LOAD_I``'s and a ``COMPUTE``'s input lines and a
    ``LOAD_W``'s and a ``COMPUTE``'s weight lines in the upper half (line numbers above
    are then relative to ``lines // 2``), ``obuf`` = 1 a ``COMPUTE``'s and a ``STORE``'s
    output lines. The node controller lets a task whose halves no running task uses run
    beside it (:class:`~pimforge.rtl.nicepim.node_ctrl.NodeController`).
    """

    END = 0
    LOAD_I = 1
    LOAD_W = 2
    COMPUTE = 3
    STORE = 4
    SEND = 5
    WAIT = 6


#: One task.
TASK_LAYOUT = data.StructLayout({
    "op": 4,
    "acc": 1,
    "buf": 1,
    "obuf": 1,
    "layout": 3,
    "base": 32,
    "dn": 16, "dc": 16, "dh": 16, "dw": 16,
    "n0": 16, "c0": 16, "h0": 16, "w0": 16,
    "cb": 16, "nh": 16, "nw": 16,
    "kh": 8, "kw": 8, "stride": 4, "pad": 4,
    "oh": 16, "ow": 16,
    "dest": 32,
    "node": 8,
    "count": 16,
})
#: 32-bit words of a task (what the drivers write).
TASK_WORDS = -(-TASK_LAYOUT.size // 32)

#: Fields holding signed values (two's complement in their width).
SIGNED_FIELDS = ("n0", "c0", "h0", "w0")


def element_address(layout: int, dims: tuple[int, int, int, int], n: int, c: int, h: int,
                    w: int) -> int:
    """Element offset of ``(n, c, h, w)`` in a tensor of *dims* ``(dn, dc, dh, dw)``."""
    dn, dc, dh, dw = dims
    if layout == Layout.NCHW:
        return ((n * dc + c) * dh + h) * dw + w
    if layout == Layout.NHWC:
        return ((n * dh + h) * dw + w) * dc + c
    if layout == Layout.NCHWC8:
        blocks = -(-dc // C_BLOCK)
        return (((n * blocks + c // C_BLOCK) * dh + h) * dw + w) * C_BLOCK + c % C_BLOCK
    if layout == Layout.CHWN:
        return ((c * dh + h) * dw + w) * dn + n
    if layout == Layout.KBLOCK:
        raise ValueError("a KBLOCK address depends on the engine's PEs: use kblock_address")
    raise ValueError(f"layout must be one of {[x.name for x in Layout]}, not {layout!r}")


def kblock_elems(dims: tuple[int, int, int, int], pe_rows: int, pe_cols: int) -> int:
    """Elements a weight tensor of *dims* ``(Cout, Cin, KH, KW)`` spans in
    :attr:`Layout.KBLOCK` for an engine of *pe_rows* x *pe_cols* PEs (whole blocks)."""
    dn, dc, dh, dw = dims
    return -(-dn // pe_cols) * pe_cols * -(-dc // pe_rows) * pe_rows * dh * dw


def kblock_address(dims: tuple[int, int, int, int], pe_rows: int, pe_cols: int, n, c, h, w):
    """Element offset of weight ``(n, c, h, w)`` (output channel, input channel, kernel
    position) in :attr:`Layout.KBLOCK`: block ``(n // pe_cols, c // pe_rows)``, then the
    kernel position, then the weight line of input channel ``c % pe_rows`` with its
    ``pe_cols`` output channels, as the engine's weight buffer holds a tile's lines.
    Works on ints and on numpy arrays."""
    _, dc, dh, dw = dims
    R, C = pe_rows, pe_cols
    cbs = -(-dc // R)
    return (((((n // C) * cbs + c // R) * dh + h) * dw + w) * R + c % R) * C + n % C


def wbuf_row_lines(pe_rows: int, pe_cols: int, wbuf_lines: int, word_bits: int) -> int:
    """Weight lines in one row of the weight buffer's SRAM: as many as fill one DRAM word
    of *word_bits* (a power of two), so that a ``LOAD_W`` in :attr:`Layout.KBLOCK` writes
    a word a cycle; 1 when a line is a word or wider, when its width does not divide the
    word, or when such rows would straddle a tile's ``pe_rows`` lines of one kernel
    position or the buffer's halves (a KBLOCK word then holds lines of two rows)."""
    line = pe_cols * DATA_BITS
    if line >= word_bits or word_bits % line:
        return 1
    nb = word_bits // line
    return 1 if pe_rows % nb or (wbuf_lines // 2) % nb else nb


def ibuf_row_lines(pe_rows: int, ibuf_lines: int, word_bits: int) -> int:
    """Input lines in one row of the input buffer's SRAM: as many as fill one DRAM word
    of *word_bits* (a power of two), so that a ``LOAD_I`` in NHWC or NCHW[C8] writes a
    pixel's channel blocks, up to a word, in one cycle; 1 when a line is a word or
    wider, when its width does not divide the word, or when such rows would straddle
    the buffer's halves.

    With rows of ``nb > 1`` lines a tile's input is held block-group by block-group:
    channel block ``b`` of pixel ``p`` (of the tile's ``window`` pixels) is line
    ``(b - b % nb) * window + p * g + b % nb``, ``g = min(nb, cb - (b - b % nb))`` the
    blocks of its group, so that a pixel's blocks of one group are consecutive lines
    (:class:`~pimforge.rtl.nicepim.engine.NNEngine`, :func:`ibuf_line`)."""
    line = pe_rows * DATA_BITS
    if line >= word_bits or word_bits % line:
        return 1
    nb = word_bits // line
    return 1 if (ibuf_lines // 2) % nb or ibuf_lines % nb else nb


def ibuf_line(b: int, pixel: int, cb: int, window: int, nb: int) -> int:
    """The input-buffer line (from the tile's half) of channel block *b* of the tile's
    pixel *pixel* (of *window*), for a tile of *cb* blocks and rows of *nb* lines
    (:func:`ibuf_row_lines`; with ``nb = 1``, ``b * window + pixel``)."""
    g0 = b - b % nb
    return g0 * window + pixel * min(nb, cb - g0) + b % nb
