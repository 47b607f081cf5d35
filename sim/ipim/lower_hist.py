"""Lowering a histogram, ``hist[in(r.x, r.y)] += k`` over an :class:`~.lang.RDom`, to SIMB.

1. *Zero*: every PE clears its ``buckets`` bank vectors.
2. *Scatter*: every PE walks its band of the input (placed as by
   :func:`~pimforge.sim.ipim.lower.place`; where the PEs do not divide the rows, the
   rows beyond the image, and the bands of the PEs that hold none, are the value of
   one more bucket, which the reductions leave out); for each lane of each vector it moves the
   pixel into the AddrRF (``mov_arf``), adds the buckets' base (``calc_arf``) and
   increments that bucket with ``ld_rf`` / ``comp add`` / ``st_rf`` through the
   indirect address. The compiler keeps each bucket's read behind the write before it
   (a computed address may be any bucket), so the scatter runs one read-modify-write
   after the other: the data-dependent addressing the SIMB ISA offers, at its price.
   The PE's request queue keeps that order, so the read issues right behind the
   write instead of waiting for it to finish.
3. *Vault reduction*: per group of four buckets, every PE writes its counts to the
   VSM and PE 0 of the vault adds them and packs the four sums into one vector
   (``comp`` in scalar-vector mode with one lane enabled).
4. *Cube reduction*: between two ``sync`` barriers vault 0 fetches the packed sums of
   every other vault with ``req``; its PE 0 adds them into the result, ``buckets / 4``
   vectors of vault 0 / PE 0's bank.

The reduction therefore costs ``buckets/4 * (vaults - 1)`` requests into vault 0 and
is serial there: at Table III's 8 cubes x 16 vaults that is 8,128 requests for 256
buckets, against 128 x 32 PEs that scatter in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pimforge.rtl.ipim.isa import LANES, AluOp, DType, Instr, Mode, Opcode

from .backend import Options, VInstr
from .emit import Builder, Kernel, VaultCode, assemble, check_fits, trial_code
from .lang import INT32, CompileError, Func
from .layout import SCRATCH_LINES, Array, Program

__all__ = ["HistLayout", "layout_histogram", "select_histogram"]


@dataclass(frozen=True)
class HistLayout:
    """Where a histogram's data lives: the input's band (``inp``, from bank vector 0),
    the buckets at ``HB`` (one more where rows beyond the image count into it), the
    vault's packed sums at ``HF``, vault 0's result at ``HF2``; in the VSM, the PEs'
    counts from line ``VB`` and the other vaults' sums from ``RB``; the increment's
    bit pattern ``one`` and the DataRF constants."""

    inp: Array
    nb: int
    nq: int
    HB: int
    HF: int
    HF2: int
    VB: int
    RB: int
    one: int
    consts: tuple

    def text(self, nvaults: int) -> list[str]:
        """The layout as lines of text (the ``layout`` pass's dump)."""
        a = self.inp
        return [f"bank vectors used: {self.HF2 + self.nq}",
                f"DataRF constants: {', '.join(f'{c:#x}' for c in self.consts)}",
                f"{a.name}: [0, {self.HB}) pitch {a.pitch} x {a.R} (R {a.R}, S {a.S}) host",
                f"buckets: [{self.HB}, {self.HF}) ({self.nb}"
                f"{' + 1 for the padding rows' if a.pad is not None else ''})",
                f"packed sums: [{self.HF}, {self.HF2})",
                f"result (vault 0, PE 0): [{self.HF2}, {self.HF2 + self.nq})",
                f"VSM: PE counts [{self.VB}, {self.RB}), the other vaults' sums "
                f"[{self.RB}, {self.RB + (nvaults - 1) * self.nq})"]


def layout_histogram(h: Func, size: tuple[int, int], cfg) -> HistLayout:
    """The ``layout`` pass for the histogram *h* of an ``size = (W, H)`` INT32 input on
    *cfg*.

    Raises
    ------
    CompileError
        The buckets, the input or the reduction do not fit the machine.
    """
    ip = cfg.ipim
    img, inc = h.update
    nb = h.buckets
    if nb == 0 or nb % LANES:
        raise CompileError(f"{h.name}: give the buckets with bound(x, 0, n), n a multiple of 4")
    W, H = size
    nvaults = ip.cubes * ip.vaults
    P = ip.pes
    npe = nvaults * P
    if W % LANES:
        raise CompileError(f"{img.name} is {W}x{H}: the width must be a multiple of {LANES} "
                           "(one strip of columns per SIMD lane)")
    inp = Array(img.name, INT32, W, H, -(-H // npe))
    if H % npe:     # the rows beyond the image count into a bucket nobody reads
        inp.pad = nb
    nq = nb // LANES
    HB = inp.size
    HF = HB + nb + (inp.pad is not None)
    HF2 = HF + nq
    if HF2 + nq > ip.bank_vectors:
        raise CompileError(f"{h.name} needs {HF2 + nq} vectors of each bank; raise "
                           "ipim.bank_bytes or use a smaller image")
    VB = 0
    RB = P * LANES
    if RB + (nvaults - 1) * nq > ip.vsm_lines - SCRATCH_LINES:
        raise CompileError(f"{h.name}'s reduction needs {RB + (nvaults - 1) * nq} VSM lines but "
                           f"the VSM has {ip.vsm_lines - SCRATCH_LINES} free; raise "
                           "ipim.vsm_bytes")
    one = inc & 0xFFFF_FFFF
    consts = (0, one) if one else (0,)
    return HistLayout(inp, nb, nq, HB, HF, HF2, VB, RB, one, consts)


def select_histogram(h: Func, lay: HistLayout, cfg, opts: Options
                     ) -> tuple[dict, list[str], Program]:
    """The ``select`` pass for the histogram *h* laid out as *lay* on *cfg*: every
    vault's code (:class:`~.emit.VaultCode`), the kernels' descriptions, and the
    program's arrays and reader (a :class:`~.layout.Program` whose programs the
    ``assemble`` pass fills in).

    Raises
    ------
    CompileError
        A vault's program does not fit the program memory.
    """
    ip = cfg.ipim
    img, _ = h.update
    nvaults = ip.cubes * ip.vaults
    P = ip.pes
    inp, nb, nq, HB, HF, HF2, VB, RB, one = (lay.inp, lay.nb, lay.nq, lay.HB, lay.HF, lay.HF2,
                                             lay.VB, lay.RB, lay.one)
    consts = list(lay.consts)
    programs = {}
    kernels: list[str] = []
    for gv in range(nvaults):
        b = Builder(ip, opts, gv, consts)
        zero_r, inc_r = b.const_reg[0], b.const_reg[one]
        pe0 = 1
        prologue = b.prog
        segments = []

        b.prog = []

        def zero(k: Kernel):
            p = k.ptr(HB, 1, 0)
            blk = [VInstr(Instr(Opcode.ST_RF, dram=p, dram_ind=1, simb_mask=b.all, drf=zero_r))]
            k.finish_steps(nb, 1)
            return blk

        b.kernel(1, nb, zero)
        b.kernels_done.append(f"{h.name}: zero {nb} buckets")

        def scatter(k: Kernel):
            pin = k.ptr(inp.addr(0, 0), 1, inp.pitch)
            hb = k.ptr(HB, 0, 0)
            t = k.v()
            blk = [VInstr(Instr(Opcode.LD_RF, dram=pin, dram_ind=1, simb_mask=b.all), {"drf": t})]
            for lane in range(LANES):
                a = k._arf()
                c, c2 = k.v(), k.v()
                blk += [
                    VInstr(Instr(Opcode.MOV_ARF, arf=a, lane=lane, simb_mask=b.all), {"drf": t}),
                    VInstr(Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=a, src1=a, src2=hb,
                                 simb_mask=b.all)),
                    VInstr(Instr(Opcode.LD_RF, dram=a, dram_ind=1, simb_mask=b.all), {"drf": c}),
                    VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, src2=inc_r,
                                 simb_mask=b.all), {"dst": c2, "src1": c}),
                    VInstr(Instr(Opcode.ST_RF, dram=a, dram_ind=1, simb_mask=b.all), {"drf": c2}),
                ]
            k.finish_steps(inp.S, inp.R)
            return blk

        b.kernel(inp.R, inp.S, scatter)
        b.kernels_done.append(f"{h.name}: scatter {inp.R}x{inp.S} vectors")

        def reduce(k: Kernel):
            pb = [k.ptr(HB + lane, LANES, 0) for lane in range(LANES)]
            pout = k.ptr(HF, 1, 0)
            blk: list[VInstr] = []
            t = []
            for lane in range(LANES):
                v = k.v()
                blk.append(VInstr(Instr(Opcode.LD_RF, dram=pb[lane], dram_ind=1,
                                        simb_mask=b.all), {"drf": v}))
                t.append(v)
            if P > 1:
                for lane in range(LANES):
                    for p in range(1, P):
                        blk.append(VInstr(Instr(Opcode.WR_VSM, vsm=VB + p * LANES + lane,
                                                simb_mask=1 << p), {"drf": t[lane]}))
            packed = k.v()
            for lane in range(LANES):
                acc = t[lane]
                for p in range(1, P):
                    u, s = k.v(), k.v()
                    blk.append(VInstr(Instr(Opcode.RD_VSM, vsm=VB + p * LANES + lane,
                                            simb_mask=pe0), {"drf": u}))
                    blk.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                            simb_mask=pe0), {"dst": s, "src1": acc, "src2": u}))
                    acc = s
                blk.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                        mode=Mode.SV, lane=0, src2=zero_r,
                                        vec_mask=0xF if lane == 0 else 1 << lane,
                                        simb_mask=pe0), {"dst": packed, "src1": acc}))
            blk.append(VInstr(Instr(Opcode.ST_RF, dram=pout, dram_ind=1, simb_mask=pe0),
                              {"drf": packed}))
            k.finish_steps(nq, 1)
            return blk

        b.kernel(1, nq, reduce)
        b.kernels_done.append(f"{h.name}: add the PEs' counts in each vault")
        segments.append(b.prog)

        b.prog = []
        b.sync(0)
        if gv == 0:
            for v in range(1, nvaults):
                chip, vv = divmod(v, ip.vaults)
                for q in range(nq):
                    b.prog.append(Instr(Opcode.REQ, chip=chip, vault=vv, pg=0, pe=0,
                                        dram=HF + q, vsm=RB + (v - 1) * nq + q))
        b.sync(1)
        if gv == 0:
            def total(k: Kernel):
                pa = k.ptr(HF, 1, 0)
                po = k.ptr(HF2, 1, 0)
                blk: list[VInstr] = []
                a = k.v()
                blk.append(VInstr(Instr(Opcode.LD_RF, dram=pa, dram_ind=1, simb_mask=pe0),
                                  {"drf": a}))
                for v in range(1, nvaults):
                    pr = k.ptr(RB + (v - 1) * nq, 1, 0)
                    u, s = k.v(), k.v()
                    blk.append(VInstr(Instr(Opcode.RD_VSM, vsm=pr, vsm_ind=1, simb_mask=pe0),
                                      {"drf": u}))
                    blk.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                            simb_mask=pe0), {"dst": s, "src1": a, "src2": u}))
                    a = s
                blk.append(VInstr(Instr(Opcode.ST_RF, dram=po, dram_ind=1, simb_mask=pe0),
                                  {"drf": a}))
                k.finish_steps(nq, 1)
                return blk

            def accumulate(k: Kernel):
                """One vault's sums a row, added into vault 0's (a loop over the vaults:
                one pointer for all of them, where one each would not fit the AddrRF)."""
                pa = k.ptr(HF, 1, 0)
                pr = k.ptr(RB, 1, nq)
                a, u, t = k.v(), k.v(), k.v()
                blk = [VInstr(Instr(Opcode.LD_RF, dram=pa, dram_ind=1, simb_mask=pe0),
                              {"drf": a}),
                       VInstr(Instr(Opcode.RD_VSM, vsm=pr, vsm_ind=1, simb_mask=pe0),
                              {"drf": u}),
                       VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                    simb_mask=pe0), {"dst": t, "src1": a, "src2": u}),
                       VInstr(Instr(Opcode.ST_RF, dram=pa, dram_ind=1, simb_mask=pe0),
                              {"drf": t})]
                k.finish_steps(nq, nvaults - 1)
                return blk

            def copy(k: Kernel):
                pa, po = k.ptr(HF, 1, 0), k.ptr(HF2, 1, 0)
                a = k.v()
                k.finish_steps(nq, 1)
                return [VInstr(Instr(Opcode.LD_RF, dram=pa, dram_ind=1, simb_mask=pe0),
                               {"drf": a}),
                        VInstr(Instr(Opcode.ST_RF, dram=po, dram_ind=1, simb_mask=pe0),
                               {"drf": a})]

            if nvaults + 8 <= ip.arf_entries:
                b.kernel(1, nq, total)
            else:
                b.kernel(nvaults - 1, nq, accumulate)
                b.kernel(1, nq, copy)
        b.kernels_done.append(f"{h.name}: vault 0 adds the other vaults' sums (req)")
        segments.append(b.prog)
        check_fits(gv, len(assemble(prologue, [trial_code(s, ip, opts) for s in segments])),
                   ip, simplify=False)
        programs[gv] = VaultCode(prologue, segments)
        kernels = b.kernels_done

    def reader(fetch):
        return fetch(0, 0, HF2, nq).reshape(-1)[:nb].view(np.int32).copy()

    return programs, kernels, Program({}, {img.name: inp}, inp, [inp], (nb,), opts, kernels,
                                      reader)
