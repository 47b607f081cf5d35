// DESCNet power-gating replay: plays an operation schedule on the Verilated
// sectored scratchpads (PMU sleep requests plus a pseudo-random access stream)
// and reads the PMU's per-sector ON-cycle counters at the end.
// Usage: VBIN DIR. DIR holds run.txt (named field lead: cycles before an
// operation's end at which the sectors of the next one are requested ON) and
// schedule.txt, a table with one row per operation and the columns
//   cycles on_shared on_data on_weight on_acc lo_data hi_data lo_weight hi_weight lo_acc hi_acc
// (sectors ON per memory; each port's address range, hi <= lo: the port idles).
// Writes DIR/stats.txt: cycles, errors (accesses to a sector not ON),
// accesses and on_cycles_<m> (per sector) of every memory m present.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "driver.h"
// Top; NMEM memories (shared data weight acc), HAS_MEM, SECTORS; NPORT ports
// (data weight acc); SLEEP_WORDS / ON_WORDS: lanes of one memory's element of
// the sleep_req / on_cycles pins.
#include "pimforge_params.h"

using pf::lget;
using pf::lset;

struct Op { uint64_t cycles; int on[NMEM]; uint32_t lo[NPORT], hi[NPORT]; };

static inline uint32_t lcg(uint64_t& s) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(s >> 33);
}

// Sectors [want, SECTORS[m]) of memory m asleep, the others requested ON.
static void set_sleep(Top* top, int m, int want) {
    for (int w = 0; w < SLEEP_WORDS; w++) {
        uint32_t v = 0;
        for (int b = 0; b < 32; b++) {
            int s = 32 * w + b;
            if (s < SECTORS[m] && s >= want) v |= 1u << b;
        }
        lset(top->sleep_req, m * SLEEP_WORDS + w, v);
    }
}

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    const std::string dir = argv[1];
    const pf::Fields run(dir + "/run.txt");
    const int lead = (int)run.integer("lead");
    std::vector<Op> ops;
    {
        static const char* ON[NMEM] = {"on_shared", "on_data", "on_weight", "on_acc"};
        static const char* LO[NPORT] = {"lo_data", "lo_weight", "lo_acc"};
        static const char* HI[NPORT] = {"hi_data", "hi_weight", "hi_acc"};
        pf::Table t(dir + "/schedule.txt");
        size_t cc = t.col("cycles"), con[NMEM], clo[NPORT], chi[NPORT];
        for (int m = 0; m < NMEM; m++) con[m] = t.col(ON[m]);
        for (int k = 0; k < NPORT; k++) { clo[k] = t.col(LO[k]); chi[k] = t.col(HI[k]); }
        std::vector<long long> r;
        while (t.next(r)) {
            Op o;
            o.cycles = (uint64_t)r[cc];
            for (int m = 0; m < NMEM; m++) o.on[m] = (int)r[con[m]];
            for (int k = 0; k < NPORT; k++) { o.lo[k] = (uint32_t)r[clo[k]]; o.hi[k] = (uint32_t)r[chi[k]]; }
            ops.push_back(o);
        }
    }
    Top* top = new Top;
    pf::reset(top, 2);
    uint64_t seed = 12345, cycles = 0, errs = 0, accesses = 0;
    auto want = [&](size_t i, uint64_t t, int m) {
        int w = ops[i].on[m];
        if (i + 1 < ops.size() && t + lead >= ops[i].cycles && ops[i + 1].on[m] > w)
            w = ops[i + 1].on[m];
        return w;
    };
    // Before the first op: the first op's sectors ON (reset state), the rest asleep, settled.
    for (size_t i = 0; i < ops.size(); ++i) {
        for (uint64_t t = 0; t < ops[i].cycles; ++t) {
            for (int m = 0; m < NMEM; m++) if (HAS_MEM[m]) set_sleep(top, m, want(i, t, m));
            for (int k = 0; k < NPORT; k++) {
                if (ops[i].hi[k] > ops[i].lo[k]) {
                    uint32_t r = lcg(seed);
                    lset(top->en, k, 1);
                    lset(top->we, k, r & 1);
                    lset(top->wdata, k, r);
                    lset(top->addr, k, ops[i].lo[k] + (lcg(seed) % (ops[i].hi[k] - ops[i].lo[k])));
                    ++accesses;
                } else {
                    lset(top->en, k, 0);
                }
            }
            top->clk = 1; top->eval(); top->clk = 0; top->eval(); ++cycles;
            for (int k = 0; k < NPORT; k++) if (lget(top->rvalid, k) && lget(top->err, k)) ++errs;
        }
    }
    {
        pf::Stats st(dir + "/stats.txt");
        st.put("cycles", (long long)cycles);
        st.put("errors", (long long)errs);
        st.put("accesses", (long long)accesses);
        for (int m = 0; m < NMEM; m++) {
            if (!HAS_MEM[m]) continue;
            std::vector<uint32_t> on(SECTORS[m]);
            for (int s = 0; s < SECTORS[m]; s++) on[s] = lget(top->on_cycles, m * ON_WORDS + s);
            st.put(("on_cycles_" + std::to_string(m)).c_str(), on);
        }
    }
    delete top;
    return 0;
}
