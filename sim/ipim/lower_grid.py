"""Lowering the grids of :mod:`~pimforge.sim.ipim.lang` (``g[x, y, z, c]``) to SIMB: the
kernels of the arrays that :mod:`~pimforge.sim.ipim.lower` does not compute from a body.

A grid is replicated: every PE holds all of it, cell ``(x, y, z)`` one vector with the
channels in its lanes, the cells of a row of ``x`` and ``z`` in one row of the array
(``(x - xlo) * nz + z - zlo``), so that a stencil in ``x`` or ``z`` is a constant
offset and the grids' stencils are ordinary replicated kernels.

- *coord* arrays: a pixel's column (lane ``j`` of vector ``k`` holds ``j*S + k``) or
  row (PE ``g``'s band row ``r`` holds ``g*R + r``), for ``coord(x)``; written from
  ``seti_vsm`` lines (the row from one line per PE, read under a one-PE mask).
- the *table* of a scatter: for each cell column ``x`` and window offset ``r.x``, the
  address of the clamped input column ``clamp(x*s + r.x + b, 0, W - 1)`` in the
  replicated input (compile-time numbers, written the same way).
- the *scatter* ``g[x, y, zi] += (v0, v1, ...)``: every PE zeroes its grid, then walks
  the window rows ``Y = y*s + r.y + b`` (the loop's rows) and cell columns ``x`` (its
  segments), with the ``r.x`` of the window unrolled. The row's clamped input row and
  the cell's address are AddrRF arithmetic on the loop's pointers (``calc_arf``: the
  clamp by sign masks, the cell row by a shift); each pixel's column comes from the
  table (``mov_arf``); its bin ``zi`` is computed in the SIMD unit and moved into the
  AddrRF, and the cell is read, added to and written back through that indirect
  address. Every PE builds the whole grid from its own copy of the input (no
  reduction between PEs; the work is repeated in every PE). A cell's read waits for
  the write before it only where the compiler orders them (a computed address may
  touch any cell); the PE's request queue keeps the bank's accesses in that order.
"""

from __future__ import annotations

import math

from pimforge.rtl.ipim.isa import LANES, AluOp, DType, Instr, Mode, Opcode

from .backend import VInstr
from .emit import Builder, Evaluator, Kernel, fill
from .lang import CompileError, WCall, nodes
from .layout import ALL_LANES, SCRATCH_LINES, Array

__all__ = ["emit_grid_array"]


def emit_grid_array(b: Builder, a: Array, g) -> None:
    """Emit the kernels that make the array *a* (kind ``coord``, ``table`` or
    ``scatter``) of the pipeline graph *g*."""
    if a.kind == "coord":
        _coords(b, a)
    elif a.kind == "table":
        _table(b, a, g)
    else:
        _scatter(b, a, g)
        fill(b, a)


def _lines(b: Builder):
    n = 0
    while True:
        yield b.vsm_scratch - n % SCRATCH_LINES
        n += 1


def _const_vectors(b: Builder, vecs: list[tuple[list[int], list[tuple[int, int]]]]) -> None:
    """Write each ``(lanes, [(address, simb_mask), ...])``: four values through a VSM line
    into a register, then stored."""
    def mk(k: Kernel):
        blk: list[VInstr] = []
        line = _lines(b)
        for lanes, dsts in vecs:
            ln = next(line)
            if len(set(lanes)) == 1:
                blk.append(VInstr(Instr(Opcode.SETI_VSM, vsm=ln, vec_mask=ALL_LANES,
                                        imm=lanes[0] & 0xFFFF_FFFF)))
            else:
                for j, v in enumerate(lanes):
                    blk.append(VInstr(Instr(Opcode.SETI_VSM, vsm=ln, vec_mask=1 << j,
                                            imm=v & 0xFFFF_FFFF)))
            t = k.v()
            blk.append(VInstr(Instr(Opcode.RD_VSM, vsm=ln, simb_mask=b.all), {"drf": t}))
            for addr, mask in dsts:
                blk.append(VInstr(Instr(Opcode.ST_RF, dram=addr, simb_mask=mask), {"drf": t}))
        return blk

    b.kernel(1, 1, mk)


def _coords(b: Builder, a: Array) -> None:
    P = b.ip.pes
    if a.channel == 0:      # columns: the same in every row and every PE
        vecs = [([j * a.S + k for j in range(LANES)], [(a.addr(r, k), b.all)
                                                        for r in range(a.R)])
                for k in range(a.S)]
        _const_vectors(b, vecs)
    else:                   # rows: PE p of this vault holds band g = vault * P + p
        vecs = []
        for r in range(a.R):
            for p in range(P):
                y = (b.gv * P + p) * a.R + r
                vecs.append(([y] * LANES, [(a.addr(r, k), 1 << p) for k in range(a.S)]))
        _const_vectors(b, vecs)
    b.kernels_done.append(f"{a.name}: {a.R}x{a.S} vectors")


