"""One iPIM vault (Fig. 2b): control core, ``pgs x pes_per_pg`` near-bank PEs, one
PGSM per process group, and the VSM.

Wiring (all by :func:`amaranth.lib.wiring.connect`):

* ``core.pe[p]`` -> the ``issue`` port of PE ``p`` (PE ``p % pes_per_pg`` of PG
  ``p // pes_per_pg``, the simb_mask numbering of :mod:`~pimforge.rtl.simb.isa`);
* PE ``p``'s ``pgsm`` port -> port ``p % pes_per_pg`` of its PG's PGSM (``pe``,
  an array of :class:`~pimforge.rtl.simb.bus.SPMPortSignature`);
* PE ``p``'s ``vsm`` port -> ``vsm.pe[p]`` (over the TSVs, ``t_tsv + t_vsm``);
* PE ``p``'s ``busy`` (:data:`~pimforge.rtl.simb.core.BUSY_LAYOUT`) ->
  ``core.pe_busy[p]``;
* ``core.vsm`` -> ``vsm.core`` (``seti_vsm``), ``vsm.landed`` -> ``core.landed``.

A PE is any component with those four members (``issue`` flipped
:class:`~pimforge.rtl.simb.bus.IssueSignature`, ``pgsm``/``vsm`` scratchpad
ports, ``busy``); members it has besides them (its DRAM bank array port, for
instance) are gathered by the PE under one member ``ext`` that the vault
forwards as ``pe_ext[p]``. A PGSM is any component with the ``pe`` array.

The vault's own ports: the core's program backdoor (``imem_*``, ``start``,
``halted``), ``sync``, ``perf``, ``issue_valid``/``issue_pc``, the network's
``nic_req`` (out), ``reply`` (in, into the VSM) and ``vsm_ext`` (the VSM's
port for the network interface and the host), and ``pe_ext``.

Parameters
----------
core : ControlCore
    The vault's control core.
vsm : VSM
    The vault's scratchpad (``pes`` PE ports, tags as wide as the core's).
pes : list of components
    ``pgs * pes_per_pg`` PEs, in simb_mask order.
pgsms : list of components
    ``pgs`` PGSMs.
"""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring

from ..params import check
from .core import BUSY_LAYOUT, ControlCore
from .vsm import VSM

__all__ = ["SIMBVault", "from_config"]


class SIMBVault(wiring.Component):
    """Control core + PGs of PEs + PGSMs + VSM of one vault (see the module docstring).

    Parameters
    ----------
    core, vsm, pes, pgsms
        See the module docstring.

    Attributes
    ----------
    imem_we, imem_addr, imem_data, start, halted, issue_valid, issue_pc, sync, perf, nic_req
        The core's ports of the same names.
    reply : the VSM's ``reply`` port.
    vsm_ext : the VSM's ``ext`` port.
    pe_ext : the PEs' ``ext`` members (when the PEs have one), ``.array(pes)``.
    """

    def __init__(self, *, core: ControlCore, vsm: VSM, pes: list, pgsms: list):
        n = len(pes)
        check(n == core.pes and n == vsm.pes, "pes", n,
              f"one PE per simb_mask bit of the core ({core.pes}) and per VSM port ({vsm.pes})")
        check(len(pgsms) >= 1 and n % len(pgsms) == 0, "pgsms", len(pgsms),
              f"a divisor of the {n} PEs (one PGSM per process group)")
        check(vsm.tag_bits == core.tag_bits, "vsm.tag_bits", vsm.tag_bits,
              f"the core's tag width {core.tag_bits}")
        self.core, self.vsm, self.pe_list, self.pgsms = core, vsm, list(pes), list(pgsms)
        self.pes_per_pg = n // len(pgsms)
        self.isa_version = core.isa_version
        self.latencies = {**{f"core_{k}": v for k, v in core.latencies.items()},
                          **{f"vsm_{k}": v for k, v in vsm.latencies.items()}}
        for p, pe in enumerate(pes):
            check(pe.signature.members["busy"].shape == BUSY_LAYOUT, f"pes[{p}].busy",
                  pe.signature.members["busy"].shape, "of BUSY_LAYOUT")
        ports = {}
        for name in ("imem_we", "imem_addr", "imem_data", "start", "halted", "issue_valid",
                     "issue_pc", "sync", "perf", "nic_req"):
            ports[name] = core.signature.members[name]
        ports["reply"] = vsm.signature.members["reply"]
        ports["vsm_ext"] = vsm.signature.members["ext"]
        if "ext" in pes[0].signature.members:
            ports["pe_ext"] = pes[0].signature.members["ext"].array(n)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        core, vsm = self.core, self.vsm
        m.submodules.core = core
        m.submodules.vsm = vsm
        wiring.connect(m, core.vsm, vsm.core)
        wiring.connect(m, vsm.landed, core.landed)
        for i, g in enumerate(self.pgsms):
            m.submodules[f"pgsm{i}"] = g
        for p, pe in enumerate(self.pe_list):
            m.submodules[f"pe{p}"] = pe
            wiring.connect(m, core.pe[p], pe.issue)
            wiring.connect(m, pe.vsm, vsm.pe[p])
            wiring.connect(m, pe.pgsm, self.pgsms[p // self.pes_per_pg].pe[p % self.pes_per_pg])
            m.d.comb += core.pe_busy[p].eq(pe.busy)
            if "pe_ext" in self.signature.members:
                wiring.connect(m, wiring.flipped(self.pe_ext[p]), pe.ext)
        # The vault's ports are the core's and the VSM's own.
        m.d.comb += [core.imem_we.eq(self.imem_we), core.imem_addr.eq(self.imem_addr),
                     core.imem_data.eq(self.imem_data), core.start.eq(self.start),
                     self.halted.eq(core.halted), self.issue_valid.eq(core.issue_valid),
                     self.issue_pc.eq(core.issue_pc)]
        wiring.connect(m, wiring.flipped(self.sync), core.sync)
        wiring.connect(m, wiring.flipped(self.perf), core.perf)
        wiring.connect(m, wiring.flipped(self.nic_req), core.nic_req)
        wiring.connect(m, wiring.flipped(self.reply), vsm.reply)
        wiring.connect(m, wiring.flipped(self.vsm_ext), vsm.ext)
        return m


def from_config(cfg) -> SIMBVault:
    """The vault of ``cfg.ipim`` with the PEs of :mod:`pimforge.rtl.simb.pe` and the
    PGSMs of :mod:`pimforge.rtl.simb.pgsm` (imported here: they are separate blocks)."""
    # The near-bank PE and the PGSM are separate blocks of their own modules.
    from . import core as core_mod
    from . import pe as pe_mod
    from . import pgsm as pgsm_mod
    from . import vsm as vsm_mod

    c = cfg.ipim
    core = core_mod.from_config(cfg)
    return SIMBVault(core=core, vsm=vsm_mod.from_config(cfg),
                     pes=[pe_mod.from_config(cfg) for _ in range(c.pes)],
                     pgsms=[pgsm_mod.from_config(cfg) for _ in range(c.pgs)])
