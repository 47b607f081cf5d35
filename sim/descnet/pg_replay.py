"""Simulated power gating: replay an operation schedule on the Verilated DESCNet SPM.

For a selected -PG configuration, the operation sequence of the profile is
played on the RTL of :class:`~pimforge.rtl.spm.organization.DESCNetSPM` by a
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

from ...gen.errors import SimulationError
from . import sram
from .profiles import Profile

__all__ = ["MAIN_CPP", "WAKEUP_CYCLES", "replay", "replay_selected", "schedule"]

WAKEUP_CYCLES = 4     # conservative: 0.072 ns is below one 4 ns cycle (Sec. VI-A)
RTL_BANKS = 2
RTL_WORDS_PER_BANK_SECTOR = 4
MEMS = ("shared", "data", "weight", "acc")
_ORG_RTL = {"SMP-PG": "SMP", "SEP-PG": "SEP", "HY-PG": "HY"}

MAIN_CPP = r"""
#include "Vdescnet_spm.h"
#include "verilated.h"
#include <cstdio>
#include <cstdint>
#include <vector>
#include <fstream>

// Verilator escapes "__" in port names as "___05F".
// Schedule file: first line "n_ops lead"; then per op:
// cycles on_shared on_data on_weight on_acc  lo_k hi_k x3 (data weight acc, port address
// range; hi <= lo: the port idles).
struct Op { uint64_t cycles; int on[4]; uint32_t lo[3], hi[3]; };

static inline uint32_t lcg(uint64_t &s) { s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                                          return (uint32_t)(s >> 33); }

#define SET_REQ(mem, field, n_sect, want) do { uint64_t v = 0; \
    for (int s = 0; s < n_sect; ++s) if (s >= want) v |= (1ULL << s); top->field = v; } while (0)

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 4) { fprintf(stderr, "usage: sched out sectors(4 ints)\n"); return 2; }
    std::ifstream in(argv[1]);
    int n_ops, lead; in >> n_ops >> lead;
    std::vector<Op> ops(n_ops);
    for (auto &o : ops) { in >> o.cycles; for (int m = 0; m < 4; ++m) in >> o.on[m];
        for (int k = 0; k < 3; ++k) in >> o.lo[k] >> o.hi[k]; }
    int sect[4]; for (int m = 0; m < 4; ++m) sect[m] = atoi(argv[3 + m]);
    Vdescnet_spm *top = new Vdescnet_spm;
    top->clk = 0; top->rst = 1;
    for (int i = 0; i < 4; ++i) { top->clk ^= 1; top->eval(); }
    top->rst = 0;
    uint64_t seed = 12345, cycles = 0, errs = 0, accesses = 0;
    auto want = [&](size_t i, uint64_t t, int m) {
        int w = ops[i].on[m];
        if (i + 1 < ops.size() && t + lead >= ops[i].cycles && ops[i + 1].on[m] > w)
            w = ops[i + 1].on[m];
        return w; };
    // Before the first op: the first op's sectors ON (reset state), the rest asleep, settled.
    for (size_t i = 0; i < ops.size(); ++i) {
        for (uint64_t t = 0; t < ops[i].cycles; ++t) {
            HAS_SHARED(SET_REQ(0, shared_sleep_req, sect[0], want(i, t, 0)));
            HAS_DATA(SET_REQ(1, data_sleep_req, sect[1], want(i, t, 1)));
            HAS_WEIGHT(SET_REQ(2, weight_sleep_req, sect[2], want(i, t, 2)));
            HAS_ACC(SET_REQ(3, acc_sleep_req, sect[3], want(i, t, 3)));
            uint32_t r;
#define PORT(k, name) \
            if (ops[i].hi[k] > ops[i].lo[k]) { r = lcg(seed); top->name##___05Fen = 1; \
                top->name##___05Fwe = r & 1; top->name##___05Fwdata = r; \
                top->name##___05Faddr = ops[i].lo[k] \
                    + (lcg(seed) % (ops[i].hi[k] - ops[i].lo[k])); \
                ++accesses; } else top->name##___05Fen = 0;
            PORT(0, data) PORT(1, weight) PORT(2, acc)
            top->clk = 1; top->eval(); top->clk = 0; top->eval(); ++cycles;
            if (top->data___05Frvalid && top->data___05Ferr) ++errs;
            if (top->weight___05Frvalid && top->weight___05Ferr) ++errs;
            if (top->acc___05Frvalid && top->acc___05Ferr) ++errs;
        }
    }
    FILE *f = fopen(argv[2], "w");
    fprintf(f, "cycles %llu\nerrors %llu\naccesses %llu\n", (unsigned long long)cycles,
            (unsigned long long)errs, (unsigned long long)accesses);
