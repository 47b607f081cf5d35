// nicepim driver: runs task lists on the Verilated NicePIM array (PIM-nodes on a mesh)
// to completion, serving every node's DRAM banks from a sparse model.
// Usage: VBIN DIR. DIR holds
//   run.txt    fields max_cycles (give up after this many cycles) and bare (1: also
//              time a bare loop of the same model for the same number of cycles);
//              waves, waves_from and waves_to for waves of the run (pf::Waves);
//   tasks.tbl  columns node addr t0 .. t<TW-1>: each node's task words (t0 least
//              significant); a node with no row is not started;
//   dram.tbl   columns node addr w0 .. w<WW-1>: initial DRAM words (others 0).
// Writes DIR/stats.txt (cycles, wall_s, cycles_per_s, bare_cycles_per_s, done, overflow,
// one array per node counter perf_<name>, and link_flits per mesh link) and
// DIR/dram_out.tbl (every nonzero DRAM word at the end, same columns as dram.tbl).
// Exit status 0 once every started node is done; 3 when max_cycles ran out.
//
// A node's banks: a read (arr_re) in a cycle is answered on arr_rdata in the next
// cycle, a write (arr_we) lands at once (the bank controller has checked the DRAM
// timing before issuing either).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <unordered_map>
#include <vector>

#include "driver.h"
// Top; N (nodes), WW (32-bit words of a DRAM word), TW (of a task), NODE_WORDS,
// TASK_ENTRIES, LINKS, NODE_COUNTERS(X): the counter names.
#include "pimforge_params.h"

using pf::lget;
using pf::lset;

using Word = std::vector<uint32_t>;
using Bank = std::unordered_map<uint32_t, Word>;

static void set_bits(Top* t, const std::vector<bool>& on) {
    for (int w = 0; w < (N + 31) / 32; w++) {
        uint32_t v = 0;
        for (int b = 0; b < 32 && 32 * w + b < N; b++)
            if (on[32 * w + b]) v |= 1u << b;
        lset(t->start, w, v);
    }
}

static bool all_done(Top* t, const std::vector<bool>& want) {
    for (int w = 0; w < (N + 31) / 32; w++) {
        uint32_t d = lget(t->done, w);
        for (int b = 0; b < 32 && 32 * w + b < N; b++)
            if (want[32 * w + b] && !((d >> b) & 1)) return false;
    }
    return true;
}

static void load(Top* t, const std::vector<std::vector<Word>>& tasks,
                 const std::vector<bool>& want) {
    // One task-memory port, addressed to a node by prog_node.
    for (int n = 0; n < N; n++) {
        for (size_t i = 0; i < tasks[n].size(); i++) {
            t->prog_node = n;
            lset(t->prog_en, 0, 1);
            lset(t->prog_addr, 0, (uint32_t)i);
            for (int w = 0; w < TW; w++) lset(t->prog_data, w, tasks[n][i][w]);
            pf::tick(t);
        }
    }
    lset(t->prog_en, 0, 0);
    set_bits(t, want);
    pf::tick(t);
    set_bits(t, std::vector<bool>(N, false));
}

