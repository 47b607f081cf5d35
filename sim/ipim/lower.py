"""Lowering a :mod:`~pimforge.sim.ipim.lang` pipeline to SIMB programs (Sec. V-B).

Data layout
-----------
Every ``compute_root`` func and every input image is an *array* in each PE's bank.
``ipim_tile`` spreads the image over the PEs of every vault in bands of rows: PE
``g`` (``g = vault * pes + pg * pes_per_pg + pe``, so that neighbouring bands sit
in one PG whenever they can) holds rows ``[g*R, (g+1)*R)``. ``vectorize(xi, 4)``
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
   and last band clamp to the image's top and bottom rows.

Reads beyond a func's domain therefore clamp to its edge, for inputs and
intermediate funcs alike.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...rtl.simb.isa import (
    LANES,
    RESERVED_ARF,
    AluOp,
    Cond,
    DType,
    Instr,
    Mode,
    Opcode,
)
from .backend import Options, VInstr, schedule_block
from .lang import (
    FP32,
    INT32,
    Affine,
    Bin,
    Call,
    Cast,
    Cmp,
    CompileError,
    Const,
    Expr,
    Func,
    ImageParam,
    Select,
    children,
    nodes,
)

__all__ = ["Array", "Program", "compile_pipeline", "place", "gather"]

_ALL = 0xF
#: VSM lines at the top of the VSM that the AddrRF set-up rotates through.
_SCRATCH_LINES = 4


def f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


@dataclass
class Array:
    """One root func or input image, as every PE stores its band."""

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

    @property
    def S(self) -> int:
        return self.W // LANES

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
    out_shape: tuple[int, int]
    opts: Options
    kernels: list[str] = field(default_factory=list)
    #: ``reader(fetch) -> ndarray`` for an output that is not an image band (a histogram)
    reader: Callable | None = None

    def read(self, fetch: Callable[[int, int, int, int], np.ndarray], ip) -> np.ndarray:
        """The output, from ``fetch(global vault, pe, base, n) -> uint32[n, 4]``."""
        if self.reader is not None:
            return self.reader(fetch)
        return gather(self.output, fetch, ip)

    def breakdown(self) -> dict[str, int]:
        """Static instruction count by opcode over every vault's program."""
        out: dict[str, int] = {}
        for prog in self.programs.values():
            for ins in prog:
                out[ins.opcode.name.lower()] = out.get(ins.opcode.name.lower(), 0) + 1
        return dict(sorted(out.items()))


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


@dataclass(eq=False)
class _Ref(Expr):
    """A read of a root array at ``(x, y)`` forms relative to the consumer."""

    arr: Array
    ax: tuple[int, int, int]
    ay: tuple[int, int, int]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.arr.dtype


class _Graph:
    def __init__(self, out: Func, W: int, H: int, npe: int):
        self.npe = npe
        self.arrays: dict[int, Array] = {}
        self.order: list[Array] = []
        self.bodies: dict[int, Expr] = {}
        self._visiting: set[int] = set()
        out.schedule.root = True
        self.out = self._array(out, W, H)

    def _array(self, f: Func | ImageParam, W: int, H: int) -> Array:
        a = self.arrays.get(id(f))
        if a is not None:
            if (a.W, a.H) != (W, H):
                raise CompileError(f"{f.name} is read at two resolutions ({a.W}x{a.H} and "
                                   f"{W}x{H}); give each its own func")
            return a
        if W % 16 or H % self.npe or W <= 0 or H <= 0:
            raise CompileError(f"{f.name} is {W}x{H}: the width must be a multiple of 16 "
                               f"and the height of the {self.npe} PEs (one band of rows each)")
        if id(f) in self._visiting:
            raise CompileError(f"func {f.name} depends on itself")
        a = Array(f.name, f.dtype, W, H, H // self.npe,
                  func=f if isinstance(f, Func) else None)
        self.arrays[id(f)] = a
        if isinstance(f, Func):
            self._visiting.add(id(f))
            self.bodies[id(a)] = self._resolve(f.expr, (1, 0, 1), (1, 0, 1), W, H)
            self._visiting.discard(id(f))
        self.order.append(a)
        return a

    def _resolve(self, e: Expr, cx, cy, W: int, H: int) -> Expr:
        if isinstance(e, Const):
            return e
        if isinstance(e, Call):
            ax, ay = _compose(cx, e.ax), _compose(cy, e.ay)
            f = e.func
            if isinstance(f, Func) and not f.schedule.root:
                if f.expr is None:
                    raise CompileError(f"func {f.name} is used before it is defined")
                if id(f) in self._visiting:
                    raise CompileError(f"func {f.name} depends on itself")
                self._visiting.add(id(f))
                r = self._resolve(f.expr, ax, ay, W, H)
                self._visiting.discard(id(f))
                return r
            Wp, Hp = W * ax[0] // ax[2], H * ay[0] // ay[2]
            if W * ax[0] % ax[2] or H * ay[0] % ay[2]:
                raise CompileError(f"{f.name} would be {W * ax[0] / ax[2]}x"
                                   f"{H * ay[0] / ay[2]}: choose an even size")
            return _Ref(self._array(f, Wp, Hp), ax, ay)
        if isinstance(e, Bin):
            return Bin(e.op, self._resolve(e.a, cx, cy, W, H), self._resolve(e.b, cx, cy, W, H))
        if isinstance(e, Select):
            c = Cmp(e.cond.op, self._resolve(e.cond.a, cx, cy, W, H),
                    self._resolve(e.cond.b, cx, cy, W, H))
            return Select(c, self._resolve(e.a, cx, cy, W, H), self._resolve(e.b, cx, cy, W, H))
        if isinstance(e, Cast):
            return Cast(e.dtype, self._resolve(e.a, cx, cy, W, H))
        raise CompileError(f"cannot lower {type(e).__name__}")


