"""DESCNet scratchpad organizations SMP, SEP and HY (Sec. V-A, Fig. 14)."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .port import SPMPort
from .scratchpad import SectoredSPM, poison

__all__ = ["KINDS", "DESCNetSPM", "from_config"]

KINDS = ("data", "weight", "acc")


class DESCNetSPM(wiring.Component):
    """The on-chip memory of the CapsNet accelerator with data, weight and accumulator ports.

    * ``SMP``: one shared memory with three ports, one per kind of value.
    * ``SEP``: a separate single-port memory per kind.
    * ``HY``: the separate memories plus a shared memory with ``shared_ports``
      ports that holds what exceeds them (Appendix B).

    Each accelerator port sees one address space: words ``[0, size_x)`` are
    its separate memory, words ``[size_x, size_x + size_s)`` are the shared
    memory (the schedule that sized the memories with Algorithm 1 gives each
    kind's overflow its own region). With fewer than three shared ports, kind
    ``k`` uses shared port ``k mod shared_ports``; when two kinds meet on one
    shared port in the same cycle, the lower kind (data < weight < acc) is
    served and the other is answered with ``err`` (the DSE only keeps
    configurations in which at most ``shared_ports`` kinds overflow at once).
    An address beyond both memories is answered with ``err`` too.

    Every memory is a :class:`~pimforge.rtl.descnet.scratchpad.SectoredSPM` with
    its own PMU; their handshakes are exported as ``<mem>_sleep_req`` etc.

    Parameters
    ----------
    organization : str
        ``SMP``, ``SEP`` or ``HY``.
    word_bits, banks, wakeup_cycles, sleep_cycles : int
        Shared by all memories.
    sizes : dict
        Bytes of ``shared``, ``data``, ``weight``, ``acc`` (unused ones ignored).
    sectors : dict
        Sectors per bank of each memory.
    shared_ports : int
        Ports of the shared memory (SMP: 3).
    """

    def __init__(self, *, organization: str, word_bits: int, banks: int, sizes: dict,
                 sectors: dict, shared_ports: int = 3, wakeup_cycles: int = 2,
                 sleep_cycles: int = 1):
        if organization not in ("SMP", "SEP", "HY"):
            raise ValueError(f"organization must be one of 'SMP', 'SEP', 'HY', "
                             f"not {organization!r}")
        if not isinstance(shared_ports, int) or not 1 <= shared_ports <= 3:
            raise ValueError(f"shared_ports must be an integer between 1 and 3, "
                             f"not {shared_ports!r}")
        if organization == "SMP" and shared_ports != 3:
            raise ValueError(f"shared_ports must be 3 for the SMP organization, "
                             f"not {shared_ports}")
        self.organization = organization
        self.word_bits = word_bits
        self.shared_ports = shared_ports
        kw = dict(word_bits=word_bits, banks=banks, wakeup_cycles=wakeup_cycles,
                  sleep_cycles=sleep_cycles)
        self.mems: dict[str, SectoredSPM] = {}
        if organization in ("SMP", "HY"):
            self.mems["shared"] = SectoredSPM(size_bytes=sizes["shared"],
                                              sectors=sectors["shared"],
                                              ports=shared_ports, **kw)
        if organization in ("SEP", "HY"):
            for k in KINDS:
                self.mems[k] = SectoredSPM(size_bytes=sizes[k], sectors=sectors[k], ports=1,
                                           **kw)
        self.sep_words = {k: (self.mems[k].words if k in self.mems else 0) for k in KINDS}
        self.shared_words = self.mems["shared"].words if "shared" in self.mems else 0
        members = {}
        self.addr_width = {}
        for k in KINDS:
            aw = max(1, ceil_log2(self.sep_words[k] + self.shared_words))
            self.addr_width[k] = aw
            members[k] = In(SPMPort.Signature(addr_width=aw, data_width=word_bits))
        for name, mem in self.mems.items():
            members[f"{name}_sleep_req"] = In(mem.sectors)
            members[f"{name}_sleep_ack"] = Out(mem.sectors)
            members[f"{name}_on"] = Out(mem.sectors)
            members[f"{name}_on_cycles"] = Out(mem.pmu.on_cycles.shape())
        super().__init__(members)
        self.latencies = {"read": 1, "wakeup_cycles": wakeup_cycles,
                          "sleep_cycles": sleep_cycles}
        self.memory_map = {
            "organization": organization,
            "words": {k: {"separate": self.sep_words[k], "shared_base": self.sep_words[k],
                          "shared": self.shared_words} for k in KINDS},
            "memories": {n: {"words": m.words, "sectors": m.sectors,
                             "ports": m.n_ports, "words_per_sector": m.words // m.sectors}
                         for n, m in self.mems.items()},
            "shared_port_of": {k: i % shared_ports for i, k in enumerate(KINDS)},
            "poison": hex(poison(word_bits)),
        }

    def elaborate(self, platform):
        m = Module()
        for name, mem in self.mems.items():
            m.submodules[name] = mem
            m.d.comb += [mem.sleep_req.eq(getattr(self, f"{name}_sleep_req")),
                         getattr(self, f"{name}_sleep_ack").eq(mem.sleep_ack),
                         getattr(self, f"{name}_on").eq(mem.on),
                         getattr(self, f"{name}_on_cycles").eq(mem.on_cycles)]
        shared = self.mems.get("shared")
        # Which kind drives each shared port this cycle (lowest kind first).
        taken = [Const(0, 1)] * self.shared_ports
        for i, k in enumerate(KINDS):
            port = getattr(self, k)
            sep_n = self.sep_words[k]
            to_sep = Signal(name=f"{k}_to_sep")
            to_sh = Signal(name=f"{k}_to_shared")
            lost = Signal(name=f"{k}_lost")
            m.d.comb += to_sep.eq(port.en & (port.addr < sep_n) if sep_n else 0)
            in_sh = (port.addr >= sep_n) & (port.addr < sep_n + self.shared_words)
            if shared is not None:
                sp = getattr(shared, f"p{i % self.shared_ports}")
                busy = taken[i % self.shared_ports]
                m.d.comb += [to_sh.eq(port.en & in_sh & ~busy),
                             lost.eq(port.en & in_sh & busy)]
                with m.If(to_sh):
                    m.d.comb += [sp.en.eq(1), sp.we.eq(port.we),
                                 sp.addr.eq(port.addr - sep_n), sp.wdata.eq(port.wdata)]
                taken[i % self.shared_ports] = busy | (port.en & in_sh)
            if sep_n:
                sep = self.mems[k].p0
                m.d.comb += [sep.en.eq(to_sep), sep.we.eq(port.we),
                             sep.addr.eq(port.addr[:len(sep.addr)]), sep.wdata.eq(port.wdata)]
            bad = Signal(name=f"{k}_bad")
            m.d.comb += bad.eq(port.en & ~to_sep & ~to_sh)
            # Responses: the memories answer one cycle later; route them back.
            r_sep, r_sh, r_bad = (Signal(name=f"{k}_r_sep"), Signal(name=f"{k}_r_sh"),
                                  Signal(name=f"{k}_r_bad"))
            m.d.sync += [r_sep.eq(to_sep), r_sh.eq(to_sh), r_bad.eq(bad),
                         port.rvalid.eq(port.en)]
            rdata = Const(poison(self.word_bits), self.word_bits)
            err = r_bad
            if shared is not None:
                sp = getattr(shared, f"p{i % self.shared_ports}")
                rdata = Mux(r_sh, sp.rdata, rdata)
                err = err | (r_sh & sp.err)
            if sep_n:
                sep = self.mems[k].p0
                rdata = Mux(r_sep, sep.rdata, rdata)
                err = err | (r_sep & sep.err)
            m.d.comb += [port.rdata.eq(rdata), port.err.eq(err)]
        return m


def from_config(cfg) -> DESCNetSPM:
    c = cfg.spm
    return DESCNetSPM(organization=c.organization, word_bits=c.word_bits, banks=c.banks,
                      sizes={"shared": c.shared_bytes, "data": c.data_bytes,
                             "weight": c.weight_bytes, "acc": c.acc_bytes},
                      sectors={"shared": c.shared_sectors, "data": c.data_sectors,
                               "weight": c.weight_sectors, "acc": c.acc_sectors},
                      shared_ports=c.shared_ports, wakeup_cycles=c.wakeup_cycles,
                      sleep_cycles=c.sleep_cycles)
