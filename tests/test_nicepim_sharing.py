"""The Data-Scheduler: sharing sets, the Hamilton-cycle ILP against enumeration and the
TSP/SHP baselines, the ``schedule sharing`` command, and one schedule on the mesh RTL.

Random cases draw from ``random.Random(seed)`` with ``seed`` from ``PIMFORGE_SEED``
(default 1), logged: ``PIMFORGE_SEED=N pytest tests/test_nicepim_sharing.py`` reruns one.
"""

import itertools
import json
import logging
import os
import random

import pytest

from pimforge.gen.cli import main
from pimforge.gen.config import load_config
from pimforge.sim import noc
from pimforge.sim.nicepim import sharing as sh
from pimforge.sim.nicepim.schedule_cli import rtl_config

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "1"))


def _rng(salt: int) -> random.Random:
    log.info("seed %d (rerun with PIMFORGE_SEED=%d)", SEED, SEED)
    return random.Random(SEED * 1000 + salt)


def test_sharing_sets_interleave_and_tile():
    for (r, c), size, stride, count in (((4, 4), 16, 1, 1), ((8, 8), 16, 2, 4),
                                        ((16, 16), 16, 4, 16), ((4, 8), 8, 2, 4)):
        mesh = sh.Mesh(r, c)
        sets = sh.sharing_sets(mesh, size, stride)
        assert len(sets) == count
        assert sorted(n for s in sets for n in s) == list(range(r * c))
        h, w = sh.set_shape(size, r, c, stride)
        for s in sets:
            xs = sorted({mesh.xy(n)[0] for n in s})
            ys = sorted({mesh.xy(n)[1] for n in s})
            assert (len(ys), len(xs)) == (h, w)
            assert all(b - a == stride for a, b in itertools.pairwise(xs + [xs[-1] + stride]))
            assert all(b - a == stride for a, b in itertools.pairwise(ys + [ys[-1] + stride]))


def test_xy_routes():
    mesh = sh.Mesh(3, 4)
    for a in range(12):
        for b in range(12):
            route = mesh.route(a, b)
            assert len(route) == mesh.hops(a, b)
            node = a
            for n, d in route:           # a connected walk, X first, ending at b
                assert n == node and (n, d) in mesh.links()
                node += {sh.EAST: 1, sh.WEST: -1, sh.SOUTH: 4, sh.NORTH: -4}[d]
            assert node == b


def _brute_force(mesh, sets):
    """The least busiest-link load over every combination of directed Hamilton cycles."""
    per_set = [[[s[0], *p] for p in itertools.permutations(s[1:])] for s in sets]
    best = None
    for combo in itertools.product(*per_set):
        loads = sh.link_loads(mesh, [e for c in combo for e in sh.hamilton_edges(c)])
        m = max(loads.values())
        best = m if best is None else min(best, m)
    return best


@pytest.mark.parametrize("case", range(4))
def test_ilp_optimum_equals_enumeration(case):
    """Tiny meshes where the sets' cycles interfere: the ILP's optimum (proved) is the
    enumerated optimum, with and without the warm start."""
    rng = _rng(case)
    mesh = sh.Mesh(*rng.choice(((3, 3), (3, 4), (4, 4))))
    if case == 0:
        mesh = sh.Mesh(4, 4)
        sets = sh.sharing_sets(mesh, 4, 2)          # four interleaved 2x2 sets
    else:
        nodes = list(range(mesh.nodes))
        rng.shuffle(nodes)
        sizes = rng.choice(((4, 4, 4), (5, 5), (3, 4, 5), (3, 3, 3)))
        sets, i = [], 0
        for k in sizes:
            sets.append(tuple(sorted(nodes[i:i + k])))
            i += k
    log.info("mesh %dx%d, sets %s", mesh.rows, mesh.cols, sets)
    want = _brute_force(mesh, sets)
    for warm in (True, False):
        s = sh.schedule_ilp(mesh, sets, 8, time_limit=60, warm_start=warm, seed=SEED)
        assert s.optimal and s.gap == 0.0
        assert s.max_edge_load == want, (warm, s.cycles)
        for c, members in zip(s.cycles, sets, strict=True):
            assert sh.valid_cycle(c, members)


