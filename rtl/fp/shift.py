"""FP32 shifter: exponent add/subtract, logical shifts, float-to-fixed and the seed bit tricks.

The shifter is the third unit of the PIM-CapsNet PE (Sec. 5.2.2, Fig. 11):
everything in the special-function flows that is a bit manipulation of an
FP32 pattern rather than an addition or a multiplication happens here.
"""


from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from .ieee import lzc, shift_left, shift_right_sticky, zext

__all__ = ["ShiftOp", "FP32Shift", "from_config", "K_WIDTH", "CANONICAL_NAN", "POS_INF"]

#: Width of the signed shift amount ``k`` (-512..511 covers every exponent move
#: between the smallest subnormal and the largest finite binary32 value).
K_WIDTH = 10
CANONICAL_NAN = 0x7FC00000
POS_INF = 0x7F800000


class ShiftOp(enum.Enum, shape=3):
    """Operations of :class:`FP32Shift` (``a`` is a binary32 bit pattern, ``k`` signed).

    LDEXP
        ``a * 2**k`` rounded to nearest even: exact while the result is normal,
        overflow to a signed infinity, underflow into subnormals (RNE) or a signed
        zero. Zeros and infinities pass through, any NaN becomes 0x7FC00000.
        Bit-exact to ``float32(float64(a) * 2.0**k)``.
    SRL
        Logical shift right of the 32-bit pattern by ``k`` (``k < 0`` shifts
        left by ``-k``); amounts of 32 or more give 0.
    SLL
        Logical shift left by ``k`` (``k < 0`` shifts right); 32 or more give 0.
    FIX
        Float-to-fixed for the exponential flow (Fig. 12): the integer
        ``trunc(a * 2**k)`` (truncation toward zero: the low bits are chunked, as
        in the paper), saturated to the binary32 pattern range: ``a <= 0`` (and
        -0, -inf) gives 0, results at or above 0x7F800000 (and +inf) give
        0x7F800000, NaN gives 0x7FC00000. With ``k = 23`` and ``a = y'`` in
        ``[0, 255)`` the result read as an FP32 is ``2**floor(y'-127) * (1 + frac(y'))``.
    ISQRT_SEED
        ``isqrt_magic - (a >> 1)`` modulo 2**32 (the inverse-square-root seed).
    RECIP_SEED
        ``recip_magic - a`` modulo 2**32 (the reciprocal seed; it keeps the sign).
    """

    LDEXP = 0
    SRL = 1
    SLL = 2
    FIX = 3
    ISQRT_SEED = 4
    RECIP_SEED = 5


_W = 14   # two's-complement width of the exponent arithmetic (|values| < 2**12)


def _sext(value, width: int) -> Value:
    """*value* (signed) sign-extended to *width* bits, as an unsigned bit vector."""
    value = Value.cast(value)
    return Cat(value, value[-1].replicate(width - len(value)))


def _add(m: Module, x, y, name: str, *, carry_in=0) -> Signal:
    """``(x + y + carry_in) mod 2**w`` of two *w*-bit vectors as an explicit ripple adder.

    The shifter's few adders are written as gates so that the generated Verilog
    has no arithmetic operator whose operands a synthesis pass could narrow below
    the operator's width (Verilator's WIDTH lint); their timing is not critical.
    """
    x, y = Value.cast(x), Value.cast(y)
    assert len(x) == len(y), (len(x), len(y))
    c = Value.cast(carry_in)
    bits = []
    for i in range(len(x)):
        p = x[i] ^ y[i]
        bits.append(p ^ c)
        cw = Signal(name=f"{name}_c{i}")
        m.d.comb += cw.eq((x[i] & y[i]) | (p & c))
        c = cw
    out = Signal(len(x), name=name)
    m.d.comb += out.eq(Cat(*bits))
    return out


def _sub(m: Module, x, y, name: str) -> Signal:
    """``(x - y) mod 2**w`` as ``x + ~y + 1``."""
    return _add(m, x, ~Value.cast(y), name, carry_in=1)


def _neg(m: Module, x: Value, c: int, name: str) -> Value:
    """``x - c < 0`` for a _W-bit two's-complement *x* (no overflow in range)."""
    return _add(m, x, Const(-c % (1 << _W), _W), name)[-1]


def _match(value: Value, const: int) -> Value:
    """``value == const`` as an AND of bit tests (no constant-width mismatch)."""
    value = Value.cast(value)
    return Cat(*(value[i] if (const >> i) & 1 else ~value[i]
                 for i in range(len(value)))).all()


