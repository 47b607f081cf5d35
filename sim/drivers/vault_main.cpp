// PIM-CapsNet routing driver: N Verilated vault-compute models in one clock loop.
// Serves each vault's operand memory (its DRAM partition, a flat word array) as
// lane vectors, optionally through a banked DRAM throughput model, delivers
// crossbar sends, releases barriers, and counts cycles.
// Usage: VBIN DIR. DIR holds run.txt (named fields, see main), mem<v>.bin,
// prog<v>.bin and (banked DRAM) tab<v>.bin; writes out<v>.bin and stats.txt
// (named fields). native_cycles = N in run.txt: a pure clock loop of N cycles on
// the same models (no memory serving, no bookkeeping) for the speed comparison;
// stats.txt then holds its seconds.
//
// The DRAM model (dram = 1) is vault_dram.h. Waves (pf::Waves: waves, waves_from,
// waves_to) show vault `waves_vault`'s compute; cycle 0 is the first cycle of the
// run after the programs are loaded and started (the cycles the run counts). A vault
// waiting at a barrier is not clocked: its waves hold there.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <memory>
#include <unordered_map>
#include <string>
#include <thread>
#include <vector>

#include "driver.h"
// Top, IWORDS (32-bit words of an instruction), LANES, TAB_BANK_BITS (a DRAM
// table entry is (remote << 31) | (row << TAB_BANK_BITS) | bank)
#include "pimforge_params.h"
#include "vault_dram.h"

using pf::lget;
using pf::lset;

static inline int32_t sx24(uint32_t x) { return ((int32_t)(x << 8)) >> 8; }

