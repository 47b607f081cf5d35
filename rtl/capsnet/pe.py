"""The PIM-CapsNet reconfigurable PE (Sec. 5.2.2, Fig. 11).

FP32 adders, multipliers and one shifter joined by multiplexers; a flow word
travelling with each operand selects, at every unit, which values feed it and
where its result goes, so the same datapath computes the MAC of Eq. 1, 2 and 4
and the special functions of Eq. 3 and 5 (inverse square root, exponential,
reciprocal and division) by the approximations of the paper.
"""


from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from ..fp.add import FP32Add as _Add
from ..fp.mul import FP32Mul as _Mul
from ..fp.shift import FP32Shift, ShiftOp
from ..hierarchy import Leaf, leaf_name, param_digest
from ..params import check_int
from .params import f32_bits, pe_constants

__all__ = ["Flow", "CapsNetPE", "from_config", "TAG_WIDTH", "latency_from_config", "pe_key",
           "shifter_from_config",
           "pe_latency"]

#: Width of the user tag carried from input to output unchanged.
TAG_WIDTH = 16
_NEG_ZERO = 0x80000000
_SIGN = 0x80000000


class Flow(enum.Enum, shape=3):
    """The flow word: which computation an operand pair goes through.

    MAC
        ``a * b`` accumulated over a group delimited by the ``first``/``last`` tags
        (Eq. 1, 2, 4); one output per group, at ``last``.
    ISQRT
        ``a ** -0.5`` (squash, Eq. 3): magic-constant seed, then Newton steps.
    EXP
        ``exp(a)`` (softmax, Eq. 5) by Eq. 13-14, with the accuracy-recovery multiply.
    RECIP
        ``1 / a``: magic-constant seed, then Newton steps.
    DIV
        ``a / b = a * recip(b)``.
    """

    MAC = 0
    ISQRT = 1
    EXP = 2
    RECIP = 3
    DIV = 4


class _C:
    """A constant operand (binary32 bit pattern) of a unit."""

    def __init__(self, bits: int):
        self.bits = bits


