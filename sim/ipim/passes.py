"""The iPIM image compiler as an ordered list of passes (Sec. V of the iPIM paper).

As Halide's ``Lower.cpp`` does, the compiler runs its passes in one list,
:data:`PASSES`; each is a function from one IR value to the next, and each value
prints as text (:func:`ir_text`), so that ``pimforge compile image --dump-ir DIR``
writes the program after every pass.

==  ============  =====================================================================
 #  pass          from -> to
==  ============  =====================================================================
 1  graph         :class:`Source` (the front end's funcs, size, machine, options) ->
                  :class:`GraphIR`: the root arrays, producers first, bodies resolved
                  (:func:`~.lower.build_graph`)
 2  bounds        -> :class:`BoundsIR`: rows per PE and halos, returned as values
                  (:func:`~.bounds.infer_bounds`)
 3  layout        -> :class:`LayoutIR`: bounds written into the arrays, bank bases,
                  the DataRF constants (:func:`~.lower.lay_out`; a reduction's by
                  :func:`~.lower_hist.layout_histogram`)
 4  select        -> :class:`MachineIR`: per vault, instructions and basic blocks of
                  virtual-register instructions (:func:`~.lower.select`, and
                  :func:`~.lower_hist.select_histogram` for a reduction)
 5  preschedule   windows of unrolled iterations and pipelined loops ordered by
                  Algorithm 1 on virtual registers (:func:`~.backend.preschedule_block`)
 6  regalloc      DataRF registers allocated (:func:`~.backend.allocate_block`); a
                  block of a kernel the DataRF cannot hold spills values to the bank
                  first (:mod:`~.spill`, the paper's spilling "to the local DRAM bank")
 7  reorder       Algorithm 1 on the allocated blocks (:func:`~.backend.reorder_block`)
 8  assemble      -> :class:`~.layout.Program`: segments joined, repeated stages folded
                  into loops, ``halt``, every vault's program checked against the
                  program memory (:func:`~.emit.assemble`)
==  ============  =====================================================================

:func:`run_passes` runs the list; :func:`compile_pipeline` is that call.
Selection measures its choices (unrolled code or a loop, the unrolling budget, loop
targets) by the length each block will have once scheduled, so it asks the backend
for it; the backend passes then make that code.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pimforge.rtl.ipim.asm import disassemble, disassemble_one

from .backend import Block, Options, allocate_block, preschedule_block, reorder_block
from .bounds import Bounds, infer_bounds
from .emit import ArrayRef, VaultCode, assemble, check_fits
from .lang import CompileError, Const, Coord, Func, children
from .layout import Program
from .lower import Graph, build_graph, constants, lay_out, select

__all__ = ["PASSES", "BoundsIR", "GraphIR", "LayoutIR", "MachineIR", "Pass", "Source",
           "compile_pipeline", "ir_text", "run_passes", "steps"]


# -- the IR values between the passes ------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """What the compiler is given: the output func(s) over ``size = (W, H)``, the
    machine's config, the backend :class:`~.backend.Options`, the output's shape as
    read back (default ``(H, W)``) and the vaults to generate (default all)."""

    out: Func | tuple
    size: tuple[int, int]
    cfg: object
    opts: Options
    out_shape: tuple | None = None
    vaults: list[int] | None = None

    @property
    def outs(self) -> list[Func]:
        return list(self.out) if isinstance(self.out, tuple | list) else [self.out]

    @property
    def nvaults(self) -> int:
        return self.cfg.ipim.cubes * self.cfg.ipim.vaults

    @property
    def npe(self) -> int:
        return self.nvaults * self.cfg.ipim.pes


@dataclass(frozen=True)
class GraphIR:
    """The pipeline graph (:class:`~.lower.Graph`), or the reduction a histogram is
    (lowered by its own selection)."""

    source: Source
    graph: Graph | None = None
    reduction: Func | None = None


@dataclass(frozen=True)
class BoundsIR:
    """The graph and its :class:`~.bounds.Bounds`."""

    graph: GraphIR
    bounds: Bounds


@dataclass(frozen=True)
class LayoutIR:
    """The graph laid out in the banks: ``bank_vectors`` used, the DataRF constants."""

    graph: GraphIR
    bank_vectors: int = 0
    consts: tuple = ()
    #: a reduction's layout (:class:`~.lower_hist.HistLayout`)
    reduction: object = None


@dataclass(frozen=True)
class MachineIR:
    """Every vault's code (:class:`~.lower.VaultCode`), the kernels' descriptions and
    the program's arrays (a :class:`~.layout.Program` without programs yet)."""

    source: Source
    code: dict
    kernels: tuple
    shell: Program


# -- the passes ------------------------------------------------------------------------