int main(int argc, char** argv) {
    if (argc != 2) pf::die(2, "usage: nicepim_driver DIR");
    std::string dir = argv[1];
    Verilated::commandArgs(1, argv);
    pf::Fields run(dir + "/run.txt");
    long long max_cycles = run.integer("max_cycles");
    bool bare = run.integer("bare", 0) != 0;

    std::vector<std::vector<Word>> tasks(N);
    {
        pf::Table tb(dir + "/tasks.tbl");
        size_t cn = tb.col("node"), ca = tb.col("addr");
        std::vector<size_t> cw;
        for (int w = 0; w < TW; w++) cw.push_back(tb.col("t" + std::to_string(w)));
        std::vector<long long> row;
        while (tb.next(row)) {
            long long n = row[cn], a = row[ca];
            if (n < 0 || n >= N) pf::die(2, "tasks.tbl: node out of range");
            if (a != (long long)tasks[n].size()) pf::die(2, "tasks.tbl: addresses must count up from 0");
            if (a >= TASK_ENTRIES) pf::die(2, "tasks.tbl: more tasks than the task memory holds");
            Word w(TW);
            for (int k = 0; k < TW; k++) w[k] = (uint32_t)row[cw[k]];
            tasks[n].push_back(w);
        }
    }
    std::vector<Bank> banks(N);
    {
        pf::Table tb(dir + "/dram.tbl");
        size_t cn = tb.col("node"), ca = tb.col("addr");
        std::vector<size_t> cw;
        for (int w = 0; w < WW; w++) cw.push_back(tb.col("w" + std::to_string(w)));
        std::vector<long long> row;
        while (tb.next(row)) {
            long long n = row[cn], a = row[ca];
            if (n < 0 || n >= N || a < 0 || a >= NODE_WORDS)
                pf::die(2, "dram.tbl: node or addr out of range");
            Word w(WW);
            for (int k = 0; k < WW; k++) w[k] = (uint32_t)row[cw[k]];
            banks[n][(uint32_t)a] = w;
        }
    }
    std::vector<bool> want(N);
    for (int n = 0; n < N; n++) want[n] = !tasks[n].empty();

    pf::Waves waves(dir, run);
    Top* t = new Top;
    waves.attach(t);
    pf::reset(t, 4);
    load(t, tasks, want);
    // A read's word is driven on arr_rdata in the next cycle and held there until the
    // next read of that node (only the nodes read change).
    std::vector<Word> pending(N, Word(WW, 0));
    std::vector<int> answered;
    for (int n = 0; n < N; n++)
        for (int w = 0; w < WW; w++) lset(t->arr_rdata, WW * n + w, 0);
    long long cycles = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (cycles < max_cycles) {
        for (int n : answered)
            for (int w = 0; w < WW; w++) lset(t->arr_rdata, WW * n + w, pending[n][w]);
        answered.clear();
        waves.low(t);       // the cycle's inputs set, the clock low: its outputs
        if (cycles > 1 && all_done(t, want)) break;
        for (int n = 0; n < N; n++) {
            bool re = lget(t->arr_re, n), we = lget(t->arr_we, n);
            if (!re && !we) continue;
            uint32_t a = lget(t->arr_addr, n) & (uint32_t)(NODE_WORDS - 1);
            if (re) {
                auto it = banks[n].find(a);
                pending[n] = it == banks[n].end() ? Word(WW, 0) : it->second;
                answered.push_back(n);
            }
            if (we) {
                Word w(WW);
                for (int k = 0; k < WW; k++) w[k] = lget(t->arr_wdata, WW * n + k);
                banks[n][a] = w;
            }
        }
        waves.high(t);      // the rising edge
        cycles++;
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bool done = all_done(t, want);
    waves.close();

    {
        pf::Stats st(dir + "/stats.txt");
        st.put("cycles", cycles);
        st.put("wall_s", wall);
        st.put("cycles_per_s", wall > 0 ? cycles / wall : 0.0);
        st.put("done", (long long)done);
        st.put("overflow", (long long)lget(t->overflow, 0));
#define PUT_NODE(n)                                                                   \
        {                                                                             \
            std::vector<long long> xs;                                                \
            for (int i = 0; i < N; i++) xs.push_back((long long)lget(t->perf_##n, i)); \
            st.put("perf_" #n, xs);                                                   \
        }
        NODE_COUNTERS(PUT_NODE)
        {
            std::vector<long long> xs;
            for (int k = 0; k < LINKS; k++) xs.push_back((long long)lget(t->link_flits, k));
            st.put("link_flits", xs);
        }
        if (bare) {
            // The same model from the same start, clocked for the same cycles with
            // nothing but the clock: the ceiling of a native loop on this Verilog.
            pf::reset(t, 4);
            load(t, tasks, want);
            auto b0 = std::chrono::steady_clock::now();
            for (long long c = 0; c < cycles; c++) pf::tick(t);
            double bw = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
            st.put("bare_cycles_per_s", bw > 0 ? cycles / bw : 0.0);
        }
    }
    FILE* f = fopen((dir + "/dram_out.tbl").c_str(), "w");
    if (!f) pf::die(2, dir + "/dram_out.tbl: cannot write");
    fprintf(f, "node addr");
    for (int w = 0; w < WW; w++) fprintf(f, " w%d", w);
    fprintf(f, "\n");
    for (int n = 0; n < N; n++) {
        std::vector<uint32_t> addrs;
        for (auto& kv : banks[n])
            if (std::any_of(kv.second.begin(), kv.second.end(), [](uint32_t x) { return x; }))
                addrs.push_back(kv.first);
        std::sort(addrs.begin(), addrs.end());
        for (uint32_t a : addrs) {
            fprintf(f, "%d %u", n, a);
            for (uint32_t x : banks[n][a]) fprintf(f, " %u", x);
            fprintf(f, "\n");
        }
    }
    fclose(f);
    t->final();
    delete t;
    return done ? 0 : 3;
}
