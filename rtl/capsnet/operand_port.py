"""Operand/result adapter of one vault: lane bundles of the vault compute <-> 16 B block
requests on the vault's HMC PE port.

The vault compute (:mod:`pimforge.rtl.capsnet.vault`) reads two operands for
``lanes`` lanes per cycle (lane ``l`` at vault-local word ``addr + l*stride``),
posts result bundles (``wr``) and inter-vault copies (``send``), and holds
while ``rd.valid & ~rd.ready``. This adapter turns each bundle into block
requests on the PE port of :class:`~pimforge.rtl.mem.hmc_mem.HMCMemory`
(``we, addr, tag, data``; responses ``we, tag, data`` out of order), word
addresses becoming cube byte addresses through the placement the compiler
uses (``word_address``, :meth:`pimforge.rtl.mem.address_map.AddressMap.vault_block_address`).

Operation, one bundle at a time (simple and correct before fast):

* Posted writes and sends wait in one FIFO, in posting order. When idle the
  adapter serves the FIFO first and only then a pending read, so a read always
  sees every write posted before it (an instruction reads what the previous
  one wrote: the controller drains before the next instruction).
* Read bundle (``2*lanes`` word slots, ``a`` then ``b``): one request per
  distinct block (the slots of a block are struck off when its request is
  accepted), tag = slot index; each response is broadcast to every slot of its
  block, which takes its 32-bit word. When every response is in, ``rd.ready``
  is high for one cycle with the lane data.
* Read cache: each slot keeps the block it last fetched. A slot of a new
  bundle whose block is held by a slot of the same operand takes its word from
  there and requests nothing (a stream with ``x_se = 1`` reads each block
  once for four elements). The cache is emptied when a write or send bundle
  starts (it may change cached blocks) and on ``flush``, which the top drives
  with ``go``: between barriers only this port writes this vault's words that
  the vault reads (other vaults' sends land in words read after the next
  barrier, as the compiler guarantees), so cached blocks cannot go stale.
* Write/send bundle (``lanes`` words to the own vault or the peer): the lock
  of the destination vault is requested first (``lock_*``, granted by the
  top), because a block shared by two writers would otherwise lose one
  read-modify-write; then every distinct block is merged from its lanes (a
  later lane wins over an earlier one for the same word). Fully covered blocks
  are written directly; partial ones are read, merged with the lanes' words
  and written back. The lock is held until every write is acknowledged.

* Prefetch hints (``pf``, with ``prefetch`` > 0): the vault compute announces
  each read bundle up to ``capsnet.prefetch_bundles`` bundles before it presents
  it on ``rd`` (:class:`~pimforge.rtl.capsnet.lanes.LaneHintSignature`). The
  hints wait in a FIFO of ``prefetch`` entries; a prefetch walker takes them in
  order, at most ``LOOKAHEAD`` bundles ahead of the reads, and requests each
  distinct block of a hinted bundle that is not already in the prefetch buffer
  (``prefetch_blocks`` blocks, replaced in turn, never while a request for the
  entry is in flight) whenever the port's request stream is free and no write
  bundle is in progress; its tags follow the ``2*lanes`` tags of the read slots.
  A read bundle takes its words from the buffer (or waits for a block on its
  way there) instead of requesting them. A block write of this vault's block
  (a write or a send to itself) drops the buffer's copy (a response still in
  flight for it is discarded), and ``flush`` drops them all, so a read sees
  every write posted before it as without hints.

Throughput (documented cost of the simple scheme): a read bundle takes
``4 + d + L`` cycles for ``d`` distinct uncached blocks and a read latency
``L`` of the memory system (4 cycles when every block is cached or prefetched:
with hints the walker's requests overlap the previous bundles); a write
bundle ``4 + d + w`` (+ ``L`` when a block is partial) for ``d`` distinct
blocks after the lock, and reads wait for queued writes. Nothing overlaps
across bundles.

Flow control of posted traffic: the vault compute never waits for its writes,
so the write FIFO must hold every bundle that the controller can emit while
the adapter is busy. Each write bundle stems from one accepted read bundle at
most ``pe_latency + a few`` cycles earlier, and read bundles are accepted at
most once per ``3 + L`` cycles here, so ``write_depth`` entries with
``write_depth`` above the PE latency cannot overflow; ``overflow`` is a sticky
error flag that the testbenches check.

Parameters
----------
lanes : int
    Lanes of a bundle (``capsnet.pes_per_vault``).
vault_bits : int
    Width of the vault id (1 for one vault).
addr_bits : int
    Width of a cube byte address on the PE port.
word_address : callable
    ``(vault, word) -> cube byte address`` of the block holding the vault-local
    word; called on Amaranth values (shifts and ``|`` only).
tag_bits : int
    Tag width of the PE port (``2 * lanes`` tags are used).
write_depth : int
    Depth of the FIFO of posted write and send bundles.
prefetch : int
    Depth of the hint FIFO: the most announced, unread bundles of the vault
    compute (``capsnet.prefetch_bundles``); 0 ignores the hints.
prefetch_blocks : int
    Blocks of the prefetch buffer (0: ``2 * lanes``).

Attributes
----------
rd, pf, wr, send : the vault compute's lane bundles and hints, flipped
    (:mod:`pimforge.rtl.capsnet.lanes`)
vault_id : this vault's index
flush : empty the read cache (at barriers)
mem, mem_resp : the PE port (request source, response sink)
lock_req, lock_vault, lock_grant : destination-vault lock for block writes
idle : no write or send queued or in flight, no read in progress
overflow : sticky, a posted bundle or a hint was lost: FIFO full, or a write and a
    send posted in one cycle (an error)
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.address_map import AddressMap
from ..mem.crossbar import master_request_layout, master_response_layout
from ..params import ParameterError, check_int
from . import pe as pe_mod
from .isa import ADDR_BITS, STRIDE_BITS
from .lanes import LaneHintSignature, LaneReadSignature, LaneSendSignature, LaneWriteSignature

__all__ = ["OperandPort", "compiler_placement", "from_config", "port_config"]

WORD_BITS = 32
BLOCK_WORDS = 4     # 16 B blocks of 32-bit words
#: Hinted bundles the prefetch walker may take ahead of the read bundles (the one
#: being read counts): more only evicts what the next bundle needs from the buffer.
LOOKAHEAD = 2


def _lowest(m: Module, vec: Signal, name: str) -> tuple[Signal, Signal]:
    """One-hot lowest set bit of *vec* and its index."""
    n = len(vec)
    onehot = Signal(n, name=f"{name}_oh")
    idx = Signal(range(max(2, n)), name=f"{name}_idx")
    m.d.comb += onehot.eq(vec & -vec)
    for i in reversed(range(n)):
        with m.If(vec[i]):
            m.d.comb += idx.eq(i)
    return onehot, idx


def _block_of(word):
    """The 16 B block number of a word address."""
    return word[2:]


def _select(onehot: Signal, values: list) -> Cat:
    """The value whose one-hot bit is set (zero when none)."""
    out = 0
    for i, v in enumerate(values):
        out = out | Mux(onehot[i], v, 0)
    return out


class OperandPort(wiring.Component):
    """Adapter between a vault compute's lane bundles and its HMC PE port (module doc)."""

    def __init__(self, *, lanes: int, vault_bits: int, addr_bits: int,
                 word_address: Callable, tag_bits: int = 8, write_depth: int = 32,
                 prefetch: int = 0, prefetch_blocks: int = 0):
        check_int("lanes", lanes, 1, 64)
        check_int("vault_bits", vault_bits, 0, 8)
        check_int("write_depth", write_depth, 2, 1024)
        check_int("prefetch", prefetch, 0, 1024)
        check_int("prefetch_blocks", prefetch_blocks, 0, 256)
        self.prefetch = prefetch
        self.prefetch_blocks = (prefetch_blocks or 2 * lanes) if prefetch else 0
        tags = 2 * lanes + self.prefetch_blocks
        if not isinstance(tag_bits, int) or not tags <= (1 << tag_bits) <= (1 << 16):
            raise ParameterError(f"tag_bits must give at least 2*lanes + prefetch_blocks = "
                                 f"{tags} tags and at most 16 bits, not {tag_bits!r}")
        self.lanes, self.vault_bits, self.addr_bits = lanes, vault_bits, addr_bits
        self.word_address, self.tag_bits = word_address, tag_bits
        self.write_depth = write_depth
        n = lanes
        vb = max(1, vault_bits)
        # The lane bundles are the vault compute's own (its word addresses and strides).
        lane_kw = {"lanes": lanes, "addr_bits": ADDR_BITS, "stride_bits": STRIDE_BITS}
        rq = master_request_layout(addr_bits, tag_bits, BLOCK_WORDS * WORD_BITS)
        rs = master_response_layout(tag_bits, BLOCK_WORDS * WORD_BITS)
        super().__init__({
            "rd": In(LaneReadSignature(**lane_kw)),
            "pf": In(LaneHintSignature(**lane_kw)),
            "wr": In(LaneWriteSignature(**lane_kw)),
            "send": In(LaneSendSignature(**lane_kw)),
            "vault_id": In(vb), "flush": In(1),
            "mem": Out(stream.Signature(rq)), "mem_resp": In(stream.Signature(rs)),
            "lock_req": Out(1), "lock_vault": Out(vb), "lock_grant": In(1),
            "idle": Out(1), "overflow": Out(1),
        })
        self.entry = data.StructLayout({"vault": vb, "mask": n, "addr": WORD_BITS,
                                        "stride": signed(STRIDE_BITS),
                                        "data": WORD_BITS * n})
        self.hint = data.StructLayout({"mask": n, "a_addr": ADDR_BITS,
                                       "a_stride": signed(STRIDE_BITS), "b_addr": ADDR_BITS,
                                       "b_stride": signed(STRIDE_BITS)})

    def elaborate(self, platform):
        m = Module()
        posted, wq = self._posted_fifo(m)
        r = self._slot_registers()
        self._request_stream(m, r)
        self._prefetch_buffer(m, r)
        with m.FSM(name="op") as fsm:
            with m.State("IDLE"):
                self._idle(m, r, posted, wq)
            with m.State("LOOKUP"):
                self._lookup(m, r)
            with m.State("READ"):
                self._read(m, r)
            with m.State("RDONE"):
                m.d.comb += self.rd.ready.eq(1)
                m.next = "IDLE"
            self._write_states(m, r)
        if self.prefetch:
            self._prefetch_walker(m, r, fsm)
        # At a barrier other vaults' sends have landed in this vault: forget every block.
        with m.If(self.flush):
            m.d.sync += r.cval.eq(0)
            if r.P:
                m.d.sync += [r.pvalid.eq(0), r.pstale.eq(r.pstale | r.pbusy)]
        return m

    def _posted_fifo(self, m: Module) -> tuple[Signal, SyncFIFO]:
        """Posted writes and sends: one FIFO for both, so that they stay in posting order
        (a send to the own vault and a later write of the same word must land in that
        order). Returns the strobe of a bundle posted this cycle and the FIFO."""
        vmask = (1 << self.vault_bits) - 1
        m.submodules.wq = wq = SyncFIFO(width=self.entry.size, depth=self.write_depth)
        push = data.View(self.entry, Signal(self.entry.size, name="push"))
        with m.If(self.send.valid):
            m.d.comb += [push.vault.eq(self.send.peer & vmask), push.mask.eq(self.send.mask),
                         push.addr.eq(self.send.addr), push.stride.eq(self.send.stride),
                         push.data.eq(self.send.data)]
        with m.Else():
            m.d.comb += [push.vault.eq(self.vault_id), push.mask.eq(self.wr.mask),
                         push.addr.eq(self.wr.addr), push.stride.eq(self.wr.stride),
                         push.data.eq(self.wr.data)]
        posted = Signal()
        m.d.comb += [posted.eq(self.wr.en | self.send.valid),
                     wq.w_en.eq(posted), wq.w_data.eq(push.as_value())]
        # The controller never posts a write and a send in one cycle (they come from
        # different instructions, separated by the pipeline drain); if it did, one
        # would be lost, which is flagged like a full FIFO.
        with m.If((posted & ~wq.w_rdy) | (self.wr.en & self.send.valid)):
            m.d.sync += self.overflow.eq(1)
        return posted, wq

    def _slot_registers(self) -> SimpleNamespace:
        """The bundle's slots (``2*lanes`` words: ``a`` then ``b``, or the write's lanes),
        the write path's merged blocks and the read cache, shared by the states."""
        n, s = self.lanes, 2 * self.lanes
        vb = max(1, self.vault_bits)
        word = [Signal(WORD_BITS, name=f"w{i}") for i in range(s)]    # word address
        wdat = [Signal(WORD_BITS, name=f"d{i}") for i in range(s)]    # read data / write lane
        used = Signal(s)                                               # slot in the bundle
        pend = Signal(s)                                               # block not requested yet
        outst = Signal(range(s + 1))                                   # requests in flight
        dest = Signal(vb)                                              # write destination vault
        # Write path: one merged block per lane slot (the group's first slot).
        blk = [Signal(BLOCK_WORDS * WORD_BITS, name=f"blk{i}") for i in range(n)]
        cov = [Signal(BLOCK_WORDS, name=f"cov{i}") for i in range(n)]
        rdq = Signal(n)     # partial blocks to read
        wrq = Signal(n)     # merged blocks to write
        # Read cache: the block each slot last fetched (valid until a write or a flush).
        cblk = [Signal(WORD_BITS - 2, name=f"cblk{i}") for i in range(s)]
        cdat = [Signal(BLOCK_WORDS * WORD_BITS, name=f"cdat{i}") for i in range(s)]
        cval = Signal(s)
        return SimpleNamespace(n=n, s=s, word=word, wdat=wdat, used=used, pend=pend,
                               outst=outst, dest=dest, blk=blk, cov=cov, rdq=rdq, wrq=wrq,
                               cblk=cblk, cdat=cdat, cval=cval)

    def _request_stream(self, m: Module, r: SimpleNamespace) -> None:
        """The PE port: the read slots' and write blocks' requests (``main_req``) and the
        prefetch walker's (``pf_issue``, only while ``main_req`` is low) share the request
        stream; responses are always taken, a tag below ``2*lanes`` being a slot's."""
        n, s = r.n, r.s
        req, resp = self.mem, self.mem_resp
        m.d.comb += [resp.ready.eq(1), req.payload.tag.eq(0)]
        main_req, pf_issue = Signal(), Signal()
        m.d.comb += req.valid.eq(main_req | pf_issue)
        fire = Signal()
        m.d.comb += fire.eq(main_req & req.ready)
        got = Signal()          # a response to a read slot or a write block (tag < s)
        pf_got = Signal()       # a response to a prefetch (tag >= s)
        m.d.comb += [got.eq(resp.valid & (resp.payload.tag < s)),
                     pf_got.eq(resp.valid & (resp.payload.tag >= s))]
        m.d.comb += self.rd.a_data.eq(Cat(*r.wdat[:n])), self.rd.b_data.eq(Cat(*r.wdat[n:]))
        # Outstanding main requests: +1 per accepted request, -1 per response.
        m.d.sync += r.outst.eq(r.outst + fire - got)
        r.__dict__.update(req=req, resp=resp, main_req=main_req, pf_issue=pf_issue, fire=fire,
                          got=got, pf_got=pf_got)

    def _prefetch_buffer(self, m: Module, r: SimpleNamespace) -> None:
        """The prefetch buffer: ``prefetch_blocks`` blocks of hinted bundles, filled by the
        walker's responses (a stale one is dropped)."""
        s, resp = r.s, r.resp
        P = self.prefetch_blocks
        pblk = [Signal(WORD_BITS - 2, name=f"pblk{e}") for e in range(P)]
        pdat = [Signal(BLOCK_WORDS * WORD_BITS, name=f"pdat{e}") for e in range(P)]
        pvalid, pbusy, pstale = Signal(max(1, P)), Signal(max(1, P)), Signal(max(1, P))
        # A prefetch response for entry e this cycle, and the entries usable by a read.
        got_e = [Signal(name=f"pf_got{e}") for e in range(P)]
        for e in range(P):
            m.d.comb += got_e[e].eq(r.pf_got & (resp.payload.tag == s + e))
        waitm = Signal(s)       # read slots waiting for their block's prefetch response
        # A write's invalidation (assigned after this) wins over a fill in the same cycle.
        for e in range(P):
            with m.If(got_e[e]):
                m.d.sync += [pbusy[e].eq(0), pstale[e].eq(0), pvalid[e].eq(~pstale[e]),
                             pdat[e].eq(resp.payload.data)]
        r.__dict__.update(P=P, pblk=pblk, pdat=pdat, pvalid=pvalid, pbusy=pbusy, pstale=pstale,
                          got_e=got_e, waitm=waitm)

    def _idle(self, m: Module, r: SimpleNamespace, posted: Signal, wq: SyncFIFO) -> None:
        """Take the oldest posted write or send, else a read bundle (never one presented
        in the cycle a write is posted: the write is older)."""
        n = r.n
        head = data.View(self.entry, Signal(self.entry.size, name="head"))
        m.d.comb += self.idle.eq(~wq.r_rdy & ~posted & ~r.pbusy.any())
        with m.If(wq.r_rdy):
            m.d.sync += r.cval.eq(0)       # the cached blocks may be about to change
            m.d.comb += head.eq(wq.r_data)
            m.d.comb += wq.r_en.eq(1)
            m.d.sync += [r.dest.eq(head.vault), r.used.eq(head.mask), r.pend.eq(head.mask),
                         r.rdq.eq(0), r.wrq.eq(0)]
            for i in range(n):
                m.d.sync += [r.word[i].eq((head.addr + head.stride * i)[:WORD_BITS]),
                             r.wdat[i].eq(head.data[WORD_BITS * i:WORD_BITS * (i + 1)])]
            m.next = "WLOCK"
        with m.Elif(self.rd.valid & ~posted):
            mask2 = Cat(self.rd.mask, self.rd.mask)
            m.d.sync += [r.used.eq(mask2), r.pend.eq(mask2)]
            for i in range(n):
                m.d.sync += [
                    r.word[i].eq((self.rd.a_addr + self.rd.a_stride * i)[:WORD_BITS]),
                    r.word[n + i].eq((self.rd.b_addr + self.rd.b_stride * i)
                                     [:WORD_BITS])]
            m.next = "LOOKUP"

    def _lookup(self, m: Module, r: SimpleNamespace) -> None:
        """Read bundle: slots whose block is in the prefetch buffer (or arriving now) or in
        the read cache take their word from there; one on its way is waited for."""
        n, s, word, resp = r.n, r.s, r.word, r.resp
        hit = Signal(s)
        wait = Signal(s)
        for i in range(s):
            for e in range(r.P):
                same_blk = ~r.pstale[e] & (r.pblk[e] == _block_of(word[i]))
                with m.If(same_blk & (r.pvalid[e] | r.got_e[e])):
                    m.d.comb += hit[i].eq(1)
                    m.d.sync += r.wdat[i].eq(Mux(r.got_e[e], resp.payload.data, r.pdat[e])
                                             .word_select(word[i][:2], WORD_BITS))
                with m.Elif(same_blk & r.pbusy[e]):
                    m.d.comb += wait[i].eq(1)
            half = range(n) if i < n else range(n, s)   # a slots vs a entries
            for j in half:
                with m.If(r.cval[j] & (r.cblk[j] == _block_of(word[i]))):
                    m.d.comb += hit[i].eq(1)
                    m.d.sync += r.wdat[i].eq(r.cdat[j].word_select(word[i][:2], WORD_BITS))
        m.d.sync += [r.pend.eq(r.pend & ~hit & ~wait), r.waitm.eq(r.pend & ~hit & wait)]
        m.next = "READ"

    def _read(self, m: Module, r: SimpleNamespace) -> None:
        """Read bundle: one request per distinct block still pending; each response fills
        every slot of its block and the slot's cache entry."""
        s, word, pend, req, resp = r.s, r.word, r.pend, r.req, r.resp
        pick, idx = _lowest(m, pend, "rd")
        w_t = Signal(WORD_BITS)
        m.d.comb += w_t.eq(_select(pick, word))
        m.d.comb += [
            r.main_req.eq(pend != 0), req.payload.we.eq(0),
            req.payload.addr.eq(self.word_address(self.vault_id, w_t)),
            req.payload.tag.eq(idx),
        ]
        # Slots waiting for a prefetched block take it when it arrives (one
        # dropped as stale is requested again).
        refill = Signal(s)
        for e in range(r.P):
            with m.If(r.got_e[e]):
                for i in range(s):
                    with m.If(r.waitm[i] & (_block_of(word[i]) == r.pblk[e])):
                        with m.If(r.pstale[e]):
                            m.d.comb += refill[i].eq(1)
                        with m.Else():
                            m.d.sync += r.wdat[i].eq(resp.payload.data.word_select(
                                word[i][:2], WORD_BITS))
                        m.d.sync += r.waitm[i].eq(0)
        m.d.sync += pend.eq(pend | refill)
        with m.If(r.fire):
            same = Cat(*(_block_of(word[i]) == _block_of(w_t) for i in range(s)))
            m.d.sync += pend.eq((pend & ~same) | refill)
        r_w = Signal(WORD_BITS)
        m.d.comb += r_w.eq(Array(word)[resp.payload.tag[:ceil_log2(s)]])
        with m.If(r.got):
            for i in range(s):
                with m.If(r.used[i] & (_block_of(word[i]) == _block_of(r_w))):
                    m.d.sync += r.wdat[i].eq(
                        resp.payload.data.word_select(word[i][:2], WORD_BITS))
            for j in range(s):
                with m.If(resp.payload.tag == j):
                    m.d.sync += [r.cdat[j].eq(resp.payload.data),
                                 r.cblk[j].eq(_block_of(r_w)), r.cval[j].eq(1)]
        with m.If((pend == 0) & (r.outst == 0) & ~r.got & (r.waitm == 0)):
            m.next = "RDONE"

    def _write_states(self, m: Module, r: SimpleNamespace) -> None:
        """Write / send bundle: the destination vault's lock, then one merged block per
        cycle (later lanes win), then the block writes, partial blocks read first."""
        n, word, pend, req, resp = r.n, r.word, r.pend, r.req, r.resp
        with m.State("WLOCK"):
            m.d.comb += [self.lock_req.eq(1), self.lock_vault.eq(r.dest)]
            with m.If(self.lock_grant):
                m.next = "WMERGE"
        with m.State("WMERGE"):
            m.d.comb += [self.lock_req.eq(1), self.lock_vault.eq(r.dest)]
            pick, _ = _lowest(m, pend[:n], "wm")
            w_t = Signal(WORD_BITS)
            m.d.comb += w_t.eq(_select(pick, word[:n]))
            group = Cat(*(r.used[i] & (_block_of(word[i]) == _block_of(w_t)) for i in range(n)))
            merged = Signal(BLOCK_WORDS * WORD_BITS)
            mcov = Signal(BLOCK_WORDS)
            for i in range(n):
                for k in range(BLOCK_WORDS):
                    with m.If(group[i] & (word[i][:2] == k)):
                        m.d.comb += [merged.word_select(k, WORD_BITS).eq(r.wdat[i]),
                                     mcov[k].eq(1)]
            with m.If(pend[:n] != 0):
                m.d.sync += pend.eq(pend & ~group)
                for j in range(n):
                    with m.If(pick[j]):
                        m.d.sync += [r.blk[j].eq(merged), r.cov[j].eq(mcov)]
                full = mcov.all()
                m.d.sync += [r.rdq.eq(r.rdq | Mux(full, 0, pick)),
                             r.wrq.eq(r.wrq | Mux(full, pick, 0))]
            with m.Else():
                m.next = "WISSUE"
        with m.State("WISSUE"):
            m.d.comb += [self.lock_req.eq(1), self.lock_vault.eq(r.dest)]
            todo = Signal(n)
            m.d.comb += todo.eq(r.rdq | r.wrq)
            pick, idx = _lowest(m, todo, "wi")
            w_t = Signal(WORD_BITS)
            is_wr = Signal()
            m.d.comb += [w_t.eq(_select(pick, word[:n])), is_wr.eq((r.wrq & pick) != 0)]
            m.d.comb += [
                r.main_req.eq(todo != 0), req.payload.we.eq(is_wr),
                req.payload.addr.eq(self.word_address(r.dest, w_t)),
                req.payload.tag.eq(idx), req.payload.data.eq(_select(pick, r.blk)),
            ]
            # Read-modify-write: the read response fills the words no lane covers.
            filled = Signal(n)
            rtag = resp.payload.tag
            with m.If(r.got & ~resp.payload.we):
                for j in range(n):
                    with m.If(rtag == j):
                        m.d.comb += filled[j].eq(1)
                        for k in range(BLOCK_WORDS):
                            with m.If(~r.cov[j][k]):
                                m.d.sync += r.blk[j].word_select(k, WORD_BITS).eq(
                                    resp.payload.data.word_select(k, WORD_BITS))
            taken = Signal(n)
            m.d.comb += taken.eq(Mux(r.fire, pick, 0))
            # A block write of this vault's block drops the prefetch buffer's copy.
            with m.If(r.fire & is_wr & (r.dest == self.vault_id)):
                for e in range(r.P):
                    with m.If(r.pblk[e] == _block_of(w_t)):
                        m.d.sync += [r.pvalid[e].eq(0), r.pstale[e].eq(r.pbusy[e])]
            m.d.sync += [r.rdq.eq(r.rdq & ~taken), r.wrq.eq((r.wrq & ~taken) | filled)]
            with m.If((todo == 0) & (r.outst == 0) & ~r.got):
                m.next = "IDLE"

    def _prefetch_walker(self, m: Module, r: SimpleNamespace, fsm) -> None:
        """Hints in order, at most ``LOOKAHEAD`` bundles ahead of the reads: one block
        request whenever the stream is free and no write bundle is in progress."""
        n, s, P, req = r.n, r.s, r.P, r.req
        pvalid, pbusy, pstale, pblk = r.pvalid, r.pbusy, r.pstale, r.pblk
        writing = fsm.ongoing("WLOCK") | fsm.ongoing("WMERGE") | fsm.ongoing("WISSUE")
        m.submodules.hq = hq = SyncFIFO(width=self.hint.size, depth=self.prefetch + 2)
        m.d.comb += [hq.w_en.eq(self.pf.valid),
                     hq.w_data.eq(Cat(*(getattr(self.pf, f) for f in self.hint.members)))]
        with m.If(self.pf.valid & ~hq.w_rdy):
            m.d.sync += self.overflow.eq(1)
        # The walked bundle: its slots' words and the slots still to look at.
        pw = [Signal(WORD_BITS, name=f"pw{i}") for i in range(s)]
        ppend = Signal(s)
        # Hints taken minus read bundles accepted: below 0 the head hint's bundle has
        # been read already (the walker fell behind; the hint is skipped), at 0 the
        # walked bundle has (its walk stops). The FIFO holds the unread hints and, for
        # the cycle or two the walker lags, read ones: two entries more than announced.
        lo = -self.prefetch - 1
        ahead = Signal(range(lo, LOOKAHEAD + 1))
        head = data.View(self.hint, hq.r_data)
        load, skip, done = Signal(), Signal(), Signal()
        m.d.comb += [done.eq(ahead <= 0),
                     load.eq(((ppend == 0) | done) & hq.r_rdy & (ahead >= 0)
                             & (ahead < LOOKAHEAD)),
                     skip.eq(hq.r_rdy & (ahead < 0))]
        accepted = self.rd.valid & self.rd.ready
        m.d.sync += ahead.eq(ahead + (load | skip) - (accepted & (ahead > lo)))
        m.d.comb += hq.r_en.eq(load | skip)
        with m.If(done):
            m.d.sync += ppend.eq(0)
        pick, _ = _lowest(m, ppend, "pf")
        w_t = Signal(WORD_BITS)
        m.d.comb += w_t.eq(_select(pick, pw))
        same = Cat(*(_block_of(pw[i]) == _block_of(w_t) for i in range(s)))
        inbuf = Signal()
        m.d.comb += inbuf.eq(Cat(*((pvalid[e] | pbusy[e]) & ~pstale[e]
                                   & (pblk[e] == _block_of(w_t)) for e in range(P))).any())
        vic = Signal(range(P))
        with m.If((ppend == 0) | done):
            pass
        with m.Elif(inbuf):
            m.d.sync += ppend.eq(ppend & ~same)
        with m.Elif(~r.main_req & ~writing & ~pbusy.bit_select(vic, 1)):
            m.d.comb += [r.pf_issue.eq(1), req.payload.we.eq(0),
                         req.payload.addr.eq(self.word_address(self.vault_id, w_t)),
                         req.payload.tag.eq(s + vic)]
            with m.If(req.ready):
                m.d.sync += [ppend.eq(ppend & ~same), vic.eq(Mux(vic == P - 1, 0, vic + 1))]
                for e in range(P):
                    with m.If(vic == e):
                        m.d.sync += [pblk[e].eq(_block_of(w_t)), pbusy[e].eq(1),
                                     pvalid[e].eq(0), pstale[e].eq(0)]
        with m.If(load):
            m.d.sync += ppend.eq(Cat(head.mask, head.mask))
            for i in range(n):
                m.d.sync += [pw[i].eq((head.a_addr + head.a_stride * i)[:WORD_BITS]),
                             pw[n + i].eq((head.b_addr + head.b_stride * i)[:WORD_BITS])]


