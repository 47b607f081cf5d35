"""How one PIM-node's part of a convolution is cut into engine tiles.

The one description of the node's tile loop, used by the lowering to task lists
(:func:`~pimforge.sim.nicepim.rtl_run.conv_tasks`) and by the per-node cost model
(:class:`~pimforge.sim.nicepim.mapper.NodeModel`):

* a part is a convolution's output channels ``k`` (whole groups), output rows
  ``rows`` and columns ``cols``, computed from the input rows and columns it needs
  (its window, halo included, clipped to the image: the input sub-tensor the node
  holds) and its input channels ``c``;
* for each group, output channels go ``pe_cols`` at a time, output rows in bands as
  large as the output and input buffers hold, input channels in chunks of as many
  ``pe_rows`` blocks as the input and weight buffers hold, and a kernel larger than
  the weight buffer, or whose input rows for one output row exceed the input buffer,
  in bands of its rows; each (chunk, kernel band) is a
  ``LOAD_W``, ``LOAD_I``, ``COMPUTE`` (the later ones accumulate) and each band ends
  with a ``STORE``; a load is left out when the buffer half the tile uses still holds
  the same weights or input from the last tile in that half (:attr:`Tile.load_w`,
  :attr:`Tile.load_i`: e.g. the same input for every ``pe_cols`` output channels of a
  small image, the same weights for every band of rows), and a tile's two loads go in
  the order that reads the tensor the load before read last first
  (:attr:`Tile.i_first`: weights, input, input, weights, ...), so that back-to-back
  loads find their DRAM row open;
* padding is read by the input load (the window reaches outside the sub-tensor,
  which reads 0), so tiles have ``pad = 0``;
* the tiles are sized to half of each buffer when the part fits that way (double
  buffering, :attr:`Blocking.double`: consecutive tiles use alternate input and weight
  halves and consecutive bands alternate output halves, so the node loads the next
  tile and stores the last band while the engine computes), else to whole buffers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

from pimforge.gen.errors import CapacityError

__all__ = ["Blocking", "ConvPart", "blocking", "drop_held", "loaded", "tile_fields", "tiles"]


@dataclass(frozen=True)
class ConvPart:
    """One node's part of a convolution, in the coordinates of the whole layer.

    Attributes
    ----------
    c, k : int
        Input and output channels of the part (``groups`` whole groups).
    h, w : int
        The layer's input height and width.
    r, s, stride, pad, groups : int
        Kernel, stride, padding (the same on both axes) and the part's groups.
    rows, cols : (int, int)
        Output rows and columns ``[lo, hi)``.
    """

    c: int
    k: int
    h: int
    w: int
    r: int
    s: int
    stride: int
    pad: int
    groups: int
    rows: tuple[int, int]
    cols: tuple[int, int]

    @property
    def p(self) -> int:
        return self.rows[1] - self.rows[0]

    @property
    def q(self) -> int:
        return self.cols[1] - self.cols[0]

    def _window(self, lo: int, hi: int, k: int, size: int) -> tuple[int, int]:
        a = max(0, lo * self.stride - self.pad)
        b = min(size, (hi - 1) * self.stride - self.pad + k)
        return a, max(a, b)

    @property
    def x_rows(self) -> tuple[int, int]:
        """Input rows ``[lo, hi)`` the part reads (its halo included, inside the image)."""
        return self._window(*self.rows, self.r, self.h)

    @property
    def x_cols(self) -> tuple[int, int]:
        return self._window(*self.cols, self.s, self.w)

    @property
    def x_dims(self) -> tuple[int, int, int]:
        """The input sub-tensor the node holds: ``(c, rows, cols)``."""
        (a, b), (e, f) = self.x_rows, self.x_cols
        return self.c, b - a, f - e


@dataclass(frozen=True)
class Blocking:
    """The tile sizes of a part: output rows per band, channel blocks per chunk and
    kernel rows per band, the input window width of a tile, and whether the tiles use
    half buffers (double buffering)."""

    per_rows: int
    cbs: int
    kr: int
    blocks: int
    nw: int
    double: bool = False

    def rows_in(self, oh: int, kh: int, stride: int) -> int:
        return (oh - 1) * stride + kh


@functools.lru_cache(maxsize=65536)
def blocking(n, part: ConvPart) -> Blocking:
    """The largest tiles of *part* that fit half the buffers of ``cfg.nicepim`` *n*
    (double buffering), else the whole buffers.

    Raises
    ------
    CapacityError
        An output row exceeds the output buffer, one input row of one channel block
        the input buffer, or one kernel row the weight buffer.
    """
    try:
        return _blocking(n, part, 2)
    except CapacityError:
        return _blocking(n, part, 1)


def _blocking(n, part: ConvPart, split: int) -> Blocking:
    R = n.pe_rows
    ow = part.q
    ibuf_lines, wbuf_lines, obuf_lines = (n.ibuf_lines // split, n.wbuf_lines // split,
                                          n.obuf_lines // split)
    if split > 1 and wbuf_lines < R:
        raise CapacityError("half the weight buffer holds less than one pass")
    if ow > obuf_lines:
        raise CapacityError(f"an output row of {ow} pixels exceeds the output buffer's "
                            f"{obuf_lines} lines; raise nicepim.obuf_bytes")
    kr = min(part.r, wbuf_lines // (part.s * R))
    if kr < 1:
        raise CapacityError(f"one {part.s}-wide kernel row of {R} channels does not fit the "
                            f"weight buffer's {wbuf_lines} lines; raise nicepim.wbuf_bytes")
    nw = (ow - 1) * part.stride + part.s
    if nw > ibuf_lines:
        raise CapacityError(f"one input row of {nw} pixels exceeds the input buffer's "
                            f"{ibuf_lines} lines; raise nicepim.ibuf_bytes")
    # the kernel's rows in bands whose input rows for one output row fit the input buffer
    kr = min(kr, ibuf_lines // nw)
    per_rows = max(1, min(part.p, obuf_lines // ow))

    def rows_in(o: int) -> int:
        return (o - 1) * part.stride + kr

    while per_rows > 1 and rows_in(per_rows) * nw > ibuf_lines:
        per_rows -= 1
    blocks = math.ceil(part.c // part.groups / R)
    cbs = blocks
    while cbs > 1 and (cbs * rows_in(per_rows) * nw > ibuf_lines
                       or cbs * kr * part.s * R > wbuf_lines):
        cbs -= 1
    return Blocking(per_rows, cbs, kr, blocks, nw, split > 1)


class Tile(NamedTuple):
    """One tile of the loop: group ``g``, output channels from ``co``, output rows
    ``[o0, o0 + oh)`` (layer coordinates), channel blocks ``[b0, b0 + cb)``, kernel rows
    ``[u0, u0 + kh)``; ``store``: the band's last tile (a ``STORE`` follows);
    ``load_w``, ``load_i``: its weights, its input are not already in the buffer half it
    uses (the last tile in that half had others); ``i_first``: its input is loaded before
    its weights (the load before it read the input). A named tuple: the cost model makes
    one per tile of every part it costs."""

    g: int
    co: int
    o0: int
    oh: int
    b0: int
    cb: int
    u0: int
    kh: int
    store: bool
    load_w: bool = True
    load_i: bool = True
    i_first: bool = False


def tiles(n, part: ConvPart):
    """The tiles of *part* in the node's order (see the module docstring)."""
    return map(Tile._make, tile_fields(n, part))


