"""Emitting SIMB code: the program builder, kernels, the expression evaluator, assembly.

Every lowering (:mod:`.lower` for stencil and resampling pipelines, :mod:`.lower_grid` for
grids, :mod:`.lower_hist` for the histogram) writes its kernels through these parts: a
:class:`Builder` holds one vault's program and its registers, a :class:`Kernel` is one
loop nest whose body is a basic block (scheduled by :mod:`.backend`), an
:class:`Evaluator` turns an expression tree into that body, and :func:`assemble` joins
the segments into the program. The expression nodes the lowering adds to
:mod:`.lang`'s (:class:`ArrayRef`, :class:`GridRead`, :class:`TableRead`,
:class:`ByParity`) are defined here, beside the evaluator that emits them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pimforge.rtl.ipim.isa import (
    LANES,
    RESERVED_ARF,
    AluOp,
    Cond,
    DType,
    Instr,
    Mode,
    Opcode,
)

from . import spill  # noqa: F401 (registers the backend's spilling; see .spill)
from .backend import (
    Block,
    DataRFFull,
    Options,
    VInstr,
    block_key,
    code_len,
    may_alias,
    schedule_block,
)
from .lang import (
    FP32,
    INT32,
    Bin,
    Cast,
    CompileError,
    Const,
    Expr,
    Reinterpret,
    Select,
    children,
    nodes,
)
from .layout import ALL_LANES, SCRATCH_LINES, Array, f32_bits

__all__ = ["ArrayRef", "Builder", "ByParity", "Evaluator", "GridRead", "Kernel", "TableRead",
           "assemble", "at_step", "const_bits", "copy_kernel", "count_consts", "fill",
           "loads_first", "needs_consts", "reads", "array_refs", "reloc", "C_M31", "C_MAGIC_F",
           "C_MAGIC_I", "MIN_FREE", "VaultCode", "check_fits", "trial_code"]


@dataclass(eq=False)
class ArrayRef(Expr):
    """A read of a root array at ``(x, y)`` forms relative to the consumer; *lane*: the
    channel of a replicated array with channels in its lanes, broadcast to all four."""

    arr: Array
    ax: tuple[int, int, int]
    ay: tuple[int, int, int]
    lane: int | None = None

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.arr.dtype


@dataclass(eq=False)
class GridRead(Expr):
    """A read of channel *lane* of the grid *arr* at the cell ``(ix, iy, iz)`` computed by
    each pixel (INT32 values): four indirect loads, one per lane's address."""

    arr: Array
    ix: Expr
    iy: Expr
    iz: Expr
    lane: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.arr.dtype

    def kids(self) -> tuple:
        return (self.ix, self.iy, self.iz)

    def consts(self) -> tuple[int, int, int]:
        """``(pitch, nz, offset)``: the cell's address is ``iy*pitch + ix*nz + iz + offset``."""
        a = self.arr
        xlo, _, ylo, _, zlo, nz = a.box
        off = a.base + a.hyt * a.pitch + a.hxl - ylo * a.pitch - xlo * nz - zlo
        return a.pitch, nz, off & 0xFFFF_FFFF


