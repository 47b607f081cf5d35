"""One iPIM vault (Fig. 2b): control core, ``pgs x pes_per_pg`` near-bank PEs, one
PGSM per process group, and the VSM.

Wiring (all by :func:`amaranth.lib.wiring.connect`):

* ``core.pe[p]`` -> the ``issue`` port of PE ``p`` (PE ``p % pes_per_pg`` of PG
  ``p // pes_per_pg``, the simb_mask numbering of :mod:`~pimforge.rtl.ipim.isa`);
* PE ``p``'s ``pgsm`` port -> port ``p % pes_per_pg`` of its PG's PGSM (``ports``,
  an array of :class:`~pimforge.rtl.ipim.bus.SPMPortSignature`);
* PE ``p``'s ``vsm`` port -> ``vsm.pe[p]`` (over the TSVs, ``t_tsv + t_vsm``);
* PE ``p``'s ``units`` (:data:`~pimforge.rtl.ipim.bus.BUSY_LAYOUT`) ->
  ``core.pe_busy[p]``;
* the ids of A0..A3: ``pe_id = p % pes_per_pg``, ``pg_id = p // pes_per_pg``
  (constants), ``vault_id``/``chip_id`` from the vault's inputs of those names;
* ``core.vsm`` -> ``vsm.core`` (``seti_vsm``), ``vsm.landed`` -> ``core.landed``;
* PE ``p``'s ``act_want``/``act_ok`` -> bit ``p % pes_per_pg`` of ``want``/``ok``
  of its PG's :class:`~pimforge.rtl.ipim.act_window.ActWindow` (the power
  limits of the PG's DRAM die: tRRDS, tRRDL, tFAW), or, built without windows
  (``act_windows=None``, for tests that must see those limits broken),
  ``act_ok`` tied high. A PE without ``act_want`` takes no window;
* PE ``p``'s ``col_want``/``col_ok`` (PEs on the base die, Fig. 8) -> bit ``p`` of
  ``want``/``ok`` of the vault's :class:`~pimforge.rtl.ipim.tsv.TSVArbiter`:
  every bank RD/WR of the vault crosses the one TSV data path it grants.

A PE is any component with those members; every other member of it (the
near-bank PE's DRAM array port ``arr``, its command trace ``cmd``, its
counters ``perf``, ``busy``) is forwarded as the vault's ``pe_<name>``, an
array over the PEs (the DRAM arrays are simulation models outside the RTL).
A PGSM is any component with the ``ports`` array.

The vault's own ports: the core's program backdoor (``imem_*``, ``start``,
``halted``), ``sync``, ``perf``, ``issue_valid``/``issue_pc``, the network's
``nic_req`` (out), ``reply`` (in, into the VSM) and ``vsm_ext`` (the VSM's
port for the network interface and the host), ``vault_id``/``chip_id`` and the
forwarded ``pe_<name>`` arrays.

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
act_windows : list of ActWindow, optional
    ``pgs`` ACT windows of ``pes_per_pg`` PEs each (see above).
tsv : TSVArbiter, optional
    The TSV data path of PEs with ``col_want`` (required for them, refused
    without).
"""

from __future__ import annotations

import math

from amaranth import Module
from amaranth.lib import wiring

from ..hierarchy import Leaf, leaf_name
from ..mem.timing import resolve_timing
from ..params import check
from .act_window import ActWindow
from .bus import BUSY_LAYOUT
from .core import ControlCore
from .core import from_config as core_from_config
from .pe import from_config as pe_from_config
from .pgsm import from_config as pgsm_from_config
from .tsv import TSVArbiter
from .vsm import VSM
from .vsm import from_config as vsm_from_config

__all__ = ["SIMBVault", "from_config"]


