"""Building blocks shared by the binary32 units: unpack, leading-zero count,
sticky shifts, round-to-nearest-even packing and pipeline registers.

These are plain functions that add their logic to a
:class:`~amaranth.hdl.Module` and return the result signals, so that the
adder and the multiplier reuse exactly the same rounding and special-value
logic.

Every arithmetic operator and comparison here and in the units has operands
of equal width (the result at most one bit wider), and constants keep their
top bit set: Amaranth's Verilog backend drops constant zero extensions, and
``verilator --lint-only`` rejects the resulting width mismatches.

Conventions of the binary32 datapath
------------------------------------
* An operand is unpacked into its sign, its *effective* biased exponent
  (``max(exponent field, 1)``, so that subnormals share the scale of the
  smallest normal) and its 24-bit significand with the hidden bit made
  explicit (0 for subnormals and zeros).
* A finite result reaches :func:`round_pack` as a normalized significand
  window whose most significant bit is the hidden bit, the biased exponent
  that window stands for, and a sticky flag. If the hidden bit is 0 the value
  is subnormal and its exponent is the subnormal scale (biased 1), which is
  what makes a subnormal that rounds up to ``2**-126`` come out right.
* Every invalid operation returns the canonical quiet NaN ``0x7FC00000``
  (:data:`QNAN`), whatever the NaN payloads of the inputs.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value

from ..params import check_int

__all__ = [
    "BIAS",
    "INF",
    "QNAN",
    "Pipeline",
    "Unpacked",
    "check_latency",
    "lzc",
    "round_pack",
    "shift_left",
    "shift_right_sticky",
    "unpack",
    "zext",
]

#: The canonical quiet NaN every invalid operation (or NaN input) returns.
QNAN = 0x7FC00000
#: Bit pattern of +infinity; OR with ``1 << 31`` for -infinity.
INF = 0x7F800000

#: Exponent bias of binary32.
BIAS = 127
FRAC_BITS = 23
EXP_MAX = 0xFF


class Unpacked:
    """Fields and classification of one binary32 operand.

    Attributes
    ----------
    sign : Value
        Sign bit.
    exp : Signal(8)
        Effective biased exponent: the exponent field, or 1 for subnormals
        and zeros (their scale is ``2**-126``).
    sig : Signal(24)
        Significand with the hidden bit explicit.
    is_zero, is_inf, is_nan : Signal(1)
        Classification; ``is_nan`` covers quiet and signalling NaNs.
    magnitude : Value
        The 31 bits below the sign: comparing them compares magnitudes.
    """

    def __init__(self, m: Module, bits: Value, name: str):
        bits = Value.cast(bits)
        field = bits[FRAC_BITS:31]
        frac = bits[:FRAC_BITS]
        # Named signals so that each classification is built once and shared.
        normal = Signal(name=f"{name}_normal")
        frac_nz = Signal(name=f"{name}_frac_nz")
        field_max = Signal(name=f"{name}_field_max")
        m.d.comb += [normal.eq(field.any()), frac_nz.eq(frac.any()), field_max.eq(field.all())]
        self.sign = bits[31]
        self.magnitude = bits[:31]
        self.exp = Signal(8, name=f"{name}_exp")
        self.sig = Signal(24, name=f"{name}_sig")
        self.is_zero = Signal(name=f"{name}_is_zero")
        self.is_inf = Signal(name=f"{name}_is_inf")
        self.is_nan = Signal(name=f"{name}_is_nan")
        m.d.comb += [
            self.exp.eq(Mux(normal, field, Const(1, 8))),
            self.sig.eq(Cat(frac, normal)),
            self.is_zero.eq(~(normal | frac_nz)),
            self.is_inf.eq(field_max & ~frac_nz),
            self.is_nan.eq(field_max & frac_nz),
        ]


def unpack(m: Module, bits: Value, name: str) -> Unpacked:
    """Unpack a 32-bit binary32 pattern; see :class:`Unpacked`."""
    return Unpacked(m, bits, name)


def zext(value: Value, width: int) -> Value:
    """*value* zero-extended to *width* bits (for bitwise operators and
    muxes, where the extension stays explicit in the generated Verilog)."""
    value = Value.cast(value)
    assert len(value) <= width
    return Cat(value, Const(0, width - len(value))) if len(value) < width else value


def _wire(m: Module, value: Value, name: str) -> Signal:
    # Intermediate results are named signals: an expression used twice would
    # otherwise be copied into the netlist once per use (and the copies of a
    # shifter's stages grow exponentially).
    value = Value.cast(value)
    sig = Signal(len(value), name=name)
    m.d.comb += sig.eq(value)
    return sig


def lzc(m: Module, value: Value, name: str) -> Signal:
    """Leading-zero count of *value* as a balanced tree of small muxes.

    The result has ``width.bit_length()`` bits and equals the width for
    zero. A priority chain would put all ``width`` comparisons in series; the
    tree keeps the depth at ``log2(width)`` 2:1 muxes.
    """
    value = Value.cast(value)
    width = len(value)
    size = 2
    while size < width:
        size *= 2
    # Pad at the bottom with ones so that the count saturates at *width*.
    padded = Cat(Const(-1, size - width), value) if size > width else value
    # Level 0: pairs of bits -> (all zero, count within the pair).
    nodes = [(~(padded[i] | padded[i + 1]), ~padded[i + 1]) for i in range(0, size, 2)]
    level = 0
    while len(nodes) > 1:
        level += 1
        merged = []
        for j in range(0, len(nodes), 2):
            (lo_zero, lo_count), (hi_zero, hi_count) = nodes[j], nodes[j + 1]
            hz = _wire(m, hi_zero, f"{name}_z{level}_{j // 2}h")
            merged.append((
                _wire(m, hz & lo_zero, f"{name}_z{level}_{j // 2}"),
                _wire(m, Mux(hz, Cat(lo_count, Const(1, 1)), Cat(hi_count, Const(0, 1))),
                      f"{name}_n{level}_{j // 2}")))
        nodes = merged
    zero, n = nodes[0]
    out_bits = width.bit_length()
    if size == width:
        return _wire(m, Mux(zero, Const(width, out_bits), zext(n, out_bits)), name)
    return _wire(m, zext(n, out_bits), name)


def shift_left(m: Module, value: Value, amount: Value, name: str) -> Signal:
    """*value* shifted left by *amount*, same width, as a logarithmic barrel
    shifter (a variable ``<<`` would widen the result to ``2**len(amount)``
    extra bits)."""
    value = Value.cast(value)
    amount = Value.cast(amount)
    width = len(value)
    for k in range(len(amount)):
        step = 1 << k
        shifted = Cat(Const(0, step), value)[:width] if step < width else Const(0, width)
        value = _wire(m, Mux(amount[k], shifted, value), f"{name}_{k}")
    return value


def shift_right_sticky(m: Module, value: Value, amount: Value,
                       name: str) -> tuple[Signal, Signal]:
    """Shift *value* right by *amount*, returning the shifted value (same
    width) and the OR of every bit shifted out (the sticky bit).

    A logarithmic shifter; each stage ORs the bits it drops into the sticky
    flag, so amounts beyond the width move everything into it.
    """
    value = Value.cast(value)
    amount = Value.cast(amount)
    width = len(value)
    sticky = None
    for k in range(len(amount)):
        step = 1 << k
        if step < width:
            shifted, dropped = Cat(value[step:], Const(0, step)), value[:step].any()
        else:
            shifted, dropped = Const(0, width), value.any()
        lost = amount[k] & dropped
        sticky = _wire(m, lost if sticky is None else sticky | lost, f"{name}_st{k}")
        value = _wire(m, Mux(amount[k], shifted, value), f"{name}_{k}")
    return value, sticky


def round_pack(m: Module, *, sign: Value, exp: Value, sig: Value, guard: Value,
               sticky: Value, is_zero: Value, zero_sign: Value, is_inf: Value,
               inf_sign: Value, is_nan: Value) -> Value:
    """Round a normalized finite result to nearest-even and pack it, or
    select a special result; returns the 32-bit pattern (an expression).

    Parameters
    ----------
    sign : Value
        Sign of a nonzero finite result.
    exp : Value
        Unsigned biased exponent (at least 9 bits) of the window: the window is
        ``sig * 2**(exp - 127 - 23)``. Exponents of 255 and above overflow to
        infinity (round-to-nearest never rounds an overflow to the largest
        finite number).
    sig : Value
        24-bit window, hidden bit at the top; if the hidden bit is 0 the
        result is subnormal and *exp* must be 1.
    guard, sticky : Value
        First bit below the window, and the OR of all bits below that.
    is_zero, zero_sign : Value
        The exact result is zero, with that sign.
    is_inf, inf_sign : Value
        The result is an infinity from an infinite operand.
    is_nan : Value
        The result is NaN (the canonical :data:`QNAN`).
    """
    sig = Value.cast(sig)
    assert len(sig) == 24
    round_up = guard & (sticky | sig[0])
    # Exponent field 0 for subnormals; the biased exponent is 1 there, so
    # packing field and fraction side by side and adding the rounding
    # increment carries a subnormal into the smallest normal, and the
    # largest significand into the next binade (or into infinity at 254).
    exp = Value.cast(exp)
    field = Mux(sig[23], exp[:8], Const(0, 8))
    packed = Signal(31)
    m.d.comb += packed.eq((Cat(sig[:FRAC_BITS], field) + round_up)[:31])
    # exp >= 255, as bit tests (the exponent is wider than 8 bits).
    overflow = exp[8:].any() | exp[:8].all()
    result = Signal(32)
    with m.If(is_nan):
        m.d.comb += result.eq(QNAN)
    with m.Elif(is_inf):
        m.d.comb += result.eq(Cat(Const(INF, 31), inf_sign))
    with m.Elif(is_zero):
        m.d.comb += result.eq(Cat(Const(0, 31), zero_sign))
    with m.Elif(overflow):
        m.d.comb += result.eq(Cat(Const(INF, 31), sign))
    with m.Else():
        m.d.comb += result.eq(Cat(packed, sign))
    return result


def check_latency(latency: int) -> None:
    """Validate a unit's latency: "latency must be an integer between 1 and 8, not 9"."""
    check_int("latency", latency, 1, 8)


