// ipim driver: runs SIMB programs on the Verilated iPIM cube (vaults, NICs, mesh,
// barrier) to completion, serving every PE's DRAM array from a sparse model.
// Usage: VBIN DIR. DIR holds
//   run.txt    fields max_cycles (give up after this many cycles) and bare (1: also
//              time a bare loop of the same model for the same number of cycles);
//              waves, waves_from and waves_to for waves of the run (pf::Waves);
//   prog.tbl   columns vault addr w0 w1 w2 w3: the instruction words of each vault's
//              program (w0 least significant); a vault with no row stays halted;
//   banks.tbl  columns vault pe addr w0 w1 w2 w3: initial bank vectors (others 0).
// Writes DIR/stats.txt (cycles, wall_s, cycles_per_s, bare_cycles_per_s, halted,
// error, barriers, and one array per counter: core_<name> per vault, nic_<name> per
// vault, pe_<name> per PE in vault-major order) and DIR/banks_out.tbl (every nonzero
// bank vector at the end, same columns as banks.tbl). Exit status 0 once every vault
// with a program has halted; 3 when max_cycles ran out (stats are still written).
//
// The arrays are the TSV data path of each bank: a read (arr_re) in a cycle is
// answered on arr_rdata in the next cycle, a write (arr_we) lands at once (the
// controller has checked the DRAM timing before issuing either).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <unordered_map>
#include <vector>

#include "driver.h"
// Top; V (vaults), P (PEs per vault), BANK_VECTORS, PC_WORDS (imem_addr lanes);
// W_<pin> words per lane of each counter pin; CORE_COUNTERS(X), NIC_COUNTERS(X),
// PE_COUNTERS(X): the counter names.
#include "pimforge_params.h"

using pf::lget;
using pf::lget64;
using pf::lset;

using Vec = std::array<uint32_t, 4>;
using Bank = std::unordered_map<uint32_t, Vec>;

static void load(Top* t, const std::vector<std::vector<Vec>>& prog) {
    size_t longest = 0;
    for (auto& p : prog) longest = std::max(longest, p.size());
    for (size_t i = 0; i < longest; i++) {
        for (int v = 0; v < V; v++) {
            bool on = i < prog[v].size();
            lset(t->imem_we, v, on);
            lset(t->imem_addr, v, (uint32_t)i);
            for (int w = 0; w < 4; w++) lset(t->imem_data, 4 * v + w, on ? prog[v][i][w] : 0);
        }
        pf::tick(t);
    }
    for (int v = 0; v < V; v++) {
        lset(t->imem_we, v, 0);
        lset(t->start, v, !prog[v].empty());
    }
    pf::tick(t);
    for (int v = 0; v < V; v++) lset(t->start, v, 0);
}

static uint64_t halted(Top* t) { return lget64(t->halted, 0, V > 32 ? 2 : 1); }