class SIMBVault(wiring.Component):
    """Control core + PGs of PEs + PGSMs + VSM of one vault (see the module docstring).

    Parameters
    ----------
    core, vsm, pes, pgsms, act_windows, tsv
        See the module docstring.

    Attributes
    ----------
    imem_we, imem_addr, imem_data, start, halted, issue_valid, issue_pc, sync, perf, nic_req
        The core's ports of the same names.
    reply : the VSM's ``reply`` port.
    vsm_ext : the VSM's ``ext`` port.
    vault_id, chip_id : In
        This vault's numbers (A2, A3 of its PEs).
    pe_<name> : the PEs' other members, ``.array(pes)``.
    """

    #: PE members the vault wires itself.
    WIRED = ("issue", "pgsm", "vsm", "units", "pe_id", "pg_id", "vault_id", "chip_id",
             "act_want", "act_ok", "col_want", "col_ok")

    def __init__(self, *, core: ControlCore, vsm: VSM, pes: list, pgsms: list,
                 act_windows: list | None = None, tsv: TSVArbiter | None = None):
        n = len(pes)
        check(n == core.pes and n == vsm.pes, "pes", n,
              f"one PE per simb_mask bit of the core ({core.pes}) and per VSM port ({vsm.pes})")
        check(len(pgsms) >= 1 and n % len(pgsms) == 0, "pgsms", len(pgsms),
              f"a divisor of the {n} PEs (one PGSM per process group)")
        check(vsm.tag_bits == core.tag_bits, "vsm.tag_bits", vsm.tag_bits,
              f"the core's tag width {core.tag_bits}")
        self.core, self.vsm, self.pe_list, self.pgsms = core, vsm, list(pes), list(pgsms)
        self.pes_per_pg = n // len(pgsms)
        self.gated = "act_want" in pes[0].signature.members
        if act_windows is not None:
            check(self.gated, "act_windows", act_windows, "None for PEs without act_want")
            check(len(act_windows) == len(pgsms) and
                  all(w.pes == self.pes_per_pg for w in act_windows), "act_windows",
                  act_windows, f"{len(pgsms)} windows of {self.pes_per_pg} PEs (one per PG)")
        self.act_windows = None if act_windows is None else list(act_windows)
        tsv_gated = "col_want" in pes[0].signature.members
        check((tsv is not None) == tsv_gated and (tsv is None or tsv.pes == n), "tsv", tsv,
              f"a TSVArbiter of {n} PEs for PEs with col_want (on the base die), None "
              "for near-bank PEs")
        self.tsv = tsv
        self.isa_version = core.isa_version
        self.latencies = {**{f"core_{k}": v for k, v in core.latencies.items()},
                          **{f"vsm_{k}": v for k, v in vsm.latencies.items()}}
        for p, pe in enumerate(pes):
            check(pe.signature.members["units"].shape == BUSY_LAYOUT, f"pes[{p}].units",
                  pe.signature.members["units"].shape, "of BUSY_LAYOUT")
        ports = {}
        for name in ("imem_we", "imem_addr", "imem_data", "start", "halted", "issue_valid",
                     "issue_pc", "sync", "perf", "nic_req"):
            ports[name] = core.signature.members[name]
        ports["reply"] = vsm.signature.members["reply"]
        ports["vsm_ext"] = vsm.signature.members["ext"]
        pm = pes[0].signature.members
        ports["vault_id"] = pm["vault_id"]
        ports["chip_id"] = pm["chip_id"]
        self.forwarded = tuple(k for k in pm if k not in self.WIRED)
        for k in self.forwarded:
            ports[f"pe_{k}"] = pm[k].array(n)
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
        for i, w in enumerate(self.act_windows or ()):
            m.submodules[f"act_window{i}"] = w
        if self.tsv is not None:
            m.submodules.tsv = self.tsv
        for p, pe in enumerate(self.pe_list):
            m.submodules[f"pe{p}"] = pe
            wiring.connect(m, core.pe[p], pe.issue)
            wiring.connect(m, pe.vsm, vsm.pe[p])
            wiring.connect(m, pe.pgsm,
                           self.pgsms[p // self.pes_per_pg].ports[p % self.pes_per_pg])
            m.d.comb += [core.pe_busy[p].eq(pe.units),
                         pe.pe_id.eq(p % self.pes_per_pg), pe.pg_id.eq(p // self.pes_per_pg),
                         pe.vault_id.eq(self.vault_id), pe.chip_id.eq(self.chip_id)]
            if self.act_windows is not None:
                w, i = self.act_windows[p // self.pes_per_pg], p % self.pes_per_pg
                m.d.comb += [w.want[i].eq(pe.act_want), pe.act_ok.eq(w.ok[i])]
            elif self.gated:
                m.d.comb += pe.act_ok.eq(1)
            if self.tsv is not None:
                m.d.comb += [self.tsv.want[p].eq(pe.col_want), pe.col_ok.eq(self.tsv.ok[p])]
            for k in self.forwarded:
                outer, inner = getattr(self, f"pe_{k}")[p], getattr(pe, k)
                if hasattr(inner, "signature"):          # an interface, not a port
                    wiring.connect(m, wiring.flipped(outer), inner)
                elif self.signature.members[f"pe_{k}"].flow is wiring.Out:
                    m.d.comb += outer.eq(inner)
                else:
                    m.d.comb += inner.eq(outer)
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


def from_config(cfg, *, act_windows: bool = True) -> SIMBVault:
    """The vault of ``cfg.ipim``: its control core and VSM, ``pes`` near-bank PEs
    (:mod:`~pimforge.rtl.ipim.pe`), ``pgs`` PGSMs (:mod:`~pimforge.rtl.ipim.pgsm`)
    and ``pgs`` ACT windows of ``cfg.ipim.timing``'s tRRD (tRRDS), tRRDL and tFAW
    in cycles (rounded up as the bank timing is); ``act_windows=False`` leaves
    them out (the PEs' ACTs are then not limited across the die).

    With ``ipim.pe_placement = "base-die"`` the PEs and PGSMs sit on the base die
    beside the VSM (a PE reaches it in ``t_vsm``, without the TSVs) and their banks
    stay on the PIM dies: every bank RD/WR crosses the vault's TSVs, one vector per
    ``ipim.tsv_beats`` cycles, granted by a :class:`TSVArbiter`; the ACT windows
    (the DRAM dies' power limits) stay."""
    c = cfg.ipim
    vsm = vsm_from_config(cfg, **({"t_tsv": 0} if c.base_die else {}))
    # A PE reaches the VSM over the TSVs: its port's latency is the VSM's PE side.
    pe_vsm_latency = vsm.signature.members["pe"].signature.latency
    # One Verilog module for the PEs, instantiated pes times.
    name = leaf_name("simb_pe", digest=(c, pe_vsm_latency))
    pes = [Leaf(name, lambda: pe_from_config(cfg, vsm_latency=pe_vsm_latency))
           for _ in range(c.pes)]
    windows = None
    if act_windows:
        tm = resolve_timing(c.timing, c.tck_ns)
        # tRRDL is no field of Timing (one controller's banks share no die with
        # others'); it is resolved with the same rounding.
        t_rrd_l = max(1, math.ceil(round(c.timing.tRRDL / c.tck_ns, 6)))
        windows = [ActWindow(pes=c.pes_per_pg, t_rrd_s=tm.tRRD, t_rrd_l=t_rrd_l,
                             t_faw=tm.tFAW) for _ in range(c.pgs)]
    return SIMBVault(core=core_from_config(cfg), vsm=vsm, pes=pes,
                     pgsms=[pgsm_from_config(cfg) for _ in range(c.pgs)],
                     act_windows=windows,
                     tsv=TSVArbiter(pes=c.pes, beats=c.tsv_beats) if c.base_die else None)
