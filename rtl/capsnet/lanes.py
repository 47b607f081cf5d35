"""Lane bundles of the vault compute: the read, write and send ports of ``lanes`` lanes.

One bundle moves one 32-bit word per lane; lane ``l`` works on the word at
``addr + l * stride`` (vault-local word addresses, ``stride`` signed) and
``mask`` marks the live lanes. The signatures are written from the vault
compute's side (the initiator); the operand memory that serves them uses the
flipped signature. See :mod:`pimforge.rtl.capsnet.vault` for the protocol.
"""

from __future__ import annotations

from amaranth.hdl import signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["OPERAND_FIELDS", "LaneHintSignature", "LaneReadSignature", "LaneSendSignature",
           "LaneWriteSignature"]


class _LaneSignature(wiring.Signature):
    """Parameters shared by the three lane bundles (validated once here)."""

    def __init__(self, members: dict, *, lanes: int, addr_bits: int, stride_bits: int):
        check_int("lanes", lanes, 1, 64)
        check_int("addr_bits", addr_bits, 1, 64)
        check_int("stride_bits", stride_bits, 2, 64)
        self._lanes, self._addr_bits, self._stride_bits = lanes, addr_bits, stride_bits
        super().__init__(members)

    @property
    def lanes(self) -> int:
        return self._lanes

    @property
    def addr_bits(self) -> int:
        return self._addr_bits

    @property
    def stride_bits(self) -> int:
        return self._stride_bits

    def __eq__(self, other):
        return (type(other) is type(self) and other.lanes == self.lanes
                and other.addr_bits == self.addr_bits and other.stride_bits == self.stride_bits)

    def __hash__(self):
        return hash((type(self), self.lanes, self.addr_bits, self.stride_bits))

    def __repr__(self):
        return (f"{type(self).__name__}(lanes={self.lanes}, addr_bits={self.addr_bits}, "
                f"stride_bits={self.stride_bits})")


def _operand_members(lanes: int, addr_bits: int, stride_bits: int) -> dict:
    """The lane mask and both operands' lane-0 address and lane stride (read and hint)."""
    return {"mask": Out(lanes),
            "a_addr": Out(addr_bits), "a_stride": Out(signed(stride_bits)),
            "b_addr": Out(addr_bits), "b_stride": Out(signed(stride_bits))}


#: The members a read bundle and its prefetch hint share, in this order.
OPERAND_FIELDS = ("mask", "a_addr", "a_stride", "b_addr", "b_stride")


class LaneReadSignature(_LaneSignature):
    """Two-operand read bundle (initiator side).

    The initiator holds ``valid`` and every address until a cycle with
    ``ready``; in that cycle ``a_data``/``b_data`` carry lane ``l``'s words in
    bits ``[32l, 32l+32)``.

    Parameters
    ----------
    lanes : int
        Lanes of the bundle.
    addr_bits : int
        Width of a word address.
    stride_bits : int
        Width of a (signed) lane stride.

    Members
    -------
    valid : Out(1)
        A bundle is asked for.
    ready : In(1)
        The data are there this cycle.
    mask : Out(lanes)
        Live lanes.
    a_addr, b_addr : Out(addr_bits)
        Lane 0's word address of operands ``a`` and ``b``.
    a_stride, b_stride : Out(signed(stride_bits))
        Word distance of consecutive lanes.
    a_data, b_data : In(32 * lanes)
        The words, lane 0 lowest.
    """

    def __init__(self, *, lanes: int, addr_bits: int, stride_bits: int):
        super().__init__({
            "valid": Out(1), "ready": In(1),
            **_operand_members(lanes, addr_bits, stride_bits),
            "a_data": In(32 * lanes), "b_data": In(32 * lanes),
        }, lanes=lanes, addr_bits=addr_bits, stride_bits=stride_bits)


class LaneHintSignature(_LaneSignature):
    """Prefetch hint (initiator side): a read bundle announced ahead of its use.

    In a cycle with ``valid`` the initiator announces the next read bundle
    (the same ``mask``/addresses/strides it will later present on ``rd``, in
    the same order); at most a fixed number of announced bundles are unread
    at any time (the vault's prefetch depth), so the memory can keep one
    queue entry per hint. A memory may ignore hints; then ``rd`` alone
    decides (it is always complete).

    Parameters
    ----------
    lanes, addr_bits, stride_bits : int
        As :class:`LaneReadSignature`.

    Members
    -------
    valid : Out(1)
    mask : Out(lanes)
    a_addr, b_addr : Out(addr_bits)
    a_stride, b_stride : Out(signed(stride_bits))
    """

    def __init__(self, *, lanes: int, addr_bits: int, stride_bits: int):
        super().__init__({"valid": Out(1), **_operand_members(lanes, addr_bits, stride_bits)},
                         lanes=lanes, addr_bits=addr_bits, stride_bits=stride_bits)


class LaneWriteSignature(_LaneSignature):
    """Posted result bundle (initiator side): always accepted.

    Parameters
    ----------
    lanes, addr_bits, stride_bits : int
        As :class:`LaneReadSignature`.

    Members
    -------
    en : Out(1)
        A bundle is written this cycle.
    mask : Out(lanes)
        Live lanes.
    addr : Out(addr_bits)
        Lane 0's word address.
    stride : Out(signed(stride_bits))
        Word distance of consecutive lanes.
    data : Out(32 * lanes)
        The words, lane 0 lowest.
    """

    def __init__(self, *, lanes: int, addr_bits: int, stride_bits: int):
        super().__init__({
            "en": Out(1), "mask": Out(lanes), "addr": Out(addr_bits),
            "stride": Out(signed(stride_bits)), "data": Out(32 * lanes),
        }, lanes=lanes, addr_bits=addr_bits, stride_bits=stride_bits)


class LaneSendSignature(_LaneSignature):
    """Posted inter-vault copy (initiator side): a write bundle into vault ``peer``.

    Parameters
    ----------
    lanes, addr_bits, stride_bits : int
        As :class:`LaneReadSignature`.

    Members
    -------
    valid : Out(1)
        A bundle is sent this cycle.
    peer : Out(8)
        Destination vault.
    mask, addr, stride, data :
        As :class:`LaneWriteSignature`, addresses in the peer's words.
    """

    def __init__(self, *, lanes: int, addr_bits: int, stride_bits: int):
        super().__init__({
            "valid": Out(1), "peer": Out(8), "mask": Out(lanes), "addr": Out(addr_bits),
            "stride": Out(signed(stride_bits)), "data": Out(32 * lanes),
        }, lanes=lanes, addr_bits=addr_bits, stride_bits=stride_bits)
