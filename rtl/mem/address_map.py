"""The two HMC address mappings, defined once for RTL, data placement and golden models.

Both mappings are written a single time, in :meth:`AddressMap.decode`, with
nothing but shifts, masks, ``|`` and a ``mux`` taken from an *ops* object. The
same code then runs on Python ints (placement, golden model), on numpy arrays
(bulk placement of traces) and on Amaranth values (the decoder in the
crossbar), so the three can never disagree.

Byte address layout (``a`` = ``addr_bits`` wide, ``B = a >> 4`` the block address):

``default`` (HMC low interleave, PIM-CapsNet Fig. 13a), ``s = log2(max_block/16)``::

    B = [ subpage-in-bank | bank | vault | block-in-subpage (s bits) ]

``capsnet`` (Fig. 13b): vault at the top; bits 1-3 of the ignored low nibble
give the sub-page size ``16 << s`` B (``s`` = 0..4, values 5-7 read as 4)::

    B = [ vault | subpage-in-bank | bank | block-in-subpage (s bits) ]

So consecutive blocks of one sub-page (one PE request) stay in one bank and
row, while consecutive sub-pages (concurrent PE requests) go to different
banks. Inside a bank, ``(subpage << s) | block`` is the block index; its low
``col_bits`` are the column and the rest the row.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HDL_OPS", "INT_OPS", "NUMPY_OPS", "AddressMap", "Decoded"]


class _IntOps:
    @staticmethod
    def mux(c, a, b):
        return a if c else b

    @staticmethod
    def narrow(x, bits):
        return x

    @staticmethod
    def select(i, options):
        return options[i]


class _NumpyOps:
    @staticmethod
    def mux(c, a, b):
        import numpy as np
        return np.where(c, a, b)

    @staticmethod
    def narrow(x, bits):
        return x

    @staticmethod
    def select(i, options):
        import numpy as np
        conds = [i == k for k in range(len(options))]
        return Decoded(*(np.select(conds, [getattr(o, f) for o in options])
                         for f in ("vault", "bank", "row", "col", "subpage_log")))


class _HdlOps:
    @staticmethod
    def mux(c, a, b):
        from amaranth.hdl import Mux
        return Mux(c, a, b)

    @staticmethod
    def narrow(x, bits):
        # `&` keeps the wider operand's width; a shift amount must be narrow.
        return x[:bits]

    @staticmethod
    def select(i, options):
        from amaranth.hdl import Array, Value
        return Decoded(*(Array(Value.cast(getattr(o, f)) for o in options)[i]
                         for f in ("vault", "bank", "row", "col", "subpage_log")))


INT_OPS, NUMPY_OPS, HDL_OPS = _IntOps(), _NumpyOps(), _HdlOps()

MAX_SUBPAGE_LOG = 4  # 256 B = 16 blocks of 16 B


@dataclass(frozen=True)
class Decoded:
    vault: object
    bank: object
    row: object
    col: object
    subpage_log: object


@dataclass(frozen=True)
class AddressMap:
    """One mapping of a cube geometry.

    Parameters
    ----------
    kind : str
        ``"default"`` or ``"capsnet"``.
    vault_bits, bank_bits, row_bits, col_bits : int
        Field widths (vaults, banks, rows, columns are powers of two).
    max_block_bytes : int
        Sub-page size of the default mapping.
    """

    kind: str
    vault_bits: int
    bank_bits: int
    row_bits: int
    col_bits: int
    max_block_bytes: int = 32

    def __post_init__(self):
        if self.kind not in ("default", "capsnet"):
            raise ValueError(f"mapping must be 'default' or 'capsnet', not {self.kind!r}")

    @classmethod
    def from_config(cls, hmc, kind: str | None = None) -> AddressMap:
        return cls(kind or hmc.mapping, hmc.vault_bits if hmc.vaults > 1 else 0,
                   hmc.bank_bits if hmc.banks_per_vault > 1 else 0, hmc.row_bits, hmc.col_bits,
                   hmc.max_block_bytes)

    @property
    def block_addr_bits(self) -> int:
        return self.vault_bits + self.bank_bits + self.row_bits + self.col_bits

    @property
    def addr_bits(self) -> int:
        return self.block_addr_bits + 4

    @property
    def default_subpage_log(self) -> int:
        return (self.max_block_bytes // 16).bit_length() - 1

    def decode(self, addr, ops=INT_OPS) -> Decoded:
        """Split byte address(es) *addr* into vault, bank, row, column (and sub-page log)."""
        blk = addr >> 4
        if self.kind == "default":
            return self._split(blk, self.default_subpage_log)
        ind = ops.narrow((addr >> 1) & 7, 3)
        # Indicator values 5-7 read as 256 B sub-pages; each sub-page size is a
        # fixed field layout, chosen by the indicator.
        return ops.select(ind, [self._split(blk, min(k, MAX_SUBPAGE_LOG)) for k in range(8)])

    def _split(self, blk, s: int) -> Decoded:
        """The field layout for sub-pages of ``16 << s`` bytes (constant shifts only)."""
        vb, bb, rb, cb = self.vault_bits, self.bank_bits, self.row_bits, self.col_bits
        inbank_bits = rb + cb
        low = blk & ((1 << s) - 1)
        if self.kind == "default":
            vault = (blk >> s) & ((1 << vb) - 1)
            bank = (blk >> (s + vb)) & ((1 << bb) - 1)
            sub = blk >> (s + vb + bb)
        else:
            vault = (blk >> (bb + inbank_bits)) & ((1 << vb) - 1)
            bank = (blk >> s) & ((1 << bb) - 1)
            sub = (blk & ((1 << (bb + inbank_bits)) - 1)) >> (s + bb)
        idx = ((sub << s) | low) & ((1 << inbank_bits) - 1)
        col = idx & ((1 << cb) - 1)
        row = (idx >> cb) & ((1 << rb) - 1)
        return Decoded(vault, bank, row, col, s)

    def encode(self, vault: int, bank: int, row: int, col: int, subpage_log: int | None = None
               ) -> int:
        """The byte address of a block (inverse of :meth:`decode`, Python ints)."""
        vb, bb, rb, cb = self.vault_bits, self.bank_bits, self.row_bits, self.col_bits
        idx = (row << cb) | col
        if self.kind == "default":
            s = self.default_subpage_log
            blk = (((idx >> s) << (s + vb + bb)) | (bank << (s + vb)) | (vault << s)
                   | (idx & ((1 << s) - 1)))
            return blk << 4
        s = MAX_SUBPAGE_LOG if subpage_log is None else subpage_log
        if not 0 <= s <= MAX_SUBPAGE_LOG:
            raise ValueError(f"subpage_log must be between 0 and {MAX_SUBPAGE_LOG}, not {s}")
        inv = ((idx >> s) << (s + bb)) | (bank << s) | (idx & ((1 << s) - 1))
        blk = (vault << (bb + rb + cb)) | inv
        return (blk << 4) | (s << 1)

    def vault_block_address(self, vault, word):
        """Cube byte address of the 16-byte block holding vault-local *word*.

        The one placement of a vault's data (the CapsNet compiler's and the
        ``hmc_capsnet`` operand ports'): vault-local block ``j = word // 4`` is
        the ``j``-th block of *vault* in ascending cube addresses. Capsnet
        mapping: the vault field on top, the largest (256 B) sub-page in the
        indicator bits 1-3; default mapping: the vault field above the
        ``max_block_bytes`` sub-page offset, so a vault's blocks interleave with
        the other vaults'. *word* (and *vault*) may be ints, integer numpy arrays
        or Amaranth values.
        """
        j = word >> 2
        if self.kind == "capsnet":
            blk = (vault << (self.bank_bits + self.row_bits + self.col_bits)) | j
            return (blk << 4) | (MAX_SUBPAGE_LOG << 1)
        s = self.default_subpage_log
        blk = ((j >> s) << (s + self.vault_bits)) | (vault << s) | (j & ((1 << s) - 1))
        return blk << 4

    @property
    def placement_subpage_bytes(self) -> int:
        """Bytes of vault-local data (:meth:`vault_block_address`) that stay in
        one bank before the next bank: the 256 B sub-page (capsnet) or the
        ``max_block_bytes`` interleave (default)."""
        s = MAX_SUBPAGE_LOG if self.kind == "capsnet" else self.default_subpage_log
        return 16 << s

    def with_subpage(self, addr: int, subpage_log: int) -> int:
        """Set the capsnet sub-page indicator (bits 1-3) of a byte address."""
        return (addr & ~0b1110) | (subpage_log << 1)
