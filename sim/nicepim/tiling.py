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
  with a ``STORE``;
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

__all__ = ["Blocking", "ConvPart", "blocking", "tiles"]


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
    ``[u0, u0 + kh)``; ``store``: the band's last tile (a ``STORE`` follows). A named
    tuple: the cost model makes one per tile of every part it costs."""

    g: int
    co: int
    o0: int
    oh: int
    b0: int
    cb: int
    u0: int
    kh: int
    store: bool


def tiles(n, part: ConvPart):
    """The tiles of *part* in the node's order (see the module docstring)."""
    b = blocking(n, part)
    og = part.k // part.groups
    lo, hi = part.rows
    chunks = [(b0, min(b.cbs, b.blocks - b0)) for b0 in range(0, b.blocks, b.cbs)]
    kbands = [(u0, min(b.kr, part.r - u0)) for u0 in range(0, part.r, b.kr)]
    for g in range(part.groups):
        for co in range(0, og, n.pe_cols):
            for o0 in range(lo, hi, b.per_rows):
                oh = min(b.per_rows, hi - o0)
                for i, (b0, cb) in enumerate(chunks):
                    for j, (u0, kh) in enumerate(kbands):
                        yield Tile(g, co, o0, oh, b0, cb, u0, kh,
                                   i == len(chunks) - 1 and j == len(kbands) - 1)