class CapsNetPE(wiring.Component):
    """Reconfigurable FP32 processing element of PIM-CapsNet.

    The datapath is a fixed chain of unit slots; every input walks the whole
    chain, and the flow word it carries decides, slot by slot, the operands
    (multiplexers) and the destination of that slot's unit, or lets the slot be
    bypassed. With ``n = newton_steps`` the chain is::

        M0  A0  S0  [Ma  Mb  A  Mc] * n  MF

    (``M`` multiplier, ``A`` adder, ``S`` shifter). Per flow (``x = a``, ``d = b``,
    working values ``v`` and ``t``):

    MAC    M0 ``t = x * d``; A0 accumulates ``t`` into a lane (below).
    EXP    M0 ``t = x * log2e``; A0 ``t = t + (Avg + 127 - 1)``; S0 ``v = FIX(t, 23)``;
           MF ``v = v * R``.
    ISQRT  M0 ``b = x * 0.5``; S0 ``v = Mi - (x >> 1)``; per step Ma ``t = b * v``,
           Mb ``t = t * v``, A ``t = 1.5 + (-t)``, Mc ``v = v * t``.
    RECIP  S0 ``v = Mr - x``; per step Ma ``t = x * v``, A ``t = 2 + (-t)``, Mc ``v = v * t``.
    DIV    S0 ``v = Mr - d``; per step Ma ``t = d * v``, A ``t = 2 + (-t)``,
           Mc ``v = v * t``; MF ``v = x * v``.

    Unlisted slots pass the values through; MF multiplies by ``R`` only with
    ``exp_recovery``. The paper names its flows by unit sequence (MAC (1)(2),
    inverse square root (3)(2)(1)(2)(1), exponential (1)(2)(2)(3), with the unit
    numbering of its Fig. 11, which the text does not give); here every
    operation of a flow has a unit of its own, so that each flow is fully
    pipelined at one input per cycle.

    MAC accumulation has a loop-carried dependency through the pipelined adder
    A0, which takes ``La = add_latency`` cycles. Instead of stalling, the products
    of a group are interleaved over ``La`` partial sums ("lanes"): product ``j``
    of the group updates lane ``j % La``, whose previous value (product ``j - La``)
    entered the adder at least ``La`` cycles before, so it is ready (taken from
    the adder output directly when it completes in that very cycle). A lane's
    first product is added to -0.0, which leaves it unchanged. When the group's
    ``last`` product leaves A0, the lanes are snapshot (unused ones as -0.0) and
    reduced in order ``((S0 + S1) + S2) + ...`` by ``La - 1`` further pipelined
    adders, so MAC takes one product per cycle with no restriction on group
    lengths, idle gaps or other flows interleaved. A MAC input with ``first`` set,
    or the first MAC input after a ``last``, opens a new group (an open group is
    abandoned without output).

    Every flow has the same latency (``latencies["pe"]``): the shorter of the
    chain and the MAC reduction path is padded, so results leave in input order,
    at most one per cycle, and switching flows between consecutive inputs needs
    no bubble.

    Parameters
    ----------
    add_latency, mul_latency, shift_latency : int
        Pipeline depths of the units.
    newton_steps : int
        Newton-Raphson steps of the ISQRT, RECIP and DIV flows (0 to 3).
    exp_recovery : bool
        Apply the accuracy-recovery multiply in the EXP flow.
    constants : PEConstants
        From :func:`pimforge.rtl.capsnet.params.pe_constants`.

    Attributes
    ----------
    op : In(Flow)
    a, b : In(32)
        Operands (binary32 bit patterns).
    first, last : In(1)
        MAC group tags.
    tag : In(TAG_WIDTH)
        Carried unchanged to ``out_tag``.
    in_valid : In(1)
    result : Out(32)
    out_valid : Out(1)
        High ``latency`` cycles after a non-MAC input or a MAC input with ``last``.
    out_op : Out(Flow)
    out_tag : Out(TAG_WIDTH)
    latency : int
    latencies : dict
        Cycles from input to output per flow (all equal), and of the units.
    """

    op: In(Flow)
    a: In(32)
    b: In(32)
    first: In(1)
    last: In(1)
    tag: In(TAG_WIDTH)
    in_valid: In(1)
    result: Out(32)
    out_valid: Out(1)
    out_op: Out(Flow)
    out_tag: Out(TAG_WIDTH)

    def __new__(cls, *args, **kwargs):
        # Checked before the block exists, so a bad parameter leaves no unused block
        # behind (Amaranth would warn about it).
        _check_latencies(**{k: v for k, v in kwargs.items() if k in _LATENCY_PARAMS})
        return super().__new__(cls, *args, src_loc_at=1, **kwargs)

    def __init__(self, *, add_latency: int, mul_latency: int, shift_latency: int = 1,
                 newton_steps: int, exp_recovery: bool, constants):
        self.add_latency = add_latency
        self.mul_latency = mul_latency
        self.shift_latency = shift_latency
        self.newton_steps = newton_steps
        self.exp_recovery = bool(exp_recovery)
        self.constants = constants
        la, lm = add_latency, mul_latency
        self.chain_latency = _chain_latency(la, lm, shift_latency, newton_steps)
        self.mac_latency = _mac_latency(la, lm)
        self.latency = max(self.chain_latency, self.mac_latency)
        self.latencies = {"pe": self.latency,
                          **{f.name.lower(): self.latency for f in Flow},
                          "fp32_add": la, "fp32_mul": lm, "fp32_shift": shift_latency}
        super().__init__()

    # -- helpers ---------------------------------------------------------------

    def _delay(self, m: Module, st: dict, n: int, name: str) -> dict:
        for i in range(n):
            nxt = {}
            for k, s in st.items():
                r = Signal.like(s, name=f"{name}_{i}_{k}")
                m.d.sync += r.eq(s)
                nxt[k] = r
            st = nxt
        return st

    @staticmethod
    def _src(st: dict, src):
        if isinstance(src, _C):
            return Const(src.bits, 32)
        if isinstance(src, tuple) and src[0] == "-":
            return st[src[1]] ^ _SIGN
        return st[src]

    def _writeback(self, m: Module, st: dict, ctrl: dict, result, name: str) -> dict:
        """*st* with each flow's destination replaced by *result*."""
        out = dict(st)
        for dst in sorted({c[-1] for c in ctrl.values()}):
            hit = st["flow"].as_value().matches(*(f for f, c in ctrl.items() if c[-1] == dst))
            s = Signal(32, name=f"{name}_{dst}")
            m.d.comb += s.eq(Mux(hit, result, st[dst]))
            out[dst] = s
        return out

    def _fp_slot(self, m: Module, st: dict, unit, ctrl: dict, name: str) -> dict:
        """One adder or multiplier slot: ``ctrl`` maps flow -> (src1, src2, dst)."""
        m.submodules[name] = unit
        with m.Switch(st["flow"]):
            for flow, (s1, s2, _) in ctrl.items():
                with m.Case(flow):
                    m.d.comb += [unit.a.eq(self._src(st, s1)), unit.b.eq(self._src(st, s2))]
        m.d.comb += unit.in_valid.eq(st["valid"])
        out = self._delay(m, st, unit.latency, name)
        return self._writeback(m, out, ctrl, unit.result, name)

    # -- elaboration -----------------------------------------------------------

    def elaborate(self, platform):

        m = Module()
        c = self.constants
        la, lm, n = self.add_latency, self.mul_latency, self.newton_steps

        # Each FP unit is one Verilog module instantiated at every slot.
        def FP32Add(latency):  # noqa: N802 - stands in for the class
            return Leaf(leaf_name("fp32_add", f"l{latency}"), lambda: _Add(latency=latency))

        def FP32Mul(latency):  # noqa: N802
            return Leaf(leaf_name("fp32_mul", f"l{latency}"), lambda: _Mul(latency=latency))
        # ---- MAC group bookkeeping at the input ------------------------------
        # The lane of the next product (one-hot, rotating) and the lanes that
        # already hold a partial sum of the open group (a thermometer mask).
        lane_r = Signal(la, init=1)
        seen_r = Signal(la)
        open_ = Signal()
        is_mac = self.op == Flow.MAC
        start = self.first | ~open_
        lane = Signal(la)
        seen = Signal(la)
        m.d.comb += [lane.eq(Mux(start, Const(1, la), lane_r)),
                     seen.eq(Mux(start, Const(0, la), seen_r))]
        with m.If(self.in_valid & is_mac):
            m.d.sync += [
                lane_r.eq(Cat(lane[-1], lane[:-1]) if la > 1 else lane),
                seen_r.eq(seen | lane),
                open_.eq(~self.last),
            ]

        st = {
            "valid": self.in_valid, "flow": self.op, "first": self.first, "last": self.last,
            "tag": self.tag, "a": self.a, "b": self.b,
            "v": Const(0, 32), "t": Const(0, 32),
            "lane": lane, "fresh": ~(seen & lane).any(), "used": seen | lane,
        }
        # Give every field a named signal of a fixed shape so that _delay can copy it.
        shapes = {"valid": 1, "flow": Flow, "first": 1, "last": 1, "tag": TAG_WIDTH, "a": 32,
                  "b": 32, "v": 32, "t": 32, "lane": la, "fresh": 1, "used": la}
        st0 = {}
        for k, v in st.items():
            s = Signal(shapes[k], name=f"in_{k}")
            m.d.comb += s.eq(v)
            st0[k] = s
        st = st0

        # ---- M0 --------------------------------------------------------------
        ctrl = {Flow.MAC: ("a", "b", "t"), Flow.EXP: ("a", _C(c.bits("log2e")), "t"),
                Flow.ISQRT: ("a", _C(_f32(0.5)), "b")}
        st = self._fp_slot(m, st, FP32Mul(latency=lm), ctrl, "m0")

        # ---- A0: EXP bias, or the MAC accumulator with its lanes -------------
        add0 = FP32Add(latency=la)
        m.submodules.a0 = add0
        lanes = [Signal(32, name=f"lane{i}") for i in range(la)]
        out0 = self._delay(m, st, la, "a0")
        out_mac = out0["valid"] & (out0["flow"] == Flow.MAC)
        in_mac = st["flow"] == Flow.MAC
        hit = out_mac & (out0["lane"] & st["lane"]).any()
        sel = Const(_NEG_ZERO, 32)
        for i in range(la):   # one-hot select of the product's lane register
            sel = Mux(st["lane"][i], lanes[i], sel)
        lane_val = Signal(32)
        m.d.comb += lane_val.eq(Mux(st["fresh"], Const(_NEG_ZERO, 32),
                                    Mux(hit, add0.result, sel)))
        m.d.comb += [
            add0.a.eq(Mux(in_mac, lane_val, st["t"])),
            add0.b.eq(Mux(in_mac, st["t"], Const(c.bits("exp_bias"), 32))),
            add0.in_valid.eq(st["valid"]),
        ]
        for i in range(la):
            with m.If(out_mac & out0["lane"][i]):
                m.d.sync += lanes[i].eq(add0.result)
        # Snapshot of the group's lanes when its last product leaves A0 (the
        # earlier products left in earlier cycles and are in the lane registers).
        snap = [Signal(32, name=f"snap{i}") for i in range(la)]
        for i in range(la):
            cur = Mux(out0["lane"][i], add0.result, lanes[i])
            m.d.sync += snap[i].eq(Mux(out0["used"][i], cur, Const(_NEG_ZERO, 32)))
        # Ordered reduction ((S0 + S1) + S2) + ... on La - 1 pipelined adders.
        acc, rest = snap[0], snap[1:]
        for r in range(la - 1):
            red = FP32Add(latency=la)
            m.submodules[f"red{r}"] = red
            m.d.comb += [red.a.eq(acc), red.b.eq(rest[0]), red.in_valid.eq(1)]
            rest = list(self._delay(m, {f"s{i}": s for i, s in enumerate(rest[1:])},
                                    la, f"red{r}").values())
            acc = red.result
        mac_res = self._delay(m, {"r": acc}, self.latency - self.mac_latency, "macpad")["r"]

        st = self._writeback(m, out0, {Flow.EXP: ("t",)}, add0.result, "a0")

        # ---- S0: the shifter -------------------------------------------------
        shifter = FP32Shift(latency=self.shift_latency, isqrt_magic=c.isqrt_magic,
                            recip_magic=c.recip_magic)
        m.submodules.s0 = shifter
        sctrl = {Flow.EXP: (ShiftOp.FIX, 23, "t", "v"),
                 Flow.ISQRT: (ShiftOp.ISQRT_SEED, 0, "a", "v"),
                 Flow.RECIP: (ShiftOp.RECIP_SEED, 0, "a", "v"),
                 Flow.DIV: (ShiftOp.RECIP_SEED, 0, "b", "v")}
        with m.Switch(st["flow"]):
            for flow, (op, k, src, _) in sctrl.items():
                with m.Case(flow):
                    m.d.comb += [shifter.op.eq(op), shifter.k.eq(k), shifter.a.eq(st[src])]
        m.d.comb += shifter.in_valid.eq(st["valid"])
        st = self._writeback(m, self._delay(m, st, self.shift_latency, "s0"), sctrl,
                             shifter.result, "s0")

        # ---- Newton steps ----------------------------------------------------
        three_halves, two = _C(_f32(1.5)), _C(_f32(2.0))
        for i in range(n):
            st = self._fp_slot(m, st, FP32Mul(latency=lm), {
                Flow.ISQRT: ("b", "v", "t"), Flow.RECIP: ("a", "v", "t"),
                Flow.DIV: ("b", "v", "t")}, f"n{i}_ma")
            st = self._fp_slot(m, st, FP32Mul(latency=lm), {
                Flow.ISQRT: ("t", "v", "t")}, f"n{i}_mb")
            st = self._fp_slot(m, st, FP32Add(latency=la), {
                Flow.ISQRT: (three_halves, ("-", "t"), "t"),
                Flow.RECIP: (two, ("-", "t"), "t"), Flow.DIV: (two, ("-", "t"), "t")},
                f"n{i}_a")
            st = self._fp_slot(m, st, FP32Mul(latency=lm), {
                Flow.ISQRT: ("v", "t", "v"), Flow.RECIP: ("v", "t", "v"),
                Flow.DIV: ("v", "t", "v")}, f"n{i}_mc")

        # ---- MF ---------------------------------------------------------------
        fctrl = {Flow.DIV: ("a", "v", "v")}
        if self.exp_recovery:
            fctrl[Flow.EXP] = ("v", _C(c.bits("exp_recovery_factor")), "v")
        st = self._fp_slot(m, st, FP32Mul(latency=lm), fctrl, "mf")
        end = self._delay(m, st, self.latency - self.chain_latency, "pad")

        is_mac_out = end["flow"] == Flow.MAC
        m.d.comb += [
            self.out_valid.eq(end["valid"] & (~is_mac_out | end["last"])),
            self.result.eq(Mux(is_mac_out, mac_res, end["v"])),
            self.out_op.eq(end["flow"]),
            self.out_tag.eq(end["tag"]),
        ]
        return m


