// What the native drivers share: named-field files, binary and table readers,
// lane access to Verilated ports and the reset sequence.
//
// Files exchanged with Python (pimforge.sim.drivers.io writes and reads the
// other side):
//   fields file   "key = value" lines ('#' starts a comment); a value is a
//                 number, a string, or numbers separated by spaces. Doubles
//                 are written with %.17g and read with strtod, so they
//                 round-trip exactly.
//   table file    a header line of column names, then one row of integers per
//                 line; a driver asks for its columns by name.
//   word file     raw little-endian uint32 words.
//   waves         a VCD file the driver writes when run.txt names one (Waves).
#pragma once

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "verilated.h"
#if VM_TRACE
#include "verilated_vcd_c.h"
#endif

namespace pf {

[[noreturn]] inline void die(int code, const std::string& msg) {
    fprintf(stderr, "%s\n", msg.c_str());
    exit(code);
}

inline std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// A fields file read into a lookup; a getter of a missing key or of a value of
// the wrong kind ends the driver with a message naming the key and the file.
class Fields {
  public:
    explicit Fields(const std::string& path) : path_(path) {
        FILE* f = fopen(path.c_str(), "r");
        if (!f) die(2, path + ": " + strerror(errno));
        std::string line;
        char buf[4096];
        while (fgets(buf, sizeof buf, f)) {
            line += buf;
            if (line.back() != '\n' && !feof(f)) continue;   // a line longer than buf
            std::string s = trim(line.substr(0, line.find('#')));
            line.clear();
            if (s.empty()) continue;
            size_t eq = s.find('=');
            if (eq == std::string::npos) die(2, path_ + ": not a 'key = value' line: " + s);
            kv_[trim(s.substr(0, eq))] = trim(s.substr(eq + 1));
        }
        fclose(f);
    }
    bool has(const std::string& key) const { return kv_.count(key) != 0; }
    const std::string& str(const std::string& key) const {
        auto it = kv_.find(key);
        if (it == kv_.end()) die(2, path_ + ": missing field '" + key + "'");
        return it->second;
    }
    std::string str(const std::string& key, const std::string& dflt) const {
        return has(key) ? str(key) : dflt;
    }
    long long integer(const std::string& key) const {
        const std::string& v = str(key);
        char* end;
        errno = 0;
        long long x = strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end || errno) die(2, path_ + ": field '" + key + "' is not an integer: " + v);
        return x;
    }
    long long integer(const std::string& key, long long dflt) const {
        return has(key) ? integer(key) : dflt;
    }
    double real(const std::string& key) const {
        const std::string& v = str(key);
        char* end;
        double x = strtod(v.c_str(), &end);
        if (v.empty() || *end) die(2, path_ + ": field '" + key + "' is not a number: " + v);
        return x;
    }

  private:
    std::string path_;
    std::map<std::string, std::string> kv_;
};

// Named results: "key = value" lines, arrays as "key = v0 v1 ...".
class Stats {
  public:
    explicit Stats(const std::string& path) : path_(path), f_(fopen(path.c_str(), "w")) {
        if (!f_) die(2, path + ": " + strerror(errno));
    }
    ~Stats() { if (f_) fclose(f_); }
    Stats(const Stats&) = delete;
    Stats& operator=(const Stats&) = delete;
    void put(const char* key, long long v) { fprintf(f_, "%s = %lld\n", key, v); }
    void put(const char* key, double v) { fprintf(f_, "%s = %.17g\n", key, v); }
    template <class T> void put(const char* key, const std::vector<T>& v) {
        fprintf(f_, "%s =", key);
        for (const T& x : v) fprintf(f_, " %lld", (long long)x);
        fprintf(f_, "\n");
    }

  private:
    std::string path_;
    FILE* f_;
};