def _refs(e: Expr) -> list[_Ref]:
    return [n for n in nodes(e) if isinstance(n, _Ref)]


def _bits(c: Const) -> int:
    if c.dtype == FP32:
        return f32_bits(c.value)
    return int(c.value) & 0xFFFF_FFFF


#: Constants the lowering of select, casts and shifts uses.
_C_M31 = (-31) & 0xFFFF_FFFF
_C_MAGIC_I = 0x4B00_0000
_C_MAGIC_F = f32_bits(8388608.0)


# -- the program builder -----------------------------------------------------------

class _Builder:
    """Builds one vault's program."""

    def __init__(self, ip, opts: Options, gvault: int, consts: list[int]):
        self.ip = ip
        self.opts = opts
        self.gv = gvault
        #: a kernel is unrolled with direct addresses when its code stays below this
        self.unroll_budget = 0
        #: register-use history of the max allocator within the current segment
        self.lru: dict[int, int] = {}
        self.prog: list[Instr] = []
        self.kernels_done: list[str] = []
        n = ip.drf_entries
        # DataRF: [0] scratch for AddrRF set-up, [1..] constants, the rest for kernels.
        self.scratch = 0
        self.const_reg = {c: 1 + i for i, c in enumerate(consts)}
        self.free = list(range(1 + len(consts), n))
        if len(self.free) < 8:
            raise CompileError(f"{len(consts)} constants leave {len(self.free)} of the "
                               f"DataRF's {n} entries for kernels; raise ipim.drf_bytes")
        self.vsm_scratch = ip.vsm_lines - 1      # and the _SCRATCH_LINES - 1 below it
        self.all = (1 << ip.pes) - 1
        for n, (c, r) in enumerate(self.const_reg.items()):
            line = self.vsm_scratch - n % _SCRATCH_LINES
            self.prog.append(Instr(Opcode.SETI_VSM, vsm=line, vec_mask=_ALL, imm=c))
            self.prog.append(Instr(Opcode.RD_VSM, vsm=line, drf=r, simb_mask=self.all))
        self.prog.append(Instr(Opcode.SETI_CRF, dst=0, imm=1))

    # -- AddrRF set-up -------------------------------------------------------------

    def set_arf(self, values: dict[int, int]) -> None:
        """Load AddrRF entries with constants: four at a time through a VSM line
        (``seti_vsm`` per lane), a DataRF register and ``mov_arf``. The lines rotate and
        the block goes through the backend like a loop body, so that the set-up
        instructions overlap."""
        items = sorted(values.items())
        block: list[VInstr] = []
        for n, i in enumerate(range(0, len(items), LANES)):
            chunk = items[i:i + LANES]
            line = self.vsm_scratch - n % _SCRATCH_LINES
            for lane, (_, v) in enumerate(chunk):
                block.append(VInstr(Instr(Opcode.SETI_VSM, vsm=line, vec_mask=1 << lane,
                                          imm=v)))
            t = -1 - n          # a virtual register of its own (negative: no clash)
            block.append(VInstr(Instr(Opcode.RD_VSM, vsm=line, simb_mask=self.all),
                                {"drf": t}))
            for lane, (reg, _) in enumerate(chunk):
                block.append(VInstr(Instr(Opcode.MOV_ARF, arf=reg, lane=lane,
                                          simb_mask=self.all), {"drf": t}))
        if block:
            self.prog.extend(schedule_block(block, self.free, self.ip, self.opts, self.lru))

    # -- loops ---------------------------------------------------------------------

    def kernel(self, rows: int, segs: int,
               body: Callable[[_Kernel], list[VInstr]]) -> None:
        """Emit ``rows x segs`` iterations of the block *body* builds."""
        k = _Kernel(self)
        block = body(k)
        if not block:
            return
        if self._direct(k, block, rows * segs):
            # Unrolled, with every pointer replaced by the address it holds in that
            # iteration: the core tracks direct bank and scratchpad accesses per
            # address, indirect ones as the whole memory, so only direct code lets the
            # loads and stores of different addresses overlap.
            for r in range(rows):
                for sg in range(segs):
                    it = [_at(vi, k.ptrs, r, sg if segs > 1 else 0) for vi in block]
                    self.prog.extend(schedule_block(it, self.free, self.ip, self.opts, self.lru))
            return
        arf = {}
        for reg, (init, _, _) in k.ptrs.items():
            arf[reg] = init
        for val, reg in k.steps.items():
            arf[reg] = val
        self.set_arf(arf)
        incs = []
        if segs > 1:
            for reg, (_, seg, _) in k.ptrs.items():
                if seg:
                    incs.append(VInstr(Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=reg, src1=reg,
                                             src2=k.steps[seg], simb_mask=self.all)))
        row_incs = []
        for reg, (_, seg, row) in k.ptrs.items():
            adj = row - (segs * seg if segs > 1 else 0)
            if rows > 1 and adj:
                row_incs.append(VInstr(Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=reg, src1=reg,
                                             src2=k.steps[adj], simb_mask=self.all)))
        inner = block + incs
        if segs == 1:
            inner = inner + row_incs
        code = schedule_block(inner, self.free, self.ip, self.opts, self.lru)
        P = self.prog
        # c3/c4 hold pcs relative to the segment (relocated by _assemble)
        if rows > 1:
            P.append(Instr(Opcode.SETI_CRF, dst=2, imm=rows))
            row_top = len(P) + 1
            P.append(Instr(Opcode.SETI_CRF, dst=4, imm=row_top))
        if segs > 1:
            P.append(Instr(Opcode.SETI_CRF, dst=1, imm=segs))
            seg_top = len(P) + 1
            P.append(Instr(Opcode.SETI_CRF, dst=3, imm=seg_top))
        P.extend(code)
        if segs > 1:
            P.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=1, src1=1, src2=0))
            P.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=1, target=3))
            if rows > 1 and row_incs:
                P.extend(schedule_block(row_incs, self.free, self.ip, self.opts, self.lru))
        if rows > 1:
            P.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=2, src1=2, src2=0))
            P.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=2, target=4))

    def _direct(self, k: _Kernel, block: list[VInstr], iters: int) -> bool:
        if self.unroll_budget < iters * len(block):
            return False
        for vi in block:        # a pointer read as a value (not an address) needs the loop
            i = vi.ins
            if i.opcode in (Opcode.CALC_ARF, Opcode.MOV_DRF) and \
                    {i.src1, i.src2, i.arf} & set(k.ptrs):
                return False
        return True

    def sync(self, phase: int) -> None:
        self.prog.append(Instr(Opcode.SYNC, phase=phase & 0xFFFF))


