// Stream driver: applies one input record per cycle to a Verilated top with
// flat ports and records the outputs of every cycle whose valid output is high.
// Usage: VBIN DIR. DIR holds run.txt (named fields: drain, idle cycles after the
// records with every input at 0; reset_cycles, rising edges in reset) and
// in.bin, the input records: per cycle, every input port in order as IN_WORDS[i]
// little-endian 32-bit words. Writes out.bin, per recorded cycle the cycle
// number (64 bits) and every output port as OUT_WORDS[i] words, and stats.txt
// (cycles, outputs, seconds).
// Timing: in cycle c the inputs are applied with the clock low, the outputs are
// sampled (they show the state after c rising edges), then the clock rises.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "driver.h"
// Top; NIN input ports with IN_WORDS[i] words each, packed in lanes of IN_LANE
// words of pin `ins`; NOUT outputs likewise (OUT_WORDS, OUT_LANE, pin `outs`);
// VALID: index of the output that marks a recorded cycle.
#include "pimforge_params.h"

using pf::lget;
using pf::lset;

static size_t sum(const int* w, int n) {
    size_t s = 0;
    for (int i = 0; i < n; i++) s += w[i];
    return s;
}

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    const std::string dir = argv[1];
    const pf::Fields run(dir + "/run.txt");
    const uint64_t drain = run.integer("drain"), reset = run.integer("reset_cycles");
    const size_t rec_in = sum(IN_WORDS, NIN), rec_out = 2 + sum(OUT_WORDS, NOUT);
    const std::vector<uint32_t> in = pf::read_words(dir + "/in.bin");
    const uint64_t n = in.size() / rec_in;

    VerilatedContext* ctx = new VerilatedContext;
    Top* top = new Top{ctx};
    auto apply = [&](const uint32_t* rec) {
        for (int i = 0, w = 0; i < NIN; w += IN_WORDS[i], i++)
            for (int k = 0; k < IN_WORDS[i]; k++) lset(top->ins, i * IN_LANE + k, rec ? rec[w + k] : 0);
    };
    apply(nullptr);
    pf::reset(top, (int)reset);

    std::vector<uint32_t> out;
    out.reserve(rec_out * 1024);
    const uint64_t total = n + drain;
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t c = 0; c < total; c++) {
        if (c < n) apply(in.data() + c * rec_in);
        else if (c == n) apply(nullptr);
        top->clk = 0;
        top->eval();
        if (lget(top->outs, VALID * OUT_LANE)) {
            out.push_back((uint32_t)c);
            out.push_back((uint32_t)(c >> 32));
            for (int i = 0; i < NOUT; i++)
                for (int k = 0; k < OUT_WORDS[i]; k++) out.push_back(lget(top->outs, i * OUT_LANE + k));
        }
        top->clk = 1;
        top->eval();
    }
    auto t1 = std::chrono::steady_clock::now();
    top->final();
    pf::write_words(dir + "/out.bin", out);
    pf::Stats st(dir + "/stats.txt");
    st.put("cycles", (long long)total);
    st.put("outputs", (long long)(out.size() / rec_out));
    st.put("seconds", std::chrono::duration<double>(t1 - t0).count());
    delete top;
    delete ctx;
    return 0;
}