@dataclass(eq=False)
class TableRead(Expr):
    """Entry ``index + offset`` of the constant table *arr* (four entries per vector): per
    lane, the vector ``(index >> 2) + offset/4`` loaded through an AddrRF entry, then
    the entry ``index & 3`` of it picked by masks (Table I has no lane shuffle)."""

    arr: Array
    index: Expr
    offset: int
    dtype: str = FP32

    def kids(self) -> tuple:
        return (self.index,)

    def consts(self) -> set[int]:
        return {(-2) & 0xFFFF_FFFF, 1, 2, 3, C_M31,
                (self.arr.addr(0, 0) + self.offset // LANES) & 0xFFFF_FFFF}


@dataclass(eq=False)
class ByParity(Expr):
    """*even* at even, *odd* at odd columns (``axis`` 0) or rows (1) of the kernel's
    output: a resampling kernel makes two per step, so the choice is made in the
    compiler."""

    axis: int
    even: Expr
    odd: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.even.dtype

    def kids(self) -> tuple:
        return (self.even, self.odd)


def array_refs(e: Expr) -> list[ArrayRef]:
    return [n for n in nodes(e) if isinstance(n, ArrayRef)]


def reads(e: Expr) -> list[Array]:
    """The arrays *e* reads (stencil taps and gathers)."""
    return [n.arr for n in nodes(e) if isinstance(n, ArrayRef | GridRead | TableRead)]


def const_bits(c: Const) -> int:
    if c.dtype == FP32:
        return f32_bits(c.value)
    return int(c.value) & 0xFFFF_FFFF


#: Constants the lowering of select, casts and shifts uses.
C_M31 = (-31) & 0xFFFF_FFFF


C_MAGIC_I = 0x4B00_0000


C_MAGIC_F = f32_bits(8388608.0)

#: DataRF entries a vault leaves its kernels at least: the constants beyond them live in
#: the VSM (:class:`Builder`)
MIN_FREE = 8


class Builder:
    """Builds one vault's program."""

    def __init__(self, ip, opts: Options, gvault: int, consts: list[int],
                 uses: dict[int, int] | None = None):
        self.ip = ip
        self.opts = opts
        self.gv = gvault
        #: a kernel is unrolled with direct addresses when its code stays below this
        self.unroll_budget = 0
        #: loops with the shortest bodies (a long pipeline's last resort for the imem)
        self.compact = False
        #: innermost loops software-pipelined where they can be (:meth:`_pipelined`)
        self.pipeline = False
        #: blocks the DataRF cannot hold spill values to the bank (:mod:`.spill`); set by
        #: a kernel's last try, so that a kernel spills only where nothing else fits
        self.spill = False
        #: the bank vector from which spilled values are kept (above the arrays); None:
        #: no kernel spills
        self.spill_base: int | None = None
        #: kernels are being tried in several forms (unrolling, sliding windows): one
        #: that does not fit fails instead of spilling
        self.no_spill = False
        #: kernels made with spilling blocks
        self.spilled = 0
        #: register-use history of the max allocator within the current segment
        self.lru: dict[int, int] = {}
        #: the code selected so far: instructions, and :class:`Block` s for the backend
        self.prog: list[Instr | Block] = []
        self.kernels_done: list[str] = []
        n = ip.drf_entries
        # DataRF: [0] scratch for AddrRF set-up, [1..] constants, the rest for kernels.
        self.scratch = 0
        kept = consts
        if 1 + len(consts) + MIN_FREE > n:
            # Too many constants: the DataRF keeps the most used (0 always: the lowering
            # names its entry) and MIN_FREE entries for kernels; each other constant
            # lives in a VSM line of its own below the scratch lines, and a block that
            # uses it reads it into a register (Evaluator.cst).
            room = n - 1 - MIN_FREE
            if room < 1:
                least = 16 << (MIN_FREE + 1).bit_length()    # a power of two above
                raise CompileError(f"the DataRF's {n} entries leave fewer than {MIN_FREE} "
                                   "for kernels beside the constant 0; raise ipim.drf_bytes "
                                   f"to {least} or more")
            rank = sorted(consts, key=lambda c: (c != 0, -(uses or {}).get(c, 0), c))
            kept = [c for c in consts if c in rank[:room]]
        self.const_reg = {c: 1 + i for i, c in enumerate(kept)}
        self.vsm_scratch = ip.vsm_lines - 1      # and the SCRATCH_LINES - 1 below it
        #: the VSM line of each constant the DataRF does not keep
        self.const_line = {c: self.vsm_scratch - SCRATCH_LINES - i
                           for i, c in enumerate(c for c in consts if c not in self.const_reg)}
        self.free = list(range(1 + len(kept), n))
        if self.vsm_free < 1:
            raise CompileError(f"the VSM's {ip.vsm_lines} lines hold no more than the "
                               f"{len(self.const_line)} constants the DataRF does not keep; "
                               "raise ipim.vsm_bytes or ipim.drf_bytes")
        self.all = (1 << ip.pes) - 1
        for n, (c, r) in enumerate(self.const_reg.items()):
            line = self.vsm_scratch - n % SCRATCH_LINES
            self.prog.append(Instr(Opcode.SETI_VSM, vsm=line, vec_mask=ALL_LANES, imm=c))
            self.prog.append(Instr(Opcode.RD_VSM, vsm=line, drf=r, simb_mask=self.all))
        for c, line in self.const_line.items():
            self.prog.append(Instr(Opcode.SETI_VSM, vsm=line, vec_mask=ALL_LANES, imm=c))
        self.prog.append(Instr(Opcode.SETI_CRF, dst=0, imm=1))

    @property
    def vsm_free(self) -> int:
        """VSM lines below the scratch lines and the constants' lines, for the kernels."""
        return self.ip.vsm_lines - SCRATCH_LINES - len(self.const_line)

    @contextmanager
    def trying(self, on: bool = True) -> Iterator[None]:
        """Within it (where *on*), a kernel the DataRF cannot hold fails instead of
        spilling: the caller is trying several forms of it, and spills only where none
        fits (:meth:`may_spill`)."""
        saved = self.no_spill
        self.no_spill = saved or on
        try:
            yield
        finally:
            self.no_spill = saved

    def may_spill(self) -> bool:
        """Whether a kernel made now may spill (:meth:`kernel`)."""
        return self.spill_base is not None and not self.no_spill and not self.spill

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
            line = self.vsm_scratch - n % SCRATCH_LINES
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
            self.prog.append(self.block(block))

    def block(self, block: list[VInstr], ranges: dict[int, tuple[int, int]] | None = None,
              window: list[int] | None = None, parts: tuple[int, ...] | None = None
              ) -> Block:
        """*block* as a :class:`Block` for the backend passes, measured by scheduling it
        (:func:`~.backend.schedule_block`, which continues the register-use history)."""
        lru = dict(self.lru)
        base = self.spill_base if self.spill else None
        key = block_key(block, self.free, self.ip, self.opts, lru, ranges, window, parts, base)
        n = len(schedule_block(block, self.free, self.ip, self.opts, self.lru, ranges, window,
                               key, parts, base))
        return Block(tuple(block), tuple(self.free), lru, ranges,
                     None if window is None else tuple(window), n, key=key, parts=parts,
                     spill_base=base)

    def pc(self) -> int:
        """The current segment's length in instructions."""
        return code_len(self.prog)

    # -- loops ---------------------------------------------------------------------

    def kernel(self, rows: int, segs: int,
               body: Callable[[Kernel], list[VInstr]]) -> None:
        """Emit ``rows x segs`` iterations of the block *body* builds. A kernel whose
        block the DataRF cannot hold is made again with its blocks spilling
        (:mod:`.spill`), where :attr:`spill_base` is set and no caller is trying other
        forms of it (:attr:`no_spill`)."""
        start, lru = len(self.prog), dict(self.lru)
        try:
            self._kernel(rows, segs, body)
        except DataRFFull:
            if not self.may_spill():
                raise
            del self.prog[start:]
            self.lru = lru
            self.spill = True
            try:
                self._kernel(rows, segs, body)
            finally:
                self.spill = False
            self.spilled += 1

    def _kernel(self, rows: int, segs: int,
                body: Callable[[Kernel], list[VInstr]]) -> None:
        k = Kernel(self)
        block = body(k)
        if not block:
            return
        if k.warm:              # a sliding window: only as a software-pipelined loop
            self._loop(k, block, rows, segs)
            return
        if self.compact and self._unrollable(k, block):
            # the shorter of the loop and the unrolled code (a tiny array's loop is
            # mostly pointer set-up)
            start, lru = len(self.prog), dict(self.lru)
            self._loop(k, block, rows, segs)
            if rows * segs * len(block) < code_len(self.prog[start:]):
                loop, loop_lru = self.prog[start:], self.lru
                del self.prog[start:]
                self.lru = lru
                self._unrolled(k, block, rows, segs)
                if code_len(self.prog[start:]) > code_len(loop):
                    self.prog[start:] = loop
                    self.lru = loop_lru
            return
        if self._direct(k, block, rows * segs):
            self._unrolled(k, block, rows, segs)
            return
        self._loop(k, block, rows, segs)

    def _unrolled(self, k: Kernel, block: list[VInstr], rows: int, segs: int) -> None:
        # Unrolled, with every pointer replaced by the address it holds in that
        # iteration: no AddrRF arithmetic, and the core tracks direct scratchpad
        # accesses per address, indirect ones as the whole scratchpad. With reordering, the
        # iterations are scheduled as one window (their virtual registers renamed
        # apart), so that the loads of an iteration issue while the one before
        # computes and stores; the DataRF's free entries bound how far ahead.
        its = [[at_step(vi, k.ptrs, r, sg if segs > 1 else 0) for vi in block]
               for r in range(rows) for sg in range(segs)]
        if not self.opts.reorder or len(its) == 1:
            for it in its:
                self.prog.append(self.block(it))
            return
        self.prog.append(self.block(rename_apart(its), window=[n for n, it in enumerate(its)
                                                              for _ in it]))

    def _set_ptrs(self, k: Kernel, back: dict[int, int] | None = None) -> None:
        """Set *k*'s pointers and steps (each pointer of *back* that many addresses
        before its first access: a pipelined loop steps it before the access)."""
        arf = {}
        for reg, (init, _, _) in k.ptrs.items():
            arf[reg] = init - (back or {}).get(reg, 0)
        for val, reg in k.steps.items():
            arf[reg] = val
        self.set_arf(arf)
        if k.setup:             # per-PE adjustments of the pointers (a PE's share)
            self.prog.append(self.block(k.setup))

    def _loop(self, k: Kernel, block: list[VInstr], rows: int, segs: int) -> None:
        incs = []
        if segs > 1:
            for reg, (_, seg, _) in k.ptrs.items():
                if seg:
                    incs.append(VInstr(Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=reg, src1=reg,
                                             src2=k.steps[seg], simb_mask=self.all)))
        row_incs = []
        warm_ptrs = {vi.ins.dram for vi in block if vi.ins.opcode is Opcode.LD_RF}
        for reg in k.ptrs:
            adj = k.row_adjust(reg, segs, warm_ptrs)
            if rows > 1 and adj:
                row_incs.append(VInstr(Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=reg, src1=reg,
                                             src2=k.steps[adj], simb_mask=self.all)))
        inner = block + incs
        if segs == 1:
            inner = inner + row_incs
        spans = ptr_spans(k, block, rows, segs)
        if self.pipeline:
            start, lru = len(self.prog), dict(self.lru)
            if self._pipelined(k, block, incs if segs > 1 else row_incs, spans, rows, segs,
                               row_incs):
                return
            del self.prog[start:]
            self.lru = lru
        if k.warm:
            raise CompileError("a sliding window needs its loop software-pipelined")
        self._set_ptrs(k)
        code = self.block(inner, spans)
        P = self.prog
        # c3/c4 hold pcs relative to the segment (relocated by assemble)
        if rows > 1:
            P.append(Instr(Opcode.SETI_CRF, dst=2, imm=rows))
            row_top = code_len(P) + 1
            P.append(Instr(Opcode.SETI_CRF, dst=4, imm=row_top))
        if segs > 1:
            P.append(Instr(Opcode.SETI_CRF, dst=1, imm=segs))
            seg_top = code_len(P) + 1
            P.append(Instr(Opcode.SETI_CRF, dst=3, imm=seg_top))
        P.append(code)
        if segs > 1:
            P.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=1, src1=1, src2=0))
            P.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=1, target=3))
            if rows > 1 and row_incs:
                P.append(self.block(row_incs))
        if rows > 1:
            P.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=2, src1=2, src2=0))
            P.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=2, target=4))

    def _pipelined(self, k: Kernel, block: list[VInstr], incs: list[VInstr],
                   spans: dict[int, tuple[int, int]], rows: int, segs: int,
                   row_incs: list[VInstr]) -> bool:
        """The innermost loop of *k* software-pipelined, if it can be: the loads of
        trip k + 1 issued while trip k computes and trip k - 1 stores (Sec. V-C's
        reordering across the loop's trips, as a window of unrolled iterations has it
        within the window). Emits the loop and returns True, or emits nothing and
        returns False.

        The body's instructions go in three stages: 0 the loads (and their pointers'
        steps), 2 the stores of computed values (and theirs), 1 the rest (with the
        stores of loaded values, a copy's). The loop becomes one :class:`Block` of a
        prologue (trip 0's stages 0 and 1, trip 1's stage 0), the body run
        ``trips - 2`` times (trip k - 1's stage 2, trip k's stage 1, trip k + 1's stage 0)
        and an epilogue (trip N - 2's stage 2, trip N - 1's stages 1 and 2), with the
        loop's counter and jump between them. A value keeps its virtual register in
        every copy, and is reloaded only after its last read
        (:func:`~.backend.allocate_loop` holds it in one entry). The pointers of the
        loads and stores step before their accesses (each set one step back), so that
        a step does not wait for the access before it, which holds its pointer until
        it is done.

        It can be when the loop runs three trips or more, every bank load goes
        through a loop pointer that only loads use and the loop alone steps, no
        store writes what a load of one or two trips later reads (exact, over the
        pointers' steps), no value is read two stages after it is made, and the
        DataRF holds the carried values beside each part's own.
        """
        trips, ctr, top = (segs, 1, 3) if segs > 1 else (rows, 2, 4)
        if trips < 2 or k.setup or (k.warm and segs < 2):
            return False
        lds = [vi for vi in block if vi.ins.opcode is Opcode.LD_RF]
        if not lds:
            return False
        lptr = {vi.ins.dram for vi in lds}
        for vi in block:
            i = vi.ins
            if i.opcode is Opcode.LD_RF:
                if not i.dram_ind or i.dram not in spans:
                    return False
            elif i.opcode in (Opcode.LD_PGSM, Opcode.ST_RF, Opcode.ST_PGSM):
                span = spans.get(i.dram) if i.dram_ind else (i.dram, i.dram)
                if (i.dram_ind and i.dram in lptr) or span is None:
                    return False
                if any(may_alias(span, spans[p]) for p in lptr) and (
                        i.opcode is not Opcode.ST_RF or not i.dram_ind or
                        _overtakes(k, lptr, i.dram, rows, segs)):
                    return False
            elif lptr & {i.dst, i.src1, i.src2, i.arf} and i.opcode in (
                    Opcode.CALC_ARF, Opcode.MOV_ARF, Opcode.MOV_DRF):
                return False
        sptr = {vi.ins.dram for vi in block if vi.ins.opcode is Opcode.ST_RF and vi.ins.dram_ind}
        # stages: 0 the loads (and their pointers' steps), 2 the stores through loop
        # pointers (and theirs), 1 the rest
        if trips < 3:
            return False

        # a store of a loaded value (a copy) goes a stage after the load, as computation
        # does; a store of a computed value a stage after that
        made = {v: 0 for vi in lds for v in vi.defs()}
        st_of: dict[int, int] = {}
        for vi in block:
            if vi.ins.opcode is Opcode.ST_RF and vi.ins.dram_ind:
                st_of[vi.ins.dram] = max(st_of.get(vi.ins.dram, 1),
                                         2 if any(made.get(v, 1) for v in vi.uses()) else 1)

        def stage(vi: VInstr) -> int:
            i = vi.ins
            if i.opcode is Opcode.LD_RF or (i.opcode is Opcode.CALC_ARF and i.dst in lptr):
                return 0
            if (i.opcode is Opcode.ST_RF and i.dram_ind) or (
                    i.opcode is Opcode.CALC_ARF and i.dst in sptr):
                return st_of[i.dram if i.opcode is Opcode.ST_RF else i.dst]
            return 1

        # the loads' and stores' pointers step before their accesses (each set one step
        # back), so that a step does not wait for the access before it to be done
        moved = [vi for vi in incs if vi.ins.dst in lptr | sptr]
        staged = [(stage(vi), vi) for vi in moved + block] + \
            [(1, vi) for vi in incs if vi.ins.dst not in lptr | sptr]
        made = {v: st for st, vi in staged for v in vi.defs()}
        if any(not 0 <= st - made.get(v, st) <= 1 for st, vi in staged for v in vi.uses()):
            return False        # a value read two stages on would need a second register
        by = [[vi for st, vi in staged if st == n] for n in range(3)]
        if k.warm and any(vi.ins.opcode not in (Opcode.LD_RF, Opcode.CALC_ARF) for vi in by[0]):
            return False
        # a sliding window's warm-up trips step the loads' pointers too
        back = {vi.ins.dst: k.ptrs[vi.ins.dst][1 if segs > 1 else 2]
                * (1 + (len(k.warm) if vi.ins.dst in lptr else 0)) for vi in moved}
        self._set_ptrs(k, back)
        # prologue: [a sliding window's warm-up trips: L(j), W(j)], L(0), C(0), L(1);
        # body: S(k-1), C(k), L(k+1); epilogue: S(N-2), C(N-1), S(N-1). A value keeps its
        # virtual register in every copy: the allocation holds it where it is live.
        warm = [vi for w in k.warm for vi in by[0] + w]
        pro = warm + by[0] + by[1] + by[0]
        body = by[2] + by[1] + by[0]
        epi = by[2] + by[1] + by[2]
        ctl_in = [VInstr(Instr(Opcode.SETI_CRF, dst=ctr, imm=trips - 2)),
                  VInstr(Instr(Opcode.SETI_CRF, dst=top, imm=0))]     # pc set below
        latch = [VInstr(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=ctr, src1=ctr, src2=0)),
                 VInstr(Instr(Opcode.CJUMP, cond=Cond.NZ, src=ctr, target=top))]
        P = self.prog
        if segs > 1 and rows > 1:
            P.append(Instr(Opcode.SETI_CRF, dst=2, imm=rows))
            P.append(Instr(Opcode.SETI_CRF, dst=4, imm=code_len(P) + 1))
        # c3/c4 hold pcs relative to the segment (relocated by assemble)
        ctl_in[1] = VInstr(Instr(Opcode.SETI_CRF, dst=top, imm=code_len(P) + len(pro) + 2))
        whole = pro + ctl_in + body + latch + epi
        parts = (len(pro), 2, len(body), 2, len(epi))
        # the trip each instruction belongs to, for memory-order enforcement
        window = [0] * len(warm) + \
            [0] * len(by[0]) + [0] * len(by[1]) + [1] * len(by[0]) + [0, 0] + \
            [0] * len(by[2]) + [1] * len(by[1]) + [2] * len(by[0]) + [0, 0] + \
            [0] * len(by[2]) + [1] * len(by[1]) + [1] * len(by[2])
        try:
            code = self.block(whole, spans, window, parts)
        except CompileError:
            return False
        P.append(code)
        if segs > 1 and rows > 1:
            if row_incs:
                P.append(self.block(row_incs))
            P.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=2, src1=2, src2=0))
            P.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=2, target=4))
        return True

    def _direct(self, k: Kernel, block: list[VInstr], iters: int) -> bool:
        if self.unroll_budget < iters * len(block):
            return False
        return self._unrollable(k, block)

    @staticmethod
    def _unrollable(k: Kernel, block: list[VInstr]) -> bool:
        if k.setup:
            return False
        for vi in block:        # a pointer read as a value (not an address) needs the loop
            i = vi.ins
            if i.opcode in (Opcode.CALC_ARF, Opcode.MOV_DRF) and \
                    {i.src1, i.src2, i.arf} & set(k.ptrs):
                return False
        return True

    def sync(self, phase: int) -> None:
        self.prog.append(Instr(Opcode.SYNC, phase=phase & 0xFFFF))