def _at(vi: VInstr, ptrs: dict[int, tuple[int, int, int]], r: int, sg: int) -> VInstr:
    """*vi* with its indirect addresses through pointers made direct, for iteration
    ``(r, sg)``."""
    upd = {}
    for f in ("dram", "pgsm", "vsm"):
        reg = getattr(vi.ins, f)
        if getattr(vi.ins, f"{f}_ind") and reg in ptrs:
            init, seg, row = ptrs[reg]
            upd[f] = init + sg * seg + r * row
            upd[f"{f}_ind"] = 0
    return VInstr(dataclasses.replace(vi.ins, **upd), vi.vregs) if upd else vi


class _Kernel:
    """Pointers and step constants of one kernel, and virtual registers."""

    def __init__(self, b: _Builder):
        self.b = b
        self.ptrs: dict[int, tuple[int, int, int]] = {}
        self._ptr_of: dict[tuple[int, int, int], int] = {}
        self.steps: dict[int, int] = {}
        self._next_arf = RESERVED_ARF
        self._v = 0

    def _arf(self) -> int:
        r = self._next_arf
        if r >= self.b.ip.arf_entries:
            raise CompileError(f"the kernel needs more than {self.b.ip.arf_entries} AddrRF "
                               "entries (pointers and steps); raise ipim.arf_bytes or "
                               "simplify the stage")
        self._next_arf += 1
        return r

    def ptr(self, init: int, seg: int, row: int, *, fresh: bool = False) -> int:
        key = (init, seg, row)
        if key in self._ptr_of and not fresh:
            return self._ptr_of[key]
        reg = self._arf()
        self.ptrs[reg] = key
        self._ptr_of.setdefault(key, reg)
        return reg

    def finish_steps(self, segs: int, rows: int) -> None:
        need = set()
        for _, seg, row in self.ptrs.values():
            if segs > 1 and seg:
                need.add(seg)
            adj = row - (segs * seg if segs > 1 else 0)
            if rows > 1 and adj:
                need.add(adj)
        for v in sorted(need):
            if v not in self.steps:
                self.steps[v] = self._arf()

    def v(self) -> int:
        self._v += 1
        return self._v