@pytest.mark.parametrize("mesh, size, stride", [((4, 4), 16, 1), ((8, 8), 16, 2),
                                                ((4, 8), 8, 2), ((6, 6), 4, 3)])
def test_ilp_beats_or_ties_the_baselines(mesh, size, stride):
    m = sh.Mesh(*mesh)
    got = {meth: sh.schedule(meth, m, size, stride, 8192, 64, seed=SEED)
           for meth in sh.METHODS}
    ilp = got["ilp"]
    assert ilp.optimal
    assert ilp.max_link_load <= got["tsp"].max_link_load
    assert ilp.max_link_load <= got["shp"].max_link_load
    assert ilp.latency_cycles <= got["tsp"].latency_cycles
    for meth in ("ilp", "tsp"):
        s = got[meth]
        assert all(sh.valid_cycle(c, members) for c, members in zip(s.cycles, s.sets,
                                                                    strict=True))
        # every node sends (N - 1) parts, so every link total is a multiple of them
        assert sum(s.link_flits.values()) == (size - 1) * 1024 * sum(
            m.hops(a, b) for a, b in s.pairs())
    tsp = got["tsp"]     # the TSP cycles have the fewest hops; the ILP may use more
    assert sum(m.hops(a, b) for a, b in tsp.pairs()) <= sum(m.hops(a, b) for a, b in ilp.pairs())
    if mesh == (8, 8):   # Fig. 12's interleaved sets: the ILP halves TSP's busiest link
        assert (ilp.max_edge_load, tsp.max_edge_load) == (1, 2)


def test_time_limit_keeps_the_warm_start_and_reports_the_gap():
    m = sh.Mesh(12, 12)                      # nine interleaved sets of 16
    s = sh.schedule("ilp", m, 16, 3, 8192, 64, time_limit=1, seed=SEED)
    assert all(sh.valid_cycle(c, members) for c, members in zip(s.cycles, s.sets, strict=True))
    tsp = sh.schedule("tsp", m, 16, 3, 8192, 64, seed=SEED)
    assert s.max_link_load <= tsp.max_link_load
    assert s.bound is not None and s.bound <= s.max_edge_load
    if not s.optimal:
        assert s.gap == pytest.approx((s.max_edge_load - s.bound) / s.max_edge_load)
    # one second does not fit the default annealing runs: the cap stopped the search,
    # and the schedule says its result depends on the machine's speed
    assert s.time_limited and s.to_json()["time_limited"]
    assert any("time limit" in n for n in s.notes)


def test_ilp_schedule_is_the_same_at_any_load():
    """The search ends on counted work (annealing runs and moves, HiGHS's node limit),
    not on time: two runs with a generous time limit give the same schedule, while a
    busy process competes for the cores during the second."""
    import subprocess
    import sys

    m = sh.Mesh(12, 12)                      # a big model: the annealing path runs
    sets = sh.sharing_sets(m, 16, 3)
    kw = dict(time_limit=300, seed=SEED, anneal_runs=1, anneal_moves=100, nodes=5)
    first = sh.schedule_ilp(m, sets, 128, **kw)
    burn = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        second = sh.schedule_ilp(m, sets, 128, **kw)
    finally:
        burn.kill()
        burn.wait()
    assert not first.time_limited and not second.time_limited
    assert first.cycles == second.cycles
    assert (first.max_edge_load, first.bound, first.optimal) == (
        second.max_edge_load, second.bound, second.optimal)
    assert any("1 annealing run(s)" in n for n in first.notes)


def test_ilp_node_limit_without_a_warm_start_is_reported():
    m = sh.Mesh(8, 8)
    sets = sh.sharing_sets(m, 16, 2)
    with pytest.raises(sh.SharingError, match="--nodes 3"):
        sh.schedule_ilp(m, sets, 128, time_limit=300, seed=SEED, warm_start=False, nodes=3)