def ptr_spans(k: Kernel, block: list[VInstr], rows: int, segs: int
              ) -> dict[int, tuple[int, int]]:
    """The bank addresses each pointer of *k* takes over the ``rows x segs`` iterations
    of its loop (at ``init + sg * seg + r * row``), for the backend's alias analysis.
    A pointer the kernel adjusts per PE (``setup``) or that the body writes is left
    out: it may touch the whole bank."""
    if k.setup:
        return {}
    written = set()
    for vi in block:
        i = vi.ins
        if i.opcode in (Opcode.CALC_ARF,):
            written.add(i.dst)
        elif i.opcode is Opcode.MOV_ARF:
            written.add(i.arf)
    out = {}
    for reg, (init, seg, row) in k.ptrs.items():
        if reg in written:
            continue
        ends = [init + a * seg + b * row for a in {0, max(segs - 1, 0)}
                for b in {0, max(rows - 1, 0)}]
        out[reg] = (min(ends), max(ends))
    return out


def _overtakes(k: Kernel, lptr: set[int], sp: int, rows: int, segs: int) -> bool:
    """Whether a load of *k*'s pipelined loop may read what the store through pointer
    *sp* writes one or two trips before (the loads of trip j issue before the stores
    of trips j - 1 and j - 2), within one run of the inner loop: exact, over every
    trip and outer iteration (the loop's pointers step by constants)."""
    trips, outer = (segs, rows) if segs > 1 else (rows, 1)
    si, sseg, srow = k.ptrs[sp]
    sstep = sseg if segs > 1 else srow
    for lp in lptr:
        li, lseg, lrow = k.ptrs[lp]
        lstep = lseg if segs > 1 else lrow
        for d in (1, 2):
            for r in range(outer):
                base = li - si + r * (lrow - srow if segs > 1 else 0) + d * sstep
                if lstep == sstep:
                    if base == 0:
                        return True
                elif any(base + j * (lstep - sstep) == 0 for j in range(d, trips)):
                    return True
    return False