// A table file read row by row: integers under a header line of column names.
class Table {
  public:
    explicit Table(const std::string& path) : path_(path), f_(fopen(path.c_str(), "r")) {
        if (!f_) die(2, path + ": " + strerror(errno));
        std::string s;
        while (s.empty() && getline(s)) s = trim(s);
        if (s.empty()) die(2, path_ + ": no header line");
        std::istringstream in(s);
        std::string name;
        while (in >> name) cols_.push_back(name);
    }
    ~Table() { if (f_) fclose(f_); }
    Table(const Table&) = delete;
    Table& operator=(const Table&) = delete;
    // Index of a named column in a row; a missing column ends the driver.
    size_t col(const std::string& name) const {
        for (size_t c = 0; c < cols_.size(); c++) if (cols_[c] == name) return c;
        die(2, path_ + ": missing column '" + name + "'");
    }
    // The next row into `row` (one value per column); false at the end.
    bool next(std::vector<long long>& row) {
        std::string s;
        do { if (!getline(s)) return false; s = trim(s); } while (s.empty());
        row.resize(cols_.size());
        const char* p = s.c_str();
        for (size_t c = 0; c < cols_.size(); c++) {
            char* end;
            row[c] = strtoll(p, &end, 10);
            if (end == p) die(2, path_ + ": short or bad row: " + s);
            p = end;
        }
        while (*p == ' ' || *p == '\t') p++;
        if (*p) die(2, path_ + ": long or bad row: " + s);
        return true;
    }

  private:
    bool getline(std::string& out) {
        out.clear();
        char buf[4096];
        while (fgets(buf, sizeof buf, f_)) {
            out += buf;
            if (out.back() == '\n') return true;
        }
        return !out.empty();
    }
    std::string path_;
    FILE* f_;
    std::vector<std::string> cols_;
};

// Waves of a window of cycles. The fields of run.txt: `waves` (a file name in the
// run's folder; without it, no waves), `waves_from` and `waves_to` (the first and
// last cycle written, both included; waves_to = -1: to the end). Make it before the
// model (tracing must be on when the model is built), attach() the model, then call
// dump() after the evaluation with the clock low and the cycle's inputs set, and after
// the rising edge's (tick() does both): it reads the clock, so cycle N is the N-th
// rising edge dumped (the reset before it is not shown; runs one after the other are
// numbered on), written at time 10 N (clock low) and 10 N + 5 (after the rising edge).
// The file is flushed and closed by close() or the destructor. A driver built without
// --trace given a `waves` field stops.
class Waves {
  public:
    Waves(const std::string& dir, const Fields& run) {
        if (!run.has("waves")) return;
        path_ = dir + "/" + run.str("waves");
        from_ = run.integer("waves_from", 0);
        to_ = run.integer("waves_to", -1);
#if VM_TRACE
        Verilated::traceEverOn(true);
#else
        die(2, "waves asked for, but this driver was built without tracing (--trace)");
#endif
    }
    ~Waves() { close(); }
    Waves(const Waves&) = delete;
    Waves& operator=(const Waves&) = delete;
    bool on() const { return !path_.empty(); }
#if VM_TRACE
    template <class T> void attach(T* top) {
        if (path_.empty()) return;
        vcd_ = new VerilatedVcdC;
        top->trace(vcd_, 99);
        vcd_->open(path_.c_str());
        if (!vcd_->isOpen()) die(2, path_ + ": cannot be written");
        clk_ = &top->clk;
    }
    void dump() {
        if (!vcd_) return;
        const bool high = *clk_ != 0;
        const long long c = cycle_;
        if (high) cycle_++;
        if (c < from_ || (to_ >= 0 && c > to_)) return;
        const uint64_t t = 10 * (uint64_t)c + (high ? 5 : 0);
        if (dumped_ && t <= last_) return;      // one sample per clock phase
        vcd_->dump(t);
        last_ = t;
        dumped_ = true;
    }
    template <class T> void tick(T* t) { low(t); high(t); }
    // The two halves of tick(), for a driver that reads the outputs of the cycle
    // between them (two evaluations per cycle, as a bare loop makes).
    template <class T> void low(T* t) { t->clk = 0; t->eval(); dump(); }
    template <class T> void high(T* t) { t->clk = 1; t->eval(); dump(); }
    void close() {
        if (!vcd_) return;
        vcd_->close();
        delete vcd_;
        vcd_ = nullptr;
    }
#else
    template <class T> void attach(T*) {}
    void dump() {}
    template <class T> void tick(T* t) { low(t); high(t); }
    template <class T> void low(T* t) { t->clk = 0; t->eval(); }
    template <class T> void high(T* t) { t->clk = 1; t->eval(); }
    void close() {}
#endif

