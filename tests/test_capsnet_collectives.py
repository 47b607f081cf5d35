"""Distributed aggregation of the compiled routing programs (reduce-scatter + all-gather).

For every distribution dimension the cross-vault work is spread over the
active vaults: L reduces and squashes slices of ``s``, B reduces the partial
agreements and runs the softmax on row slices of ``b``, H runs the softmax on
row slices gathered from the column slices. The results must stay bit for bit
those of :func:`~pimforge.verif.models.capsnet.routing.route_pim` in the programs'
order, on vault counts that do not divide the sizes and on more vaults than
there are slices to own; no vault may touch words that another vault's SEND
writes before the barrier that follows the SEND.
"""

import numpy as np
import pytest

from pimforge.gen.config import load_config
from pimforge.rtl.capsnet.isa import Instr, Opcode
from pimforge.rtl.capsnet.pe import Flow
from pimforge.sim.capsnet.compiler import compile_routing, program_ops
from pimforge.sim.capsnet.networks import CapsNetSpec
from pimforge.verif.models.capsnet.isa import execute, issue_cycles
from pimforge.verif.models.capsnet.pe import PEModel
from pimforge.verif.models.capsnet.routing import route_pim

SEED = 20261123

#: (B, N_L, N_H): sizes that few vault counts divide, and ones smaller than the
#: vault counts (owners with empty slices: B * N_H < vaults for L, N_L < vaults
#: for B and H).
SHAPES = [(5, 7, 3), (1, 9, 2), (3, 2, 5), (2, 3, 4)]
VAULTS = [1, 2, 3, 5, 7, 12, 32]


@pytest.fixture(scope="module")
def cfg():
    return load_config()


@pytest.fixture(scope="module")
def pe(cfg):
    return PEModel(cfg)


def _net(b, nl, nh, it=3):
    return CapsNetSpec("tiny", "none", batch=b, n_l=nl, n_h=nh, iterations=it)


def _inputs(net, seed):
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 1, (net.batch, net.n_l, net.c_l)).astype(np.float32)
    W = rng.normal(0, 0.3, (net.n_l, net.n_h, net.c_h, net.c_l)).astype(np.float32)
    return u, W