def graph_pass(src: Source) -> GraphIR:
    """Resolve the pipeline into root arrays (a histogram stays a reduction)."""
    outs = src.outs
    if len(outs) > 1 and any(o.update is not None for o in outs):
        raise CompileError("a histogram is a pipeline's only output")
    if outs[0].update is not None:
        return GraphIR(src, reduction=outs[0])
    return GraphIR(src, build_graph(outs, src.size, src.npe))


def bounds_pass(gir: GraphIR) -> BoundsIR:
    """Infer every array's rows per PE and halos (returned; the arrays are untouched)."""
    if gir.graph is None:
        return BoundsIR(gir, Bounds())
    return BoundsIR(gir, infer_bounds(gir.graph, gir.source.npe))


def layout_pass(bir: BoundsIR) -> LayoutIR:
    """Write the bounds into the arrays, give them bank bases, list the constants."""
    gir = bir.graph
    if gir.graph is None:
        from .lower_hist import layout_histogram  # a reduction, laid out on its own

        lay = layout_histogram(gir.reduction, gir.source.size, gir.source.cfg)
        return LayoutIR(gir, lay.bank_vectors, lay.consts, lay)
    top = lay_out(gir.graph, bir.bounds, gir.source.cfg.ipim)
    return LayoutIR(gir, top, tuple(constants(gir.graph)))


def select_pass(lir: LayoutIR) -> MachineIR:
    """Select every vault's instructions (basic blocks on virtual registers)."""
    src = lir.graph.source
    ip = src.cfg.ipim
    if lir.graph.reduction is not None:
        from .lower_hist import select_histogram  # a reduction, lowered on its own

        code, kernels, shell = select_histogram(lir.graph.reduction, lir.reduction, src.cfg,
                                                src.opts)
        return MachineIR(src, code, tuple(kernels), shell)
    g = lir.graph.graph
    nvaults = src.nvaults
    if src.vaults is not None and not all(0 <= v < nvaults for v in src.vaults):
        raise CompileError(f"vaults {src.vaults} are not all among the machine's {nvaults}")
    W, H = src.size
    vaults = range(nvaults) if src.vaults is None else sorted(set(src.vaults))
    code, kernels = select(g, ip, src.opts, list(lir.consts), vaults, lir.bank_vectors)
    inputs = {a.name: a for a in g.order if a.host}
    shell = Program({}, inputs, g.out, g.order, src.out_shape or (H, W), src.opts, kernels,
                    outputs=g.outs)
    return MachineIR(src, code, tuple(kernels), shell)


def _map_blocks(m: MachineIR, f: Callable[[Block], Block]) -> MachineIR:
    code = {gv: VaultCode(vc.prologue, [[f(i) if isinstance(i, Block) else i for i in seg]
                                         for seg in vc.segments])
            for gv, vc in m.code.items()}
    return dataclasses.replace(m, code=code)


def preschedule_pass(m: MachineIR) -> MachineIR:
    """Order unrolled windows and pipelined loops by Algorithm 1 on virtual registers."""
    ip, opts = m.source.cfg.ipim, m.source.opts
    return _map_blocks(m, lambda b: preschedule_block(b, ip, opts))


def regalloc_pass(m: MachineIR) -> MachineIR:
    """Allocate every block's DataRF registers (spilling where a block allows it and the
    DataRF cannot hold it)."""
    ip, opts = m.source.cfg.ipim, m.source.opts
    return _map_blocks(m, lambda b: allocate_block(b, opts, ip))


def reorder_pass(m: MachineIR) -> MachineIR:
    """Reorder every allocated block by Algorithm 1 (where the options reorder)."""
    ip, opts = m.source.cfg.ipim, m.source.opts
    return _map_blocks(m, lambda b: reorder_block(b, ip, opts))


def assemble_pass(m: MachineIR) -> Program:
    """Join every vault's segments into its program and check it fits."""
    ip = m.source.cfg.ipim
    programs = {}
    for gv, vc in m.code.items():
        segs = [[x for i in seg for x in (i.code if isinstance(i, Block) else (i,))]
                for seg in vc.segments]
        prog = assemble(vc.prologue, segs)
        check_fits(gv, len(prog), ip)
        programs[gv] = prog
    return dataclasses.replace(m.shell, programs=programs, kernels=list(m.kernels))


@dataclass(frozen=True)
class Pass:
    """A named compiler pass: ``run`` takes the IR value before it and returns the next."""

    name: str
    run: Callable
    doc: str


#: The compiler, in order.
PASSES: tuple[Pass, ...] = tuple(Pass(f.__name__.removesuffix("_pass"), f,
                                      (f.__doc__ or "").strip())
                                 for f in (graph_pass, bounds_pass, layout_pass, select_pass,
                                           preschedule_pass, regalloc_pass, reorder_pass,
                                           assemble_pass))


