"""The vault's network interface controller (NIC, Fig. 2b): iPIM's remote ``req``
over the cube's mesh, both ends of it.

A ``req`` executes in three steps (Sec. IV-D):

1. **Request.** The control core hands the ``req`` to the NIC on ``req`` (the
   payload of :func:`~pimforge.rtl.ipim.core.req_layout`). The NIC sends it as a
   class-0 message of :data:`REQUEST` to the vault ``vault`` of the mesh (node
   ``vault``: column ``vault % cols``, row ``vault // cols``; a vault may name
   itself, the router's local port turns the message round).
2. **Service.** The NIC of the remote vault takes the message into one of its
   ``2**tag_bits`` service slots and adds the read to the DRAM request queue of
   PE ``pg * pes_per_pg + pe`` through that PE's ``remote`` port
   (:class:`~pimforge.rtl.ipim.bus.RemoteBankSignature`, the slot number as the
   tag): the PE's bank controller schedules it among the PE's own requests.
   The line comes back into the slot.
3. **Reply.** A slot holding its line sends it back as a class-1 message of
   :data:`REPLY` to the requesting node, whose NIC passes it on ``reply`` to its
   VSM; the VSM writes the line and reports ``landed`` to the core, which
   retires the ``req``.

Requests and replies travel in separate message classes (their own VCs in the
mesh and streams in the network interface), so a vault that holds requests
back while its slots are full never blocks the replies that free them: no
protocol deadlock. Every message is delivered (the mesh drops nothing), so
there is no acknowledgement, as in the paper.

Simplifications: the line waits for its reply in the slot (a register) rather
than in the remote vault's VSM, which the paper uses as that buffer; the VSM's
bandwidth is not spent on it. A cube has no SERDES links here: a ``req`` naming
another cube (``chip``), or a PG/PE the vault does not have, is dropped and
raises the sticky ``error`` (a program error the driver reports; the issuing
vault then waits for ever, as it would for a lost message).
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.crossbar import rr_pick
from ..noc.flit import NoCLink
from ..noc.ni import NetworkInterface
from ..params import check, check_int
from .bus import VECTOR_BITS, RemoteBankSignature
from .core import reply_layout, req_layout
from .isa import DRAM_BITS, SPM_BITS

__all__ = ["VaultNIC", "request_layout", "reply_message_layout", "from_config"]

#: Message class of requests and of replies on the network interface.
REQUEST, REPLY = 0, 1


def request_layout(tag_bits: int) -> data.StructLayout:
    """A ``req`` on the network: the remote PE and bank line, and where the line goes
    in the requester's VSM (``vsm``, ``tag`` echoed by the reply)."""
    return data.StructLayout({"pg": 4, "pe": 4, "dram": DRAM_BITS, "vsm": SPM_BITS,
                              "tag": tag_bits})


def reply_message_layout(tag_bits: int) -> data.StructLayout:
    """A ``req``'s reply on the network: the payload of the VSM's ``reply`` port."""
    return reply_layout(tag_bits)