# -- compute kernels -----------------------------------------------------------------

class _Eval:
    def __init__(self, k: _Kernel, arr: Array, U: int, RU: int):
        self.k = k
        self.arr = arr
        self.U = U
        self.RU = RU
        self.block: list[VInstr] = []
        self.memo: dict = {}
        self.mask = k.b.all
        self.refs: dict[int, int] = {}

    def count_refs(self, e: Expr) -> None:
        """How many parents read each node of *e* (a mac may only overwrite a value that
        has one reader)."""
        seen: set[int] = set()

        def walk(n):
            for c in children(n):
                self.refs[id(c)] = self.refs.get(id(c), 0) + 1
                if id(c) not in seen:
                    seen.add(id(c))
                    walk(c)

        walk(e)

    def emit(self, ins: Instr, **vregs) -> None:
        self.block.append(VInstr(ins, vregs))

    def const(self, bits: int) -> int:
        return self.k.b.const_reg[bits]

    def comp(self, op: AluOp, dt: str, a, b) -> int:
        """a, b: ("v", n) virtual or ("p", n) physical (a constant)."""
        d = self.k.v()
        vregs = {"dst": d}
        fields = {}
        for name, x in (("src1", a), ("src2", b)):
            if x[0] == "v":
                vregs[name] = x[1]
            else:
                fields[name] = x[1]
        self.emit(Instr(Opcode.COMP, op=op, dtype=DType.FP32 if dt == FP32 else DType.INT32,
                        simb_mask=self.mask, **fields), **vregs)
        return d

    def val(self, e: Expr, rr: int, u: int):
        key = (id(e), rr, u)
        if key in self.memo:
            return self.memo[key]
        r = self._val(e, rr, u)
        self.memo[key] = r
        return r

    def _val(self, e: Expr, rr: int, u: int):
        if isinstance(e, Const):
            return ("p", self.const(_bits(e)))
        if isinstance(e, _Ref):
            a = e.arr
            (xa, xb, xd), (ya, yb, yd) = e.ax, e.ay
            col = (xa * u + xb) // xd
            row = (ya * rr + yb) // yd
            seg = self.U * xa // xd
            rstep = self.RU * ya // yd * a.pitch
            init = a.addr(row, col)
            key = ("ld", init, seg, rstep)
            if key in self.memo:
                return self.memo[key]
            p = self.k.ptr(init, seg, rstep)
            d = self.k.v()
            self.emit(Instr(Opcode.LD_RF, dram=p, dram_ind=1, simb_mask=self.mask), drf=d)
            self.memo[key] = ("v", d)
            return ("v", d)
        if isinstance(e, Bin):
            if (e.op == "+" and e.dtype == FP32 and isinstance(e.b, Bin) and e.b.op == "*"
                    and isinstance(e.a, Bin | Select | Cast)
                    and self.refs.get(id(e.a)) == 1 and self.refs.get(id(e.b)) == 1):
                # a + p*q as one mac on a's register (a is read nowhere else): the
                # product rounded, then the sum, exactly as the two instructions
                acc = self.val(e.a, rr, u)
                p, q = self.val(e.b.a, rr, u), self.val(e.b.b, rr, u)
                vregs = {"dst": acc[1]}
                fields = {}
                for name, x in (("src1", p), ("src2", q)):
                    if x[0] == "v":
                        vregs[name] = x[1]
                    else:
                        fields[name] = x[1]
                self.emit(Instr(Opcode.COMP, op=AluOp.MAC, dtype=DType.FP32,
                                simb_mask=self.mask, **fields), **vregs)
                return acc
            a = self.val(e.a, rr, u)
            b = self.val(e.b, rr, u)
            dt = e.a.dtype
            ops = {"+": AluOp.ADD, "-": AluOp.SUB, "*": AluOp.MUL, "&": AluOp.AND,
                   "|": AluOp.OR, "^": AluOp.XOR, "<<": AluOp.SHIFT}
            if e.op in ("&", "|", "^"):
                dt = INT32
            return ("v", self.comp(ops[e.op], dt, a, b))
        if isinstance(e, Select):
            c = e.cond
            lt_a, lt_b = (c.a, c.b) if c.op == "<" else (c.b, c.a)
            t = self.comp(AluOp.SUB, c.a.dtype, self.val(lt_a, rr, u), self.val(lt_b, rr, u))
            m = self.comp(AluOp.SHIFT, INT32, ("v", t), ("p", self.const(_C_M31)))
            ta, fb = self.val(e.a, rr, u), self.val(e.b, rr, u)
            if c.op == "<=":
                ta, fb = fb, ta          # a <= b is !(b < a)
            x1 = self.comp(AluOp.XOR, INT32, ta, fb)
            x2 = self.comp(AluOp.AND, INT32, ("v", x1), ("v", m))
            return ("v", self.comp(AluOp.XOR, INT32, fb, ("v", x2)))
        if isinstance(e, Cast):
            x = self.val(e.a, rr, u)
            if e.dtype == FP32:          # int -> float, 0 <= x < 2**23
                t = self.comp(AluOp.ADD, INT32, x, ("p", self.const(_C_MAGIC_I)))
                return ("v", self.comp(AluOp.SUB, FP32, ("v", t),
                                       ("p", self.const(_C_MAGIC_F))))
            t = self.comp(AluOp.ADD, FP32, x, ("p", self.const(_C_MAGIC_F)))
            ri = self.comp(AluOp.SUB, INT32, ("v", t), ("p", self.const(_C_MAGIC_I)))
            f = self.comp(AluOp.SUB, FP32, ("v", t), ("p", self.const(_C_MAGIC_F)))
            dlt = self.comp(AluOp.SUB, FP32, x, ("v", f))
            m = self.comp(AluOp.SHIFT, INT32, ("v", dlt), ("p", self.const(_C_M31)))
            return ("v", self.comp(AluOp.ADD, INT32, ("v", ri), ("v", m)))
        raise CompileError(f"cannot lower {type(e).__name__}")


