"""The scratchpad access port: a synchronous SRAM-style request with a one-cycle response."""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SPMPort"]


class SPMPort:
    """Namespace of the scratchpad port signature."""

    class Signature(wiring.Signature):
        """One scratchpad port, seen from the requester (the accelerator).

        A request (``en``, ``we``, ``addr``, ``wdata``) is taken every cycle
        ``en`` is high; one cycle later ``rvalid`` answers it with ``rdata``
        (reads) and ``err``: 1 when the word's sector was not ON (the write
        was dropped and the read returns the poison pattern), when the address
        is outside the memory, or when the request lost arbitration for a
        shared port. An access is never silently served from an OFF sector.

        Parameters
        ----------
        addr_width : int
            Word-address width.
        data_width : int
            Word width.
        """

        def __init__(self, *, addr_width: int, data_width: int):
            if not isinstance(addr_width, int) or not 1 <= addr_width <= 32:
                raise ValueError(f"addr_width must be an integer between 1 and 32, "
                                 f"not {addr_width!r}")
            if not isinstance(data_width, int) or not 1 <= data_width <= 1024:
                raise ValueError(f"data_width must be an integer between 1 and 1024, "
                                 f"not {data_width!r}")
            self.addr_width = addr_width
            self.data_width = data_width
            super().__init__({
                "en": Out(1), "we": Out(1), "addr": Out(addr_width), "wdata": Out(data_width),
                "rvalid": In(1), "rdata": In(data_width), "err": In(1),
            })

        def __eq__(self, other):
            return (isinstance(other, SPMPort.Signature) and self.addr_width == other.addr_width
                    and self.data_width == other.data_width)

        def __hash__(self):
            return hash((self.addr_width, self.data_width))

        def __repr__(self):
            return (f"SPMPort.Signature(addr_width={self.addr_width}, "
                    f"data_width={self.data_width})")
