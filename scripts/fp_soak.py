#!/usr/bin/env python3
"""Soak test of the binary32 adder/multiplier: millions of vectors in a
native Verilator loop, checked against the host CPU's IEEE arithmetic.

The C++ driver owns the clock, draws operands from a seeded xorshift
generator (uniform bit patterns plus the same targeted exponent mixes as
:func:`pimforge.verif.models.fp32.random_pairs`: cancellation, subnormal
results, overflow), inserts random idle cycles, and checks every result bit
for bit against ``float`` arithmetic on the host (x86-64 SSE, round to
nearest even, subnormals kept; NaNs compared as the canonical quiet NaN) and
its arrival exactly *latency* cycles after issue. The host reference itself
is spot-checked first against the integer-only reference of
:mod:`pimforge.verif.models.fp32` through numpy.

Example::

    .venv/bin/python scripts/fp_soak.py --block fp32_mul --vectors 20000000 --seed 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time

from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate
from pimforge.sim.build import build_verilated

MAIN = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include "verilated.h"
#include "V@TOP@.h"

static uint64_t s;
static inline uint64_t rnd() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
static inline uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float flt(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void operands(uint32_t &a, uint32_t &b) {
    int kind = rnd() % 4;
    uint32_t x = (uint32_t)rnd(), y = (uint32_t)rnd();
    if (kind == 0) { a = x; b = y; return; }
#if IS_ADD
    if (kind == 1) {            // nearby exponents: alignment and cancellation
        int ex = clampi((x >> 23) & 0xFF, 0, 0xFE);
        int ey = clampi(ex + (int)(rnd() % 7) - 3, 0, 0xFE);
        x = (x & 0x807FFFFFu) | ((uint32_t)ex << 23);
        y = (y & 0x807FFFFFu) | ((uint32_t)ey << 23);
        if (rnd() % 10 < 3) y = (y & ~0xFFFFu) | ((x & 0xFFFFu) ^ (uint32_t)(rnd() % 16));
    } else if (kind == 2) {     // tiny operands: subnormal sums
        x = (x & 0x80000000u) | (uint32_t)(rnd() % 0x01800000u);
        y = (y & 0x80000000u) | (uint32_t)(rnd() % 0x01800000u);
    } else {                    // exact and near negation
        y = (x ^ 0x80000000u) ^ ((rnd() & 1) ? (uint32_t)(rnd() % 4) : 0u);
    }
#else
    int target = kind == 1 ? 95 + (int)(rnd() % 36)      // subnormal / underflowing products
               : kind == 2 ? 375 + (int)(rnd() % 11)     // near overflow
               : 200 + (int)(rnd() % 111);               // ordinary
    int lo = target - 0xFE > 0 ? target - 0xFE : 0, hi = target < 0xFE ? target : 0xFE;
    int ex = lo + (int)(rnd() % (uint64_t)(hi - lo + 1)), ey = target - ex;
    x = (x & 0x807FFFFFu) | ((uint32_t)ex << 23);
    y = (y & 0x807FFFFFu) | ((uint32_t)ey << 23);
#endif
    a = x; b = y;
}

static inline uint32_t golden(uint32_t a, uint32_t b) {
#if IS_ADD
    float r = flt(a) + flt(b);
#else
    float r = flt(a) * flt(b);
#endif
    return r != r ? 0x7FC00000u : bits(r);
}

int main(int argc, char **argv) {
    long long n = atoll(argv[1]);
    s = strtoull(argv[2], nullptr, 10) * 0x9E3779B97F4A7C15ull + 1;
    const int L = @LAT@;
    VerilatedContext ctx;
    V@TOP@ top(&ctx);
    top.clk = 0; top.rst = 1; top.in_valid = 0; top.eval();
    for (int i = 0; i < 3; i++) { top.clk = 1; top.eval(); top.clk = 0; top.eval(); }
    top.rst = 0;
    // Ring of operations in flight: operands and issue cycle.
    const int R = 64;
    uint32_t qa[R], qb[R]; long long qc[R]; int head = 0, tail = 0;
    long long issued = 0, checked = 0, bad = 0, late = 0, cyc = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (checked < n) {
        if (issued < n && rnd() % 8 != 0) {
            uint32_t a, b; operands(a, b);
            top.a = a; top.b = b; top.in_valid = 1;
            qa[tail] = a; qb[tail] = b; qc[tail] = cyc; tail = (tail + 1) % R; issued++;
        } else {
            top.in_valid = 0; top.a = (uint32_t)rnd(); top.b = (uint32_t)rnd();
        }
        top.clk = 1; top.eval();
        if (top.out_valid) {
            if (head == tail) {
                printf("out_valid with nothing in flight at cycle %lld\n", cyc);
                return 2;
            }
            uint32_t a = qa[head], b = qb[head], want = golden(a, b), got = top.result;
            if (cyc - qc[head] != L - 1) late++;
            if (got != want && bad++ < 10)
                printf("%s(0x%08x, 0x%08x) = 0x%08x, expected 0x%08x\n", IS_ADD ? "add" : "mul",
                       a, b, got, want);
            head = (head + 1) % R; checked++;
        }
        top.clk = 0; top.eval();
        cyc++;
        if (cyc > 2 * n + 1000) { printf("results stopped at %lld\n", checked); return 2; }
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("{\"vectors\": %lld, \"mismatches\": %lld, \"late\": %lld, \"cycles\": %lld, "
           "\"seconds\": %.3f}\n", checked, bad, late, cyc, sec);
    return bad || late ? 1 : 0;
}
"""


