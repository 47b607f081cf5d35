"""Where a lowered pipeline's arrays live in the banks, and the compiled program.

An :class:`Array` is one root func, input image or constant table as every PE stores it
(the layout :mod:`pimforge.sim.ipim.lower` describes); a :class:`Program` is a compiled
pipeline: one SIMB program per vault with its arrays. :func:`place` and :func:`gather`
move images between the host and the PEs' banks in that layout.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pimforge.rtl.ipim.isa import (
    LANES,
    Instr,
)

from .backend import Options
from .lang import (
    FP32,
    CompileError,
    Func,
)

__all__ = ["ALL_LANES", "SCRATCH_LINES", "Array", "Program", "even", "f32_bits", "gather", "place"]


ALL_LANES = 0xF


#: VSM lines at the top of the VSM that the AddrRF set-up rotates through.
SCRATCH_LINES = 4


def even(n: int) -> int:
    return n + n % 2


def f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


@dataclass(eq=False)
class Array:
    """One root func or input image, as every PE stores it.

    A *tiled* array (the default) is a band of ``R`` rows (``ceil(H / PEs)`` for an
    output; a producer's scales with its consumers' resampling) in four strips of
    ``S = W/4`` vectors; the last band may be shorter (``last_rows``), its rows beyond
    ``H`` holding row ``H - 1`` as the halo does, and the PEs after it hold no rows. A
    *replicated* one (``rep``) is the whole ``W x H`` func in every PE, one pixel per
    vector (the channels in the lanes, or the lanes alike), over
    ``R x S`` rows and columns, rounded up to even where its kernel resamples (it makes
    two per step); the rows and columns beyond ``H`` and ``W`` hold the edge, as the halo
    does. ``kind`` says where the values come from: ``"input"`` (placed by the host;
    ``channel`` of a multi-channel image), ``"func"`` (a root func; ``channel`` of a
    tiled one), ``"gather"`` (a replicated copy of the tiled ``srcs``, one per lane),
    ``"extract"`` (a tiled copy of channel ``channel`` of the replicated ``srcs[0]``) or
    ``"const"`` (a :class:`~pimforge.sim.ipim.lang.Table`'s ``data``, four entries per
    vector, placed by the host in every PE).
    """

    name: str
    dtype: str
    W: int
    H: int
    R: int
    hxl: int = 0
    hxr: int = 0
    hyt: int = 0
    hyb: int = 0
    base: int = 0
    func: Func | None = None
    rep: bool = False
    kind: str = "func"
    srcs: list[Array] = field(default_factory=list)
    channel: int | None = None
    px: int = 0
    #: the extracts of every channel of one replicated array, made together
    group: list[Array] = field(default_factory=list, repr=False)
    #: a grid's cells ``(xlo, nx, ylo, ny, zlo, nz)``: cell ``(x, y, z)`` is element
    #: ``(y - ylo, (x - xlo) * nz + z - zlo)`` (x and z share a row)
    box: tuple = ()
    #: a constant table's entries (``kind == "const"``)
    data: np.ndarray | None = field(default=None, repr=False)
    #: an input whose rows beyond ``H``, and the bands of the PEs that hold none, are
    #: this value instead of the edge's (a histogram's bucket that nobody reads)
    pad: int | None = None

    @property
    def host(self) -> bool:
        """Written by the host before the run (an input image or a constant table)."""
        return self.kind in ("input", "const")

    @property
    def bands(self) -> int:
        """The PEs whose band holds rows of the image (a tiled array): ``ceil(H / R)``;
        the last band may be shorter, and the PEs after it hold none."""
        return 1 if self.rep else -(-self.H // self.R)

    @property
    def last_rows(self) -> int:
        """The image rows in the last band (``R`` when the bands divide ``H``)."""
        return self.H - (self.bands - 1) * self.R

    @property
    def S(self) -> int:
        return self.W + self.px if self.rep else self.W // LANES

    @property
    def pitch(self) -> int:
        return self.S + self.hxl + self.hxr

    @property
    def size(self) -> int:
        return self.pitch * (self.R + self.hyt + self.hyb)

    def addr(self, r: int, k: int) -> int:
        return self.base + (r + self.hyt) * self.pitch + k + self.hxl


@dataclass
class Program:
    """A compiled pipeline: one program per vault (global vault index), its arrays and
    statistics."""

    programs: dict[int, list[Instr]]
    inputs: dict[str, Array]
    output: Array
    arrays: list[Array]
    out_shape: tuple[int, ...]
    opts: Options
    kernels: list[str] = field(default_factory=list)
    #: ``reader(fetch) -> ndarray`` for an output that is not an image band (a histogram)
    reader: Callable | None = None
    #: every output of a multi-output pipeline (the channels of an image), in order
    outputs: list[Array] = field(default_factory=list)

    def read(self, fetch: Callable[[int, int, int, int], np.ndarray], ip) -> np.ndarray:
        """The output, from ``fetch(global vault, pe, base, n) -> uint32[n, 4]``; the
        outputs of a multi-output pipeline stacked as the last axis."""
        if self.reader is not None:
            return self.reader(fetch)
        if len(self.outputs) > 1:
            return np.stack([gather(a, fetch, ip) for a in self.outputs], axis=-1)
        return gather(self.output, fetch, ip)

    def breakdown(self) -> dict[str, int]:
        """Static instruction count by opcode over every vault's program."""
        out: dict[str, int] = {}
        for prog in self.programs.values():
            for ins in prog:
                out[ins.opcode.name.lower()] = out.get(ins.opcode.name.lower(), 0) + 1
        return dict(sorted(out.items()))