_LATENCY_PARAMS = ("add_latency", "mul_latency", "shift_latency", "newton_steps")


def _check_latencies(*, add_latency: int, mul_latency: int, shift_latency: int = 1,
                     newton_steps: int) -> None:
    check_int("add_latency", add_latency, 1, 8)
    check_int("mul_latency", mul_latency, 1, 8)
    check_int("shift_latency", shift_latency, 1, 8)
    check_int("newton_steps", newton_steps, 0, 3)


def _chain_latency(la: int, lm: int, ls: int, newton_steps: int) -> int:
    return lm + la + ls + newton_steps * (3 * lm + la) + lm


def _mac_latency(la: int, lm: int) -> int:
    return lm + la + 1 + (la - 1) * la


def pe_latency(*, add_latency: int, mul_latency: int, shift_latency: int = 1,
               newton_steps: int) -> int:
    """The input-to-output latency of a :class:`CapsNetPE` (every flow), in cycles.

    The same number as ``CapsNetPE(...).latency``, without building the block.
    """
    _check_latencies(add_latency=add_latency, mul_latency=mul_latency,
                     shift_latency=shift_latency, newton_steps=newton_steps)
    return max(_chain_latency(add_latency, mul_latency, shift_latency, newton_steps),
               _mac_latency(add_latency, mul_latency))