def rename_apart(its: list[list[VInstr]]) -> list[VInstr]:
    """The iterations *its* as one block, each iteration's virtual registers renamed to
    numbers of their own."""
    out: list[VInstr] = []
    names: dict[tuple[int, int], int] = {}
    for n, it in enumerate(its):
        for vi in it:
            if vi.vregs:
                vr = {f: names.setdefault((n, v), len(names) + 1) for f, v in vi.vregs.items()}
                vi = VInstr(vi.ins, vr)
            out.append(vi)
    return out


def at_step(vi: VInstr, ptrs: dict[int, tuple[int, int, int]], r: int, sg: int) -> VInstr:
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


class Kernel:
    """Pointers and step constants of one kernel, and virtual registers."""

    def __init__(self, b: Builder):
        self.b = b
        self.ptrs: dict[int, tuple[int, int, int]] = {}
        self._ptr_of: dict[tuple[int, int, int], int] = {}
        self.steps: dict[int, int] = {}
        self._next_arf = RESERVED_ARF
        self._v = 0
        #: instructions run once after the pointers are set, before a loop
        self.setup: list[VInstr] = []
        #: AddrRF entries of gathers' computed addresses, reused in turn
        self.garfs: list[int] = []
        self._gnext = 0
        #: a sliding window's warm-up trips (:mod:`.sliding`): each one's computation,
        #: run after that trip's loads, before the software-pipelined loop's first trip;
        #: the loads' pointers step once more per warm-up trip
        self.warm: list[list[VInstr]] = []

    def garf(self, pool: int = 8) -> int:
        """An AddrRF entry for a computed address (the pool's entries reused in turn: the
        core orders a reuse after the last read of the old address)."""
        if len(self.garfs) < pool:
            self.garfs.append(self._arf())
        r = self.garfs[self._gnext % len(self.garfs)]
        self._gnext += 1
        return r

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

    def row_adjust(self, reg: int, segs: int, loads: set[int] | None = None) -> int:
        """The step of pointer *reg* from its last inner trip to the next outer trip's
        first (*loads*: the pointers the warm-up trips step too)."""
        _, seg, row = self.ptrs[reg]
        steps = (segs if segs > 1 else 0) + (len(self.warm) if reg in (loads or ()) else 0)
        return row - steps * seg

    def finish_steps(self, segs: int, rows: int, loads: set[int] | None = None) -> None:
        """The step constants the loop needs (*loads*: as :meth:`row_adjust`)."""
        need = set()
        for reg, (_, seg, _) in self.ptrs.items():
            if segs > 1 and seg:
                need.add(seg)
            adj = self.row_adjust(reg, segs, loads)
            if rows > 1 and adj:
                need.add(adj)
        for v in sorted(need):
            if v not in self.steps:
                self.steps[v] = self._arf()

    def v(self) -> int:
        self._v += 1
        return self._v