def _to_u32(img: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == FP32:
        return np.ascontiguousarray(img, dtype=np.float32).view(np.uint32)
    return np.asarray(img, dtype=np.int64).astype(np.uint32)


def place(arr: Array, img: np.ndarray, ip,
          vaults: dict[int, int] | None = None) -> dict[tuple[int, int], np.ndarray]:
    """Every PE's band of *img* (``(H, W)``, or channel ``arr.channel`` of ``(H, W, C)``)
    with its halo (clamped at the image's edges), as ``(global vault, pe) ->
    uint32[vectors, 4]`` starting at ``arr.base``; a constant table (``kind ==
    "const"``) is its own ``data`` in every PE, whatever *img*. *vaults* (``global
    vault -> vault``): only those vaults' PEs, keyed by the vault they map to."""
    keep = vaults if vaults is not None else {v: v for v in range(ip.cubes * ip.vaults)}
    if arr.kind == "const":
        u = np.zeros(arr.S * LANES, np.uint32)
        u[:arr.data.size] = _to_u32(arr.data, FP32)
        blk = u.reshape(-1, LANES)
        return {(lv, p): blk for lv in keep.values() for p in range(ip.pes)}
    if arr.channel is not None and img.ndim == 3:
        img = img[..., arr.channel]
    if img.shape != (arr.H, arr.W):
        raise CompileError(f"input {arr.name} must be {arr.H}x{arr.W} (rows x cols), not "
                           f"{img.shape[0]}x{img.shape[1]}")
    u = _to_u32(img, arr.dtype)
    rows = np.arange(-arr.hyt, arr.R + arr.hyb)
    cols = np.arange(-arr.hxl, arr.S + arr.hxr)
    out = {}
    xs = np.clip(np.arange(LANES)[None, :] * arr.S + cols[:, None], 0, arr.W - 1)
    bands = arr.bands if arr.pad is None else ip.cubes * ip.vaults * ip.pes
    for g in range(bands):
        v, p = divmod(g, ip.pes)
        if v not in keep:
            continue
        ys = np.clip(g * arr.R + rows, 0, arr.H - 1)
        block = u[ys[:, None, None], xs[None, :, :]]      # [rows, cols, lanes]
        if arr.pad is not None:
            block[g * arr.R + rows >= arr.H] = arr.pad
        out[(keep[v], p)] = block.reshape(-1, LANES)
    return out


def gather(arr: Array, fetch: Callable[[int, int, int, int], np.ndarray], ip) -> np.ndarray:
    """The ``(H, W)`` image of *arr* from ``fetch(global vault, pe, base, n)``
    (``uint32[n, 4]``)."""
    u = np.zeros((arr.bands * arr.R, arr.W), dtype=np.uint32)
    for g in range(arr.bands):
        v, p = divmod(g, ip.pes)
        blk = fetch(v, p, arr.base, arr.size).reshape(arr.R + arr.hyt + arr.hyb, arr.pitch,
                                                      LANES)
        inner = blk[arr.hyt:arr.hyt + arr.R, arr.hxl:arr.hxl + arr.S, :]   # [r, k, lane]
        u[g * arr.R:(g + 1) * arr.R, :] = inner.transpose(0, 2, 1).reshape(arr.R, arr.W)
    u = np.ascontiguousarray(u[:arr.H])
    return u.view(np.float32) if arr.dtype == FP32 else u.view(np.int32)
