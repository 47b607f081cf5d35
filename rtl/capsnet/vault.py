"""Vault compute of PIM-CapsNet: the operation controller and its PEs (Sec. 4, Fig. 10).

The operation controller fetches the vault's program (ISA of
:mod:`pimforge.rtl.capsnet.isa`) from its instruction memory, which the
driver loads through a backdoor write port, and walks each loop descriptor
one element per cycle:

* operands: two word reads per element (``rd_a_*``, ``rd_b_*``) from the vault's
  DRAM partition, answered by the memory model in the same cycle; the
  controller registers what it needs, so the memory sees one registered
  address pair per cycle;
* PE work: each output's group goes to one of ``pes`` PEs, round robin over the
  outputs (a MAC group's elements stay consecutive in its PE, as the PE
  requires); the destination address travels through a delay line of the PE
  latency and the result is written back through ``wr_*``. ``ADD`` feeds a
  two-record MAC group ``(a * 1, b * +-1)``;
* controller work: ``MAXR`` (float comparator, first maximum kept), ``SELPOS``
  (``b > 0`` mux) and ``SEND`` (word to the crossbar port ``send_*``) write or
  send one cycle after the read;
* ``BAR``/``HALT``: once every result has been written, ``at_bar`` (or
  ``halted``) rises; ``go`` (driven when all vaults are there) resumes at the
  next instruction. After reset the controller is halted; ``go`` starts it at
  instruction 0.

Every instruction drains the PE pipeline before the next one starts, so an
instruction may read what the previous one wrote (the cost is the PE latency
once per instruction, a few dozen instructions per routing iteration).

The operand memory is a simulation model served by the driver (one read pair
and one write per cycle), standing in for the vault controller's DRAM path; the
inter-vault crossbar is modelled by the driver too (``send_*`` words land in the
peer's memory before the next barrier). Everything here runs in one clock
domain at the logic-die frequency ``freq_mhz``.

Parameters
----------
pes : int
    PEs of the vault (``capsnet.pes_per_vault``).
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

import hashlib

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .isa import ADDR_BITS, COUNT_BITS, INSTR_BITS, INSTRUCTION, Opcode
from .pe import Flow

__all__ = ["VaultCompute", "from_config"]

_ONE = 0x3F800000
_MINUS_ONE = 0xBF800000


class VaultCompute(wiring.Component):
    """Operation controller + PEs of one vault (see the module docstring)."""

    def __init__(self, *, pes: int, imem_depth: int, pe_factory, pe_latency: int,
                 pe_key: str = "pe"):
        if not isinstance(pes, int) or not 1 <= pes <= 64:
            raise ValueError(f"pes must be an integer between 1 and 64, not {pes!r}")
        if not isinstance(imem_depth, int) or not 16 <= imem_depth <= 65536:
            raise ValueError(f"imem_depth must be an integer between 16 and 65536, "
                             f"not {imem_depth!r}")
        self.pes, self.imem_depth = pes, imem_depth
        self.pe_factory, self.pe_latency, self.pe_key = pe_factory, pe_latency, pe_key
        ib = ceil_log2(imem_depth)
        super().__init__({
            "imem_we": In(1), "imem_addr": In(ib), "imem_data": In(INSTR_BITS),
            "go": In(1), "at_bar": Out(1), "halted": Out(1),
            "rd_en": Out(1), "rd_a_addr": Out(ADDR_BITS), "rd_b_addr": Out(ADDR_BITS),
            "rd_a_data": In(32), "rd_b_data": In(32),
            "wr_en": Out(1), "wr_addr": Out(ADDR_BITS), "wr_data": Out(32),
            "send_valid": Out(1), "send_peer": Out(8), "send_addr": Out(ADDR_BITS),
            "send_data": Out(32),
            "pe_busy": Out(1),
        })
        self.latencies = {"pe": pe_latency}

    def elaborate(self, platform):
        from ..hierarchy import Leaf

        m = Module()
        L = self.pe_latency
        m.submodules.imem = imem = Memory(shape=INSTR_BITS, depth=self.imem_depth, init=[])
        wp = imem.write_port()
        rp = imem.read_port(transparent_for=())
        m.d.comb += [wp.en.eq(self.imem_we), wp.addr.eq(self.imem_addr),
                     wp.data.eq(self.imem_data)]

        pc = Signal(range(self.imem_depth))
        ins = Signal(INSTRUCTION)
        m.d.comb += rp.addr.eq(pc)

        # Loop counters and per-operand running addresses (o1 row, o2 row, o3 row, element).
        cnt = {k: Signal(COUNT_BITS, name=f"cnt_{k}") for k in ("o1", "o2", "o3", "e")}
        addr = {x: {lv: Signal(ADDR_BITS, name=f"{x}_{lv}") for lv in ("r1", "r2", "r3", "e")}
                for x in ("a", "b", "d")}
        g_eff = Signal(COUNT_BITS)
        m.d.comb += g_eff.eq(Mux(ins.op == Opcode.ADD, 2, ins.g))

        def stride(x, s):
            return ins[f"{x}_{s}"].as_signed()

        last_e = cnt["e"] == g_eff - 1
        last_o3 = cnt["o3"] == ins.n3 - 1
        last_o2 = cnt["o2"] == ins.n2 - 1
        last_o1 = cnt["o1"] == ins.n1 - 1
        done_elem = last_e & last_o3 & last_o2 & last_o1

        def advance():
            """Step the element counter and every operand address by one element."""
            with m.If(~last_e):
                m.d.sync += cnt["e"].eq(cnt["e"] + 1)
                for x in addr:
                    m.d.sync += addr[x]["e"].eq(addr[x]["e"] + stride(x, "se"))
            with m.Elif(~last_o3):
                m.d.sync += [cnt["e"].eq(0), cnt["o3"].eq(cnt["o3"] + 1)]
                for x in addr:
                    nxt = addr[x]["r3"] + stride(x, "s3")
                    m.d.sync += [addr[x]["r3"].eq(nxt), addr[x]["e"].eq(nxt)]
            with m.Elif(~last_o2):
                m.d.sync += [cnt["e"].eq(0), cnt["o3"].eq(0), cnt["o2"].eq(cnt["o2"] + 1)]
                for x in addr:
                    nxt = addr[x]["r2"] + stride(x, "s2")
                    m.d.sync += [addr[x][k].eq(nxt) for k in ("r2", "r3", "e")]
            with m.Else():
                m.d.sync += [cnt["e"].eq(0), cnt["o3"].eq(0), cnt["o2"].eq(0),
                             cnt["o1"].eq(cnt["o1"] + 1)]
                for x in addr:
                    nxt = addr[x]["r1"] + stride(x, "s1")
                    m.d.sync += [addr[x][k].eq(nxt) for k in ("r1", "r2", "r3", "e")]

        # ---- PEs, one Verilog module instantiated pes times -----------------
        key = f"capsnet_pe_{self.pe_key}"
        pes = [Leaf(key, self.pe_factory) for _ in range(self.pes)]
        for i, p in enumerate(pes):
            m.submodules[f"pe{i}"] = p
        lane = Signal(range(self.pes))
        issue = Signal()
        is_pe = Signal()
        pe_a, pe_b = Signal(32), Signal(32)
        m.d.comb += is_pe.eq((ins.op == Opcode.FLOW) | (ins.op == Opcode.ADD))
        with m.If(ins.op == Opcode.ADD):
            m.d.comb += [pe_a.eq(Mux(cnt["e"] == 0, self.rd_a_data, self.rd_b_data)),
                         pe_b.eq(Mux(cnt["e"] == 0, _ONE,
                                     Mux(ins.sign, _MINUS_ONE, _ONE)))]
        with m.Else():
            m.d.comb += [pe_a.eq(self.rd_a_data), pe_b.eq(self.rd_b_data)]
        pe_op = Signal(Flow)
        m.d.comb += pe_op.eq(Mux(ins.op == Opcode.ADD, Flow.MAC, ins.flow))
        for i, p in enumerate(pes):
            m.d.comb += [p.op.eq(pe_op), p.a.eq(pe_a), p.b.eq(pe_b),
                         p.first.eq(cnt["e"] == 0), p.last.eq(last_e), p.tag.eq(0),
                         p.in_valid.eq(issue & is_pe & (lane == i))]
        # Destination delay line aligned with the PE outputs.
        dl_v = [Signal(name=f"dl_v{i}") for i in range(L)]
        dl_a = [Signal(ADDR_BITS, name=f"dl_a{i}") for i in range(L)]
        m.d.sync += [dl_v[0].eq(issue & is_pe & last_e), dl_a[0].eq(addr["d"]["e"])]
        for i in range(1, L):
            m.d.sync += [dl_v[i].eq(dl_v[i - 1]), dl_a[i].eq(dl_a[i - 1])]
        res = Const(0, 32)
        for p in pes:
            res = res | Mux(p.out_valid, p.result, 0)
        inflight = Cat(*dl_v).any()
        m.d.comb += self.pe_busy.eq(inflight)

        # ---- controller-side ops (registered write / send) -------------------
        x = self.rd_a_data
        y = self.rd_b_data

        def key_of(v):
            # Total order of non-NaN floats as unsigned keys; -0 counts as +0.
            neg = v[31] & (v[:31] != 0)
            return Mux(neg, ~v, v | 0x80000000)
        mx = Signal(32)
        cand = Mux((cnt["e"] == 0) | (key_of(x) > key_of(mx)), x, mx)
        dw_en, dw_addr, dw_data = Signal(), Signal(ADDR_BITS), Signal(32)
        sv, sp, sa, sd = Signal(), Signal(8), Signal(ADDR_BITS), Signal(32)
        m.d.sync += [dw_en.eq(0), sv.eq(0)]
        with m.If(issue):
            with m.Switch(ins.op):
                with m.Case(Opcode.MAXR):
                    m.d.sync += mx.eq(cand)
                    with m.If(last_e):
                        m.d.sync += [dw_en.eq(1), dw_addr.eq(addr["d"]["e"]), dw_data.eq(cand)]
                with m.Case(Opcode.SELPOS):
                    pos = ~y[31] & (y[:31] != 0)
                    m.d.sync += [dw_en.eq(1), dw_addr.eq(addr["d"]["e"]),
                                 dw_data.eq(Mux(pos, x, 0))]
                with m.Case(Opcode.SEND):
                    m.d.sync += [sv.eq(1), sp.eq(ins.peer), sa.eq(addr["d"]["e"]), sd.eq(x)]
        m.d.comb += [
            self.wr_en.eq(dl_v[-1] | dw_en),
            self.wr_addr.eq(Mux(dl_v[-1], dl_a[-1], dw_addr)),
            self.wr_data.eq(Mux(dl_v[-1], res, dw_data)),
            self.send_valid.eq(sv), self.send_peer.eq(sp), self.send_addr.eq(sa),
            self.send_data.eq(sd),
            self.rd_en.eq(issue),
            self.rd_a_addr.eq(addr["a"]["e"]), self.rd_b_addr.eq(addr["b"]["e"]),
        ]

        # ---- sequencer -------------------------------------------------------
        drain = Signal(range(L + 4))
        with m.FSM(init="HALT"):   # idle until the driver loads a program and pulses go
            with m.State("FETCH"):
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += ins.eq(rp.data)
                m.next = "SETUP"
            with m.State("SETUP"):
                for k in cnt:
                    m.d.sync += cnt[k].eq(0)
                for xn in addr:
                    m.d.sync += [addr[xn][k].eq(ins[xn]) for k in addr[xn]]
                m.d.sync += lane.eq(0)
                with m.Switch(ins.op):
                    with m.Case(Opcode.BAR):
                        m.next = "BAR"
                    with m.Case(Opcode.HALT):
                        m.next = "HALT"
                    with m.Default():
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += issue.eq(1)
                advance()
                with m.If(last_e):
                    m.d.sync += lane.eq(Mux(lane == self.pes - 1, 0, lane + 1))
                with m.If(done_elem):
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
        return m


def from_config(cfg) -> VaultCompute:
    """The vault compute of *cfg* (``capsnet.pes_per_vault`` PEs, its PE flows)."""
    from . import pe as pe_mod

    proto = pe_mod.from_config(cfg)
    proto._MustUse__silence = True   # only its latency is read here
    key = hashlib.sha1(repr((proto.add_latency, proto.mul_latency, proto.shift_latency,
                             proto.newton_steps, proto.exp_recovery,
                             sorted(vars(proto.constants).items()) if hasattr(
                                 proto.constants, "__dict__") else repr(proto.constants))
                            ).encode()).hexdigest()[:8]
    return VaultCompute(pes=cfg.capsnet.pes_per_vault,
                        imem_depth=cfg.capsnet.imem_instructions,
                        pe_factory=lambda: pe_mod.from_config(cfg), pe_latency=proto.latency,
                        pe_key=key)