def _check_host_reference(op: str) -> None:
    """The host float arithmetic the driver trusts must agree with the exact
    integer reference (it would not under flush-to-zero)."""
    import random

    import numpy as np

    from pimforge.verif.models import fp32

    gold, ref = (fp32.fp32_add, fp32.ref_add) if op == "add" else (fp32.fp32_mul, fp32.ref_mul)
    a, b = fp32.random_pairs(random.Random(1), 3000, op)
    ca, cb = fp32.corner_pairs()
    a, b = np.concatenate([a, ca]), np.concatenate([b, cb])
    bad = [(x, y) for x, y, g in zip(a.tolist(), b.tolist(), gold(a, b).tolist(), strict=True)
           if ref(x, y) != g]
    if bad:
        sys.exit(f"host {op} disagrees with the exact reference on {len(bad)} pairs")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block", choices=["fp32_add", "fp32_mul"], default="fp32_add")
    p.add_argument("--latency", type=int, default=None, help="default: the preset's")
    p.add_argument("--vectors", type=int, default=5_000_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", default="default")
    args = p.parse_args(argv)

    op = args.block.split("_")[1]
    _check_host_reference(op)
    cfg = load_config(args.config)
    if args.latency is not None:
        fld = f"{op}_latency"
        cfg = dataclasses.replace(cfg, fp=dataclasses.replace(cfg.fp, **{fld: args.latency}))
    el = elaborate(args.block, cfg)
    latency = el.manifest["latencies"]["result"]
    main_cpp = (MAIN.replace("@TOP@", args.block).replace("@LAT@", str(latency))
                .replace("IS_ADD", "1" if op == "add" else "0"))
    t = time.monotonic()
    exe = build_verilated(el.verilog, args.block, {"main.cpp": main_cpp},
                          name=f"{args.block}-soak")
    build_s = time.monotonic() - t
    res = subprocess.run([str(exe), str(args.vectors), str(args.seed)], capture_output=True,
                         text=True, check=False)
    print(res.stdout, end="")
    if res.returncode not in (0, 1):
        print(res.stderr, file=sys.stderr)
        return res.returncode
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    summary.update(block=args.block, latency=latency, seed=args.seed,
                   build_s=round(build_s, 1))
    print(json.dumps(summary))
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
