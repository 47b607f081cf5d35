// membench driver: replays a request table on the Verilated HMC memory system.
// Usage: VBIN DIR. DIR holds run.txt (named fields: policy, gamma_v, gamma_h,
// max_inflight_host, max_inflight_pe, optional trace = CSV path, optional waves,
// waves_from and waves_to: pf::Waves) and
// requests.txt, a table with the columns master we addr vault arr gap: GAP is
// the number of cycles the master waits after its previous request was accepted
// (or after reset, for its first) before offering this one, so a stalled
// request delays every later one of that master (compute between accesses).
// The max_inflight fields cap the requests in flight per host / PE master.
// Writes DIR/stats.txt (named fields; per-master arrays indexed by master,
// host links first).
#include <cstdint>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "driver.h"
// Top; NV vaults, NM masters (NL host links first), TAGS, ADDR_BITS, TAG_BITS;
// REQ_WORDS / RESP_WORDS / ADDR_WORDS: lanes of one element of the payload and
// array-address pins; BLOCK_WORDS: 32-bit words of a block.
#include "pimforge_params.h"

using pf::lget;
using pf::lset;
using pf::getbits;
using pf::setbits;

static uint32_t fdata(int vault, uint64_t a, int word) {  // backdoor contents
    uint64_t x = ((uint64_t)vault << 40) ^ (a * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)word << 56);
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29;
    return (uint32_t)x;
}
struct Req { int we; uint64_t addr; int vault; uint64_t arr; long gap; };
struct Out { int valid; int vault; uint64_t arr; int we; long issued; };

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    const std::string dir = argv[1];
    const pf::Fields run(dir + "/run.txt");
    std::vector<std::deque<Req>> q(NM);
    long total = 0, gaps = 0;
    {
        pf::Table t(dir + "/requests.txt");
        const size_t cm = t.col("master"), cw = t.col("we"), ca = t.col("addr"),
                     cv = t.col("vault"), cr = t.col("arr"), cg = t.col("gap");
        std::vector<long long> r;
        while (t.next(r)) {
            long long m = r[cm], gap = r[cg];
            if (m < 0 || m >= NM || gap < 0)
                pf::die(2, "bad request: master " + std::to_string(m) + " gap " + std::to_string(gap));
            q[m].push_back({(int)r[cw], (uint64_t)r[ca], (int)r[cv], (uint64_t)r[cr], (long)gap});
            total++; gaps += gap;
        }
    }
    const std::string trace = run.str("trace", "");
    FILE* tr = trace.empty() ? nullptr : fopen(trace.c_str(), "w");
    if (!trace.empty() && !tr) pf::die(2, trace + ": " + strerror(errno));
    if (tr) fprintf(tr, "cycle,vault,bank,cmd,row,col\n");
    static const char* CMD[] = {"NOP", "ACT", "RD", "WR", "PRE", "REF"};
    pf::Waves waves(dir, run);
    Top* top = new Top;
    waves.attach(top);
    top->policy = run.integer("policy");
    top->gamma_v = run.integer("gamma_v");
    top->gamma_h = run.integer("gamma_h");
    const long cap_host = run.integer("max_inflight_host"), cap_pe = run.integer("max_inflight_pe");
    if (cap_host < 1 || cap_host > TAGS || cap_pe < 1 || cap_pe > TAGS)
        pf::die(2, "max_inflight_host and max_inflight_pe must be between 1 and " + std::to_string(TAGS));
    pf::reset(top, 4);
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
    static uint32_t pay[NM][REQ_WORDS];
    uint32_t resp[RESP_WORDS];
    for (int m = 0; m < NM; m++) lset(top->resp_ready, m, 1);
    while (done < total && cycle < limit) {
        // inputs of this cycle: array read data (one cycle after the read), requests
        for (int v = 0; v < NV; v++) if (rd_pending[v]) {
            for (int k = 0; k < BLOCK_WORDS; k++) lset(top->arr_rdata, v * BLOCK_WORDS + k, fdata(v, rd_addr[v], k));
            rd_pending[v] = 0;
        }
        for (int m = 0; m < NM; m++) {
            int valid = !q[m].empty() && !freetags[m].empty() && cycle >= ready_at[m]
                        && inflight[m] < (m < NL ? cap_host : cap_pe);
            cur[m] = valid ? freetags[m].back() : -1;
            if (valid) {
                const Req& r = q[m].front();
                uint32_t* w = pay[m];
                memset(w, 0, 4 * REQ_WORDS);
                setbits(w, 0, 1, r.we);
                setbits(w, 1, ADDR_BITS, r.addr);
                setbits(w, 1 + ADDR_BITS, TAG_BITS, cur[m]);
                if (r.we) for (int k = 0; k < BLOCK_WORDS; k++) setbits(w, 1 + ADDR_BITS + TAG_BITS + 32 * k, 32, fdata(r.vault, r.arr, k));
                if (first < 0) first = cycle;
                if (offer[m] < 0) offer[m] = cycle;  // latency counts the wait at the port
            }
            lset(top->req_valid, m, valid);
        }
        for (int m = 0; m < NM; m++)
            for (int k = 0; k < REQ_WORDS; k++) lset(top->req_payload, m * REQ_WORDS + k, pay[m][k]);
        top->eval();
        waves.dump();
        // observe: DRAM commands, array reads and writes, then the master ports
        for (int v = 0; v < NV; v++) {
            if (lget(top->cmd_valid, v)) {
                int k = lget(top->cmd_kind, v); cmds[k]++;
                if (tr) fprintf(tr, "%ld,%d,%d,%s,%d,%d\n", cycle, v,
                                k == 5 ? -1 : (int)lget(top->cmd_bank, v),
                                CMD[k], (int)lget(top->cmd_row, v), (int)lget(top->cmd_col, v));
            }
            conflict += lget(top->conflict, v);
            const uint64_t a = pf::lget64(top->arr_addr, v * ADDR_WORDS, ADDR_WORDS);
            if (lget(top->arr_re, v)) { rd_pending[v] = 1; rd_addr[v] = a; }
            if (lget(top->arr_we, v)) for (int k = 0; k < BLOCK_WORDS; k++)
                if (lget(top->arr_wdata, v * BLOCK_WORDS + k) != fdata(v, a, k)) {
                    errors++;
                    if (errors < 10) fprintf(stderr, "vault %d: write data/address mismatch\n", v);
                    break;
                }
        }
        for (int m = 0; m < NM; m++) {
            if (cur[m] >= 0 && lget(top->req_ready, m)) {
                const Req& r = q[m].front();
                tags[m][cur[m]] = {1, r.vault, r.arr, r.we, offer[m]};
                offer[m] = -1;
                freetags[m].pop_back();
                q[m].pop_front();
                inflight[m]++;
                if (!q[m].empty()) ready_at[m] = cycle + 1 + q[m].front().gap;
            }
            if (lget(top->resp_valid, m)) {
                for (int k = 0; k < RESP_WORDS; k++) resp[k] = lget(top->resp_payload, m * RESP_WORDS + k);
                const uint32_t* w = resp;
                int we = getbits(w, 0, 1), tag = getbits(w, 1, TAG_BITS);
                Out& o = tags[m][tag];
                if (!o.valid || o.we != we) { errors++; if (errors < 10) fprintf(stderr, "master %d: bad tag %d\n", m, tag); }
                else if (!we) for (int k = 0; k < BLOCK_WORDS; k++)
                    if (getbits(w, 1 + TAG_BITS + 32 * k, 32) != fdata(o.vault, o.arr, k)) {
                        errors++; if (errors < 10) fprintf(stderr, "master %d tag %d: wrong data\n", m, tag); break; }
                if (o.valid) { lat[m] += cycle - o.issued; nresp[m]++; mlast[m] = cycle; }
                if (o.valid) inflight[m]--;
                o.valid = 0; freetags[m].push_back(tag); done++; last = cycle;
            }
        }
        top->clk = 1; top->eval(); waves.dump(); top->clk = 0;
        cycle++;
    }
    {
        pf::Stats s(dir + "/stats.txt");
        s.put("cycles", (long long)cycle);
        s.put("first", (long long)first);
        s.put("last", (long long)last);
        s.put("done", (long long)done);
        s.put("total", (long long)total);
        s.put("errors", (long long)errors);
        s.put("conflict", (long long)conflict);
        for (int k = 1; k < 6; k++) s.put(CMD[k], (long long)cmds[k]);
        s.put("latency_sum", lat);
        s.put("responses", nresp);
        s.put("last_response", mlast);
    }
    if (tr) fclose(tr);
    waves.close();
    delete top;
    return done == total && errors == 0 ? 0 : 1;
}
