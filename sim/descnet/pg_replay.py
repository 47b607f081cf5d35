"""Simulated power gating: replay an operation schedule on the Verilated DESCNet SPM.

For a selected -PG configuration, the operation sequence of the profile is
played on the RTL of :class:`~pimforge.rtl.descnet.organization.DESCNetSPM` by a
native Verilator C++ driver (no Python per cycle):

* the PMU schedule: during operation *i* the sectors holding its usage are
  requested ON and the others asleep; the sectors operation *i+1* needs are
  requested ``wakeup_cycles + 1`` cycles before *i* ends (pre-activation,
  Sec. V-B), so the wake-up latency is masked;
* a representative access stream: every cycle each of the data, weight and
  accumulator ports reads or writes a pseudo-random word of the region its
  operation uses (the separate memory first, the overflow in the shared
  memory), so an access to a sector that is not ON would be flagged by the
  RTL and counted as a schedule error;
* at the end the driver reads the PMU's per-sector ON-cycle counters.

The driver is ``pg_replay_main.cpp`` of :mod:`pimforge.sim.drivers`.

Scaling (stated in the results): the replayed RTL keeps each memory's sector
count (the sleep domains that decide the ON cycles) but has 2 banks of 4
32-bit words per sector, because the ON cycles do not depend on the words
inside a sector; usage is mapped to the RTL in proportion to the memory
size, and ON sectors per operation are the exact ``ceil(usage / sector)``
of the full-size configuration. Operation cycle counts are divided by
``cycle_scale`` (1 = the profile's cycles). The counted ON cycles then give
the static energy, compared with the analytical estimate of the DSE (which
switches sectors instantly at operation boundaries).
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from pathlib import Path

from pimforge.gen.errors import SimulationError
from pimforge.rtl.descnet.organization import DESCNetSPM

from ..build import build_verilated
from ..drivers import params_header, sources
from ..drivers.io import read_fields, write_fields, write_table
from ..drivers.pins import driver_top
from . import sram
from .dse import split_usage
from .profiles import Profile

__all__ = ["WAKEUP_CYCLES", "build_replay_driver", "driver_pins", "replay", "replay_selected",
           "schedule"]

WAKEUP_CYCLES = 4     # conservative: 0.072 ns is below one 4 ns cycle (Sec. VI-A)
RTL_BANKS = 2
RTL_WORDS_PER_BANK_SECTOR = 4
MEMS = ("shared", "data", "weight", "acc")
_ORG_RTL = {"SMP-PG": "SMP", "SEP-PG": "SEP", "HY-PG": "HY"}

def driver_pins(mems) -> dict[str, list[str | None]]:
    """Driver pin -> ports of an organization holding memories *mems*: the only place the
    driver names its ports.

    Sleep requests and ON-cycle counters are lanes per memory of :data:`MEMS`
    (``None`` where the organization has no such memory); the access ports
    are lanes per data, weight and accumulator port.
    """
    pins: dict[str, list[str | None]] = {
        pin: [f"{m}_{pin}" if m in mems else None for m in MEMS]
        for pin in ("sleep_req", "on_cycles")}
    for pin in ("en", "we", "addr", "wdata", "rvalid", "err"):
        pins[pin] = [f"{k}__{pin}" for k in MEMS[1:]]
    return pins


SCHEDULE_COLUMNS = ("cycles", *(f"on_{m}" for m in MEMS),
                    *(f"{e}_{k}" for k in MEMS[1:] for e in ("lo", "hi")))


def _rtl_words(sc: int) -> int:
    return sc * RTL_BANKS * RTL_WORDS_PER_BANK_SECTOR


def schedule(prof: Profile, sizes, sectors, cycle_scale: int = 1):
    """Per op: scaled cycles, ON sectors per memory, and each port's address range."""

    usage, _, _ = split_usage(prof, tuple(int(s) for s in sizes), 3)
    X = prof.usage.astype(float)
    rows = []
    for i in range(len(prof.ops)):
        on = []
        for m in range(4):
            size, sc = int(sizes[m]), int(sectors[m])
            on.append(0 if size == 0 else int(math.ceil(usage[i, m] / (size / sc))))
        ranges = []
        sh_off = 0
        for k in range(3):
            m = k + 1
            size, sc = int(sizes[m]), int(sectors[m])
            held = min(X[i, k], size) if size else 0.0
            over = X[i, k] - held
            w = _rtl_words(sc) if size else 0
            if held > 0:
                ranges.append((0, max(1, int(held / size * w))))
            elif over > 0 and sizes[0]:
                sw = _rtl_words(int(sectors[0]))
                lo = int(sh_off / sizes[0] * sw)
                hi = max(lo + 1, int((sh_off + over) / sizes[0] * sw))
                ranges.append((w + lo, w + hi))
            else:
                ranges.append((0, 0))
            sh_off += over
        rows.append((max(1, int(prof.cycles[i]) // cycle_scale), on, ranges))
    return rows


def build_replay_driver(org: str, sizes, sectors) -> Path:
    """The (cached) native replay driver of the RTL of -PG organization *org*.

    The RTL keeps each present memory's sector count (``sectors``, 1 for an
    absent memory, as in :func:`replay`) with :data:`RTL_BANKS` banks of
    :data:`RTL_WORDS_PER_BANK_SECTOR` words per sector.
    """
    from amaranth.back import verilog as amaranth_verilog


    if org not in _ORG_RTL:
        raise SimulationError(f"power-gating replay needs a -PG organization, not {org!r}")
    sc = [int(s) if int(z) else 1 for s, z in zip(sectors, sizes)]
    dut = DESCNetSPM(organization=_ORG_RTL[org], word_bits=32, banks=RTL_BANKS,
                     sizes={n: 4 * _rtl_words(sc[m]) for m, n in enumerate(MEMS)},
                     sectors={n: sc[m] for m, n in enumerate(MEMS)}, shared_ports=3,
                     wakeup_cycles=WAKEUP_CYCLES, sleep_cycles=1)
    text = amaranth_verilog.convert(dut, name="descnet_spm", emit_src=False)
    has = [n in dut.mems for n in MEMS]
    top = driver_top(text, "descnet_spm", None, driver_pins(dut.mems), name="descnet_spm_driver")
    for pin in ("en", "we", "addr", "wdata", "rvalid", "err"):
        if top.words[pin] != 1:
            raise SimulationError(f"the replay driver reads {pin} as 32 bits; it has "
                                  f"{32 * top.words[pin]}")
    hdr = params_header(top.name, NMEM=len(MEMS), NPORT=len(MEMS) - 1, HAS_MEM=has,
                        SECTORS=sc, SLEEP_WORDS=top.words["sleep_req"],
                        ON_WORDS=top.words["on_cycles"])
    return build_verilated(top.verilog, top.name, sources("pg_replay_main.cpp", hdr),
                           name="descnet_pg_replay")


def replay(prof: Profile, org: str, sizes, sectors, *, cycle_scale: int = 1,
           workdir: Path | None = None) -> dict:
    """Replay ``prof`` on the RTL of a -PG configuration; ON cycles and static energy."""
    if org not in _ORG_RTL:
        raise SimulationError(f"power-gating replay needs a -PG organization, not {org!r}")
    sc = [int(s) if int(z) else 1 for s, z in zip(sectors, sizes)]
    present = [bool(int(z)) for z in sizes]
    exe = build_replay_driver(org, sizes, sectors)
    rows = schedule(prof, sizes, sectors, cycle_scale)
    with tempfile.TemporaryDirectory(dir=workdir) as td:
        d = Path(td)
        write_table(d / "schedule.txt", SCHEDULE_COLUMNS,
                    ([cyc, *on, *(v for r in ranges for v in r)] for cyc, on, ranges in rows))
        write_fields(d / "run.txt", {"lead": WAKEUP_CYCLES + 1})
        res = subprocess.run([str(exe), str(d)], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise SimulationError(f"power-gating replay failed: {res.stderr[-2000:]}")
        got = read_fields(d / "stats.txt")
    names = [n for m, n in enumerate(MEMS) if f"on_cycles_{m}" in got]
    total = got.int("cycles")
    on_cycles = {n: got.ints(f"on_cycles_{MEMS.index(n)}") for n in names}
    # Static energy from the simulated ON cycles (scaled back to the profile's time).
    t_clk_ms = 1e3 / (prof.freq_mhz * 1e6) * cycle_scale
    static = 0.0
    for n in names:
        m = MEMS.index(n)
        if not present[m]:
            continue
        leak = float(sram.leak_mw(int(sizes[m]), 3 if n == "shared" else 1))
        per = leak / sc[m]
        for c in on_cycles[n]:
            static += (c + sram.OFF_LEAK * (total - c)) * per * t_clk_ms
        if sc[m] > 1:
            static += float(sram.pg_leak_mw(int(sizes[m]), 3 if n == "shared" else 1,
                                            sc[m])) * total * t_clk_ms
    return {"org": org, "cycles_simulated": total, "cycle_scale": cycle_scale,
            "errors": got.int("errors"), "accesses": got.int("accesses"),
            "on_cycles": on_cycles, "wakeup_cycles": WAKEUP_CYCLES,
            "static_mj_simulated": round(static * 1e-3, 6)}


def replay_selected(prof: Profile, space, selected: dict, *, cycle_scale: int | None = None
                    ) -> dict:
    """Replay every selected -PG configuration; adds the analytical static energy beside."""
    if cycle_scale is None:
        cycle_scale = 1 if prof.cycles.sum() < 4_000_000 else 4
    out = {}
    for org, i in selected.items():
        if org not in _ORG_RTL:
            continue
        rep = replay(prof, org, space.size[i], space.sectors[i], cycle_scale=cycle_scale)
        rep["static_mj_analytical"] = round(float(space.parts[i, 1]), 6)
        rep["energy_mj_simulated"] = round(float(space.energy[i] - space.parts[i, 1])
                                           + rep["static_mj_simulated"], 6)
        out[org] = rep
    return out