def _needs_consts(e: Expr, out: set) -> None:
    """Add to *out* the bit patterns of the constants *e* and its lowering use."""
    for n in nodes(e):
        if isinstance(n, Const):
            out.add(_bits(n))
        elif isinstance(n, Select):
            out.add(_C_M31)
        elif isinstance(n, Cast):
            out.update((_C_MAGIC_I, _C_MAGIC_F, _C_M31))


def _loads_first(block: list[VInstr]) -> list[VInstr]:
    """The block's bank loads first, then its computation, then its stores (Fig. 3c: the
    input region of the outputs is loaded before they are computed). A block reads
    only arrays it does not write, so the loads move freely; the bank then sees runs
    of accesses to one array (row hits) instead of loads and stores alternating
    between rows, and memory-order enforcement keeps it that way."""
    loads = [vi for vi in block if vi.ins.opcode is Opcode.LD_RF]
    return loads + [vi for vi in block if vi.ins.opcode is not Opcode.LD_RF]


def _compute(b: _Builder, arr: Array, body: Expr) -> None:
    refs = _refs(body)
    need_even_x = any(r.ax[2] == 2 for r in refs)
    need_even_y = any(r.ay[2] == 2 for r in refs)
    RU = 2 if need_even_y else 1
    if arr.R % RU:
        raise CompileError(f"{arr.name} has {arr.R} rows per PE; an upsampling stage needs "
                           "an even number: choose a taller image")
    last = None
    for U in (16, 8, 4, 2, 1):
        if arr.S % U or (need_even_x and U % 2):
            continue
        saved = (list(b.prog),)
        try:
            def mk(k: _Kernel, U=U):
                ev = _Eval(k, arr, U, RU)
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
                return _loads_first(ev.block)
            b.kernel(arr.R // RU, arr.S // U, mk)
            b.kernels_done.append(f"{arr.name}: compute {arr.R}x{arr.S} vectors, "
                                  f"unroll {RU}x{U}")
            return
        except CompileError as e:
            b.prog = saved[0]
            last = e
    raise last or CompileError(f"{arr.name}: no unroll factor divides {arr.S} vectors")


def _x_halo(b: _Builder, arr: Array) -> None:
    if not (arr.hxl or arr.hxr):
        return
    S, pitch = arr.S, arr.pitch
    zero = b.const_reg[0]

    def mk(k: _Kernel):
        ev = _Eval(k, arr, 1, 1)
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
                          src2=zero, vec_mask=_ALL, simb_mask=b.all), dst=t, src1=ld(c0))
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


