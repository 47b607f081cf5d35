"""cocotb tests of the whole memory system: crossbar, vault controllers, RMAS.

Every cycle one coroutine drives all master ports (host links and vault PE
ports), plays every vault's DRAM array (contents preloaded by a backdoor
function, writes kept in a dict), checks every vault's commands with the
protocol checker and scores every response.
"""

from __future__ import annotations

import collections

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from pimforge.rtl.mem.address_map import AddressMap
from pimforge.rtl.mem.rmas import Policy
from pimforge.rtl.mem.timing import resolve_timing

from ..models.dram_timing import TimingChecker
from ..models.rmas import rmas_nh
from .common import rng, start
from .vault_env import BitFields, VaultPins, bench_config


def backdoor(vault: int, arr: int) -> int:
    """Preloaded contents of a block (what a driver would load through the backdoor)."""
    x = (vault * 0x9E3779B97F4A7C15 + arr * 0xBF58476D1CE4E5B9 + 0x1234) & (2**128 - 1)
    return x ^ (x >> 17) ^ (arr << 64)


class SystemEnv:
    def __init__(self, dut, r):
        self.dut, self.r = dut, r
        cfg = bench_config()
        h = self.h = cfg.hmc
        self.amap = AddressMap.from_config(h)
        self.t = resolve_timing(h.timing, h.tck_ns)
        self.masters = [f"host{i}" for i in range(h.links)] + [f"pe{v}" for v in range(h.vaults)]
        self.req_f = BitFields([("we", 1), ("addr", self.amap.addr_bits), ("tag", 8),
                              ("data", 128)])
        self.resp_f = BitFields([("we", 1), ("tag", 8), ("data", 128)])
        self.checkers = [TimingChecker(self.t, h.banks_per_vault, v) for v in range(h.vaults)]
        self.pins = [VaultPins(dut, self.checkers[v], v,
                               fill=lambda a, v=v: backdoor(v, a)) for v in range(h.vaults)]
        self.pending = {m: collections.deque() for m in self.masters}
        self.expect = {m: {} for m in self.masters}
        self.shadow: dict[int, int] = {}
        self.free = {m: list(range(256)) for m in self.masters}
        self.accepted = {m: [] for m in self.masters}  # (cycle, vault)
        self.errors: list[str] = []
        self.responses = 0
        self.cycle = 0
        self.hold = set()   # masters whose valid is forced on (priority tests)

    def decode(self, addr):
        d = self.amap.decode(addr)
        arr = (d.bank << (self.h.row_bits + self.h.col_bits)) | (d.row << self.h.col_bits) | d.col
        return d.vault, arr

    def request(self, master: str, we: int, addr: int) -> None:
        v, arr = self.decode(addr)
        data = self.r.getrandbits(128) if we else 0
        key = (v, arr)
        if we:
            self.shadow[key] = data
            exp = None
        else:
            exp = self.shadow.get(key, backdoor(v, arr))
        self.pending[master].append((we, addr, data, exp, v))

    @property
    def outstanding(self) -> int:
        return sum(len(p) for p in self.pending.values()) + sum(
            len(e) for e in self.expect.values())

    async def run(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            for p in self.pins:
                p.drive()
            cur = {}
            for m in self.masters:
                p = self.pending[m]
                go = bool(p) and bool(self.free[m]) and (m in self.hold or self.r.random() < 0.7)
                if go:
                    we, addr, data, exp, v = p[0]
                    tag = self.free[m][-1]
                    cur[m] = tag
                    getattr(d, f"{m}__payload").value = self.req_f.pack(
                        {"we": we, "addr": addr, "tag": tag, "data": data})
                getattr(d, f"{m}__valid").value = int(go)
                getattr(d, f"{m}_resp__ready").value = int(self.r.random() < 0.8)
            await ReadOnly()
            c = self.cycle
            for p in self.pins:
                p.sample(c)
            for m in self.masters:
                if m in cur and int(getattr(d, f"{m}__ready").value):
                    we, addr, data, exp, v = self.pending[m].popleft()
                    self.free[m].pop()
                    self.expect[m][cur[m]] = (we, exp, addr)
                    self.accepted[m].append((c, v))
                if int(getattr(d, f"{m}_resp__valid").value) and \
                        int(getattr(d, f"{m}_resp__ready").value):
                    r = self.resp_f.unpack(int(getattr(d, f"{m}_resp__payload").value))
                    e = self.expect[m].pop(r["tag"], None)
                    self.responses += 1
                    if e is None:
                        self.errors.append(f"{c}: {m} got unknown/duplicate tag {r['tag']}")
                        continue
                    self.free[m].append(r["tag"])
                    we, exp, addr = e
                    if we != r["we"] or (not we and exp != r["data"]):
                        self.errors.append(f"{c}: {m} tag {r['tag']} addr {addr:#x}: got "
                                           f"we={r['we']} {r['data']:#x}, expected we={we} "
                                           f"{exp if exp is None else hex(exp)}")
            self.cycle += 1

    def check(self):
        msgs = [str(v) for c in self.checkers for v in c.violations][:20] + self.errors[:20]
        assert not msgs, "\n".join(msgs)


async def _setup(dut, tag):
    r = rng(tag)
    await start(dut)
    dut.gamma_v.value, dut.gamma_h.value, dut.policy.value = 1, 1, Policy.RMAS
    env = SystemEnv(dut, r)
    cocotb.start_soon(env.run())
    return env, r


@cocotb.test()
async def random_system_traffic(dut):
    """Host links and PE ports read and write random blocks (each block owned by one
    master, so the expected data is defined), local and remote: every vault obeys
    every timing rule, every tag returns once with the right data."""
    env, r = await _setup(dut, "system")
    h = env.h
    # Ownership by DRAM location: under the capsnet mapping one location has one
    # address per sub-page indicator, and requests use all of them.
    keys = r.sample([(v, b, row, c) for v in range(h.vaults) for b in range(h.banks_per_vault)
                     for row in range(h.rows) for c in range(h.columns)],
                    64 * len(env.masters))
    owned = {m: keys[i::len(env.masters)] for i, m in enumerate(env.masters)}
    for m in env.masters:
        for _ in range(150):
            addr = env.amap.encode(*r.choice(owned[m]), r.randrange(5))
            env.request(m, int(r.random() < 0.4), addr)
    total = 150 * len(env.masters)
    while env.outstanding:
        await ClockCycles(dut.clk, 50)
    env.check()
    remote = sum(1 for v in range(h.vaults) for _, vv in env.accepted[f"pe{v}"] if vv != v)
    dut._log.info("%d requests, %d remote PE accesses", total, remote)
    assert env.responses == total and remote > 0


async def _contend(env, dut, cycles=300):
    """host0 and pe1 keep requesting vault 0; returns the accepted counts of each."""
    h = env.h
    addr_v0 = [env.amap.encode(0, b, 1, c) for b in range(h.banks_per_vault) for c in range(4)]
    for m in ("host0", "pe1"):
        env.hold.add(m)
        for i in range(cycles):
            env.request(m, 0, addr_v0[i % len(addr_v0)])
    start_c = env.cycle
    await ClockCycles(dut.clk, cycles // 2)
    window = (start_c + 20, env.cycle)
    n = {m: sum(1 for c, _ in env.accepted[m] if window[0] <= c < window[1])
         for m in ("host0", "pe1")}
    for m in ("host0", "pe1"):
        env.pending[m].clear()
    env.hold.clear()
    while env.outstanding:
        await ClockCycles(dut.clk, 20)
    env.check()
    return n


@cocotb.test()
async def priority_policies(dut):
    """A host link and a remote PE port both keep vault 0 busy: RMAS-GPU lets only the
    host in, RMAS-PIM only the PE, arrival order both; RMAS with gamma_h >> gamma_v
    gives the host the vault (n_h = n_max), with gamma_h = 0 the PE (n_h = 0)."""
    env, _r = await _setup(dut, "policy")
    for policy, gv, gh, expect in ((Policy.HOST_FIRST, 1, 1, "host"),
                                   (Policy.PIM_FIRST, 1, 1, "pe"),
                                   (Policy.ARRIVAL, 1, 1, "both"),
                                   (Policy.RMAS, 1, 255, "host"),
                                   (Policy.RMAS, 255, 0, "pe")):
        dut.policy.value, dut.gamma_v.value, dut.gamma_h.value = policy, gv, gh
        n = await _contend(env, dut)
        dut._log.info("policy %s gv %d gh %d: accepted %s", policy.name, gv, gh, n)
        if expect == "host":
            assert n["host0"] > 0 and n["pe1"] == 0, (policy.name, n)
        elif expect == "pe":
            assert n["pe1"] > 0 and n["host0"] == 0, (policy.name, n)
        else:
            assert n["host0"] > 0 and n["pe1"] > 0, (policy.name, n)


@cocotb.test()
async def rmas_nh_in_system(dut):
    """RMAS follows the live PE-queue occupancy Q of the vaults the host links target:
    every cycle n_h equals Eq. 15 evaluated on the previous cycle's Q and targets."""
    env, r = await _setup(dut, "nh")
    h = env.h
    checked, seen = 0, set()
    for gv, gh in ((3, 2), (1, 40), (7, 1)):
        dut.policy.value, dut.gamma_v.value, dut.gamma_h.value = Policy.RMAS, gv, gh
        env.hold.update(env.masters)
        for i in range(120):
            for v in range(h.vaults):
                env.request(f"pe{v}", 0, env.amap.encode(v, 0, i % h.rows, 0))
            env.request("host0", 0, env.amap.encode(r.randrange(h.vaults), 0,
                                                   r.randrange(h.rows), 1))
        prev = None
        for _ in range(200):
            await RisingEdge(dut.clk)
            await ReadOnly()
            nh = int(dut.rmas_nh.value)
            if prev is not None and int(dut.gamma_v.value) == gv:
                assert nh == rmas_nh(*prev, gv, gh), (nh, prev, gv, gh)
                checked += 1
                seen.add(nh)
            q = [int(getattr(dut, f"v{v}_pe_q").value) for v in range(h.vaults)]
            tgt = [False] * h.vaults
            for i in range(h.links):
                if int(getattr(dut, f"host{i}__valid").value):
                    addr = env.req_f.unpack(int(getattr(dut, f"host{i}__payload").value))["addr"]
                    tgt[env.amap.decode(addr).vault] = True
            prev = (q, tgt)
        for m in env.masters:
            env.pending[m].clear()
        env.hold.clear()
        while env.outstanding:
            await ClockCycles(dut.clk, 20)
    env.check()
    dut._log.info("%d cycles checked, n_h values seen %s", checked, sorted(seen))
    assert checked > 500 and len(seen) >= 2