def latency_from_config(cfg) -> int:
    """The PE latency of *cfg* (``cfg.fp`` unit latencies, ``cfg.pe`` Newton steps)."""

    c = pe_constants(cfg)
    return pe_latency(add_latency=c.add_latency, mul_latency=c.mul_latency,
                      shift_latency=c.shift_latency, newton_steps=c.newton_steps)


def pe_key(cfg) -> str:
    """Short text naming every parameter of the PE of *cfg* (its shared module's name)."""

    c = pe_constants(cfg)
    consts = sorted(vars(c).items()) if hasattr(c, "__dict__") else repr(c)
    return param_digest((c.add_latency, c.mul_latency, c.shift_latency, c.newton_steps,
                         bool(c.exp_recovery), consts), 8)


def _f32(x: float) -> int:
    return f32_bits(x)


def from_config(cfg) -> CapsNetPE:
    """The PE for *cfg* (``cfg.fp`` unit latencies, ``cfg.pe`` flow parameters)."""

    c = pe_constants(cfg)
    return CapsNetPE(add_latency=c.add_latency, mul_latency=c.mul_latency,
                     shift_latency=c.shift_latency, newton_steps=c.newton_steps,
                     exp_recovery=c.exp_recovery, constants=c)


def shifter_from_config(cfg) -> FP32Shift:
    """The PE's shifter on its own (block ``fp32_shift``), with the magic constants of the
    ISQRT_SEED and RECIP_SEED operations for *cfg* (``cfg.pe.newton_steps``)."""
    c = pe_constants(cfg)
    return FP32Shift(latency=c.shift_latency, isqrt_magic=c.isqrt_magic,
                     recip_magic=c.recip_magic)
