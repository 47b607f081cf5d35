"""The iPIM compiler's backend passes (Sec. V-C): register allocation, memory-order
enforcement and instruction reordering (Algorithm 1), each switchable.

They work on one basic block (a loop body) of :class:`VInstr` s, whose DataRF operands
are virtual registers: values defined once in the block and dead at its end.

Register allocation
    Liveness gives each virtual register a range; the interference graph joins the
    registers whose ranges overlap. The registers are coloured in depth-first order
    of that graph with physical DataRF entries. Policy ``min`` takes the
    lowest-numbered free entry (the fewest registers: a conventional allocator,
    which reuses an entry as soon as it dies and so creates anti and output
    dependencies between neighbouring instructions); policy ``max`` takes the free
    entry used least recently, avoiding the most recently used one, which spreads
    the values over the DataRF so that the in-order core finds no WAR/WAW hazard
    between nearby instructions (the paper's choice).
Spilling
    Where no form of a kernel fits the free entries, selection marks its blocks
    (:attr:`Block.spill_base`) and :func:`allocate_spilling` rewrites a block that does
    not fit before allocating it: values made again where they are read, or stored to
    bank slots above the arrays and reloaded (:mod:`.spill`). The slots' direct
    addresses give the dependency graph below the exact memory order of the spill code.
Dependency graph
    Built on the allocated instructions with :func:`pimforge.rtl.ipim.isa.accesses`,
    the very read/write sets the control core's hazard check uses: RAW, WAR and WAW
    on every register entry and scratchpad line. Bank accesses are ordered only where
    they can touch the same address (:func:`bank_span`, :func:`may_alias`): a direct
    address is exact, an indirect one through a loop pointer spans every address the
    pointer takes over its loop, and a computed one (a gather, a scatter) the whole
    bank; so the loads of one array and the stores to another reorder freely.
Memory-order enforcement
    Sec. V-C adds dependencies between memory instructions to "defer the scheduling
    of consecutive memory instructions" (the request queue is slower than the issue)
    and keeps the bank accesses in the order of the input program (row-buffer
    locality). Here a bank instruction is not ready before :func:`mem_gap` slots after
    the one scheduled before it (the bank's column gap, or the time its request queue
    takes to free a slot where that is longer), and a window of unrolled iterations
    (:func:`preschedule`) keeps its bank accesses in the order of the software-pipelined
    program: the loads of iteration ``k + 1``, then the stores of iteration ``k``,
    each group in program order. (A chain over every bank access of the program in
    its order would keep each iteration's loads behind the stores of the one before:
    no overlap.)
Instruction reordering (Algorithm 1)
    A list schedule over the graph: ``T(v)``, the earliest step ``v`` could issue,
    starts at 0 and becomes ``max(T(u) + L(u))`` over the predecessors ``u`` as they
    are scheduled. At each step the ready instruction with the highest priority is
    taken: a load whose ``T`` has passed (loads first, to hide the DRAM latency),
    else the one with the smallest ``T`` (program order breaks ties; stores last).
Windows of iterations
    The unrolled iterations of a kernel are scheduled together, so that the loads of
    iteration ``k + 1`` issue while iteration ``k`` computes and ``k - 1`` stores.
    Allocating such a window in program order and then reordering it would let a load
    move up only to the instruction that frees its register; so a window is first
    ordered by Algorithm 1 on its virtual registers with at most the DataRF's free
    entries live (:func:`preschedule`), then allocated in that order (``max``: the
    entry free the longest).
Software-pipelined loops
    A loop's trips are overlapped the same way (:meth:`~.emit.Builder._pipelined`
    builds them): one block of a prologue (trip 0's loads, trip 0's computation, trip
    1's loads), the loop's body (the stores of trip ``k - 1``, the computation of trip
    ``k``, the loads of trip ``k + 1``) and an epilogue, each part ordered by Algorithm 1
    on virtual registers (:func:`preschedule_parts`; a store issues once its time has
    come, as a load does, so that the stores spread among the computation). A value
    keeps one DataRF entry in all three parts; liveness over the loop's control flow
    (the body falls into itself and the epilogue) gives the stretches it holds it, so
    a value carried to the next trip frees its entry between its last read and its
    reload, and the others use it then (:func:`allocate_loop`).
Passes
    The compiler's ``preschedule``, ``regalloc`` and ``reorder`` passes
    (:mod:`pimforge.sim.ipim.passes`) apply :func:`preschedule_block`,
    :func:`allocate_block` and :func:`reorder_block` to every :class:`Block` that
    instruction selection left; :func:`schedule_block` does all three in one call
    (selection measures its choices by it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from pimforge.rtl.ipim.isa import AluOp, Instr, Opcode, Resource, Store, accesses, conflicts

from .lang import CompileError

__all__ = ["Block", "DataRFFull", "Options", "OPT_LEVELS", "VInstr", "WHOLE_BANK", "allocate",
           "allocate_block", "allocate_loop", "allocate_spilling", "bank_span",
           "bank_turnaround", "block_key", "code_len", "dependency_graph", "may_alias", "mem_gap",
           "preschedule_block", "preschedule_parts", "register_spiller", "reorder",
           "reorder_block", "schedule_block", "store_hold"]


@dataclass(frozen=True)
class Options:
    """Backend switches: ``regalloc`` ``"max"`` or ``"min"``, ``reorder`` and
    ``mem_order`` on or off (without ``reorder`` the lowering also keeps its naive
    order: no loads hoisted before the computation, so that Fig. 12's ``baseline1``
    and ``baseline3`` are the program as lowered); ``unroll``: unroll a kernel into
    direct addresses where its code fits a quarter of the program memory (the
    lowering falls back to loops for the whole program when it does not fit);
    ``pipeline``: with ``reorder``, software-pipeline the innermost loops (the loads of
    trip k + 1 and the stores of trip k - 1 beside trip k's computation, where the
    loop allows it and the program memory holds it); ``slide``: with ``pipeline``, a
    stencil that runs as a loop walks its column strips down the rows and keeps the
    values the next row needs again in registers (:mod:`.sliding`)."""

    regalloc: str = "max"
    reorder: bool = True
    mem_order: bool = True
    unroll: bool = True
    pipeline: bool = True
    slide: bool = True

    def __post_init__(self):
        if self.regalloc not in ("max", "min"):
            raise CompileError(f"regalloc must be max or min, not {self.regalloc!r}")


class DataRFFull(CompileError):
    """A block needs more DataRF entries than are free (where the selection may try
    another form of the kernel, or spill: :mod:`.spill`)."""


#: Fig. 12's compiler configurations.
OPT_LEVELS: dict[str, Options] = {
    "opt": Options("max", True, True),
    "baseline1": Options("min", False, False),
    "baseline2": Options("min", True, True),
    "baseline3": Options("max", False, True),
    "baseline4": Options("max", True, False),
}

#: Instruction fields that name a DataRF entry.
_DRF_FIELDS = ("dst", "src1", "src2", "drf")


@dataclass
class VInstr:
    """An instruction whose DataRF fields in :attr:`vregs` are virtual registers.

    ``vregs`` maps a field name (``dst``, ``src1``, ``src2``, ``drf``) to a virtual
    register number; the other fields of :attr:`ins` are final.
    """

    ins: Instr
    vregs: dict[str, int] = field(default_factory=dict)

    def defs(self) -> list[int]:
        op = self.ins.opcode
        if op is Opcode.COMP and "dst" in self.vregs:
            return [self.vregs["dst"]]
        if op in (Opcode.LD_RF, Opcode.RD_PGSM, Opcode.RD_VSM, Opcode.MOV_DRF,
                  Opcode.RESET) and "drf" in self.vregs:
            return [self.vregs["drf"]]
        return []

    def uses(self) -> list[int]:
        op = self.ins.opcode
        out = [self.vregs[f] for f in ("src1", "src2") if f in self.vregs]
        if op is Opcode.COMP and "dst" in self.vregs and (
                self.ins.op is AluOp.MAC or self.ins.vec_mask != 0xF):
            out.append(self.vregs["dst"])        # read-modify-write of the destination
        if op in (Opcode.ST_RF, Opcode.WR_PGSM, Opcode.WR_VSM, Opcode.MOV_ARF) and \
                "drf" in self.vregs:
            out.append(self.vregs["drf"])
        return out


def _ranges(block: list[VInstr]) -> dict[int, tuple[int, int]]:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, vi in enumerate(block):
        for v in vi.uses():
            if v not in first:
                raise CompileError(f"virtual register v{v} is read before it is written")
            last[v] = i
        for v in vi.defs():
            first.setdefault(v, i)
            last.setdefault(v, i)
    return {v: (first[v], last[v]) for v in first}


def allocate(block: list[VInstr], free: list[int], policy: str,
             lru: dict[int, int] | None = None, linear: bool = False) -> list[Instr]:
    """Colour the virtual registers of *block* with the DataRF entries *free*.

    *linear*: colour in the order of definition instead of depth-first, each value
    taking (policy ``max``) the entry that has been free the longest; for a window of
    overlapped iterations, whose interference graph is one component that a
    depth-first order walks without regard to time.

    Raises
    ------
    CompileError
        The block needs more entries than *free* holds.
    """
    ranges = _ranges(block)
    order = sorted(ranges, key=lambda v: ranges[v])
    # Interference: overlapping live ranges (a register dies at its last read and may
    # be reused by a value defined by that same instruction).
    adj: dict[int, set[int]] = {v: set() for v in order}
    active: list[tuple[int, int]] = []
    for v in order:
        s, e = ranges[v]
        active = [(ee, u) for ee, u in active if ee > s]
        for _, u in active:
            adj[v].add(u)
            adj[u].add(v)
        active.append((e, v))
    # Depth-first over the interference graph, from the earliest definition.
    seen: set[int] = set()
    dfs: list[int] = []
    for root in order:
        if root in seen:
            continue
        stack = [root]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            dfs.append(v)
            stack.extend(sorted(adj[v] - seen, key=lambda u: -ranges[u][0]))
    if linear:
        colour = _linear(order, ranges, free, policy, lru)
        return [dataclasses.replace(vi.ins, **{f: colour[v] for f, v in vi.vregs.items()})
                for vi in block]
    colour: dict[int, int] = {}
    # max: the entry used least recently, counting the blocks before this one (*lru*,
    # updated in place), so that consecutive blocks do not reuse each other's registers
    last_used = {p: -1 - i for i, p in enumerate(reversed(free))}   # never used: oldest
    if lru:
        last_used.update({p: t for p, t in lru.items() if p in last_used})
    clock = max(last_used.values(), default=0)
    for v in dfs:
        taken = {colour[u] for u in adj[v] if u in colour}
        cands = [p for p in free if p not in taken]
        if not cands:
            raise DataRFFull(f"the kernel needs more than {len(free)} free DataRF entries "
                               f"({max(len(adj[u]) for u in adj) + 1} values live at once); "
                               f"raise ipim.drf_bytes or simplify the stage")
        p = min(cands) if policy == "min" else min(cands, key=lambda q: (last_used[q], q))
        colour[v] = p
        clock += 1
        last_used[p] = clock
    if lru is not None:
        lru.update(last_used)
    out = []
    for vi in block:
        out.append(dataclasses.replace(vi.ins, **{f: colour[v] for f, v in vi.vregs.items()}))
    return out


def _linear(order: list[int], ranges: dict[int, tuple[int, int]], free: list[int],
            policy: str, lru: dict[int, int] | None) -> dict[int, int]:
    """Linear-scan colouring by definition order (optimal in entries for live ranges)."""
    freed = {p: -1 - i for i, p in enumerate(reversed(free))}      # never used: oldest
    if lru:
        base = max(lru.values(), default=0)
        freed.update({p: t - base - len(free) - 1 for p, t in lru.items() if p in freed})
    busy: list[tuple[int, int]] = []          # (end, entry)
    colour: dict[int, int] = {}
    for v in order:
        s, e = ranges[v]
        for end, p in [x for x in busy if x[0] <= s]:
            busy.remove((end, p))
            freed[p] = end
        taken = {p for _, p in busy}
        cands = [p for p in free if p not in taken]
        if not cands:
            raise DataRFFull(f"the kernel needs more than {len(free)} free DataRF entries; "
                               f"raise ipim.drf_bytes or simplify the stage")
        p = min(cands) if policy == "min" else min(cands, key=lambda q: (freed[q], q))
        colour[v] = p
        busy.append((e, p))
    if lru is not None:
        clock = max(lru.values(), default=0) + 1
        for p, t in freed.items():
            lru[p] = clock + t if t >= 0 else lru.get(p, t)
        for e, p in busy:
            lru[p] = clock + e
    return colour


_DRAM_OPS = frozenset({Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM, Opcode.ST_PGSM})
#: Bank instructions that enter the PE's request queue in issue order (isa: queued).
_QUEUED_OPS = frozenset({Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM})


def _edge_latency(rw: list, ins: list[Instr], lat: list[int], a: int, b: int) -> int:
    """Cycles instruction *b* waits after *a* on the edge ``a -> b``: *a*'s latency, except
    between two bank accesses that enter the request queue in order and share no
    register (only their addresses may overlap): the queue keeps their order, so *b*
    issues right behind *a*."""
    if ins[a].opcode in _QUEUED_OPS and ins[b].opcode in _QUEUED_OPS:
        (ra, wa), (rb, wb) = rw[a], rw[b]
        nb = [x for x in (*rb, *wb) if x.store is not Store.BANK]
        if not conflicts(frozenset(x for x in wa if x.store is not Store.BANK), frozenset(nb)) \
                and not conflicts(frozenset(x for x in ra if x.store is not Store.BANK),
                                  frozenset(x for x in wb if x.store is not Store.BANK)):
            return 1
    return lat[a]


def latency(ins: Instr, ip) -> int:
    """The issue-to-result latency Algorithm 1 assumes for *ins*, in cycles of *ip*."""
    op = ins.opcode
    if op in _DRAM_OPS:
        t = ip.timing
        return max(1, round((t.tRCD + t.tCL) / ip.tck_ns))
    if op is Opcode.COMP:
        return {AluOp.ADD: ip.t_add, AluOp.SUB: ip.t_add, AluOp.MUL: ip.t_mul,
                AluOp.MAC: ip.t_mac}.get(ins.op, ip.t_logic)
    if op in (Opcode.RD_PGSM, Opcode.WR_PGSM):
        return ip.t_pgsm + ip.t_pebus
    if op in (Opcode.RD_VSM, Opcode.WR_VSM):
        return ip.t_vsm + ip.t_tsv
    return 1


#: A bank address range covering the whole bank (an access whose address is unknown).
WHOLE_BANK = (0, 1 << 32)


def bank_span(ins: Instr, ranges: dict[int, tuple[int, int]] | None = None
              ) -> tuple[int, int] | None:
    """The bank addresses ``(lo, hi)`` (inclusive) that *ins* may touch, or None for an
    instruction that does not access the bank.

    A direct address is exact. An indirect one through AddrRF entry ``a`` spans
    ``ranges[a]``: every address the pointer takes over its loop (its induction
    variable's whole range, so the span holds whatever the iteration); a pointer
    not in *ranges* (a computed address: a gather, a scatter) may touch the whole bank.
    """
    if ins.opcode not in _DRAM_OPS:
        return None
    if not ins.dram_ind:
        return (ins.dram, ins.dram)
    return (ranges or {}).get(ins.dram, WHOLE_BANK)


def may_alias(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two bank spans can touch the same address."""
    return a[0] <= b[1] and b[0] <= a[1]


def dependency_graph(prog: list[Instr], mem_order: bool = True,
                     ranges: dict[int, tuple[int, int]] | None = None) -> list[set[int]]:
    """``succ[i]``: the instructions that must follow instruction ``i`` (*mem_order*
    adds no edge: it is a resource constraint of :func:`reorder`, kept for callers)."""
    return _graph(prog, ranges)


def _graph(prog: list[Instr], ranges: dict[int, tuple[int, int]] | None = None,
           rw: list | None = None) -> list[set[int]]:
    """RAW, WAR and WAW dependencies: on register entries and scratchpad lines as the
    core's hazard check sees them (:func:`accesses`), and on bank addresses through
    :func:`bank_span`, so that two bank accesses are ordered only when they can touch
    the same address (loads of one array and stores to another reorder freely)."""
    succ: list[set[int]] = [set() for _ in prog]
    # non-bank resources, per store: {index or None: last writer} and readers since
    last_w: dict = {}
    reads_since: dict = {}
    # bank: exact addresses in dicts, spans (indirect accesses) in lists
    pt_w: dict[int, int] = {}
    pt_r: dict[int, list[int]] = {}
    wide_w: list[tuple[tuple[int, int], int]] = []
    wide_r: list[tuple[tuple[int, int], int]] = []

    def hits(res, table):
        t = table.get(res.store)
        if not t:
            return []
        if res.index is None:
            return list(t.values())
        return [v for k, v in ((res.index, t.get(res.index)), (None, t.get(None)))
                if v is not None]

    def bank_prev(span, table_pt, table_wide):
        out = []
        lo, hi = span
        if lo == hi:
            v = table_pt.get(lo)
            if v is not None:
                out.append(v)
        elif hi - lo < 4 * len(table_pt):
            for a in range(lo, hi + 1):
                v = table_pt.get(a)
                if v is not None:
                    out.append(v)
        else:
            out.extend(v for a, v in table_pt.items() if lo <= a <= hi)
        out.extend(j for sp, j in table_wide if may_alias(sp, span))
        return out

    for i, ins in enumerate(prog):
        r, w = rw[i] if rw is not None else accesses(ins)
        r = [x for x in r if x.store is not Store.BANK]
        w = [x for x in w if x.store is not Store.BANK]
        for res in r:
            for j in hits(res, last_w):
                succ[j].add(i)
        for res in w:
            for j in hits(res, last_w):
                succ[j].add(i)
            for js in hits(res, reads_since):
                for j in js:
                    succ[j].add(i)
        for res in w:
            lw = last_w.setdefault(res.store, {})
            rs = reads_since.setdefault(res.store, {})
            if res.index is None:
                lw.clear()
                rs.clear()
            else:
                lw.pop(res.index, None)
                rs.pop(res.index, None)
            lw[res.index] = i
        for res in r:
            reads_since.setdefault(res.store, {}).setdefault(res.index, []).append(i)
        span = bank_span(ins, ranges)
        if span is not None:
            writes = ins.opcode in (Opcode.ST_RF, Opcode.ST_PGSM)
            for j in bank_prev(span, pt_w, wide_w):
                succ[j].add(i)
            if writes:
                for js in bank_prev(span, pt_r, wide_r):
                    for j in (js if isinstance(js, list) else [js]):
                        succ[j].add(i)
                if span[0] == span[1]:
                    pt_w[span[0]] = i
                    pt_r.pop(span[0], None)
                else:
                    wide_w.append((span, i))
            elif span[0] == span[1]:
                pt_r.setdefault(span[0], []).append(i)
            else:
                wide_r.append((span, i))
        succ[i].discard(i)
    return succ


#: Cycles a bank access holds its request slot beyond the DRAM's ``tCL + tBL``: its hop
#: into the controller's queue, its response through the PE's completion port and the
#: slot's release (measured on the PE's RTL: a read issues 19 cycles after the read
#: whose slot it takes, at tCL 14 and tBL 2).
SLOT_OVERHEAD = 3


def bank_turnaround(ip) -> int:
    """Cycles a bank access holds its request slot (a write is acknowledged with a
    read's latency)."""
    t = ip.timing
    return int(-(-(t.tCL + t.tBL) // ip.tck_ns)) + SLOT_OVERHEAD


def mem_gap(ip) -> int:
    """Memory-order enforcement's spacing of bank instructions, in issue slots: a bank
    starts at most one access per ``tCCD`` (row hits), so a bank instruction issued
    sooner after the one before only waits in the request queue, where a full queue
    blocks the in-order core."""
    return max(1, round(ip.timing.tCCD / ip.tck_ns))


def store_hold(ip) -> int:
    """Instructions a DataRF entry a store reads last stays unused after the store, where
    the DataRF allows (:func:`allocate_loop`): the store holds its issued-queue slot, and
    so its source entry, until the bank has written it, :func:`bank_turnaround` and the
    two cycles of its issue and dispatch after it issues, longer where it waits in the
    request queue behind the loads of an open row."""
    return 4 * (bank_turnaround(ip) + 2)


def reorder(prog: list[Instr], ip, mem_order: bool,
            ranges: dict[int, tuple[int, int]] | None = None) -> list[Instr]:
    """Algorithm 1 on *prog* (one basic block, or a window of unrolled iterations).

    With memory-order enforcement, a bank instruction is not ready before
    :func:`mem_gap` slots after the bank instruction scheduled before it, so that
    computation fills the slots between them instead of a run of bank instructions
    waiting for the request queue (Sec. V-C: the added dependencies "defer the
    scheduling of consecutive memory instructions"); the order of the accesses that
    can touch one address is a dependency either way.
    """
    n = len(prog)
    succ = _graph(prog, ranges)
    indeg = [0] * n
    for s in succ:
        for j in s:
            indeg[j] += 1
    T = [0] * n
    lat = [latency(ins, ip) for ins in prog]
    rw = [accesses(ins) for ins in prog]
    is_dram = [ins.opcode in _DRAM_OPS for ins in prog]
    is_load = [ins.opcode in (Opcode.LD_RF, Opcode.LD_PGSM) for ins in prog]
    is_store = [ins.opcode in (Opcode.ST_RF, Opcode.ST_PGSM) for ins in prog]
    gap = mem_gap(ip) if mem_order else 0
    next_mem = 0          # the first slot a bank instruction may take
    ready = [i for i in range(n) if indeg[i] == 0]
    out: list[Instr] = []
    for step in range(n):
        def t(i):
            return max(T[i], next_mem) if is_dram[i] else T[i]
        loads = [i for i in ready if is_load[i] and t(i) <= step]
        # stores last among the ready: they then reach the bank as one run (row hits)
        # instead of one after each result, between the next block's loads
        pick = min(loads) if loads else min(ready, key=lambda i: (is_store[i], t(i), i))
        ready.remove(pick)
        out.append(prog[pick])
        T[pick] = max(T[pick], step)
        if is_dram[pick]:
            next_mem = max(step, next_mem) + gap
        for j in succ[pick]:
            T[j] = max(T[j], T[pick] + _edge_latency(rw, prog, lat, pick, j))
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return out


def _acyclic(succ: list[set[int]], extra: set[tuple[int, int]]) -> bool:
    """Whether the graph *succ* with the edges *extra* added has no cycle."""
    n = len(succ)
    more: dict[int, list[int]] = {}
    for a, b in extra:
        more.setdefault(a, []).append(b)
    indeg = [0] * n
    for a in range(n):
        for b in succ[a]:
            indeg[b] += 1
        for b in more.get(a, ()):
            indeg[b] += 1
    todo = [i for i in range(n) if indeg[i] == 0]
    seen = 0
    while todo:
        a = todo.pop()
        seen += 1
        for b in list(succ[a]) + more.get(a, []):
            indeg[b] -= 1
            if indeg[b] == 0:
                todo.append(b)
    return seen == n


#: DataRF resource numbers of virtual registers (beyond any physical entry)
_VREG = 1 << 20


def _virtual_accesses(vi: VInstr):
    """:func:`accesses` of *vi* with its virtual registers as resources of their own."""
    r, w = accesses(vi.ins)
    ph = {getattr(vi.ins, f) for f in vi.vregs}
    r = {x for x in r if not (x.store is Store.DRF and x.index in ph)}
    w = {x for x in w if not (x.store is Store.DRF and x.index in ph)}
    r |= {Resource(Store.DRF, _VREG + v) for v in vi.uses()}
    w |= {Resource(Store.DRF, _VREG + v) for v in vi.defs()}
    return frozenset(r), frozenset(w)


def preschedule(block: list[VInstr], ip, mem_order: bool, regs: int,
                ranges: dict[int, tuple[int, int]] | None = None,
                its: list[int] | None = None, live_in: frozenset = frozenset(),
                held: frozenset = frozenset(), stores_due: bool = False,
                strict: bool = False) -> list[VInstr]:
    """Algorithm 1 on the virtual registers of a window of iterations, before register
    allocation, keeping at most *regs* values live.

    Allocating a window in program order and then reordering it lets a load of the next
    iteration move up only to the instruction that frees its register, typically a
    store of the iteration before, whose register the load then waits for through the
    whole bank access. On virtual registers there is no such anti-dependency; the
    bound on live values takes its place, so that the allocation that follows fits the
    DataRF: an instruction that makes a value live waits while *regs* are live,
    unless nothing else is ready. *live_in*: values live at the block's start (defined
    before it); *held*: values that stay live once written, read or not (a loop's values
    carried to its next trip). *stores_due*: a store issues as soon as its time has come,
    as a load does (a run of stores at a block's end fills the request queue and
    blocks the in-order core behind it; spread among the computation they cost
    nothing). *strict*: raise :class:`DataRFFull` as soon as a forced pick leaves more
    than *regs* values live, where the caller allocates the order by linear scan
    (:func:`allocate`, ``linear``), which would then need as many entries: selection
    tries many windows that do not fit, and each is rejected without ordering the rest.
    """
    n = len(block)
    rw = [_virtual_accesses(vi) for vi in block]
    ins = [vi.ins for vi in block]
    succ = _graph(ins, ranges, rw)
    order_only: set[tuple[int, int]] = set()
    if mem_order and its is not None:
        # the bank accesses in the order of a software-pipelined program: the loads of
        # iteration k + 1 before the stores of iteration k, each group in program order
        lds: dict[int, list[int]] = {}
        sts: dict[int, list[int]] = {}
        for i, vi in enumerate(block):
            if vi.ins.opcode in (Opcode.LD_RF, Opcode.LD_PGSM):
                lds.setdefault(its[i], []).append(i)
            elif vi.ins.opcode in (Opcode.ST_RF, Opcode.ST_PGSM):
                sts.setdefault(its[i], []).append(i)
        seq: list[int] = []
        ks = sorted(set(its))
        seq += lds.get(ks[0], []) if ks else []
        for a, k in enumerate(ks):
            if a + 1 < len(ks):
                seq += lds.get(ks[a + 1], [])
            seq += sts.get(k, [])
        extra = {(a, b) for a, b in zip(seq, seq[1:]) if b not in succ[a]}
        if not _acyclic(succ, extra):
            # an iteration reads what the one before stores (a gather, an in-place
            # update): the bank accesses in program order instead
            seq = sorted(seq)
            extra = {(a, b) for a, b in zip(seq, seq[1:]) if b not in succ[a]}
        for a, b in extra:
            succ[a].add(b)
        order_only |= extra
    indeg = [0] * n
    for s_ in succ:
        for j in s_:
            indeg[j] += 1
    uses_left: dict[int, int] = {}
    for vi in block:
        for v in set(vi.uses()):
            uses_left[v] = uses_left.get(v, 0) + 1
    defs = [set(vi.defs()) for vi in block]
    uses = [set(vi.uses()) for vi in block]
    live: set[int] = {v for v in live_in if uses_left.get(v, 0) > 0}
    T = [0] * n
    lat = [latency(vi.ins, ip) for vi in block]
    is_dram = [vi.ins.opcode in _DRAM_OPS for vi in block]
    is_load = [vi.ins.opcode in (Opcode.LD_RF, Opcode.LD_PGSM) for vi in block]
    is_store = [vi.ins.opcode in (Opcode.ST_RF, Opcode.ST_PGSM) for vi in block]
    gap = mem_gap(ip) if mem_order else 0
    next_mem = 0
    ready = [i for i in range(n) if indeg[i] == 0]
    out: list[VInstr] = []
    due = [a or (stores_due and b) for a, b in zip(is_load, is_store)]

    def grows(i: int) -> int:
        new = len(defs[i] - live - uses[i]) if defs[i] else 0
        freed = sum(1 for v in uses[i] if uses_left.get(v, 0) == 1 and v not in defs[i]
                    and v in live)
        return new - freed

    for step in range(n):
        def t(i):
            return max(T[i], next_mem) if is_dram[i] else T[i]
        cands = ready
        if len(live) >= regs:
            cands = [i for i in ready if grows(i) <= 0] or ready
        loads = [i for i in cands if due[i] and t(i) <= step]
        pick = min(loads) if loads else min(cands, key=lambda i: (is_store[i], t(i), i))
        ready.remove(pick)
        out.append(block[pick])
        T[pick] = max(T[pick], step)
        if is_dram[pick]:
            next_mem = max(step, next_mem) + gap
        for v in uses[pick]:
            uses_left[v] -= 1
            if uses_left[v] == 0:
                live.discard(v)
        for v in defs[pick]:
            if uses_left.get(v, 0) > 0 or v in held:
                live.add(v)
        if strict and len(live) > regs:
            raise DataRFFull(f"the window keeps {len(live)} values live at once, and {regs} "
                             "DataRF entries are free")
        for j in succ[pick]:
            T[j] = max(T[j], T[pick] + (gap or 1 if (pick, j) in order_only else
                                        _edge_latency(rw, ins, lat, pick, j)))
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return out


_CACHE: dict = {}


@dataclass(frozen=True)
class _Failed:
    """A block :func:`schedule_block` could not schedule: the error it raised."""

    error: type
    args: tuple


def _liveness(block: list[VInstr], parts: tuple[int, ...]) -> tuple[set[int], set[int]]:
    """The values live into a pipelined loop's body and into its epilogue (the prologue
    falls into the body, the body into itself and the epilogue)."""
    p0, _, nb, _, _ = parts
    b0, b1 = p0 + 2, p0 + 2 + nb
    epi_in = _live_in(block, b1 + 2, len(block), set())
    body_in: set[int] = set()
    for _ in range(3):          # a single loop: the second pass settles it
        body_in = _live_in(block, b0, b1, body_in | epi_in)
    pro_in = _live_in(block, 0, p0, body_in)
    if pro_in:
        raise CompileError(f"virtual registers {sorted(pro_in)} are read before they are "
                           "written")
    return body_in, epi_in


def _live_in(block: list[VInstr], lo: int, hi: int, out: set[int]) -> set[int]:
    live = set(out)
    for i in range(hi - 1, lo - 1, -1):
        vi = block[i]
        live -= set(vi.defs()) - set(vi.uses())
        live |= set(vi.uses())
    return live


def preschedule_parts(block: list[VInstr], parts: tuple[int, ...], ip, mem_order: bool,
                      regs: int, ranges: dict[int, tuple[int, int]] | None = None,
                      window: list[int] | None = None) -> list[VInstr]:
    """A software-pipelined loop ordered part by part (:func:`preschedule`).

    The block is the prologue (trip 0's loads), the loop's two set-up instructions, the
    body (trip k's computation and stores, then trip k + 1's loads into the same
    virtual registers: each such load waits for the last read of the value it
    replaces), the loop's latch and the epilogue (the last trip's computation and
    stores); *parts* are their lengths. The loop instructions stay where they are.
    The loaded values stay in their registers through the whole loop, so the other
    values of each part have the entries they do not hold. *window*: ``1`` for the body's
    loads of the next trip, so that memory-order enforcement puts them before the
    trip's stores (:func:`preschedule`)."""
    body_in, epi_in = (frozenset(x) for x in _liveness(block, parts))
    if len(body_in) >= regs:
        raise DataRFFull(f"a pipelined loop carries {len(body_in)} values, and "
                           f"{regs} DataRF entries are free")
    live_in = (frozenset(), None, body_in, None, epi_in)
    held = (body_in, None, body_in, None, frozenset())
    out: list[VInstr] = []
    pos = 0
    for n, length in enumerate(parts):
        part = block[pos:pos + length]
        if n % 2:
            out += part
        else:
            its = None if window is None else list(window[pos:pos + length])
            out += preschedule(part, ip, mem_order, regs, ranges,
                               its if its and max(its) else None,
                               live_in=live_in[n], held=held[n], stores_due=True)
        pos += length
    return out


def _loop_segments(block: list[VInstr], parts: tuple[int, ...]
                   ) -> dict[int, list[tuple[int, int]]]:
    """Where each virtual register of a software-pipelined loop holds its entry: segments
    ``(start, end)`` of the flat block (written at ``start``, last read at ``end``; a
    segment open at a part's end runs to the part's end), from liveness over the
    loop's three blocks (the prologue falls into the body, the body into itself and
    the epilogue)."""
    p0, _, nb, _, _ = parts
    b0, b1 = p0 + 2, p0 + 2 + nb
    e0, n = b1 + 2, len(block)
    defs = [vi.defs() for vi in block]
    uses = [vi.uses() for vi in block]
    body_in, epi_in = _liveness(block, parts)
    segs: dict[int, list[tuple[int, int]]] = {}
    for lo, hi, out, edge in ((0, p0, body_in, b0), (b0, b1, body_in | epi_in, e0),
                              (e0, n, set(), n)):
        live = {v: edge for v in out}        # value -> end of its open segment
        for i in range(hi - 1, lo - 1, -1):
            for v in defs[i]:
                if v in live:
                    segs.setdefault(v, []).append((i, live.pop(v)))
                else:                        # written, never read: holds it at i
                    segs.setdefault(v, []).append((i, i))
            for v in uses[i]:
                live.setdefault(v, i)
        for v, end in live.items():          # live into the part
            segs.setdefault(v, []).append((lo if lo != b0 else b0 - 2, end))
    return segs


def allocate_loop(block: list[VInstr], parts: tuple[int, ...], free: list[int], policy: str,
                  lru: dict[int, int] | None = None, store_hold: int = 0) -> list[Instr]:
    """Colour a software-pipelined loop (:func:`preschedule_parts`, in its final order).

    Every virtual register keeps one entry in all three blocks, held only where it is
    live (:func:`_loop_segments`): a value the loop carries to its next trip holds its
    entry from its write to the body's end and from the body's start to its last read,
    and the other values take the entries in between. Values are coloured in the
    order they are first written, the loop's carried values first (policy ``max``: the
    entry free the longest, counting *lru*, which is updated in place; ``min``: the
    lowest). A value a bank store reads last keeps its entry *store_hold* instructions
    longer where the DataRF allows: the store may wait in the bank's queue behind the
    loads of the open row (FR-FCFS), and the core holds whatever next writes that entry
    until the store is done."""
    # a value that lives within one part takes an entry of its own in each part
    body_in, epi_in = _liveness(block, parts)
    keep = body_in | epi_in
    top = 1 + max((v for vi in block for v in vi.vregs.values()), default=0)
    named: list[VInstr] = []
    for n, vi in enumerate(block):
        part = 0 if n < parts[0] + 2 else 1 if n < parts[0] + parts[2] + 4 else 2
        named.append(VInstr(vi.ins, {f: v if v in keep else v + part * top
                                     for f, v in vi.vregs.items()}))
    block = named
    segs = _loop_segments(block, parts)
    b0 = parts[0] + 2
    carried = {v for v, ss in segs.items() if any(a <= b0 - 2 < b or a == b0 - 2
                                                   for a, b in ss)}
    ends = (parts[0], b0 + parts[2], len(block))

    def part_end(i: int) -> int:
        return next(e for e in ends if i < e) if i < ends[-1] else ends[-1]

    stores = {i for i, vi in enumerate(block) if vi.ins.opcode in (Opcode.ST_RF, Opcode.ST_PGSM)}

    def holding(h: int) -> dict[int, list[tuple[int, int]]]:
        return {v: [(a, max(b, min(b + h, part_end(b))) if b in stores and a < b else b)
                    for a, b in ss] for v, ss in segs.items()}
    last_used = {p: -1 - i for i, p in enumerate(reversed(free))}
    if lru:
        base = max(lru.values(), default=0)
        last_used.update({p: t - base - len(free) - 1 for p, t in lru.items() if p in last_used})
    colour: dict[int, int] = {}
    held: dict[int, list[tuple[int, int]]] = {}
    hold = store_hold
    while True:         # the longest hold the DataRF allows, halving it
        try:
            colour, held = _colour_segments(holding(hold) if hold else segs, carried, free,
                                            policy, last_used)
            break
        except CompileError:
            if not hold:
                raise
            hold //= 2
    if lru is not None:
        clock = max(lru.values(), default=0) + 1
        for p, ss in held.items():
            if ss:
                lru[p] = clock + max(b for _, b in ss)
    return [dataclasses.replace(vi.ins, **{f: colour[v] for f, v in vi.vregs.items()})
            for vi in block]


def _colour_segments(segs: dict[int, list[tuple[int, int]]], carried: set[int],
                     free: list[int], policy: str, last_used: dict[int, int]
                     ) -> tuple[dict[int, int], dict[int, list[tuple[int, int]]]]:
    held: dict[int, list[tuple[int, int]]] = {p: [] for p in free}
    colour: dict[int, int] = {}
    order = sorted(segs, key=lambda v: (v not in carried, min(segs[v])))
    for v in order:
        mine = segs[v]
        cands = [p for p in free if all(b <= s or e <= a for s, e in mine for a, b in held[p])]
        if not cands:
            raise DataRFFull(f"the kernel needs more than {len(free)} free DataRF entries; "
                               f"raise ipim.drf_bytes or simplify the stage")
        start = min(s for s, _ in mine)
        if policy == "min":
            p = min(cands)
        else:
            p = min(cands, key=lambda q: (max([b for a, b in held[q] if b <= start],
                                              default=last_used[q]), q))
        colour[v] = p
        held[p].extend(mine)
    return colour, held


def schedule_block(block: list[VInstr], free: list[int], ip, opts: Options,
                   lru: dict[int, int] | None = None,
                   ranges: dict[int, tuple[int, int]] | None = None,
                   window: list[int] | None = None, key: tuple = (),
                   parts: tuple[int, ...] | None = None,
                   spill_base: int | None = None) -> list[Instr]:
    """Allocate *block*'s registers (continuing the register-use history *lru*, updated
    in place), then reorder it, as *opts* says (memoized: the vaults and the repeated
    stages of a pipeline share most blocks). *ranges*: the bank addresses each
    loop pointer (AddrRF entry) spans, for :func:`bank_span`. *window*: the block is
    several iterations, ``window[i]`` the iteration of instruction ``i``; with
    reordering, :func:`preschedule` orders it before the registers are allocated.
    *parts*: the block is a software-pipelined loop (:func:`preschedule_parts`),
    ordered part by part and allocated in that order (raises :class:`DataRFFull`
    where the DataRF cannot hold it). *spill_base*: where the block, in program order,
    needs more entries than *free* holds, spill its values to the bank from that
    vector up (:func:`allocate_spilling`) instead of raising :class:`DataRFFull`. *key*:
    :func:`block_key` of these arguments, where the caller has it."""
    key = key or block_key(block, free, ip, opts, lru, ranges, window, parts, spill_base)
    hit = _CACHE.get(key)
    if isinstance(hit, _Failed):
        # a block that did not fit fails again (selection tries the same forms of a
        # kernel for every vault and unrolling budget): at once, with its message
        raise hit.error(*hit.args)
    if hit is None:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        try:
            hit = _schedule(block, free, ip, opts, lru, ranges, window, parts, spill_base)
        except CompileError as e:
            _CACHE[key] = _Failed(type(e), e.args)   # not the error: its frames
            raise
        _CACHE[key] = hit
    if lru is not None:
        lru.clear()
        lru.update(hit[1])
    return list(hit[0])


def _schedule(block: list[VInstr], free: list[int], ip, opts: Options,
              lru: dict[int, int] | None, ranges: dict[int, tuple[int, int]] | None,
              window: list[int] | None, parts: tuple[int, ...] | None,
              spill_base: int | None) -> tuple[tuple[Instr, ...], dict[int, int]]:
    """:func:`schedule_block`'s work: the code and the register-use history after it."""
    after: dict[int, int] = dict(lru or {})
    if parts is not None:
        pre = preschedule_parts(block, parts, ip, opts.mem_order, len(free), ranges, window)
        return tuple(allocate_loop(pre, parts, free, opts.regalloc, after,
                                   store_hold(ip))), after
    if window is not None and opts.reorder:
        # Algorithm 1 on the window's virtual registers, then registers in that order
        try:
            pre = preschedule(block, ip, opts.mem_order, len(free), ranges, window,
                              strict=True)
            return tuple(allocate(pre, free, opts.regalloc, after, linear=True)), after
        except CompileError:        # a forced pick went beyond the DataRF: the
            after = dict(lru or {})    # window allocated in program order, reordered
    prog = allocate_spilling(block, free, opts.regalloc, after, ip, ranges, spill_base)
    return tuple(reorder(prog, ip, opts.mem_order, ranges) if opts.reorder else prog), after


def allocate_spilling(block: list[VInstr], free: list[int], policy: str,
                      lru: dict[int, int] | None, ip,
                      ranges: dict[int, tuple[int, int]] | None,
                      spill_base: int | None) -> list[Instr]:
    """:func:`allocate` of *block* in program order; where it needs more entries than
    *free* and *spill_base* is given, the block with values spilled to the bank from
    that vector up (:func:`~.spill.spill_block`), allocated by linear scan (which then
    fits)."""
    try:
        return allocate(block, free, policy, lru)
    except DataRFFull:
        if spill_base is None:
            raise
    if _SPILLER is None:
        raise CompileError("spilling is not available: import pimforge.sim.ipim.spill")
    return allocate(_SPILLER(block, len(free), spill_base, ip, ranges), free, policy,
                    lru, linear=True)


#: The rewrite of a block that needs more entries than are free into one that fits
#: (:func:`.spill.spill_block`). Spilling rewrites this module's VInstrs, so it sits
#: above it and registers itself here (:func:`register_spiller`) when imported.
_SPILLER: Callable | None = None


def register_spiller(spiller: Callable) -> None:
    """Make *spiller* (``spiller(block, regs, base, ip, ranges)``) the rewrite that
    :func:`allocate_spilling` uses."""
    global _SPILLER
    _SPILLER = spiller


# -- the backend as passes over blocks ---------------------------------------------------

@dataclass(frozen=True, eq=False)
class Block:
    """One basic block of a vault's program between the compiler's backend passes.

    Instruction selection leaves it as :attr:`vinstrs` (virtual registers, in the order
    selected) with what :func:`schedule_block` takes beside it; the passes
    :func:`preschedule_block`, :func:`allocate_block` and :func:`reorder_block` then
    fill in :attr:`order`, :attr:`code` and :attr:`done`, returning new blocks.

    Attributes
    ----------
    vinstrs : tuple of VInstr
        The block as selected.
    free : tuple of int
        The DataRF entries the kernels may use.
    lru : dict
        The register-use history the block continues (the ``max`` allocator's).
    ranges : dict or None
        The bank addresses each loop pointer spans (:func:`bank_span`).
    window : tuple of int or None
        For a window of unrolled iterations, the iteration of each instruction.
    n : int
        Its length once scheduled: selection measures its choices (unrolled or loop,
        the unrolling budget, loop targets) by it.
    order : tuple of VInstr or None
        A window's order from Algorithm 1 on its virtual registers (:func:`preschedule`).
    code : tuple of Instr or None
        The block with physical registers.
    done : bool
        ``code`` is final (reordered where the options reorder).
    """

    vinstrs: tuple
    free: tuple
    lru: dict
    ranges: dict | None = None
    window: tuple | None = None
    n: int = 0
    order: tuple | None = None
    code: tuple | None = None
    done: bool = False
    #: what the passes' results depend on (:func:`block_key`), for their memo
    key: tuple = field(default=(), repr=False)
    #: a software-pipelined loop: its parts' lengths (:func:`preschedule_parts`)
    parts: tuple | None = None
    #: where the DataRF cannot hold the block, its values spill to the bank from this
    #: vector up (:func:`allocate_spilling`); None: they do not
    spill_base: int | None = None

    @property
    def iterations(self) -> int:
        """The unrolled iterations a window holds (1 for a plain block)."""
        return 1 if self.window is None else len(set(self.window))


def block_key(block, free, ip, opts: Options, lru: dict | None,
              ranges: dict | None, window, parts: tuple | None = None,
              spill_base: int | None = None) -> tuple:
    """Everything the backend's result for *block* depends on (the vaults and the
    repeated stages of a pipeline share most blocks)."""
    key = (tuple((vi.ins, tuple(sorted(vi.vregs.items()))) for vi in block), tuple(free),
           ip, opts, tuple(sorted(lru.items())) if lru else (),
           tuple(sorted((ranges or {}).items())), tuple(window or ()))
    key = key if parts is None else key + (parts,)
    return key if spill_base is None else key + (("spill", spill_base),)


_MEMO: dict = {}


def _memo(stage: str, blk: Block, make: Callable[[], Block]) -> Block:
    """*make()*'s result for *blk* at *stage*, computed once per :attr:`Block.key`."""
    if not blk.key:
        return make()
    hit = _MEMO.get((stage, blk.key))
    if hit is None:
        if len(_MEMO) > 4096:
            _MEMO.clear()
        hit = _MEMO[(stage, blk.key)] = make()
    return dataclasses.replace(blk, order=hit.order, code=hit.code, done=hit.done)


def code_len(items) -> int:
    """The instructions *items* (instructions and :class:`Block` s) come to."""
    return sum(i.n if isinstance(i, Block) else 1 for i in items)


def preschedule_block(blk: Block, ip, opts: Options) -> Block:
    """A window of iterations ordered by Algorithm 1 on its virtual registers, where
    *opts* reorder (:func:`preschedule`); any other block as it is. A window the
    DataRF cannot hold in that order keeps its selected order."""
    if blk.parts is not None:
        return _memo("preschedule", blk, lambda: dataclasses.replace(blk, order=tuple(
            preschedule_parts(list(blk.vinstrs), blk.parts, ip, opts.mem_order,
                              len(blk.free), blk.ranges, list(blk.window or ())))))
    if blk.window is None or not opts.reorder:
        return blk

    def make() -> Block:
        try:
            pre = preschedule(list(blk.vinstrs), ip, opts.mem_order, len(blk.free),
                              blk.ranges, list(blk.window), strict=True)
        except CompileError:
            return blk
        return dataclasses.replace(blk, order=tuple(pre))

    return _memo("preschedule", blk, make)


def allocate_block(blk: Block, opts: Options, ip=None) -> Block:
    """*blk* with its DataRF registers allocated (:func:`allocate`, policy
    ``opts.regalloc``): a prescheduled window in its order (``linear``), final; else
    the block as selected (its values spilled where it does not fit and
    :attr:`Block.spill_base` allows it: :func:`allocate_spilling`), left for
    :func:`reorder_block` where *opts* reorder."""
    def make() -> Block:
        if blk.parts is not None:     # a pipelined loop: no other order keeps its parts
            code = allocate_loop(list(blk.order), blk.parts, list(blk.free), opts.regalloc,
                                 dict(blk.lru), store_hold(ip) if ip is not None else 0)
            return dataclasses.replace(blk, code=tuple(code), done=True)
        if blk.order is not None:
            try:
                code = allocate(list(blk.order), list(blk.free), opts.regalloc,
                                dict(blk.lru), linear=True)
                return dataclasses.replace(blk, code=tuple(code), done=True)
            except CompileError:    # a forced pick went beyond the DataRF: the window
                pass                # allocated in program order, then reordered
        code = allocate_spilling(list(blk.vinstrs), list(blk.free), opts.regalloc,
                                 dict(blk.lru), ip, blk.ranges, blk.spill_base)
        return dataclasses.replace(blk, order=None, code=tuple(code), done=not opts.reorder)

    return _memo(f"regalloc{blk.order is not None}", blk, make)


def reorder_block(blk: Block, ip, opts: Options) -> Block:
    """*blk*'s allocated code reordered by Algorithm 1 (:func:`reorder`) unless it is
    final already."""
    if blk.done:
        return blk

    def make() -> Block:
        code = reorder(list(blk.code), ip, opts.mem_order, blk.ranges)
        return dataclasses.replace(blk, code=tuple(code), done=True)

    return _memo("reorder", blk, make)
