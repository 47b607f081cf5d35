// PIM-CapsNet routing driver: N Verilated vault-compute models in one clock loop.
// Serves each vault's operand memory (its DRAM partition, a flat word array),
// delivers crossbar sends, releases barriers, and counts cycles.
// Usage: VBIN DIR [native]. DIR holds meta.txt, mem<v>.bin, prog<v>.bin; writes
// out<v>.bin and stats.txt. "native": a pure clock loop on the same models
// (no memory serving, no bookkeeping) for the speed comparison.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>
#include "V@TOP@.h"
#include "verilated.h"

static const int IW = @IWORDS@;  // 32-bit words of one instruction

static std::vector<uint32_t> readfile(const std::string& p) {
    FILE* f = fopen(p.c_str(), "rb");
    if (!f) { perror(p.c_str()); exit(2); }
    std::vector<uint32_t> v;
    uint32_t buf[4096];
    size_t n;
    while ((n = fread(buf, 4, 4096, f)) > 0) v.insert(v.end(), buf, buf + n);
    fclose(f);
    return v;
}

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [native CYCLES]\n", argv[0]); return 2; }
    std::string dir = argv[1];
    bool native = argc > 2 && std::string(argv[2]) == "native";
    int nv; long max_cycles; double bw;  // bw: crossbar bytes per cycle per vault port
    int pkt;
    FILE* m = fopen((dir + "/meta.txt").c_str(), "r");
    if (!m || fscanf(m, "%d %ld %lf %d", &nv, &max_cycles, &bw, &pkt) != 4) {
        fprintf(stderr, "bad meta.txt\n"); return 2;
    }
    fclose(m);
    std::vector<std::unique_ptr<V@TOP@>> v;
    std::vector<std::vector<uint32_t>> mem(nv), prog(nv);
    for (int i = 0; i < nv; i++) {
        v.emplace_back(new V@TOP@);
        mem[i] = readfile(dir + "/mem" + std::to_string(i) + ".bin");
        prog[i] = readfile(dir + "/prog" + std::to_string(i) + ".bin");
    }
    auto tick = [&](int i) { v[i]->clk = 0; v[i]->eval(); v[i]->clk = 1; v[i]->eval(); };
    for (int i = 0; i < nv; i++) {
        v[i]->rst = 1; tick(i); tick(i); v[i]->rst = 0;
        size_t n = prog[i].size() / IW;
        for (size_t k = 0; k < n; k++) {
            v[i]->imem_we = 1; v[i]->imem_addr = k;
            for (int w = 0; w < IW; w++) v[i]->imem_data[w] = prog[i][k * IW + w];
            tick(i);
        }
        v[i]->imem_we = 0;
    }
    if (native) {
        long n = argc > 3 ? atol(argv[3]) : 100000;
        auto t0 = std::chrono::steady_clock::now();
        for (long c = 0; c < n; c++) for (int i = 0; i < nv; i++) tick(i);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("native %ld %.6f\n", n, s);
        return 0;
    }
    std::vector<long> rd(nv, 0), wr(nv, 0), busy(nv, 0), sent(nv, 0), recv(nv, 0);
    std::vector<long> phase_cycles;
    long cycle = 0, phase_start = 0, xbar_wait = 0, sends = 0;
    // Start every controller at instruction 0.
    for (int i = 0; i < nv; i++) { v[i]->go = 1; tick(i); v[i]->go = 0; }
    auto t0 = std::chrono::steady_clock::now();
    bool done = false;
    while (!done) {
        if (cycle >= max_cycles) { fprintf(stderr, "cycle limit %ld reached\n", max_cycles); return 3; }
        int nbar = 0, nhalt = 0;
        for (int i = 0; i < nv; i++) {
            V@TOP@* t = v[i].get();
            t->clk = 0; t->eval();
            nbar += t->at_bar; nhalt += t->halted;
        }
        bool release = false;
        if (nhalt == nv) { done = true; }
        else if (nbar + nhalt == nv) {
            // Crossbar model: every vault port moves bw bytes a cycle; a phase
            // ends when the busiest port has moved its sent and received bytes.
            long worst = 0;
            for (int i = 0; i < nv; i++) {
                long b = sent[i] > recv[i] ? sent[i] : recv[i];
                if (b > worst) worst = b;
            }
            long need = phase_start + (long)((double)worst / bw + 0.999999);
            if (cycle >= need) release = true; else xbar_wait++;
        }
        for (int i = 0; i < nv; i++) {
            V@TOP@* t = v[i].get();
            // A vault waiting at a barrier (or halted) has drained its PEs and
            // holds its state until go: its clock is gated off.
            if ((t->at_bar || t->halted) && !release) continue;
            if (t->rd_en) {
                uint32_t a = t->rd_a_addr, b = t->rd_b_addr;
                if (a >= mem[i].size() || b >= mem[i].size()) {
                    fprintf(stderr, "vault %d: read outside memory (%u, %u) at cycle %ld\n", i, a, b, cycle);
                    return 4;
                }
                t->rd_a_data = mem[i][a]; t->rd_b_data = mem[i][b];
                rd[i]++;
            }
            if (t->wr_en) {
                uint32_t a = t->wr_addr;
                if (a >= mem[i].size()) { fprintf(stderr, "vault %d: write outside memory (%u)\n", i, a); return 4; }
                mem[i][a] = t->wr_data; wr[i]++;
            }
            if (t->send_valid) {
                int p = t->send_peer;
                uint32_t a = t->send_addr;
                if (p >= nv || a >= mem[p].size()) { fprintf(stderr, "vault %d: send outside vault %d memory (%u)\n", i, p, a); return 4; }
                mem[p][a] = t->send_data;
                if (p != i) { sent[i] += 4; recv[p] += 4; sends++; }
            }
            if (!t->at_bar && !t->halted) busy[i]++;
            t->go = release ? 1 : 0;
            t->clk = 1; t->eval();
            t->go = 0;
        }
        if (release) {
            phase_cycles.push_back(cycle - phase_start);
            phase_start = cycle + 1;
            for (int i = 0; i < nv; i++) { sent[i] = 0; recv[i] = 0; }
        }
        cycle++;
    }
    phase_cycles.push_back(cycle - phase_start);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int i = 0; i < nv; i++) {
        FILE* o = fopen((dir + "/out" + std::to_string(i) + ".bin").c_str(), "wb");
        fwrite(mem[i].data(), 4, mem[i].size(), o);
        fclose(o);
    }
    FILE* st = fopen((dir + "/stats.txt").c_str(), "w");
    fprintf(st, "cycles %ld\nseconds %.6f\nxbar_wait %ld\nsends %ld\n", cycle, s, xbar_wait, sends);
    for (int i = 0; i < nv; i++) fprintf(st, "vault %d %ld %ld %ld\n", i, rd[i], wr[i], busy[i]);
    for (size_t k = 0; k < phase_cycles.size(); k++) fprintf(st, "phase %zu %ld\n", k, phase_cycles[k]);
    fclose(st);
    return 0;
}