class Evaluator:
    """*ymajor*: the kernel's inner loop walks the rows (a column strip of ``U`` vectors
    per outer trip), so a load's pointer steps a row per inner trip. *keep*: ids of
    nodes whose values must stay in their registers (a sliding window's carried and
    fresh values: no ``mac`` accumulates into them)."""

    def __init__(self, k: Kernel, arr: Array, U: int, RU: int, *, ymajor: bool = False):
        self.k = k
        self.arr = arr
        self.U = U
        self.RU = RU
        self.ymajor = ymajor
        self.keep: set[int] = set()
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
        """The DataRF entry that holds constant *bits* (one the DataRF keeps)."""
        return self.k.b.const_reg[bits]

    def cst(self, bits: int) -> tuple[str, int]:
        """Constant *bits* as an operand: ``("p", entry)`` where the DataRF keeps it, else
        a virtual register read once per block from its VSM line (``rd_vsm``, the line
        set by ``seti_vsm`` in the prologue), which the allocator holds or spills like
        any other value (a spilled constant is read from its line again)."""
        b = self.k.b
        if bits in b.const_reg:
            return ("p", b.const_reg[bits])
        key = ("const", bits)
        if key not in self.memo:
            d = self.k.v()
            self.emit(Instr(Opcode.RD_VSM, vsm=b.const_line[bits], simb_mask=self.mask),
                      drf=d)
            self.memo[key] = ("v", d)
        return self.memo[key]

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
            return self.cst(const_bits(e))
        if isinstance(e, ArrayRef):
            a = e.arr
            (xa, xb, xd), (ya, yb, yd) = e.ax, e.ay
            col = (xa * u + xb) // xd
            row = (ya * rr + yb) // yd
            seg = self.U * xa // xd
            rstep = self.RU * ya // yd * a.pitch
            init = a.addr(row, col)
            key = ("ld", init, seg, rstep)
            if key not in self.memo:
                p = self.k.ptr(init, rstep, seg) if self.ymajor else self.k.ptr(init, seg, rstep)
                d = self.k.v()
                self.emit(Instr(Opcode.LD_RF, dram=p, dram_ind=1, simb_mask=self.mask), drf=d)
                self.memo[key] = ("v", d)
            if e.lane is None:
                return self.memo[key]
            bkey = key + (e.lane,)
            if bkey not in self.memo:       # one channel of the lanes, broadcast
                t = self.k.v()
                self.emit(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, mode=Mode.SV,
                                lane=e.lane, src2=self.const(0), vec_mask=ALL_LANES,
                                simb_mask=self.mask), dst=t, src1=self.memo[key][1])
                self.memo[bkey] = ("v", t)
            return self.memo[bkey]
        if isinstance(e, GridRead):
            return self._gather(e, rr, u)
        if isinstance(e, TableRead):
            return self._lookup(e, rr, u)
        if isinstance(e, ByParity):
            return self.val(e.odd if (u, rr)[e.axis] % 2 else e.even, rr, u)
        if isinstance(e, Bin):
            if (e.op == "+" and e.dtype == FP32 and isinstance(e.b, Bin) and e.b.op == "*"
                    and isinstance(e.a, Bin | Select | Cast)
                    and self.refs.get(id(e.a)) == 1 and self.refs.get(id(e.b)) == 1
                    and id(e.a) not in self.keep and id(e.b) not in self.keep):
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
            va, vb = self.val(lt_a, rr, u), self.val(lt_b, rr, u)
            mkey = ("mask", c.a.dtype, va, vb)      # selects on one comparison share it
            if mkey not in self.memo:
                t = self.comp(AluOp.SUB, c.a.dtype, va, vb)
                self.memo[mkey] = self.comp(AluOp.SHIFT, INT32, ("v", t),
                                            self.cst(C_M31))
            m = self.memo[mkey]
            ta, fb = self.val(e.a, rr, u), self.val(e.b, rr, u)
            if c.op == "<=":
                ta, fb = fb, ta          # a <= b is !(b < a)
            x1 = self.comp(AluOp.XOR, INT32, ta, fb)
            x2 = self.comp(AluOp.AND, INT32, ("v", x1), ("v", m))
            return ("v", self.comp(AluOp.XOR, INT32, fb, ("v", x2)))
        if isinstance(e, Reinterpret):
            return self.val(e.a, rr, u)
        if isinstance(e, Cast):
            x = self.val(e.a, rr, u)
            if e.dtype == FP32:          # int -> float, 0 <= x < 2**23
                t = self.comp(AluOp.ADD, INT32, x, self.cst(C_MAGIC_I))
                return ("v", self.comp(AluOp.SUB, FP32, ("v", t),
                                       self.cst(C_MAGIC_F)))
            t = self.comp(AluOp.ADD, FP32, x, self.cst(C_MAGIC_F))
            ri = self.comp(AluOp.SUB, INT32, ("v", t), self.cst(C_MAGIC_I))
            f = self.comp(AluOp.SUB, FP32, ("v", t), self.cst(C_MAGIC_F))
            dlt = self.comp(AluOp.SUB, FP32, x, ("v", f))
            m = self.comp(AluOp.SHIFT, INT32, ("v", dlt), self.cst(C_M31))
            return ("v", self.comp(AluOp.ADD, INT32, ("v", ri), ("v", m)))
        raise CompileError(f"cannot lower {type(e).__name__}")

    def _gather(self, e: GridRead, rr: int, u: int):
        """Channel ``e.lane`` of the cells the four pixels of a vector name: each lane's cell
        address into the AddrRF (``mov_arf``), a load through it, and that lane of the cell
        moved into the pixel's lane (``comp`` in scalar-vector mode); the loads of a cell are
        shared by the reads of its channels."""
        key = ("gather", id(e.arr), id(e.ix), id(e.iy), id(e.iz), rr, u)
        if key not in self.memo:
            pitch, nz, off = e.consts()
            iy = self.comp(AluOp.MUL, INT32, self.val(e.iy, rr, u), self.cst(pitch))
            ix = self.val(e.ix, rr, u)
            if nz != 1:
                ix = ("v", self.comp(AluOp.MUL, INT32, ix, self.cst(nz)))
            t = self.comp(AluOp.ADD, INT32, ("v", iy), ix)
            t = self.comp(AluOp.ADD, INT32, ("v", t), self.val(e.iz, rr, u))
            t = self.comp(AluOp.ADD, INT32, ("v", t), self.cst(off))
            loads = []
            for j in range(LANES):
                a = self.k.garf()
                self.emit(Instr(Opcode.MOV_ARF, arf=a, lane=j, simb_mask=self.mask), drf=t)
                d = self.k.v()
                self.emit(Instr(Opcode.LD_RF, dram=a, dram_ind=1, simb_mask=self.mask), drf=d)
                loads.append(d)
            self.memo[key] = loads
        out = self.k.v()
        for j, d in enumerate(self.memo[key]):
            self.emit(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, mode=Mode.SV, lane=e.lane,
                          src2=self.const(0), vec_mask=ALL_LANES if j == 0 else 1 << j,
                          simb_mask=self.mask), dst=out, src1=d)
        return ("v", out)


    def _lookup(self, e: TableRead, rr: int, u: int):
        """Entry ``index + offset`` of a table (:class:`TableRead`): the index's vector number
        and lane masks once per index, then four indirect loads, each lane of them
        broadcast into the pixel's lane of four candidates, and the candidate of the
        entry's lane kept by the masks."""
        key = ("lookup", id(e.index), rr, u)
        if key not in self.memo:
            i = self.val(e.index, rr, u)
            q = self.comp(AluOp.SHIFT, INT32, i, self.cst((-2) & 0xFFFF_FFFF))
            s = self.comp(AluOp.AND, INT32, i, self.cst(3))
            masks = []
            for L in range(LANES):      # all ones where s == L: ((s ^ L) - 1) >> 31
                t = s if L == 0 else self.comp(AluOp.XOR, INT32, ("v", s), self.cst(L))
                t = self.comp(AluOp.SUB, INT32, ("v", t), self.cst(1))
                masks.append(self.comp(AluOp.SHIFT, INT32, ("v", t), self.cst(C_M31)))
            self.memo[key] = (q, masks)
        q, masks = self.memo[key]
        base = (e.arr.addr(0, 0) + e.offset // LANES) & 0xFFFF_FFFF
        a = self.comp(AluOp.ADD, INT32, ("v", q), self.cst(base))
        loads = []
        for j in range(LANES):
            r = self.k.garf()
            self.emit(Instr(Opcode.MOV_ARF, arf=r, lane=j, simb_mask=self.mask), drf=a)
            d = self.k.v()
            self.emit(Instr(Opcode.LD_RF, dram=r, dram_ind=1, simb_mask=self.mask), drf=d)
            loads.append(d)
        out = None
        for L in range(LANES):
            cand = self.k.v()
            for j, d in enumerate(loads):
                self.emit(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, mode=Mode.SV,
                                lane=L, src2=self.const(0),
                                vec_mask=ALL_LANES if j == 0 else 1 << j,
                                simb_mask=self.mask), dst=cand, src1=d)
            m = self.comp(AluOp.AND, INT32, ("v", cand), ("v", masks[L]))
            out = m if out is None else self.comp(AluOp.OR, INT32, ("v", out), ("v", m))
        return ("v", out)


