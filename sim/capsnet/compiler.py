"""Lower a CapsNet routing workload onto the vaults of a config.

:func:`compile_routing` takes a network (Table 1 sizes), the distribution
dimension chosen offline (``B``, ``L`` or ``H``, Sec. 5.1) and a config, and
returns a :class:`Compiled` workload: per-vault programs in the ISA of
:mod:`pimforge.rtl.capsnet.isa`, the placement of every array in each
vault's DRAM (vault-local word addresses, mapped to cube byte addresses by
the shared :class:`pimforge.rtl.mem.address_map.AddressMap`), and functions
that load ``u``/``W`` into the vault memories and gather ``v`` back.

Per dimension (only vaults that receive a non-empty slice take part; every
aggregation across vaults is spread over them as a reduce-scatter followed by
an all-gather, so no vault's controller or crossbar port carries more than its
share; active vault ``q`` *owns* the ``q``-th :func:`split` slice of the
aggregated outputs):

``B``  vault ``v`` routes its batch slice with the whole ``W`` (replicated).
       Per iteration each owner of a row slice of ``b`` (rows of ``N_L``)
       computes the softmax (Eq. 5) of its rows and sends them to every vault
       (all-gather of ``c``); every vault runs Eq. 2-4 on its samples,
       pre-aggregates the agreement over its samples and sends each owner its
       rows of the partial ``sum_k a_kij`` (reduce-scatter); each owner reduces
       its rows of the partials and updates its rows of ``b`` (Eq. 4).
``L``  vault ``v`` holds an L-capsule slice (its ``u``, ``W``, ``b``, ``c``).
       Per iteration: local softmax and Eq. 2 partial sums over its ``i``;
       each owner of a slice of the ``B * N_H`` output capsules receives its
       capsules of every vault's partial ``s`` (reduce-scatter), reduces them,
       squashes them (Eq. 3, whole capsules) and sends them to every vault
       (all-gather of ``v``); each vault then updates its own ``b`` (Eq. 4).
``H``  vault ``v`` holds an H-capsule slice (``u`` replicated). Per iteration
       every vault sends each owner of a row slice of ``b`` (rows of ``N_L``) its
       columns of those rows; the owner computes the softmax over its full rows
       and sends each vault its columns of ``c`` back; Eq. 2-4 are then local.

Every vault sends to the other vaults in ring order starting after itself
(vault ``q`` first to ``q + 1``, then ``q + 2``...), so that the first sends of
the vaults go to distinct crossbar ports.

Reduction order (what the ISA executor and the RTL compute, and what
:func:`program_ops` hands to :func:`~pimforge.verif.models.capsnet.routing.route_pim`):
every MAC group is summed in the PE's lane order
(:func:`~pimforge.verif.models.capsnet.isa.lane_sum`); a sum split across
vaults (over ``k`` for B, over ``i`` for L) is the lane-order sum of each
vault's slice, followed by the lane-order sum of the partials in vault order
(each owner sums its outputs' partials in vault order, so the results do not
depend on who owns them).

Loop normalisation (:func:`normalize`): the vault controller issues ``lanes``
outputs of an instruction's innermost output loop ``o3`` per cycle, so every
emitted instruction is rewritten to put its best output dimension there. The
outputs of one instruction are independent (each writes its own word, read
only by later instructions), so the output loops ``(o1, o2, o3)`` may be
permuted with their strides; two loops whose strides nest exactly (outer
stride = inner count x inner stride for ``a``, ``b`` and ``d``) are merged into
one; and a SEND's element loop is an output loop too (a copy has no reduction).
The MAC groups (``e`` loop) are untouched, so every sum keeps its order.
``compile_routing(..., normalize=False)`` emits the programs as written; the
tests check that both give the same memories bit for bit.

Barriers separate the phases: a vault reads or overwrites the words another
vault SENDs it only after the barrier that follows the SEND. Errors a user
can cause raise :class:`~pimforge.gen.errors.CapacityError`: a program longer than
``capsnet.imem_instructions`` or data larger than ``hmc.capacity_per_vault``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pimforge.gen.errors import CapacityError
from pimforge.rtl.capsnet.isa import COUNT_BITS, Hold, Instr, Opcode
from pimforge.rtl.capsnet.pe import Flow
from pimforge.rtl.mem.address_map import NUMPY_OPS, AddressMap
from pimforge.verif.models.capsnet.isa import ONE_BITS, lane_sum

from .networks import CapsNetSpec

__all__ = ["Compiled", "compile_routing", "split", "spread", "program_ops", "ProgramOrderOps",
           "normalize"]

F32 = np.float32

def split(n: int, parts: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` slices of ``range(n)`` over *parts*.

    Slices are ceil-sized; the last ones may be empty.
    """
    step = -(-n // parts)
    return [(min(n, p * step), min(n, (p + 1) * step)) for p in range(parts)]


def spread(words: int, subpage_words: int) -> int:
    """A stride of at least *words* that spreads lane streams over the banks.

    Consecutive sub-pages of a vault's placement go to consecutive banks, so
    lanes whose streams start an odd number of sub-pages apart are in
    different banks at every step of a lockstep walk (an odd count is coprime
    with the power-of-two bank count), where an even count puts several
    lanes' different rows in one bank (every access a row miss). Strides
    shorter than a sub-page, or ``subpage_words = 0``, are left as they are.
    """
    if subpage_words <= 0 or words < subpage_words:
        return words
    m = -(-words // subpage_words)
    return (m | 1) * subpage_words


class _Alloc:
    def __init__(self):
        self.top = 0
        self.arrays: dict[str, tuple[int, tuple[int, ...]]] = {}

    def __call__(self, name: str, *shape: int, align: int = 4) -> int:
        # Arrays start on a 16-byte block (or *align* words) so that each is whole blocks.
        self.top = -(-self.top // align) * align
        base = self.top
        self.arrays[name] = (base, tuple(shape))
        self.top += -(-int(np.prod(shape)) // 4) * 4
        return base


@dataclass
class Compiled:
    """A routing workload lowered onto the vaults."""

    net: CapsNetSpec
    dim: str
    vaults: int
    active: list[int]
    slices: list[tuple[int, int]]
    programs: list[list[Instr]]
    allocs: list[dict[str, tuple[int, tuple[int, ...]]]]
    words: list[int]
    amap: AddressMap
    labels: list[list[str]] = field(default_factory=list)
    v_at: list[tuple[int, str, tuple]] = field(default_factory=list)
    #: ``"local"``: each vault's data in its own vault (:meth:`cube_address`);
    #: ``"flat"``: the vaults' data one after the other in the cube's address
    #: space, whatever vault the address map puts it in; ``"central"``
    #: (PIM-Intra, Sec. 6.1): placed as ``"flat"``, and computed by units in the
    #: middle of the logic die, so that every block crosses the crossbar.
    placement: str = "local"

    def memories(self, u: np.ndarray, W: np.ndarray) -> list[np.ndarray]:
        """Vault memories (uint32 words) with ``u``, ``W`` and the constant 1.0 placed."""
        u = np.asarray(u, dtype=F32)
        W = np.asarray(W, dtype=F32)
        mems = [np.zeros(max(4, w), dtype=np.uint32) for w in self.words]
        for v in self.active:
            al = self.allocs[v]
            lo, hi = self.slices[v]
            us, ws = {"B": (u[lo:hi], W), "L": (u[:, lo:hi], W[lo:hi]),
                      "H": (u, W[:, lo:hi])}[self.dim]
            for name, arr in (("u", us), ("W", ws)):
                base, shape = al[name]
                assert arr.shape == shape, (name, arr.shape, shape)
                mems[v][base:base + arr.size] = np.ascontiguousarray(arr).view(np.uint32).ravel()
            mems[v][al["one"][0]] = ONE_BITS
        return mems

    def gather_v(self, mems: list[np.ndarray]) -> np.ndarray:
        """The output capsules ``v`` (B, N_H, C_H) read back from the vault memories."""
        n = self.net
        out = np.zeros((n.batch, n.n_h, n.c_h), dtype=np.uint32)
        for v, name, sl in self.v_at:
            base, shape = self.allocs[v][name]
            out[sl] = mems[v][base:base + int(np.prod(shape))].reshape(shape)
        return out.view(F32)

    def cube_address(self, vault: int, word):
        """Cube byte address of the 16-byte block holding vault-local *word*
        (:meth:`~pimforge.rtl.mem.address_map.AddressMap.vault_block_address`
        of :attr:`amap`). *word* may be an int or an integer numpy array."""
        return self.amap.vault_block_address(vault, word)

    def home_address(self, vault: int, word):
        """Cube byte address of the block holding *vault*'s local *word* under
        :attr:`placement`."""
        if self.placement == "local":
            return self.cube_address(vault, word)
        a = self.amap
        vault_bytes_log = a.bank_bits + a.row_bits + a.col_bits + 4
        return (np.int64(vault) << vault_bytes_log) + 16 * (np.asarray(word) >> 2)

    def bank_rows(self, vault: int, words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(bank, row, remote)`` of each of the first ``ceil(words / 4)`` blocks of
        *vault*, decoded by the shared address map (what the driver's DRAM model
        reads); ``remote`` marks blocks that cross the crossbar: those whose home
        is another vault, or every block with the ``"central"`` placement."""
        j = np.arange(-(-words // 4), dtype=np.int64)
        d = self.amap.decode(self.home_address(vault, 4 * j), NUMPY_OPS)
        home = np.asarray(d.vault, dtype=np.int64) + 0 * j
        return (np.asarray(d.bank, dtype=np.int64) + 0 * j,
                np.asarray(d.row, dtype=np.int64) + 0 * j,
                np.ones_like(home, dtype=bool) if self.placement == "central" else home != vault)

    def home_vaults(self, vault: int, words: int) -> np.ndarray:
        """The vault holding each of the first ``ceil(words / 4)`` blocks of *vault*'s
        data under :attr:`placement` (decoded by the shared address map)."""
        j = np.arange(-(-words // 4), dtype=np.int64)
        d = self.amap.decode(self.home_address(vault, 4 * j), NUMPY_OPS)
        return np.asarray(d.vault, dtype=np.int64) + 0 * j

    def program_words(self) -> int:
        return max(len(p) for p in self.programs)


_OPS = ("a", "b", "d")
_LEVELS = ("s1", "s2", "s3")


def normalize(ins: Instr, lanes: int, hold_words: int = 0) -> Instr:
    """*ins* with its output loops merged and permuted for a *lanes*-wide controller.

    Legal because the outputs of one instruction are independent (see the
    module doc); the element loop ``e`` of a reduction is never touched. The
    loop put innermost (``o3``) is the one with the fewest issue cycles
    ``prod(other counts) * ceil(n / lanes)``; on a tie the one whose lanes touch
    the fewest 16 B blocks of ``a``, ``b`` and ``d`` per cycle (a stride-1 loop
    reads a lane vector in four blocks, a strided one in one block per lane),
    then the longest.

    With ``hold_words`` (the lanes' stationary-operand registers), a FLOW
    whose group fits (``g <= hold_words``) and one of whose operands does
    not depend on one of the two other output loops gets that loop as ``o2``
    and the operand held (:class:`~pimforge.rtl.capsnet.isa.Hold`): it is
    then read once per lane block instead of once per ``o2`` iteration. An
    operand that differs between lanes is preferred (it costs a word per
    lane per cycle; a lane-broadcast one costs one word), then the longest
    loop.
    """
    if ins.op in (Opcode.BAR, Opcode.HALT):
        return ins
    dims = [(getattr(ins, f"n{k}"), {x: getattr(ins, f"{x}_s{k}") for x in _OPS})
            for k in (1, 2, 3)]
    g, se = ins.g, {x: getattr(ins, f"{x}_se") for x in _OPS}
    if ins.op is Opcode.SEND and g > 1:       # a copy's elements are outputs too
        dims.append((g, se))
        g, se = 1, {x: 0 for x in _OPS}
    dims = [d for d in dims if d[0] > 1]
    merged = True
    while merged:
        merged = False
        for i, (ni, si) in enumerate(dims):
            for j, (nj, sj) in enumerate(dims):
                if (i != j and ni * nj < 1 << COUNT_BITS
                        and all(si[x] == nj * sj[x] for x in _OPS)):
                    dims[j] = (ni * nj, sj)
                    del dims[i]
                    merged = True
                    break
            if merged:
                break
    if len(dims) > 3:        # an unmergeable 4-loop SEND: keep its element loop
        return ins
    total = int(np.prod([n for n, _ in dims])) if dims else 1

    def blocks(k):
        # 16 B blocks the lanes touch in one issue cycle: a lane-broadcast operand
        # one, a unit stride one per 4 lanes, a wider stride one per lane.
        n, st = dims[k]
        live = min(n, lanes)
        return sum(1 if st[x] == 0 else min(live, -(-live * abs(st[x]) // 4)) for x in _OPS)

    def cost(k):
        n = dims[k][0]
        return (total // n * -(-n // lanes), blocks(k), -n)
    if dims:
        best = min(range(len(dims)), key=cost)
        dims = [d for k, d in enumerate(dims) if k != best] + [dims[best]]
    dims = [(1, {x: 0 for x in _OPS})] * (3 - len(dims)) + dims
    hold = Hold.NONE
    if hold_words and ins.op is Opcode.FLOW and ins.hold is Hold.NONE and g <= hold_words:
        best_key = None
        for x, h in (("a", Hold.A), ("b", Hold.B)):
            if ins.op is Opcode.FLOW and x == "b" and ins.flow not in (Flow.MAC, Flow.DIV):
                continue
            for k in (0, 1):
                n, st = dims[k]
                if n > 1 and st[x] == 0:
                    key = (dims[2][1][x] != 0, n)
                    if best_key is None or key > best_key:
                        best_key, hold, at = key, h, k
        if hold is not Hold.NONE and at == 0:
            dims = [dims[1], dims[0], dims[2]]
    kw = {f.name: getattr(ins, f.name) for f in ins.__dataclass_fields__.values()}
    kw["hold"] = hold
    kw["g"] = g
    for x in _OPS:
        kw[f"{x}_se"] = se[x]
    for (n, st), lv in zip(dims, _LEVELS):
        kw[f"n{lv[1]}"] = n
        for x in _OPS:
            kw[f"{x}_{lv}"] = st[x]
    return Instr(**kw)


class _Emit:
    """Instruction builders for the equations on one vault's slice."""

    def __init__(self, lanes: int = 0, hold_words: int = 0):
        self.p: list[Instr] = []
        self.hold_words = hold_words
        self.labels: list[str] = []
        self.cur = "eq1"
        self.lanes = lanes       # 0: emit as written

    def __call__(self, **kw) -> None:
        ins = Instr(**kw)
        self.p.append(normalize(ins, self.lanes, self.hold_words) if self.lanes else ins)
        op = kw["op"]
        self.labels.append("sync" if op in (Opcode.BAR, Opcode.HALT)
                           else "xfer" if op is Opcode.SEND else self.cur)

    def eq1(self, u, W, uh, kv, lv, hv, ch, cl):
        self.cur = "eq1"
        uh, sk, si = uh
        self(op=Opcode.FLOW, flow=Flow.MAC, n1=kv, n2=lv, n3=hv * ch, g=cl,
             a=W, a_s2=hv * ch * cl, a_s3=cl, a_se=1,
             b=u, b_s1=lv * cl, b_s2=cl, b_se=1,
             d=uh, d_s1=sk, d_s2=si, d_s3=1)

    def softmax(self, b, m, t, e, z, c, one, rows, cols):
        self.cur = "eq5"
        self(op=Opcode.MAXR, n1=rows, g=cols, a=b, a_s1=cols, a_se=1, d=m, d_s1=1)
        self(op=Opcode.ADD, sign=1, n1=rows, n2=cols, a=b, a_s1=cols, a_s2=1,
             b=m, b_s1=1, d=t, d_s1=cols, d_s2=1)
        self(op=Opcode.FLOW, flow=Flow.EXP, n1=rows, n2=cols, a=t, a_s1=cols, a_s2=1,
             d=e, d_s1=cols, d_s2=1)
        self(op=Opcode.FLOW, flow=Flow.MAC, n1=rows, g=cols, a=e, a_s1=cols, a_se=1,
             b=one, d=z, d_s1=1)
        self(op=Opcode.FLOW, flow=Flow.DIV, n1=rows, n2=cols, a=e, a_s1=cols, a_s2=1,
             b=z, b_s1=1, d=c, d_s1=cols, d_s2=1)

    def eq2(self, uh, c, s, kv, lv, hv, ch):
        self.cur = "eq2"
        uh, sk, si = uh
        self(op=Opcode.FLOW, flow=Flow.MAC, n1=kv, n2=hv, n3=ch, g=lv,
             a=uh, a_s1=sk, a_s2=ch, a_s3=1, a_se=si,
             b=c, b_s2=1, b_se=hv, d=s, d_s1=hv * ch, d_s2=ch, d_s3=1)

    def squash(self, s, t, v, one, kv, hv, ch):
        self.cur = "eq3"
        n, n1p, r, q, rs, sc = (t + i * kv * hv for i in range(6))
        e2 = dict(n1=kv, n2=hv)

        def at(x):
            return dict(zip(("a", "a_s1", "a_s2"), (x, hv, 1)))
        self(op=Opcode.FLOW, flow=Flow.MAC, **e2, g=ch, a=s, a_s1=hv * ch, a_s2=ch, a_se=1,
             b=s, b_s1=hv * ch, b_s2=ch, b_se=1, d=n, d_s1=hv, d_s2=1)
        self(op=Opcode.ADD, **e2, **at(n), b=one, d=n1p, d_s1=hv, d_s2=1)
        self(op=Opcode.FLOW, flow=Flow.RECIP, **e2, **at(n1p), d=r, d_s1=hv, d_s2=1)
        self(op=Opcode.FLOW, flow=Flow.MAC, **e2, **at(n), b=r, b_s1=hv, b_s2=1,
             d=q, d_s1=hv, d_s2=1)
        self(op=Opcode.FLOW, flow=Flow.ISQRT, **e2, **at(n), d=rs, d_s1=hv, d_s2=1)
        self(op=Opcode.FLOW, flow=Flow.MAC, **e2, **at(q), b=rs, b_s1=hv, b_s2=1,
             d=sc, d_s1=hv, d_s2=1)
        self(op=Opcode.SELPOS, **e2, **at(sc), b=n, b_s1=hv, b_s2=1, d=sc, d_s1=hv, d_s2=1)
        self(op=Opcode.FLOW, flow=Flow.MAC, **e2, n3=ch, a=s, a_s1=hv * ch, a_s2=ch, a_s3=1,
             b=sc, b_s1=hv, b_s2=1, d=v, d_s1=hv * ch, d_s2=ch, d_s3=1)

    def eq4(self, uh, v, agr, p, b, one, kv, lv, hv, ch):
        self.cur = "eq4"
        uh, sk, si = uh
        self(op=Opcode.FLOW, flow=Flow.MAC, n1=kv, n2=lv, n3=hv, g=ch,
             a=uh, a_s1=sk, a_s2=si, a_s3=ch, a_se=1,
             b=v, b_s1=hv * ch, b_s3=ch, b_se=1, d=agr, d_s1=lv * hv, d_s2=hv, d_s3=1)
        self(op=Opcode.FLOW, flow=Flow.MAC, n1=lv, n2=hv, g=kv, a=agr, a_s1=hv, a_s2=1,
             a_se=lv * hv, b=one, d=p, d_s1=hv, d_s2=1)
        if b is not None:
            self(op=Opcode.ADD, n1=lv, n2=hv, a=b, a_s1=hv, a_s2=1, b=p, b_s1=hv, b_s2=1,
                 d=b, d_s1=hv, d_s2=1)

    def send(self, src, dst, peer, n1, g, src_s1=None, dst_s1=None):
        self(op=Opcode.SEND, peer=peer, n1=n1, g=g, a=src, a_s1=g if src_s1 is None else src_s1,
             a_se=1, d=dst, d_s1=g if dst_s1 is None else dst_s1, d_se=1)

    def reduce(self, parts, out, one, n, count, label):
        """``out[x] = lane-order sum over the count partials parts[q*n + x]``."""
        self.cur = label
        self(op=Opcode.FLOW, flow=Flow.MAC, n1=n, g=count, a=parts, a_s1=1, a_se=n, b=one,
             d=out, d_s1=1)


def compile_routing(net: CapsNetSpec, dim: str, cfg, *, vaults: int | None = None,
                    capacity_bytes: int | None = None, mapping: str | None = None,
                    normalize: bool = True, intra_vault: bool = True) -> Compiled:
    """Programs and placement of *net*'s routing distributed along *dim* on *cfg*'s vaults.

    ``vaults`` overrides the number of vaults that compute; ``capacity_bytes`` the
    data capacity of each (default ``hmc.capacity_per_vault``); ``mapping``
    (``"default"`` or ``"capsnet"``) the address mapping of the placement
    (default ``hmc.mapping``), which decides the DRAM bank and row of every
    block; ``normalize=False`` skips the loop normalisation (for checks);
    ``intra_vault=False`` drops the intra-vault placement and dataflow of
    Sec. 5.2-5.3: no stationary operands, ``u_hat`` packed (see
    :func:`spread`).
    """
    dim = str(dim).upper()
    if dim not in ("B", "L", "H"):
        raise ValueError(f"dimension must be one of B, L, H, not {dim!r}")
    nv = cfg.hmc.vaults if vaults is None else vaults
    mapping = mapping or cfg.hmc.mapping
    if mapping not in ("default", "capsnet"):
        raise ValueError(f"mapping must be 'default' or 'capsnet', not {mapping!r}")
    if mapping == "capsnet" and cfg.hmc.row_bytes < 256:
        raise ValueError("mapping 'capsnet' needs hmc.row_bytes >= 256 (its 256 B sub-pages)")
    amap = AddressMap.from_config(cfg.hmc, mapping)
    sub = amap.placement_subpage_bytes // 4 if intra_vault else 0
    nb, nl, nh, it, cl, ch = net.batch, net.n_l, net.n_h, net.iterations, net.c_l, net.c_h
    full = {"B": nb, "L": nl, "H": nh}[dim]
    slices = split(full, nv)
    active = [v for v in range(nv) if slices[v][1] > slices[v][0]]
    na = len(active)
    master = active[0]
    # The aggregation's owners: active vault q owns the q-th slice of the
    # capsules (B * N_H) of s for L, of the rows of b (N_L) for B and H.
    own = dict(zip(active, split(nb * nh if dim == "L" else nl, na)))
    owners = [v for v in active if own[v][1] > own[v][0]]
    allocs = [_Alloc() for _ in range(nv)]
    progs = [_Emit(cfg.capsnet.pes_per_vault if normalize else 0,
                   cfg.capsnet.hold_words if intra_vault else 0)
             for _ in range(nv)]
    v_at: list[tuple[int, str, tuple]] = []
    ar: list[dict] = [{} for _ in range(nv)]
    for v in active:
        lo, hi = slices[v]
        n = hi - lo
        kv, lv, hv = {"B": (n, nl, nh), "L": (nb, n, nh), "H": (nb, nl, n)}[dim]
        cnt = own[v][1] - own[v][0]
        al, a = allocs[v], ar[v]
        a["one"] = al("one", 1)
        a["u"] = al("u", kv, lv, cl)
        a["W"] = al("W", lv, hv, ch, cl)
        si = spread(hv * ch, sub)
        sk = spread(lv * si, sub)
        a["uh"] = (al("uh", kv * sk, align=sub or 4), sk, si)
        a["c"] = al("c", lv, hv)
        a["s"] = al("s", kv, hv, ch)
        a["tmp"] = al("tmp", 6, kv, hv)
        a["v"] = al("v", kv, hv, ch)
        a["agr"] = al("agr", kv, lv, hv)
        a["p"] = al("p", lv, hv)
        a["dims"] = (kv, lv, hv)
        if dim == "L":
            a["b"] = al("b", lv, hv)
            a.update(_softmax_arrays_prefixed(al, "sm", lv, hv))
            if cnt:
                a["S"] = al("S", na, cnt, ch)
                a["sred"] = al("sred", cnt, ch)
                a["tmpm"] = al("tmpm", 6, cnt)
            a["vfull"] = al("vfull", nb, nh, ch)
        elif dim == "H":
            a["b"] = al("b", lv, hv)
            if cnt:
                a["Bown"] = al("Bown", cnt, nh)
                a.update(_softmax_arrays_prefixed(al, "sm", cnt, nh))
        elif cnt:
            # The softmax of the owned rows writes them straight into c.
            a["b"] = al("b", cnt, nh)
            a["P"] = al("P", na, cnt, nh)
            a["tot"] = al("tot", cnt, nh)
            a.update(_softmax_arrays_prefixed(al, "sm", cnt, nh, ("m", "t", "e", "z")))
    for v in active:
        a, e = ar[v], progs[v]
        kv, lv, hv = a["dims"]
        e.eq1(a["u"], a["W"], a["uh"], kv, lv, hv, ch, cl)
    for _ in range(it):
        if dim == "B":
            # Softmax of the owned rows of b, then all-gather of c.
            for v in owners:
                a, e = ar[v], progs[v]
                r0, r1 = own[v]
                e.softmax(a["b"], a["sm_m"], a["sm_t"], a["sm_e"], a["sm_z"],
                          a["c"] + r0 * nh, a["one"], r1 - r0, nh)
                for w in _stagger(active, v):
                    if w != v:
                        e.send(a["c"] + r0 * nh, ar[w]["c"] + r0 * nh, w, 1, (r1 - r0) * nh)
            _barrier(progs, active)
            # Eq. 2-4 on each batch slice, then reduce-scatter of the partial
            # agreements: each owner gets its rows of every vault's p.
            for q, v in enumerate(active):
                a, e = ar[v], progs[v]
                kv, lv, hv = a["dims"]
                e.eq2(a["uh"], a["c"], a["s"], kv, lv, hv, ch)
                e.squash(a["s"], a["tmp"], a["v"], a["one"], kv, hv, ch)
                e.eq4(a["uh"], a["v"], a["agr"], a["p"], None, a["one"], kv, lv, hv, ch)
                for w in _stagger(owners, v, active):
                    r0, r1 = own[w]
                    e.send(a["p"] + r0 * nh, ar[w]["P"] + q * (r1 - r0) * nh, w, 1,
                           (r1 - r0) * nh)
            _barrier(progs, active)
            for v in owners:
                a, e = ar[v], progs[v]
                n = (own[v][1] - own[v][0]) * nh
                e.reduce(a["P"], a["tot"], a["one"], n, na, "eq4")
                e(op=Opcode.ADD, n1=n, a=a["b"], a_s1=1, b=a["tot"], b_s1=1, d=a["b"], d_s1=1)
        elif dim == "L":
            # Local softmax and Eq. 2, then reduce-scatter of the partial s:
            # each owner gets its capsules of every vault's s.
            for q, v in enumerate(active):
                a, e = ar[v], progs[v]
                kv, lv, hv = a["dims"]
                e.softmax(a["b"], a["sm_m"], a["sm_t"], a["sm_e"], a["sm_z"], a["c"],
                          a["one"], lv, hv)
                e.eq2(a["uh"], a["c"], a["s"], kv, lv, hv, ch)
                for w in _stagger(owners, v, active):
                    c0, c1 = own[w]
                    e.send(a["s"] + c0 * ch, ar[w]["S"] + q * (c1 - c0) * ch, w, 1,
                           (c1 - c0) * ch)
            _barrier(progs, active)
            # Each owner reduces (in vault order) and squashes its capsules
            # straight into its v, then all-gathers them.
            for v in owners:
                a, e = ar[v], progs[v]
                c0, c1 = own[v]
                e.reduce(a["S"], a["sred"], a["one"], (c1 - c0) * ch, na, "eq2")
                e.squash(a["sred"], a["tmpm"], a["vfull"] + c0 * ch, a["one"], 1, c1 - c0, ch)
                for w in _stagger(active, v):
                    if w != v:
                        e.send(a["vfull"] + c0 * ch, ar[w]["vfull"] + c0 * ch, w, 1,
                               (c1 - c0) * ch)
            _barrier(progs, active)
            for v in active:
                a, e = ar[v], progs[v]
                kv, lv, hv = a["dims"]
                e.eq4(a["uh"], a["vfull"], a["agr"], a["p"], a["b"], a["one"], kv, lv, hv, ch)
        else:
            # Transpose: each owner gathers its rows of b from every column slice.
            for v in active:
                a = ar[v]
                lo, hi = slices[v]
                for w in _stagger(owners, v, active):
                    r0, r1 = own[w]
                    progs[v].send(a["b"] + r0 * (hi - lo), ar[w]["Bown"] + lo, w, r1 - r0,
                                  hi - lo, dst_s1=nh)
            _barrier(progs, active)
            # Softmax of the owned rows; each vault gets its columns of them back.
            for v in owners:
                a, e = ar[v], progs[v]
                r0, r1 = own[v]
                e.softmax(a["Bown"], a["sm_m"], a["sm_t"], a["sm_e"], a["sm_z"], a["sm_c"],
                          a["one"], r1 - r0, nh)
                for w in _stagger(active, v):
                    lo, hi = slices[w]
                    e.send(a["sm_c"] + lo, ar[w]["c"] + r0 * (hi - lo), w, r1 - r0, hi - lo,
                           src_s1=nh)
            _barrier(progs, active)
            for v in active:
                a, e = ar[v], progs[v]
                kv, lv, hv = a["dims"]
                e.eq2(a["uh"], a["c"], a["s"], kv, lv, hv, ch)
                e.squash(a["s"], a["tmp"], a["v"], a["one"], kv, hv, ch)
                e.eq4(a["uh"], a["v"], a["agr"], a["p"], a["b"], a["one"], kv, lv, hv, ch)
    for v in range(nv):
        progs[v](op=Opcode.HALT)
    if dim == "L":
        # After the all-gather every active vault holds the whole v.
        v_at.append((master, "vfull", (slice(None),)))
    else:
        for v in active:
            lo, hi = slices[v]
            v_at.append((v, "v", (slice(lo, hi),) if dim == "B" else (slice(None),
                                                                          slice(lo, hi))))
    programs = [e.p for e in progs]
    labels = [e.labels for e in progs]
    # Idle vaults still take part in every barrier.
    nbar = sum(1 for i in programs[master] if i.op is Opcode.BAR)
    for v in range(nv):
        if v not in active:
            programs[v] = [Instr(Opcode.BAR)] * nbar + [Instr(Opcode.HALT)]
            labels[v] = ["sync"] * (nbar + 1)
    comp = Compiled(net, dim, nv, active, slices, programs, [al.arrays for al in allocs],
                    [al.top for al in allocs], amap, labels, v_at)
    _check_capacity(comp, cfg, capacity_bytes or cfg.hmc.capacity_per_vault)
    return comp


def _stagger(dests: list[int], v: int, ring: list[int] | None = None) -> list[int]:
    """*dests* in the order vault *v* sends to them: the next vault after *v* on
    the *ring* of the active vaults (default *dests*) first, *v* itself last, so
    that the vaults start on different crossbar ports."""
    ring = dests if ring is None else ring
    q, n = ring.index(v), len(ring)
    order = {w: (ring.index(w) - q - 1) % n for w in dests}
    return sorted(dests, key=order.__getitem__)


def _softmax_arrays_prefixed(al: _Alloc, pre: str, rows: int, cols: int,
                             keys: tuple[str, ...] = ("m", "t", "e", "z", "c")) -> dict:
    shapes = {"m": (rows,), "t": (rows, cols), "e": (rows, cols), "z": (rows,),
              "c": (rows, cols)}
    return {f"{pre}_{k}": al(f"{pre}_{k}", *shapes[k]) for k in keys}


def _barrier(progs: list[_Emit], active: list[int]) -> None:
    for v in active:
        progs[v](op=Opcode.BAR)


def _check_capacity(comp: Compiled, cfg, capacity: int) -> None:
    size = comp.program_words()
    if size > cfg.capsnet.imem_instructions:
        raise CapacityError(
            f"the {comp.net.name} routing program for dimension {comp.dim} has {size} "
            f"instructions; the instruction memory holds capsnet.imem_instructions = "
            f"{cfg.capsnet.imem_instructions}: raise it in the config")
    for v, w in enumerate(comp.words):
        if 4 * w > capacity:
            raise CapacityError(
                f"{comp.net.name} (dimension {comp.dim}) needs {4 * w} bytes in vault {v}; "
                f"it has {capacity} (hmc.capacity_per_vault is "
                f"{cfg.hmc.capacity_per_vault}): raise it in the config or shrink the "
                f"network with --scale")


class ProgramOrderOps:
    """:class:`~pimforge.verif.models.capsnet.routing.RoutingOps` in the compiled programs' order.

    ``exp``/``rsqrt``/``recip`` are the PE's flows; every sum is a lane-order MAC
    sum, split by vault slices where the program splits it (``k_slices`` for
    the sum over the batch, ``l_slices`` for Eq. 2's sum over ``i``).
    """

    def __init__(self, pe, *, k_slices=None, l_slices=None):
        self.pe = pe
        self.name = "pim-program"
        self.k_slices = k_slices
        self.l_slices = l_slices

    @staticmethod
    def _bits(x):
        return np.ascontiguousarray(x, dtype=F32).view(np.uint32)

    def exp(self, x):
        return self.pe.exp(self._bits(x)).view(F32)

    def rsqrt(self, x):
        return self.pe.isqrt(self._bits(x)).view(F32)

    def recip(self, x):
        return self.pe.recip(self._bits(x)).view(F32)

    def _lsum(self, x, axis):
        b = np.moveaxis(self._bits(x), axis, -1)
        return lane_sum(b, self.pe.lanes).view(F32)

    def sum(self, x, axis):
        x = np.asarray(x, dtype=F32)
        sl = None
        if x.ndim == 3 and axis == 0:
            sl = self.k_slices
        elif x.ndim == 4 and axis == 1:
            sl = self.l_slices
        if not sl:
            return self._lsum(x, axis)
        parts = [self._lsum(np.take(x, range(lo, hi), axis=axis), axis) for lo, hi in sl]
        return self._lsum(np.stack(parts, axis=-1), -1)


def program_ops(comp: Compiled, pe) -> ProgramOrderOps:
    """The ops object under which ``route_pim`` computes exactly what *comp*'s programs do."""
    sl = [comp.slices[v] for v in comp.active]
    return ProgramOrderOps(pe, k_slices=sl if comp.dim == "B" else None,
                           l_slices=sl if comp.dim == "L" else None)
