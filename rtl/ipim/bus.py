"""The buses inside an iPIM vault: SIMB issue to the PEs, scratchpad ports, remote bank
reads, sync.

Written from the initiator's side; the serving block uses the flipped
signature.

Issue protocol (:class:`IssueSignature`, control core -> one PE)
----------------------------------------------------------------
The SIMB controller drives ``valid`` with the decoded instruction ``instr``
(:data:`~pimforge.rtl.ipim.isa.INSTRUCTION`) and its issued-instruction queue
slot ``tag`` to every PE whose ``simb_mask`` bit is set, in the same cycle,
and only in a cycle where all of those PEs have ``ready`` high (lock-step
issue, Sec. IV-B); the other PEs see ``valid`` low. A PE finishes each
instruction it took exactly once, by a one-cycle pulse of ``done`` with the
instruction's ``tag`` (in any order between instructions: a load can finish
after a later ``comp``). The controller clears the PE's bit of that slot and
retires the slot when no bit is left. ``ready`` may depend on ``valid``
only through registered state (no combinational loop through the core).

Scratchpad ports (:class:`SPMPortSignature`)
--------------------------------------------
One 128-bit line per access. The initiator holds ``valid``, ``we``, ``addr``,
``wdata`` and ``wmask`` (one bit per 32-bit lane) until ``ready``; a read's
data comes back ``latency`` cycles later (a property of the signature, the
``t_pgsm``/``t_vsm`` of the config) with ``rvalid``, in request order.

Remote bank reads (:class:`RemoteBankSignature`, the vault's request server -> one PE)
--------------------------------------------------------------------------------------
A ``req`` instruction of another vault reads one vector of this PE's bank; the
vault's request server hands it to the PE, which adds it to its bank's DRAM
request queue beside its own requests (Sec. IV-D). The server holds
``req.valid`` and the payload (``dram``, a bank vector address that wraps to the
PE's bank as the PE's own addresses do, and its ``tag``) until ``req.ready``;
``req.ready`` depends on the PE's registered state only. The PE answers every
request it took exactly once on ``resp``, with the request's ``tag`` and the
vector read, in any order between requests (the bank scheduler reorders them);
it holds ``resp.valid`` and the payload until ``resp.ready``. The server does
not reuse a tag before its response (so at most ``2**tag_bits`` requests are
outstanding). A request whose response has not been taken holds one of the PE's
bank slots, and a response held back waits at the head of the bank's response
FIFO, before the PE's own responses. Reads only: ``req`` (Table I) reads a
remote bank and writes the local VSM; nothing writes a remote bank.

Sync (:class:`SyncSignature`, control core -> the machine's barrier)
---------------------------------------------------------------------
The core raises ``arrive`` with ``phase`` once every instruction before its
``sync`` has retired, and holds it until ``proceed`` pulses; then it commits
the ``sync``.
"""

from __future__ import annotations

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int
from .isa import INSTRUCTION, LANES, SPM_BITS

__all__ = ["VECTOR_BITS", "BUSY_UNITS", "BUSY_LAYOUT", "IssueSignature", "SPMPortSignature",
           "RemoteBankSignature", "SyncSignature"]

#: One vector: a DataRF entry, a bank access, a scratchpad line.
VECTOR_BITS = 32 * LANES

#: The PE units whose busy cycles the control core counts (Fig. 13's utilizations).
BUSY_UNITS = ("simd", "alu", "arf", "drf", "pgsm", "vsm", "bank")
#: A PE's per-cycle busy bits, one per unit of :data:`BUSY_UNITS`.
BUSY_LAYOUT = data.StructLayout({u: 1 for u in BUSY_UNITS})


class IssueSignature(wiring.Signature):
    """SIMB broadcast to one PE (initiator: the control core).

    Parameters
    ----------
    tag_bits : int
        Width of an issued-instruction queue slot number.

    Members
    -------
    valid : Out(1)
    instr : Out(INSTRUCTION)
    tag : Out(tag_bits)
    ready : In(1)
        The PE can take an instruction this cycle.
    done : In(1)
        The PE finished the instruction of ``done_tag``.
    done_tag : In(tag_bits)
    """

    def __init__(self, *, tag_bits: int):
        check_int("tag_bits", tag_bits, 1, 16)
        self._tag_bits = tag_bits
        super().__init__({"valid": Out(1), "instr": Out(INSTRUCTION), "tag": Out(tag_bits),
                          "ready": In(1), "done": In(1), "done_tag": In(tag_bits)})

    @property
    def tag_bits(self) -> int:
        return self._tag_bits

    def __eq__(self, other):
        return type(other) is type(self) and other.tag_bits == self.tag_bits

    def __hash__(self):
        return hash((type(self), self.tag_bits))

    def __repr__(self):
        return f"IssueSignature(tag_bits={self.tag_bits})"