def needs_consts(e: Expr, out: set) -> None:
    """Add to *out* the bit patterns of the constants *e* and its lowering use."""
    counts: dict[int, int] = {}
    count_consts(e, counts)
    out.update(counts)


def count_consts(e: Expr, counts: dict[int, int]) -> None:
    """Add to *counts* how many nodes of *e* use each constant (as its lowering does)."""
    for n in nodes(e):
        if isinstance(n, Const):
            cs: tuple | set = (const_bits(n),)
        elif isinstance(n, Select):
            cs = (C_M31,)
        elif isinstance(n, Cast):
            cs = (C_MAGIC_I, C_MAGIC_F, C_M31)
        elif isinstance(n, GridRead | TableRead):
            cs = set(n.consts())
        else:
            continue
        for c in cs:
            counts[c] = counts.get(c, 0) + 1


def loads_first(block: list[VInstr], k: Kernel | None = None) -> list[VInstr]:
    """The block's bank loads first, then its computation, then its stores (Fig. 3c: the
    input region of the outputs is loaded before they are computed). A block reads
    only arrays it does not write, so the loads move freely; the bank then sees runs
    of accesses to one array (row hits) instead of loads and stores alternating
    between rows, and memory-order enforcement keeps it that way. The loads go in
    address order, so that each DRAM row's loads come together (a
    stencil names its taps output by output, a column of taps at a time, and a tap
    column crosses image rows: a 3x3 blur's taps in naming order opened a DRAM row
    for every 2.8 accesses, in address order for every 8.6, 1.56x faster at 256x256)."""
    gat = k.garfs if k is not None else set()

    def first(vi: VInstr) -> bool:     # a gather's load waits for its computed address
        return vi.ins.opcode is Opcode.LD_RF and not (vi.ins.dram_ind and vi.ins.dram in gat)

    def addr(vi: VInstr) -> int:
        i = vi.ins
        return k.ptrs[i.dram][0] if i.dram_ind and k is not None else i.dram

    loads = sorted((vi for vi in block if first(vi)), key=addr)
    return loads + [vi for vi in block if not first(vi)]