def tile_fields(n, part: ConvPart):
    """:func:`tiles` as plain tuples of a :class:`Tile`'s fields (for the cost model,
    which reads a part's tiles once each and makes no named tuple of them)."""
    b = blocking(n, part)
    og = part.k // part.groups
    lo, hi = part.rows
    chunks = [(b0, min(b.cbs, b.blocks - b0)) for b0 in range(0, b.blocks, b.cbs)]
    kbands = [(u0, min(b.kr, part.r - u0)) for u0 in range(0, part.r, b.kr)]
    # what each buffer half holds: the (weights, input) of the last tile that used it
    held: list[tuple | None] = [None, None]
    i = 0
    last_i = False      # the last load read the input
    for g in range(part.groups):
        for co in range(0, og, n.pe_cols):
            for o0 in range(lo, hi, b.per_rows):
                oh = min(b.per_rows, hi - o0)
                for ci, (b0, cb) in enumerate(chunks):
                    for j, (u0, kh) in enumerate(kbands):
                        # (an input is its window: kernel bands of later rows can
                        # read the window of an earlier band's later kernel rows)
                        wkey = (g, co, b0, cb, u0, kh)
                        ikey = (g, b0, cb, o0 * part.stride + u0, (oh - 1) * part.stride + kh)
                        half = i % 2 if b.double else 0
                        last = held[half]
                        held[half] = (wkey, ikey)
                        i += 1
                        load_w = last is None or last[0] != wkey
                        load_i = last is None or last[1] != ikey
                        i_first = last_i and load_w and load_i
                        if load_w or load_i:
                            last_i = load_i and not i_first
                        yield (g, co, o0, oh, b0, cb, u0, kh,
                               ci == len(chunks) - 1 and j == len(kbands) - 1,
                               load_w, load_i, i_first)


def loaded(n, part: ConvPart) -> tuple[int, int]:
    """How many times :func:`tiles` loads the weights and the input of *part* (the
    flags :attr:`Tile.load_w` and :attr:`Tile.load_i`, in closed form for the cost
    model's lower bound): ``(bands, cos)``, the number of bands whose weight tiles each
    output-channel block loads and the number of output-channel blocks each group loads
    its input tiles for (``len(bands)`` and the blocks when nothing is held over).

    A half holds the same weights again only where a band has at most two tiles (one
    per half, with double buffering; one without), and the same input only where an
    output-channel block has at most that many tiles; with the kernel in bands of rows a
    band's window can also be one a band of earlier rows read (not counted here: the
    lower bound then leaves the input out)."""
    b = blocking(n, part)
    bands = -(-part.p // b.per_rows)
    per_band = -(-b.blocks // b.cbs) * -(-part.r // b.kr)
    cos = -(-(part.k // part.groups) // n.pe_cols)
    halves = 2 if b.double else 1
    w_bands = bands if per_band > halves else (min(bands, 2) if per_band < halves else 1)
    per_co = bands * per_band
    i_cos = cos if per_co > halves else (min(cos, 2) if per_co < halves else 1)
    return w_bands, i_cos


def drop_held(tasks: list, load_key) -> list:
    """*tasks* without the loads that would fill a buffer half with what it already
    holds: ``load_key(task)`` is None for a task that loads nothing, else ``(op, half,
    what)``; a load whose ``what`` is the last one loaded by its ``op`` into its ``half``
    is left out (the engine's tasks only read the input and weight buffers). Applied to
    each run of the task memory on its own, since a run starts from reset."""
    held: dict = {}
    out = []
    for t in tasks:
        k = load_key(t)
        if k is not None:
            if held.get(k[:2]) == k[2]:
                continue
            held[k[:2]] = k[2]
        out.append(t)
    return out