def _pe_mask(ip, pg: int, pe: int) -> int:
    return 1 << (pg * ip.pes_per_pg + pe)


def _y_halo(b: _Builder, arr: Array, nvaults: int) -> None:
    if not (arr.hyt or arr.hyb):
        return
    ip = b.ip
    ppg, pgs, pitch = ip.pes_per_pg, ip.pgs, arr.pitch
    gv = b.gv
    # (halo row, source row in the neighbour, neighbour direction)
    jobs = [(-e, arr.R - e, -1) for e in range(1, arr.hyt + 1)] + \
           [(arr.R - 1 + e, e - 1, +1) for e in range(1, arr.hyb + 1)]
    pg_area = ip.pgsm_lines
    if ppg > 1 and (ppg - 1) * pitch > pg_area:
        raise CompileError(f"{arr.name}'s halo rows ({pitch} vectors) do not fit the PGSM's "
                           f"{pg_area} lines for {ppg - 1} PEs; raise ipim.pgsm_bytes or "
                           "use a narrower image")
    vsm_cross = 0
    vsm_req = vsm_cross + (pgs - 1) * pitch
    vsm_end = vsm_req + len(jobs) * pitch
    if vsm_end > ip.vsm_lines - _SCRATCH_LINES:
        raise CompileError(f"{arr.name}'s halo exchange needs {vsm_end} VSM lines but the "
                           f"VSM has {ip.vsm_lines - _SCRATCH_LINES} free; raise "
                           "ipim.vsm_bytes or use a narrower image")
    # Remote rows: between two barriers, every vault fetches its neighbours' rows. The
    # phase ids name the buffer, so that stages folded into a loop stay identical.
    b.sync(2 * arr.base)
    for j, (_, src, d) in enumerate(jobs):
        nv = gv + d
        if 0 <= nv < nvaults:
            chip, v = divmod(nv, ip.vaults)
            pg, pe = (pgs - 1, ppg - 1) if d < 0 else (0, 0)
            for i in range(pitch):
                b.prog.append(Instr(Opcode.REQ, chip=chip, vault=v, pg=pg, pe=pe,
                                    dram=arr.addr(src, -arr.hxl) + i,
                                    vsm=vsm_req + j * pitch + i))
    b.sync(2 * arr.base + 1)
    for j, (dst, src, d) in enumerate(jobs):
        # C vectors of the row per block: first every read of the source row (bank ->
        # PGSM, bank -> DataRF), then the scratchpad moves, then every write of the halo
        # row, so that each bank sees runs of one row.
        cands = [c for c in range(min(pitch, 32), 0, -1) if pitch % c == 0]
        if not b.unroll_budget:       # a loop: a short body (its pointers are set up once)
            cands = [c for c in cands if c <= 4]
        last = None
        for C in cands:
            saved = list(b.prog)
            try:
                b.kernel(1, pitch // C, _halo_block(b, arr, j, dst, src, d, C, nvaults,
                                                    vsm_cross, vsm_req))
                break
            except CompileError as e:
                b.prog = saved
                last = e
        else:
            raise last
    b.kernels_done.append(f"{arr.name}: y halo {arr.hyt}+{arr.hyb} (PGSM, VSM, req)")


