"""FP32 shifter: exponent add/subtract, logical shifts, float-to-fixed and the seed bit tricks.

The shifter is the third unit of the PIM-CapsNet PE (Sec. 5.2.2, Fig. 11):
everything in the special-function flows that is a bit manipulation of an
FP32 pattern rather than an addition or a multiplication happens here.
"""


from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from ..params import check, check_int
from .ieee import lzc, shift_left, shift_right_sticky, zext

__all__ = ["ShiftOp", "FP32Shift", "K_WIDTH", "CANONICAL_NAN", "POS_INF"]

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


_W = 14   # signed width of the exponent arithmetic (|values| < 2**12)


class FP32Shift(wiring.Component):
    """Pipelined FP32 shifter, one operation per cycle.

    Parameters
    ----------
    latency : int
        Register stages from ``in_valid`` to ``out_valid`` (at least 1).
    isqrt_magic, recip_magic : int
        32-bit constants of the ISQRT_SEED and RECIP_SEED operations, derived in
        :mod:`pimforge.rtl.capsnet.params`.

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

    def __new__(cls, *args, latency: int = 1, isqrt_magic: int, recip_magic: int, **kwargs):
        # Checked before the block exists, so a bad parameter leaves no unused block
        # behind (Amaranth would warn about it).
        check_int("latency", latency, 1, 8)
        for name, v in (("isqrt_magic", isqrt_magic), ("recip_magic", recip_magic)):
            check(isinstance(v, int) and 0 <= v < 2**32, name, v, "a 32-bit unsigned integer")
        return super().__new__(cls, *args, src_loc_at=1, **kwargs)

    def __init__(self, *, latency: int = 1, isqrt_magic: int, recip_magic: int):
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
        eff_e = Signal(signed(_W))
        m.d.comb += eff_e.eq(Mux(is_sub, 1 - lz, exp))

        # ---- LDEXP -----------------------------------------------------------
        new_e = Signal(signed(_W))
        m.d.comb += new_e.eq(eff_e + k)
        overflow = new_e >= 255
        normal = new_e >= 1
        # Underflow: shift the significand right by 1 - new_e with RNE; more than
        # 25 leaves nothing (sig < 2**24: below half of the smallest subnormal).
        far = new_e < -24
        sh = Signal(5)
        m.d.comb += sh.eq(Mux(far, 26, 1 - new_e))
        q_ext, sticky = shift_right_sticky(m, Cat(Const(0, 1), sig), sh, "ld_sub")
        q, rnd = q_ext[1:25], q_ext[0]
        sub_bits = Signal(24)
        m.d.comb += sub_bits.eq(q + (rnd & (sticky | q[0])))
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
        k_neg = k < 0
        mag = Signal(K_WIDTH + 1)
        m.d.comb += mag.eq(Mux(k_neg, -k, k))
        big = mag >= 32
        srl_r = Mux(big, 0, shift_right_sticky(m, a, mag[0:5], "srl")[0])
        sll_r = Mux(big, 0, shift_left(m, a, mag[0:5], "sll"))
        right = Signal(32)
        left = Signal(32)
        m.d.comb += [right.eq(Mux(k_neg, sll_r, srl_r)), left.eq(Mux(k_neg, srl_r, sll_r))]

        # ---- FIX: trunc(sig * 2**(eff_e - 150 + k)), saturated ----------------
        fsh = Signal(signed(_W))
        m.d.comb += fsh.eq(new_e - 150)
        too_big = fsh >= 8
        left_sh = fsh >= 0
        too_small = fsh < -24
        fix_l = shift_left(m, zext(sig, 32), fsh[0:3], "fix_l")      # 0 <= fsh <= 7 only
        fix_rsh = Signal(5)                                           # -24 <= fsh < 0 only
        m.d.comb += fix_rsh.eq(Mux(too_small, 24, -fsh))
        fix_r = shift_right_sticky(m, sig, fix_rsh, "fix_r")[0]
        fix = Signal(32)
        with m.If(is_nan):
            m.d.comb += fix.eq(CANONICAL_NAN)
        with m.Elif(sign | is_zero):
            m.d.comb += fix.eq(0)
        with m.Elif(is_special | too_big | (left_sh & (fix_l >= POS_INF))):
            m.d.comb += fix.eq(POS_INF)
        with m.Elif(left_sh):
            m.d.comb += fix.eq(fix_l)
        with m.Else():
            m.d.comb += fix.eq(fix_r)

        res = Signal(32)
        with m.Switch(self.op):
            with m.Case(ShiftOp.LDEXP):
                m.d.comb += res.eq(ldexp)
            with m.Case(ShiftOp.SRL):
                m.d.comb += res.eq(right)
            with m.Case(ShiftOp.SLL):
                m.d.comb += res.eq(left)
            with m.Case(ShiftOp.FIX):
                m.d.comb += res.eq(fix)
            with m.Case(ShiftOp.ISQRT_SEED):   # magic - (a >> 1) mod 2**32
                m.d.comb += res.eq(self.isqrt_magic - (a >> 1))
            with m.Case(ShiftOp.RECIP_SEED):   # magic - a mod 2**32
                m.d.comb += res.eq(self.recip_magic - a)
            with m.Default():
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
