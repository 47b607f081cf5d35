// The banked DRAM throughput model of the PIM-CapsNet vault driver (vault_main.cpp):
// one `Dram` per vault, the block-level bank/row/TSV/crossbar accounting and the
// operand port's read, write-combining and prefetch buffers.
//
// DRAM model (dram = 1), per vault: every cycle's read bundle (the live
// lanes of a and b) and posted write bundle are split into distinct 16-byte
// blocks; tab<v>.bin gives each vault-local block's bank and row (precomputed
// in Python with the placement's address map). A bank serves a row hit in
// tCCD and a row miss in tRP + tRCD + tCCD (open page; close page: every
// access tRCD + tCCD), banks in parallel; the vault's TSV moves `tsv` bytes a
// cycle (fractional). A resource is free for a new bundle in a cycle if its
// backlog ends within that cycle. Latency is hidden: descriptor-driven operand
// streams are known in advance and can be prefetched, so only throughput and
// bank conflicts hold the controller back (rd_ready low). Posted writes are
// always accepted and only add to the backlogs. Refresh is not modelled.
// hold = 1: the read ports keep the blocks of the last accepted bundle, so a
// bundle fetches only blocks it did not already have (an operand line buffer).
// prefetch = Q > 0: the controller announces every read bundle ahead of its
// use (pf_*, at most Q unread); each announced bundle's blocks are queued on
// their banks and the TSV when it is announced, and the bundle is ready on
// rd when its last block has arrived. The rd bundle must be the oldest
// announced one (a protocol error otherwise). With hold and prefetch, the
// port has three buffers instead of the last bundle's blocks: a read buffer
// of `rbuf` blocks (LRU) that a block already fetched (or on its way) is
// served from, filled `fetch` aligned blocks at a time (one request of a
// sub-page run, Sec. 5.3: the rest of the run is fetched with the missing
// block), and a write-combining buffer of `wbuf` blocks whose evicted blocks
// go to the DRAM; a vault at a barrier drains its write buffer and empties its
// read buffer (a peer's sends may have changed its memory).
// Remote blocks: a table entry with bit 31 set is a block that crosses the
// crossbar. It is served by a bank and the TSV as a local block is (the home
// vault's bank and TSV, stood in for by this vault's: with the placement's
// uniform interleave every vault serves as many remote blocks as it asks for)
// and also crosses the crossbar:
// * central = 0: through this vault's crossbar port, `xbar_bytes_per_cycle`
//   shared by its remote blocks (payload only);
// * central = 1 (PIM-Intra, Sec. 6.1: the compute units sit in the middle of
//   the logic die and every block they read or write is remote): as HMC
//   packets through this compute group's share of the crossbar, each
//   direction its own resource (`xbar_rd_bytes_per_cycle` towards the
//   units, `xbar_wr_bytes_per_cycle` towards the vaults). A read request of
//   one aligned fetch run is a header-only packet (`packet_bytes`) towards
//   the vaults and its response `packet_bytes` + the run's data back; a
//   write is `packet_bytes` + its block towards the vaults (posted, no
//   response). The bytes of both directions are counted in `xbar_bytes`.
// A bundle that waits is counted as a vault request stall (its banks behind),
// a bandwidth stall (the TSV behind) or a crossbar stall (the crossbar behind
// and later than both).
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <unordered_map>
#include <vector>

// LANES, TAB_BANK_BITS (a DRAM table entry is (remote << 31) | (row << TAB_BANK_BITS) | bank)
#include "pimforge_params.h"

static constexpr uint32_t TAB_BANK_MASK = (1u << TAB_BANK_BITS) - 1;
static constexpr uint32_t TAB_REMOTE = 1u << 31;


struct Dram {
    std::vector<uint32_t> tab;       // (remote << 31) | (row << TAB_BANK_BITS) | bank per block
    std::vector<double> bank_free;   // cycle at which each bank's backlog ends
    std::vector<int64_t> open_row;
    double tsv_free = 0;
    uint32_t held[2 * LANES];        // blocks of the last accepted read bundle (hold mode)
    int nheld = 0;
    long vrs = 0, bw_stall = 0, blk_rd = 0, blk_wr = 0, hits = 0, misses = 0, blk_remote = 0;
    long xbar_stall = 0, xbar_bytes = 0;
    double xbar_free = 0;   // the crossbar port into this vault (remote blocks, central = 0)
    double xrd_free = 0, xwr_free = 0;   // this group's crossbar share (central = 1)
    // Announced, not yet read bundles (prefetch): addresses and arrival times.
    struct Hint { uint32_t aa, ba, mask; int32_t as, bs; double bank_done, tsv_done, xbar_done; };
    std::deque<Hint> queue;
    // Port buffers (prefetch with hold): block -> arrival (bank, TSV), LRU order.
    struct Line { std::list<uint32_t>::iterator at; double bank_done, tsv_done, xbar_done; };
    std::list<uint32_t> rlru, wlru;
    std::unordered_map<uint32_t, Line> rbuf;
    std::unordered_map<uint32_t, std::list<uint32_t>::iterator> wbuf;
};