def _halo_block(b: _Builder, arr: Array, j: int, dst: int, src: int, d: int, C: int,
                nvaults: int, vsm_cross: int, vsm_req: int):
    """The body of one y-halo job (halo row *dst* from the neighbour's row *src*, the
    neighbour above for ``d < 0``), ``C`` vectors per iteration."""
    ip = b.ip
    ppg, pgs, pitch, gv = ip.pes_per_pg, ip.pgs, arr.pitch, b.gv

    def mk(k: _Kernel):
        reads: list[VInstr] = []
        moves: list[VInstr] = []
        writes: list[VInstr] = []
        edge = (0, 0) if d < 0 else (pgs - 1, ppg - 1)
        em = _pe_mask(ip, *edge)
        for c in range(C):
            srcp = k.ptr(arr.addr(src, -arr.hxl) + c, C, 0)
            dstp = k.ptr(arr.addr(dst, -arr.hxl) + c, C, 0)
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
                cp = k.ptr(arr.addr(0 if d < 0 else arr.R - 1, -arr.hxl) + c, C, 0)
                reads.append(VInstr(Instr(Opcode.LD_RF, dram=cp, dram_ind=1, simb_mask=em),
                                    {"drf": t3}))
            writes.append(VInstr(Instr(Opcode.ST_RF, dram=dstp, dram_ind=1, simb_mask=em),
                                 {"drf": t3}))
        k.finish_steps(pitch // C, 1)
        return reads + moves + writes

    return mk


# -- bank allocation and program assembly -------------------------------------------------

def _allocate_banks(g: _Graph) -> int:
    """Place the arrays in the banks, reusing the space of an array once every consumer
    of it has been computed (a chain of stages ping-pongs between two buffers, which
    makes its stages identical programs that :func:`_assemble` folds into a loop).
    Returns the vectors used."""
    order = g.order
    last_use = {id(a): i for i, a in enumerate(order)}
    for i, a in enumerate(order):
        body = g.bodies.get(id(a))
        if body is not None:
            for r in _refs(body):
                last_use[id(r.arr)] = max(last_use[id(r.arr)], i)
    free: list[tuple[int, int]] = []        # (base, size) of dead buffers
    live: list[tuple[int, Array]] = []
    top = 0
    for i, a in enumerate(order):
        for end, d in list(live):
            if end < i and d.func is not None:
                free.append((d.base, d.size))
                live.remove((end, d))
        fit = [f for f in free if f[1] >= a.size and a.func is not None]
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


def _reloc(seg: list[Instr], off: int) -> list[Instr]:
    return [dataclasses.replace(i, imm=i.imm + off)
            if i.opcode is Opcode.SETI_CRF and i.dst in (3, 4) else i for i in seg]


def _assemble(prologue: list[Instr], segments: list[list[Instr]]) -> list[Instr]:
    """The program: the prologue, then the segments (one per stage), where a run of
    identical pairs of segments (the ping-pong stages of a chain) becomes a loop on
    CtrlRF c5 (its target in c6)."""
    key = [tuple(s) for s in segments]
    out = list(prologue)
    i = 0
    n = len(segments)
    while i < n:
        reps = 1
        while i + 2 * reps + 1 < n + 0 and key[i + 2 * reps] == key[i] and \
                key[i + 2 * reps + 1] == key[i + 1]:
            reps += 1
        if reps >= 2:
            out.append(Instr(Opcode.SETI_CRF, dst=5, imm=reps))
            top = len(out) + 1
            out.append(Instr(Opcode.SETI_CRF, dst=6, imm=top))
            for seg in segments[i:i + 2]:
                out.extend(_reloc(seg, len(out)))
            out.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=5, src1=5, src2=0))
            out.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=5, target=6))
            i += 2 * reps
        else:
            out.extend(_reloc(segments[i], len(out)))
            i += 1
    out.append(Instr(Opcode.HALT))
    return out


# -- driver ----------------------------------------------------------------------------