def test_snake_cycle_is_a_minimum_hop_hamilton_cycle():
    """Every grid with an even side gets a cycle through all its nodes whose every
    edge joins grid neighbours (hence a TSP optimum: no cycle has fewer hops); grids
    with two odd sides, or a side of 1, get None."""
    rng = random.Random(SEED)
    for _ in range(40):
        h, w = rng.randint(1, 9), rng.randint(1, 9)
        members = rng.sample(range(1000), h * w)
        c = sh.snake_cycle(members, h, w)
        if h < 2 or w < 2 or (h % 2 and w % 2):
            assert c is None, (h, w, SEED)
            continue
        assert sorted(c) == sorted(members), (h, w, SEED)
        pos = {m: divmod(i, w) for i, m in enumerate(members)}
        for a, b in zip(c, c[1:] + c[:1]):
            (ya, xa), (yb, xb) = pos[a], pos[b]
            assert abs(ya - yb) + abs(xa - xb) == 1, (h, w, SEED)


@pytest.mark.parametrize("rows, cols, size, stride", [
    (4, 4, 4, 2), (8, 8, 4, 2), (8, 8, 8, 2), (16, 16, 32, 1), (16, 16, 16, 2),
    (16, 16, 64, 2), (4, 4, 3, 1)])
def test_set_loads_are_the_schedulers(rows, cols, size, stride):
    """The mapper's view of a schedule: the ILP's busiest link never carries more cycle
    edges than TSP's, SHP's no fewer than TSP's; the values are the schedules' own
    (against :func:`schedule` where it is quick) and the same on a second call; a
    layout that does not tile the mesh is None."""
    got = {m: sh.set_loads(rows, cols, size, stride, m) for m in sh.METHODS}
    if rows * cols % (size * stride * stride):
        assert all(v is None for v in got.values())
        return
    assert got["ilp"].edges <= got["tsp"].edges <= got["shp"].edges
    assert got["ilp"].hops >= stride and got["shp"].hops >= got["tsp"].hops
    sh.set_loads.cache_clear()
    assert {m: sh.set_loads(rows, cols, size, stride, m) for m in sh.METHODS} == got
    if size <= sh.SNAKE_NODES and rows * cols <= 64:
        for m in sh.METHODS:
            want = sh.schedule(m, sh.Mesh(rows, cols), size, stride, 16, 64, time_limit=None)
            assert got[m].edges == want.max_edge_load, m


def test_messages_forward_what_arrived():
    m = sh.Mesh(4, 4)
    s = sh.schedule("ilp", m, 16, 1, 100, 32, packet_flits=8)     # 25 flits: 8+8+8+1
    msgs = sh.messages(s)
    assert len(msgs) == 15 * 16 * 4
    assert sorted({f for _, _, f, _ in msgs}) == [1, 8]
    succ = {a: b for a, b in sh.hamilton_edges(s.cycles[0])}
    for i, (src, dst, _, dep) in enumerate(msgs):
        assert succ[src] == dst
        if dep >= 0:
            assert dep < i and msgs[dep][1] == src


#: A 3x3 mesh of 32-bit flits, two VCs of four flits (the default's buffers: two-flit
#: buffers do not keep a link busy, against the model's one flit per cycle).
SMALL = {"noc.rows": 3, "noc.cols": 3, "noc.flit_bits": 32}


@pytest.fixture(scope="module")
def small_mesh():
    cfg = load_config("default", SMALL)
    return cfg, noc.build_driver(cfg, probes=True)


def test_schedules_on_the_rtl(small_mesh):
    """A 3x3 mesh, one set of nine (an odd grid: the cycle needs a diagonal edge). The
    driver's probes count every link's flits: exactly the model's. A Hamilton schedule
    takes the model's cycles to within 2%; SHP at least its lower bound."""
    cfg, exe = small_mesh
    m = sh.Mesh(3, 3)
    for meth in ("ilp", "tsp", "shp"):
        s = sh.schedule(meth, m, 9, 1, 256, 32, packet_flits=8, seed=SEED, vcs=cfg.noc.vcs)
        r = sh.run_rtl(s, cfg, exe=exe)
        log.info("%s: model %d cycles, RTL %d", meth, s.latency_cycles, r["rtl_cycles"])
        assert {k: v for k, v in r["link_flits"].items() if v} == s.link_flits
        assert r["rtl_max_link_flits"] == s.max_link_load
        if meth == "shp":
            assert r["rtl_cycles"] >= s.latency_cycles
        else:
            assert abs(r["rtl_cycles"] / s.latency_cycles - 1) <= 0.02, r


