"""Power-gated multi-bank sectored scratchpad (DESCNet Sec. V-A, Fig. 13).

The non-retention of a powered-off sector is modelled per word without logic
per word: every word carries a valid tag ``(flag, epoch)`` in a memory beside
it, a sector's epoch steps where its valid bits would all be cleared, and a
scrubber clears stale flags before an epoch can come back to their value.
:class:`SectoredSPM` explains why the responses are exactly those of one valid
flip-flop per word and what it costs (``k + 1`` bits per word, ``k`` about
``log2(words per macro / 16) + 1``); :func:`valid_tag_layout` sizes it.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetSignal, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..hierarchy import Leaf, leaf_name
from .pmu import SPMPowerManager
from .port import SPMPort

__all__ = ["SectorMacro", "SectoredSPM", "from_config", "macro_verilog", "poison",
           "valid_tag_layout"]

#: Words whose valid tags share one row of a macro's tag memory (and one scrub visit).
TAG_LANES = 16


def poison(word_bits: int) -> int:
    """The pattern a read of a lost (never rewritten since power-off) word returns."""
    reps = -(-word_bits // 32)
    return int("DEADBEEF" * reps, 16) & ((1 << word_bits) - 1)


def valid_tag_layout(depth: int) -> tuple[int, int, int]:
    """``(lanes, tag_rows, epoch_bits)`` of the valid tags of a macro of *depth* words.

    The tags of ``lanes`` consecutive rows share one tag-memory row, so the
    scrubber visits every word once in ``tag_rows`` cycles. ``epoch_bits`` is
    the smallest width with ``2**epoch_bits >= tag_rows + 3``: a stale tag is
    cleared at most ``tag_rows + 1`` clock edges after its sector's epoch moved
    on, and at one epoch step per edge the epoch needs ``2**epoch_bits - 1``
    edges to come back to it (see :class:`SectoredSPM`). Each word costs
    ``epoch_bits + 1`` bits.
    """
    lanes = min(TAG_LANES, depth)
    rows = depth // lanes
    return lanes, rows, max(1, ceil_log2(rows + 3))


class SectorMacro(wiring.Component):
    """One bank-sector SRAM macro: data, valid tags and the tag scrubber.

    Access port ``i`` (``addr{i}``, ``we{i}``, ``wdata{i}``) reads its row every
    cycle (``rdata{i}`` one cycle later, the contents before that edge's
    writes) and writes it when ``we{i}``; a write stores the tag ``(epoch, 1)``
    beside the word. ``hit{i}``, beside ``rdata{i}``, is 1 when the word read
    carries the valid flag and the macro's current ``epoch``. Two ports never
    write one row in the same cycle (the scratchpad's port priority).

    The scrubber walks the tag rows, one per cycle, and clears the valid flag
    of every tag whose epoch is not the current one, except a tag an access
    port writes in the cycle it was read or the cycle it is cleared (that tag
    is fresh). Its state ignores the domain reset, so a reset never stalls it.

    Parameters
    ----------
    depth : int
        Words (a power of two).
    word_bits : int
        Word width.
    ports : int
        Access ports.
    """

    def __init__(self, *, depth: int, word_bits: int, ports: int):
        self.depth, self.word_bits, self.n_ports = depth, word_bits, ports
        self.lanes, self.tag_rows, self.epoch_bits = valid_tag_layout(depth)
        self.row_bits = exact_log2(depth)
        members = {"epoch": In(self.epoch_bits)}
        for i in range(ports):
            members.update({f"addr{i}": In(max(1, self.row_bits)), f"we{i}": In(1),
                            f"wdata{i}": In(word_bits), f"rdata{i}": Out(word_bits),
                            f"hit{i}": Out(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        lanes, k = self.lanes, self.epoch_bits
        lb, rb = exact_log2(lanes), self.row_bits
        tb = k + 1      # one tag: [0] valid flag, [1:] epoch
        m.submodules.data = data = Memory(shape=unsigned(self.word_bits), depth=self.depth,
                                          init=[])
        m.submodules.tags = tags = Memory(shape=unsigned(lanes * tb), depth=self.tag_rows,
                                          init=[])
        fresh = Cat(Const(1, 1), self.epoch).replicate(lanes)

        def lane_onehot(lane):
            return (Const(1, lanes) << lane)[:lanes] if lb else Const(1, 1)

        # Scrubber: read tag row ``ptr`` at one edge, clear its stale lanes at the next.
        ptr = Signal(range(self.tag_rows), reset_less=True)
        row_q = Signal.like(ptr, name="scrub_row", reset_less=True)
        m.d.sync += [ptr.eq(ptr + 1), row_q.eq(ptr)]
        scrub_rd = tags.read_port()
        m.d.comb += scrub_rd.addr.eq(ptr)
        busy = Const(0, lanes)            # lanes written by a port: not scrubbed
        for i in range(self.n_ports):
            row = getattr(self, f"addr{i}")[:rb]
            we = getattr(self, f"we{i}")
            trow, lane = row[lb:], row[:lb]
            wp = data.write_port()
            m.d.comb += [wp.addr.eq(row), wp.data.eq(getattr(self, f"wdata{i}")),
                         wp.en.eq(we)]
            tw = tags.write_port(granularity=tb)
            m.d.comb += [tw.addr.eq(trow), tw.data.eq(fresh),
                         tw.en.eq(Mux(we, lane_onehot(lane), 0))]
            rp = data.read_port()
            tr = tags.read_port()
            lane_q = Signal(max(1, lb), name=f"lane{i}", reset_less=True)
            m.d.comb += [rp.addr.eq(row), tr.addr.eq(trow)]
            m.d.sync += lane_q.eq(lane)
            entry = (Array(tr.data[j * tb:(j + 1) * tb] for j in range(lanes))[lane_q[:lb]]
                     if lb else tr.data)
            m.d.comb += [getattr(self, f"rdata{i}").eq(rp.data),
                         getattr(self, f"hit{i}").eq(entry[0] & (entry[1:] == self.epoch))]
            # A write at the edge the scrubber read (its data is older) or at the edge
            # it clears: skip that lane this round.
            prev = Signal(lanes, name=f"scrub_skip{i}", reset_less=True)
            m.d.sync += prev.eq(Mux(we & (trow == ptr), lane_onehot(lane), 0))
            busy = busy | prev | Mux(we & (trow == row_q), lane_onehot(lane), 0)
        stale = Cat(scrub_rd.data[j * tb] & (scrub_rd.data[j * tb + 1:(j + 1) * tb]
                                            != self.epoch) for j in range(lanes))
        sw = tags.write_port(granularity=tb)
        m.d.comb += [sw.addr.eq(row_q), sw.data.eq(0), sw.en.eq(stale & ~busy)]
        return m


def macro_verilog(name: str, *, depth: int, word_bits: int, ports: int) -> str:
    """A :class:`SectorMacro` as a Verilog module *name*: the same logic, written here.

    Amaranth writes a memory's initial values one word per line (and takes
    seconds per million bits to do it); here the memories are set to zero
    by a loop, so the text does not grow with the depth. Port names are
    those of the signature, as :class:`~pimforge.rtl.hierarchy.Leaf`
    connects them.
    """
    w, d = word_bits, depth
    lanes, rows, k = valid_tag_layout(depth)
    rb, lb, tb = exact_log2(depth), exact_log2(lanes), k + 1
    pb = exact_log2(rows)

    ptr = "ptr" if pb else "1'b0"    # one tag row: the scrubber stays on it

    def vec(n):
        return f"[{n - 1}:0] "

    names = ["clk", "epoch"]
    decl = ["  input clk;", f"  input {vec(k)}epoch;"]
    body = []
    busy = []
    for i in range(ports):
        names += [f"addr{i}", f"we{i}", f"wdata{i}", f"rdata{i}", f"hit{i}"]
        decl += [f"  input {vec(max(1, rb))}addr{i};", f"  input we{i};",
                 f"  input {vec(w)}wdata{i};", f"  output {vec(w)}rdata{i};",
                 f"  output hit{i};"]
        row = f"addr{i}[{rb - 1}:0]" if rb else "1'b0"
        trow = f"addr{i}[{rb - 1}:{lb}]" if pb else "1'b0"
        lane = f"addr{i}[{lb - 1}:0]" if lb else "1'b0"
        body += [
            f"  wire {vec(lanes)}oh{i} = {lanes}'d1 << {lane};",
            f"  reg {vec(w)}rd{i} = {w}'d0;",
            f"  reg {vec(lanes * tb)}tq{i} = {lanes * tb}'d0;",
            f"  reg {vec(max(1, lb))}lane_q{i} = {max(1, lb)}'d0;",
            f"  reg {vec(lanes)}skip{i} = {lanes}'d0;",
            f"  wire {vec(tb)}ent{i} = tq{i}[lane_q{i} * {tb} +: {tb}];",
            f"  assign rdata{i} = rd{i};",
            f"  assign hit{i} = ent{i}[0] && ent{i}[{tb - 1}:1] == epoch;",
            "  always @(posedge clk) begin",
            f"    rd{i} <= data[{row}];",
            f"    tq{i} <= tags[{trow}];",
            f"    lane_q{i} <= {lane};",
            f"    skip{i} <= we{i} && {trow} == ptr ? oh{i} : {lanes}'d0;",
            f"    if (we{i}) data[{row}] <= wdata{i};",
            *(f"    if (we{i} && oh{i}[{j}]) tags[{trow}][{j * tb + tb - 1}:{j * tb}] "
              f"<= {{epoch, 1'b1}};" for j in range(lanes)),
            "  end",
        ]
        busy += [f"skip{i}", f"(we{i} && {trow} == row_q ? oh{i} : {lanes}'d0)"]
    stale = [f"  assign stale[{j}] = scrub[{j * tb}] && scrub[{j * tb + tb - 1}:{j * tb + 1}] "
             "!= epoch;" for j in range(lanes)]
    text = [
        f"module {name}({', '.join(names)});",
        *decl,
        f"  reg {vec(w)}data [0:{d - 1}];",
        f"  reg {vec(lanes * tb)}tags [0:{rows - 1}];",
        "  integer i;",
        "  initial begin",
        f"    for (i = 0; i < {d}; i = i + 1) data[i] = {w}'d0;",
        f"    for (i = 0; i < {rows}; i = i + 1) tags[i] = {lanes * tb}'d0;",
        "  end",
        f"  reg {vec(max(1, pb))}ptr = {max(1, pb)}'d0;",
        f"  reg {vec(max(1, pb))}row_q = {max(1, pb)}'d0;",
        f"  reg {vec(lanes * tb)}scrub = {lanes * tb}'d0;",
        f"  wire {vec(lanes)}stale;",
        *stale,
        *body,
        f"  wire {vec(lanes)}busy = {' | '.join(busy)};",
        f"  wire {vec(lanes)}clear = stale & ~busy;",
        "  always @(posedge clk) begin",
        f"    scrub <= tags[{ptr}];",
        f"    ptr <= {'ptr + 1' if pb else ptr};",
        "    row_q <= ptr;",
        *(f"    if (clear[{j}]) tags[{'row_q' if pb else ptr}]"
          f"[{j * tb + tb - 1}:{j * tb}] <= {tb}'d0;" for j in range(lanes)),
        "  end",
        "endmodule",
    ]
    return "\n".join(text) + "\n"


class SectoredSPM(wiring.Component):
    """A scratchpad of ``banks`` x ``sectors`` SRAM macros with its power-management unit.

    Word address layout ``[sector | row | bank]``: consecutive words go to
    consecutive banks (so the 16 rows of the array are fed in parallel), and
    a sector index is one contiguous address range spanning all banks, whose
    macros share one sleep signal (Sec. V-A). Each bank-sector macro is an
    :class:`amaranth.lib.memory.Memory` with one read and one write port per
    SPM port (a true multi-port SRAM as in the SMP organization).

    The OFF state is non-retentive and this is modelled, not assumed: a word
    is valid when it was written after its sector last powered off (the PMU's
    ``lose`` pulse) and after the last reset. A read of a word that is not
    valid returns :func:`poison` instead of the macro's stale contents. An
    access to a sector that is not ON (going off, off, or still waking) is
    flagged with ``err``; its write is dropped and its read returns the poison
    pattern.

    Simultaneous writes of several ports to one word: the lowest-numbered
    port wins. A read in the same cycle as a write to its word returns the old
    contents.

    **How validity is kept.** Validity is stored in memories beside the data,
    not in flip-flops, so the logic does not grow with the capacity (a valid
    bit per word, cleared a sector at a time, would be ``words`` flip-flops
    plus ``words``-wide set and clear logic). Every sector has a ``k``-bit
    *epoch* counter that steps at the clock edge where the original valid bits
    would have been cleared: the edge of its ``lose`` pulse, and every edge
    with the reset asserted. Every word of a :class:`SectorMacro` has a tag
    ``(flag, epoch)`` in a tag memory beside it; a write stores ``(1, epoch of
    its sector)``, and a read is valid when the tag read with the word is
    ``(1, current epoch)``. The tag memory has a power-on value of zero, which
    reads as not valid. A tag only goes stale by its sector's epoch moving on,
    which is exactly the clear of the bit it replaces, as long as the epoch
    never comes back to a stale tag's value. A scrubber in each macro ensures
    that: it reads one tag row (``L`` = ``min(16, depth)`` words) per cycle,
    walking all ``R = depth / L`` rows, and at the next edge clears the flag of
    every tag in it whose epoch is not the current one (skipping a tag an
    access port writes at the edge of the read or of the clear, which is then
    fresh). So a stale tag is cleared at most ``R + 1`` edges after it went
    stale, while its epoch needs at least ``2**k - 1`` more steps (one per edge
    at most: a ``lose`` pulse is at most every other edge, a reset every edge)
    to come back; ``2**k >= R + 3`` makes every read at a stale tag see a
    different epoch or a cleared flag. The scrubber only clears flags of tags
    that are stale already and never delays an access, so the responses are
    those of the per-word valid bits cycle for cycle, including reads and
    writes in the same cycle (both memories read the contents before the
    edge's writes; the epoch read beside a tag changes between the read's two
    cycles only after a ``lose`` or reset cycle, which answers poison anyway).

    Cost: ``k + 1`` bits per word, with ``k = ceil(log2(depth / L + 3))``
    (``depth`` words per bank-sector macro): 10 bits per word for 4096-word
    macros, e.g. 256 KiB of 32-bit words in 4 banks x 4 sectors. Logic per
    macro: ``L`` epoch comparators and a ``log2 R``-bit row counter; per
    sector one ``k``-bit counter. The macros are one shared Verilog module
    (:class:`~pimforge.rtl.hierarchy.Leaf`) written by :func:`macro_verilog`,
    which sets the memories to zero with a loop rather than one line per word
    as Amaranth does, so neither the generated Verilog nor its Verilator build
    grows with the capacity (only widths change). The Amaranth simulator runs
    :class:`SectorMacro`, the same logic; the cocotb benches check the Verilog.

    Parameters
    ----------
    size_bytes : int
        Capacity (a power of two).
    word_bits : int
        Word width (8-128, power of two).
    banks, sectors : int
        ``B`` banks and ``SC`` sectors per bank (powers of two).
    ports : int
        1-3 access ports ``p0``...
    wakeup_cycles, sleep_cycles : int
        PMU latencies, see :class:`~pimforge.rtl.descnet.pmu.SPMPowerManager`.

    Attributes
    ----------
    p0, p1, p2 : In(SPMPort.Signature)
        Access ports (as many as ``ports``).
    sleep_req, sleep_ack, on, on_cycles, wakeups
        The PMU's handshake and counters, one entry per sector index.
    """

    def __init__(self, *, size_bytes: int, word_bits: int, banks: int, sectors: int,
                 ports: int = 1, wakeup_cycles: int = 2, sleep_cycles: int = 1):
        for name, v, lo, hi in (("word_bits", word_bits, 8, 128), ("banks", banks, 1, 64),
                                ("sectors", sectors, 1, 256)):
            if not isinstance(v, int) or v < lo or v > hi or v & (v - 1):
                raise ValueError(f"{name} must be a power of two between {lo} and {hi}, "
                                 f"not {v!r}")
        if not isinstance(ports, int) or not 1 <= ports <= 3:
            raise ValueError(f"ports must be an integer between 1 and 3, not {ports!r}")
        words = size_bytes * 8 // word_bits if isinstance(size_bytes, int) else 0
        if (not isinstance(size_bytes, int) or words < banks * sectors or words & (words - 1)
                or words * word_bits != size_bytes * 8):
            raise ValueError(f"size_bytes must be a power of two holding at least one word per "
                             f"bank and sector ({banks * sectors * word_bits // 8} bytes), "
                             f"not {size_bytes!r}")
        self.size_bytes, self.word_bits, self.banks, self.sectors = (size_bytes, word_bits,
                                                                     banks, sectors)
        self.n_ports = ports
        self.words = words
        self.addr_width = max(1, exact_log2(words))
        self.depth = words // (banks * sectors)
        self.tag_lanes, self.tag_rows, self.epoch_bits = valid_tag_layout(self.depth)
        self.pmu = SPMPowerManager(sectors=sectors, wakeup_cycles=wakeup_cycles,
                                   sleep_cycles=sleep_cycles)
        sig = SPMPort.Signature(addr_width=self.addr_width, data_width=word_bits)
        members = {f"p{i}": In(sig) for i in range(ports)}
        members.update({
            "sleep_req": In(sectors), "sleep_ack": Out(sectors), "on": Out(sectors),
            "on_cycles": Out(self.pmu.on_cycles.shape()),
            "wakeups": Out(self.pmu.wakeups.shape()),
        })
        super().__init__(members)
        self.latencies = {"read": 1, "wakeup_cycles": wakeup_cycles,
                          "sleep_cycles": sleep_cycles}
        self.memory_map = {"words": words, "word_bits": word_bits, "banks": banks,
                           "sectors": sectors, "words_per_bank_sector": self.depth,
                           "address": "[sector | row | bank]", "poison": hex(poison(word_bits))}

    def elaborate(self, platform):
        m = Module()
        m.submodules.pmu = pmu = self.pmu
        m.d.comb += [pmu.sleep_req.eq(self.sleep_req), self.sleep_ack.eq(pmu.sleep_ack),
                     self.on.eq(pmu.on), self.on_cycles.eq(pmu.on_cycles),
                     self.wakeups.eq(pmu.wakeups)]
        bb = exact_log2(self.banks)
        rb = exact_log2(self.depth)
        sb = exact_log2(self.sectors)
        ports = [getattr(self, f"p{i}") for i in range(self.n_ports)]
        aw = exact_log2(self.words)

        def fields(addr):
            a = addr[:aw] if aw else Const(0, 1)
            bank = a[:bb] if bb else Const(0, 1)
            row = a[bb:bb + rb] if rb else Const(0, 1)
            sec = a[bb + rb:] if sb else Const(0, 1)
            return bank, row, sec

        # A sector's epoch steps when its contents are lost (and on every reset
        # cycle, which clears all of them); the scrubber inside the macros needs it
        # to survive a reset, so it ignores the reset itself.
        rst = ResetSignal("sync", allow_reset_less=True)
        epochs = []
        for s in range(self.sectors):
            e = Signal(self.epoch_bits, name=f"epoch{s}", reset_less=True)
            with m.If(pmu.lose[s] | rst):
                m.d.sync += e.eq(e + 1)
            epochs.append(e)

        wr = []
        for i, p in enumerate(ports):
            bank, row, sec = fields(p.addr)
            on = pmu.on.bit_select(sec, 1) if sb else pmu.on[0]
            w = Signal(name=f"wr{i}")
            beaten = 0
            for q in ports[:i]:      # a lower-numbered port writing the same word wins
                beaten = beaten | (q.en & q.we & (q.addr == p.addr))
            m.d.comb += w.eq(p.en & p.we & on & ~beaten)
            wr.append((w, bank, row, sec, on))
            # Response, one cycle later.
            m.d.sync += [p.rvalid.eq(p.en), p.err.eq(p.en & ~on)]

        name = leaf_name("spm_macro", f"d{self.depth}", f"w{self.word_bits}",
                         f"p{self.n_ports}")
        kw = dict(depth=self.depth, word_bits=self.word_bits, ports=self.n_ports)
        macros = []
        for s in range(self.sectors):
            for b in range(self.banks):
                mac = Leaf(name, lambda: SectorMacro(**kw),
                           verilog=lambda n: macro_verilog(n, **kw))
                m.submodules[f"mem_s{s}_b{b}"] = mac
                macros.append(mac)
                m.d.comb += mac.epoch.eq(epochs[s])
                for i, (w, bank, row, sec, _) in enumerate(wr):
                    m.d.comb += [getattr(mac, f"addr{i}").eq(row),
                                 getattr(mac, f"wdata{i}").eq(ports[i].wdata),
                                 getattr(mac, f"we{i}").eq(w & (bank == b) & (sec == s))]
        for i, p in enumerate(ports):
            _, bank, _, sec, on = wr[i]
            ok = Signal(name=f"ok{i}")
            m.d.sync += ok.eq(on)
            data, hit = (getattr(macros[0], f"rdata{i}"), getattr(macros[0], f"hit{i}"))
            if len(macros) > 1:      # (a 0-bit select would be an empty Verilog range)
                sel = Signal(range(len(macros)), name=f"sel{i}")
                m.d.sync += sel.eq(sec * self.banks + bank)
                data = Array(getattr(mac, f"rdata{i}") for mac in macros)[sel]
                hit = Array(getattr(mac, f"hit{i}") for mac in macros)[sel]
            m.d.comb += p.rdata.eq(Mux(ok & hit, data, poison(self.word_bits)))
        return m


def from_config(cfg) -> SectoredSPM:
    c = cfg.spm
    return SectoredSPM(size_bytes=c.size_bytes, word_bits=c.word_bits, banks=c.banks,
                       sectors=c.sectors, ports=c.ports, wakeup_cycles=c.wakeup_cycles,
                       sleep_cycles=c.sleep_cycles)