#define DUMP(name, m) { fprintf(f, #name); for (int s = 0; s < sect[m]; ++s) \
        fprintf(f, " %u", (unsigned)name##_on_cycles_word(s)); fprintf(f, "\n"); }
    DUMP_ALL
    fclose(f);
    delete top;
    return 0;
}
"""


def _rtl_words(sc: int) -> int:
    return sc * RTL_BANKS * RTL_WORDS_PER_BANK_SECTOR


def schedule(prof: Profile, sizes, sectors, cycle_scale: int = 1):
    """Per op: scaled cycles, ON sectors per memory, and each port's address range."""
    from .dse import split_usage

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


def replay(prof: Profile, org: str, sizes, sectors, *, cycle_scale: int = 1,
           workdir: Path | None = None) -> dict:
    """Replay ``prof`` on the RTL of a -PG configuration; ON cycles and static energy."""
    from amaranth.back import verilog as amaranth_verilog

    from ...rtl.spm.organization import DESCNetSPM
    from ..build import build_verilated

    if org not in _ORG_RTL:
        raise SimulationError(f"power-gating replay needs a -PG organization, not {org!r}")
    rtl_org = _ORG_RTL[org]
    sc = [int(s) if int(z) else 1 for s, z in zip(sectors, sizes)]
    present = [bool(int(z)) for z in sizes]
    dut = DESCNetSPM(organization=rtl_org, word_bits=32, banks=RTL_BANKS,
                     sizes={n: 4 * _rtl_words(sc[m]) for m, n in enumerate(MEMS)},
                     sectors={n: sc[m] for m, n in enumerate(MEMS)}, shared_ports=3,
                     wakeup_cycles=WAKEUP_CYCLES, sleep_cycles=1)
    text = amaranth_verilog.convert(dut, name="descnet_spm", emit_src=False)
    names = list(dut.mems)
    defs = {"HAS_SHARED": "shared" in names, "HAS_DATA": "data" in names,
            "HAS_WEIGHT": "weight" in names, "HAS_ACC": "acc" in names}
    cpp = "".join(f"#define {k}(x) {'x' if v else ''}\n" for k, v in defs.items())
    dump = " ".join(f"DUMP({n}, {MEMS.index(n)})" for n in names)
    # Verilator stores a wide port as a word array and a narrow one as an integer.
    accessors = ""
    for n in names:
        bits = 32 * sc[MEMS.index(n)]
        if bits <= 64:
            accessors += (f"#define {n}_on_cycles_word(s) "
                        f"((uint32_t)((uint64_t)(top->{n}_on_cycles) >> (32 * (s))))\n")
        else:
            accessors += f"#define {n}_on_cycles_word(s) (top->{n}_on_cycles[(s)])\n"
    main = cpp + accessors + MAIN_CPP.replace("DUMP_ALL", dump)
    exe = build_verilated(text, "descnet_spm", {"main.cpp": main}, name="descnet_pg_replay")
    rows = schedule(prof, sizes, sectors, cycle_scale)
    with tempfile.TemporaryDirectory(dir=workdir) as td:
        sched = Path(td) / "schedule.txt"
        out = Path(td) / "out.txt"
        lines = [f"{len(rows)} {WAKEUP_CYCLES + 1}"]
        for cyc, on, ranges in rows:
            lines.append(" ".join(map(str, [cyc, *on, *(v for r in ranges for v in r)])))
        sched.write_text("\n".join(lines) + "\n")
        res = subprocess.run([str(exe), str(sched), str(out), *map(str, sc)],
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise SimulationError(f"power-gating replay failed: {res.stderr[-2000:]}")
        got = {}
        for line in out.read_text().splitlines():
            k, *v = line.split()
            got[k] = [int(x) for x in v]
    total = got["cycles"][0]
    on_cycles = {n: got[n] for n in names}
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
            "errors": got["errors"][0], "accesses": got["accesses"][0],
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