def compile_pipeline(out: Func, size: tuple[int, int], cfg, opts: Options | None = None,
                     out_shape: tuple[int, int] | None = None) -> Program:
    """Compile *out* computed over ``size = (W, H)`` for *cfg*'s iPIM machine.

    Raises
    ------
    CompileError
        The pipeline, its schedule or its size does not fit the machine, with what
        to change.
    """
    ip = cfg.ipim
    opts = opts or Options()
    if out.update is not None:
        from .lower_hist import compile_histogram  # a reduction, lowered on its own

        return compile_histogram(out, size, cfg, opts)
    nvaults = ip.cubes * ip.vaults
    npe = nvaults * ip.pes
    W, H = size
    g = _Graph(out, W, H, npe)
    # Halos: how far each consumer reads beyond its producer's band.
    for a in g.order:
        body = g.bodies.get(id(a))
        if body is None:
            continue
        for r in _refs(body):
            p = r.arr
            xa, xb, xd = r.ax
            ya, yb, yd = r.ay
            p.hxl = max(p.hxl, -(xb // xd))
            p.hxr = max(p.hxr, (xa * (a.S - 1) + xb) // xd - (p.S - 1))
            p.hyt = max(p.hyt, -(yb // yd))
            p.hyb = max(p.hyb, (ya * (a.R - 1) + yb) // yd - (p.R - 1))
    for a in g.order:
        if a.func is None:       # an input: the host writes its halo with the band
            pass
        elif a.hxl > a.S or a.hxr > a.S:
            raise CompileError(f"{a.name}'s stencil reaches {max(a.hxl, a.hxr)} vectors "
                               f"sideways, more than its {a.S}-vector strips: use a wider image")
        elif a.hyt > a.R or a.hyb > a.R:
            raise CompileError(f"{a.name}'s stencil reaches {max(a.hyt, a.hyb)} rows up or "
                               f"down, more than the {a.R} rows of a PE's band: use a taller "
                               "image or fewer PEs")
    base = _allocate_banks(g)
    if base > ip.bank_vectors:
        raise CompileError(f"the pipeline's arrays need {base} vectors of each bank but a "
                           f"bank holds {ip.bank_vectors}; raise ipim.bank_bytes or use a "
                           "smaller image")
    consts: set[int] = {0}
    for a in g.order:
        body = g.bodies.get(id(a))
        if body is not None:
            _needs_consts(body, consts)
    consts_l = [0] + sorted(consts - {0})
    budgets = [ip.imem_instructions // d for d in (4, 16, 64)] if opts.unroll else []
    return _generate(g, ip, opts, nvaults, consts_l, budgets + [0], out_shape or (H, W))


def _generate(g: _Graph, ip, opts: Options, nvaults: int, consts_l: list[int],
              budgets: list[int], out_shape) -> Program:
    """Every vault's program; with the first unrolling budget whose program fits."""
    programs = {}
    kernels: list[str] = []
    budget = budgets[0]
    for gv in range(nvaults):
        b = _Builder(ip, opts, gv, consts_l)
        b.unroll_budget = budget
        prologue = b.prog
        segments = []
        for a in g.order:
            body = g.bodies.get(id(a))
            if body is None:
                continue
            b.prog = []
            b.lru = {}          # each stage starts alike, so that repeated stages fold
            _compute(b, a, body)
            if a is not g.out:
                _x_halo(b, a)
                _y_halo(b, a, nvaults)
            segments.append(b.prog)
        prog = _assemble(prologue, segments)
        if len(prog) > ip.imem_instructions and len(budgets) > 1:
            return _generate(g, ip, opts, nvaults, consts_l, budgets[1:], out_shape)
        if len(prog) > ip.imem_instructions:
            raise CompileError(f"vault {gv}'s program has {len(prog)} instructions but the "
                               f"program memory holds {ip.imem_instructions}; raise "
                               "ipim.imem_instructions or simplify the pipeline")
        programs[gv] = prog
        kernels = b.kernels_done
    inputs = {a.name: a for a in g.order if a.func is None}
    return Program(programs, inputs, g.out, g.order, out_shape, opts, kernels)


# -- data placement --------------------------------------------------------------------

def _to_u32(img: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == FP32:
        return np.ascontiguousarray(img, dtype=np.float32).view(np.uint32)
    return np.asarray(img, dtype=np.int64).astype(np.uint32)


def place(arr: Array, img: np.ndarray, ip) -> dict[tuple[int, int], np.ndarray]:
    """Every PE's band of *img* (``(H, W)``) with its halo (clamped at the image's edges),
    as ``(global vault, pe) -> uint32[vectors, 4]`` starting at ``arr.base``."""
    if img.shape != (arr.H, arr.W):
        raise CompileError(f"input {arr.name} must be {arr.H}x{arr.W} (rows x cols), not "
                           f"{img.shape[0]}x{img.shape[1]}")
    u = _to_u32(img, arr.dtype)
    rows = np.arange(-arr.hyt, arr.R + arr.hyb)
    cols = np.arange(-arr.hxl, arr.S + arr.hxr)
    out = {}
    npe = arr.H // arr.R
    for g in range(npe):
        ys = np.clip(g * arr.R + rows, 0, arr.H - 1)
        xs = np.clip(np.arange(LANES)[None, :] * arr.S + cols[:, None], 0, arr.W - 1)
        block = u[ys[:, None, None], xs[None, :, :]]      # [rows, cols, lanes]
        out[divmod(g, ip.pes)] = block.reshape(-1, LANES)
    return out


def gather(arr: Array, fetch: Callable[[int, int, int, int], np.ndarray], ip) -> np.ndarray:
    """The ``(H, W)`` image of *arr* from ``fetch(global vault, pe, base, n)``
    (``uint32[n, 4]``)."""
    npe = arr.H // arr.R
    u = np.zeros((arr.H, arr.W), dtype=np.uint32)
    for g in range(npe):
        v, p = divmod(g, ip.pes)
        blk = fetch(v, p, arr.base, arr.size).reshape(arr.R + arr.hyt + arr.hyb, arr.pitch,
                                                      LANES)
        inner = blk[arr.hyt:arr.hyt + arr.R, arr.hxl:arr.hxl + arr.S, :]   # [r, k, lane]
        u[g * arr.R:(g + 1) * arr.R, :] = inner.transpose(0, 2, 1).reshape(arr.R, arr.W)
    return u.view(np.float32) if arr.dtype == FP32 else u.view(np.int32)
