// membench driver: replays a request file on the Verilated HMC memory system.
// Generated names (@...@) are filled in by pimforge.sim.membench.
// A request line is "MASTER WE ADDR VAULT ARR [GAP]": the optional GAP (decimal,
// default 0) is the number of cycles the master waits after its previous request
// was accepted (or after reset, for its first) before offering this one, so a
// stalled request delays every later one of that master (compute between accesses).
// Optional arguments 7 and 8 cap the requests in flight per host / PE master.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <vector>
#include "Vhmc_mem.h"
#include "verilated.h"

static const int NV = @NV@, NM = @NM@, NL = @NL@, TAGS = @TAGS@;
static const int ADDR_BITS = @ADDR_BITS@, TAG_BITS = @TAG_BITS@;

static void setbits(uint32_t* w, int off, int width, uint64_t v) {
    for (int i = 0; i < width; i++) {
        int b = off + i;
        if ((v >> i) & 1) w[b / 32] |= (1u << (b % 32)); else w[b / 32] &= ~(1u << (b % 32));
    }
}
static uint64_t getbits(const uint32_t* w, int off, int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; i++) { int b = off + i; v |= (uint64_t)((w[b / 32] >> (b % 32)) & 1) << i; }
    return v;
}
static uint32_t fdata(int vault, uint64_t a, int word) {  // backdoor contents
    uint64_t x = ((uint64_t)vault << 40) ^ (a * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)word << 56);
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29;
    return (uint32_t)x;
}
struct Req { int we; uint64_t addr; int vault; uint64_t arr; long gap; };
struct Out { int valid; int vault; uint64_t arr; int we; long issued; };

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 4) { fprintf(stderr, "usage: %s REQS STATS [TRACE|-] [POLICY GV GH]\n", argv[0]); return 2; }
    FILE* f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 2; }
    std::vector<std::deque<Req>> q(NM);
    long total = 0, gaps = 0;
    { int m, we, v; unsigned long long a, arr; long gap; char line[256];
      while (fgets(line, sizeof line, f)) {
          gap = 0;
          int n = sscanf(line, "%d %d %llx %d %llx %ld", &m, &we, &a, &v, &arr, &gap);
          if (n < 5) continue;
          if (m < 0 || m >= NM || gap < 0) { fprintf(stderr, "bad request line: %s", line); return 2; }
          q[m].push_back({we, a, v, arr, gap}); total++; gaps += gap; } }
    fclose(f);
    FILE* tr = strcmp(argv[3], "-") ? fopen(argv[3], "w") : nullptr;
    if (tr) fprintf(tr, "cycle,vault,bank,cmd,row,col\n");
    static const char* CMD[] = {"NOP", "ACT", "RD", "WR", "PRE", "REF"};
    Vhmc_mem* top = new Vhmc_mem;
    top->policy = argc > 4 ? atoi(argv[4]) : 0;
    top->gamma_v = argc > 5 ? atoi(argv[5]) : 1;
    top->gamma_h = argc > 6 ? atoi(argv[6]) : 1;
    int cap_host = argc > 7 ? atoi(argv[7]) : TAGS, cap_pe = argc > 8 ? atoi(argv[8]) : TAGS;
    if (cap_host < 1 || cap_host > TAGS) cap_host = TAGS;
    if (cap_pe < 1 || cap_pe > TAGS) cap_pe = TAGS;
    top->rst = 1; top->clk = 0; top->eval();
    for (int i = 0; i < 4; i++) { top->clk = 1; top->eval(); top->clk = 0; top->eval(); }
    top->rst = 0;
    std::vector<std::vector<Out>> tags(NM, std::vector<Out>(TAGS));
    std::vector<std::vector<int>> freetags(NM);
    for (int m = 0; m < NM; m++) for (int t = TAGS - 1; t >= 0; t--) freetags[m].push_back(t);
    std::vector<int> cur(NM, -1);
    std::vector<long> lat(NM, 0), nresp(NM, 0), mlast(NM, 0), offer(NM, -1);
    std::vector<long> ready_at(NM, 0), inflight(NM, 0);  // earliest offer cycle; outstanding
    for (int m = 0; m < NM; m++) if (!q[m].empty()) ready_at[m] = q[m].front().gap;
    long done = 0, errors = 0, cycle = 0, first = -1, last = 0, conflict = 0;
    long cmds[6] = {0};
    std::vector<int> rd_pending(NV, 0);
    std::vector<uint64_t> rd_addr(NV, 0);
    long limit = 2000 * total + 200000 + gaps;
    @DECL@
    while (done < total && cycle < limit) {
        // inputs of this cycle
        @ARRDATA@
        for (int m = 0; m < NM; m++) {
            int valid = !q[m].empty() && !freetags[m].empty() && cycle >= ready_at[m]
                        && inflight[m] < (m < NL ? cap_host : cap_pe);
            cur[m] = valid ? freetags[m].back() : -1;
            if (valid) {
                const Req& r = q[m].front();
                uint32_t* w = pay[m];
                memset(w, 0, 4 * PAYW);
                setbits(w, 0, 1, r.we);
                setbits(w, 1, ADDR_BITS, r.addr);
                setbits(w, 1 + ADDR_BITS, TAG_BITS, cur[m]);
                if (r.we) for (int k = 0; k < 4; k++) setbits(w, 1 + ADDR_BITS + TAG_BITS + 32 * k, 32, fdata(r.vault, r.arr, k));
                if (first < 0) first = cycle;
                if (offer[m] < 0) offer[m] = cycle;  // latency counts the wait at the port
            }
            *valid_in[m] = valid;
        }
        @PAYSET@
        top->eval();
        // observe
        @OBSERVE@
        for (int m = 0; m < NM; m++) {
            if (cur[m] >= 0 && *ready_in[m]) {
                const Req& r = q[m].front();
                tags[m][cur[m]] = {1, r.vault, r.arr, r.we, offer[m]};
                offer[m] = -1;
                freetags[m].pop_back();
                q[m].pop_front();
                inflight[m]++;
                if (!q[m].empty()) ready_at[m] = cycle + 1 + q[m].front().gap;
            }
            if (*valid_out[m]) {
                const uint32_t* w = rpay[m];
                int we = getbits(w, 0, 1), tag = getbits(w, 1, TAG_BITS);
                Out& o = tags[m][tag];
                if (!o.valid || o.we != we) { errors++; if (errors < 10) fprintf(stderr, "master %d: bad tag %d\n", m, tag); }
                else if (!we) for (int k = 0; k < 4; k++)
                    if (getbits(w, 1 + TAG_BITS + 32 * k, 32) != fdata(o.vault, o.arr, k)) {
                        errors++; if (errors < 10) fprintf(stderr, "master %d tag %d: wrong data\n", m, tag); break; }
                if (o.valid) { lat[m] += cycle - o.issued; nresp[m]++; mlast[m] = cycle; }
                if (o.valid) inflight[m]--;
                o.valid = 0; freetags[m].push_back(tag); done++; last = cycle;
            }
        }
        top->clk = 1; top->eval(); top->clk = 0;
        cycle++;
    }
    FILE* s = fopen(argv[2], "w");
    fprintf(s, "cycles %ld\nfirst %ld\nlast %ld\ndone %ld\ntotal %ld\nerrors %ld\nconflict %ld\n",
            cycle, first, last, done, total, errors, conflict);
    for (int k = 1; k < 6; k++) fprintf(s, "%s %ld\n", CMD[k], cmds[k]);
    for (int m = 0; m < NM; m++) fprintf(s, "m%d_lat %ld\nm%d_n %ld\nm%d_last %ld\n", m, lat[m], m, nresp[m], m, mlast[m]);
    fclose(s);
    if (tr) fclose(tr);
    delete top;
    return done == total && errors == 0 ? 0 : 1;
}
