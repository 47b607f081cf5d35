"""Power-gated multi-bank sectored scratchpad (DESCNet Sec. V-A, Fig. 13)."""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .pmu import SPMPowerManager
from .port import SPMPort

__all__ = ["SectoredSPM", "from_config", "poison"]


def poison(word_bits: int) -> int:
    """The pattern a read of a lost (never rewritten since power-off) word returns."""
    reps = -(-word_bits // 32)
    return int("DEADBEEF" * reps, 16) & ((1 << word_bits) - 1)


class SectoredSPM(wiring.Component):
    """A scratchpad of ``banks`` x ``sectors`` SRAM macros with its power-management unit.

    Word address layout ``[sector | row | bank]``: consecutive words go to
    consecutive banks (so the 16 rows of the array are fed in parallel), and
    a sector index is one contiguous address range spanning all banks, whose
    macros share one sleep signal (Sec. V-A). Each bank-sector macro is an
    :class:`amaranth.lib.memory.Memory` with one read and one write port per
    SPM port (a true multi-port SRAM as in the SMP organization).

    The OFF state is non-retentive and this is modelled, not assumed: a valid
    bit per word is set by a write and cleared for the whole sector when the
    PMU reports it OFF (``lose``). A read of a word that has not been written
    since the sector last powered off returns :func:`poison` instead of the
    macro's stale contents. An access to a sector that is not ON (going off,
    off, or still waking) is flagged with ``err``; its write is dropped and its
    read returns the poison pattern.

    Simultaneous writes of several ports to one word: the lowest-numbered
    port wins. A read in the same cycle as a write to its word returns the old
    contents.

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
        PMU latencies, see :class:`~pimforge.rtl.spm.pmu.SPMPowerManager`.

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

        valid = Signal(self.words)
        sec_span = self.banks * self.depth
        clear = 0
        for s in range(self.sectors):
            mask = Const(((1 << sec_span) - 1) << (s * sec_span), self.words)
            clear = clear | Mux(pmu.lose[s], mask, 0)
        sets = 0
        wr = []
        for i, p in enumerate(ports):
            bank, row, sec = fields(p.addr)
            on = pmu.on.bit_select(sec, 1) if sb else pmu.on[0]
            w = Signal(name=f"wr{i}")
            beaten = 0
            for q in ports[:i]:      # a lower-numbered port writing the same word wins
                beaten = beaten | (q.en & q.we & (q.addr == p.addr))
            m.d.comb += w.eq(p.en & p.we & on & ~beaten)
            wr.append((w, bank, row, sec))
            sets = sets | Mux(w, Const(1, self.words) << p.addr[:aw], 0) if aw else \
                sets | Mux(w, 1, 0)
            # Response, one cycle later.
            m.d.sync += [p.rvalid.eq(p.en), p.err.eq(p.en & ~on)]
        m.d.sync += valid.eq((valid & ~clear) | sets)

        mems = []
        for s in range(self.sectors):
            for b in range(self.banks):
                mem = Memory(shape=unsigned(self.word_bits), depth=self.depth, init=[])
                m.submodules[f"mem_s{s}_b{b}"] = mem
                mems.append(mem)
                for i, (w, bank, row, sec) in enumerate(wr):
                    wp = mem.write_port()
                    m.d.comb += [wp.addr.eq(row), wp.data.eq(ports[i].wdata),
                                 wp.en.eq(w & (bank == b) & (sec == s))]
        for i, p in enumerate(ports):
            bank, row, sec = fields(p.addr)
            datas = []
            for mem in mems:
                rp = mem.read_port()
                m.d.comb += rp.addr.eq(row)
                datas.append(rp.data)
            sel = Signal(range(len(mems)), name=f"sel{i}")
            ok = Signal(name=f"ok{i}")
            on = pmu.on.bit_select(sec, 1) if sb else pmu.on[0]
            word_valid = valid.bit_select(p.addr[:aw], 1) if aw else valid[0]
            m.d.sync += [sel.eq(sec * self.banks + bank if (sb or bb) else 0),
                         ok.eq(on & word_valid)]
            m.d.comb += p.rdata.eq(Mux(ok, Array(datas)[sel], poison(self.word_bits)))
        return m


def from_config(cfg) -> SectoredSPM:
    c = cfg.spm
    return SectoredSPM(size_bytes=c.size_bytes, word_bits=c.word_bits, banks=c.banks,
                       sectors=c.sectors, ports=c.ports, wakeup_cycles=c.wakeup_cycles,
                       sleep_cycles=c.sleep_cycles)
