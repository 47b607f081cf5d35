"""The flit and the credit-based link of the mesh NoC.

A link carries at most one flit per cycle from a sender to a receiver's input
buffers, and returns credits the other way: one pulse on ``credit[v]`` for
every flit the receiver has taken out of its VC ``v`` buffer. A sender starts
with ``depth`` credits per VC and sends on VC ``v`` only while it has one, so
a receiver's buffer never overflows and there is no ``ready``.
"""

from __future__ import annotations

from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_int

__all__ = ["EAST", "LOCAL", "NORTH", "PORTS", "PORT_NAMES", "SOUTH", "WEST", "NoCLink",
           "flit_layout"]

#: Router port indices; north is row y-1, south row y+1, east column x+1.
LOCAL, EAST, WEST, NORTH, SOUTH = range(5)
PORTS = 5
PORT_NAMES = ("local", "east", "west", "north", "south")


def flit_layout(*, rows: int, cols: int, vcs: int, flit_bits: int) -> data.StructLayout:
    """One flit: ``payload``, ``vc``, ``head``, ``tail``, ``ordered``, ``dest_x``,
    ``dest_y``, ``src``.

    The routing fields (destination, source node) travel beside the payload of
    every flit, as a sideband, so that the payload bits are all the user's; the
    routers read them from head flits only. ``ordered``: the packet keeps its VC
    index on every hop, so that the packets its source sends on one VC arrive in
    order; other packets take any free VC of their class at every router.
    """
    return data.StructLayout({
        "payload": flit_bits,
        "vc": max(1, ceil_log2(vcs)),
        "head": 1,
        "tail": 1,
        "ordered": 1,
        "dest_x": max(1, ceil_log2(cols)),
        "dest_y": max(1, ceil_log2(rows)),
        "src": max(1, ceil_log2(rows * cols)),
    })


class NoCLink:
    """Namespace of the link signature."""

    class Signature(wiring.Signature):
        """One direction of a mesh link, seen from the sender.

        Parameters
        ----------
        rows, cols : int
            Mesh size (the widths of the coordinates and of the source node).
        vcs : int
            Virtual channels.
        flit_bits : int
            Payload bits of a flit.

        Members
        -------
        valid : Out(1)
            A flit is on the link this cycle; the receiver always takes it.
        flit : Out(flit_layout)
            The flit; ``vc`` names the receiver's buffer.
        credit : In(vcs)
            ``credit[v]``: the receiver freed one slot of its VC ``v`` buffer.
        """

        def __init__(self, *, rows: int, cols: int, vcs: int, flit_bits: int):
            check_int("rows", rows, 1, 16)
            check_int("cols", cols, 1, 16)
            check_int("vcs", vcs, 1, 8)
            check_int("flit_bits", flit_bits, 1, 1024)
            self.rows, self.cols, self.vcs, self.flit_bits = rows, cols, vcs, flit_bits
            super().__init__({
                "valid": Out(1),
                "flit": Out(self.flit_layout),
                "credit": In(vcs),
            })

        @property
        def flit_layout(self) -> data.StructLayout:
            return flit_layout(rows=self.rows, cols=self.cols, vcs=self.vcs,
                               flit_bits=self.flit_bits)

        def _key(self):
            return (self.rows, self.cols, self.vcs, self.flit_bits)

        def __eq__(self, other):
            return isinstance(other, NoCLink.Signature) and self._key() == other._key()

        def __hash__(self):
            return hash(self._key())

        def __repr__(self):
            return (f"NoCLink.Signature(rows={self.rows}, cols={self.cols}, vcs={self.vcs}, "
                    f"flit_bits={self.flit_bits})")
