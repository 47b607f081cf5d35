"""A Halide-style front end for iPIM: the algorithm apart from the schedule (Sec. V-A).

An image pipeline is a set of :class:`Func` s over two pure variables ``x`` (column)
and ``y`` (row), each defined by one :class:`Expr` of the values of other funcs and
input images (:class:`ImageParam`) at affine coordinates, with FP32/INT32
arithmetic, ``select``, ``min``/``max``/``clamp`` and casts. The schedule is kept
apart, on the output func, as in Listing 1::

    x, y, xi, yi = Var("x"), Var("y"), Var("xi"), Var("yi")
    inp = ImageParam("in", FP32)
    blur_x = Func("blur_x")
    blur_x[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3.0
    out = Func("out")
    out[x, y] = (blur_x[x, y] + blur_x[x, y + 1] + blur_x[x, y + 2]) / 3.0
    out.compute_root().ipim_tile(x, y, xi, yi, 8, 8).load_pgs().vectorize(xi, 4)

Funcs without ``compute_root`` are inlined into their consumers (Halide's default);
every ``compute_root`` func becomes a kernel that writes its values to the DRAM
banks, which the next kernel reads (:mod:`pimforge.sim.ipim.lower`).

Coordinates
-----------
A func's argument in ``x`` (or ``y``) must be ``(a*x + b) // d`` with ``a`` and
``d`` in {1, 2} and an integer ``b`` (``x + 1``, ``2*x - 1``, ``x // 2``,
``(x + 1) // 2``): the stencils and the power-of-two resamplings of the
benchmarks. Reads outside the producer's domain clamp to its edge (the
benchmarks' boundary condition), so the domain of every func is a rectangle: the
output's size, and for a producer the size its reads imply (a read at ``x // 2`` of
a ``W``-wide consumer makes a producer of ``ceil(W/2)``, a pyramid level).

Channels
--------
A func may have a third variable, ``f[x, y, c] = ...`` with ``f.bound(c, 0, n)``,
and an input ``ImageParam(name, FP32, channels=n)``; a read names the consumer's
channel variable or a constant channel (``d[x, y, 3]``, RGBA's alpha). A tiled func
is one plane per channel; ``ipim_replicate()`` computes a small func whole in every
PE with its channels in the four lanes (Halide's ``vectorize(c)``), for the levels of
a pyramid too small for the bands. ``reinterpret(dtype, e)`` reads the bits of a
value as the other type (a reciprocal's first guess). ``stack(name, funcs)`` makes one
func with channels of tiled funcs that have none, so that each channel may have its
own definition (the local Laplacian's intensity levels).

Tables and parity
-----------------
A :class:`Table` is a constant 1-D FP32 table that the host computes and places in
every PE's bank (the local Laplacian's remapping curve); ``tbl.lookup(i, offset)``
reads entry ``i + offset`` at an INT32 index computed per pixel (a gather).
``by_parity(x, even, odd)`` is *even* at even ``x`` and *odd* at odd ``x`` (the
upsampling of Halide's ``apps/local_laplacian``, whose far tap sits on the side of the
pixel's parity): no instruction, as a resampling kernel computes even and odd
columns (rows) apart.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.errors import PimforgeError

__all__ = ["FP32", "INT32", "CompileError", "Expr", "Const", "Call", "Call3", "Bin", "Select",
           "Cast", "Reinterpret", "Coord", "WCall", "Window", "Var", "RVar", "Func", "ImageParam",
           "RDom", "RBox", "Affine", "select", "min_", "max_", "clamp", "cast", "reinterpret",
           "coord", "children", "nodes", "Table", "Lookup", "Parity", "by_parity", "stack", "Stack"]

FP32 = "fp32"
INT32 = "int32"


class CompileError(PimforgeError):
    """A pipeline or schedule the iPIM compiler cannot lower, with what to change."""


class Expr:
    """A value of a pipeline: FP32 or INT32 (:attr:`dtype`)."""

    dtype: str

    def _bin(self, op: str, other, swap: bool = False) -> Expr:
        o = lift(other, self.dtype)
        a, b = (o, self) if swap else (self, o)
        if a.dtype != b.dtype:
            raise CompileError(f"{op} of {a.dtype} and {b.dtype}: cast one side first "
                               f"(cast(FP32, e) or cast(INT32, e))")
        if op == "/":
            if not isinstance(b, Const) or b.value == 0:
                raise CompileError("division is by a nonzero constant only: the SIMB ISA "
                                   "(Table I) has no divide; multiply by a reciprocal")
            if a.dtype == FP32:
                return Bin("*", a, Const(float(np.float32(1.0) / np.float32(b.value)), FP32))
            raise CompileError("integer division of values is not supported; use a shift")
        return Bin(op, a, b)

    def __add__(self, o):
        return self._bin("+", o)

    def __radd__(self, o):
        return self._bin("+", o, True)

    def __sub__(self, o):
        return self._bin("-", o)

    def __rsub__(self, o):
        return self._bin("-", o, True)

    def __mul__(self, o):
        return self._bin("*", o)

    def __rmul__(self, o):
        return self._bin("*", o, True)

    def __truediv__(self, o):
        return self._bin("/", o)

    def __and__(self, o):
        return self._bin("&", o)

    def __or__(self, o):
        return self._bin("|", o)

    def __xor__(self, o):
        return self._bin("^", o)

    def __lshift__(self, n: int):
        return Bin("<<", self, Const(int(n), INT32))

    def __rshift__(self, n: int):
        return Bin("<<", self, Const(-int(n), INT32))

    def __lt__(self, o):
        return Cmp("<", self, lift(o, self.dtype))

    def __gt__(self, o):
        return Cmp("<", lift(o, self.dtype), self)

    def __le__(self, o):
        return Cmp("<=", self, lift(o, self.dtype))

    def __ge__(self, o):
        return Cmp("<=", lift(o, self.dtype), self)

    __hash__ = object.__hash__


def lift(v, dtype: str = FP32) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise CompileError(f"{v!r} is not a pipeline value")
    if dtype == INT32 and float(v).is_integer():
        return Const(int(v), INT32)
    return Const(float(np.float32(v)), FP32)


@dataclass(eq=False)
class Const(Expr):
    value: float | int
    dtype: str = FP32


@dataclass(eq=False)
class Bin(Expr):
    """``+ - * & | ^`` and ``<<`` (a negative count shifts right, arithmetic for INT32;
    ``2**n`` scaling for FP32)."""

    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(eq=False)
class Cmp:
    """A comparison: only a condition of :func:`select`."""

    op: str
    a: Expr
    b: Expr


@dataclass(eq=False)
class Select(Expr):
    cond: Cmp
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(eq=False)
class Cast(Expr):
    """FP32 <-> INT32: ``int`` truncates (non-negative values below 2**22), ``float``
    is exact below 2**23 (the ranges the benchmarks use, checked by the ISA's
    bit tricks)."""

    dtype: str
    a: Expr


@dataclass(eq=False)
class Reinterpret(Expr):
    """The 32 bits of *a* read as *dtype* (Halide's ``reinterpret``): no instruction, as
    a DataRF entry holds bits; the integer tricks on floats (a reciprocal's first
    guess) are written with it."""

    dtype: str
    a: Expr


def select(cond: Cmp, a, b) -> Expr:
    if not isinstance(cond, Cmp):
        raise CompileError("select needs a comparison (a < b, a <= b, a > b, a >= b)")
    a = lift(a, cond.a.dtype)
    b = lift(b, a.dtype)
    if a.dtype != b.dtype:
        raise CompileError("select arms must have one type")
    return Select(cond, a, b)


def min_(a, b) -> Expr:
    a = lift(a)
    b = lift(b, a.dtype)
    return select(a < b, a, b)


def max_(a, b) -> Expr:
    a = lift(a)
    b = lift(b, a.dtype)
    return select(a < b, b, a)


def clamp(v, lo, hi) -> Expr:
    return min_(max_(v, lo), hi)


def cast(dtype: str, e) -> Expr:
    e = lift(e)
    if dtype not in (FP32, INT32):
        raise CompileError(f"cast to {dtype!r}: use FP32 or INT32")
    return e if e.dtype == dtype else Cast(dtype, e)


def reinterpret(dtype: str, e) -> Expr:
    """*e*'s bits as *dtype* (FP32 or INT32)."""
    e = lift(e, INT32 if dtype == FP32 else FP32)
    if dtype not in (FP32, INT32):
        raise CompileError(f"reinterpret as {dtype!r}: use FP32 or INT32")
    return e if e.dtype == dtype else Reinterpret(dtype, e)


# -- coordinates -------------------------------------------------------------------

@dataclass(frozen=True)
class Var:
    """A pure variable (``x`` is the column, ``y`` the row of the first two arguments)."""

    name: str

    def _aff(self) -> Affine:
        return Affine(self, 1, 0, 1)

    def __add__(self, b: int):
        return self._aff() + b

    __radd__ = __add__

    def __sub__(self, b: int):
        return self._aff() - b

    def __mul__(self, a: int):
        return self._aff() * a

    __rmul__ = __mul__

    def __floordiv__(self, d: int):
        return self._aff() // d


@dataclass(frozen=True)
class Affine:
    """``(a * var + b) // d``."""

    var: Var
    a: int
    b: int
    d: int

    def __add__(self, b: int):
        if isinstance(b, RVar):
            if self.d != 1:
                raise CompileError("a window read is (x*s + r.x + b): no division")
            return Window(self, b)
        if self.d != 1:
            raise CompileError("add to a coordinate before dividing it: (x + 1) // 2")
        return Affine(self.var, self.a, self.b + int(b), 1)

    __radd__ = __add__

    def __sub__(self, b: int):
        return self + (-int(b))

    def __mul__(self, a: int):
        if self.d != 1 or self.b != 0:
            raise CompileError("scale a coordinate first: 2*x + 1")
        return Affine(self.var, self.a * int(a), 0, 1)

    __rmul__ = __mul__

    def __floordiv__(self, d: int):
        if self.d != 1:
            raise CompileError("divide a coordinate once")
        return Affine(self.var, self.a, self.b, int(d))

    def check(self) -> Affine:
        if self.a not in (1, 2) or self.d not in (1, 2) or (self.a == 2 and self.d == 2):
            raise CompileError(f"coordinate ({self.a}*{self.var.name} + {self.b}) // {self.d}: "
                               "only x + b, 2*x + b and (x + b) // 2 are supported")
        return self

    def at(self, v: int) -> int:
        return (self.a * v + self.b) // self.d


@dataclass(frozen=True)
class RVar(Var):
    """A variable of an :class:`RBox` (the offset within a cell's window)."""

    extent: int = 1


@dataclass(frozen=True)
class Window:
    """``a*x + r + b``: the pixel at offset *r* of cell *x*'s window of a scatter."""

    cell: Affine
    r: RVar

    def __add__(self, b: int):
        return Window(Affine(self.cell.var, self.cell.a, self.cell.b + int(b), 1), self.r)

    __radd__ = __add__

    def __sub__(self, b: int):
        return self + (-int(b))


@dataclass(frozen=True)
class RBox:
    """A reduction domain of ``w x h`` offsets ``(r.x, r.y)``: the window of pixels that
    each cell of a grid gathers (Halide's ``RDom(0, w, 0, h)``)."""

    w: int
    h: int
    name: str = "r"

    def __post_init__(self):
        if self.w < 1 or self.h < 1:
            raise CompileError(f"RBox {self.name} must be at least 1x1, not {self.w}x{self.h}")

    @property
    def x(self) -> RVar:
        return RVar(f"{self.name}.x", self.w)

    @property
    def y(self) -> RVar:
        return RVar(f"{self.name}.y", self.h)


def _channel(name: str, c) -> Var | int:
    if isinstance(c, Var) or (isinstance(c, int) and not isinstance(c, bool) and c >= 0):
        return c
    raise CompileError(f"{name}[x, y, c]: the channel is the consumer's channel variable or "
                       f"a constant, not {c!r}")


def _affine(arg) -> Affine:
    if isinstance(arg, RVar) or (isinstance(arg, Affine) and isinstance(arg.var, RVar)):
        raise CompileError(f"{arg.name if isinstance(arg, RVar) else arg.var.name} is read "
                           "only in a scatter's window (x*s + r.x + b)")
    if isinstance(arg, Var):
        return arg._aff()
    if isinstance(arg, Affine):
        return arg.check()
    raise CompileError(f"a func argument must be a Var or an affine form of one, not {arg!r}")


@dataclass(eq=False)
class Call(Expr):
    """The value of *func* at ``(x, y) = (ax, ay)`` (channel *c* of a multi-channel
    input)."""

    func: Func | ImageParam
    ax: Affine
    ay: Affine
    c: Var | int | None = None

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.func.dtype


@dataclass(eq=False)
class Call3(Expr):
    """A read of a grid ``g[x, y, z, c]``: each of *ax*, *ay*, *az* is an affine form of the
    consumer's grid variable (a stencil) or an INT32 expression (a data-dependent
    cell); *c* a channel (the consumer's channel variable or a constant)."""

    func: Func
    ax: Affine | Expr
    ay: Affine | Expr
    az: Affine | Expr
    c: Var | int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.func.dtype

    def kids(self) -> tuple:
        return tuple(a for a in (self.ax, self.ay, self.az) if isinstance(a, Expr))


@dataclass(eq=False)
class Coord(Expr):
    """The column (``var`` = the func's ``x``) or row (``y``) of the pixel computed, as an
    INT32 value."""

    var: Var
    dtype: str = INT32


def coord(v: Var) -> Coord:
    """The value of the pure variable *v* (a pixel's column or row) as an INT32 expression."""
    if not isinstance(v, Var) or isinstance(v, RVar):
        raise CompileError(f"coord takes a func's pure variable, not {v!r}")
    return Coord(v)


@dataclass(eq=False)
class WCall(Expr):
    """A read of an input at a scatter's window pixel ``(wx, wy)`` (clamped to the image)."""

    func: ImageParam
    wx: Window
    wy: Window

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.func.dtype


@dataclass(eq=False)
class _GridBucket:
    """``g[x, y, zi]`` on the right of a scatter update."""

    func: Func
    key: tuple

    def __add__(self, values):
        if not isinstance(values, tuple | list) or not values:
            raise CompileError(f"{self.func.name}[x, y, zi] += (v0, v1, ...): the increment "
                               "is a tuple of one value per channel")
        return _GridInc(self, tuple(lift(v) for v in values))


@dataclass(eq=False)
class _GridInc:
    bucket: _GridBucket
    values: tuple


# -- funcs --------------------------------------------------------------------------

@dataclass(frozen=True)
class RDom:
    """A reduction domain: every pixel ``(r.x, r.y)`` of an input image."""

    image: ImageParam

    @property
    def x(self) -> Var:
        return Var(f"{self.image.name}.rx")

    @property
    def y(self) -> Var:
        return Var(f"{self.image.name}.ry")


@dataclass(eq=False)
class _Bucket(Expr):
    """``f[index]`` on the right of an update: the current value of a bucket."""

    func: Func
    index: Call
    dtype: str = INT32


@dataclass(eq=False)
class ImageParam:
    """An input image: ``(rows, cols)`` of FP32 or INT32 values, or ``(rows, cols,
    channels)`` read as ``img[x, y, c]`` with a constant channel ``c`` (each channel is
    a plane of its own, laid out like a gray image)."""

    name: str
    dtype: str = FP32
    channels: int = 0

    def __getitem__(self, key) -> Call:
        if self.channels:
            if len(key) != 3 or (isinstance(key[2], int) and
                                 not 0 <= key[2] < self.channels):
                raise CompileError(f"{self.name} has {self.channels} channels: read it as "
                                   f"{self.name}[x, y, c] with the consumer's channel "
                                   f"variable or a constant in 0..{self.channels - 1}")
            return Call(self, _affine(key[0]), _affine(key[1]), _channel(self.name, key[2]))
        if len(key) != 2:
            raise CompileError(f"{self.name} is a 2-D image: read it as {self.name}[x, y]")
        ax, ay = key
        if isinstance(ax, Window) or isinstance(ay, Window):
            if not (isinstance(ax, Window) and isinstance(ay, Window)):
                raise CompileError(f"{self.name}[x*s + r.x + b, y*s + r.y + b]: a window read "
                                   "names the RBox in both coordinates")
            return WCall(self, ax, ay)
        return Call(self, _affine(ax), _affine(ay))


@dataclass
class Schedule:
    root: bool = False
    tile: tuple[int, int] | None = None
    vector: int = 1
    load_pgs: bool = False
    replicate: bool = False


@dataclass(eq=False)
class Func:
    """A stage of the pipeline: ``f[x, y] = expr``."""

    name: str
    x: Var | None = None
    y: Var | None = None
    expr: Expr | None = None
    schedule: Schedule = field(default_factory=Schedule)
    #: ``(image, increment)`` of a histogram update ``f[image(r.x, r.y)] += increment``
    update: tuple | None = None
    buckets: int = 0
    #: the channel variable of ``f[x, y, c]`` and the number of channels (``bound``)
    c: Var | None = None
    channels: int = 0
    #: the third variable of a grid ``g[x, y, z, c]`` and the ``(lo, n)`` bounds of x, y, z
    z: Var | None = None
    box: dict = field(default_factory=dict)

    @property
    def dtype(self) -> str:
        if self.expr is None:
            raise CompileError(f"func {self.name} is used before it is defined")
        return self.expr.dtype

    def __setitem__(self, key, value) -> None:
        if isinstance(key, Var):                 # f[x] = 0: a 1-D func of buckets
            v = lift(value, INT32)
            if not (isinstance(v, Const) and v.value == 0 and v.dtype == INT32):
                raise CompileError(f"{self.name}[x] = ...: a 1-D func starts as the integer 0 "
                                   "(the buckets of a histogram)")
            self.x, self.expr = key, v
            return
        if isinstance(key, Call):                # f[in(r.x, r.y)] += k: a histogram
            if not (isinstance(value, Bin) and value.op == "+" and
                    isinstance(value.a, _Bucket) and value.a.func is self and
                    isinstance(value.b, Const) and value.b.dtype == INT32):
                raise CompileError(f"{self.name}[in(r.x, r.y)] takes only += an integer")
            img = key.func
            if not isinstance(img, ImageParam) or img.dtype != INT32 or \
                    (key.ax.var, key.ay.var) != (RDom(img).x, RDom(img).y) or \
                    (key.ax.a, key.ax.b, key.ax.d, key.ay.a, key.ay.b, key.ay.d) != (1, 0, 1) * 2:
                raise CompileError(f"{self.name}[...] += k: the index must be an INT32 input "
                                   "at (r.x, r.y) of an RDom over it")
            if self.expr is None or self.y is not None:
                raise CompileError(f"define {self.name}[x] = 0 before its update")
            self.update = (img, int(value.b.value))
            return
        if isinstance(value, _GridInc):          # g[x, y, zi] += (v0, v1, ...)
            self._scatter(key, value)
            return
        if len(key) == 4:                        # g[x, y, z, c] = 0: a grid
            x, y, z, c = key
            if not all(isinstance(v, Var) for v in key) or len(set(key)) != 4:
                raise CompileError(f"{self.name}[x, y, z, c] = ...: the left side takes four "
                                   "distinct Vars")
            self.z, self.c = z, c
            key = (x, y)
        if len(key) == 3:                        # f[x, y, c]: channels
            x, y, c = key
            if not isinstance(c, Var) or c in (x, y):
                raise CompileError(f"{self.name}[x, y, c] = ...: the left side takes three "
                                   "distinct Vars")
            self.c = c
        else:
            x, y = key
        if not (isinstance(x, Var) and isinstance(y, Var)) or x == y:
            raise CompileError(f"{self.name}[x, y] = ...: the left side takes two distinct Vars")
        if self.expr is not None:
            raise CompileError(f"func {self.name} is defined twice")
        self.x, self.y, self.expr = x, y, lift(value)

    def _scatter(self, key, inc: _GridInc) -> None:
        if inc.bucket.func is not self or inc.bucket.key is not key:
            raise CompileError(f"{self.name}[x, y, zi] += ...: add to the same cell")
        x, y, zi = key
        if self.z is None or (x, y) != (self.x, self.y):
            raise CompileError(f"{self.name}[x, y, zi] += ...: a scatter updates a grid "
                               f"g[x, y, z, c] at its own x, y and a computed bin zi")
        if not (isinstance(self.expr, Const) and self.expr.value == 0):
            raise CompileError(f"define {self.name}[x, y, z, c] = 0.0 before its scatter")
        zi = lift(zi, INT32)
        if zi.dtype != INT32:
            raise CompileError(f"{self.name}[x, y, zi]: the bin zi must be INT32 (cast it)")
        if self.update is not None:
            raise CompileError(f"{self.name} has one scatter update")
        self.update = ("scatter", zi, inc.values)

    def __getitem__(self, key) -> Call:
        if isinstance(key, Call):
            return _Bucket(self, key)
        if self.z is not None:
            if len(key) == 3:
                return _GridBucket(self, key)
            if len(key) != 4:
                raise CompileError(f"{self.name} is a grid: read it as {self.name}[x, y, z, c]")
            args = []
            for a in key[:3]:
                if isinstance(a, Var | Affine):
                    args.append(_affine(a))
                else:
                    e = lift(a, INT32)
                    if e.dtype != INT32:
                        raise CompileError(f"{self.name}[...]: a computed cell index must be "
                                           "INT32 (cast it)")
                    args.append(e)
            return Call3(self, *args, _channel(self.name, key[3]))
        if len(key) == 3:
            return Call(self, _affine(key[0]), _affine(key[1]), _channel(self.name, key[2]))
        ax, ay = key
        return Call(self, _affine(ax), _affine(ay))

    def bound(self, x: Var, lo: int, n: int) -> Func:
        """The buckets ``lo <= x < lo + n`` of a 1-D func, or the channels ``0 <= c < n``
        of a func ``f[x, y, c]``."""
        if self.c is not None and x == self.c:
            if lo != 0 or not 1 <= n <= 64:
                raise CompileError(f"bound({self.name}, {x.name}): channels 0..n-1, n <= 64")
            self.channels = int(n)
            return self
        if self.z is not None:
            if x not in (self.x, self.y, self.z) or not 1 <= n <= 4096:
                raise CompileError(f"bound({self.name}, {x.name}): one of its variables "
                                   f"{self.x.name}, {self.y.name}, {self.z.name}, "
                                   f"{self.c.name}, 1 to 4096 cells")
            self.box[x.name] = (int(lo), int(n))
            return self
        if x != self.x or lo != 0 or not 1 <= n <= 4096:
            raise CompileError(f"bound({self.name}): buckets 0..n-1 of its variable, n <= 4096")
        self.buckets = int(n)
        return self

    # -- schedule (Sec. V-A) ------------------------------------------------------

    def compute_root(self) -> Func:
        """Compute the whole func into the DRAM banks before its consumers run."""
        self.schedule.root = True
        return self

    def ipim_tile(self, x: Var, y: Var, xi: Var, yi: Var, tx: int, ty: int) -> Func:
        """Partition the func into ``tx x ty`` tiles spread over the PEs of every vault."""
        if (x, y) != (self.x, self.y):
            raise CompileError(f"ipim_tile of {self.name} names {x.name}, {y.name}; its "
                               f"variables are {self.x.name}, {self.y.name}")
        if tx < 1 or ty < 1:
            raise CompileError(f"ipim_tile sizes must be positive, not {tx}x{ty}")
        if self.schedule.replicate:
            raise CompileError(f"{self.name} is replicated by ipim_replicate; a func is "
                               "tiled or replicated, not both")
        self.schedule.tile = (int(tx), int(ty))
        return self

    def ipim_replicate(self) -> Func:
        """Compute the whole func in every PE, one pixel per vector: its channels (up to
        four) in the lanes for ``f[x, y, c]`` (Halide's ``vectorize(c)``; a read at a
        constant channel broadcasts that lane), the four lanes alike for ``f[x, y]``;
        for a level of a pyramid too small to split into bands of rows and strips of
        columns. A tiled consumer reads it at its own size only (``x + b``,
        ``y + b``); the compiler copies each PE's band out of it, and copies a tiled
        producer that it reads into every PE first (``sync``, ``req``, VSM)."""
        if self.schedule.tile is not None:
            raise CompileError(f"{self.name} is tiled by ipim_tile; a func is tiled or "
                               "replicated, not both")
        self.schedule.replicate = True
        return self

    def load_pgs(self, *_m) -> Func:
        """Share the inputs of neighbouring tiles through the PG scratchpad."""
        self.schedule.load_pgs = True
        return self

    def vectorize(self, xi: Var, n: int) -> Func:
        """Compute ``n`` columns per SIMD instruction (the PE's 4 lanes)."""
        if n != 4:
            raise CompileError(f"vectorize({xi.name}, {n}): the SIMD unit has 4 lanes")
        self.schedule.vector = 4
        return self


class Stack(Func):
    """A func ``f[x, y, c]`` whose channel ``c`` is the tiled func ``parts[c]`` (no
    channels of its own): made by :func:`stack`."""

    parts: list


def stack(name: str, funcs) -> Stack:
    """One func with ``len(funcs)`` channels, channel ``c`` being ``funcs[c]``: tiled
    funcs of one type without channels, each with its own definition. It is read like
    any func with channels (``s[x, y, c]``, ``s[x, y, 2]``); a replicated consumer
    copies up to four of them into its lanes."""
    funcs = list(funcs)
    if not 1 <= len(funcs) <= 64 or not all(isinstance(f, Func) for f in funcs):
        raise CompileError(f"stack {name}: give 1 to 64 funcs")
    for f in funcs:
        if f.expr is None or f.c is not None or f.z is not None or f.update is not None:
            raise CompileError(f"stack {name}: {f.name} must be a defined func f[x, y] "
                               "without channels")
        if f.schedule.replicate:
            raise CompileError(f"stack {name}: {f.name} is replicated; stack tiled funcs")
        f.compute_root()
    if len({f.dtype for f in funcs}) != 1:
        raise CompileError(f"stack {name}: the funcs must have one type")
    s = Stack(name, funcs[0].x, funcs[0].y, funcs[0].expr)
    s.parts = funcs
    s.c = Var(f"{name}.c")
    s.channels = len(funcs)
    s.schedule.root = True
    return s


@dataclass(eq=False)
class Table:
    """A constant FP32 table of *values* (1-D) that the host places in every PE's bank,
    four entries per vector; read by :meth:`lookup`."""

    name: str
    values: np.ndarray

    def __post_init__(self):
        v = np.asarray(self.values)
        if v.ndim != 1 or not 1 <= v.size <= 1 << 20:
            raise CompileError(f"table {self.name}: give a 1-D array of 1 to 2**20 values")
        self.values = v.astype(np.float32)

    def lookup(self, index, offset: int = 0) -> Lookup:
        """Entry ``index + offset`` (*index* an INT32 expression whose values keep the entry
        within the table, as the pipeline's clamps make it; *offset* an int)."""
        i = lift(index, INT32)
        if i.dtype != INT32:
            raise CompileError(f"{self.name}.lookup: the index must be INT32 (cast it)")
        if offset % 4:      # the lanes of one index serve every lookup at offsets 4k apart
            i, offset = i + (offset % 4), offset - offset % 4
        return Lookup(self, i, int(offset))


@dataclass(eq=False)
class Lookup(Expr):
    """Entry ``index + offset`` of *table* (``offset`` a multiple of 4)."""

    table: Table
    index: Expr
    offset: int
    dtype: str = FP32

    def kids(self) -> tuple:
        return (self.index,)


@dataclass(eq=False)
class Parity(Expr):
    """*even* where the func's variable *var* is even, *odd* where it is odd."""

    var: Var
    even: Expr
    odd: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.even.dtype

    def kids(self) -> tuple:
        return (self.even, self.odd)


def by_parity(v: Var, even, odd) -> Parity:
    """*even* at even values of the pure variable *v*, *odd* at odd ones."""
    if not isinstance(v, Var) or isinstance(v, RVar):
        raise CompileError(f"by_parity takes a func's pure variable, not {v!r}")
    a = lift(even)
    b = lift(odd, a.dtype)
    if a.dtype != b.dtype:
        raise CompileError("by_parity: the even and odd values must have one type")
    return Parity(v, a, b)


def children(e) -> tuple:
    """The operands of *e*, in evaluation order."""
    if isinstance(e, Bin):
        return (e.a, e.b)
    if isinstance(e, Select):
        return (e.cond.a, e.cond.b, e.a, e.b)
    if isinstance(e, Cast | Reinterpret):
        return (e.a,)
    kids = getattr(e, "kids", None)
    return kids() if kids is not None else ()


def nodes(e):
    """Every node of *e*, depth first, a shared node once per occurrence."""
    yield e
    for c in children(e):
        yield from nodes(c)
