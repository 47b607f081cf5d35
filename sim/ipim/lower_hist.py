"""Lowering a histogram, ``hist[in(r.x, r.y)] += k`` over an :class:`~.lang.RDom`, to SIMB.

1. *Zero*: every PE clears its partial histogram, ``buckets`` lines of its own in the
   vault's VSM where the VSM holds every PE's (Sec. IV-A: the scratchpads keep data a
   PE reuses), else ``buckets`` vectors of its bank.
2. *Scatter*: every PE walks its band of the input (placed as by
   :func:`~pimforge.sim.ipim.lower.place`; where the PEs do not divide the rows, the
   rows beyond the image, and the bands of the PEs that hold none, are the value of
   one more bucket, which the reductions leave out); for each lane of each vector it moves the
   pixel into the AddrRF (``mov_arf``), adds its partial histogram's base (``calc_arf``)
   and increments that bucket through the indirect address: ``rd_vsm`` / ``comp add`` /
   ``wr_vsm`` in the VSM (a few cycles each), or ``ld_rf`` / ``comp add`` / ``st_rf``
   in the bank. The compiler keeps each bucket's read behind the write before it (a
   computed address may be any bucket), so the scatter is one read-modify-write after
   the other: the data-dependent addressing the SIMB ISA offers, at its price. In the
   bank, each of them is a DRAM write and a read, mostly in another row.
3. *Vault reduction*: with the partials in the VSM, PE ``p`` adds bucket ``t * P + p``
   of every PE's partial in trip ``t`` and writes the sum to the VSM, and PE 0 packs
   the ``P`` sums four to a vector (``comp`` in scalar-vector mode with one lane
   enabled) into its bank; with the partials in the banks, per group of four buckets
   every PE writes its counts to the VSM and PE 0 adds and packs them.
4. *Cube reduction*, a tree over the vaults: in round ``r`` every vault ``v`` with
   ``v mod 2^(r+1) = 0`` fetches the packed sums of vault ``v + 2^r`` with ``req``
   between two ``sync`` barriers and adds them into its own, so vault 0 / PE 0's bank
   holds the result after ``ceil(log2(vaults))`` rounds.

The cube reduction costs ``buckets/4`` requests per round into each receiving vault:
at Table III's 8 cubes x 16 vaults, 7 rounds of 64 requests for 256 buckets (serial
into vault 0, that would be 8,128 requests, more than its program memory holds).
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
    """Where a histogram's data lives: the input's band (``inp``, from bank vector 0);
    the PEs' partial histograms of ``NB`` buckets each (one more where rows beyond the
    image count into it): in the VSM from line ``PV`` (PE ``p`` at ``PV + p * NB``) where
    ``vsm``, else in each bank from vector ``HB``; the vault's packed sums at bank
    vector ``HF`` of PE 0 (vault 0's: the result); in the VSM, the PEs' counts from
    line ``VB`` and the partner vault's sums at ``RB``; the increment's bit pattern
    ``one`` and the DataRF constants."""

    inp: Array
    nb: int
    NB: int
    nq: int
    vsm: bool
    PV: int
    HB: int
    HF: int
    VB: int
    RB: int
    one: int
    consts: tuple

    @property
    def bank_vectors(self) -> int:
        return self.HF + self.nq

    def text(self, nvaults: int) -> list[str]:
        """The layout as lines of text (the ``layout`` pass's dump)."""
        a = self.inp
        pad = " + 1 for the padding rows" if self.NB > self.nb else ""
        where = (f"VSM [{self.PV}, {self.VB}), {self.NB} lines a PE ({self.nb}{pad})"
                 if self.vsm else f"bank [{self.HB}, {self.HF}) ({self.nb}{pad})")
        return [f"bank vectors used: {self.bank_vectors}",
                f"DataRF constants: {', '.join(f'{c:#x}' for c in self.consts)}",
                f"{a.name}: [0, {a.size}) pitch {a.pitch} x {a.R} (R {a.R}, S {a.S}) host",
                f"partial histograms: {where}",
                f"packed sums (vault 0, PE 0: the result): [{self.HF}, {self.bank_vectors})",
                f"VSM: PE counts [{self.VB}, {self.RB}), the partner vault's sums "
                f"[{self.RB}, {self.RB + self.nq}) ({_rounds(nvaults)} rounds)"]


def _rounds(nvaults: int) -> int:
    """Rounds of the tree over *nvaults* vaults."""
    return (nvaults - 1).bit_length()


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
    NB = nb + (inp.pad is not None)
    free = ip.vsm_lines - SCRATCH_LINES
    vsm = P * NB + P * LANES + nq <= free
    PV = 0
    VB = P * NB if vsm else 0
    RB = VB + P * LANES
    HB = inp.size
    HF = HB if vsm else HB + NB
    if HF + nq > ip.bank_vectors:
        raise CompileError(f"{h.name} needs {HF + nq} vectors of each bank; raise "
                           "ipim.bank_bytes or use a smaller image")
    if RB + nq > free:
        raise CompileError(f"{h.name}'s reduction needs {RB + nq} VSM lines but "
                           f"the VSM has {free} free; raise ipim.vsm_bytes")
    one = inc & 0xFFFF_FFFF
    consts = (0, one) if one else (0,)
    return HistLayout(inp, nb, NB, nq, vsm, PV, HB, HF, VB, RB, one, consts)


def _pe_base(k: Kernel, ptrs: list[int], lines: int, ip) -> None:
    """Add ``(pgID * pes_per_pg + peID) * lines`` to each of *ptrs*, once before the
    loop (``k.setup``): each PE's own partial histogram."""
    def const(v: int) -> int:
        return k.ptr(v & 0xFFFF_FFFF, 0, 0)

    c_ppg, c_lines = const(ip.pes_per_pg), const(lines)
    tm = k._arf()
    for op, d, s1, s2 in ((AluOp.MUL, tm, 1, c_ppg), (AluOp.ADD, tm, tm, 0),
                          (AluOp.MUL, tm, tm, c_lines),
                          *((AluOp.ADD, p, p, tm) for p in ptrs)):
        k.setup.append(VInstr(Instr(Opcode.CALC_ARF, op=op, dst=d, src1=s1, src2=s2,
                                    simb_mask=k.b.all)))


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
    inp, nb, NB, nq, HF, VB, RB, one = (lay.inp, lay.nb, lay.NB, lay.nq, lay.HF, lay.VB,
                                        lay.RB, lay.one)
    base = lay.PV if lay.vsm else lay.HB
    # a partial histogram's read and write: in the VSM or the bank, through an AddrRF entry
    rd_op, wr_op, field = ((Opcode.RD_VSM, Opcode.WR_VSM, "vsm") if lay.vsm else
                           (Opcode.LD_RF, Opcode.ST_RF, "dram"))

    def rd(a: int, mask: int, d: int) -> VInstr:
        return VInstr(Instr(rd_op, simb_mask=mask, **{field: a, f"{field}_ind": 1}),
                      {"drf": d})

    def wr(a: int, mask: int, d: int | None = None, phys: int | None = None) -> VInstr:
        """A write of virtual DataRF *d*, or of physical entry *phys* where given."""
        ins = Instr(wr_op, simb_mask=mask, drf=phys or 0, **{field: a, f"{field}_ind": 1})
        return VInstr(ins) if phys is not None else VInstr(ins, {"drf": d})

    where = "VSM" if lay.vsm else "bank"
    consts = list(lay.consts)
    programs = {}
    kernels: list[str] = []
    for gv in range(nvaults):
        b = Builder(ip, opts, gv, consts)
        b.pipeline = opts.reorder and opts.pipeline     # loops software-pipelined
        zero_r, inc_r = b.const_reg[0], b.const_reg[one]
        pe0 = 1
        prologue = b.prog
        segments = []

        b.prog = []

        def zero(k: Kernel):
            p = k.ptr(base, 1, 0, fresh=True)
            if lay.vsm:
                _pe_base(k, [p], NB, ip)
            k.finish_steps(NB, 1)
            return [wr(p, b.all, phys=zero_r)]

        b.kernel(1, NB, zero)
        b.kernels_done.append(f"{h.name}: zero {NB} buckets a PE ({where})")

        def scatter(k: Kernel):
            pin = k.ptr(inp.addr(0, 0), 1, inp.pitch)
            hb = k.ptr(base, 0, 0, fresh=True)
            if lay.vsm:
                _pe_base(k, [hb], NB, ip)
            t = k.v()
            blk = [VInstr(Instr(Opcode.LD_RF, dram=pin, dram_ind=1, simb_mask=b.all), {"drf": t})]
            for lane in range(LANES):
                a = k._arf()
                c, c2 = k.v(), k.v()
                blk += [
                    VInstr(Instr(Opcode.MOV_ARF, arf=a, lane=lane, simb_mask=b.all), {"drf": t}),
                    VInstr(Instr(Opcode.CALC_ARF, op=AluOp.ADD, dst=a, src1=a, src2=hb,
                                 simb_mask=b.all)),
                    rd(a, b.all, c),
                    VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32, src2=inc_r,
                                 simb_mask=b.all), {"dst": c2, "src1": c}),
                    wr(a, b.all, c2),
                ]
            k.finish_steps(inp.S, inp.R)
            return blk

        b.kernel(inp.R, inp.S, scatter)
        b.kernels_done.append(f"{h.name}: scatter {inp.R}x{inp.S} vectors ({where})")

        def reduce(k: Kernel):
            pb = [k.ptr(base + lane, LANES, 0, fresh=True) for lane in range(LANES)]
            if lay.vsm:
                _pe_base(k, pb, NB, ip)
            pout = k.ptr(HF, 1, 0)
            blk: list[VInstr] = []
            t = []
            for lane in range(LANES):
                v = k.v()
                blk.append(rd(pb[lane], b.all, v))
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

        def reduce_vsm(k: Kernel):
            """Every PE adds one bucket of every PE's partial in the VSM (PE p: bucket
            ``t * P + p`` of trip t), then PE 0 packs the P sums four to a vector: P + 2
            VSM transfers a bucket, against 3P - 2 through the PEs' own counts."""
            src = [k.ptr(lay.PV + j * NB, P, 0, fresh=True) for j in range(P)]
            dst = k.ptr(VB, 0, 0, fresh=True)
            _pe_base(k, [*src, dst], 1, ip)
            pout = k.ptr(HF, P // LANES, 0)
            blk: list[VInstr] = []
            acc = None
            for j in range(P):
                u = k.v()
                blk.append(rd(src[j], b.all, u))
                if acc is None:
                    acc = u
                else:
                    s = k.v()
                    blk.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                            simb_mask=b.all), {"dst": s, "src1": acc, "src2": u}))
                    acc = s
            blk.append(wr(dst, b.all, acc))
            for g in range(P // LANES):
                packed = k.v()
                for lane in range(LANES):
                    u = k.v()
                    blk.append(VInstr(Instr(Opcode.RD_VSM, vsm=VB + g * LANES + lane,
                                            simb_mask=pe0), {"drf": u}))
                    blk.append(VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                            mode=Mode.SV, lane=0, src2=zero_r,
                                            vec_mask=0xF if lane == 0 else 1 << lane,
                                            simb_mask=pe0), {"dst": packed, "src1": u}))
                st = Instr(Opcode.ST_RF, dram=pout, dram_ind=1, simb_mask=pe0)
                if g:       # the trip's next vectors: a pointer a vector further each
                    st = Instr(Opcode.ST_RF, dram=k.ptr(HF + g, P // LANES, 0), dram_ind=1,
                               simb_mask=pe0)
                blk.append(VInstr(st, {"drf": packed}))
            k.finish_steps(nb // P, 1)
            return blk

        if lay.vsm and P % LANES == 0 and nb % P == 0 and P + P // LANES + 8 <= \
                ip.arf_entries - 4:
            b.kernel(1, nb // P, reduce_vsm)
            b.kernels_done.append(f"{h.name}: add the PEs' partials in each vault, "
                                  f"{P} buckets a trip")
        else:
            b.kernel(1, nq, reduce)
            b.kernels_done.append(f"{h.name}: add the PEs' counts in each vault")
        segments.append(b.prog)

        def accumulate(k: Kernel):
            """The partner vault's sums, landed in the VSM, added into this vault's (a
            pointer for the loads and one for the stores: a loop that can be pipelined)."""
            pa, ps = k.ptr(HF, 1, 0, fresh=True), k.ptr(HF, 1, 0, fresh=True)
            pr = k.ptr(RB, 1, 0)
            a, u, t = k.v(), k.v(), k.v()
            k.finish_steps(nq, 1)
            return [VInstr(Instr(Opcode.LD_RF, dram=pa, dram_ind=1, simb_mask=pe0),
                           {"drf": a}),
                    VInstr(Instr(Opcode.RD_VSM, vsm=pr, vsm_ind=1, simb_mask=pe0),
                           {"drf": u}),
                    VInstr(Instr(Opcode.COMP, op=AluOp.ADD, dtype=DType.INT32,
                                 simb_mask=pe0), {"dst": t, "src1": a, "src2": u}),
                    VInstr(Instr(Opcode.ST_RF, dram=ps, dram_ind=1, simb_mask=pe0),
                           {"drf": t})]

        b.prog = []
        for r in range(_rounds(nvaults)):
            s = 1 << r
            partner = gv + s if gv % (2 * s) == 0 and gv + s < nvaults else None
            b.sync(2 * r)
            if partner is not None:
                chip, vv = divmod(partner, ip.vaults)
                for q in range(nq):
                    b.prog.append(Instr(Opcode.REQ, chip=chip, vault=vv, pg=0, pe=0,
                                        dram=HF + q, vsm=RB + q))
            b.sync(2 * r + 1)
            if partner is not None:
                b.kernel(1, nq, accumulate)
        if nvaults > 1:
            b.kernels_done.append(f"{h.name}: the vaults' sums added in a tree of "
                                  f"{_rounds(nvaults)} rounds (req)")
            segments.append(b.prog)
        check_fits(gv, len(assemble(prologue, [trial_code(s, ip, opts) for s in segments])),
                   ip, simplify=False)
        programs[gv] = VaultCode(prologue, segments)
        if gv == 0:
            kernels = list(b.kernels_done)

    def reader(fetch):
        return fetch(0, 0, HF, nq).reshape(-1)[:nb].view(np.int32).copy()

    return programs, kernels, Program({}, {img.name: inp}, inp, [inp], (nb,), opts, kernels,
                                      reader)
