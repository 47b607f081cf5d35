"""Lowering a :mod:`~pimforge.sim.ipim.lang` pipeline to SIMB programs (Sec. V-B).

Data layout
-----------
Every ``compute_root`` func and every input image is an *array* in each PE's bank.
``ipim_tile`` spreads the image over the PEs of every vault in bands of rows: PE
``g`` (``g = vault * pes + pg * pes_per_pg + pe``, so that neighbouring bands sit
in one PG whenever they can) holds rows ``[g*R, (g+1)*R)``, ``R = ceil(H / PEs)``
for an output (and its producers' scaled by the resampling between them): the last
band may be shorter, its rows beyond ``H`` copies of row ``H - 1`` (a small kernel of
that PE's vault makes them, before and after the halo exchange), and the PEs after
it hold no rows. ``vectorize(xi, 4)``
gives the four SIMD lanes four strips of the band: lane ``j`` of vector ``k`` holds
column ``j*S + k`` (``S = W/4``), so every stencil tap ``x + b`` and every
resampling ``2x + b`` or ``(x + b) // 2`` reads whole, aligned vectors (the ISA has
no lane shuffle; Table I), and a strip's neighbour columns are in the same lane of
the neighbouring vectors. Each array keeps a halo around its ``R x S`` vectors, as
wide as its consumers read beyond it: element ``(r, k)`` is at
``base + (r + hy_top) * pitch + k + hx_left`` of every PE's bank.

Kernels
-------
A root func is computed by three kernels, each a loop nest whose body is one
basic block (:mod:`pimforge.sim.ipim.backend` allocates its registers and reorders
it):

1. *compute*: rows of the band (outer loop, CtrlRF counter) by segments of ``U``
   vectors (inner loop); each load or store of the body has an AddrRF pointer (the
   ISA's indirect address is the register's value, with no offset), advanced by
   ``calc_arf`` per iteration. Inlined funcs are expanded in place; common
   subexpressions and repeated taps are evaluated once per body.
2. *x halo*: the left halo of lane ``j`` is the right edge of lane ``j - 1`` and
   so on, moved between lanes with ``comp`` in scalar-vector mode; lane 0's left
   and lane 3's right halo clamp to the image's edge columns.
3. *y halo* (the halo exchange of ``load_pgs``): the rows above and below a band
   come from the neighbouring PEs: through the PGSM within a PG (``ld_pgsm`` by
   the owner, ``st_pgsm`` by the neighbour), through the VSM between PGs of a
   vault, and by ``req`` between vaults, between two ``sync`` barriers. The first
   and last band clamp to the image's top and bottom rows. A row wider than the
   PGSM or VSM can stage moves in chunks of columns, one exchange each.

Reads beyond a func's domain therefore clamp to its edge, for inputs and
intermediate funcs alike.

Passes
------
This module supplies the bodies of three of the compiler's passes
(:mod:`pimforge.sim.ipim.passes`): ``graph`` (:func:`build_graph`), ``layout``
(:func:`lay_out`, with the bounds :mod:`pimforge.sim.ipim.bounds` infers) and
``select`` (:func:`select`: the kernels above as :class:`~.emit.VaultCode`, whose basic
blocks the backend passes schedule, allocate and reorder);
:func:`pimforge.sim.ipim.passes.compile_pipeline` runs them all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from pimforge.rtl.ipim.isa import (
    LANES,
    AluOp,
    DType,
    Instr,
    Mode,
    Opcode,
)

from .backend import DataRFFull, Options, VInstr, code_len
from .bounds import Bounds, needs_even
from .emit import (
    ArrayRef,
    Builder,
    ByParity,
    Evaluator,
    GridRead,
    Kernel,
    TableRead,
    VaultCode,
    array_refs,
    assemble,
    check_fits,
    count_consts,
    fill,
    loads_first,
    needs_consts,
    reads,
    trial_code,
)
from .lang import (
    FP32,
    INT32,
    Affine,
    Bin,
    Call,
    Call3,
    Cast,
    Cmp,
    CompileError,
    Const,
    Coord,
    Expr,
    Func,
    ImageParam,
    Lookup,
    Parity,
    Reinterpret,
    Select,
    Stack,
    Table,
    WCall,
    nodes,
)
from .layout import ALL_LANES, Array, Program, gather, place
from .sliding import plan as slide_plan

__all__ = ["Array", "Graph", "Program", "build_graph", "constants", "gather", "lay_out",
           "place", "select", "unroll_budgets"]


# -- the pipeline graph ------------------------------------------------------------

def _compose(outer: tuple[int, int, int], inner: Affine) -> tuple[int, int, int]:
    a1, b1, d1 = outer
    a2, b2, d2 = inner.a, inner.b, inner.d
    if d1 == 1:
        a, b, d = a2 * a1, a2 * b1 + b2, d2
    elif a2 == 1 and d2 == 1:
        a, b, d = a1, b1 + b2 * d1, d1
    else:
        raise CompileError(f"a resampled func ({inner.a}x+{inner.b})//{inner.d} reads another "
                           "resampled func inline: schedule the producer compute_root()")
    if a == d and a > 1:
        a, b, d = 1, b // d, 1
    if a not in (1, 2) or d not in (1, 2):
        raise CompileError(f"coordinate ({a}x + {b}) // {d} after inlining: schedule the "
                           "producer compute_root()")
    return a, b, d


def _fits(have: int, want: int, a: int) -> bool:
    """A producer of *have* pixels serves a read at ``a*x`` of *want*: equal, or for
    ``2*x`` one fewer (an odd pyramid level: the last read clamps)."""
    return have == want or (a == 2 and have == want - 1)


_LANES = "lanes"        # the channel context of a replicated func with channels in lanes


class Graph:
    """The root arrays of a pipeline, in an order that computes producers first, with
    their bodies resolved (inlined funcs expanded, reads made :class:`ArrayRef` s). A func
    ``f[x, y, c]`` is one array per channel when tiled, and one array with the channels
    in its lanes when replicated."""

    def __init__(self, outs: list[Func], W: int, H: int, npe: int):
        self.npe = npe
        self.arrays: dict = {}
        self.order: list[Array] = []
        self.bodies: dict[int, Expr] = {}
        self._visiting: set = set()
        self._memo: dict = {}
        self._rep = False            # the layout of the func whose body is resolved
        self._c: int | str | None = None     # and its channel (or _LANES)
        self._g3: Func | None = None         # the grid whose body is resolved
        self._xy: tuple = ()                 # the pure variables of the func resolved
        self.W0, self.H0 = W, H
        self._zbox: tuple | None = None
        #: scatter grid (id of its array) -> (bin, values, window x, window y, input twin)
        self.scatters: dict[int, tuple] = {}
        self.outs: list[Array] = []
        # the resolution recurses through every stage (a consumer sizes its producers):
        # a chain of many stages of long sums needs more than Python's default depth
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20_000))
        try:
            for o in outs:
                if o.schedule.replicate:
                    raise CompileError(f"output {o.name} is replicated; an output is tiled")
                o.schedule.root = True
                chans = range(_channels(o)) if o.c is not None else [None]
                self.outs += [self._array(o, W, H, ch) for ch in chans]
        finally:
            sys.setrecursionlimit(limit)
        self.out = self.outs[0]

    def _array(self, f: Func | ImageParam, W: int, H: int, ch=None,
               ra: tuple[int, int] = (1, 1)) -> Array:
        key = (id(f), ch)
        a = self.arrays.get(key)
        if a is not None:
            if not (_fits(a.W, W, ra[0]) and _fits(a.H, H, ra[1])):
                raise CompileError(f"{f.name} is read at two resolutions ({a.W}x{a.H} and "
                                   f"{W}x{H}); give each its own func")
            return a
        if isinstance(f, Stack):
            if not isinstance(ch, int):
                raise CompileError(f"stack {f.name} is read by channel")
            return self._array(f.parts[ch], W, H, None, ra)
        rep = isinstance(f, Func) and f.schedule.replicate
        if W <= 0 or H <= 0 or (not rep and W % LANES):
            raise CompileError(f"{f.name} is {W}x{H}: the width must be a multiple of "
                               f"{LANES} (one strip of columns per SIMD lane), or schedule "
                               "it ipim_replicate()")
        if key in self._visiting:
            raise CompileError(f"func {f.name} depends on itself")
        name = f.name if ch in (None, _LANES) else f"{f.name}.{ch}"
        a = Array(name, f.dtype, W, H, H if rep else -(-H // self.npe),
                  func=f if isinstance(f, Func) else None, rep=rep,
                  kind="func" if isinstance(f, Func) else "input",
                  channel=ch if isinstance(ch, int) else None)
        self.arrays[key] = a
        if isinstance(f, Func):
            self._visiting.add(key)
            outer = self._rep, self._c, self._xy
            self._rep, self._c, self._xy = rep, ch, (f.x, f.y)
            body = self._resolve(f.expr, (1, 0, 1), (1, 0, 1), W, H)
            self._rep, self._c, self._xy = outer
            self._visiting.discard(key)
            self.bodies[id(a)] = body
            if rep:     # a resampling kernel makes two columns (rows) per step
                refs = array_refs(body)
                a.px = W % 2 * any(r.ax[2] == 2 for r in refs)
                a.R = H + H % 2 * any(r.ay[2] == 2 for r in refs)
        self.order.append(a)
        return a

    def _channel_of(self, e: Call):
        """The producer channel a read names: the consumer's (``c``) or a constant."""
        f = e.func
        nch = _channels(f)
        if e.c is None:
            if nch:
                raise CompileError(f"{f.name} has channels: read it as {f.name}[x, y, c]")
            return None
        if not nch:
            raise CompileError(f"{f.name} has no channels: read it as {f.name}[x, y]")
        if isinstance(e.c, int):
            if e.c >= nch:
                raise CompileError(f"{f.name} has {nch} channels, not channel {e.c}")
            return e.c
        if self._c is None:
            raise CompileError(f"{f.name}[x, y, {e.c.name}] is read by a func without "
                               "channels: read a constant channel")
        return self._c

    def _planes(self, f, W: int, H: int, ra) -> list[Array]:
        return [self._array(f, W, H, c, ra) for c in range(_channels(f))]

    def _read(self, e: Call, ax, ay, W: int, H: int) -> ArrayRef:
        """A read of a root func or an input, in the consumer's layout."""
        f = e.func
        Wp, Hp = -(-W * ax[0] // ax[2]), -(-H * ay[0] // ay[2])   # x//2: ceil(W/2)
        ra = (ax[0], ay[0])
        ch = self._channel_of(e)
        prep = isinstance(f, Func) and f.schedule.replicate
        if not prep and not self._rep and (W * ax[0] % ax[2] or H * ay[0] % ay[2]):
            raise CompileError(f"{f.name} would be {W * ax[0] / ax[2]}x"
                               f"{H * ay[0] / ay[2]}: choose an even size")
        lanes = prep and ch is not None
        if self._rep:
            if ch is None:                              # a func without channels
                p = self._array(f, Wp, Hp, None, ra)
                return ArrayRef(p if p.rep else self._gather_twin([p]), ax, ay)
            if lanes:
                p = self._array(f, Wp, Hp, _LANES, ra)
                return ArrayRef(p, ax, ay, None if ch == _LANES else ch)
            t = self._gather_twin(self._planes(f, Wp, Hp, ra))
            return ArrayRef(t, ax, ay, None if ch == _LANES else ch)
        if not prep:
            return ArrayRef(self._array(f, Wp, Hp, ch, ra), ax, ay)
        if (ax[0], ax[2], ay[0], ay[2]) != (1, 1, 1, 1):
            raise CompileError(f"a tiled func reads the replicated {f.name} resampled: "
                               "schedule a replicated stage of the tiled func's size "
                               "between them (the upsampling)")
        p = self._array(f, Wp, Hp, _LANES if lanes else None, ra)
        return ArrayRef(self._extract_twin(p, ch), ax, ay)

    def _gather_twin(self, planes: list[Array]) -> Array:
        """The tiled *planes* (one, or a func's channels) replicated in every PE, the
        channels in the lanes (a copy made once)."""
        key = ("gather",) + tuple(id(p) for p in planes)
        t = self.arrays.get(key)
        if t is None:
            p = planes[0]
            if len(planes) > LANES:
                raise CompileError(f"{p.func.name if p.func else p.name} has "
                                   f"{len(planes)} channels; a replicated copy holds "
                                   f"{LANES}, one per lane")
            name = p.name if len(planes) == 1 else p.name.rsplit(".", 1)[0]
            t = Array(f"{name}@rep", p.dtype, p.W, p.H, p.H, func=p.func, rep=True,
                      kind="gather", srcs=list(planes))
            self.arrays[key] = t
            self.order.append(t)
        return t

    def _extract_twin(self, p: Array, ch) -> Array:
        """Each PE's band of channel *ch* of the replicated *p*; made once, for every
        channel of *p* at a time (one load of a pixel serves them all)."""
        key = ("extract", id(p), ch)
        t = self.arrays.get(key)
        if t is None:
            if p.W % LANES:
                raise CompileError(f"the replicated {p.name} is {p.W}x{p.H}, too small "
                                   "for a tiled consumer: replicate the consumer too")
            chans = [None] if ch is None else range(_channels(p.func))
            group: list[Array] = []
            for c in chans:
                name = p.name if c is None else f"{p.name}.{c}"
                tc = Array(f"{name}@tiled", p.dtype, p.W, p.H, -(-p.H // self.npe),
                           func=p.func, kind="extract", srcs=[p], channel=c, group=group)
                group.append(tc)
                self.arrays[("extract", id(p), c)] = tc
                self.order.append(tc)
            t = self.arrays[key]
        return t

    def _resolve(self, e: Expr, cx, cy, W: int, H: int) -> Expr:
        """*e* as read by a consumer of ``W x H`` at ``(cx, cy)`` (``(a, b, d)`` forms),
        with inlined funcs expanded and root ones made :class:`ArrayRef` s; each node once
        per context, so that a shared subexpression stays shared."""
        if isinstance(e, Const):
            return e
        key = (id(e), cx, cy, W, H, self._rep, self._c)
        hit = self._memo.get(key)
        if hit is not None:
            return hit[1]
        if isinstance(e, Call):
            r = self._call(e, cx, cy, W, H)
        elif isinstance(e, Call3):
            r = self._call3(e, cx, cy, W, H)
        elif isinstance(e, Coord):
            r = self._coord(e, cx, cy, W, H)
        elif isinstance(e, WCall):
            raise CompileError(f"{e.func.name}[x*s + r.x + b, ...] is read only by a scatter's "
                               "bin and values")
        elif isinstance(e, Bin):
            r = Bin(e.op, self._resolve(e.a, cx, cy, W, H), self._resolve(e.b, cx, cy, W, H))
        elif isinstance(e, Select):
            c = Cmp(e.cond.op, self._resolve(e.cond.a, cx, cy, W, H),
                    self._resolve(e.cond.b, cx, cy, W, H))
            r = Select(c, self._resolve(e.a, cx, cy, W, H), self._resolve(e.b, cx, cy, W, H))
        elif isinstance(e, Cast):
            r = Cast(e.dtype, self._resolve(e.a, cx, cy, W, H))
        elif isinstance(e, Lookup):
            r = TableRead(self._table(e.table), self._resolve(e.index, cx, cy, W, H), e.offset)
        elif isinstance(e, Parity):
            if e.var not in self._xy:
                raise CompileError(f"by_parity({e.var.name}, ...): not a variable of the func "
                                   "that reads it")
            axis = self._xy.index(e.var)
            if (cx if axis == 0 else cy) != (1, 0, 1):
                raise CompileError(f"by_parity({e.var.name}, ...) in a func inlined at another "
                                   "coordinate: schedule it compute_root()")
            r = ByParity(axis, self._resolve(e.even, cx, cy, W, H),
                     self._resolve(e.odd, cx, cy, W, H))
        elif isinstance(e, Reinterpret):
            r = Reinterpret(e.dtype, self._resolve(e.a, cx, cy, W, H))
        else:
            raise CompileError(f"cannot lower {type(e).__name__}")
        self._memo[key] = (e, r)      # e kept alive: its id stays its own
        return r

    def _call(self, e: Call, cx, cy, W: int, H: int) -> Expr:
        """A call: an inlined func expanded, or a read of a root func or an input."""
        ax, ay = _compose(cx, e.ax), _compose(cy, e.ay)
        f = e.func
        if isinstance(f, Func) and not f.schedule.root:
            if f.expr is None:
                raise CompileError(f"func {f.name} is used before it is defined")
            ch = self._channel_of(e)
            if id(f) in self._visiting:
                raise CompileError(f"func {f.name} depends on itself")
            self._visiting.add(id(f))
            outer = self._c, self._xy
            if ch is not None:      # its channel variable is the channel read
                self._c = ch
            self._xy = (f.x, f.y)
            r = self._resolve(f.expr, ax, ay, W, H)
            self._c, self._xy = outer
            self._visiting.discard(id(f))
            return r
        return self._read(e, ax, ay, W, H)


    def _table(self, t: Table) -> Array:
        """A constant table, four entries per vector, in every PE (placed by the host)."""
        key = ("table", id(t))
        a = self.arrays.get(key)
        if a is None:
            n = -(-t.values.size // LANES)
            a = Array(t.name, FP32, n, 1, 1, rep=True, kind="const", data=t.values)
            self.arrays[key] = a
            self.order.append(a)
        return a

    # -- grids --------------------------------------------------------------------

    def _coord(self, e: Coord, cx, cy, W: int, H: int) -> ArrayRef:
        """A pixel's column or row: a read of an INT32 array that holds it."""
        if self._rep or self._g3 is not None:
            raise CompileError("coord(x) is a value of a tiled func (a pixel's column or row)")
        if e.var not in self._xy:
            raise CompileError(f"coord({e.var.name}): not a variable of the func that reads it")
        axis = self._xy.index(e.var)
        if (cx if axis == 0 else cy) != (1, 0, 1):
            raise CompileError(f"coord({e.var.name}) of a func inlined at another coordinate: "
                               "schedule it compute_root()")
        key = ("coord", axis, W, H)
        a = self.arrays.get(key)
        if a is None:
            a = Array(f"coord.{'xy'[axis]}", INT32, W, H, -(-H // self.npe), kind="coord",
                      channel=axis)
            self.arrays[key] = a
            self.order.append(a)
        return ArrayRef(a, (1, 0, 1), (1, 0, 1))

    def _box(self, f: Func) -> tuple:
        for v in (f.x, f.y, f.z):
            if v.name not in f.box:
                raise CompileError(f"give grid {f.name}'s cells with bound({v.name}, lo, n)")
        (xlo, nx), (ylo, ny), (zlo, nz) = (f.box[v.name] for v in (f.x, f.y, f.z))
        if self._zbox is None:
            self._zbox = (zlo, nz)
        elif self._zbox != (zlo, nz):
            raise CompileError(f"grid {f.name} has z cells {zlo}..{zlo + nz - 1} but another "
                               f"grid of the pipeline {self._zbox[0]}.."
                               f"{sum(self._zbox) - 1}: give every grid one z bound")
        return xlo, nx, ylo, ny, zlo, nz

    def _grid(self, f: Func) -> Array:
        """A grid ``f[x, y, z, c]``, replicated in every PE, a cell per vector with the
        channels in the lanes; a scatter's or a stencil of another grid."""
        key = (id(f), "grid")
        a = self.arrays.get(key)
        if a is not None:
            return a
        if not (f.schedule.root and f.schedule.replicate):
            raise CompileError(f"schedule grid {f.name} compute_root().ipim_replicate(): a "
                               "grid is held whole in every PE")
        if not 1 <= _channels(f) <= LANES:
            raise CompileError(f"grid {f.name} has {_channels(f)} channels; a cell holds "
                               f"{LANES}, one per lane")
        if key in self._visiting:
            raise CompileError(f"func {f.name} depends on itself")
        box = self._box(f)
        xlo, nx, ylo, ny, zlo, nz = box
        kind = "scatter" if f.update is not None else "func"
        a = Array(f.name, f.dtype, nx * nz, ny, ny, func=f, rep=True, kind=kind, box=box)
        self.arrays[key] = a
        self._visiting.add(key)
        if kind == "scatter":
            self._scatter(f, a)
        else:
            outer = self._rep, self._c, self._g3
            self._rep, self._c, self._g3 = True, _LANES, f
            self.bodies[id(a)] = self._resolve(f.expr, (1, 0, 1), (1, 0, 1), a.W, a.H)
            self._rep, self._c, self._g3 = outer
        self._visiting.discard(key)
        self.order.append(a)
        return a

    def _scatter(self, f: Func, a: Array) -> None:
        """The inputs of a scatter: the input replicated in every PE, and the table of
        the clamped columns of each cell's window."""
        _, zi, values = f.update
        if len(values) != _channels(f):
            raise CompileError(f"{f.name}'s scatter adds {len(values)} values to a grid of "
                               f"{_channels(f)} channels")
        reads = [n for e in (zi, *values) for n in nodes(e)]
        if any(isinstance(n, Call | Call3 | Coord) for n in reads):
            raise CompileError(f"{f.name}'s scatter reads only its window of the input")
        win = {(n.func.name, n.wx, n.wy) for n in reads if isinstance(n, WCall)}
        if len(win) != 1:
            raise CompileError(f"{f.name}'s scatter must read one input at one window "
                               f"pixel (x*s + r.x + b, y*s + r.y + b), not {len(win)}")
        img = next(n.func for n in reads if isinstance(n, WCall))
        _, wx, wy = win.pop()
        if (wx.cell.var, wy.cell.var) != (f.x, f.y) or wx.r.name == wy.r.name:
            raise CompileError(f"{f.name}'s window is (x*s + r.x + b, y*s + r.y + b) with "
                               "its own x, y and the two variables of one RBox")
        sy = wy.cell.a
        if wy.r.extent != sy or sy & (sy - 1):
            raise CompileError(f"{f.name}'s window is {wy.r.extent} rows at a stride of {sy}: "
                               "the rows of the window must tile the image (height = stride, "
                               "a power of two)")
        if img.dtype != FP32 or img.channels:
            raise CompileError(f"{f.name} scatters a gray FP32 input")
        src = self._array(img, self.W0, self.H0)
        twin = src if src.rep else self._gather_twin([src])
        q = -(-wx.r.extent // LANES)
        tbl = Array(f"{f.name}.cols", INT32, a.box[1] * q, 1, 1, rep=True, kind="table",
                    srcs=[twin])
        self.arrays[(id(f), "table")] = tbl
        self.order.append(tbl)
        a.srcs = [twin, tbl]
        self.scatters[id(a)] = (zi, values, wx, wy, twin, tbl)

    def _call3(self, e: Call3, cx, cy, W: int, H: int) -> Expr:
        """A read of a grid: a stencil of a grid's body (a :class:`ArrayRef` at a constant
        offset in the shared layout) or a data-dependent cell (:class:`GridRead`)."""
        p = self._grid(e.func)
        args = (e.ax, e.ay, e.az)
        if all(isinstance(v, Affine) for v in args):
            f = self._g3
            if f is None:
                raise CompileError(f"{p.name}[x + i, y + j, z + k, c] is a stencil of a grid; a "
                                   "tiled func reads a grid at computed cells (INT32 values)")
            if tuple(v.var for v in args) != (f.x, f.y, f.z) or \
                    any((v.a, v.d) != (1, 1) for v in args):
                raise CompileError(f"grid {f.name} reads {p.name} at (x + i, y + j, z + k) of "
                                   f"its own {f.x.name}, {f.y.name}, {f.z.name}")
            cb, pb = self._box(f), p.box
            col = (e.ax.b + cb[0] - pb[0]) * pb[5] + e.az.b
            row = e.ay.b + cb[2] - pb[2]
            lane = e.c if isinstance(e.c, int) else None
            if lane is not None and lane >= _channels(e.func):
                raise CompileError(f"{p.name} has {_channels(e.func)} channels, not {lane}")
            return ArrayRef(p, (1, col, 1), (1, row, 1), lane)
        if any(isinstance(v, Affine) for v in args):
            raise CompileError(f"{p.name}[ix, iy, iz, c]: give every cell index as an INT32 "
                               "value (coord(x) is a pixel's column) or none")
        if self._rep or self._g3 is not None:
            raise CompileError(f"a computed-cell read of {p.name} is made by a tiled func")
        if not isinstance(e.c, int) or e.c >= _channels(e.func):
            raise CompileError(f"{p.name}[ix, iy, iz, c]: read a constant channel "
                               f"0..{_channels(e.func) - 1}")
        ix, iy, iz = (self._resolve(v, cx, cy, W, H) for v in args)
        return GridRead(p, ix, iy, iz, e.c)


def _channels(f) -> int:
    """The channels of a func ``f[x, y, c]`` (its ``bound``) or an input; 0: none."""
    if isinstance(f, ImageParam):
        return f.channels
    if f.c is None:
        return 0
    if not f.channels:
        raise CompileError(f"give {f.name}'s channels with bound({f.c.name}, 0, n)")
    return f.channels


# -- the program builder -----------------------------------------------------------


# -- compute kernels -----------------------------------------------------------------


def _compute(b: Builder, arr: Array, body: Expr) -> None:
    need_even_x, need_even_y = needs_even(body)
    RU = 2 if need_even_y else 1
    if arr.R % RU:
        raise CompileError(f"{arr.name} has {arr.R} rows per PE; an upsampling stage needs "
                           "an even number: choose a taller image")
    if RU == 1 and not need_even_x and _sliding(b, arr, body):
        return
    last = None
    best = None             # compact: the shortest code of every unroll factor
    start, start_lru = list(b.prog), dict(b.lru)
    # with the loads first, else (a block whose loads alone crowd the DataRF) in place
    # (hoisting the loads is an ordering of the lowering: without reordering, Fig. 12's
    # baseline1 and baseline3, the block stays in the order the expression names it)
    tries = [(U, hoist) for U in ((4, 2, 1) if b.compact else (16, 8, 4, 2, 1))
             for hoist in ((True, False) if b.opts.reorder else (False,))]
    tries = [(U, hoist) for U, hoist in tries
             if not (arr.S % U or (need_even_x and U % 2))]

    def make(U: int, hoist: bool) -> Callable[[Kernel], list[VInstr]]:
        def mk(k: Kernel) -> list[VInstr]:
            ev = Evaluator(k, arr, U, RU)
            ev.count_refs(body)
            vals = []
            for rr in range(RU):
                for u in range(U):
                    v = ev.val(body, rr, u)
                    if v[0] == "p":      # a constant func: copy it
                        v = ("v", ev.comp(AluOp.ADD, INT32, v,
                                          ("p", b.const_reg[0])))
                    vals.append((rr, u, v))
            for rr, u, v in vals:
                p = k.ptr(arr.addr(rr, u), U, RU * arr.pitch, fresh=True)
                ev.emit(Instr(Opcode.ST_RF, dram=p, dram_ind=1, simb_mask=b.all),
                        drf=v[1])
            k.finish_steps(arr.S // U, arr.R // RU)
            if not hoist:
                return ev.block
            return loads_first(ev.block, k)
        return mk

    with b.trying():            # every form that fits, before any spills
        for U, hoist in tries:
            try:
                b.prog = list(start)
                if b.compact:
                    b.lru = dict(start_lru)
                b.kernel(arr.R // RU, arr.S // U, make(U, hoist))
                done = f"{arr.name}: compute {arr.R}x{arr.S} vectors, unroll {RU}x{U}"
                if not b.compact:
                    b.kernels_done.append(done)
                    return
                if best is None or b.pc() < code_len(best[0]):
                    best = (b.prog, b.lru, done)
            except CompileError as e:
                last = e
    b.prog = start
    if best is not None:
        b.prog, b.lru = best[0], best[1]
        b.kernels_done.append(best[2])
        return
    if isinstance(last, DataRFFull) and tries and b.may_spill():
        # no form fits the DataRF: the least unrolled, in the order the expression
        # names its values (the fewest live at once), with its values spilled
        U = min(U for U, _ in tries)
        b.prog, b.lru = list(start), dict(start_lru)
        n = b.spilled
        b.kernel(arr.R // RU, arr.S // U, make(U, False))
        b.kernels_done.append(f"{arr.name}: compute {arr.R}x{arr.S} vectors, unroll {RU}x{U}"
                              f"{', spilling' if b.spilled > n else ''}")
        return
    raise last or CompileError(f"{arr.name}: no unroll factor divides {arr.S} vectors")


def _sliding(b: Builder, arr: Array, body: Expr) -> bool:
    """The kernel as a sliding window down the rows (:mod:`.sliding`), where it runs as a
    software-pipelined loop: column strips of ``U`` vectors in the outer loop, a strip's
    rows in the inner one, the values a trip shares with the next kept in registers.
    Emits it and returns True, or emits nothing and returns False (a kernel whose code
    is unrolled, a body without shared values, warm-up trips above a quarter of the
    strip's rows, a window the DataRF cannot hold)."""
    if not (b.pipeline and b.opts.reorder and b.opts.slide) or b.compact or arr.R < 3:
        return False
    sp = slide_plan(body)
    # the warm-up trips compute no output: worth them only in a tall enough strip (the
    # 32-stage stencil chain at 64x64, four rows a PE and four warm-up trips, ran 36 %
    # slower with the window on ipim_small)
    if sp is None or 4 * sp.depth > arr.R:
        return False
    # the warm-up trips make every load of a trip, rows above the first output row: each
    # must stay within its array's halo (above it lie another array's words)
    if any(ref.ay[1] - sp.depth < -ref.arr.hyt for ref in sp.loaded(body)):
        return False
    with b.trying():            # a window that does not fit is not made: no spills
        return _slide(b, arr, body, sp)


def _slide(b: Builder, arr: Array, body: Expr, sp) -> bool:
    start, start_lru = list(b.prog), dict(b.lru)
    for U in (16, 8, 4, 2, 1):
        if arr.S % U:
            continue
        S = arr.S // U
        if b.unroll_budget:     # where the kernel's code would be unrolled, it stays so
            ev = Evaluator(Kernel(b), arr, U, 1)
            ev.count_refs(body)
            try:
                for u in range(U):
                    ev.val(body, 0, u)
            except CompileError:
                continue
            if b.unroll_budget >= arr.R * S * (len(ev.block) + U):
                break

        def mk(k: Kernel, U=U, S=S):
            ev = Evaluator(k, arr, U, 1, ymajor=True)
            ev.count_refs(body)
            ev.keep = sp.keep()
            reg = {(c, u): k.v() for c in sp.carried for u in range(U)}
            for (c, u), v in reg.items():
                for n in sp.carried[c]:
                    ev.memo[(id(n), 0, u)] = ("v", v)
            vals = [ev.val(body, 0, u) for u in range(U)]
            fresh = {(f, u): ev.val(n, 0, u) for f, n in sp.fresh.items() for u in range(U)}
            for u, v in enumerate(vals):
                if v[0] == "p":      # a constant func: copy it
                    v = ("v", ev.comp(AluOp.ADD, INT32, v, ("p", b.const_reg[0])))
                p = k.ptr(arr.addr(0, u), arr.pitch, U, fresh=True)
                ev.emit(Instr(Opcode.ST_RF, dram=p, dram_ind=1, simb_mask=b.all), drf=v[1])
            cur = {**{(c, u): ("v", v) for (c, u), v in reg.items()}, **fresh}
            moves = []              # (chain position from the fresh end, instruction)
            for ch in sp.chains:
                for i in range(len(ch) - 1):
                    for u in range(U):
                        mv = VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                          src2=b.const_reg[0], simb_mask=b.all),
                                    {"dst": reg[(ch[i], u)], "src1": cur[(ch[i + 1], u)][1]})
                        moves.append((len(ch) - 2 - i, mv))
            block = loads_first(ev.block, k) + [mv for _, mv in moves]
            loads = {vi.ins.dram for vi in block if vi.ins.opcode is Opcode.LD_RF}
            # warm-up trip j: the fresh values and the moves whose sources hold values
            need = {v[1] for v in fresh.values()}
            src_of: list[VInstr] = []
            for vi in reversed(ev.block):
                if vi.ins.opcode is not Opcode.LD_RF and set(vi.defs()) & need:
                    src_of.append(vi)
                    need |= set(vi.uses())
            src_of.reverse()
            k.warm = [src_of + [mv for d, mv in moves if d <= j] for j in range(sp.depth)]
            k.finish_steps(arr.R, S, loads)
            return block

        b.prog = list(start)
        b.lru = dict(start_lru)
        try:
            b.kernel(S, arr.R, mk)
        except CompileError:
            continue
        b.kernels_done.append(f"{arr.name}: compute {arr.R}x{arr.S} vectors, column strips "
                              f"of {U}, a sliding window of {sp.depth} rows")
        return True
    b.prog, b.lru = start, start_lru
    return False


def _x_halo(b: Builder, arr: Array) -> None:
    if not (arr.hxl or arr.hxr):
        return
    S, pitch = arr.S, arr.pitch
    zero = b.const_reg[0]

    def mk(k: Kernel):
        ev = Evaluator(k, arr, 1, 1)
        loads: dict[int, int] = {}

        def ld(col):
            if col not in loads:
                p = k.ptr(arr.addr(0, col), 0, pitch)
                d = k.v()
                ev.emit(Instr(Opcode.LD_RF, dram=p, dram_ind=1, simb_mask=b.all), drf=d)
                loads[col] = d
            return loads[col]

        def build(lanes: list[tuple[int, int]], col_out: int):
            """lanes[i] = (source column, source lane) of lane i of the halo vector."""
            t = k.v()
            c0, l0 = lanes[0]
            ev.emit(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, mode=Mode.SV, lane=l0,
                          src2=zero, vec_mask=ALL_LANES, simb_mask=b.all), dst=t, src1=ld(c0))
            for i in range(1, LANES):
                c, lane = lanes[i]
                ev.emit(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, mode=Mode.SV,
                              lane=lane, src2=zero, vec_mask=1 << i, simb_mask=b.all),
                        dst=t, src1=ld(c))
            p = k.ptr(arr.addr(0, col_out), 0, pitch, fresh=True)
            ev.emit(Instr(Opcode.ST_RF, dram=p, dram_ind=1, simb_mask=b.all), drf=t)

        for e in range(1, arr.hxl + 1):
            build([(0, 0)] + [(S - e, j - 1) for j in range(1, LANES)], -e)
        for e in range(1, arr.hxr + 1):
            build([(e - 1, j + 1) for j in range(LANES - 1)] + [(S - 1, LANES - 1)],
                  S - 1 + e)
        k.finish_steps(1, arr.R)
        return ev.block

    b.kernel(arr.R, 1, mk)
    b.kernels_done.append(f"{arr.name}: x halo {arr.hxl}+{arr.hxr}")


def _y_edge(b: Builder, arr: Array, npe: int, *, inner: bool) -> None:
    """The rows of the last band beyond the image's last row: copies of that row, as a
    clamped read sees it. *inner*: the band's own rows (before the halo exchange, whose
    neighbour reads them); else its bottom halo (after the exchange, which filled it from
    a PE whose band is all beyond the image, or by clamping to the band's last row)."""
    if not (arr.hyt or arr.hyb):        # read without a y offset: never read there
        return
    ip = b.ip
    gl, nl = arr.bands - 1, arr.last_rows
    if gl // ip.pes != b.gv:
        return
    if inner:
        d0, d1 = nl, arr.R
    elif gl == npe - 1 and nl == arr.R:     # the machine's last band: clamped already
        return
    else:
        d0, d1 = arr.R, arr.R + arr.hyb
    if d1 <= d0:
        return
    mask = _pe_mask(ip, *divmod(gl % ip.pes, ip.pes_per_pg))
    pitch = arr.pitch
    C = next(c for c in (range(8, 0, -1) if b.unroll_budget else range(4, 0, -1))
             if pitch % c == 0)

    def mk(k: Kernel):
        loads, stores = [], []
        for c in range(C):
            sp = k.ptr(arr.addr(nl - 1, -arr.hxl) + c, C, 0)
            dp = k.ptr(arr.addr(d0, -arr.hxl) + c, C, pitch)
            t = k.v()
            loads.append(VInstr(Instr(Opcode.LD_RF, dram=sp, dram_ind=1, simb_mask=mask),
                                {"drf": t}))
            stores.append(VInstr(Instr(Opcode.ST_RF, dram=dp, dram_ind=1, simb_mask=mask),
                                 {"drf": t}))
        k.finish_steps(pitch // C, d1 - d0)
        return loads + stores

    b.kernel(d1 - d0, pitch // C, mk)
    b.kernels_done.append(f"{arr.name}: rows {d0}..{d1 - 1} of the last band "
                          f"{'' if inner else '(halo) '}from row {nl - 1}")


def _pe_mask(ip, pg: int, pe: int) -> int:
    return 1 << (pg * ip.pes_per_pg + pe)


def _y_halo(b: Builder, arr: Array, nvaults: int) -> None:
    if not (arr.hyt or arr.hyb):
        return
    ip = b.ip
    ppg, pgs, pitch = ip.pes_per_pg, ip.pgs, arr.pitch
    # (halo row, source row in the neighbour, neighbour direction)
    jobs = [(-e, arr.R - e, -1) for e in range(1, arr.hyt + 1)] + \
           [(arr.R - 1 + e, e - 1, +1) for e in range(1, arr.hyb + 1)]
    # A row too wide for the scratchpads moves in chunks of columns, one exchange each.
    n = pitch
    if ppg > 1:
        n = min(n, ip.pgsm_lines // (ppg - 1))
    n = min(n, b.vsm_free // (pgs - 1 + len(jobs)))
    if n < 1:
        raise CompileError(f"{arr.name}'s halo exchange does not fit the PGSM's "
                           f"{ip.pgsm_lines} lines or the VSM's {ip.vsm_lines} lines; raise "
                           "ipim.pgsm_bytes or ipim.vsm_bytes")
    for c0 in range(0, pitch, n):
        _y_halo_chunk(b, arr, nvaults, jobs, c0, min(n, pitch - c0))
    chunks = f", {-(-pitch // n)} chunks of {n} vectors" if n < pitch else ""
    b.kernels_done.append(f"{arr.name}: y halo {arr.hyt}+{arr.hyb} (PGSM, VSM, req{chunks})")


def _y_halo_chunk(b: Builder, arr: Array, nvaults: int, jobs: list, c0: int,
                  n: int) -> None:
    """The y-halo exchange of the halo rows' vectors ``c0 .. c0 + n - 1``."""
    ip = b.ip
    ppg, pgs = ip.pes_per_pg, ip.pgs
    gv = b.gv
    vsm_cross = 0
    vsm_req = vsm_cross + (pgs - 1) * n
    # Remote rows: between two barriers, every vault fetches its neighbours' rows. The
    # phase ids name the buffer, so that stages folded into a loop stay identical.
    b.sync(2 * (arr.base + c0))
    for j, (_, src, d) in enumerate(jobs):
        nv = gv + d
        if 0 <= nv < nvaults:
            chip, v = divmod(nv, ip.vaults)
            pg, pe = (pgs - 1, ppg - 1) if d < 0 else (0, 0)
            for i in range(n):
                b.prog.append(Instr(Opcode.REQ, chip=chip, vault=v, pg=pg, pe=pe,
                                    dram=arr.addr(src, -arr.hxl) + c0 + i,
                                    vsm=vsm_req + j * n + i))
    b.sync(2 * (arr.base + c0) + 1)
    for j, (dst, src, d) in enumerate(jobs):
        # C vectors of the row per block: first every read of the source row (bank ->
        # PGSM, bank -> DataRF), then the scratchpad moves, then every write of the halo
        # row, so that each bank sees runs of one row.
        cands = [c for c in range(min(n, 32), 0, -1) if n % c == 0]
        if not b.unroll_budget:       # a loop: a short body (its pointers are set up once)
            cands = [c for c in cands if c <= 4]
        last = None
        best = None             # compact: the shortest code of every block size
        start, start_lru = list(b.prog), dict(b.lru)
        for C in cands:
            b.prog = list(start)
            if b.compact:
                b.lru = dict(start_lru)
            try:            # spilling only where no block size fits
                with b.trying(C != cands[-1] or best is not None):
                    b.kernel(1, n // C, _halo_block(b, arr, j, dst, src, d, C, nvaults,
                                                    vsm_cross, vsm_req, c0, n))
            except CompileError as e:
                last = e
                continue
            if not b.compact:
                break
            if best is None or b.pc() < code_len(best[0]):
                best = (b.prog, b.lru)
        else:
            if best is None:
                b.prog = start
                raise last
            b.prog, b.lru = best


def _halo_block(b: Builder, arr: Array, j: int, dst: int, src: int, d: int, C: int,
                nvaults: int, vsm_cross: int, vsm_req: int, c0: int, n: int):
    """The body of one y-halo job (halo row *dst* from the neighbour's row *src*, the
    neighbour above for ``d < 0``) over the row's vectors ``c0 .. c0 + n - 1``, ``C``
    vectors per iteration."""
    ip = b.ip
    ppg, pgs, pitch, gv = ip.pes_per_pg, ip.pgs, n, b.gv
    c0 -= arr.hxl

    def mk(k: Kernel):
        reads: list[VInstr] = []
        moves: list[VInstr] = []
        writes: list[VInstr] = []
        edge = (0, 0) if d < 0 else (pgs - 1, ppg - 1)
        em = _pe_mask(ip, *edge)
        for c in range(C):
            srcp = k.ptr(arr.addr(src, c0) + c, C, 0)
            dstp = k.ptr(arr.addr(dst, c0) + c, C, 0)
            # within a PG: the owner copies its row to the PGSM, the neighbour reads it
            if ppg > 1:
                owners = range(ppg - 1) if d < 0 else range(1, ppg)
                for p in owners:
                    slot = k.ptr((p if d < 0 else p - 1) * pitch + c, C, 0)
                    m = sum(_pe_mask(ip, g, p) for g in range(pgs))
                    reads.append(VInstr(Instr(Opcode.LD_PGSM, dram=srcp, dram_ind=1,
                                              pgsm=slot, pgsm_ind=1, simb_mask=m)))
                    q = p + 1 if d < 0 else p - 1
                    m = sum(_pe_mask(ip, g, q) for g in range(pgs))
                    writes.append(VInstr(Instr(Opcode.ST_PGSM, dram=dstp, dram_ind=1,
                                               pgsm=slot, pgsm_ind=1, simb_mask=m)))
            # between the PGs of the vault, through the VSM
            for g in range(pgs - 1):
                s_pe, r_pe = ((g, ppg - 1), (g + 1, 0)) if d < 0 else ((g + 1, 0), (g, ppg - 1))
                w = k.ptr(vsm_cross + g * pitch + c, C, 0)
                t, t2 = k.v(), k.v()
                reads.append(VInstr(Instr(Opcode.LD_RF, dram=srcp, dram_ind=1,
                                          simb_mask=_pe_mask(ip, *s_pe)), {"drf": t}))
                moves.append(VInstr(Instr(Opcode.WR_VSM, vsm=w, vsm_ind=1,
                                          simb_mask=_pe_mask(ip, *s_pe)), {"drf": t}))
                moves.append(VInstr(Instr(Opcode.RD_VSM, vsm=w, vsm_ind=1,
                                          simb_mask=_pe_mask(ip, *r_pe)), {"drf": t2}))
                writes.append(VInstr(Instr(Opcode.ST_RF, dram=dstp, dram_ind=1,
                                           simb_mask=_pe_mask(ip, *r_pe)), {"drf": t2}))
            # the vault's edge band: from the neighbouring vault, or clamped
            t3 = k.v()
            if 0 <= gv + d < nvaults:
                rp = k.ptr(vsm_req + j * pitch + c, C, 0)
                moves.append(VInstr(Instr(Opcode.RD_VSM, vsm=rp, vsm_ind=1, simb_mask=em),
                                    {"drf": t3}))
            else:
                cp = k.ptr(arr.addr(0 if d < 0 else arr.R - 1, c0) + c, C, 0)
                reads.append(VInstr(Instr(Opcode.LD_RF, dram=cp, dram_ind=1, simb_mask=em),
                                    {"drf": t3}))
            writes.append(VInstr(Instr(Opcode.ST_RF, dram=dstp, dram_ind=1, simb_mask=em),
                                 {"drf": t3}))
        k.finish_steps(pitch // C, 1)
        return reads + moves + writes

    return mk


# -- replicated arrays -----------------------------------------------------------------


def _gather(b: Builder, arr: Array, nvaults: int) -> None:
    """Every PE's copy of the whole tiled ``arr.srcs`` (plane ``c`` into lane ``c``, or one
    plane into every lane), in chunks of bands that fit the VSM: between two barriers
    each vault fetches the chunk's bands of the other vaults line by line (``req``) into
    its VSM and its own PEs write theirs (``wr_vsm``); then every PE reads the lines and
    spreads the four strips of each over one vector per pixel (``comp`` in
    scalar-vector mode: lane ``j`` of plane ``c``'s line into lane ``c``)."""
    ip = b.ip
    P, ppg = ip.pes, ip.pes_per_pg
    planes = arr.srcs
    src0 = planes[0]
    R, S, n = src0.R, src0.S, len(planes)
    npe = src0.H // R
    free = b.vsm_free
    if n * R * S > free:
        raise CompileError(f"replicating {arr.name} needs {n * R * S} VSM lines per band but "
                           f"the VSM has {free} free; raise ipim.vsm_bytes or replicate a "
                           "smaller level")
    chunks = -(-npe // (free // (n * R * S)))
    G = -(-npe // chunks)                   # bands per chunk
    zero = b.const_reg[0]
    for g0 in range(0, npe, G):
        gs = range(g0, min(g0 + G, npe))

        def line(c: int, g: int, r: int, k: int, g0=g0) -> int:
            return ((c * G + g - g0) * R + r) * S + k

        b.sync(2 * arr.base)
        for g in gs:
            v, p = divmod(g, P)
            if v == b.gv:
                continue
            chip, vv = divmod(v, ip.vaults)
            pg, pe = divmod(p, ppg)
            for c, src in enumerate(planes):
                for r in range(R):
                    for k in range(S):
                        b.prog.append(Instr(Opcode.REQ, chip=chip, vault=vv, pg=pg, pe=pe,
                                            dram=src.addr(r, k), vsm=line(c, g, r, k)))
        mine = [g for g in gs if g // P == b.gv]

        def own(k: Kernel, mine=mine, line=line):
            blk = []
            for c, src in enumerate(planes):
                sp = k.ptr(src.addr(0, 0), 1, src.pitch)
                for g in mine:
                    t = k.v()
                    m = 1 << (g % P)
                    blk.append(VInstr(Instr(Opcode.LD_RF, dram=sp, dram_ind=1, simb_mask=m),
                                      {"drf": t}))
                    blk.append(VInstr(Instr(Opcode.WR_VSM, vsm=k.ptr(line(c, g, 0, 0), 1, S),
                                            vsm_ind=1, simb_mask=m), {"drf": t}))
            k.finish_steps(S, R)
            return blk

        if mine:
            b.kernel(R, S, own)
        b.sync(2 * arr.base + 1)

        def spread(k: Kernel, g0=g0, line=line):
            ts = []
            blk = []
            for c in range(n):
                t = k.v()
                blk.append(VInstr(Instr(Opcode.RD_VSM, vsm=k.ptr(line(c, g0, 0, 0), 1, S),
                                        vsm_ind=1, simb_mask=b.all), {"drf": t}))
                ts.append(t)
            for j in range(LANES):
                u = k.v()
                for c, t in enumerate(ts):
                    blk.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                            mode=Mode.SV, lane=j, src2=zero,
                                            vec_mask=1 << c if c else ALL_LANES, simb_mask=b.all),
                                      {"dst": u, "src1": t}))
                blk.append(VInstr(Instr(Opcode.ST_RF, dram=k.ptr(arr.addr(g0 * R, j * S), 1,
                                                                 arr.pitch, fresh=True),
                                        dram_ind=1, simb_mask=b.all), {"drf": u}))
            k.finish_steps(S, len(gs) * R)
            return blk

        b.kernel(len(gs) * R, S, spread)
    b.kernels_done.append(f"{arr.name}: replicate {n}x {src0.H}x{src0.W} into every PE in "
                          f"{-(-npe // G)} chunks (req, VSM)")
    fill(b, arr)


def _extract(b: Builder, arr: Array) -> None:
    """Each PE's band (halo included, clamped at the edges) of every channel of the
    replicated ``arr.srcs[0]`` (the arrays of ``arr.group``, made at its first): lane
    ``j`` of vector ``k`` of row ``r`` of channel ``c``'s band is lane ``c`` of pixel
    ``(j*S + k, g*R + r)``, moved into place with ``comp`` in scalar-vector mode, one PE
    at a time."""
    if arr.group and arr is not arr.group[0]:
        return
    ip, src = b.ip, arr.srcs[0]
    twins = arr.group or [arr]
    zero = b.const_reg[0]
    rows = range(min(-t.hyt for t in twins), max(t.R + t.hyb for t in twins))
    cols = range(min(-t.hxl for t in twins), max(t.S + t.hxr for t in twins))
    for p in range(ip.pes):
        g = b.gv * ip.pes + p

        def mk(k: Kernel, g=g, p=p):
            blk = []
            for r in rows:
                y = min(max(g * arr.R + r, 0), src.H - 1)
                for c in cols:
                    px = []
                    for j in range(LANES):
                        x = min(max(j * arr.S + c, 0), src.W - 1)
                        v = k.v()
                        blk.append(VInstr(Instr(Opcode.LD_RF, dram=src.addr(y, x),
                                                simb_mask=1 << p), {"drf": v}))
                        px.append(v)
                    for t in twins:
                        if not (-t.hyt <= r < t.R + t.hyb and -t.hxl <= c < t.S + t.hxr):
                            continue
                        u = k.v()
                        for j, v in enumerate(px):
                            blk.append(VInstr(Instr(
                                Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, mode=Mode.SV,
                                lane=t.channel or 0, src2=zero,
                                vec_mask=ALL_LANES if j == 0 else 1 << j, simb_mask=1 << p),
                                {"dst": u, "src1": v}))
                        blk.append(VInstr(Instr(Opcode.ST_RF, dram=t.addr(r, c),
                                                simb_mask=1 << p), {"drf": u}))
            return blk

        b.kernel(1, 1, mk)
    b.kernels_done.append(f"{', '.join(t.name for t in twins)}: each PE's band of {src.name}")


# -- bands --------------------------------------------------------------------------


# -- bank allocation and program assembly -------------------------------------------------

def _allocate_banks(g: Graph) -> int:
    """Place the arrays in the banks, reusing the space of an array once every consumer
    of it has been computed (a chain of stages ping-pongs between two buffers, which
    makes its stages identical programs that :func:`assemble` folds into a loop).
    Returns the vectors used."""
    order = g.order
    last_use = {id(a): i for i, a in enumerate(order)}
    for i, a in enumerate(order):
        body = g.bodies.get(id(a))
        if body is not None:
            for r in reads(body):
                last_use[id(r)] = max(last_use[id(r)], i)
        for p in a.srcs:
            last_use[id(p)] = max(last_use[id(p)], i)
    for a in g.outs:                # every output lives to the end
        last_use[id(a)] = len(order)
    free: list[tuple[int, int]] = []        # (base, size) of dead buffers
    live: list[tuple[int, Array]] = []
    top = 0
    for i, a in enumerate(order):
        for end, d in list(live):
            if end < i and not d.host:
                free.append((d.base, d.size))
                live.remove((end, d))
        fit = [f for f in free if f[1] >= a.size and not a.host]
        if fit:
            f = min(fit, key=lambda f: (f[1], f[0]))
            free.remove(f)
            a.base = f[0]
            if f[1] > a.size:
                free.append((f[0] + a.size, f[1] - a.size))
        else:
            a.base = top
            top += a.size
        live.append((last_use[id(a)], a))
    return top


# -- the passes' bodies ------------------------------------------------------------------

def build_graph(outs: list[Func], size: tuple[int, int], npe: int) -> Graph:
    """The ``graph`` pass: the root arrays of the pipeline computing *outs* over
    ``size = (W, H)`` on *npe* PEs, producers first, their bodies resolved.

    Raises
    ------
    CompileError
        A schedule or a read the lowering cannot place, with what to change.
    """
    W, H = size
    return Graph(outs, W, H, npe)


def lay_out(g: Graph, bounds: Bounds, ip) -> int:
    """The ``layout`` pass: write *bounds* (rows per PE and halos) into *g*'s arrays,
    check every stencil's reach against its band, and give every array its base in
    the banks (:func:`_allocate_banks`). Returns the bank vectors used.

    Raises
    ------
    CompileError
        A stencil reaches beyond the neighbouring band, or the arrays do not fit a bank.
    """
    for a in g.order:
        a.R = bounds.rows.get(a, a.R)
        a.hxl, a.hxr, a.hyt, a.hyb = bounds.halos.get(a, (a.hxl, a.hxr, a.hyt, a.hyb))
    for a in g.order:
        if a.kind != "func" or a.rep:    # the host, a copy or the edge fill writes the halo
            pass
        elif a.hxl > a.S or a.hxr > a.S:
            raise CompileError(f"{a.name}'s stencil reaches {max(a.hxl, a.hxr)} vectors "
                               f"sideways, more than its {a.S}-vector strips: use a wider image")
        elif a.hyt > a.R or a.hyb > a.R:
            raise CompileError(f"{a.name}'s stencil reaches {max(a.hyt, a.hyb)} rows up or "
                               f"down, more than the {a.R} rows of a PE's band: use a taller "
                               "image or fewer PEs")
    top = _allocate_banks(g)
    if top > ip.bank_vectors:
        raise CompileError(f"the pipeline's arrays need {top} vectors of each bank but a "
                           f"bank holds {ip.bank_vectors}; raise ipim.bank_bytes or use a "
                           "smaller image")
    return top


def _const_exprs(g: Graph):
    """The expressions whose constants the DataRF holds: the bodies, then the scatters'
    initial values and values."""
    for a in g.order:
        body = g.bodies.get(id(a))
        if body is not None:
            yield body
    for zi, values, *_ in g.scatters.values():
        yield from (zi, *values)


def constants(g: Graph) -> list[int]:
    """The constants every vault keeps in its DataRF: 0 first, then the bit patterns
    the bodies and scatters need, in order."""
    consts: set[int] = {0}
    for e in _const_exprs(g):
        needs_consts(e, consts)
    return [0] + sorted(consts - {0})


def constant_uses(g: Graph) -> dict[int, int]:
    """How many expression nodes of the bodies and scatters use each constant (which
    constants the DataRF keeps where it cannot keep them all)."""
    counts: dict[int, int] = {}
    for e in _const_exprs(g):
        count_consts(e, counts)
    return counts


def unroll_budgets(ip, opts: Options) -> list[int]:
    """The unrolling budgets selection tries in turn until a program fits: a kernel
    unrolled while its code stays below a quarter, a sixteenth, a 64th of the program
    memory (with ``opts.unroll``); then loops (0); then the shortest of loops and
    unrolled code (-1)."""
    budgets = [ip.imem_instructions // d for d in (4, 16, 64)] if opts.unroll else []
    return budgets + [0, -1]


def select(g: Graph, ip, opts: Options, consts_l: list[int],
           vaults, spill_base: int | None = None) -> tuple[dict[int, VaultCode], list[str]]:
    """The ``select`` pass: every vault's (of *vaults*) kernels as instructions and
    blocks of virtual-register instructions, with the first unrolling budget
    (:func:`unroll_budgets`) whose program fits the program memory. Returns the code
    per vault and the kernels' descriptions. *spill_base*: the first bank vector above
    the arrays, from which a kernel the DataRF cannot hold spills its values (None: it
    does not).

    Raises
    ------
    CompileError
        No budget makes a program that fits, or a kernel needs more registers than the
        machine has.
    """
    nvaults = ip.cubes * ip.vaults
    budgets = unroll_budgets(ip, opts)
    # each budget with software-pipelined loops first, then with plain loops (which
    # are shorter): pipelining never costs a kernel its unrolling
    pipe = opts.reorder and opts.pipeline
    tries = [(b, p) for b in budgets for p in ((True, False) if pipe and b >= 0 else (False,))]
    uses = constant_uses(g)
    for i, (budget, pipeline) in enumerate(tries):
        code = _generate(g, ip, opts, nvaults, consts_l, budget, vaults,
                         last=i == len(tries) - 1, pipeline=pipeline, uses=uses,
                         spill_base=spill_base)
        if code is not None:
            return code
    raise AssertionError("the last budget returns or raises")


def _generate(g: Graph, ip, opts: Options, nvaults: int, consts_l: list[int],
              budget: int, vaults, *, last: bool, pipeline: bool = False,
              uses: dict[int, int] | None = None, spill_base: int | None = None):
    """Every vault's code (of *vaults*) with the unrolling *budget*, loops
    software-pipelined where *pipeline*; None where a program does not fit and *last*
    is false."""
    programs = {}
    kernels: list[str] = []
    for gv in vaults:
        b = Builder(ip, opts, gv, consts_l, uses)
        b.spill_base = spill_base
        b.unroll_budget = max(budget, 0)
        b.compact = budget < 0
        b.pipeline = pipeline
        prologue = b.prog
        segments = []
        for a in g.order:
            body = g.bodies.get(id(a))
            if a.kind in ("gather", "extract"):
                b.prog = []
                b.lru = {}
                _gather(b, a, nvaults) if a.kind == "gather" else _extract(b, a)
                segments.append(b.prog)
                continue
            if a.kind in ("coord", "table", "scatter"):
                from .lower_grid import emit_grid_array  # the grids' own kernels

                b.prog = []
                b.lru = {}
                emit_grid_array(b, a, g)
                segments.append(b.prog)
                continue
            if body is None:
                continue
            b.prog = []
            b.lru = {}          # each stage starts alike, so that repeated stages fold
            _compute(b, a, body)
            if a.rep:
                fill(b, a)
            elif a not in g.outs:
                _x_halo(b, a)
                _y_edge(b, a, nvaults * ip.pes, inner=True)
                _y_halo(b, a, nvaults)
                _y_edge(b, a, nvaults * ip.pes, inner=False)
            segments.append(b.prog)
        n = len(assemble(prologue, [trial_code(s, ip, opts) for s in segments]))
        if n > ip.imem_instructions and not last:
            return None
        check_fits(gv, n, ip)
        programs[gv] = VaultCode(prologue, segments)
        kernels = b.kernels_done
    return programs, kernels


# -- data placement --------------------------------------------------------------------