int main(int argc, char** argv) {
    if (argc != 2) pf::die(2, "usage: ipim_driver DIR");
    std::string dir = argv[1];
    Verilated::commandArgs(1, argv);
    pf::Fields run(dir + "/run.txt");
    long long max_cycles = run.integer("max_cycles");
    bool bare = run.integer("bare", 0) != 0;

    std::vector<std::vector<Vec>> prog(V);
    {
        pf::Table tb(dir + "/prog.tbl");
        size_t cv = tb.col("vault"), ca = tb.col("addr"), cw[4] = {tb.col("w0"), tb.col("w1"),
                                                                    tb.col("w2"), tb.col("w3")};
        std::vector<long long> row;
        while (tb.next(row)) {
            long long v = row[cv], a = row[ca];
            if (v < 0 || v >= V) pf::die(2, "prog.tbl: vault out of range");
            if (a != (long long)prog[v].size()) pf::die(2, "prog.tbl: addresses must count up from 0");
            Vec w;
            for (int k = 0; k < 4; k++) w[k] = (uint32_t)row[cw[k]];
            prog[v].push_back(w);
        }
    }
    std::vector<Bank> banks(V * P);
    {
        pf::Table tb(dir + "/banks.tbl");
        size_t cv = tb.col("vault"), cp = tb.col("pe"), ca = tb.col("addr");
        size_t cw[4] = {tb.col("w0"), tb.col("w1"), tb.col("w2"), tb.col("w3")};
        std::vector<long long> row;
        while (tb.next(row)) {
            long long v = row[cv], p = row[cp], a = row[ca];
            if (v < 0 || v >= V || p < 0 || p >= P || a < 0 || a >= BANK_VECTORS)
                pf::die(2, "banks.tbl: vault, pe or addr out of range");
            Vec w;
            for (int k = 0; k < 4; k++) w[k] = (uint32_t)row[cw[k]];
            banks[v * P + p][(uint32_t)a] = w;
        }
    }
    uint64_t want = 0;
    for (int v = 0; v < V; v++) if (!prog[v].empty()) want |= 1ull << v;

    pf::Waves waves(dir, run);
    Top* t = new Top;
    waves.attach(t);
    pf::reset(t, 4);
    load(t, prog);
    // The DRAM arrays: a read's vector is driven on arr_rdata in the next cycle and
    // held there until the next read of that bank (only the lanes read change).
    std::vector<Vec> pending(V * P, Vec{0, 0, 0, 0});
    std::vector<int> answered;
    for (int i = 0; i < V * P; i++)
        for (int w = 0; w < 4; w++) lset(t->arr_rdata, 4 * i + w, 0);
    long long cycles = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (cycles < max_cycles) {
        for (int i : answered)
            for (int w = 0; w < 4; w++) lset(t->arr_rdata, 4 * i + w, pending[i][w]);
        answered.clear();
        waves.low(t);       // the cycle's inputs set, the clock low: its outputs
        if (cycles > 1 && (halted(t) & want) == want) break;
        for (int i = 0; i < V * P; i++) {
            bool re = lget(t->arr_re, i), we = lget(t->arr_we, i);
            if (!re && !we) continue;
            uint32_t a = lget(t->arr_addr, i) & (uint32_t)(BANK_VECTORS - 1);
            if (re) {
                auto it = banks[i].find(a);
                pending[i] = it == banks[i].end() ? Vec{0, 0, 0, 0} : it->second;
                answered.push_back(i);
            }
            if (we) {
                Vec w;
                for (int k = 0; k < 4; k++) w[k] = lget(t->arr_wdata, 4 * i + k);
                banks[i][a] = w;
            }
        }
        waves.high(t);      // the rising edge
        cycles++;
    }
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bool done = (halted(t) & want) == want;
    waves.close();

    {
        pf::Stats st(dir + "/stats.txt");
        st.put("cycles", cycles);
        st.put("wall_s", wall);
        st.put("cycles_per_s", wall > 0 ? cycles / wall : 0.0);
        st.put("halted", (long long)halted(t));
        st.put("done", (long long)done);
        st.put("error", (long long)lget(t->error, 0));
        st.put("barriers", (long long)lget(t->barriers, 0));
#define PUT_LANES(prefix, pin, n, count)                                              \
        {                                                                             \
            std::vector<long long> xs;                                                \
            for (int i = 0; i < (count); i++)                                         \
                xs.push_back((long long)lget64(t->pin, i * W_##pin, W_##pin));        \
            st.put(prefix #n, xs);                                                    \
        }
#define PUT_CORE(n) PUT_LANES("core_", core_##n, n, V)
#define PUT_NIC(n) PUT_LANES("nic_", nic_##n, n, V)
#define PUT_PE(n) PUT_LANES("pe_", pe_##n, n, V * P)
        CORE_COUNTERS(PUT_CORE)
        NIC_COUNTERS(PUT_NIC)
        PE_COUNTERS(PUT_PE)
        if (bare) {
            // The same model from the same start, clocked for the same cycles with
            // nothing but the clock: the ceiling of a native loop on this Verilog.
            pf::reset(t, 4);
            load(t, prog);
            auto b0 = std::chrono::steady_clock::now();
            for (long long c = 0; c < cycles; c++) pf::tick(t);
            double bw = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
            st.put("bare_cycles_per_s", bw > 0 ? cycles / bw : 0.0);
        }
    }
    FILE* f = fopen((dir + "/banks_out.tbl").c_str(), "w");
    if (!f) pf::die(2, dir + "/banks_out.tbl: cannot write");
    fprintf(f, "vault pe addr w0 w1 w2 w3\n");
    for (int i = 0; i < V * P; i++) {
        std::vector<uint32_t> addrs;
        for (auto& kv : banks[i])
            if (kv.second[0] | kv.second[1] | kv.second[2] | kv.second[3]) addrs.push_back(kv.first);
        std::sort(addrs.begin(), addrs.end());
        for (uint32_t a : addrs) {
            const Vec& w = banks[i][a];
            fprintf(f, "%d %d %u %u %u %u %u\n", i / P, i % P, a, w[0], w[1], w[2], w[3]);
        }
    }
    fclose(f);
    t->final();
    delete t;
    return done ? 0 : 3;
}