struct Params {
    int dram; double hit, miss, tsv, closed, xbar; int close_page, hold, prefetch, rbuf, wbuf, fetch;
    int central; double xrd, xwr, pkt;
};

// Why a bundle whose blocks arrive at (bank, tsv, xbar) is not ready at *now*
// (0: it is): 1 banks, 2 TSV, 3 crossbar (the latest of the three).
static inline int wait_reason(double bank, double tsv, double xbar, double now) {
    const double lim = now + 1.0;
    if (xbar >= lim && xbar > bank && xbar > tsv) return 3;
    if (bank >= lim) return 1;
    if (tsv >= lim) return 2;
    return 0;
}

static inline void count_wait(struct Dram& d, int why) {
    if (why == 1) d.vrs++;
    else if (why == 2) d.bw_stall++;
    else if (why == 3) d.xbar_stall++;
}

// Distinct blocks of a lane bundle (live lanes of base + l * stride), appended to out.
static inline int bundle_blocks(uint32_t base, int32_t stride, uint32_t mask, uint32_t* out,
                                int n) {
    int n0 = n;
    for (int l = 0; l < LANES; l++) {
        if (!((mask >> l) & 1)) continue;
        uint32_t b = (base + (uint32_t)(l * stride)) >> 2;
        bool seen = false;
        // Lanes are affine, so a repeat of this operand's blocks is the previous one.
        if (n > n0 && out[n - 1] == b) seen = true;
        else for (int k = 0; k < n0; k++) if (out[k] == b) { seen = true; break; }
        if (!seen) out[n++] = b;
    }
    return n;
}

// Returns the cycle at which the block's bank has delivered it.
static inline double serve_block(Dram& d, const Params& P, uint32_t blk, double now) {
    uint32_t t = d.tab[blk];
    int bank = t & TAB_BANK_MASK;
    int64_t row = (t & ~TAB_REMOTE) >> TAB_BANK_BITS;
    double cost;
    if (!P.close_page && d.open_row[bank] == row) { cost = P.hit; d.hits++; }
    else { cost = P.close_page ? P.closed : P.miss; d.misses++; }
    d.open_row[bank] = row;
    double s = d.bank_free[bank] > now ? d.bank_free[bank] : now;
    d.bank_free[bank] = s + cost;
    return d.bank_free[bank];
}

// The TSV (all blocks) and the crossbar (remote blocks) moving *n* blocks
// in *requests* requests (reads unless *write*); returns when the last has
// crossed the TSV and sets *xbar_done* to when it has crossed the crossbar.
static inline double charge_path(Dram& d, const Params& P, const uint32_t* blk, int n,
                                 double now, double& xbar_done, bool write, int requests) {
    double s = d.tsv_free > now ? d.tsv_free : now;
    d.tsv_free = s + 16.0 * n / P.tsv;
    xbar_done = now;
    int remote = 0;
    for (int k = 0; k < n; k++) remote += (d.tab[blk[k]] & TAB_REMOTE) != 0;
    if (!remote) return d.tsv_free;
    d.blk_remote += remote;
    if (!P.central) {
        double x = d.xbar_free > now ? d.xbar_free : now;
        d.xbar_free = x + 16.0 * remote / P.xbar;
        xbar_done = d.xbar_free;
        return d.tsv_free;
    }
    const double data = 16.0 * remote, head = P.pkt * requests;
    const double to_units = write ? 0.0 : data + head;     // read responses
    const double to_vaults = write ? data + head : head;   // write requests, read requests
    d.xbar_bytes += (long)(to_units + to_vaults);
    double w = d.xwr_free > now ? d.xwr_free : now;
    d.xwr_free = w + to_vaults / P.xwr;
    xbar_done = d.xwr_free;
    if (to_units > 0) {
        double r = d.xrd_free > now ? d.xrd_free : now;
        d.xrd_free = r + to_units / P.xrd;
        if (d.xrd_free > xbar_done) xbar_done = d.xrd_free;
    }
    return d.tsv_free;
}

// Write the evicted / drained blocks of the write buffer to the DRAM.
static inline void write_out(Dram& d, const Params& P, const uint32_t* blk, int n, double now) {
    for (int k = 0; k < n; k++) serve_block(d, P, blk[k], now);
    double x;
    if (n) charge_path(d, P, blk, n, now, x, true, n);
    d.blk_wr += n;
}

