"""The vault scratchpad (VSM) of iPIM, on the TSV side of the base die (Sec. IV-C).

One single-ported memory of ``lines`` 128-bit lines. Every access goes through
one data port, shared round-robin by all its clients, one access per cycle:

* ``pe[p]``: the vault's PEs (``rd_vsm``/``wr_vsm``), over the TSVs: a read's
  data comes back ``t_tsv + t_vsm`` cycles after the VSM took it;
* ``core``: the control core's ``seti_vsm`` writes (``t_vsm``);
* ``reply``: the network's replies to this vault's ``req`` (a stream of
  :func:`~pimforge.rtl.ipim.core.reply_layout`): the whole line is written,
  and ``landed`` reports the reply's ``tag`` in the same cycle (the write is
  in the memory from the next cycle on, so the control core may retire the
  ``req`` and let a dependent instruction issue);
* ``ext``: the network interface (remote reads and writes of VSM lines) and
  the host, ``t_vsm``.

The client that won the previous grant has the lowest priority in the next
cycle (round-robin over ``pe[0..pes-1], core, reply, ext``), so every client
waits at most ``pes + 2`` grants. A port's ``ready`` is its grant (it depends
on the port's own ``valid`` combinationally, as :class:`SPMPortSignature`
allows); reads return in request order at the port's fixed latency.
Addresses are taken modulo ``lines``.

Parameters
----------
pes : int
    PE ports.
lines : int
    128-bit lines (``ipim.vsm_lines``).
t_vsm : int
    Access latency of the array (cycles from a granted read to its data at the base die).
t_tsv : int
    TSV traversal added to the PEs' reads.
tag_bits : int
    Width of the ``req`` tags (the control core's slot numbers).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.sram import sram_leaf
from ..params import check_int, check_pow2
from .bus import VECTOR_BITS, SPMPortSignature
from .core import landed_signature, reply_layout
from .isa import LANES, MASK_BITS, SPM_BITS

__all__ = ["VSM", "from_config"]


class VSM(wiring.Component):
    """Vault scratchpad with one round-robin shared data port (see the module docstring).

    Parameters
    ----------
    pes, lines, t_vsm, t_tsv, tag_bits
        See the module docstring.

    Attributes
    ----------
    pe : In(SPMPortSignature(addr_bits, t_tsv + t_vsm)).array(pes)
    core : In(SPMPortSignature(addr_bits, t_vsm))
    reply : In(stream.Signature(reply_layout(tag_bits)))
    landed : Out(landed_signature(tag_bits))
    ext : In(SPMPortSignature(addr_bits, t_vsm))
    """

    def __init__(self, *, pes: int, lines: int, t_vsm: int = 1, t_tsv: int = 1,
                 tag_bits: int = 3):
        check_int("pes", pes, 1, MASK_BITS)
        check_pow2("lines", lines, 2, 1 << SPM_BITS)
        check_int("t_vsm", t_vsm, 1, 32)
        check_int("t_tsv", t_tsv, 0, 32)
        check_int("tag_bits", tag_bits, 1, 16)
        self.pes, self.lines, self.t_vsm, self.t_tsv = pes, lines, t_vsm, t_tsv
        self.tag_bits = tag_bits
        self.addr_bits = max(1, ceil_log2(lines))
        self.latencies = {"pe": t_tsv + t_vsm, "core": t_vsm, "ext": t_vsm}
        near = SPMPortSignature(addr_bits=self.addr_bits, latency=t_vsm)
        super().__init__({
            "pe": In(SPMPortSignature(addr_bits=self.addr_bits,
                                      latency=t_tsv + t_vsm)).array(pes),
            "core": In(near),
            "reply": In(stream.Signature(reply_layout(tag_bits))),
            "landed": Out(landed_signature(tag_bits)),
            "ext": In(near),
        })

    def elaborate(self, platform):
        m = Module()
        P = self.pes
        ab = ceil_log2(self.lines)
        m.submodules.mem = mem = sram_leaf(width=VECTOR_BITS, depth=self.lines, lanes=LANES)

        # Clients: (valid, we, addr, wdata, wmask) in round-robin order.
        rep = self.reply
        clients = [(p.valid, p.we, p.addr, p.wdata, p.wmask) for p in self.pe]
        clients.append((self.core.valid, self.core.we, self.core.addr, self.core.wdata,
                        self.core.wmask))
        clients.append((rep.valid, 1, rep.payload.vsm[:self.addr_bits], rep.payload.data,
                        (1 << LANES) - 1))
        clients.append((self.ext.valid, self.ext.we, self.ext.addr, self.ext.wdata,
                        self.ext.wmask))
        N = len(clients)
        REPLY = P + 1
        req = Cat(*(c[0] for c in clients))
        last = Signal(range(N), init=N - 1)     # the previous grant
        # Priority starts right after the previous grant: look first at the
        # clients above it, then at all of them.
        above = Signal(N)
        m.d.comb += above.eq(req & ~((Const(2, N + 1) << last) - 1)[:N])
        grant = Signal(range(N))
        any_req = req.any()
        for i in reversed(range(N)):
            with m.If(req[i]):
                m.d.comb += grant.eq(i)
        with m.If(above.any()):
            for i in reversed(range(N)):
                with m.If(above[i]):
                    m.d.comb += grant.eq(i)
        with m.If(any_req):
            m.d.sync += last.eq(grant)

        we = Signal()
        with m.Switch(grant):
            for i, (_v, c_we, c_addr, c_wdata, c_wmask) in enumerate(clients):
                with m.Case(i):
                    m.d.comb += [we.eq(c_we), mem.r_addr.eq(c_addr[:ab]),
                                 mem.w_addr.eq(c_addr[:ab]), mem.w_data.eq(c_wdata),
                                 mem.w_en.eq(Mux(any_req & c_we, c_wmask, 0))]
        ports = [*self.pe, self.core, None, self.ext]
        for i, port in enumerate(ports):
            if port is not None:
                m.d.comb += port.ready.eq(any_req & (grant == i))
        m.d.comb += [rep.ready.eq(any_req & (grant == REPLY)),
                     self.landed.valid.eq(any_req & (grant == REPLY)),
                     self.landed.tag.eq(rep.payload.tag)]

        # Read returns: one delay line of (valid, client) and data, tapped at each
        # port's latency.
        L = self.t_tsv + self.t_vsm
        rv = [Signal(name=f"rv{i}") for i in range(L)]
        rc = [Signal(range(N), name=f"rc{i}") for i in range(L)]
        rd = [mem.r_data] + [Signal(VECTOR_BITS, name=f"rd{i}") for i in range(1, L)]
        m.d.sync += [rv[0].eq(any_req & ~we), rc[0].eq(grant)]
        for i in range(1, L):
            m.d.sync += [rv[i].eq(rv[i - 1]), rc[i].eq(rc[i - 1]), rd[i].eq(rd[i - 1])]
        for i, port in enumerate(ports):
            if port is None:
                continue
            lat = L if i < P else self.t_vsm
            m.d.comb += [port.rvalid.eq(rv[lat - 1] & (rc[lat - 1] == i)),
                         port.rdata.eq(rd[lat - 1])]
        return m


def from_config(cfg, **overrides) -> VSM:
    """The VSM of one vault of ``cfg.ipim`` (tags as wide as the control core's)."""
    c = cfg.ipim
    kw = {"pes": c.pes, "lines": c.vsm_lines, "t_vsm": c.t_vsm, "t_tsv": c.t_tsv,
          "tag_bits": max(1, ceil_log2(c.inst_queue))}
    kw.update(overrides)
    return VSM(**kw)
