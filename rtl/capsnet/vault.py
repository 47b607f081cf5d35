"""Vault compute of PIM-CapsNet: the operation controller and its PEs (Sec. 4, Fig. 10).

The operation controller fetches the vault's program (ISA of
:mod:`pimforge.rtl.capsnet.isa`) from its instruction memory, which the
driver loads through a backdoor write port, and walks each loop descriptor
*lane-parallel*: every cycle it issues up to ``lanes = pes`` outputs, one per
PE, so the PEs run at their peak of one input record per cycle each.

* lanes: lane ``l`` works on output ``o3 = o3_base + l`` (the same ``o1``,
  ``o2`` and element ``e`` for every lane); lanes with ``o3 >= n3`` are masked
  off, and ``o3_base`` advances by ``lanes``. A MAC group (the ``g`` elements
  of one output) goes to one PE, lane ``l`` -> PE ``l``, elements consecutive,
  so every result is bit-identical to the ISA model's
  :func:`~pimforge.verif.models.capsnet.isa.lane_sum` order. The compiler
  normalises loops so the widest output dimension is ``o3``.
* operands: one read bundle per cycle. ``rd.valid`` asks for it; the memory
  answers ``rd.a_data``/``rd.b_data`` (lane ``l`` in bits ``[32l, 32l+32)``)
  combinationally in a cycle where ``rd.ready`` is high. Lane ``l``'s word
  address is ``rd.x_addr + l * rd.x_stride`` (lane 0's address and the
  instruction's ``x_s3``, signed); ``rd.mask`` marks the live lanes. While
  ``rd.valid & ~rd.ready`` the controller holds all its state and issues
  nothing (the PE pipelines and the destination delay line keep draining).
  Where an operand is not needed this cycle (``b`` of MAXR, SEND and the
  one-input flows; ``b`` at ``e = 0`` and ``a`` at ``e = 1`` of ADD) its port
  repeats the other port's address and stride, so a memory that merges equal
  blocks of a bundle moves nothing extra for it; the data are ignored.
* PE work: ``ADD`` feeds each lane's PE the two-record MAC group
  ``(a * 1, b * +-1)`` (one rounded add); the destination address (lane 0)
  and mask travel through a delay line of the PE latency, and all lanes'
  results leave together through the write bundle ``wr`` (lane ``l`` at
  ``wr.addr + l * wr.stride``, ``wr.stride = d_s3``). Writes are posted: the
  memory always accepts them.
* controller work: ``MAXR`` (one float comparator per lane, first maximum
  kept), ``SELPOS`` (``b > 0`` mux per lane) and ``SEND`` (the lane vector to
  the crossbar port ``send``, same lane addressing) write or send one cycle
  after the read.
* ``BAR``/``HALT``: once every result has been written, ``at_bar`` (or
  ``halted``) rises; ``go`` (driven when all vaults are there) resumes at the
  next instruction. After reset the controller is halted; ``go`` starts it at
  instruction 0.

Every instruction drains the PE pipeline before the next one starts, so an
instruction may read what the previous one wrote (the cost is the PE latency
once per instruction, a few dozen instructions per routing iteration). With a
memory that is always ready, an instruction of ``R = n1 * n2`` rows takes
``R * ceil(n3 / lanes) * g' + pe_latency + 6`` cycles (``g' = 2`` for ADD,
``g`` otherwise): fetch, decode, setup, the issue cycles and the drain.

The three bundles ``rd``, ``wr`` and ``send`` are the signatures of
:mod:`pimforge.rtl.capsnet.lanes`; in Verilog their members are named
``rd__valid``, ``rd__a_addr``, ``wr__en``, ``send__peer``...

The operand memory (the vault's DRAM partition behind the vault controller)
and the inter-vault crossbar are outside this block: the native driver of
:mod:`pimforge.sim.capsnet.rtl_run` serves them. Everything here runs in one
clock domain at the logic-die frequency ``freq_mhz``.

Parameters
----------
pes : int
    PEs of the vault (``capsnet.pes_per_vault``) = lanes of the controller.
imem_depth : int
    Instruction memory depth (``capsnet.imem_instructions``).
pe_factory : callable
    Builds one PE (a :class:`~pimforge.rtl.capsnet.pe.CapsNetPE`).
pe_latency : int
    The PE's input-to-output latency.
pe_key : str
    Short text naming the PE parameters (the shared PE module's name).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..hierarchy import Leaf, leaf_name
from ..params import check_int
from . import pe as pe_mod
from .isa import ADDR_BITS, COUNT_BITS, INSTR_BITS, INSTRUCTION, STRIDE_BITS, Hold, Opcode
from .lanes import (
    OPERAND_FIELDS,
    LaneHintSignature,
    LaneReadSignature,
    LaneSendSignature,
    LaneWriteSignature,
)
from .pe import Flow, pe_key

__all__ = ["VaultCompute", "from_config", "vault_leaf"]

_ONE = 0x3F800000
_MINUS_ONE = 0xBF800000


class _Walker:
    """Loop counters and running operand addresses of one walk over an instruction.

    Loop order ``o1, o2, o3 / lanes, e``, or ``o1, o3 / lanes, o2, e`` while the
    instruction holds an operand (``hold_on``). ``cnt["o3"]`` is lane 0's
    output; ``addr[x]`` are lane 0's addresses of operand ``x`` at the start
    of the current outer (``r1``), middle (``r2``) and inner (``r3``) output
    iteration and at the current element (``e``).
    """

    def __init__(self, m, ins, g_eff, hold_on, lanes: int, prefix: str):
        self.m, self.ins, self.g_eff, self.hold_on, self.N = m, ins, g_eff, hold_on, lanes
        self.cnt = {k: Signal(COUNT_BITS, name=f"{prefix}cnt_{k}") for k in ("o1", "o2", "o3", "e")}
        self.addr = {x: {lv: Signal(ADDR_BITS, name=f"{prefix}{x}_{lv}")
                         for lv in ("r1", "r2", "r3", "e")} for x in ("a", "b", "d")}
        cnt, N = self.cnt, lanes
        # Outputs of the current o3 row still to issue, from lane 0 on.
        rem = Signal(COUNT_BITS + 1, name=f"{prefix}rem")
        self.mask = Signal(N, name=f"{prefix}mask")
        m.d.comb += [rem.eq(ins.n3 - cnt["o3"]),
                     self.mask.eq(Cat(*(rem > lane for lane in range(N))))]
        self.last_e = cnt["e"] == g_eff - 1
        last_o3 = rem <= N
        last_o2 = cnt["o2"] == ins.n2 - 1
        self.last_o1 = cnt["o1"] == ins.n1 - 1
        # Innermost and middle output loops.
        self.last_in = Mux(hold_on, last_o2, last_o3)
        self.last_mid = Mux(hold_on, last_o3, last_o2)
        self.done = self.last_e & last_o3 & last_o2 & self.last_o1
        self.add_b = (ins.op == Opcode.ADD) & (cnt["e"] != 0)   # ADD's 2nd record reads b only

    def stride(self, x, s):
        return self.ins[f"{x}_{s}"].as_signed()

    def reset(self):
        m, ins = self.m, self.ins
        m.d.sync += [c.eq(0) for c in self.cnt.values()]
        for x, lv in self.addr.items():
            m.d.sync += [a.eq(ins[x]) for a in lv.values()]

    def advance(self):
        """Step to the next bundle (one element of every live lane)."""
        m, cnt, addr, N, hold_on = self.m, self.cnt, self.addr, self.N, self.hold_on
        with m.If(~self.last_e):
            m.d.sync += cnt["e"].eq(cnt["e"] + 1)
            for x in addr:
                m.d.sync += addr[x]["e"].eq(addr[x]["e"] + self.stride(x, "se"))
        with m.Elif(~self.last_in):
            m.d.sync += cnt["e"].eq(0)
            with m.If(hold_on):
                m.d.sync += cnt["o2"].eq(cnt["o2"] + 1)
            with m.Else():
                m.d.sync += cnt["o3"].eq(cnt["o3"] + N)
            for x in addr:
                nxt = addr[x]["r3"] + Mux(hold_on, self.stride(x, "s2"),
                                          self.stride(x, "s3") * N)
                m.d.sync += [addr[x]["r3"].eq(nxt), addr[x]["e"].eq(nxt)]
        with m.Elif(~self.last_mid):
            m.d.sync += cnt["e"].eq(0)
            with m.If(hold_on):
                m.d.sync += [cnt["o2"].eq(0), cnt["o3"].eq(cnt["o3"] + N)]
            with m.Else():
                m.d.sync += [cnt["o3"].eq(0), cnt["o2"].eq(cnt["o2"] + 1)]
            for x in addr:
                nxt = addr[x]["r2"] + Mux(hold_on, self.stride(x, "s3") * N,
                                          self.stride(x, "s2"))
                m.d.sync += [addr[x][k].eq(nxt) for k in ("r2", "r3", "e")]
        with m.Else():
            m.d.sync += [cnt["e"].eq(0), cnt["o3"].eq(0), cnt["o2"].eq(0),
                         cnt["o1"].eq(cnt["o1"] + 1)]
            for x in addr:
                nxt = addr[x]["r1"] + self.stride(x, "s1")
                m.d.sync += [addr[x][k].eq(nxt) for k in ("r1", "r2", "r3", "e")]

    def bundle(self):
        """``(a_addr, a_stride, b_addr, b_stride)`` of the current read bundle.

        An operand not read this cycle repeats the other's address and stride
        (so a memory that merges equal blocks moves nothing for it): ``b`` of
        the one-input ops, ``a`` of ADD's second record, and a held operand
        past ``o2 = 0``."""
        ins, cnt, addr = self.ins, self.cnt, self.addr
        uses_b = (((ins.op == Opcode.FLOW) & ((ins.flow == Flow.MAC) | (ins.flow == Flow.DIV)))
                  | (ins.op == Opcode.SELPOS) | self.add_b)
        held = self.hold_on & (cnt["o2"] != 0)
        a_addr = Mux(self.add_b, addr["b"]["e"], addr["a"]["e"])
        a_str = Mux(self.add_b, self.stride("b", "s3"), self.stride("a", "s3"))
        b_live = uses_b & ~(held & (ins.hold == Hold.B))
        b_addr = Mux(b_live, addr["b"]["e"], a_addr)
        b_str = Mux(b_live, self.stride("b", "s3"), a_str)
        a_held = held & (ins.hold == Hold.A)
        return (Mux(a_held, b_addr, a_addr), Mux(a_held, b_str, a_str), b_addr, b_str)


class VaultCompute(wiring.Component):
    """Operation controller + PEs of one vault (see the module docstring)."""

    def __init__(self, *, pes: int, imem_depth: int, pe_factory, pe_latency: int,
                 pe_key: str = "pe", hold_words: int = 16, prefetch: int = 16):
        check_int("pes", pes, 1, 64)
        check_int("imem_depth", imem_depth, 16, 65536)
        check_int("hold_words", hold_words, 0, 1024)
        check_int("prefetch", prefetch, 0, 1024)
        self.pes, self.imem_depth = pes, imem_depth
        self.hold_words, self.prefetch = hold_words, prefetch
        self.lanes = pes
        self.pe_factory, self.pe_latency, self.pe_key = pe_factory, pe_latency, pe_key
        ib = ceil_log2(imem_depth)
        lane_kw = {"lanes": pes, "addr_bits": ADDR_BITS, "stride_bits": STRIDE_BITS}
        super().__init__({
            "imem_we": In(1), "imem_addr": In(ib), "imem_data": In(INSTR_BITS),
            "go": In(1), "at_bar": Out(1), "halted": Out(1),
            "rd": Out(LaneReadSignature(**lane_kw)),
            "pf": Out(LaneHintSignature(**lane_kw)),
            "wr": Out(LaneWriteSignature(**lane_kw)),
            "send": Out(LaneSendSignature(**lane_kw)),
            "pe_busy": Out(1),
        })
        self.latencies = {"pe": pe_latency}

    def elaborate(self, platform):
        m = Module()
        c = self._fetch(m)
        self._read_port(m, c)
        self._hints(m, c)
        self._stationary(m, c)
        self._pes(m, c)
        self._controller_ops(m, c)
        self._sequencer(m, c)
        return m

    def _fetch(self, m: Module) -> SimpleNamespace:
        """The instruction memory, the instruction register and the two walkers over the
        instruction's loop nest: ``use`` issues to the PEs, ``ahead`` announces the same
        bundles up to ``prefetch`` ahead (hints)."""
        N, H = self.pes, self.hold_words
        m.submodules.imem = imem = Memory(shape=INSTR_BITS, depth=self.imem_depth, init=[])
        wp = imem.write_port()
        rp = imem.read_port(transparent_for=())
        m.d.comb += [wp.en.eq(self.imem_we), wp.addr.eq(self.imem_addr),
                     wp.data.eq(self.imem_data)]

        pc = Signal(range(self.imem_depth))
        ins = Signal(INSTRUCTION)
        m.d.comb += rp.addr.eq(pc)
        g_eff = Signal(COUNT_BITS)
        m.d.comb += g_eff.eq(Mux(ins.op == Opcode.ADD, 2, ins.g))
        # The stationary operand is kept only if its group fits the registers.
        hold_on = Signal()
        if H:
            m.d.comb += hold_on.eq((ins.op == Opcode.FLOW) & (ins.hold != Hold.NONE)
                                   & (ins.g <= H))
        use = _Walker(m, ins, g_eff, hold_on, N, "")
        ahead = _Walker(m, ins, g_eff, hold_on, N, "pf_")
        return SimpleNamespace(rp=rp, pc=pc, ins=ins, hold_on=hold_on, use=use, ahead=ahead)

    def _read_port(self, m: Module, c: SimpleNamespace) -> None:
        """The operand read port: the walker's bundle while the instruction runs; a
        bundle issues when the port takes it."""
        N, use = self.pes, c.use
        run = Signal()
        issue = Signal()
        m.d.comb += issue.eq(run & self.rd.ready)
        m.d.comb += self.rd.valid.eq(run)
        m.d.comb += [getattr(self.rd, f).eq(x)
                     for f, x in zip(OPERAND_FIELDS, (use.mask, *use.bundle()))]
        c.xa = [self.rd.a_data[32 * i:32 * i + 32] for i in range(N)]
        c.xb = [self.rd.b_data[32 * i:32 * i + 32] for i in range(N)]
        c.run, c.issue = run, issue
        c.cnt, c.last_e, c.add_b = use.cnt, use.last_e, use.add_b
        c.is_add = c.ins.op == Opcode.ADD

    def _hints(self, m: Module, c: SimpleNamespace) -> None:
        """Prefetch hints: the ``ahead`` walker's bundles, at most ``prefetch`` of them
        announced and not yet issued."""
        ahead = c.ahead
        ahead_done = Signal()
        outstanding = Signal(range(self.prefetch + 2))
        hint = Signal()
        if self.prefetch:
            m.d.comb += [hint.eq(c.run & ~ahead_done & (outstanding < self.prefetch)),
                         self.pf.valid.eq(hint)]
            m.d.comb += [getattr(self.pf, f).eq(x)
                         for f, x in zip(OPERAND_FIELDS, (ahead.mask, *ahead.bundle()))]
            m.d.sync += outstanding.eq(outstanding + hint - c.issue)
            with m.If(hint):
                ahead.advance()
                with m.If(ahead.done):
                    m.d.sync += ahead_done.eq(1)
        c.ahead_done, c.outstanding = ahead_done, outstanding

    def _stationary(self, m: Module, c: SimpleNamespace) -> None:
        """Stationary operand registers: one word per lane per element of the group,
        filled at ``o2 = 0`` and read instead of the port's operand after that."""
        N, H, ins, cnt = self.pes, self.hold_words, c.ins, c.cnt
        held = Signal()
        m.d.comb += held.eq(c.hold_on & (cnt["o2"] != 0))
        if H:
            m.submodules.hold = hmem = Memory(shape=32 * N, depth=H, init=[])
            hw = hmem.write_port()
            hr = hmem.read_port(domain="comb")
            m.d.comb += [hr.addr.eq(cnt["e"]), hw.addr.eq(cnt["e"]),
                         hw.en.eq(c.issue & c.hold_on & (cnt["o2"] == 0)),
                         hw.data.eq(Mux(ins.hold == Hold.A, self.rd.a_data, self.rd.b_data))]
            ha = [Mux(held & (ins.hold == Hold.A), hr.data[32 * i:32 * i + 32], c.xa[i])
                  for i in range(N)]
            hbv = [Mux(held & (ins.hold == Hold.B), hr.data[32 * i:32 * i + 32], c.xb[i])
                   for i in range(N)]
            c.xa, c.xb = ha, hbv

    def _pes(self, m: Module, c: SimpleNamespace) -> None:
        """The PEs (one Verilog module instantiated ``pes`` times) and the destination
        and lane mask of their results, delayed to meet the PE outputs."""
        L, N, ins, cnt, use = self.pe_latency, self.pes, c.ins, c.cnt, c.use
        key = leaf_name("capsnet_pe", self.pe_key)
        pes = [Leaf(key, self.pe_factory) for _ in range(self.pes)]
        for i, p in enumerate(pes):
            m.submodules[f"pe{i}"] = p
        is_pe = Signal()
        m.d.comb += is_pe.eq((ins.op == Opcode.FLOW) | c.is_add)
        pe_op = Signal(Flow)
        m.d.comb += pe_op.eq(Mux(c.is_add, Flow.MAC, ins.flow))
        pe_b_add = Mux(cnt["e"] == 0, _ONE, Mux(ins.sign, _MINUS_ONE, _ONE))
        for i, p in enumerate(pes):
            m.d.comb += [p.op.eq(pe_op),
                         p.a.eq(Mux(c.add_b, c.xb[i], c.xa[i])),
                         p.b.eq(Mux(c.is_add, pe_b_add, c.xb[i])),
                         p.first.eq(cnt["e"] == 0), p.last.eq(c.last_e), p.tag.eq(0),
                         p.in_valid.eq(c.issue & is_pe & use.mask[i])]
        dl_v = [Signal(name=f"dl_v{i}") for i in range(L)]
        dl_m = [Signal(N, name=f"dl_m{i}") for i in range(L)]
        dl_a = [Signal(ADDR_BITS, name=f"dl_a{i}") for i in range(L)]
        m.d.sync += [dl_v[0].eq(c.issue & is_pe & c.last_e), dl_m[0].eq(use.mask),
                     dl_a[0].eq(use.addr["d"]["e"])]
        for i in range(1, L):
            m.d.sync += [dl_v[i].eq(dl_v[i - 1]), dl_m[i].eq(dl_m[i - 1]),
                         dl_a[i].eq(dl_a[i - 1])]
        c.res = Cat(*(p.result for p in pes))
        m.d.comb += self.pe_busy.eq(Cat(*dl_v).any())
        c.dl_v, c.dl_m, c.dl_a = dl_v, dl_m, dl_a

    def _controller_ops(self, m: Module, c: SimpleNamespace) -> None:
        """The controller-side operations (a registered write for MAXR and SELPOS, a send
        for SEND) and the write and send ports, which also carry the PE results."""
        N, ins, cnt, use, xa, xb = self.pes, c.ins, c.cnt, c.use, c.xa, c.xb
        dl_v, dl_m, dl_a = c.dl_v, c.dl_m, c.dl_a

        def key_of(v):
            # Total order of non-NaN floats as unsigned keys; -0 counts as +0.
            neg = v[31] & (v[:31] != 0)
            return Mux(neg, ~v, v | 0x80000000)
        mx = [Signal(32, name=f"mx{i}") for i in range(N)]
        cand = [Mux((cnt["e"] == 0) | (key_of(xa[i]) > key_of(mx[i])), xa[i], mx[i])
                for i in range(N)]
        selp = [Mux(~xb[i][31] & (xb[i][:31] != 0), xa[i], 0) for i in range(N)]
        dw_en, dw_mask, dw_addr = Signal(), Signal(N), Signal(ADDR_BITS)
        dw_data = Signal(32 * N)
        sv, sp, sm, sa, sd = Signal(), Signal(8), Signal(N), Signal(ADDR_BITS), Signal(32 * N)
        m.d.sync += [dw_en.eq(0), sv.eq(0)]
        with m.If(c.issue):
            with m.Switch(ins.op):
                with m.Case(Opcode.MAXR):
                    m.d.sync += [mx[i].eq(cand[i]) for i in range(N)]
                    with m.If(c.last_e):
                        m.d.sync += [dw_en.eq(1), dw_mask.eq(use.mask),
                                     dw_addr.eq(use.addr["d"]["e"]), dw_data.eq(Cat(*cand))]
                with m.Case(Opcode.SELPOS):
                    m.d.sync += [dw_en.eq(1), dw_mask.eq(use.mask),
                                 dw_addr.eq(use.addr["d"]["e"]), dw_data.eq(Cat(*selp))]
                with m.Case(Opcode.SEND):
                    m.d.sync += [sv.eq(1), sp.eq(ins.peer), sm.eq(use.mask),
                                 sa.eq(use.addr["d"]["e"]), sd.eq(self.rd.a_data)]
        # The instruction register holds until the next DECODE, which follows
        # the drain, so ins.d_s3 is still this instruction's at write time.
        m.d.comb += [
            self.wr.en.eq(dl_v[-1] | dw_en),
            self.wr.mask.eq(Mux(dl_v[-1], dl_m[-1], dw_mask)),
            self.wr.addr.eq(Mux(dl_v[-1], dl_a[-1], dw_addr)),
            self.wr.stride.eq(use.stride("d", "s3")),
            self.wr.data.eq(Mux(dl_v[-1], c.res, dw_data)),
            self.send.valid.eq(sv), self.send.peer.eq(sp), self.send.mask.eq(sm),
            self.send.addr.eq(sa), self.send.stride.eq(use.stride("d", "s3")),
            self.send.data.eq(sd),
        ]

    def _sequencer(self, m: Module, c: SimpleNamespace) -> None:
        """Fetch, decode, set the walkers up, run the instruction until its last bundle
        issues, drain the PE pipeline; barriers wait for ``go``, and so does a halt."""
        L, ins, pc, use, ahead = self.pe_latency, c.ins, c.pc, c.use, c.ahead
        drain = Signal(range(L + 4))
        with m.FSM(init="HALT"):   # idle until the driver loads a program and pulses go
            with m.State("FETCH"):
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += ins.eq(c.rp.data)
                m.next = "SETUP"
            with m.State("SETUP"):
                use.reset()
                ahead.reset()
                m.d.sync += [c.ahead_done.eq(0), c.outstanding.eq(0)]
                with m.Switch(ins.op):
                    with m.Case(Opcode.BAR):
                        m.next = "BAR"
                    with m.Case(Opcode.HALT):
                        m.next = "HALT"
                    with m.Default():
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += c.run.eq(1)
                with m.If(c.issue):
                    use.advance()
                    with m.If(use.done):
                        m.d.sync += drain.eq(L + 2)
                        m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain - 1)
                with m.If(drain == 0):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("BAR"):
                m.d.comb += self.at_bar.eq(1)
                with m.If(self.go):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("HALT"):
                m.d.comb += self.halted.eq(1)
                with m.If(self.go):     # restart from the top (a new program)
                    m.d.sync += pc.eq(0)
                    m.next = "FETCH"


def from_config(cfg) -> VaultCompute:
    """The vault compute of *cfg* (``capsnet.pes_per_vault`` PEs, its PE flows)."""

    return VaultCompute(pes=cfg.capsnet.pes_per_vault,
                        imem_depth=cfg.capsnet.imem_instructions,
                        hold_words=cfg.capsnet.hold_words,
                        prefetch=cfg.capsnet.prefetch_bundles,
                        pe_factory=lambda: pe_mod.from_config(cfg),
                        pe_latency=pe_mod.latency_from_config(cfg), pe_key=pe_mod.pe_key(cfg))


def vault_leaf(cfg):
    """The vault compute of *cfg* as one Verilog module that every vault instantiates."""

    c = cfg.capsnet
    return Leaf(leaf_name("capsnet_vault", pe_key(cfg), c.pes_per_vault, c.imem_instructions,
                          c.hold_words, c.prefetch_bundles),
                lambda: from_config(cfg))