class FP32Shift(wiring.Component):
    """Pipelined FP32 shifter, one operation per cycle.

    Parameters
    ----------
    latency : int
        Register stages from ``in_valid`` to ``out_valid`` (at least 1).
    isqrt_magic, recip_magic : int
        32-bit constants of the ISQRT_SEED and RECIP_SEED operations, derived in
        :mod:`pimforge.verif.models.pe_constants`.

    Attributes
    ----------
    a : In(32)
        Operand bit pattern.
    k : In(signed(K_WIDTH))
        Signed shift or exponent amount.
    op : In(ShiftOp)
        Operation, see :class:`ShiftOp`.
    in_valid : In(1)
    result : Out(32)
        Result ``latency`` cycles after the operands.
    out_valid : Out(1)
    latency : int
    latencies : dict
        ``{"result": latency}`` for the manifest.
    """

    a: In(32)
    k: In(signed(K_WIDTH))
    op: In(ShiftOp)
    in_valid: In(1)
    result: Out(32)
    out_valid: Out(1)

    def __init__(self, *, latency: int = 1, isqrt_magic: int, recip_magic: int):
        if not isinstance(latency, int) or isinstance(latency, bool) or not 1 <= latency <= 8:
            self._MustUse__silence = True  # never elaborated: no warning
            raise ValueError(f"latency must be an integer between 1 and 8, not {latency!r}")
        for name, v in (("isqrt_magic", isqrt_magic), ("recip_magic", recip_magic)):
            if not isinstance(v, int) or not 0 <= v < 2**32:
                self._MustUse__silence = True
                raise ValueError(f"{name} must be a 32-bit unsigned integer, not {v!r}")
        self.latency = latency
        self.latencies = {"result": latency}
        self.isqrt_magic = isqrt_magic
        self.recip_magic = recip_magic
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        a, k = self.a, self.k
        sign = a[31]
        exp = a[23:31]
        man = a[0:23]
        exp_zero = ~exp.any()
        is_zero = exp_zero & ~man.any()
        is_sub = exp_zero & man.any()
        is_special = exp.all()
        is_nan = is_special & man.any()

        # Normalized significand (hidden bit at 23): sig * 2**(eff_e - 150) == |a|;
        # a subnormal 0.m * 2**-126 becomes (m << lz) * 2**(1 - lz - 150).
        raw = Signal(24)
        m.d.comb += raw.eq(Cat(man, ~exp_zero))
        lz = lzc(m, raw, "lz")                       # 5 bits, 24 for zero
        sig = shift_left(m, raw, lz, "norm")
        eff_e = Signal(_W)                           # two's complement
        m.d.comb += eff_e.eq(Mux(is_sub, _sub(m, Const(1, _W), zext(lz, _W), "sub_e"),
                                 zext(exp, _W)))
        kx = Signal(_W)
        m.d.comb += kx.eq(_sext(k, _W))

        # ---- LDEXP -----------------------------------------------------------
        new_e = Signal(_W)
        m.d.comb += new_e.eq(_add(m, eff_e, kx, "ld_e"))
        overflow = ~_neg(m, new_e, 255, "ld_ovf")
        normal = ~_neg(m, new_e, 1, "ld_norm")
        # Underflow: shift the significand right by 1 - new_e with RNE; more than
        # 25 leaves nothing (sig < 2**24: below half of the smallest subnormal).
        far = _neg(m, new_e, -24, "ld_far")
        sh = Signal(5)
        m.d.comb += sh.eq(Mux(far, Const(26, 5), _sub(m, Const(1, _W), new_e, "ld_sh")[:5]))
        q_ext, sticky = shift_right_sticky(m, Cat(Const(0, 1), sig), sh, "ld_sub")
        q, rnd = q_ext[1:25], q_ext[0]
        sub_bits = Signal(24)
        m.d.comb += sub_bits.eq(_add(m, q, Const(0, 24), "ld_rnd", carry_in=rnd & (sticky | q[0])))
        ldexp = Signal(32)
        with m.If(is_nan):
            m.d.comb += ldexp.eq(CANONICAL_NAN)
        with m.Elif(is_special | is_zero):
            m.d.comb += ldexp.eq(a)
        with m.Elif(overflow):
            m.d.comb += ldexp.eq(Cat(Const(POS_INF, 31), sign))
        with m.Elif(normal):
            m.d.comb += ldexp.eq(Cat(sig[0:23], new_e[0:8], sign))
        with m.Else():
            # a carry out of the subnormal range lands on exponent field 1: still right
            m.d.comb += ldexp.eq(Cat(sub_bits, Const(0, 7), sign))

        # ---- SRL / SLL -------------------------------------------------------
        k_neg = k[-1]
        mag = Signal(K_WIDTH + 1)
        kw = _sext(k, K_WIDTH + 1)
        m.d.comb += mag.eq(Mux(k_neg, _sub(m, Const(0, K_WIDTH + 1), kw, "mag"), kw))
        big = mag[5:].any()
        srl_r = Mux(big, Const(0, 32), shift_right_sticky(m, a, mag[0:5], "srl")[0])
        sll_r = Mux(big, Const(0, 32), shift_left(m, a, mag[0:5], "sll"))
        right = Signal(32)
        left = Signal(32)
        m.d.comb += [right.eq(Mux(k_neg, sll_r, srl_r)), left.eq(Mux(k_neg, srl_r, sll_r))]

        # ---- FIX: trunc(sig * 2**(eff_e - 150 + k)), saturated ----------------
        fsh = Signal(_W)
        m.d.comb += fsh.eq(_add(m, new_e, Const(-150 % (1 << _W), _W), "fix_e"))
        too_big = ~_neg(m, fsh, 8, "fix_big")
        left_sh = ~fsh[-1]
        too_small = _neg(m, fsh, -24, "fix_small")
        fix_l = shift_left(m, zext(sig, 32), fsh[0:3], "fix_l")      # 0 <= fsh <= 7 only
        sat = _add(m, zext(fix_l, 33), Const(-POS_INF % (1 << 33), 33), "fix_sat")
        fix_l_sat = ~sat[32]                                          # fix_l >= 0x7F800000
        nfsh = Signal(_W)
        m.d.comb += nfsh.eq(_sub(m, Const(0, _W), fsh, "fix_n"))
        fix_r = shift_right_sticky(m, sig, Mux(too_small, Const(24, 5), nfsh[:5]), "fix_r")[0]
        fix = Signal(32)
        with m.If(is_nan):
            m.d.comb += fix.eq(CANONICAL_NAN)
        with m.Elif(sign | is_zero):
            m.d.comb += fix.eq(0)
        with m.Elif(is_special | too_big):
            m.d.comb += fix.eq(POS_INF)
        with m.Elif(left_sh):
            m.d.comb += fix.eq(Mux(fix_l_sat, Const(POS_INF, 32), fix_l))
        with m.Else():
            m.d.comb += fix.eq(zext(fix_r, 32))

        # ---- seeds: magic - (a >> 1), magic - a (mod 2**32) ----------------------
        isqrt_r = _sub(m, Const(self.isqrt_magic, 32), Cat(a[1:32], Const(0, 1)), "isqrt")
        recip_r = _sub(m, Const(self.recip_magic, 32), a, "recip")

        res = Signal(32)
        with m.If(_match(self.op, ShiftOp.LDEXP.value)):
            m.d.comb += res.eq(ldexp)
        with m.Elif(_match(self.op, ShiftOp.SRL.value)):
            m.d.comb += res.eq(right)
        with m.Elif(_match(self.op, ShiftOp.SLL.value)):
            m.d.comb += res.eq(left)
        with m.Elif(_match(self.op, ShiftOp.FIX.value)):
            m.d.comb += res.eq(fix)
        with m.Elif(_match(self.op, ShiftOp.ISQRT_SEED.value)):
            m.d.comb += res.eq(isqrt_r)
        with m.Elif(_match(self.op, ShiftOp.RECIP_SEED.value)):
            m.d.comb += res.eq(recip_r)
        with m.Else():
            m.d.comb += res.eq(0)

        # Pipeline: the result is registered `latency` times, valid alongside.
        data, valid = res, self.in_valid
        for i in range(self.latency):
            d = Signal(32, name=f"res_q{i}")
            v = Signal(1, name=f"valid_q{i}")
            m.d.sync += [d.eq(data), v.eq(valid)]
            data, valid = d, v
        m.d.comb += [self.result.eq(data), self.out_valid.eq(valid)]
        return m


def from_config(cfg) -> FP32Shift:
    """The shifter with the PE's magic constants for *cfg* (``cfg.pe.newton_steps``)."""
    from ...verif.models.pe_constants import pe_constants

    c = pe_constants(cfg)
    return FP32Shift(latency=c.shift_latency, isqrt_magic=c.isqrt_magic,
                     recip_magic=c.recip_magic)
