"""The vault request port family: request and response streams of one vault controller."""

from __future__ import annotations

import enum

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["HOST", "PE", "Cmd", "VaultPortSignature"]

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

    ``req`` carries one block access: ``we``, ``cls`` (0 host, 1 PE), ``bank``,
    ``row``, ``col``, ``tag`` and the write ``data``; ``resp`` returns ``tag``,
    ``we`` and the read ``data`` once per request, in the order the scheduler
    served them.

    Parameters
    ----------
    bank_bits, row_bits, col_bits : int
        Widths of the decoded DRAM address.
    tag_bits : int
        Width of the tag returned with the response.
    data_bits : int
        Block width in bits (128 for 16 B blocks).
    """

    def __init__(self, *, bank_bits: int, row_bits: int, col_bits: int, tag_bits: int,
                 data_bits: int = 128):
        for name, v, lo, hi in (("bank_bits", bank_bits, 1, 8), ("row_bits", row_bits, 1, 24),
                                ("col_bits", col_bits, 1, 12), ("tag_bits", tag_bits, 1, 32),
                                ("data_bits", data_bits, 8, 2048)):
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer between {lo} and {hi}, not {v!r}")
        self.bank_bits, self.row_bits, self.col_bits = bank_bits, row_bits, col_bits
        self.tag_bits, self.data_bits = tag_bits, data_bits
        self.req_layout = data.StructLayout({
            "we": 1, "cls": 1, "bank": bank_bits, "row": row_bits, "col": col_bits,
            "tag": tag_bits, "data": data_bits})
        self.resp_layout = data.StructLayout({"we": 1, "tag": tag_bits, "data": data_bits})
        super().__init__({
            "req": Out(stream.Signature(self.req_layout)),
            "resp": In(stream.Signature(self.resp_layout)),
        })

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
