"""The vault request port family: request and response streams of one vault controller."""

from __future__ import annotations

import enum

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["HOST", "PE", "Cmd", "CmdSignature", "DRAMArraySignature", "VaultPortSignature"]

HOST, PE = 0, 1  # request class: host (crossbar) or the vault's own PEs


class Cmd(enum.IntEnum):
    """DRAM command codes on a controller's command-observation port."""
    NOP = 0
    ACT = 1
    RD = 2
    WR = 3
    PRE = 4
    REF = 5


class VaultPortSignature(wiring.Signature):
    """Request/response port of a vault controller (initiator side).

    Every request is answered by exactly one response, in the order the
    scheduler served the requests (not necessarily the request order); the
    ``tag`` tells them apart.

    Parameters
    ----------
    bank_bits, row_bits, col_bits : int
        Widths of the decoded DRAM address.
    tag_bits : int
        Width of the tag returned with the response.
    data_bits : int
        Block width in bits (128 for 16 B blocks).

    Members
    -------
    req : Out(stream.Signature(req_layout))
        One block access: ``we``, ``cls`` (0 host, 1 PE), ``bank``, ``row``,
        ``col``, ``tag`` and the write ``data``.
    resp : In(stream.Signature(resp_layout))
        ``we``, ``tag`` and the read ``data`` (zero for a write).
    """

    def __init__(self, *, bank_bits: int, row_bits: int, col_bits: int, tag_bits: int,
                 data_bits: int = 128):
        check_int("bank_bits", bank_bits, 1, 8)
        check_int("row_bits", row_bits, 1, 24)
        check_int("col_bits", col_bits, 1, 12)
        check_int("tag_bits", tag_bits, 1, 32)
        check_int("data_bits", data_bits, 8, 2048)
        self._bank_bits, self._row_bits, self._col_bits = bank_bits, row_bits, col_bits
        self._tag_bits, self._data_bits = tag_bits, data_bits
        super().__init__({
            "req": Out(stream.Signature(self.req_layout)),
            "resp": In(stream.Signature(self.resp_layout)),
        })

    @property
    def bank_bits(self) -> int:
        return self._bank_bits

    @property
    def row_bits(self) -> int:
        return self._row_bits

    @property
    def col_bits(self) -> int:
        return self._col_bits

    @property
    def tag_bits(self) -> int:
        return self._tag_bits

    @property
    def data_bits(self) -> int:
        return self._data_bits

    @property
    def req_layout(self) -> data.StructLayout:
        """Payload of a request."""
        return data.StructLayout({
            "we": 1, "cls": 1, "bank": self.bank_bits, "row": self.row_bits,
            "col": self.col_bits, "tag": self.tag_bits, "data": self.data_bits})

    @property
    def resp_layout(self) -> data.StructLayout:
        """Payload of a response."""
        return data.StructLayout({"we": 1, "tag": self.tag_bits, "data": self.data_bits})

    def _key(self):
        return (self.bank_bits, self.row_bits, self.col_bits, self.tag_bits, self.data_bits)

    def __eq__(self, other):
        return isinstance(other, VaultPortSignature) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"VaultPortSignature(bank_bits={self.bank_bits}, row_bits={self.row_bits}, "
                f"col_bits={self.col_bits}, tag_bits={self.tag_bits}, "
                f"data_bits={self.data_bits})")


class _WidthsSignature(wiring.Signature):
    """A signature fully described by a few integer widths (equality, hash, repr)."""

    _PARAMS: tuple[str, ...] = ()

    def _key(self):
        return tuple(getattr(self, n) for n in self._PARAMS)

    def __eq__(self, other):
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self):
        return hash((type(self), self._key()))

    def __repr__(self):
        args = ", ".join(f"{n}={getattr(self, n)}" for n in self._PARAMS)
        return f"{type(self).__name__}({args})"


class DRAMArraySignature(_WidthsSignature):
    """A vault controller's port to its DRAM array (controller side).

    The array is a simulation model (the TSV data path): it is read or
    written in the cycle of the RD/WR command, and a read's word is expected
    on ``rdata`` one cycle later.

    Parameters
    ----------
    addr_bits : int
        Width of the array address (bank, row, column; column lowest).
    data_bits : int
        Block width in bits.

    Members
    -------
    re, we : Out(1)
        Read or write this cycle.
    addr : Out(addr_bits)
        The block.
    wdata : Out(data_bits)
        Data of a write.
    rdata : In(data_bits)
        Data of the read of the previous cycle.
    """

    _PARAMS = ("addr_bits", "data_bits")

    def __init__(self, *, addr_bits: int, data_bits: int):
        check_int("addr_bits", addr_bits, 1, 48)
        check_int("data_bits", data_bits, 8, 2048)
        self._addr_bits, self._data_bits = addr_bits, data_bits
        super().__init__({"re": Out(1), "we": Out(1), "addr": Out(addr_bits),
                          "wdata": Out(data_bits), "rdata": In(data_bits)})

    @property
    def addr_bits(self) -> int:
        return self._addr_bits

    @property
    def data_bits(self) -> int:
        return self._data_bits


class CmdSignature(_WidthsSignature):
    """The DRAM command a vault controller issues this cycle (observation only).

    Parameters
    ----------
    bank_bits, row_bits, col_bits : int
        Widths of the command's address fields.

    Members
    -------
    valid : Out(1)
        A command issues.
    kind : Out(3)
        Its :class:`Cmd` code (``REF`` covers all banks).
    bank, row, col : Out
        Its address (``col`` zero unless RD/WR; ``row`` of a PRE is the row closed).
    """

    _PARAMS = ("bank_bits", "row_bits", "col_bits")

    def __init__(self, *, bank_bits: int, row_bits: int, col_bits: int):
        check_int("bank_bits", bank_bits, 1, 8)
        check_int("row_bits", row_bits, 1, 24)
        check_int("col_bits", col_bits, 1, 12)
        self._bank_bits, self._row_bits, self._col_bits = bank_bits, row_bits, col_bits
        super().__init__({"valid": Out(1), "kind": Out(3), "bank": Out(bank_bits),
                          "row": Out(row_bits), "col": Out(col_bits)})

    @property
    def bank_bits(self) -> int:
        return self._bank_bits

    @property
    def row_bits(self) -> int:
        return self._row_bits

    @property
    def col_bits(self) -> int:
        return self._col_bits