def _table(b: Builder, a: Array, g) -> None:
    grid = next(x for x in g.order if x.kind == "scatter" and a in x.srcs)
    _, _, wx, _, twin, _ = g.scatters[id(grid)]
    xlo, nx = grid.box[0], grid.box[1]
    q = a.W // nx
    vecs = []
    for i in range(nx):
        for h in range(q):
            cols = []
            for j in range(LANES):
                rx = min(h * LANES + j, wx.r.extent - 1)
                x = wx.cell.a * (xlo + i) + wx.cell.b + rx
                cols.append(twin.addr(0, min(max(x, 0), twin.W - 1)))
            vecs.append((cols, [(a.addr(0, i * q + h), b.all)]))
    _const_vectors(b, vecs)
    b.kernels_done.append(f"{a.name}: window columns of {nx} cells")


def _scatter(b: Builder, a: Array, g) -> None:
    zi, values, wx, wy, twin, tbl = g.scatters[id(a)]
    xlo, nx, ylo, ny, zlo, nz = a.box
    sy = wy.cell.a
    shift = sy.bit_length() - 1
    y0 = sy * ylo + wy.cell.b             # the first window row
    zero = b.const_reg[0]
    # zero the grid
    U = next(u for u in (16, 8, 4, 2, 1) if a.S % u == 0)

    def clear(k: Kernel):
        blk = [VInstr(Instr(Opcode.ST_RF, dram=k.ptr(a.addr(0, u), U, a.pitch, fresh=True),
                            dram_ind=1, simb_mask=b.all, drf=zero)) for u in range(U)]
        k.finish_steps(a.S // U, a.R)
        return blk

    b.kernel(a.R, a.S // U, clear)
    q = tbl.W // nx
    H = twin.H
    # the window rows are shared out among the first m PEs of the vault (lock-step: PE p
    # starts at row p * rows, from its peID and pgID), each into its own partial grid
    P = b.ip.pes
    m = math.gcd(P, ny * sy)
    rows = ny * sy // m
    msk = (1 << m) - 1

    def body(k: Kernel):
        ev = Evaluator(k, a, 1, 1)
        ev.mask = msk
        ye = k.ptr(y0, 0, 1)                          # the window row Y
        cell = k.ptr(a.addr(0, -zlo), nz, 0)          # cell (x, ylo, 0)
        cols = [k.ptr(tbl.addr(0, h), q, 0) for h in range(q)]

        def const(v: int) -> int:
            return k.ptr(v & 0xFFFF_FFFF, 0, 0)

        c_y0, c_m31, c_m1, c_hi = const(y0), const(-31), const(-1), const(H - 1)
        c_pin, c_sh, c_pg = const(twin.pitch), const(-shift), const(a.pitch)
        ty, tm, te, tc = k._arf(), k._arf(), k._arf(), k._arf()
        blk: list[VInstr] = []

        def calc(op, d, s1, s2, out=blk):
            out.append(VInstr(Instr(Opcode.CALC_ARF, op=op, dst=d, src1=s1, src2=s2,
                                    simb_mask=msk)))

        if m > 1:       # ye += (pgID * pes_per_pg + peID) * rows
            calc(AluOp.MUL, tm, 1, const(b.ip.pes_per_pg), k.setup)
            calc(AluOp.ADD, tm, tm, 0, k.setup)
            calc(AluOp.MUL, tm, tm, const(rows), k.setup)
            calc(AluOp.ADD, ye, ye, tm, k.setup)

        # the clamped input row: max(Y, 0) by the sign mask, then min(., H - 1)
        calc(AluOp.SHIFT, tm, ye, c_m31)
        calc(AluOp.XOR, tm, tm, c_m1)
        calc(AluOp.AND, ty, ye, tm)
        calc(AluOp.SUB, te, c_hi, ty)
        calc(AluOp.SHIFT, tm, te, c_m31)
        calc(AluOp.AND, te, te, tm)
        calc(AluOp.ADD, ty, ty, te)
        calc(AluOp.MUL, ty, ty, c_pin)
        # the cell row: (Y - y0) >> log2(s), at the grid's pitch, plus the cell column
        calc(AluOp.SUB, tc, ye, c_y0)
        calc(AluOp.SHIFT, tc, tc, c_sh)
        calc(AluOp.MUL, tc, tc, c_pg)
        calc(AluOp.ADD, tc, tc, cell)
        tv = []
        for h in range(q):
            t = k.v()
            blk.append(VInstr(Instr(Opcode.LD_RF, dram=cols[h], dram_ind=1, simb_mask=msk),
                              {"drf": t}))
            tv.append(t)
        wcalls = [n for e in (zi, *values) for n in nodes(e) if isinstance(n, WCall)]
        ev.block = blk
        # first every pixel of the window row, its bin and its increment (the loads of
        # the input do not wait for the grid's stores), then the read-modify-writes,
        # which the core runs one after the other
        rmw: list[VInstr] = []
        for rx in range(wx.r.extent):
            h, lane = divmod(rx, LANES)
            ap = k.garf(2 * wx.r.extent)
            blk.append(VInstr(Instr(Opcode.MOV_ARF, arf=ap, lane=lane, simb_mask=msk),
                              {"drf": tv[h]}))
            calc(AluOp.ADD, ap, ap, ty)
            px = k.v()
            blk.append(VInstr(Instr(Opcode.LD_RF, dram=ap, dram_ind=1, simb_mask=msk),
                              {"drf": px}))
            for n in wcalls:
                ev.memo[(id(n), 0, rx)] = ("v", px)
            z = ev.val(zi, 0, rx)
            inc = k.v()
            for c, e in enumerate(values):
                v = ev.val(e, 0, rx)
                fields, vregs = {}, {"dst": inc}
                if v[0] == "v":
                    vregs["src1"] = v[1]
                else:
                    fields["src1"] = v[1]
                blk.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                        mode=Mode.SV, lane=0, src2=zero,
                                        vec_mask=ALL_LANES if c == 0 else 1 << c,
                                        simb_mask=msk, **fields), vregs))
            if z[0] != "v":
                raise CompileError(f"{a.name}'s bin is a constant: a scatter bins by value")
            az = k.garf(2 * wx.r.extent)
            blk.append(VInstr(Instr(Opcode.MOV_ARF, arf=az, lane=0, simb_mask=msk),
                              {"drf": z[1]}))
            calc(AluOp.ADD, az, az, tc)
            old, new = k.v(), k.v()
            rmw.append(VInstr(Instr(Opcode.LD_RF, dram=az, dram_ind=1, simb_mask=msk),
                              {"drf": old}))
            rmw.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.FP32,
                                    simb_mask=msk), {"dst": new, "src1": old, "src2": inc}))
            rmw.append(VInstr(Instr(Opcode.ST_RF, dram=az, dram_ind=1, simb_mask=msk),
                              {"drf": new}))
        blk += rmw
        k.finish_steps(nx, rows)
        return blk

    b.kernel(rows, nx, body)
    b.kernels_done.append(f"{a.name}: scatter {ny * sy} window rows x {nx} cells x "
                          f"{wx.r.extent} pixels over {m} PEs (indirect read-modify-write)")
    if m > 1:
        _reduce(b, a, m, U)