def test_schedule_command_writes_json(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["schedule", "sharing", "--mesh", "8x8", "--set-size", "16", "--stride", "2",
                 "--bytes", "8192", "--method", "ilp", "--json", str(out)]) == 0
    j = json.loads(out.read_text())
    assert j["max_link_load"] == 15 * 1024 and j["optimal"] is True and j["gap"] == 0.0
    assert j["sets"] == 4 and j["part_flits"] == 1024 and j["solve_s"] >= 0
    # the default config's PIM-node routers have one VC: a cycle per 16-flit packet
    assert j["latency_cycles"] == 15 * (1024 + 64 + 5)
    assert "optimal" in capsys.readouterr().out


def test_schedule_runs_through_the_sharing_units(tmp_path, capsys):
    """``--units``: the schedule as SEND/WAIT tasks on the NicePIM array RTL; every node
    ends with its set's data and the mapper's cost is within 5% of the RTL's cycles."""
    out = tmp_path / "u.json"
    assert main(["schedule", "sharing", "--config", "nicepim_small", "--mesh", "2x2",
                 "--set-size", "4", "--bytes", "1024", "--units", "--json",
                 str(out)]) == 0
    u = json.loads(out.read_text())["units"]
    assert u["delivered"] and u["words"] == 1024 // load_config(
        "nicepim_small").nicepim.word_bytes
    assert abs(u["error"]) <= 0.05, u
    assert "through the sharing units" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["--mesh", "4by4"], "--mesh must be ROWSxCOLS"),
    (["--mesh", "8x8", "--stride", "3"], "do not tile a 8x8 mesh"),
    (["--mesh", "4x4", "--bytes", "0"], "argument --bytes: must be between 1"),
    (["--mesh", "4x4", "--method", "greedy"], "argument --method: invalid choice"),
    (["--mesh", "4x4", "--set-size", "1"], "argument --set-size: must be between 2"),
    (["--mesh", "32x32", "--rtl"], "--rtl runs meshes of up to 16x16"),
    (["--mesh", "4x4", "--units"], "--units runs on the config's NicePIM array"),
    (["--mesh", "4x4", "--json", "/proc/version/x.json"], "argument --json"),
])
def test_bad_input_is_one_line(capsys, argv, msg):
    assert main(["schedule", "sharing", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1, err


def test_rtl_config_takes_the_nodes_routers():
    cfg = rtl_config(load_config("nicepim_16x16", {}), 4, 4, 64)
    assert (cfg.noc.rows, cfg.noc.cols, cfg.noc.flit_bits, cfg.noc.vcs) == (4, 4, 64, 8)


def test_memoized_min_hop_cycles_equal_a_solve_on_the_mesh():
    """The minimum-hop cycle solved once per set geometry (:func:`sh._min_hop_order`, on
    the smallest mesh that holds the set) is the cycle solved for the set where it lies,
    for the sharing sets of several meshes and random sets of 3 to 7 nodes."""
    rng = _rng(41)
    cases = []
    for rows, cols, size, stride in ((4, 4, 4, 1), (4, 4, 8, 1), (8, 8, 4, 2), (4, 8, 8, 1)):
        mesh = sh.Mesh(rows, cols)
        cases += [(mesh, s) for s in sh.sharing_sets(mesh, size, stride)]
    for _ in range(12):
        mesh = sh.Mesh(rng.randint(2, 6), rng.randint(2, 6))
        cases.append((mesh, tuple(rng.sample(range(mesh.nodes),
                                             rng.randint(3, min(7, mesh.nodes))))))
    for mesh, s in cases:
        x0, y0 = mesh.xy(s[0])
        key = tuple((mesh.xy(n)[0] - x0, mesh.xy(n)[1] - y0) for n in s)
        want, _ = sh._min_hop_cycle(mesh, s, 0)
        assert [s[i] for i in sh._min_hop_order(key, 0)] == want, (mesh, s)