// A posted write bundle's blocks into the write-combining buffer; evicted
// blocks go to the DRAM.
static inline void buffer_write(Dram& d, const Params& P, const uint32_t* blk, int n, double now) {
    uint32_t out[2 * LANES];
    int nout = 0;
    for (int k = 0; k < n; k++) {
        auto it = d.wbuf.find(blk[k]);
        if (it != d.wbuf.end()) { d.wlru.splice(d.wlru.begin(), d.wlru, it->second); continue; }
        d.wlru.push_front(blk[k]);
        d.wbuf[blk[k]] = d.wlru.begin();
        if ((int)d.wbuf.size() > P.wbuf) {
            uint32_t y = d.wlru.back();
            d.wlru.pop_back();
            d.wbuf.erase(y);
            out[nout++] = y;
        }
    }
    write_out(d, P, out, nout, now);
}

// Drain the write buffer and empty the read buffer (a vault at a barrier).
static inline void drain_buffers(Dram& d, const Params& P, double now) {
    std::vector<uint32_t> out(d.wlru.begin(), d.wlru.end());
    d.wlru.clear();
    d.wbuf.clear();
    for (size_t k = 0; k < out.size(); k++) serve_block(d, P, out[k], now);
    double x;
    if (!out.empty()) charge_path(d, P, out.data(), (int)out.size(), now, x, true, (int)out.size());
    d.blk_wr += (long)out.size();
    d.rlru.clear();
    d.rbuf.clear();
}

// An announced bundle through the read buffer: blocks present (or on their
// way) are not fetched again; a missing block is fetched with the rest of its
// aligned run of P.fetch blocks. Returns the bundle's arrival (bank, TSV).
static inline void buffered_hint(Dram& d, const Params& P, const uint32_t* blk, int nb,
                                 double now, double& bank_done, double& tsv_done,
                                 double& xbar_done, int vault) {
    bank_done = tsv_done = xbar_done = now;
    uint32_t miss[2 * LANES * 64];
    int nmiss = 0;
    for (int k = 0; k < nb; k++) {
        auto it = d.rbuf.find(blk[k]);
        if (it != d.rbuf.end()) continue;
        uint32_t g0 = blk[k] / (uint32_t)P.fetch * (uint32_t)P.fetch;
        for (uint32_t y = g0; y < g0 + (uint32_t)P.fetch && y < d.tab.size(); y++) {
            if (d.rbuf.count(y)) continue;
            bool dup = false;
            for (int q = 0; q < nmiss; q++) if (miss[q] == y) { dup = true; break; }
            if (!dup && nmiss < (int)(sizeof miss / sizeof miss[0])) miss[nmiss++] = y;
        }
    }
    double bd = now;
    for (int k = 0; k < nmiss; k++) {
        double f = serve_block(d, P, miss[k], now);
        if (f > bd) bd = f;
    }
    // A missing block's run is fetched with it, so each run is one request (its
    // blocks are listed one after the other).
    int runs = 0;
    for (int k = 0; k < nmiss; k++)
        runs += k == 0 || miss[k] / (uint32_t)P.fetch != miss[k - 1] / (uint32_t)P.fetch;
    double xd = now;
    double td = nmiss ? charge_path(d, P, miss, nmiss, now, xd, false, runs) : now;
    d.blk_rd += nmiss;
    for (int k = 0; k < nmiss; k++) {
        d.rlru.push_front(miss[k]);
        d.rbuf[miss[k]] = {d.rlru.begin(), bd, td, xd};
    }
    for (int k = 0; k < nb; k++) {
        auto it = d.rbuf.find(blk[k]);
        if (it == d.rbuf.end()) continue;   // past the end of the memory (checked by the caller)
        d.rlru.splice(d.rlru.begin(), d.rlru, it->second.at);
        if (it->second.bank_done > bank_done) bank_done = it->second.bank_done;
        if (it->second.tsv_done > tsv_done) tsv_done = it->second.tsv_done;
        if (it->second.xbar_done > xbar_done) xbar_done = it->second.xbar_done;
    }
    while ((int)d.rbuf.size() > P.rbuf) {
        uint32_t y = d.rlru.back();
        d.rlru.pop_back();
        d.rbuf.erase(y);
    }
    (void)vault;
}

// The distinct blocks of a read bundle (a, then b unless it repeats a), minus
// those of the previous bundle when the ports hold them (P.hold); the
// previous bundle's list is updated. Returns the count of blocks to fetch.
static inline int read_blocks(Dram& d, const Params& P, uint32_t aa, int32_t as, uint32_t ba,
                              int32_t bs, uint32_t mask, uint32_t* blk) {
    int nb = bundle_blocks(aa, as, mask, blk, 0);
    if (ba != aa || bs != as) nb = bundle_blocks(ba, bs, mask, blk, nb);
    if (!P.hold) return nb;
    uint32_t all[2 * LANES];
    for (int k = 0; k < nb; k++) all[k] = blk[k];
    int n2 = 0;
    for (int k = 0; k < nb; k++) {
        bool h = false;
        for (int q = 0; q < d.nheld; q++) if (d.held[q] == blk[k]) { h = true; break; }
        if (!h) blk[n2++] = blk[k];
    }
    for (int k = 0; k < nb; k++) d.held[k] = all[k];
    d.nheld = nb;
    return n2;
}