def steps(src: Source) -> Iterator[tuple[Pass, object]]:
    """Run :data:`PASSES` on *src*, yielding each pass with its result as it is made
    (render a result before the next pass: the layout pass writes into the graph's
    arrays)."""
    ir: object = src
    for p in PASSES:
        ir = p.run(ir)
        yield p, ir


def run_passes(src: Source, observe: Callable[[Pass, object], None] | None = None
               ) -> Program:
    """Every pass of :data:`PASSES` on *src*: the compiled :class:`~.layout.Program`.
    *observe*: called with each pass and its result as it is made (before the next pass
    runs), e.g. to print the IR."""
    ir: object = src
    for p, ir in steps(src):
        if observe is not None:
            observe(p, ir)
    assert isinstance(ir, Program)
    return ir


def compile_pipeline(out: Func | tuple[Func, ...], size: tuple[int, int], cfg,
                     opts: Options | None = None,
                     out_shape: tuple[int, ...] | None = None,
                     vaults: list[int] | None = None, *,
                     observe: Callable | None = None) -> Program:
    """Compile *out* computed over ``size = (W, H)`` for *cfg*'s iPIM machine; a tuple of
    funcs is a pipeline with several outputs of that size (the channels of an image,
    read back stacked as the last axis). *vaults* (global indices): generate only those
    vaults' programs, of the same layout (a share of the machine; a histogram's are
    always all). Runs the passes of :mod:`pimforge.sim.ipim.passes` in order;
    *observe* ``(pass, result)`` sees each result as it is made.

    Raises
    ------
    CompileError
        The pipeline, its schedule or its size does not fit the machine, with what
        to change.
    """
    return run_passes(Source(out, size, cfg, opts or Options(), out_shape, vaults), observe)


# -- the IR as text ----------------------------------------------------------------------

def _affine(v: str, f: tuple[int, int, int]) -> str:
    a, b, d = f
    s = v if a == 1 else f"{a}{v}"
    s += f" + {b}" if b > 0 else f" - {-b}" if b < 0 else ""
    return s if d == 1 else f"({s}) // {d}"


def _leaf(e) -> str | None:
    if isinstance(e, Const):
        return f"{e.value!r}:{e.dtype}"
    if isinstance(e, ArrayRef):
        lane = "" if e.lane is None else f", lane {e.lane}"
        return f"{e.arr.name}[{_affine('x', e.ax)}, {_affine('y', e.ay)}{lane}]"
    if isinstance(e, Coord):
        return e.var.name
    return None


def _expr(e, names: dict[int, str], lines: list[str]) -> str:
    """*e* as SSA lines (each node once, however often it is shared): its name."""
    leaf = _leaf(e)
    if leaf is not None:
        return leaf
    if id(e) in names:
        return names[id(e)]
    args = [_expr(k, names, lines) for k in children(e)]
    label = type(e).__name__.lower()
    for f in ("op", "axis", "lane", "offset"):
        v = getattr(e, f, None)
        if isinstance(v, str | int) and not isinstance(v, bool):
            label += f" {v}"
    if getattr(e, "cond", None) is not None:
        label += f" {e.cond.op}"
    dtype = getattr(e, "dtype", "")
    name = f"t{len(names)}"
    names[id(e)] = name
    lines.append(f"    {name} = {label}:{dtype}({', '.join(args)})")
    return name


def _array_line(a) -> str:
    what = f"{a.kind}{' replicated' if a.rep else ''}"
    ch = "" if a.channel is None else f" channel {a.channel}"
    return f"{a.name}: {what}{ch} {a.dtype} {a.W}x{a.H}"


def _graph_text(gir: GraphIR) -> list[str]:
    if gir.graph is None:
        img, inc = gir.reduction.update
        return [f"reduction {gir.reduction.name}: a histogram of {gir.reduction.buckets} "
                f"buckets, {gir.reduction.name}[{img.name}(r.x, r.y)] += {inc}"]
    g = gir.graph
    out = [f"{len(g.order)} arrays, producers first; outputs: "
           f"{', '.join(a.name for a in g.outs)}"]
    for a in g.order:
        out.append(_array_line(a))
        body = g.bodies.get(id(a))
        if body is not None:
            names: dict[int, str] = {}
            lines: list[str] = []
            res = _expr(body, names, lines)
            out += lines + [f"    = {res}"]
        elif a.srcs:
            out.append(f"    copy of {', '.join(p.name for p in a.srcs)}")
    return out