class Pipeline:
    """Places the register stages of a unit with three natural stages.

    A datapath of three combinational sections ``S1 | S2 | S3`` gets
    *latency* registers: latency 1 registers only the output (all three
    sections in one cycle), latency 2 adds a register between ``S1`` and
    ``S2`` (``S2`` and ``S3`` share a cycle), latency 3 registers after every
    section, and every further cycle of latency is one more register stage
    on the output. ``out_valid`` is ``in_valid`` through a chain of the same
    length, so results leave in order exactly *latency* cycles after their
    operands.

    Parameters
    ----------
    m : Module
        Module the registers are added to (``sync`` domain).
    latency : int
        Total register stages, 1..8.
    """

    def __init__(self, m: Module, latency: int):
        check_latency(latency)
        self.m = m
        self.latency = latency
        # Which of the two internal boundaries (after S1, after S2) are registered.
        self.cuts = (latency >= 2, latency >= 3)
        self.output_stages = latency - sum(self.cuts)

    def _register(self, values: dict, tag: str) -> dict:
        out = {}
        for name, v in values.items():
            v = Value.cast(v)
            # Data registers need no reset: out_valid qualifies them.
            r = Signal(v.shape(), name=f"{tag}_{name}", reset_less=True)
            self.m.d.sync += r.eq(v)
            out[name] = r
        return out

    def cut(self, index: int, values: dict) -> dict:
        """Boundary *index* (0: after S1, 1: after S2): registered or wired."""
        return self._register(values, f"s{index + 1}") if self.cuts[index] else dict(values)

    def output(self, value: Value, out: Value) -> None:
        """Drive *out* from *value* through the output register stages."""
        for i in range(self.output_stages):
            (value,) = self._register({"result": value}, f"out{i}").values()
        self.m.d.comb += out.eq(value)

    def valid(self, in_valid: Value, out_valid: Value) -> None:
        """``out_valid`` is ``in_valid`` delayed by the latency (reset to 0)."""
        v = in_valid
        for i in range(self.latency):
            r = Signal(name=f"valid_{i + 1}")
            self.m.d.sync += r.eq(v)
            v = r
        self.m.d.comb += out_valid.eq(v)