def copy_kernel(b: Builder, rows: int, segs: int, pairs, step: tuple[int, int]) -> None:
    """``rows x segs`` iterations of copying one vector: *pairs* is a list of ``(source
    address, [destination addresses])`` at iteration (0, 0), every address advancing by
    ``step = (per seg, per row)``."""
    def mk(k: Kernel):
        loads, stores, naive = [], [], []
        for src, dsts in pairs:
            t = k.v()
            loads.append(VInstr(Instr(Opcode.LD_RF, dram=k.ptr(src, *step), dram_ind=1,
                                      simb_mask=b.all), {"drf": t}))
            naive.append(loads[-1])
            for d in dsts:
                stores.append(VInstr(Instr(Opcode.ST_RF, dram=k.ptr(d, *step, fresh=True),
                                           dram_ind=1, simb_mask=b.all), {"drf": t}))
                naive.append(stores[-1])
        k.finish_steps(segs, rows)
        # the loads first is an ordering of the lowering: without reordering (Fig. 12's
        # baseline1 and baseline3), each value is copied in the order it is named
        return loads + stores if b.opts.reorder else naive

    b.kernel(rows, segs, mk)


def fill(b: Builder, arr: Array) -> None:
    """The clamped edge of a replicated array: every column left of 0 and from ``W`` on
    (its halo and its even padding) copies column 0 or ``W - 1``, row by row; then every
    row above 0 and from ``H`` on copies row 0 or ``H - 1``, whole."""
    left = [arr.addr(0, c) for c in range(-arr.hxl, 0)]
    right = [arr.addr(0, c) for c in range(arr.W, arr.S + arr.hxr)]
    pairs = [(arr.addr(0, 0), left), (arr.addr(0, arr.W - 1), right)]
    if left or right:
        copy_kernel(b, arr.H, 1, [pr for pr in pairs if pr[1]], (0, arr.pitch))
    top = [arr.addr(r, -arr.hxl) for r in range(-arr.hyt, 0)]
    bot = [arr.addr(r, -arr.hxl) for r in range(arr.H, arr.R + arr.hyb)]
    pairs = [(arr.addr(0, -arr.hxl), top), (arr.addr(arr.H - 1, -arr.hxl), bot)]
    if top or bot:
        copy_kernel(b, 1, arr.pitch, [pr for pr in pairs if pr[1]], (1, 0))
    b.kernels_done.append(f"{arr.name}: edge {arr.hxl}+{arr.S + arr.hxr - arr.W} columns, "
                          f"{arr.hyt}+{arr.R + arr.hyb - arr.H} rows")