// A reusable barrier for the worker threads: spins briefly, then yields (the
// machine may have fewer free cores than workers).
class SpinBarrier {
  public:
    explicit SpinBarrier(int n) : n_(n) {}
    void wait() {
        if (n_ == 1) return;
        const unsigned gen = gen_.load(std::memory_order_acquire);
        if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
            count_.store(0, std::memory_order_relaxed);
            gen_.fetch_add(1, std::memory_order_acq_rel);
            return;
        }
        for (int k = 0; gen_.load(std::memory_order_acquire) == gen; k++)
            if (k > 256) std::this_thread::yield();
    }

  private:
    const int n_;
    std::atomic<int> count_{0};
    std::atomic<unsigned> gen_{0};
};

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    std::string dir = argv[1];
    const pf::Fields run(dir + "/run.txt");
    const int nv = (int)run.integer("vaults");
    const long max_cycles = run.integer("max_cycles");
    const long native_cycles = run.integer("native_cycles", 0);
    const double bw = run.real("xbar_bytes_per_cycle");   // per vault port
    Params P;
    P.dram = (int)run.integer("dram");
    P.hit = run.real("hit_cycles");
    P.miss = run.real("miss_cycles");
    P.closed = run.real("closed_cycles");
    P.tsv = run.real("tsv_bytes_per_cycle");
    P.xbar = bw;
    P.close_page = (int)run.integer("close_page");
    P.hold = (int)run.integer("hold");
    P.prefetch = (int)run.integer("prefetch", 0);
    P.rbuf = (int)run.integer("read_buffer_blocks", 0);
    P.wbuf = (int)run.integer("write_buffer_blocks", 0);
    P.fetch = (int)run.integer("fetch_blocks", 1);
    P.central = (int)run.integer("central", 0);
    P.xrd = P.central ? run.real("xbar_rd_bytes_per_cycle") : 1.0;
    P.xwr = P.central ? run.real("xbar_wr_bytes_per_cycle") : 1.0;
    P.pkt = P.central ? run.real("packet_bytes") : 0.0;
    if (P.central && (P.xrd <= 0 || P.xwr <= 0)) { fprintf(stderr, "bad crossbar bandwidth\n"); return 2; }
    if (P.fetch < 1 || P.rbuf < 0 || P.wbuf < 0) { fprintf(stderr, "bad buffer sizes\n"); return 2; }
    const int threads = (int)run.integer("threads", 1);
    if (threads < 1) { fprintf(stderr, "threads must be at least 1\n"); return 2; }
    pf::Waves waves(dir, run);   // before the models: tracing must be on when they are made
    const int wvault = (int)run.integer("waves_vault", 0);
    if (waves.on() && (wvault < 0 || wvault >= nv)) { fprintf(stderr, "bad waves_vault\n"); return 2; }
    std::vector<std::unique_ptr<Top>> v;
    std::vector<std::vector<uint32_t>> mem(nv), prog(nv);
    std::vector<Dram> dram(nv);
    const int nbanks = 1 << TAB_BANK_BITS;
    for (int i = 0; i < nv; i++) {
        v.emplace_back(new Top);
        mem[i] = pf::read_words(dir + "/mem" + std::to_string(i) + ".bin");
        prog[i] = pf::read_words(dir + "/prog" + std::to_string(i) + ".bin");
        if (P.dram) {
            dram[i].tab = pf::read_words(dir + "/tab" + std::to_string(i) + ".bin");
            if (dram[i].tab.size() * 4 < mem[i].size()) { fprintf(stderr, "short tab%d\n", i); return 2; }
            dram[i].bank_free.assign(nbanks, 0.0);
            dram[i].open_row.assign(nbanks, -1);
        }
    }
    for (int i = 0; i < nv; i++) {
        pf::reset(v[i].get(), 2);
        size_t n = prog[i].size() / IWORDS;
        for (size_t k = 0; k < n; k++) {
            v[i]->imem_we = 1; v[i]->imem_addr = k;
            for (int w = 0; w < IWORDS; w++) lset(v[i]->imem_data, w, prog[i][k * IWORDS + w]);
            pf::tick(v[i].get());
        }
        v[i]->imem_we = 0;
        v[i]->rd_ready = 1;
    }
    if (waves.on()) waves.attach(v[wvault].get());
    if (native_cycles > 0) {
        auto t0 = std::chrono::steady_clock::now();
        for (long c = 0; c < native_cycles; c++) for (int i = 0; i < nv; i++) pf::tick(v[i].get());
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        pf::Stats st(dir + "/stats.txt");
        st.put("native_cycles", (long long)native_cycles);
        st.put("seconds", s);
        return 0;
    }
    std::vector<long> rd(nv, 0), wr(nv, 0), busy(nv, 0), sent(nv, 0), recv(nv, 0);
    std::vector<long> phase_cycles;
    // Per phase and vault, the cumulative active cycles and stall counters at the
    // phase's end (phases x vaults, flattened): the cycles-over-ideal breakdown.
    std::vector<long> phase_busy, phase_vrs, phase_bw, phase_xs;
    auto phase_snapshot = [&]() {
        for (int i = 0; i < nv; i++) {
            phase_busy.push_back(busy[i]);
            phase_vrs.push_back(dram[i].vrs);
            phase_bw.push_back(dram[i].bw_stall);
            phase_xs.push_back(dram[i].xbar_stall);
        }
    };
    long cycle = 0, phase_start = 0, xbar_wait = 0, sends = 0;
    std::vector<int> err(nv, 0);
    // Start every controller at instruction 0.
    for (int i = 0; i < nv; i++) { v[i]->go = 1; pf::tick(v[i].get()); v[i]->go = 0; }

    // One cycle of vault i up to (not including) its clock edge: serve the read
    // bundle and the posted write. Sends are delivered by the caller (they
    // write another vault's memory).
    auto serve = [&](int i, double now) {
        Top* t = v[i].get();
        std::vector<uint32_t>& M = mem[i];
        const uint32_t msz = (uint32_t)M.size();
        if (t->wr_en) {
            uint32_t base = t->wr_addr, mask = t->wr_mask;
            int32_t st = sx24(t->wr_stride);
            uint32_t blk[LANES];
            for (int l = 0; l < LANES; l++) {
                if (!((mask >> l) & 1)) continue;
                uint32_t a = base + (uint32_t)(l * st);
                if (a >= msz) { fprintf(stderr, "vault %d: write outside memory (%u)\n", i, a); err[i] = 4; return; }
                M[a] = lget(t->wr_data, l);
                wr[i]++;
            }
            if (P.dram) {
                Dram& d = dram[i];
                int nb = bundle_blocks(base, st, mask, blk, 0);
                if (P.prefetch && P.hold && P.wbuf) buffer_write(d, P, blk, nb, now);
                else write_out(d, P, blk, nb, now);
            }
        }
        if (P.dram && P.prefetch && t->pf_valid) {
            Dram& d = dram[i];
            if ((int)d.queue.size() >= P.prefetch) {
                fprintf(stderr, "vault %d: more than %d prefetch hints outstanding\n", i, P.prefetch);
                err[i] = 5; return;
            }
            uint32_t blk[2 * LANES];
            int32_t as = sx24(t->pf_a_stride), bs = sx24(t->pf_b_stride);
            uint32_t pa = t->pf_a_addr, pb = t->pf_b_addr, pm = t->pf_mask;
            int nb = bundle_blocks(pa, as, pm, blk, 0);
            if (pb != pa || bs != as) nb = bundle_blocks(pb, bs, pm, blk, nb);
            for (int k = 0; k < nb; k++)
                if (blk[k] >= d.tab.size()) { fprintf(stderr, "vault %d: prefetch outside memory (block %u)\n", i, blk[k]); err[i] = 4; return; }
            double bank_done = now, tsv_done = now, xbar_done = now;
            if (P.hold) {
                buffered_hint(d, P, blk, nb, now, bank_done, tsv_done, xbar_done, i);
            } else {
                for (int k = 0; k < nb; k++) {
                    double f = serve_block(d, P, blk[k], now);
                    if (f > bank_done) bank_done = f;
                }
                if (nb) tsv_done = charge_path(d, P, blk, nb, now, xbar_done, false, nb);
                d.blk_rd += nb;
            }
            d.queue.push_back({t->pf_a_addr, t->pf_b_addr, t->pf_mask, as, bs, bank_done, tsv_done,
                               xbar_done});
        }
        if (t->rd_valid) {
            uint32_t mask = t->rd_mask;
            uint32_t aa = t->rd_a_addr, ba = t->rd_b_addr;
            int32_t as = sx24(t->rd_a_stride), bs = sx24(t->rd_b_stride);
            bool ready = true;
            if (P.dram && P.prefetch) {
                Dram& d = dram[i];
                if (d.queue.empty()) { fprintf(stderr, "vault %d: read bundle at cycle %ld was not announced\n", i, cycle); err[i] = 5; return; }
                const Dram::Hint& h = d.queue.front();
                if (h.aa != aa || h.ba != ba || h.as != as || h.bs != bs || h.mask != mask) {
                    fprintf(stderr, "vault %d: read bundle at cycle %ld differs from the announced one\n", i, cycle);
                    err[i] = 5; return;
                }
                int why = wait_reason(h.bank_done, h.tsv_done, h.xbar_done, now);
                if (why) { ready = false; count_wait(d, why); }
                else d.queue.pop_front();
            } else if (P.dram) {
                Dram& d = dram[i];
                uint32_t blk[2 * LANES];
                uint32_t prev[2 * LANES];
                int nprev = d.nheld;
                for (int k = 0; k < nprev; k++) prev[k] = d.held[k];
                int nb = read_blocks(d, P, aa, as, ba, bs, mask, blk);
                bool banks_ok = true;
                for (int k = 0; k < nb; k++) {
                    if (blk[k] >= d.tab.size()) { fprintf(stderr, "vault %d: read outside memory (block %u)\n", i, blk[k]); err[i] = 4; return; }
                    if (d.bank_free[d.tab[blk[k]] & TAB_BANK_MASK] >= now + 1.0) { banks_ok = false; break; }
                }
                double xb = P.central ? (d.xrd_free > d.xwr_free ? d.xrd_free : d.xwr_free)
                                      : d.xbar_free;
                if (!banks_ok) { ready = false; d.vrs++; }
                else if (d.tsv_free >= now + 1.0 || xb >= now + 1.0) {
                    ready = false;
                    count_wait(d, wait_reason(0.0, d.tsv_free, xb, now));
                } else {
                    for (int k = 0; k < nb; k++) serve_block(d, P, blk[k], now);
                    double x;
                    charge_path(d, P, blk, nb, now, x, false, nb);
                    d.blk_rd += nb;
                }
                if (!ready) {   // not accepted: the ports still hold the previous bundle
                    for (int k = 0; k < nprev; k++) d.held[k] = prev[k];
                    d.nheld = nprev;
                }
            }
            t->rd_ready = ready;
            if (ready) {
                for (int l = 0; l < LANES; l++) {
                    if (!((mask >> l) & 1)) continue;
                    uint32_t a = aa + (uint32_t)(l * as), b = ba + (uint32_t)(l * bs);
                    if (a >= msz || b >= msz) {
                        fprintf(stderr, "vault %d: read outside memory (%u, %u) at cycle %ld\n", i, a, b, cycle);
                        err[i] = 4; return;
                    }
                    lset(t->rd_a_data, l, M[a]);
                    lset(t->rd_b_data, l, M[b]);
                    rd[i]++;
                }
            }
        }
    };

    // The vaults are independent within a cycle (a send writes words of the
    // peer that the peer reads only after the next barrier), so `threads`
    // workers each clock every threads-th vault (interleaved: a short
    // distribution dimension leaves the high vaults idle), with two thread
    // barriers per cycle; worker 0 closes each cycle (phases, crossbar
    // counters). The result does not depend on the thread count.
    const int T = threads < nv ? threads : nv;
    std::vector<std::vector<long>> recv_t(T, std::vector<long>(nv, 0));
    std::vector<long> sends_t(T, 0);
    std::vector<int> nbar_t(T, 0), nhalt_t(T, 0);   // per worker, published each cycle
    SpinBarrier sync(T);
    auto t0 = std::chrono::steady_clock::now();
    bool done = false;
    int rc = 0;
    std::vector<char> active(nv, 0);
    FILE* prog_f = nullptr;
    long phase_no = 0;
    auto last_report = std::chrono::steady_clock::now();
    auto worker = [&](int tid) {
        std::vector<long>& my_recv = recv_t[tid];
        while (true) {
            int mb = 0, mh = 0;
            for (int i = tid; i < nv; i += T) {
                Top* t = v[i].get();
                t->clk = 0; t->eval();
                if (i == wvault) waves.dump();
                mb += t->at_bar; mh += t->halted;
            }
            nbar_t[tid] = mb; nhalt_t[tid] = mh;
            sync.wait();
            // Every worker decides the cycle from the same published counts and
            // crossbar totals (no vault sends in a cycle where all wait at a
            // barrier), so no second barrier is needed before the rising edge.
            if (done) return;
            int nbar = 0, nhalt = 0;
            for (int k = 0; k < T; k++) { nbar += nbar_t[k]; nhalt += nhalt_t[k]; }
            bool rel = false, stop = false;
            if (cycle >= max_cycles || nhalt == nv) {
                stop = true;
            } else if (nbar + nhalt == nv) {
                // Crossbar model: every vault port moves bw bytes a cycle; a phase
                // ends when the busiest port has moved its sent and received bytes.
                long worst = 0;
                for (int i = 0; i < nv; i++) {
                    long r = 0;
                    for (int k = 0; k < T; k++) r += recv_t[k][i];
                    long b = sent[i] > r ? sent[i] : r;
                    if (b > worst) worst = b;
                }
                long need = phase_start + (long)((double)worst / bw + 0.999999);
                rel = cycle >= need;
                if (!rel && tid == 0) xbar_wait++;
            }
            if (stop) return;
            if (tid == 0 && (cycle & 4095) == 0) {
                // progress.txt for long runs (named fields): cycle, phases done, seconds so far
                auto nowt = std::chrono::steady_clock::now();
                if (std::chrono::duration<double>(nowt - last_report).count() > 10.0) {
                    last_report = nowt;
                    prog_f = fopen((dir + "/progress.txt").c_str(), "w");
                    if (prog_f) {
                        fprintf(prog_f, "cycle = %ld\nphase = %ld\nseconds = %.1f\n", cycle,
                                phase_no, std::chrono::duration<double>(nowt - t0).count());
                        fclose(prog_f);
                    }
                }
            }
            const double now = (double)cycle;
            for (int i = tid; i < nv; i += T) {
                Top* t = v[i].get();
                // A vault waiting at a barrier (or halted) has drained its PEs and
                // holds its state until go: its clock is gated off.
                active[i] = !((t->at_bar || t->halted) && !rel);
                if ((t->at_bar || t->halted) && P.dram && P.prefetch && P.hold
                    && (!dram[i].wbuf.empty() || !dram[i].rbuf.empty()))
                    drain_buffers(dram[i], P, now);
                if (!active[i]) {
                    if (i == wvault && waves.on()) { t->clk = 1; waves.dump(); t->clk = 0; }
                    continue;
                }
                serve(i, now);
                if (err[i]) break;
                if (t->send_valid) {
                    int p = t->send_peer;
                    uint32_t base = t->send_addr, mask = t->send_mask;
                    int32_t st = sx24(t->send_stride);
                    for (int l = 0; l < LANES; l++) {
                        if (!((mask >> l) & 1)) continue;
                        uint32_t a = base + (uint32_t)(l * st);
                        if (p >= nv || a >= mem[p].size()) {
                            fprintf(stderr, "vault %d: send outside vault %d memory (%u)\n", i, p, a);
                            err[i] = 4; break;
                        }
                        mem[p][a] = lget(t->send_data, l);
                        if (p != i) { sent[i] += 4; my_recv[p] += 4; sends_t[tid]++; }
                    }
                    if (err[i]) break;
                }
                if (!t->at_bar && !t->halted) busy[i]++;
                t->go = rel ? 1 : 0;
                t->clk = 1; t->eval();
                if (i == wvault) waves.dump();
                t->go = 0;
            }
            sync.wait();
            // Worker 0 closes the cycle while the others evaluate the next one's
            // falling edge (which reads none of this).
            if (tid == 0) {
                for (int i = 0; i < nv; i++) if (err[i]) { rc = err[i]; done = true; }
                if (rel) {
                    phase_cycles.push_back(cycle - phase_start);
                    phase_snapshot();
                    phase_start = cycle + 1;
                    phase_no++;
                    for (int i = 0; i < nv; i++) {
                        sent[i] = 0;
                        for (int k = 0; k < T; k++) recv_t[k][i] = 0;
                    }
                }
                if (!done) cycle++;
            }
        }
    };
    {
        std::vector<std::thread> pool;
        for (int k = 1; k < T; k++) pool.emplace_back(worker, k);
        worker(0);
        for (auto& th : pool) th.join();
    }
    if (rc) return rc;
    if (cycle >= max_cycles) { fprintf(stderr, "cycle limit %ld reached\n", max_cycles); return 3; }
    // The vaults that halted in the last cycle still hold posted writes: they go
    // to the DRAM too (counted; the run's cycles end with the halt).
    for (int i = 0; i < nv; i++)
        if (P.dram && P.prefetch && P.hold && !dram[i].wbuf.empty())
            drain_buffers(dram[i], P, (double)cycle);
    cycle++;   // the cycle that sees every vault halted counts
    for (int k = 0; k < T; k++) sends += sends_t[k];
    phase_cycles.push_back(cycle - phase_start);
    phase_snapshot();
    waves.close();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int i = 0; i < nv; i++) pf::write_words(dir + "/out" + std::to_string(i) + ".bin", mem[i]);
    pf::Stats st(dir + "/stats.txt");
    st.put("cycles", (long long)cycle);
    st.put("seconds", s);
    st.put("xbar_wait", (long long)xbar_wait);
    st.put("sends", (long long)sends);
    std::vector<long> col(nv);
    auto per_vault = [&](const char* key, long Dram::*field) {
        for (int i = 0; i < nv; i++) col[i] = dram[i].*field;
        st.put(key, col);
    };
    st.put("reads", rd);
    st.put("writes", wr);
    st.put("busy", busy);
    per_vault("vault_request_stalls", &Dram::vrs);
    per_vault("bandwidth_stalls", &Dram::bw_stall);
    per_vault("blocks_read", &Dram::blk_rd);
    per_vault("blocks_remote", &Dram::blk_remote);
    per_vault("crossbar_stalls", &Dram::xbar_stall);
    per_vault("crossbar_bytes", &Dram::xbar_bytes);
    per_vault("blocks_written", &Dram::blk_wr);
    per_vault("row_hits", &Dram::hits);
    per_vault("row_misses", &Dram::misses);
    st.put("phase_cycles", phase_cycles);
    st.put("phase_busy", phase_busy);
    st.put("phase_vault_request_stalls", phase_vrs);
    st.put("phase_bandwidth_stalls", phase_bw);
    st.put("phase_crossbar_stalls", phase_xs);
    return 0;
}