def _reduce(b: Builder, a: Array, m: int, U: int) -> None:
    """Every PE's grid becomes the sum of the partial grids of PEs ``0..m-1`` of the vault:
    each writes its vectors to VSM lines of its own (one-PE masks), every PE reads them
    all back and adds them in PE order."""
    def mk(k: Kernel):
        loads, moves, sums, stores = [], [], [], []
        naive: list[VInstr] = []
        for u in range(U):
            n0 = (len(loads), len(moves), len(sums))
            t = k.v()
            loads.append(VInstr(Instr(Opcode.LD_RF, dram=k.ptr(a.addr(0, u), U, a.pitch),
                                      dram_ind=1, simb_mask=(1 << m) - 1), {"drf": t}))
            parts = []
            for p in range(m):
                moves.append(VInstr(Instr(Opcode.WR_VSM, vsm=u * m + p, simb_mask=1 << p),
                                    {"drf": t}))
                r = k.v()
                sums.append(VInstr(Instr(Opcode.RD_VSM, vsm=u * m + p, simb_mask=b.all),
                                   {"drf": r}))
                parts.append(r)
            acc = parts[0]
            for r in parts[1:]:
                n = k.v()
                sums.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.FP32,
                                         simb_mask=b.all), {"dst": n, "src1": acc, "src2": r}))
                acc = n
            stores.append(VInstr(Instr(Opcode.ST_RF, dram=k.ptr(a.addr(0, u), U, a.pitch,
                                                                fresh=True),
                                       dram_ind=1, simb_mask=b.all), {"drf": acc}))
            naive += loads[n0[0]:] + moves[n0[1]:] + sums[n0[2]:] + stores[-1:]
        k.finish_steps(a.S // U, a.R)
        # grouped by kind, an ordering of the lowering: without reordering (Fig. 12's
        # baseline1 and baseline3), vector by vector as named
        return loads + moves + sums + stores if b.opts.reorder else naive

    b.kernel(a.R, a.S // U, mk)
    b.kernels_done.append(f"{a.name}: add the {m} partial grids of the vault (VSM)")