def reloc(seg: list[Instr], off: int) -> list[Instr]:
    return [dataclasses.replace(i, imm=i.imm + off)
            if i.opcode is Opcode.SETI_CRF and i.dst in (3, 4) else i for i in seg]


def assemble(prologue: list[Instr], segments: list[list[Instr]]) -> list[Instr]:
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
                out.extend(reloc(seg, len(out)))
            out.append(Instr(Opcode.CALC_CRF, op=AluOp.SUB, dst=5, src1=5, src2=0))
            out.append(Instr(Opcode.CJUMP, cond=Cond.NZ, src=5, target=6))
            i += 2 * reps
        else:
            out.extend(reloc(segments[i], len(out)))
            i += 1
    out.append(Instr(Opcode.HALT))
    return out


@dataclass
class VaultCode:
    """One vault's program as the backend passes see it: the prologue and one segment
    per stage, each a list of instructions and :class:`~.backend.Block` s."""

    prologue: list
    segments: list[list]


def trial_code(items: list, ip, opts: Options) -> list[Instr]:
    """*items* with every block scheduled in one call (:func:`~.backend.schedule_block`,
    memoized): the code the backend passes will make, for selection's measures."""
    out: list[Instr] = []
    for it in items:
        if isinstance(it, Block):
            out += schedule_block(list(it.vinstrs), list(it.free), ip, opts, dict(it.lru),
                                  it.ranges, None if it.window is None else list(it.window),
                                  it.key, it.parts, it.spill_base)
        else:
            out.append(it)
    return out


def check_fits(gv: int, n: int, ip, *, simplify: bool = True) -> None:
    """Raise :class:`CompileError` where vault *gv*'s program of *n* instructions
    exceeds the program memory (*simplify*: suggest simplifying the pipeline too)."""
    if n > ip.imem_instructions:
        raise CompileError(f"vault {gv}'s program has {n} instructions but the "
                           f"program memory holds {ip.imem_instructions}; raise "
                           "ipim.imem_instructions" + (" or simplify the pipeline"
                                                      if simplify else ""))