class VaultNIC(wiring.Component):
    """Sends a vault's ``req`` into the mesh and serves the ``req`` of other vaults from
    its PEs' banks (see the module docstring).

    Parameters
    ----------
    link : NoCLink.Signature
        The cube mesh's links (one node per vault).
    depth : int
        Flits per VC buffer of the mesh's routers.
    packet_flits : int
        Longest message of the network interface; a reply (``128 + 16 + tag_bits``
        bits) must fit.
    tag_bits : int
        The control core's issued-instruction queue tag width.
    pgs, pes_per_pg : int
        The vault's PGs and PEs per PG.
    slot_bits : int
        ``2**slot_bits`` service slots: remote reads this vault serves at once
        (the PEs' ``remote`` tag width).

    Attributes
    ----------
    node : In
        This vault's node number in the mesh (``vault``).
    req : In(stream.Signature(req_layout(tag_bits)))
        From the control core's ``nic_req``.
    reply : Out(stream.Signature(reply_layout(tag_bits)))
        Into the VSM's ``reply``.
    pe : Out(RemoteBankSignature).array(pes)
        Into each PE's ``remote`` port.
    net_out, net_in : Out(link), In(link)
        To and from the router's local port.
    error : Out(1)
        Sticky: a ``req`` for another cube or for a PE that does not exist.
    perf : Out(VaultNIC.PerfSignature)
        ``sent`` requests, ``served`` remote reads, ``landed`` replies received.
    latencies : dict
        ``reply_flits`` and ``request_flits``: message lengths on the mesh.
    """

    class PerfSignature(wiring.Signature):
        """The NIC's counters (32 bits each, cleared by reset).

        Members
        -------
        sent, served, received : Out(32)
        """

        def __init__(self):
            super().__init__({n: Out(32) for n in ("sent", "served", "received")})

        def __eq__(self, other):
            return type(other) is type(self)

        def __hash__(self):
            return hash(type(self))

        def __repr__(self):
            return "VaultNIC.PerfSignature()"

    def __init__(self, *, link: NoCLink.Signature, depth: int, packet_flits: int,
                 tag_bits: int, pgs: int, pes_per_pg: int, slot_bits: int = 2):
        check_int("tag_bits", tag_bits, 1, 16)
        check_int("pgs", pgs, 1, 16)
        check_int("pes_per_pg", pes_per_pg, 1, 16)
        check_int("slot_bits", slot_bits, 1, 8)
        check(link.rows * link.cols >= 2, "link", link, "a mesh of at least two vaults")
        self.ni = NetworkInterface(link=link, depth=depth, packet_flits=packet_flits,
                                   classes=2)
        self.link, self.tag_bits = link, tag_bits
        self.pgs, self.pes_per_pg, self.slot_bits = pgs, pes_per_pg, slot_bits
        self.request_layout = request_layout(tag_bits)
        self.reply_message_layout = reply_message_layout(tag_bits)
        room = packet_flits * link.flit_bits
        for what, lay in (("request", self.request_layout), ("reply",
                                                            self.reply_message_layout)):
            check(lay.size <= room, "packet_flits", packet_flits,
                  f"enough for a {lay.size}-bit {what} in {link.flit_bits}-bit flits "
                  f"(at least {-(-lay.size // link.flit_bits)})")
        self.latencies = {
            "request_flits": -(-self.request_layout.size // link.flit_bits),
            "reply_flits": -(-self.reply_message_layout.size // link.flit_bits)}
        pes = pgs * pes_per_pg
        super().__init__({
            "node": In(link.flit_layout["src"].shape),
            "req": In(stream.Signature(req_layout(tag_bits))),
            "reply": Out(stream.Signature(reply_layout(tag_bits))),
            "pe": Out(RemoteBankSignature(dram_bits=DRAM_BITS, tag_bits=slot_bits)).array(pes),
            "net_out": Out(link),
            "net_in": In(link),
            "error": Out(1),
            "perf": Out(self.PerfSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        ni = m.submodules.ni = self.ni
        cols = self.link.cols
        pes = self.pgs * self.pes_per_pg
        m.d.comb += ni.node.eq(self.node)
        wiring.connect(m, wiring.flipped(self.net_out), ni.net_out)
        wiring.connect(m, wiring.flipped(self.net_in), ni.net_in)
        error = Signal()

        # ---- 1. requests of this vault's core: out as class-0 messages -----------------
        rq = self.req.payload
        send = ni.send[REQUEST]
        msg = Signal(self.request_layout)
        m.d.comb += [msg.pg.eq(rq.pg), msg.pe.eq(rq.pe), msg.dram.eq(rq.dram),
                     msg.vsm.eq(rq.vsm), msg.tag.eq(rq.tag)]
        # One cube: its chip number is 0 (the driver gives A3 = 0 to every PE).
        bad_req = Signal()
        m.d.comb += bad_req.eq((rq.chip != 0) | (rq.vault >= self.link.rows * cols))
        m.d.comb += [send.valid.eq(self.req.valid & ~bad_req),
                     send.payload.dest_x.eq(rq.vault % cols),
                     send.payload.dest_y.eq(rq.vault // cols),
                     send.payload.flits.eq(self.latencies["request_flits"]),
                     send.payload.data.eq(msg.as_value()),
                     self.req.ready.eq(send.ready | bad_req)]
        with m.If(self.req.valid & bad_req):
            m.d.comb += error.eq(1)
        with m.If(send.valid & send.ready):
            m.d.sync += self.perf.sent.eq(self.perf.sent + 1)

        # ---- 2. requests of other vaults: service slots, the PEs' bank queues ----------
        S = 1 << self.slot_bits
        slot_l = data.StructLayout({"busy": 1, "have": 1, "src": self.node.shape(),
                                    "vsm": SPM_BITS, "tag": self.tag_bits,
                                    "data": VECTOR_BITS})
        slots = Array(Signal(slot_l, name=f"slot{i}") for i in range(S))
        free = Signal(self.slot_bits)
        any_free = Signal()
        for i in reversed(range(S)):
            with m.If(~slots[i].busy):
                m.d.comb += [free.eq(i), any_free.eq(1)]
        inc = ni.recv[REQUEST]
        im = data.View(self.request_layout, inc.payload.data[:self.request_layout.size])
        target = Signal(8)
        m.d.comb += target.eq(im.pg * self.pes_per_pg + im.pe)
        bad_in = Signal()
        m.d.comb += bad_in.eq((im.pg >= self.pgs) | (im.pe >= self.pes_per_pg))
        take = Signal()
        for p in range(pes):
            port = self.pe[p].req
            sel = ~bad_in & (target == p)
            m.d.comb += [port.valid.eq(inc.valid & any_free & sel),
                         port.payload.dram.eq(im.dram), port.payload.tag.eq(free)]
            with m.If(sel & port.ready & port.valid):
                m.d.comb += take.eq(1)
        m.d.comb += inc.ready.eq(take | bad_in)
        with m.If(inc.valid & bad_in):
            m.d.comb += error.eq(1)
        with m.If(take):
            m.d.sync += [slots[free].busy.eq(1), slots[free].have.eq(0),
                         slots[free].src.eq(inc.payload.src), slots[free].vsm.eq(im.vsm),
                         slots[free].tag.eq(im.tag),
                         self.perf.served.eq(self.perf.served + 1)]
        # Each slot's tag is unique in the vault, so the PEs' lines land in distinct
        # slots and are all taken in the cycle they arrive.
        for p in range(pes):
            resp = self.pe[p].resp
            m.d.comb += resp.ready.eq(1)
            with m.If(resp.valid):
                m.d.sync += [slots[resp.payload.tag].data.eq(resp.payload.data),
                             slots[resp.payload.tag].have.eq(1)]

        # ---- 3. replies: out as class-1 messages, in round robin over the slots --------
        # The network interface reads a message over several cycles (one flit each):
        # the slot being sent is latched and held until the tail, whatever other slots
        # fill meanwhile.
        out = ni.send[REPLY]
        cur = Signal(self.slot_bits)
        cur_v = Signal()
        pick = Signal()
        m.d.comb += pick.eq(~cur_v)
        any_have, grant = rr_pick(m, [s.have for s in slots], pick, "reply")
        with m.If(pick & any_have):
            m.d.sync += cur_v.eq(1)
            for i in range(S):
                with m.If(grant[i]):
                    m.d.sync += cur.eq(i)
        rmsg = Signal(self.reply_message_layout)
        s = slots[cur]
        m.d.comb += [out.valid.eq(cur_v), out.payload.dest_x.eq(s.src % cols),
                     out.payload.dest_y.eq(s.src // cols),
                     rmsg.vsm.eq(s.vsm), rmsg.tag.eq(s.tag), rmsg.data.eq(s.data),
                     out.payload.flits.eq(self.latencies["reply_flits"]),
                     out.payload.data.eq(rmsg.as_value())]
        with m.If(out.valid & out.ready):
            m.d.sync += [s.busy.eq(0), s.have.eq(0), cur_v.eq(0)]

        # ---- replies to this vault's requests: into the VSM ----------------------------
        back = ni.recv[REPLY]
        bm = data.View(self.reply_message_layout,
                       back.payload.data[:self.reply_message_layout.size])
        m.d.comb += [self.reply.valid.eq(back.valid), self.reply.payload.eq(bm),
                     back.ready.eq(self.reply.ready)]
        with m.If(back.valid & back.ready):
            m.d.sync += self.perf.received.eq(self.perf.received + 1)

        with m.If(error):
            m.d.sync += self.error.eq(1)
        return m


def from_config(cfg) -> VaultNIC:
    """The NIC of one vault of ``cfg.ipim`` on the cube mesh (``ipim.mesh_rows`` x
    ``ipim.mesh_cols``; VCs, flit width, buffers and message length from ``cfg.noc``)."""
    c, n = cfg.ipim, cfg.noc
    return VaultNIC(
        link=NoCLink.Signature(rows=c.mesh_rows, cols=c.mesh_cols, vcs=n.vcs,
                               flit_bits=n.flit_bits),
        depth=n.buffer_depth, packet_flits=n.packet_flits,
        tag_bits=max(1, ceil_log2(c.inst_queue)), pgs=c.pgs, pes_per_pg=c.pes_per_pg,
        slot_bits=c.remote_slot_bits)