class SPMPortSignature(wiring.Signature):
    """One read/write port of a scratchpad (PGSM or VSM), initiator side.

    Parameters
    ----------
    addr_bits : int
        Line address width (at most :data:`~pimforge.rtl.ipim.isa.SPM_BITS`).
    latency : int
        Cycles from an accepted read to its ``rvalid``.

    Members
    -------
    valid, we : Out(1)
    addr : Out(addr_bits)
    wdata : Out(128)
    wmask : Out(4)
        Lanes written (bit ``i`` = bits ``[32i, 32i+32)``).
    ready : In(1)
    rvalid : In(1)
    rdata : In(128)
    """

    def __init__(self, *, addr_bits: int, latency: int):
        check_int("addr_bits", addr_bits, 1, SPM_BITS)
        check_int("latency", latency, 1, 64)
        self._addr_bits, self._latency = addr_bits, latency
        super().__init__({"valid": Out(1), "we": Out(1), "addr": Out(addr_bits),
                          "wdata": Out(VECTOR_BITS), "wmask": Out(LANES), "ready": In(1),
                          "rvalid": In(1), "rdata": In(VECTOR_BITS)})

    @property
    def addr_bits(self) -> int:
        return self._addr_bits

    @property
    def latency(self) -> int:
        return self._latency

    def __eq__(self, other):
        return (type(other) is type(self) and other.addr_bits == self.addr_bits
                and other.latency == self.latency)

    def __hash__(self):
        return hash((type(self), self.addr_bits, self.latency))

    def __repr__(self):
        return f"SPMPortSignature(addr_bits={self.addr_bits}, latency={self.latency})"


class RemoteBankSignature(wiring.Signature):
    """A remote ``req`` read of one PE's bank (initiator: the vault's request server).

    See the module docstring for the protocol.

    Parameters
    ----------
    dram_bits : int
        Width of the bank vector address (the PE's is
        :data:`~pimforge.rtl.ipim.isa.DRAM_BITS`).
    tag_bits : int
        Width of the tag that tells outstanding requests apart.

    Members
    -------
    req : Out(stream.Signature(StructLayout({"dram": dram_bits, "tag": tag_bits})))
        One bank vector read.
    resp : In(stream.Signature(StructLayout({"tag": tag_bits, "data": VECTOR_BITS})))
        The vector read, with the request's ``tag``.
    """

    def __init__(self, *, dram_bits: int, tag_bits: int):
        check_int("dram_bits", dram_bits, 1, 32)
        check_int("tag_bits", tag_bits, 1, 8)
        self._dram_bits, self._tag_bits = dram_bits, tag_bits
        super().__init__({
            "req": Out(stream.Signature(self.req_layout)),
            "resp": In(stream.Signature(self.resp_layout)),
        })

    @property
    def dram_bits(self) -> int:
        return self._dram_bits

    @property
    def tag_bits(self) -> int:
        return self._tag_bits

    @property
    def req_layout(self) -> data.StructLayout:
        """The request payload: ``dram`` address and ``tag``."""
        return data.StructLayout({"dram": self._dram_bits, "tag": self._tag_bits})

    @property
    def resp_layout(self) -> data.StructLayout:
        """The response payload: ``tag`` and the vector ``data``."""
        return data.StructLayout({"tag": self._tag_bits, "data": VECTOR_BITS})

    def __eq__(self, other):
        return (type(other) is type(self) and other.dram_bits == self.dram_bits
                and other.tag_bits == self.tag_bits)

    def __hash__(self):
        return hash((type(self), self.dram_bits, self.tag_bits))

    def __repr__(self):
        return f"RemoteBankSignature(dram_bits={self.dram_bits}, tag_bits={self.tag_bits})"


class SyncSignature(wiring.Signature):
    """A vault's side of the inter-vault barrier (Sec. IV-D).

    Members
    -------
    arrive : Out(1)
    phase : Out(16)
    proceed : In(1)
    """

    def __init__(self):
        super().__init__({"arrive": Out(1), "phase": Out(16), "proceed": In(1)})

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return "SyncSignature()"