@pytest.mark.parametrize("dim", ["L", "B", "H"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_distributed_aggregation_equals_route_pim(cfg, pe, dim, shape):
    """Every vault count gives route_pim's v bit for bit (program order)."""
    net = _net(*shape)
    seed = SEED + sum(shape)
    print("seed", seed)
    u, W = _inputs(net, seed)
    ref = None
    for vaults in VAULTS:
        comp = compile_routing(net, dim, cfg, vaults=vaults)
        mems = comp.memories(u, W)
        res = execute(comp.programs, mems, pe)
        v = comp.gather_v(mems).view(np.uint32)
        want = route_pim(u, W, net.iterations, program_ops(comp, pe)).v.view(np.uint32)
        assert np.array_equal(v, want), (dim, shape, vaults)
        assert res.phases == 1 + 2 * net.iterations
        if dim == "H":    # no sum is split across vaults: one result for every count
            ref = v if ref is None else ref
            assert np.array_equal(v, ref), (shape, vaults)


def _words(base, s1, s2, s3, se, ins):
    o = np.indices((ins.n1, ins.n2, ins.n3, ins.g)).reshape(4, -1)
    return set((base + o[0] * s1 + o[1] * s2 + o[2] * s3 + o[3] * se).tolist())


def _touched(ins):
    """Words *ins* reads and writes in its own vault, and words it writes in its peer."""
    a = _words(ins.a, ins.a_s1, ins.a_s2, ins.a_s3, ins.a_se, ins)
    if ins.op is Opcode.SEND:
        return a, set(), _words(ins.d, ins.d_s1, ins.d_s2, ins.d_s3, ins.d_se, ins)
    reads = set(a)
    if ins.op is not Opcode.MAXR and not (ins.op is Opcode.FLOW and ins.flow in (
            Flow.EXP, Flow.ISQRT, Flow.RECIP)):
        reads |= _words(ins.b, ins.b_s1, ins.b_s2, ins.b_s3, ins.b_se, ins)
    return reads, _words(ins.d, ins.d_s1, ins.d_s2, ins.d_s3, 0, ins), set()


def _hazards(programs):
    """``(phase, vault, word)`` of the words another vault's SEND writes while their
    vault (or a third vault) uses them in the same phase."""
    vaults = len(programs)
    phases = 1 + sum(1 for i in programs[0] if i.op is Opcode.BAR)
    local = [[set() for _ in range(vaults)] for _ in range(phases)]
    remote = [[{} for _ in range(vaults)] for _ in range(phases)]
    found = []
    for v, prog in enumerate(programs):
        phase = 0
        for ins in prog:
            if ins.op in (Opcode.BAR, Opcode.HALT):
                phase += ins.op is Opcode.BAR
                continue
            reads, writes, sent = _touched(ins)
            local[phase][v] |= reads | writes
            if ins.op is Opcode.SEND and ins.peer != v:
                for w in sent:
                    if remote[phase][ins.peer].setdefault(w, v) != v:
                        found.append((phase, ins.peer, w))
            else:
                local[phase][ins.peer if ins.op is Opcode.SEND else v] |= sent
    for phase in range(phases):
        for v in range(vaults):
            found += [(phase, v, w) for w in sorted(local[phase][v] & remote[phase][v].keys())]
    return found


def test_hazard_check_finds_a_read_before_the_barrier():
    send = Instr(Opcode.SEND, peer=0, g=4, a=0, a_se=1, d=8, d_se=1)
    read = Instr(Opcode.FLOW, flow=Flow.EXP, a=10, d=20)
    bar, halt = Instr(Opcode.BAR), Instr(Opcode.HALT)
    assert _hazards([[read, bar, halt], [send, bar, halt]]) == [(0, 0, 10)]
    assert _hazards([[bar, read, halt], [send, bar, halt]]) == []
    assert _hazards([[bar, halt], [send, bar, halt], [send, bar, halt]]) != []


@pytest.mark.parametrize("dim", ["L", "B", "H"])
@pytest.mark.parametrize("vaults", [3, 5, 8])
def test_sent_words_are_untouched_until_the_barrier(cfg, dim, vaults):
    """Between two barriers a word written by another vault's SEND is neither read
    nor written by its vault, nor written by a third vault."""
    comp = compile_routing(_net(5, 7, 3, it=2), dim, cfg, vaults=vaults)
    assert _hazards(comp.programs) == []


@pytest.mark.parametrize("dim,shape", [("L", (8, 40, 4)), ("B", (16, 40, 4)),
                                       ("H", (4, 40, 8))])
def test_aggregation_is_spread_over_the_vaults(cfg, dim, shape):
    """No vault computes, receives or sends much more than the others in any phase,
    and the vaults' first sends go to distinct peers (staggered crossbar ports)."""
    vaults = 8
    lanes = cfg.capsnet.pes_per_vault
    comp = compile_routing(_net(*shape), dim, cfg, vaults=vaults)
    assert len(comp.active) == vaults
    phase = [0] * vaults
    recv: dict[tuple[int, int], int] = {}
    sent: dict[tuple[int, int], int] = {}
    busy: dict[tuple[int, int], int] = {}
    first: dict[int, list[int]] = {}
    for v, prog in enumerate(comp.programs):
        for ins in prog:
            if ins.op is Opcode.BAR:
                phase[v] += 1
            elif ins.op not in (Opcode.SEND, Opcode.HALT):
                # issue cycles plus the controller's fixed cost of an instruction
                busy[phase[v], v] = busy.get((phase[v], v), 0) + issue_cycles(ins, lanes) + 10
            elif ins.op is Opcode.SEND and ins.peer != v:
                n = ins.outputs * ins.g
                recv[phase[v], ins.peer] = recv.get((phase[v], ins.peer), 0) + n
                sent[phase[v], v] = sent.get((phase[v], v), 0) + n
                first.setdefault(phase[v], [None] * vaults)
                if first[phase[v]][v] is None:
                    first[phase[v]][v] = ins.peer
    for d in (busy, recv, sent):
        for p in {p for p, _ in d}:
            per = [d.get((p, v), 0) for v in range(vaults)]
            assert max(per) <= 2 * min(per), (dim, p, per)
    for p, peers in first.items():
        assert sorted(peers) == list(range(vaults)), (dim, p, peers)


def test_more_vaults_than_owned_slices_keep_their_barriers(cfg, pe):
    """Vaults without a slice to own (or without work) still run every barrier and
    the placement leaves them no aggregation buffers."""
    net = _net(1, 9, 2)
    comp = compile_routing(net, "L", cfg, vaults=12)
    assert len(comp.active) == 9
    owners = [v for v in comp.active if "S" in comp.allocs[v]]
    assert len(owners) == net.batch * net.n_h
    nbar = {sum(1 for i in p if i.op is Opcode.BAR) for p in comp.programs}
    assert nbar == {2 * net.iterations}
    assert Instr(Opcode.HALT) == comp.programs[-1][-1]
