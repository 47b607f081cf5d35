// noc driver: Bernoulli traffic on the Verilated mesh NoC, latency and throughput per
// injection rate, with every check of the network's contract on at every cycle.
// Usage: VBIN DIR. DIR/run.txt holds the named fields seed, packet_flits, traffic
// (0 uniform random over the other nodes, 1 transpose), rates (offered flits per
// source node per cycle, space separated), warmup, measure, drain, check, stall and
// ordered (0: a packet's head takes the next VC with a credit, round robin, as BookSim's
// sources do, and the routers give it any free VC; 1: the VC is fixed per destination
// and the flits say ordered, so that every flow arrives in order);
// waves, waves_from and waves_to for waves (pf::Waves; the rates' runs follow each other).
//
// Each rate is one run from reset: packets are generated for warmup + measure
// cycles (check = 1: then no more, and the network must drain completely) or until
// every packet generated in the measurement window has arrived (check = 0: the
// sources keep injecting meanwhile, so the load stays steady), within drain more
// cycles. Latency runs from a packet's generation (source queueing included) to
// the cycle its tail leaves the network. The sink returns a credit for a flit one
// cycle after it arrived, or later with probability stall per cycle (backpressure).
//
// Checks (errors counted, the first few printed): each flit arrives at its
// destination with its payload intact, the flits of a packet in order on one VC
// and not interleaved with another's, nothing twice, and with ordered = 1 the packets
// of each (source, destination) flow in order; with probes, every hop between routers goes the
// dimension-order (X, then Y) way and every packet takes exactly the Manhattan
// number of hops; no link carries a flit without a credit or returns more
// credits than flits (local ports and, with probes, every router-to-router link);
// no router overflows. Writes DIR/stats.txt: per-rate arrays.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "driver.h"
// Top; ROWS, COLS, N, V, D; FLIT_WORDS, PROBE_WORDS, NPROBE, PROBE_NODE[], PROBE_DIR[];
// the flit fields' offsets and widths (OFF_*, W_*); PAYLOAD_BITS; PROBE_OFF_FLIT,
// PROBE_OFF_CREDIT; OFF_ORD (the ordered bit); HEAD_CYCLES (a head flit's cycles per router); NOC_PROBES (1: the mesh has the probe pin).
#include "pimforge_params.h"

using pf::lget;
using pf::lset;
using pf::getbits;
using pf::setbits;

static uint32_t mix(uint64_t x) {
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29; x *= 0x94D049BB133111EBull; x ^= x >> 32;
    return (uint32_t)x;
}
static uint32_t check_word(int src, long seq, int idx) { return mix(((uint64_t)src << 40) ^ ((uint64_t)seq << 8) ^ idx); }

enum { LOCAL = 0, EAST = 1, WEST = 2, NORTH = 3, SOUTH = 4 };
static int xy_dir(int n, int dest) {
    int x = n % COLS, y = n / COLS, dx = dest % COLS, dy = dest / COLS;
    if (dx > x) return EAST;
    if (dx < x) return WEST;
    if (dy < y) return NORTH;
    if (dy > y) return SOUTH;
    return LOCAL;
}
static int manhattan(int a, int b) { return abs(a % COLS - b % COLS) + abs(a / COLS - b / COLS); }

struct Flit { int vc, head, tail, dest, src; long seq; int idx; uint32_t chk; };
static Flit decode(const uint32_t* w) {
    Flit f;
    f.vc = (int)getbits(w, OFF_VC, W_VC);
    f.head = (int)getbits(w, OFF_HEAD, 1);
    f.tail = (int)getbits(w, OFF_TAIL, 1);
    f.dest = (int)(getbits(w, OFF_DY, W_DY) * COLS + getbits(w, OFF_DX, W_DX));
    f.src = (int)getbits(w, OFF_SRC, W_SRC);
    uint64_t lo = getbits(w, OFF_PAYLOAD, 32);
    f.seq = (long)(lo & 0xFFFFFF);
    f.idx = (int)(lo >> 24);
    f.chk = PAYLOAD_BITS >= 64 ? (uint32_t)getbits(w, OFF_PAYLOAD + 32, 32) : 0;
    return f;
}

