"""Mesh network-on-chip parameters, shared by iPIM's cube mesh and NicePIM's PIM-node mesh."""

from __future__ import annotations

from dataclasses import dataclass

from .base import check, check_int, check_pow2

__all__ = ["NoCConfig"]


@dataclass(frozen=True)
class NoCConfig:
    """A 2D mesh of input-queued wormhole routers with virtual channels.

    Parameters
    ----------
    rows, cols : int
        Routers (nodes) per column and per row of the mesh; node ``y * cols + x``
        sits at column ``x``, row ``y``.
    flit_bits : int
        Payload bits of one flit (the routing fields travel beside them).
    vcs : int
        Virtual channels per link.
    buffer_depth : int
        Flits of one input VC buffer, which is also the credits a sender starts with
        (at least 2: the credit loop is two cycles).
    packet_flits : int
        Longest packet the network interface sends (its reassembly buffer).
    classes : int
        Message classes of the network interface, each on its own VCs and streams
        (2: iPIM's remote ``req`` requests and their replies, so that replies never
        wait behind requests: no protocol deadlock); ``vcs`` must be a multiple of
        it. The routers do not look at it.
    """

    rows: int = 4
    cols: int = 4
    flit_bits: int = 64
    vcs: int = 2
    buffer_depth: int = 4
    packet_flits: int = 4
    classes: int = 2

    def __post_init__(self):
        check_int("noc.rows", self.rows, 1, 16)
        check_int("noc.cols", self.cols, 1, 16)
        check(self.rows * self.cols >= 2, "noc.cols", self.cols,
              "at least 2 when noc.rows is 1 (a mesh has at least two nodes)")
        # The traffic driver keeps its check fields in the low 32 bits of a flit.
        check_pow2("noc.flit_bits", self.flit_bits, 32, 512)
        check_int("noc.vcs", self.vcs, 1, 8)
        # A credit comes back two cycles after its flit was sent, so two flits per VC
        # keep a link busy (and Amaranth's one-entry FIFO does not lint).
        check_int("noc.buffer_depth", self.buffer_depth, 2, 64)
        check_int("noc.packet_flits", self.packet_flits, 1, 16)
        check_int("noc.classes", self.classes, 1, 2)
        check(self.vcs % self.classes == 0, "noc.vcs", self.vcs,
              f"a multiple of noc.classes = {self.classes}")

    @property
    def nodes(self) -> int:
        """Routers of the mesh."""
        return self.rows * self.cols
