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
Dependency graph
    Built on the allocated instructions with :func:`pimforge.rtl.ipim.isa.accesses`,
    the very read/write sets the control core's hazard check uses: RAW, WAR and WAW
    on every register entry and memory. With memory-order enforcement, every DRAM
    instruction also depends on the DRAM instruction before it, so that reordering
    keeps the program's bank access order (its row-buffer locality) and does not
    bunch loads into the one request queue of each bank.
Instruction reordering (Algorithm 1)
    A list schedule over the graph: ``T(v)``, the earliest step ``v`` could issue,
    starts at 0 and becomes ``max(T(u) + L(u))`` over the predecessors ``u`` as they
    are scheduled. At each step the ready instruction with the highest priority is
    taken: a load whose ``T`` has passed (loads first, to hide the DRAM latency),
    else the one with the smallest ``T`` (program order breaks ties).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pimforge.rtl.ipim.isa import AluOp, Instr, Opcode, accesses

from .lang import CompileError

__all__ = ["Options", "OPT_LEVELS", "VInstr", "allocate", "dependency_graph", "reorder",
           "schedule_block"]


@dataclass(frozen=True)
class Options:
    """Backend switches: ``regalloc`` ``"max"`` or ``"min"``, ``reorder`` and
    ``mem_order`` on or off; ``unroll``: unroll a kernel into direct addresses where its
    code fits a quarter of the program memory (the lowering falls back to loops for
    the whole program when it does not fit)."""

    regalloc: str = "max"
    reorder: bool = True
    mem_order: bool = True
    unroll: bool = True

    def __post_init__(self):
        if self.regalloc not in ("max", "min"):
            raise CompileError(f"regalloc must be max or min, not {self.regalloc!r}")


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
             lru: dict[int, int] | None = None) -> list[Instr]:
    """Colour the virtual registers of *block* with the DataRF entries *free*.

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
            raise CompileError(f"the kernel needs more than {len(free)} free DataRF entries "
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


_DRAM_OPS = frozenset({Opcode.LD_RF, Opcode.ST_RF, Opcode.LD_PGSM, Opcode.ST_PGSM})


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


def dependency_graph(prog: list[Instr], mem_order: bool) -> list[set[int]]:
    """``succ[i]``: the instructions that must follow instruction ``i``."""
    return _graph(prog, mem_order)[0]


def _graph(prog: list[Instr], mem_order: bool) -> tuple[list[set[int]], set[tuple[int, int]]]:
    """The dependency graph and its memory-order edges that are not also a data
    dependency (an order of issue, with no result to wait for)."""
    succ: list[set[int]] = [set() for _ in prog]
    order_only: set[tuple[int, int]] = set()
    last_w: dict = {}
    reads_since: dict = {}
    last_dram = None
    for i, ins in enumerate(prog):
        r, w = accesses(ins)
        # A whole-store access (an indirect address) touches every entry of that store.
        def hits(res, table):
            out = []
            for k, v in table.items():
                if k.store is res.store and (k.index is None or res.index is None
                                             or k.index == res.index):
                    out.append(v)
            return out

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
            for k in [k for k in list(last_w) if k.store is res.store and
                      (res.index is None or k.index == res.index)]:
                del last_w[k]
            for k in [k for k in list(reads_since) if k.store is res.store and
                      (res.index is None or k.index == res.index)]:
                del reads_since[k]
            last_w[res] = i
        for res in r:
            reads_since.setdefault(res, []).append(i)
        if mem_order and ins.opcode in _DRAM_OPS:
            if last_dram is not None and i not in succ[last_dram]:
                succ[last_dram].add(i)
                order_only.add((last_dram, i))
            last_dram = i
        succ[i].discard(i)
    return succ, order_only


def reorder(prog: list[Instr], ip, mem_order: bool) -> list[Instr]:
    """Algorithm 1 on *prog* (one basic block)."""
    n = len(prog)
    succ, order_only = _graph(prog, mem_order)
    indeg = [0] * n
    for s in succ:
        for j in s:
            indeg[j] += 1
    T = [0] * n
    lat = [latency(ins, ip) for ins in prog]
    is_load = [ins.opcode in (Opcode.LD_RF, Opcode.LD_PGSM) for ins in prog]
    is_store = [ins.opcode in (Opcode.ST_RF, Opcode.ST_PGSM) for ins in prog]
    ready = [i for i in range(n) if indeg[i] == 0]
    out: list[Instr] = []
    for step in range(n):
        loads = [i for i in ready if is_load[i] and T[i] <= step]
        # stores last among the ready: they then reach the bank as one run (row hits)
        # instead of one after each result, between the next block's loads
        pick = min(loads) if loads else min(ready, key=lambda i: (is_store[i], T[i], i))
        ready.remove(pick)
        out.append(prog[pick])
        T[pick] = max(T[pick], step)
        for j in succ[pick]:
            T[j] = max(T[j], T[pick] + (1 if (pick, j) in order_only else lat[pick]))
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return out


_CACHE: dict = {}


def schedule_block(block: list[VInstr], free: list[int], ip, opts: Options,
                   lru: dict[int, int] | None = None) -> list[Instr]:
    """Allocate *block*'s registers (continuing the register-use history *lru*, updated
    in place), then reorder it, as *opts* says (memoized: the vaults and the repeated
    stages of a pipeline share most blocks)."""
    before = tuple(sorted(lru.items())) if lru else ()
    key = (tuple((vi.ins, tuple(sorted(vi.vregs.items()))) for vi in block), tuple(free),
           ip, opts, before)
    hit = _CACHE.get(key)
    if hit is None:
        after: dict[int, int] = dict(lru or {})
        prog = allocate(block, free, opts.regalloc, after)
        hit = (tuple(reorder(prog, ip, opts.mem_order) if opts.reorder else prog), after)
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[key] = hit
    if lru is not None:
        lru.clear()
        lru.update(hit[1])
    return list(hit[0])

