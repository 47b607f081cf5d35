"""Small expression helpers whose Verilog passes ``verilator --lint-only`` cleanly.

Yosys shrinks constant operands to their minimal width, so ``x == 3`` or
``x < 50`` come out as ``x == 2'h3`` and trip Verilator's WIDTH warnings.
These helpers compare with constants through XOR/reduction and carry bits of
full-width additions instead, and build counts from equally wide operands.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Value

__all__ = ["dec", "eq_k", "ge_k", "gt_k", "lt_k", "pad", "popcount"]


def eq_k(x: Value, k: int) -> Value:
    """``x == k`` for a constant *k*."""
    x = Value.cast(x)
    n = len(x)
    if k < 0 or k >= 1 << n:
        return Const(0, 1)
    return ~(x ^ Const(k, n)).any()


def ge_k(x: Value, k: int) -> Value:
    """``x >= k`` (unsigned) for a constant *k*."""
    x = Value.cast(x)
    n = len(x)
    if k <= 0:
        return Const(1, 1)
    if k >= 1 << n:
        return Const(0, 1)
    if n == 1:
        return x[0]
    half = 1 << (n - 1)
    if k <= half:
        # x + (2^n - k) carries out iff x >= k; the constant has its top bit set,
        # so it keeps its full width n.
        return (x + Const((1 << n) - k, n))[n]
    return x[n - 1] & ge_k(x[:n - 1], k - half)


def lt_k(x: Value, k: int) -> Value:
    return ~ge_k(x, k)


def gt_k(x: Value, k: int) -> Value:
    return ge_k(x, k + 1)


def dec(x: Value) -> Value:
    """``x - 1`` modulo ``2**len(x)`` (adds all ones, which keeps its width)."""
    x = Value.cast(x)
    n = len(x)
    return (x + Const((1 << n) - 1, n))[:n]


def pad(x: Value, width: int) -> Value:
    x = Value.cast(x)
    return Cat(x, Const(0, width - len(x))) if width > len(x) else x[:width]


def popcount(bits: list, width: int) -> Value:
    """Number of set bits, as *width* bits. The first two bits go through a half
    adder, then each step adds one bit to the running sum (a wide + 1-bit add)."""
    bits = [Value.cast(b) for b in bits]
    if not bits:
        return Const(0, width)
    if len(bits) == 1:
        return pad(bits[0], width)
    acc = Cat(bits[0] ^ bits[1], bits[0] & bits[1])
    for b in bits[2:]:
        acc = acc + b
        if len(acc) > width:
            acc = acc[:width]
    return pad(acc, width)


def mux_k(sel: Value, options: list) -> Value:
    """``options[sel]`` for a constant list, as a chain of :func:`eq_k` muxes."""
    out = options[-1]
    for i in reversed(range(len(options) - 1)):
        out = Mux(eq_k(sel, i), options[i], out)
    return out