struct Pkt { int dest; long seq; };
struct Rx { int active = 0, src = 0, idx = 0; long seq = 0; };

struct Point {
    long generated = 0, delivered = 0, labeled = 0, labeled_done = 0, latency_sum = 0;
    long latency_max = 0, accepted_flits = 0, cycles = 0, drained = 0, errors = 0;
    long hop_sum = 0, packets_hopped = 0, sink_stalls = 0, credit_stalls = 0;
    long excess_min = -1, excess_sum = 0;   // latency above the zero-load pipeline
    long overtaken = 0;                     // packets that arrived before an older one of their flow
};

static long g_errors_printed = 0;
#define FAIL(pt, ...) do { (pt).errors++; if (g_errors_printed++ < 12) { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

static Point run_point(Top* top, pf::Waves& waves, double rate, int L, int traffic, long warmup, long measure,
                       long drain, int check, double stall, int ordered, uint64_t seed) {
    Point pt;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> U(0.0, 1.0);
    pf::reset(top, 4);
    std::vector<int> fixed_dest(N, -1);
    int sources = 0;
    for (int n = 0; n < N; n++) {
        if (traffic == 1) { int x = n % COLS, y = n / COLS; fixed_dest[n] = x * COLS + y; }
        if (traffic != 1 || fixed_dest[n] != n) sources++;
    }
    std::vector<std::deque<Pkt>> q(N);
    std::vector<int> sent_idx(N, 0);
    std::vector<std::vector<int>> cred(N, std::vector<int>(V, D)), occ(N, std::vector<int>(V, 0)),
        ret(N, std::vector<int>(V, 0));
    std::vector<long> seqn(N, 0);
    std::vector<int> pkt_vc(N, 0), last_vc(N, V - 1);
    std::vector<std::vector<uint8_t>> arrived(N);
    std::vector<std::vector<long>> created(N);
    std::vector<std::vector<int>> hops(N);
    std::vector<std::vector<Rx>> rx(N, std::vector<Rx>(V));
    std::vector<std::vector<long>> lastseq(N, std::vector<long>(N, -1));
    std::vector<std::vector<int>> pout(NPROBE, std::vector<int>(V, 0));
    const long window_end = warmup + measure, limit = window_end + drain;
    const double p_pkt = rate / L;
    static uint32_t fl[FLIT_WORDS], pr[PROBE_WORDS];
    long cycle = 0;
    for (;; cycle++) {
        const bool generating = check ? cycle < window_end : true;
        if (check && cycle >= window_end && pt.delivered == pt.generated) { pt.drained = 1; break; }
        if (!check && cycle >= window_end && pt.labeled_done == pt.labeled) { pt.drained = 1; break; }
        if (cycle >= limit) break;
        // generation: Bernoulli per source node and cycle, packets of L flits
        if (generating) for (int n = 0; n < N; n++) {
            if (traffic == 1 && fixed_dest[n] == n) continue;
            if (U(rng) >= p_pkt) continue;
            int dest = fixed_dest[n];
            if (traffic == 0) { dest = (int)(rng() % (N - 1)); if (dest >= n) dest++; }
            if (seqn[n] >= (1 << 24)) { FAIL(pt, "node %d: more than 2^24 packets", n); continue; }
            q[n].push_back({dest, seqn[n]++});
            created[n].push_back(cycle);
            arrived[n].push_back(0);
            hops[n].push_back(0);
            pt.generated++;
            if (cycle >= warmup && cycle < window_end) pt.labeled++;
        }
        // injection: one flit per node while its packet's VC has a credit
        for (int n = 0; n < N; n++) {
            int valid = 0;
            for (int k = 0; k < FLIT_WORDS; k++) fl[k] = 0;
            if (!q[n].empty()) {
                const Pkt& p = q[n].front();
                int vc = pkt_vc[n];
                if (ordered) vc = p.dest % V;   // fixed per flow: its packets stay in order
                else if (sent_idx[n] == 0)       // the next VC with a credit, round robin
                    for (int j = 1; j <= V; j++) {
                        const int c = (last_vc[n] + j) % V;
                        if (cred[n][c] > 0) { vc = c; break; }
                    }
                if (cred[n][vc] > 0) {
                    const int i = sent_idx[n];
                    if (i == 0) last_vc[n] = pkt_vc[n] = vc;
                    setbits(fl, OFF_ORD, 1, ordered);
                    setbits(fl, OFF_PAYLOAD, 32, (uint64_t)p.seq | ((uint64_t)i << 24));
                    if (PAYLOAD_BITS >= 64) setbits(fl, OFF_PAYLOAD + 32, 32, check_word(n, p.seq, i));
                    setbits(fl, OFF_VC, W_VC, vc);
                    setbits(fl, OFF_HEAD, 1, i == 0);
                    setbits(fl, OFF_TAIL, 1, i == L - 1);
                    setbits(fl, OFF_DX, W_DX, p.dest % COLS);
                    setbits(fl, OFF_DY, W_DY, p.dest / COLS);
                    setbits(fl, OFF_SRC, W_SRC, n);
                    valid = 1;
                    cred[n][vc]--;
                    if (++sent_idx[n] == L) { sent_idx[n] = 0; q[n].pop_front(); }
                } else {
                    pt.credit_stalls++;
                }
            }
            lset(top->in_valid, n, valid);
            for (int k = 0; k < FLIT_WORDS; k++) lset(top->in_flit, n * FLIT_WORDS + k, fl[k]);
            uint32_t c = 0;
            for (int v = 0; v < V; v++) c |= (uint32_t)ret[n][v] << v;
            lset(top->out_credit, n, c);
        }
        top->eval();
        waves.dump();
        if (top->overflow) FAIL(pt, "cycle %ld: a router input buffer overflowed", cycle);
        // ejection
        for (int n = 0; n < N; n++) {
            const uint32_t cr = lget(top->in_credit, n);
            for (int v = 0; v < V; v++) if ((cr >> v) & 1)
                if (++cred[n][v] > D) FAIL(pt, "node %d vc %d: credit overflow at the local input", n, v);
            if (!lget(top->out_valid, n)) continue;
            for (int k = 0; k < FLIT_WORDS; k++) fl[k] = lget(top->out_flit, n * FLIT_WORDS + k);
            const Flit f = decode(fl);
            if (f.vc >= V || ++occ[n][f.vc] > D) { FAIL(pt, "node %d: flit without credit on vc %d", n, f.vc); continue; }
            if (f.dest != n) { FAIL(pt, "node %d: flit for node %d", n, f.dest); continue; }
            if (f.src >= N || f.seq >= seqn[f.src] || f.idx >= L ||
                (PAYLOAD_BITS >= 64 && f.chk != check_word(f.src, f.seq, f.idx))) {
                FAIL(pt, "node %d: corrupt flit (src %d seq %ld idx %d)", n, f.src, f.seq, f.idx); continue; }
            Rx& r = rx[n][f.vc];
            if (f.head) {
                if (r.active) FAIL(pt, "node %d vc %d: head of %d/%ld inside packet %d/%ld", n, f.vc, f.src, f.seq, r.src, r.seq);
                if (f.idx != 0) FAIL(pt, "node %d: head flag on flit %d", n, f.idx);
                if (f.seq <= lastseq[n][f.src]) {
                    if (ordered) FAIL(pt, "node %d: packet %ld of node %d after %ld (order)", n, f.seq, f.src, lastseq[n][f.src]);
                    pt.overtaken++;
                }
                if (arrived[f.src][f.seq]++) FAIL(pt, "node %d: packet %ld of node %d twice", n, f.seq, f.src);
                if (f.seq > lastseq[n][f.src]) lastseq[n][f.src] = f.seq;
                r.active = 1; r.src = f.src; r.seq = f.seq; r.idx = 0;
            } else if (!r.active || r.src != f.src || r.seq != f.seq || f.idx != r.idx) {
                FAIL(pt, "node %d vc %d: flit %d of %d/%ld out of place", n, f.vc, f.idx, f.src, f.seq);
            }
            r.idx = f.idx + 1;
            if (f.tail != (f.idx == L - 1)) FAIL(pt, "node %d: tail flag on flit %d", n, f.idx);
            if (cycle >= warmup && cycle < window_end) pt.accepted_flits++;
            if (f.tail) {
                r.active = 0;
                pt.delivered++;
                const long t0 = created[f.src][f.seq], lat = cycle - t0;
                // A head spends HEAD_CYCLES cycles in each of the H + 1 routers, the
                // L - 1 body flits follow one per cycle: nothing arrives earlier.
                const long excess = lat - (HEAD_CYCLES * (manhattan(f.src, n) + 1) + L - 1);
                if (excess < 0) FAIL(pt, "packet %d/%ld: %ld cycles, below the pipeline's minimum", f.src, f.seq, lat);
                if (pt.excess_min < 0 || excess < pt.excess_min) pt.excess_min = excess;
                pt.excess_sum += excess;
                if (t0 >= warmup && t0 < window_end) {
                    pt.labeled_done++; pt.latency_sum += lat;
                    if (lat > pt.latency_max) pt.latency_max = lat;
                }
                if (NPROBE) {
                    const int h = hops[f.src][f.seq], want = manhattan(f.src, n);
                    if (h != want) FAIL(pt, "packet %d/%ld: %d hops, Manhattan distance %d", f.src, f.seq, h, want);
                    pt.hop_sum += h; pt.packets_hopped++;
                }
            }
        }
#if NOC_PROBES
        // router-to-router links
        for (int k = 0; k < NPROBE; k++) {
            for (int j = 0; j < PROBE_WORDS; j++) pr[j] = lget(top->probe, k * PROBE_WORDS + j);
            const uint32_t cr = (uint32_t)getbits(pr, PROBE_OFF_CREDIT, V);
            for (int v = 0; v < V; v++) if ((cr >> v) & 1)
                if (--pout[k][v] < 0) FAIL(pt, "link %d.%d vc %d: a credit for no flit", PROBE_NODE[k], PROBE_DIR[k], v);
            if (!getbits(pr, 0, 1)) continue;
            uint32_t w[FLIT_WORDS] = {0};
            for (int b = 0; b < 32 * FLIT_WORDS && b < PROBE_OFF_CREDIT - PROBE_OFF_FLIT; b += 32) {
                const int width = PROBE_OFF_CREDIT - PROBE_OFF_FLIT - b < 32 ? PROBE_OFF_CREDIT - PROBE_OFF_FLIT - b : 32;
                w[b / 32] = (uint32_t)getbits(pr, PROBE_OFF_FLIT + b, width);
            }
            const Flit f = decode(w);
            if (f.vc < V && ++pout[k][f.vc] > D) FAIL(pt, "link %d.%d vc %d: a flit without a credit", PROBE_NODE[k], PROBE_DIR[k], f.vc);
            const int want = xy_dir(PROBE_NODE[k], f.dest);
            if (PROBE_DIR[k] != want)
                FAIL(pt, "packet %d/%ld for node %d leaves node %d by port %d, XY says %d", f.src, f.seq, f.dest, PROBE_NODE[k], PROBE_DIR[k], want);
            if (f.head && f.src < N && f.seq < seqn[f.src]) hops[f.src][f.seq]++;
        }
#endif
        // the sinks: a credit back for a flit next cycle, or later under backpressure
        for (int n = 0; n < N; n++) for (int v = 0; v < V; v++) {
            ret[n][v] = 0;
            if (!occ[n][v]) continue;
            if (stall > 0 && U(rng) < stall) { pt.sink_stalls++; continue; }
            ret[n][v] = 1; occ[n][v]--;
        }
        top->clk = 1; top->eval(); waves.dump(); top->clk = 0;
    }
    pt.cycles = cycle;
    (void)sources;
    return pt;
}