def _bounds_text(bir: BoundsIR) -> list[str]:
    if bir.graph.graph is None:
        return ["no arrays to bound (a reduction)"]
    out = ["array: rows per PE; halo left right (vectors), top bottom (rows)"]
    for a in bir.graph.graph.order:
        h = bir.bounds.halos.get(a)
        out.append(f"{a.name}: R {bir.bounds.rows.get(a, a.R)}; halo "
                   f"{h.left} {h.right} {h.top} {h.bottom}" if h else f"{a.name}: no halo")
    return out


def _layout_text(lir: LayoutIR) -> list[str]:
    if lir.graph.graph is None:
        return lir.reduction.text(lir.graph.source.nvaults)
    out = [f"bank vectors used: {lir.bank_vectors}",
           f"DataRF constants: {', '.join(f'{c:#x}' for c in lir.consts)}",
           "array: [base, base + size) of every PE's bank; pitch x rows (R + halo rows); "
           "halo left right top bottom"]
    for a in lir.graph.graph.order:
        out.append(f"{a.name}: [{a.base}, {a.base + a.size}) pitch {a.pitch} x "
                   f"{a.R + a.hyt + a.hyb} (R {a.R}, S {a.S}); halo {a.hxl} {a.hxr} "
                   f"{a.hyt} {a.hyb}{' host' if a.host else ''}")
    return out


def _vinstr(vi) -> str:
    """*vi* disassembled, its virtual registers written ``%n``."""
    if not vi.vregs:
        return disassemble_one(vi.ins)
    # stand-ins from the top of the DataRF numbers, none that a physical field names
    phys = {getattr(vi.ins, f) for f in ("dst", "src1", "src2", "drf") if f not in vi.vregs}
    marks = [m for m in range(255, 0, -1) if m not in phys][:len(vi.vregs)]
    fields = sorted(vi.vregs)
    text = disassemble_one(dataclasses.replace(vi.ins, **dict(zip(fields, marks))))
    names = {m: f"%{vi.vregs[f]}" for f, m in zip(fields, marks)}
    return re.sub(r"\bd(\d+)\b", lambda m: names.get(int(m.group(1)), m.group(0)), text)


def _block_text(b: Block) -> list[str]:
    if b.parts is not None:
        pro, _, body, _, epi = b.parts
        what = (f"pipelined loop: prologue {pro}, loop setup 2, body {body}, latch 2, "
                f"epilogue {epi}")
    else:
        what = (f"window of {b.iterations} iterations" if b.window is not None else "block")
    state = ("final" if b.done else "allocated" if b.code is not None else
             "prescheduled" if b.order is not None else "virtual registers")
    out = [f"  {{ {what}, {len(b.vinstrs)} instructions, {state}"]
    if b.code is not None:
        out += [f"    {disassemble_one(i)}" for i in b.code]
    else:
        out += [f"    {_vinstr(vi)}" for vi in (b.order or b.vinstrs)]
    out.append("  }")
    return out


def _machine_text(m: MachineIR, vault: int | None) -> list[str]:
    out = [f"{len(m.code)} vaults"]
    out += [f"kernel {k}" for k in m.kernels]
    for gv, vc in sorted(m.code.items()):
        if vault is not None and gv != vault:
            continue
        out.append(f"vault {gv}:")
        out.append("  prologue:")
        out += [f"    {disassemble_one(i)}" for i in vc.prologue]
        for n, seg in enumerate(vc.segments):
            out.append(f"  segment {n}:")
            for i in seg:
                out += _block_text(i) if isinstance(i, Block) else [f"    {disassemble_one(i)}"]
    return out


def _program_text(p: Program, vault: int | None) -> list[str]:
    out = []
    for gv, prog in sorted(p.programs.items()):
        if vault is not None and gv != vault:
            continue
        out += [f"vault {gv}: {len(prog)} instructions", disassemble(prog, pcs=True)]
    return out


def ir_text(ir: object, vault: int | None = None) -> str:
    """*ir* (a value between two passes) as readable text; *vault*: only that vault's
    code (the passes from ``select`` on), default all."""
    if isinstance(ir, Source):
        W, H = ir.size
        lines = [f"outputs {', '.join(f.name for f in ir.outs)} over {W}x{H}, {ir.opts}"]
    elif isinstance(ir, GraphIR):
        lines = _graph_text(ir)
    elif isinstance(ir, BoundsIR):
        lines = _bounds_text(ir)
    elif isinstance(ir, LayoutIR):
        lines = _layout_text(ir)
    elif isinstance(ir, MachineIR):
        lines = _machine_text(ir, vault)
    elif isinstance(ir, Program):
        lines = _program_text(ir, vault)
    else:
        raise TypeError(f"not a compiler IR value: {type(ir).__name__}")
    return "\n".join(lines) + "\n"