  private:
    std::string path_;
    long long from_ = 0, to_ = -1, cycle_ = 0;
#if VM_TRACE
    VerilatedVcdC* vcd_ = nullptr;
    const uint8_t* clk_ = nullptr;
    uint64_t last_ = 0;
    bool dumped_ = false;
#endif
};

// A file of uint32 words (empty when optional and absent).
inline std::vector<uint32_t> read_words(const std::string& path, bool must = true) {
    std::vector<uint32_t> v;
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) {
        if (!must) return v;
        die(2, path + ": " + strerror(errno));
    }
    uint32_t buf[4096];
    size_t n;
    while ((n = fread(buf, 4, 4096, f)) > 0) v.insert(v.end(), buf, buf + n);
    fclose(f);
    return v;
}

inline void write_words(const std::string& path, const std::vector<uint32_t>& v) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) die(2, path + ": " + strerror(errno));
    if (fwrite(v.data(), 4, v.size(), f) != v.size()) die(2, path + ": short write");
    fclose(f);
}

// 32-bit lane l of a port, whatever C type Verilator gave it (an integer up to
// 64 bits, a VlWide word array above); lane pins put element i at lanes
// [i * WORDS, (i + 1) * WORDS).
inline uint32_t lget(const uint8_t& x, int) { return x; }
inline uint32_t lget(const uint16_t& x, int) { return x; }
inline uint32_t lget(const uint32_t& x, int) { return x; }
inline uint32_t lget(const uint64_t& x, int l) { return (uint32_t)(x >> (32 * l)); }
template <std::size_t N> inline uint32_t lget(const VlWide<N>& x, int l) { return x[l]; }
inline void lset(uint8_t& x, int, uint32_t v) { x = (uint8_t)v; }
inline void lset(uint16_t& x, int, uint32_t v) { x = (uint16_t)v; }
inline void lset(uint32_t& x, int, uint32_t v) { x = v; }
inline void lset(uint64_t& x, int l, uint32_t v) {
    x = (x & ~(0xffffffffULL << (32 * l))) | ((uint64_t)v << (32 * l));
}
template <std::size_t N> inline void lset(VlWide<N>& x, int l, uint32_t v) { x[l] = v; }
// Up to 64 bits from `words` lanes starting at lane l.
template <class T> inline uint64_t lget64(const T& x, int l, int words) {
    return words > 1 ? (uint64_t)lget(x, l) | ((uint64_t)lget(x, l + 1) << 32) : lget(x, l);
}

// Bit fields of a packed word array (bit b is bit b % 32 of word b / 32), up to 64 bits:
// the request and response payloads the membench and NoC drivers pack by hand.
inline void setbits(uint32_t* w, int off, int width, uint64_t v) {
    for (int i = 0; i < width; i++) {
        int b = off + i;
        if ((v >> i) & 1) w[b / 32] |= (1u << (b % 32)); else w[b / 32] &= ~(1u << (b % 32));
    }
}
inline uint64_t getbits(const uint32_t* w, int off, int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; i++) { int b = off + i; v |= (uint64_t)((w[b / 32] >> (b % 32)) & 1) << i; }
    return v;
}

// Reset: rst high through `edges` rising clock edges, the clock left low.
template <class T> inline void reset(T* t, int edges) {
    t->rst = 1;
    t->clk = 0;
    t->eval();
    for (int i = 0; i < edges; i++) {
        t->clk = 1; t->eval();
        t->clk = 0; t->eval();
    }
    t->rst = 0;
}

// One clock cycle ending on its rising edge (inputs set before are sampled).
template <class T> inline void tick(T* t) {
    t->clk = 0; t->eval();
    t->clk = 1; t->eval();
}

}  // namespace pf