// Trace mode (run.txt has `trace = FILE`): the messages of DIR/FILE, a table with the
// columns src, dest, flits and dep, one packet each (its row number is its id). A
// node injects its messages in table order, one flit per cycle while the VC has a
// credit; a message with dep >= 0 waits until message dep, which must be addressed
// to this node, has arrived whole (data forwarded on, as in Hamilton-cycle data
// sharing). The run ends when every message has arrived, or fails at `limit`
// cycles. The same checks as above; stats.txt gets the cycle of the last arrival,
// each message's arrival cycle and, with probes, the flits every router-to-router
// link carried.
static int run_trace(Top* top, pf::Waves& waves, const std::string& dir, const pf::Fields& run) {
    struct Msg { int src, dest, flits; long dep; };
    std::vector<Msg> msgs;
    {
        pf::Table t(dir + "/" + run.str("trace"));
        const size_t cs = t.col("src"), cd = t.col("dest"), cf = t.col("flits"), cp = t.col("dep");
        std::vector<long long> row;
        while (t.next(row)) {
            const long id = (long)msgs.size();
            Msg m{(int)row[cs], (int)row[cd], (int)row[cf], (long)row[cp]};
            if (m.src < 0 || m.src >= N || m.dest < 0 || m.dest >= N || m.src == m.dest)
                pf::die(2, "trace message " + std::to_string(id) + ": src and dest must be two nodes of the mesh");
            if (m.flits < 1 || m.flits > 255) pf::die(2, "trace message " + std::to_string(id) + ": flits must be between 1 and 255");
            if (m.dep >= id || (m.dep >= 0 && msgs[m.dep].dest != m.src))
                pf::die(2, "trace message " + std::to_string(id) + ": dep must be an earlier message to its source");
            msgs.push_back(m);
        }
    }
    const long M = (long)msgs.size(), limit = run.integer("limit");
    if (M >= (1L << 24)) pf::die(2, "at most 2^24 trace messages");
    pf::reset(top, 4);
    std::vector<std::vector<long>> queue(N);
    for (long i = 0; i < M; i++) queue[msgs[i].src].push_back(i);
    std::vector<size_t> head(N, 0);
    std::vector<int> sent_idx(N, 0), pkt_vc(N, 0), last_vc(N, V - 1);
    std::vector<long> arrive(M, -1);
    std::vector<std::vector<int>> cred(N, std::vector<int>(V, D)), occ(N, std::vector<int>(V, 0)),
        ret(N, std::vector<int>(V, 0));
    std::vector<std::vector<Rx>> rx(N, std::vector<Rx>(V));
    std::vector<std::vector<int>> pout(NPROBE, std::vector<int>(V, 0));
    std::vector<long> link_flits(NPROBE, 0);
    Point pt;
    static uint32_t fl[FLIT_WORDS], pr[PROBE_WORDS];
    long cycle = 0, last = 0;
    for (;; cycle++) {
        if (pt.delivered == M) { pt.drained = 1; break; }
        if (cycle >= limit) break;
        for (int n = 0; n < N; n++) {
            int valid = 0;
            for (int k = 0; k < FLIT_WORDS; k++) fl[k] = 0;
            if (head[n] < queue[n].size()) {
                const long id = queue[n][head[n]];
                const Msg& m = msgs[id];
                int vc = pkt_vc[n];
                if (sent_idx[n] == 0)       // the next VC with a credit, round robin
                    for (int j = 1; j <= V; j++) {
                        const int c = (last_vc[n] + j) % V;
                        if (cred[n][c] > 0) { vc = c; break; }
                    }
                const bool ready = sent_idx[n] > 0 || m.dep < 0 || arrive[m.dep] >= 0;
                if (ready && cred[n][vc] > 0) {
                    const int i = sent_idx[n];
                    if (i == 0) last_vc[n] = pkt_vc[n] = vc;
                    setbits(fl, OFF_PAYLOAD, 32, (uint64_t)id | ((uint64_t)i << 24));
                    if (PAYLOAD_BITS >= 64) setbits(fl, OFF_PAYLOAD + 32, 32, check_word(n, id, i));
                    setbits(fl, OFF_VC, W_VC, vc);
                    setbits(fl, OFF_HEAD, 1, i == 0);
                    setbits(fl, OFF_TAIL, 1, i == m.flits - 1);
                    setbits(fl, OFF_DX, W_DX, m.dest % COLS);
                    setbits(fl, OFF_DY, W_DY, m.dest / COLS);
                    setbits(fl, OFF_SRC, W_SRC, n);
                    valid = 1;
                    cred[n][vc]--;
                    if (++sent_idx[n] == m.flits) { sent_idx[n] = 0; head[n]++; }
                } else if (ready) {
                    pt.credit_stalls++;
                }
            }
            lset(top->in_valid, n, valid);
            for (int k = 0; k < FLIT_WORDS; k++) lset(top->in_flit, n * FLIT_WORDS + k, fl[k]);
            uint32_t c = 0;
            for (int v = 0; v < V; v++) c |= (uint32_t)ret[n][v] << v;
            lset(top->out_credit, n, c);
        }
        top->eval();
        waves.dump();
        if (top->overflow) FAIL(pt, "cycle %ld: a router input buffer overflowed", cycle);
        for (int n = 0; n < N; n++) {
            const uint32_t cr = lget(top->in_credit, n);
            for (int v = 0; v < V; v++) if ((cr >> v) & 1)
                if (++cred[n][v] > D) FAIL(pt, "node %d vc %d: credit overflow at the local input", n, v);
            if (!lget(top->out_valid, n)) continue;
            for (int k = 0; k < FLIT_WORDS; k++) fl[k] = lget(top->out_flit, n * FLIT_WORDS + k);
            const Flit f = decode(fl);
            if (f.vc >= V || ++occ[n][f.vc] > D) { FAIL(pt, "node %d: flit without credit on vc %d", n, f.vc); continue; }
            if (f.dest != n) { FAIL(pt, "node %d: flit for node %d", n, f.dest); continue; }
            if (f.seq >= M || msgs[f.seq].src != f.src || msgs[f.seq].dest != n || f.idx >= msgs[f.seq].flits ||
                (PAYLOAD_BITS >= 64 && f.chk != check_word(f.src, f.seq, f.idx))) {
                FAIL(pt, "node %d: corrupt flit (src %d message %ld idx %d)", n, f.src, f.seq, f.idx); continue; }
            Rx& r = rx[n][f.vc];
            if (f.head) {
                if (r.active) FAIL(pt, "node %d vc %d: head of message %ld inside message %ld", n, f.vc, f.seq, r.seq);
                if (f.idx != 0) FAIL(pt, "node %d: head flag on flit %d", n, f.idx);
                if (arrive[f.seq] >= 0) FAIL(pt, "node %d: message %ld twice", n, f.seq);
                r.active = 1; r.src = f.src; r.seq = f.seq; r.idx = 0;
            } else if (!r.active || r.src != f.src || r.seq != f.seq || f.idx != r.idx) {
                FAIL(pt, "node %d vc %d: flit %d of message %ld out of place", n, f.vc, f.idx, f.seq);
            }
            r.idx = f.idx + 1;
            if (f.tail != (f.idx == msgs[f.seq].flits - 1)) FAIL(pt, "node %d: tail flag on flit %d", n, f.idx);
            pt.accepted_flits++;
            if (f.tail) { r.active = 0; pt.delivered++; arrive[f.seq] = cycle; last = cycle; }
        }
#if NOC_PROBES
        for (int k = 0; k < NPROBE; k++) {
            for (int j = 0; j < PROBE_WORDS; j++) pr[j] = lget(top->probe, k * PROBE_WORDS + j);
            const uint32_t cr = (uint32_t)getbits(pr, PROBE_OFF_CREDIT, V);
            for (int v = 0; v < V; v++) if ((cr >> v) & 1)
                if (--pout[k][v] < 0) FAIL(pt, "link %d.%d vc %d: a credit for no flit", PROBE_NODE[k], PROBE_DIR[k], v);
            if (!getbits(pr, 0, 1)) continue;
            uint32_t w[FLIT_WORDS] = {0};
            for (int b = 0; b < 32 * FLIT_WORDS && b < PROBE_OFF_CREDIT - PROBE_OFF_FLIT; b += 32) {
                const int width = PROBE_OFF_CREDIT - PROBE_OFF_FLIT - b < 32 ? PROBE_OFF_CREDIT - PROBE_OFF_FLIT - b : 32;
                w[b / 32] = (uint32_t)getbits(pr, PROBE_OFF_FLIT + b, width);
            }
            const Flit f = decode(w);
            link_flits[k]++;
            if (f.vc < V && ++pout[k][f.vc] > D) FAIL(pt, "link %d.%d vc %d: a flit without a credit", PROBE_NODE[k], PROBE_DIR[k], f.vc);
            if (PROBE_DIR[k] != xy_dir(PROBE_NODE[k], f.dest))
                FAIL(pt, "message %ld for node %d leaves node %d by port %d, not the XY way", f.seq, f.dest, PROBE_NODE[k], PROBE_DIR[k]);
        }
#endif
        for (int n = 0; n < N; n++) for (int v = 0; v < V; v++) {
            ret[n][v] = occ[n][v] ? 1 : 0;
            if (occ[n][v]) occ[n][v]--;
        }
        top->clk = 1; top->eval(); waves.dump(); top->clk = 0;
    }
    if (!pt.drained) FAIL(pt, "%ld of %ld messages arrived within %ld cycles", pt.delivered, M, limit);
    {
        pf::Stats s(dir + "/stats.txt");
        s.put("messages", (long long)M);
        s.put("delivered", (long long)pt.delivered);
        s.put("drained", (long long)pt.drained);
        s.put("cycles", (long long)(pt.drained ? last + 1 : cycle));
        s.put("accepted_flits", (long long)pt.accepted_flits);
        s.put("credit_stalls", (long long)pt.credit_stalls);
        s.put("errors", (long long)pt.errors);
        s.put("total_errors", (long long)pt.errors);
        s.put("arrive", arrive);
        std::vector<long> nodes(PROBE_NODE, PROBE_NODE + NPROBE), dirs(PROBE_DIR, PROBE_DIR + NPROBE);
        s.put("link_flits", link_flits);
        s.put("link_node", nodes);
        s.put("link_dir", dirs);
    }
    return pt.errors ? 1 : 0;
}

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    if (argc < 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    const std::string dir = argv[1];
    const pf::Fields run(dir + "/run.txt");
    pf::Waves waves(dir, run);
    if (run.has("trace")) {
        Top* top = new Top;
        waves.attach(top);
        const int rc = run_trace(top, waves, dir, run);
        waves.close();
        delete top;
        return rc;
    }
    const int L = (int)run.integer("packet_flits"), traffic = (int)run.integer("traffic");
    const long warmup = run.integer("warmup"), measure = run.integer("measure"), drain = run.integer("drain");
    const int check = (int)run.integer("check");
    const double stall = run.real("stall");
    const int ordered = run.has("ordered") ? (int)run.integer("ordered") : 0;
    const uint64_t seed = (uint64_t)run.integer("seed");
    if (L < 1 || L > 16) pf::die(2, "packet_flits must be between 1 and 16");
    if (traffic == 1 && ROWS != COLS) pf::die(2, "transpose traffic needs a square mesh");
    std::vector<double> rates;
    {
        std::istringstream in(run.str("rates"));
        double r;
        while (in >> r) rates.push_back(r);
    }
    Top* top = new Top;
    waves.attach(top);
    std::vector<Point> pts;
    for (size_t i = 0; i < rates.size(); i++)
        pts.push_back(run_point(top, waves, rates[i], L, traffic, warmup, measure, drain, check, stall,
                                ordered, seed * 1000003ull + i));
    long errors = 0;
    {
        pf::Stats s(dir + "/stats.txt");
#define PUT(field) { std::vector<long> v; for (auto& p : pts) v.push_back(p.field); s.put(#field, v); }
        PUT(generated) PUT(delivered) PUT(labeled) PUT(labeled_done) PUT(latency_sum)
        PUT(latency_max) PUT(accepted_flits) PUT(cycles) PUT(drained) PUT(errors) PUT(hop_sum)
        PUT(packets_hopped) PUT(sink_stalls) PUT(credit_stalls)
        PUT(excess_min) PUT(excess_sum) PUT(overtaken)
        for (auto& p : pts) errors += p.errors;
        s.put("total_errors", (long long)errors);
    }
    waves.close();
    delete top;
    return errors ? 1 : 0;
}