def compiler_placement(hmc, mapping: str | None = None) -> tuple[AddressMap, Callable]:
    """The address map of *hmc* (``hmc.mapping`` unless *mapping* is given) and its
    vault-local word -> cube byte address function
    (:meth:`~pimforge.rtl.mem.address_map.AddressMap.vault_block_address`, the
    placement the CapsNet compiler uses, evaluated here on Amaranth values)."""
    amap = AddressMap.from_config(hmc, mapping)
    return amap, amap.vault_block_address


def port_config(cfg) -> dict:
    """Keyword arguments of the operand port of *cfg*'s vaults."""

    if cfg.hmc.block_bytes != 16:
        raise ValueError(f"the operand port moves 16 B blocks; hmc.block_bytes is "
                         f"{cfg.hmc.block_bytes}")
    amap, fn = compiler_placement(cfg.hmc)
    return dict(lanes=cfg.capsnet.pes_per_vault, vault_bits=amap.vault_bits,
                addr_bits=amap.addr_bits, word_address=fn,
                write_depth=max(8, pe_mod.latency_from_config(cfg) + 8),
                prefetch=cfg.capsnet.prefetch_bundles)


def from_config(cfg) -> OperandPort:
    """The operand port of one vault of *cfg* (``capsnet.pes_per_vault`` lanes)."""
    return OperandPort(**port_config(cfg))
