"""Cycle-level golden model of the DESCNet scratchpad, its PMU and the SMP/SEP/HY organizations.

Shared by the cocotb scoreboards and the power-gating replay checks. One
:meth:`cycle` call is one clock edge: it takes the inputs driven before the
edge and returns what the outputs show after it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GOING_OFF",
    "OFF",
    "ON",
    "WAKING",
    "OrgModel",
    "PMUModel",
    "Req",
    "Resp",
    "SPMModel",
    "poison",
]

ON, GOING_OFF, OFF, WAKING = range(4)


def poison(word_bits: int) -> int:
    reps = -(-word_bits // 32)
    return int("DEADBEEF" * reps, 16) & ((1 << word_bits) - 1)


@dataclass(frozen=True)
class Req:
    en: int = 0
    we: int = 0
    addr: int = 0
    wdata: int = 0


@dataclass(frozen=True)
class Resp:
    rvalid: int
    err: int
    rdata: int | None     # None: not a read (the data is don't-care)


class PMUModel:
    """The per-sector state machine of :class:`~pimforge.rtl.descnet.pmu.SPMPowerManager`."""

    def __init__(self, sectors: int, wakeup_cycles: int, sleep_cycles: int):
        self.sectors, self.wakeup, self.sleep_c = sectors, wakeup_cycles, sleep_cycles
        self.state = [ON] * sectors
        self.count = [0] * sectors
        self.lose = [0] * sectors
        self.on_cycles = [0] * sectors
        self.wakeups = [0] * sectors

    @property
    def on(self) -> list[int]:
        return [int(s == ON) for s in self.state]

    @property
    def ack(self) -> list[int]:
        return [int(s in (OFF, WAKING)) for s in self.state]

    @property
    def sleep(self) -> list[int]:
        return [int(s in (GOING_OFF, OFF)) for s in self.state]

    def cycle(self, req: list[int]) -> None:
        for s in range(self.sectors):
            st, c = self.state[s], self.count[s]
            if not self.sleep[s]:
                self.on_cycles[s] += 1
            self.lose[s] = 0
            if st == ON and req[s]:
                if self.sleep_c == 1:
                    self.state[s], self.lose[s] = OFF, 1
                else:
                    self.state[s], self.count[s] = GOING_OFF, self.sleep_c - 2
            elif st == GOING_OFF:
                if c == 0:
                    self.state[s], self.lose[s] = OFF, 1
                else:
                    self.count[s] = c - 1
            elif st == OFF and not req[s]:
                if self.wakeup == 1:
                    self.state[s] = ON
                    self.wakeups[s] += 1
                else:
                    self.state[s], self.count[s] = WAKING, self.wakeup - 2
            elif st == WAKING:
                if c == 0:
                    self.state[s] = ON
                    self.wakeups[s] += 1
                else:
                    self.count[s] = c - 1


class SPMModel:
    """A :class:`~pimforge.rtl.descnet.scratchpad.SectoredSPM`: contents, valid bits, PMU."""

    def __init__(self, *, words: int, word_bits: int, banks: int, sectors: int, ports: int,
                 wakeup_cycles: int, sleep_cycles: int):
        self.words, self.word_bits, self.banks, self.sectors = words, word_bits, banks, sectors
        self.ports = ports
        self.per_sector = words // sectors
        self.mem = [0] * words
        self.valid = [False] * words
        self.pmu = PMUModel(sectors, wakeup_cycles, sleep_cycles)
        self.poison = poison(word_bits)
        self.lost_reads = 0      # reads answered with the poison pattern of a lost word
        self.off_accesses = 0    # accesses flagged because the sector was not ON

    def sector(self, addr: int) -> int:
        return addr // self.per_sector

    def cycle(self, reqs: list[Req], sleep_req: list[int]) -> list[Resp]:
        on = self.pmu.on
        resp = []
        writes = []
        for i, r in enumerate(reqs):
            if not r.en:
                resp.append(Resp(0, 0, None))
                continue
            ok = on[self.sector(r.addr)]
            if r.we:
                beaten = any(q.en and q.we and q.addr == r.addr for q in reqs[:i])
                if ok and not beaten:
                    writes.append((r.addr, r.wdata))
                resp.append(Resp(1, int(not ok), None))
            else:
                if ok and self.valid[r.addr]:
                    data = self.mem[r.addr]
                else:
                    data = self.poison
                    if ok:
                        self.lost_reads += 1
                resp.append(Resp(1, int(not ok), data))
            if not ok:
                self.off_accesses += 1
        for s in range(self.sectors):
            if self.pmu.lose[s]:
                for a in range(s * self.per_sector, (s + 1) * self.per_sector):
                    self.valid[a] = False
        for a, d in writes:
            self.mem[a] = d
            self.valid[a] = True
        self.pmu.cycle(sleep_req)
        return resp


class OrgModel:
    """A :class:`~pimforge.rtl.descnet.organization.DESCNetSPM` built from :class:`SPMModel`."""

    KINDS = ("data", "weight", "acc")

    def __init__(self, memory_map: dict, word_bits: int, banks: int, wakeup_cycles: int,
                 sleep_cycles: int):
        self.mems: dict[str, SPMModel] = {}
        for name, mm in memory_map["memories"].items():
            self.mems[name] = SPMModel(words=mm["words"], word_bits=word_bits, banks=banks,
                                       sectors=mm["sectors"], ports=mm["ports"],
                                       wakeup_cycles=wakeup_cycles, sleep_cycles=sleep_cycles)
        self.sep = {k: memory_map["words"][k]["separate"] for k in self.KINDS}
        self.shared_words = memory_map["words"]["data"]["shared"]
        self.port_of = memory_map["shared_port_of"]
        self.poison = poison(word_bits)
        self.lost_arbitration = 0

    def cycle(self, reqs: dict[str, Req], sleep: dict[str, list[int]]) -> dict[str, Resp]:
        sub: dict[str, list[Req]] = {n: [Req()] * m.ports for n, m in self.mems.items()}
        route = {}
        taken = set()
        for k in self.KINDS:
            r = reqs[k]
            if not r.en:
                route[k] = None
                continue
            if r.addr < self.sep[k]:
                sub[k] = [r]
                route[k] = (k, 0)
            elif "shared" in self.mems and r.addr < self.sep[k] + self.shared_words:
                p = self.port_of[k]
                if p in taken:
                    route[k] = "lost"
                    self.lost_arbitration += 1
                else:
                    taken.add(p)
                    sub["shared"] = list(sub["shared"])
                    sub["shared"][p] = Req(1, r.we, r.addr - self.sep[k], r.wdata)
                    route[k] = ("shared", p)
            else:
                route[k] = "bad"
        sresp = {n: m.cycle(sub[n], sleep[n]) for n, m in self.mems.items()}
        out = {}
        for k in self.KINDS:
            rt = route[k]
            if rt is None:
                out[k] = Resp(0, 0, None)
            elif rt in ("lost", "bad"):
                out[k] = Resp(1, 1, None if reqs[k].we else self.poison)
            else:
                sr = sresp[rt[0]][rt[1]]
                out[k] = Resp(1, sr.err, sr.rdata)
        return out
