"""The ``capsnet`` workload: CapsNet dynamic routing end to end on the vault RTL.

Steps (each a function of this module, :func:`route` runs them in order):

1. :func:`resolve_config`, :func:`resolve_network`: the config (at ``freq``)
   and the Table 1 network (``scale`` divides B and N_L);
2. :func:`choose_dimension`: the distribution dimension, offline: the Sec. 5.1
   trade-off costed on the compiled programs (or the paper's Eq. 6-12 score, or
   forced by ``dim``);
3. :func:`compile_variant`: the routing compiled for the Sec. 6.1 variant
   (:mod:`pimforge.sim.capsnet.compiler`);
4. :func:`routing_inputs`: ``u`` and ``W``, random (``seed``; ``u`` squashed
   capsules as PrimaryCaps produces them, ``W`` normal with std
   ``0.5/sqrt(C_L)``) or given;
5. :func:`run_isa_model`: the same programs on the ISA-level golden model
   (:mod:`pimforge.verif.models.capsnet.isa`), its exact always-ready-memory
   cycle count, and ``route_pim`` in the programs' order;
6. :func:`run_rtl` (or :func:`model_execution` with ``model_only``): the
   programs on the Verilated vault compute of every vault
   (:mod:`pimforge.sim.capsnet.rtl_run`), compared bit for bit with the model
   (``rtl_matches_model``);
7. :func:`measure`: the per-equation breakdown, the event counts and the
   energy MODEL, the PIM-Intra crossbar charge;
8. :func:`assemble`: the :class:`CapsNetRun`.

Cycles are logic-die cycles at ``freq`` (the vault RTL runs in that one clock
domain); the time and its DRAM-clock equivalent (``hmc.tck_ns``) are derived.
The per-equation breakdown is the controller's exact per-instruction cost
with an always-ready memory (``issue_cycles(lanes) + pe_latency + 6`` cycles,
:mod:`pimforge.sim.capsnet.timing`) of the most loaded vault; barrier,
crossbar and DRAM waits come from the RTL run (``phase_cycles``,
``crossbar_wait_cycles``, ``vault_request_stalls``).

Ablations (Sec. 6.1), :func:`run_ablations`. Routing variants, each run on the
RTL: ``pim-capsnet`` (inter- and intra-vault design, the config's address
mapping; the presets use the custom ``capsnet`` mapping), ``pim-inter`` (the
same distribution without the intra-vault design: no stationary operands, no
prefetch, the ``default`` mapping) and ``pim-intra`` (the intra-vault design without
the inter-vault design: centralized compute groups on the logic die, a fixed split
and the data spread over the vaults by the ``default`` mapping, so every operand
crosses the crossbar, see :func:`compile_variant`). Every RTL run reports its cycles
split as Fig. 16(a) splits them (``time_breakdown``).
Whole-network variants (Sec. 6.3), from
:func:`pimforge.sim.capsnet.pipeline.whole_network` with this run's routing
time and per-vault traffic: ``rmas-pim``, ``rmas-gpu`` (pipelined host and
routing under the naive RTL arbitration policies), ``all-in-pim`` (host layers
on the PEs too, a MODEL) and the GPU ``baseline`` (P100 roofline MODEL).
Every run also reports both GPU MODELS of the inference, roofline and eager
PyTorch (``gpu_models``, :mod:`pimforge.sim.capsnet.gpu_models`).
``ablation="all"`` runs every one and reports ``speedup_vs`` of PIM-CapsNet
over each, with ``speedup_scope`` saying whether the ratio is of the routing
or of the whole network.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pimforge.gen.args import WavesWindow
from pimforge.gen.config import Config, load_config
from pimforge.gen.errors import CapacityError, PimforgeError
from pimforge.gen.output import FileSet
from pimforge.rtl.capsnet.pe import latency_from_config
from pimforge.verif.models.capsnet.isa import execute
from pimforge.verif.models.capsnet.pe import PEModel
from pimforge.verif.models.capsnet.routing import route_f64, route_pim, squash_f64

from ..result import OMIT_IF_NONE, WorkloadResult
from .compiler import compile_routing, program_ops
from .distribution import DIMENSIONS, choose_distribution
from .energy import pim_energy
from .gpu_models import GPUModelTime, gpu_models
from .gpu_roofline import roofline
from .networks import CapsNetSpec, network
from .overhead import cycles_over_ideal, time_breakdown
from .pipeline import routing_from_run, whole_network, whole_network_table
from .rtl_run import build_vault_driver, central_crossbar, run_on_rtl
from .timing import compiled_cycles, program_cycles

if TYPE_CHECKING:
    from pimforge.verif.models.capsnet.isa import ExecResult

    from .compiler import Compiled
    from .distribution import Distribution
    from .rtl_run import RTLRun

__all__ = [
    "ABLATIONS",
    "DIM_RULES",
    "NETWORK_ABLATIONS",
    "ROUTING_ABLATIONS",
    "CapsNetRun",
    "CapsNetRunOptions",
    "Execution",
    "Measures",
    "ModelRun",
    "Routed",
    "RoutingVariant",
    "WallTimes",
    "assemble",
    "choose_dimension",
    "dimension_cycles",
    "compile_variant",
    "measure",
    "model_execution",
    "network_ablations",
    "pe_latency",
    "random_inputs",
    "resolve_config",
    "resolve_network",
    "route",
    "routing_inputs",
    "run_ablations",
    "run_capsnet",
    "run_isa_model",
    "run_rtl",
    "write_dump",
]

#: Routing-level Sec. 6.1 variants (see :func:`compile_variant`) and the address
#: mapping each forces (None: the config's ``hmc.mapping``).
ROUTING_ABLATIONS = {"pim-capsnet": None, "pim-inter": "default", "pim-intra": "default"}
#: PIM-Intra has no Sec. 5.1 choice: it splits the low-level capsules, the
#: largest dimension of every Table 1 network, so that every vault has work.
INTRA_DIMENSION = "L"
#: Whole-network variants (Sec. 6.3; :mod:`pimforge.sim.capsnet.pipeline` scenarios).
NETWORK_ABLATIONS = ("rmas-pim", "rmas-gpu", "all-in-pim")
ABLATIONS = (*ROUTING_ABLATIONS, *NETWORK_ABLATIONS)


# ------------------------------------------------------------------------ options, result

@dataclass(frozen=True)
class CapsNetRunOptions:
    """How to run one network (the workload's own options).

    Attributes
    ----------
    scale : int
        Divide B and N_L by this (1: the Table 1 size).
    freq : float or None
        Logic-die MHz (None: the config's ``freq_mhz``).
    dim : {"B", "L", "H"} or None
        Force the distribution dimension (None: chosen by *dim_rule*).
    dim_rule : {"compiled", "score"}
        How :func:`choose_dimension` chooses when *dim* is None.
    seed : int
        Seed of the random ``u`` and ``W``.
    model_only : bool
        Skip the RTL: the ISA-level model and its exact cycle count.
    check_route_pim : bool
        Also compare the model with ``route_pim`` in the programs' order.
    ablation : str
        A Sec. 6.1 variant: one of :data:`ROUTING_ABLATIONS` for
        :func:`run_capsnet`; for :func:`run_ablations` also one of
        :data:`NETWORK_ABLATIONS` or ``"all"``.
    dram : {"banked", "ideal"}
        Operand memory of the RTL run (:mod:`pimforge.sim.capsnet.rtl_run`).
    mapping : str or None
        Address mapping (None: the variant's, else the config's).
    operand_buffer : bool
        Banked DRAM: the read ports keep the last bundle's blocks.
    threads : int or None
        Native driver threads (None: the usable cores); no effect on results.
    waves : WavesWindow or None
        Write the waves of vault ``waves_vault``'s compute for this window of the RTL
        run's cycles (:func:`~pimforge.sim.capsnet.rtl_run.run_on_rtl`); only the
        PIM-CapsNet run of :func:`run_ablations` writes them.
    waves_vault : int
        The vault whose compute the waves show.
    """

    scale: int = 1
    freq: float | None = None
    dim: str | None = None
    dim_rule: str = "compiled"
    seed: int = 1
    model_only: bool = False
    check_route_pim: bool = True
    ablation: str = "pim-capsnet"
    dram: str = "banked"
    mapping: str | None = None
    operand_buffer: bool = True
    threads: int | None = None
    waves: WavesWindow | None = None
    waves_vault: int = 0


@dataclass(frozen=True)
class WallTimes:
    """Wall-clock seconds of a run's parts (None: the part did not run)."""

    build: float
    rtl: float | None
    rtl_loop: float | None
    isa_model: float
    total: float


@dataclass(frozen=True)
class RoutingVariant:
    """One routing ablation's figures, as :attr:`CapsNetRun.variants` reports them."""

    cycles: int
    time_s: float
    dimension: str
    intervault_bytes: int
    vault_request_stalls: int | None
    address_mapping: str
    dram: dict
    ablation_detail: dict | None
    rtl_matches_model: bool | None
    energy_j: dict[str, float]
    time_breakdown: dict | None = None

    @classmethod
    def of(cls, run: CapsNetRun) -> RoutingVariant:
        """The figures of *run* that a variant reports."""
        return cls(**{f.name: getattr(run, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class CapsNetRun(WorkloadResult):
    """One ``capsnet`` run (its JSON: :meth:`to_json`, schema ``pimforge.run.capsnet``).

    The fields are the keys of the run's JSON; the module doc says how each is
    obtained. ``variants``, ``speedup_vs``, ``energy_saving_vs``,
    ``speedup_scope`` and ``whole_network`` are set by :func:`run_ablations`
    for a network variant or ``all`` and left out of the JSON otherwise.

    ``gpu_model`` and ``speedup_vs_gpu_model`` are the P100 (320 GB/s) roofline
    of the routing; ``gpu_models`` holds both GPU MODELS of the whole inference
    (``roofline`` and ``eager``, each per GPU variant, kernel by kernel:
    :mod:`pimforge.sim.capsnet.gpu_models`); it is None only when read back
    from a result written before it existed.
    """

    SCHEMA = "pimforge.run.capsnet"
    SCHEMA_VERSION = 1

    network: str
    config: str
    scale: int
    vaults: int
    active_vaults: int
    #: ``B``, ``N_L``, ``N_H``, ``C_L``, ``C_H``, ``iterations``.
    shape: dict[str, int]
    #: ``"rtl"`` or ``"isa-model"``.
    executed_on: str
    ablation: str
    #: PIM-Intra: its compute cycles and the charged crossbar operand traffic.
    ablation_detail: dict | None
    freq_mhz: float
    cycles: int
    time_s: float
    dram_clock_cycles: int
    per_equation_cycles_busiest_vault: dict[str, int]
    phase_cycles: list[int]
    timing_model_cycles: int
    intervault_bytes: int
    crossbar_wait_cycles: int
    vault_request_stalls: int | None
    #: The banked DRAM model's counters (:meth:`RTLRun.dram_summary`), or
    #: ``{"model": "ideal"}`` / ``{"model": None}`` (ideal memory / ISA model).
    dram: dict
    address_mapping: str
    operand_buffer: bool | None
    vault_busy_cycles: list[int] | None
    reads: list[int]
    writes: list[int]
    dimension: str
    dimension_forced: bool
    #: Per dimension: ``E``, ``M``, ``time_s``, ``score`` (Sec. 5.1).
    scores: dict[str, dict[str, float]]
    program_instructions: int
    events: dict[str, int]
    energy_j: dict[str, float]
    energy_note: str
    rtl_matches_model: bool | None
    isa_model_matches_route_pim: bool | None
    max_abs_err_vs_float64: float
    max_abs_v_float64: float
    gpu_model: dict
    speedup_vs_gpu_model: float
    wall_s: WallTimes
    rtl_cycles_per_s: float | None
    variants: dict[str, RoutingVariant] | None = field(default=None, metadata=OMIT_IF_NONE)
    speedup_vs: dict[str, float] | None = field(default=None, metadata=OMIT_IF_NONE)
    energy_saving_vs: dict[str, float] | None = field(default=None, metadata=OMIT_IF_NONE)
    speedup_scope: dict[str, str] | None = field(default=None, metadata=OMIT_IF_NONE)
    whole_network: dict | None = field(default=None, metadata=OMIT_IF_NONE)
    gpu_models: dict[str, dict[str, GPUModelTime]] | None = field(default=None,
                                                                  metadata=OMIT_IF_NONE)
    #: How the dimension was chosen (:data:`DIM_RULES`) and the controller cycles of
    #: each dimension's compiled programs with an always-ready memory; None when read
    #: back from a result written before they existed.
    dimension_rule: str | None = None
    dimension_cycles: dict[str, int] | None = None
    #: Where the RTL's cycles over :attr:`timing_model_cycles` go, by measured parts
    #: (:func:`~pimforge.sim.capsnet.overhead.cycles_over_ideal`); None without an RTL run
    #: or when read back from a result written before it existed.
    cycles_over_ideal: dict | None = None
    #: The cycles split as Fig. 16(a) splits them (compute, inter-vault
    #: communication, vault request stalls, TSV bandwidth stalls:
    #: :func:`~pimforge.sim.capsnet.overhead.time_breakdown`); None without an RTL
    #: run or when read back from a result written before it existed.
    time_breakdown: dict | None = None

    @property
    def ok(self) -> bool:
        """The run's check passed: ``rtl_matches_model`` (``isa_model_matches_route_pim``
        on the ISA model) and no variant's RTL differs from its model."""
        check = (self.isa_model_matches_route_pim if self.executed_on == "isa-model"
                 else self.rtl_matches_model)
        return bool(check) and all(v.rtl_matches_model is not False
                                   for v in (self.variants or {}).values())

    def summary(self) -> str:
        """The lines ``pimforge run capsnet`` prints."""
        lines = [f"  speedup vs {a} ({self.speedup_scope[a]}): {x:.3f}x"
                 for a, x in (self.speedup_vs or {}).items()]
        if self.whole_network is not None:
            lines.append(whole_network_table(self.whole_network))
        s = self.shape
        lines.append(f"{self.network} B={s['B']} N_L={s['N_L']} N_H={s['N_H']} on "
                     f"{self.vaults} vaults at {self.freq_mhz} MHz")
        cyc = ""
        if self.dimension_cycles:
            cyc = "; compiled cycles " + ", ".join(f"{k} {v}"
                                                   for k, v in self.dimension_cycles.items())
        rule = f" ({self.dimension_rule})" if self.dimension_rule else " (forced)"
        lines.append("  dimension scores (1/s): "
                     + ", ".join(f"{k} {v['score']:.4g}" for k, v in self.scores.items())
                     + cyc + f"{rule} -> {self.dimension}")
        lines.append(f"  {self.cycles} cycles = {self.time_s * 1e6:.2f} us; inter-vault "
                     f"{self.intervault_bytes} B; per equation "
                     f"{self.per_equation_cycles_busiest_vault}")
        eager = ""
        if self.gpu_models and self.gpu_model["gpu"] in self.gpu_models["eager"]:
            e = self.gpu_models["eager"][self.gpu_model["gpu"]].routing_s / self.time_s
            eager = f" (eager {e:.3g}x)"
        lines.append(f"  on {self.executed_on}; rtl_matches_model {self.rtl_matches_model}; "
                     f"max |v - v_float64| {self.max_abs_err_vs_float64:.3g}; speedup vs GPU "
                     f"model {self.speedup_vs_gpu_model:.3g}x{eager}; "
                     f"wall {self.wall_s.total:.1f}s")
        return "\n".join(lines)


@dataclass
class Routed:
    """A run's result with the arrays it routed (arrays are not part of the JSON)."""

    result: CapsNetRun
    #: Low-level capsules ``(B, N_L, C_L)`` and weights ``(N_L, N_H, C_H, C_L)``, float32.
    u: np.ndarray
    W: np.ndarray
    #: The routed output ``(B, N_H, C_H)``: the RTL's, or the ISA model's.
    v: np.ndarray


# ------------------------------------------------------------------------------ the steps

def pe_latency(cfg: Config) -> int:
    """The PE latency of *cfg* (cycles, every flow), without building the PE."""
    return latency_from_config(cfg)


def resolve_config(config: Config | str | None, freq: float | None = None) -> Config:
    """*config* (a preset name, a TOML path or a Config) at logic-die *freq* MHz."""
    cfg = config if isinstance(config, Config) else load_config(config)
    if freq is not None:
        cfg = dataclasses.replace(cfg, freq_mhz=float(freq))
    return cfg


def resolve_network(net: CapsNetSpec | str, scale: int = 1) -> CapsNetSpec:
    """The Table 1 network *net* (or the given spec) with B and N_L divided by *scale*."""
    full = net if isinstance(net, CapsNetSpec) else network(net)
    return full.scaled(scale) if scale > 1 else full


#: How :func:`choose_dimension` picks the distribution dimension.
DIM_RULES = ("compiled", "score")


def dimension_cycles(net: CapsNetSpec, cfg: Config) -> dict[str, int]:
    """Per dimension, the cycles of *net*'s routing compiled for *cfg* at the vault
    controller's fixed timing with an always-ready memory
    (:func:`~pimforge.sim.capsnet.timing.compiled_cycles`; nothing is executed).
    A dimension whose slices do not fit a vault's memory is left out (the
    :class:`~pimforge.gen.errors.CapacityError` is raised when none fits)."""
    lat = pe_latency(cfg)
    out, full = {}, None
    for d in DIMENSIONS:
        try:
            comp = compile_routing(net, d, cfg)
        except CapacityError as e:      # this dimension's slices do not fit a vault
            full = full or e
            continue
        out[d] = compiled_cycles(comp.programs, comp.vaults, lat, cfg)
    if not out:
        raise full
    return out


def choose_dimension(net: CapsNetSpec, cfg: Config, dim: str | None = None,
                     rule: str = "compiled") -> tuple[Distribution, dict[str, int], str]:
    """The distribution dimension of *net* on *cfg* (*dim* if given), chosen offline.

    Sec. 5.1 weighs each dimension's compute on the busiest vault (``E``) against
    its inter-vault movement (``M``). ``rule="score"`` takes the paper's Eq. 6-12
    score as printed (:func:`~pimforge.sim.capsnet.distribution.choose_distribution`),
    whose ``M`` terms gather every partial on one master vault.
    ``rule="compiled"`` (the default) makes the same trade-off on the programs
    the compiler emits for each dimension: the fewest
    :func:`dimension_cycles`, which cost the compute per vault and the
    aggregation as it is done here (reduce-scatter and all-gather, bounded by the
    busiest vault's crossbar port) at the controller's exact timing. Returns the
    paper's scores, the compiled cycles per dimension and the dimension.
    """
    if rule not in DIM_RULES:
        raise PimforgeError(f"dimension rule must be one of {', '.join(DIM_RULES)}, "
                            f"not {rule!r}")
    dist = choose_distribution(net, cfg, cfg.freq_mhz)
    cycles = dimension_cycles(net, cfg)
    best = dist.best if rule == "score" else min(cycles, key=lambda d: (cycles[d],
                                                                        DIMENSIONS.index(d)))
    return dist, cycles, dim or best


def compile_variant(net: CapsNetSpec, dim: str, cfg: Config, ablation: str = "pim-capsnet",
                    mapping: str | None = None) -> Compiled:
    """The routing of *net* compiled for the routing variant *ablation*.

    ``"pim-inter"``: the same distribution without the intra-vault design of
    Sec. 5.2-5.3: no stationary operands (every operand re-read from the
    DRAM), the ``default`` address mapping (Fig. 13a) and, in
    :func:`run_capsnet`, no prefetch (each bundle fetched when it is asked
    for, so the lanes wait for every bank of it). ``"pim-intra"``
    (Sec. 6.1 PIM-Intra): all vaults and the intra-vault design, without the
    inter-vault design: the work is split along *dim* (:func:`route` passes
    :data:`INTRA_DIMENSION` instead of the Sec. 5.1 choice) over compute groups
    of ``pes_per_vault`` PEs that sit in the middle of the logic die ("the
    centralized computation units in the logic layer"), one group per vault's
    worth of PEs, and the data is not placed with the work: the groups' arrays
    lie one after the other in the cube's addresses under the ``default``
    low-interleave mapping (Fig. 13a), spread over every vault, and every block
    a group reads or writes crosses the crossbar (``placement="central"``; the
    driver's DRAM model charges each request as HMC packets to the group's
    share of the crossbar, :func:`~pimforge.sim.capsnet.rtl_run.central_crossbar`,
    besides its home bank and TSV).
    """

    if ablation not in ROUTING_ABLATIONS:
        raise PimforgeError(f"routing ablation must be one of {', '.join(ROUTING_ABLATIONS)}, "
                            f"not {ablation!r}")
    mapping = mapping or ROUTING_ABLATIONS[ablation]
    if ablation == "pim-intra":
        return dataclasses.replace(compile_routing(net, dim, cfg, mapping=mapping),
                                   placement="central")
    return compile_routing(net, dim, cfg, mapping=mapping, intra_vault=ablation != "pim-inter")


def random_inputs(net: CapsNetSpec, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded float32 ``u`` (squashed, as PrimaryCaps produces them) and ``W``."""

    rng = np.random.default_rng(seed)
    u = squash_f64(rng.normal(0, 1, (net.batch, net.n_l, net.c_l))).astype(np.float32)
    W = rng.normal(0, 0.5 / np.sqrt(net.c_l), (net.n_l, net.n_h, net.c_h, net.c_l)
                   ).astype(np.float32)
    return u, W


def routing_inputs(net: CapsNetSpec, seed: int = 1, inputs=None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(u, W)``: :func:`random_inputs`, or *inputs* checked against *net*'s shapes."""
    if inputs is None:
        return random_inputs(net, seed)
    u, W = (np.ascontiguousarray(a, dtype=np.float32) for a in inputs)
    want = ((net.batch, net.n_l, net.c_l), (net.n_l, net.n_h, net.c_h, net.c_l))
    if (u.shape, W.shape) != want:
        raise PimforgeError(f"inputs must have shapes u {want[0]} and W {want[1]} for "
                            f"{net.name}, not {u.shape} and {W.shape}")
    return u, W


@dataclass
class ModelRun:
    """The ISA-level golden model's run of the compiled programs."""

    ex: ExecResult
    #: :func:`~pimforge.sim.capsnet.timing.program_cycles` of the run.
    timing: dict
    v: np.ndarray
    #: The model's ``v`` equals ``route_pim`` in the programs' order (None: not checked).
    matches_route_pim: bool | None
    pe_latency: int
    seconds: float


def run_isa_model(comp: Compiled, mems: list[np.ndarray], cfg: Config, u: np.ndarray,
                  W: np.ndarray, iterations: int, check_route_pim: bool = True) -> ModelRun:
    """Run *comp* on the ISA-level model from *mems* (not modified)."""

    pe = PEModel(cfg)
    lat = pe_latency(cfg)
    t0 = time.monotonic()
    ex = execute(comp.programs, [m.copy() for m in mems], pe)
    seconds = time.monotonic() - t0
    timing = program_cycles(ex.stats, comp.vaults, ex.phases, lat, cfg)
    v = comp.gather_v(ex.memories)
    same = None
    if check_route_pim:
        v_pim = route_pim(u, W, iterations, program_ops(comp, pe)).v
        same = bool(np.array_equal(v.view(np.uint32), v_pim.view(np.uint32)))
    return ModelRun(ex, timing, v, same, lat, seconds)


@dataclass
class Execution:
    """What executed the programs (the RTL, or the model alone) and what it counted."""

    rtl: RTLRun | None
    v: np.ndarray
    cycles: int
    phase_cycles: list[int]
    xbar_wait: int
    #: Per-vault operand pairs read and words written, busy cycles (None: the
    #: model does not count them).
    reads: list[int] | None
    writes: list[int] | None
    busy: list[int] | None
    #: The RTL's memories and ``v`` equal the model's (None: no RTL run).
    matches: bool | None
    build_s: float = 0.0


def model_execution(model: ModelRun) -> Execution:
    """The model's own execution (``model_only``): its exact cycle count, no RTL."""
    t = model.timing
    return Execution(None, model.v, t["cycles"], t["phase_cycles"], t["xbar_wait"],
                     None, None, None, None)


def run_rtl(comp: Compiled, mems: list[np.ndarray], cfg: Config, model: ModelRun,
            dram: str = "banked", operand_buffer: bool = True,
            threads: int | None = None, prefetch: bool = True,
            waves: WavesWindow | None = None, waves_vault: int = 0) -> Execution:
    """Run *comp* on the Verilated vault compute and compare it with *model*.

    ``rtl_matches_model`` holds when every vault's memory and ``v`` equal the
    model's bit for bit and the model did not differ from ``route_pim``.
    """

    t0 = time.monotonic()
    exe = build_vault_driver(cfg, trace=waves is not None)
    build_s = time.monotonic() - t0
    rtl = run_on_rtl(comp, mems, cfg, exe=exe, dram=dram, hold_blocks=operand_buffer,
                     threads=threads, prefetch=prefetch, waves=waves, waves_vault=waves_vault)
    v = comp.gather_v(rtl.memories)
    same_mem = all(np.array_equal(a, b) for a, b in zip(rtl.memories, model.ex.memories))
    matches = bool(same_mem and np.array_equal(v.view(np.uint32), model.v.view(np.uint32))
                   and model.matches_route_pim is not False)
    return Execution(rtl, v, rtl.cycles, rtl.phase_cycles, rtl.xbar_wait, rtl.reads,
                     rtl.writes, rtl.busy, matches, build_s)


@dataclass
class Measures:
    """What :func:`measure` derives from the instruction statistics and the execution."""

    #: Cycles of the run (PIM-Intra: at least its crossbar operand traffic).
    cycles: int
    time_s: float
    per_equation: dict[str, int]
    intervault_bytes: int
    reads: list[int]
    writes: list[int]
    events: dict[str, int]
    energy_j: dict
    ablation_detail: dict | None


def measure(comp: Compiled, cfg: Config, model: ModelRun, run: Execution) -> Measures:
    """Per-equation breakdown, event counts, energy MODEL and, for a placement
    that is not the compute's own (PIM-Intra), the operand traffic over the crossbar.

    The remote operand blocks are counted by the RTL run's DRAM model (their
    time is in its cycles); a run without it (ideal memory, the ISA model)
    counts them from the placement (``"central"``: every word read and
    written; ``"flat"``: ``(N-1)/N`` of them).
    """

    stats, lat = model.ex.stats, model.pe_latency
    per_eq: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    ops_by_flow: dict[str, int] = defaultdict(int)
    mac_groups = 0
    xbar = 0
    for st in stats:
        lab = comp.labels[st.vault][st.pc]
        per_eq[lab][f"v{st.vault}"] += st.issue_cycles(cfg.capsnet.pes_per_vault) + lat + 6
        if st.op in ("FLOW", "ADD"):
            ops_by_flow[st.flow or "MAC"] += st.elements
            if (st.flow or "MAC") == "MAC":
                mac_groups += st.outputs
        if st.op == "SEND" and st.peer != st.vault:
            xbar += st.send_bytes + cfg.capsnet.packet_overhead_bytes
    breakdown = {k: max(v.values()) for k, v in sorted(per_eq.items())}
    f_hz = cfg.freq_mhz * 1e6
    cycles = run.cycles
    detail = None
    if comp.placement != "local":
        rtl = run.rtl
        central = comp.placement == "central"
        xb = central_crossbar(cfg, len(comp.active))
        if rtl is not None and rtl.dram == "banked":
            remote = 16 * sum(rtl.blocks_remote)
            moved = sum(rtl.crossbar_bytes) if central else remote
            how = ("remote blocks counted by the RTL run's DRAM model (in its cycles)"
                   + (", as HMC packets (both directions)" if central else ""))
        else:
            nv = cfg.hmc.vaults
            words = sum(2 * s.elements + s.outputs for s in stats if s.op != "SEND")
            remote = moved = 4 * words if central else 4 * words * (nv - 1) // nv
            how = ("the words read and written" if central else "(N-1)/N of the words read "
                   "and written at intervault_bw_gbs") + (
                   ", overlapped with the compute (no DRAM model in this run)")
            bw = (xb["rd"] + xb["wr"]) * len(comp.active) if central else (
                cfg.capsnet.intervault_bw_gbs * 1e9 / f_hz)
            cycles = max(cycles, int(np.ceil(remote / bw)))
        detail = {"placement": comp.placement, "dimension": comp.dim,
                  "remote_operand_bytes": int(remote), "crossbar_bytes": int(moved),
                  "modelled": how}
        if central:
            detail["crossbar"] = {
                "link_bw_gbs": cfg.hmc.link_bw_gbs, "groups": len(comp.active),
                "bytes_per_cycle_per_group_each_way": xb["rd"],
                "packet_overhead_bytes": xb["packet"]}
        xbar += int(moved)
    time_s = cycles / f_hz
    reads, writes = run.reads, run.writes
    if reads is None:      # the controller reads one a/b pair per non-send element
        reads = [sum(s.elements for s in stats if s.vault == v and s.op != "SEND")
                 for v in range(comp.vaults)]
        writes = [sum(s.outputs for s in stats if s.vault == v and s.op != "SEND")
                  for v in range(comp.vaults)]
    # Event counts for the energy model: the banked DRAM model's row misses are
    # the activations (an ideal memory or the ISA model count none); refresh is
    # not simulated.
    rtl = run.rtl
    acts = rtl.dram_summary()["activates"] if rtl and rtl.dram == "banked" else 0
    events = {"act": int(acts), "mac": int(ops_by_flow.get("MAC", 0)),
              "mac_groups": int(mac_groups),
              **{f.lower(): int(ops_by_flow.get(f, 0)) for f in ("ISQRT", "EXP", "RECIP",
                                                                 "DIV")},
              "rd_bytes": int(8 * sum(reads)), "wr_bytes": int(4 * sum(writes)),
              "xbar_bytes": int(xbar)}
    energy = pim_energy(events, time_s, cfg)
    return Measures(cycles, time_s, breakdown, int(xbar), reads, writes, events,
                    {k: v for k, v in energy.items() if k != "ops"}, detail)


def assemble(net: CapsNetSpec, cfg: Config, opts: CapsNetRunOptions, dist: Distribution,
             dim: str, comp: Compiled, model: ModelRun, run: Execution, m: Measures,
             u: np.ndarray, W: np.ndarray, t_start: float,
             dim_cycles: dict[str, int] | None = None) -> CapsNetRun:
    """The :class:`CapsNetRun` of the steps' outputs (*t_start*: ``time.monotonic()``
    when the run began; *dim_cycles*: :func:`dimension_cycles`)."""

    v64 = route_f64(u, W, net.iterations).v
    err = float(np.abs(run.v - v64).max())
    gpu = roofline(net)
    rtl = run.rtl
    banked = bool(rtl and rtl.dram == "banked")
    return CapsNetRun(
        network=net.name, config=cfg.name, scale=opts.scale, vaults=comp.vaults,
        active_vaults=len(comp.active),
        shape={"B": net.batch, "N_L": net.n_l, "N_H": net.n_h, "C_L": net.c_l,
               "C_H": net.c_h, "iterations": net.iterations},
        executed_on="isa-model" if rtl is None else "rtl",
        ablation=opts.ablation, ablation_detail=m.ablation_detail,
        freq_mhz=cfg.freq_mhz, cycles=m.cycles, time_s=m.time_s,
        dram_clock_cycles=round(m.time_s / (cfg.hmc.tck_ns * 1e-9)),
        per_equation_cycles_busiest_vault=m.per_equation,
        phase_cycles=run.phase_cycles,
        timing_model_cycles=model.timing["cycles"],
        intervault_bytes=m.intervault_bytes,
        crossbar_wait_cycles=run.xbar_wait,
        vault_request_stalls=int(sum(rtl.vault_request_stalls)) if banked else None,
        dram=rtl.dram_summary() if banked else {"model": "ideal" if rtl else None},
        address_mapping=comp.amap.kind,
        operand_buffer=opts.operand_buffer if banked else None,
        vault_busy_cycles=run.busy,
        reads=[int(r) for r in m.reads], writes=[int(w) for w in m.writes],
        dimension=dim, dimension_forced=opts.dim is not None,
        dimension_rule=None if opts.dim is not None else opts.dim_rule,
        dimension_cycles=dim_cycles,
        scores={k: {"E": s.E, "M": s.M, "time_s": s.time_s, "score": s.score}
                for k, s in dist.scores.items()},
        program_instructions=comp.program_words(),
        events=m.events, energy_j=m.energy_j,
        energy_note="energy MODEL (sim/capsnet/energy.py); ACTs from the banked DRAM "
                    "model's row misses (0 with an ideal memory), refresh not charged",
        rtl_matches_model=run.matches,
        isa_model_matches_route_pim=model.matches_route_pim,
        max_abs_err_vs_float64=err, max_abs_v_float64=float(np.abs(v64).max()),
        gpu_model={"gpu": gpu.gpu, "routing_s": gpu.routing_s, "total_s": gpu.total_s,
                   "note": "roofline model, not a measurement"},
        speedup_vs_gpu_model=gpu.routing_s / m.time_s,
        gpu_models=gpu_models(net),
        wall_s=WallTimes(build=run.build_s, rtl=rtl.wall_s if rtl else None,
                         rtl_loop=rtl.seconds if rtl else None, isa_model=model.seconds,
                         total=time.monotonic() - t_start),
        rtl_cycles_per_s=rtl.cycles / max(rtl.seconds, 1e-9) if rtl else None,
        cycles_over_ideal=cycles_over_ideal(rtl, model.timing) if rtl else None,
        time_breakdown=time_breakdown(rtl) if rtl else None,
    )


def write_dump(folder: str | Path, routed: Routed) -> None:
    """``u.npy``, ``W.npy``, ``v.npy`` and ``iterations.txt`` (written last) of *routed*
    into *folder*, as one set: a failure leaves the previous set whole."""
    with FileSet(folder, marker="iterations.txt") as fs:
        np.save(fs.path("u.npy"), routed.u)
        np.save(fs.path("W.npy"), routed.W)
        np.save(fs.path("v.npy"), routed.v)
        fs.path("iterations.txt").write_text(f"{routed.result.shape['iterations']}\n")


# ------------------------------------------------------------------------------ the runs

def route(net: CapsNetSpec | str, config: Config | str | None = None,
          options: CapsNetRunOptions | None = None, *, inputs=None) -> Routed:
    """Run one network end to end (the steps of the module doc) and keep its arrays.

    *net* is a Table 1 name or a :class:`~pimforge.sim.capsnet.networks.CapsNetSpec`;
    *config* a preset name, a TOML path or a :class:`~pimforge.gen.config.Config`.
    ``inputs=(u, W)`` routes the given float32 capsules ``(B, N_L, C_L)`` and
    weights ``(N_L, N_H, C_H, C_L)`` instead of the seeded random ones.
    """
    opts = options or CapsNetRunOptions()
    t_start = time.monotonic()
    cfg = resolve_config(config, opts.freq)
    spec = resolve_network(net, opts.scale)
    dist, dim_cycles, dim = choose_dimension(spec, cfg, opts.dim, opts.dim_rule)
    if opts.ablation == "pim-intra" and opts.dim is None:
        dim = INTRA_DIMENSION
    comp = compile_variant(spec, dim, cfg, opts.ablation, opts.mapping)
    u, W = routing_inputs(spec, opts.seed, inputs)
    mems = comp.memories(u, W)
    model = run_isa_model(comp, mems, cfg, u, W, spec.iterations, opts.check_route_pim)
    run = (model_execution(model) if opts.model_only else
           run_rtl(comp, mems, cfg, model, opts.dram, opts.operand_buffer, opts.threads,
                   prefetch=opts.ablation != "pim-inter", waves=opts.waves,
                   waves_vault=opts.waves_vault))
    m = measure(comp, cfg, model, run)
    res = assemble(spec, cfg, opts, dist, dim, comp, model, run, m, u, W, t_start,
                   dim_cycles)
    return Routed(res, u, W, run.v)


def run_capsnet(net: CapsNetSpec | str, config: Config | str | None = None,
                options: CapsNetRunOptions | None = None, *, inputs=None,
                dump: str | Path | None = None) -> CapsNetRun:
    """:func:`route` one network and return its result; *dump*: also write
    ``u.npy``, ``W.npy``, ``v.npy`` and ``iterations.txt`` into that folder."""
    routed = route(net, config, options, inputs=inputs)
    if dump:
        write_dump(dump, routed)
    return routed.result


def network_ablations(res: CapsNetRun, cfg: Config,
                      scenarios=("baseline", "pim-capsnet", *NETWORK_ABLATIONS), **kw) -> dict:
    """Whole-network Sec. 6.3 variants around the routing run *res*:
    :func:`~pimforge.sim.capsnet.pipeline.whole_network` on the network *res*
    routed (the reduced one at its ``scale``), with *res*'s time and per-vault
    traffic as the routing of one batch."""

    net = resolve_network(res.network, res.scale)
    return whole_network(net, cfg, routing_from_run(res), scenarios=scenarios, **kw)


def run_ablations(net: CapsNetSpec | str, config: Config | str | None = None,
                  options: CapsNetRunOptions | None = None, *,
                  dump: str | Path | None = None) -> CapsNetRun:
    """The Sec. 6.1 variant ``options.ablation``: the run of that routing variant, or
    of PIM-CapsNet with the whole-network scenarios (a network variant, or
    ``"all"``: every variant), with ``speedup_vs`` (PIM-CapsNet over each
    variant) and ``speedup_scope``. *dump* applies to the main run."""
    opts = options or CapsNetRunOptions()
    which = opts.ablation
    if which not in (*ABLATIONS, "all"):
        raise PimforgeError(f"--ablation must be one of {', '.join(ABLATIONS)} or all, "
                            f"not {which!r}")
    if which in ROUTING_ABLATIONS:
        return run_capsnet(net, config, opts, dump=dump)
    res = run_capsnet(net, config, dataclasses.replace(opts, ablation="pim-capsnet"),
                      dump=dump)
    routing = [a for a in ROUTING_ABLATIONS if a != "pim-capsnet"] if which == "all" else []
    others = {a: run_capsnet(net, config, dataclasses.replace(opts, ablation=a, waves=None))
              for a in routing}
    speedup = {a: r.time_s / res.time_s for a, r in others.items()}
    scope = {a: "routing" for a in others}
    scen = ("baseline", "pim-capsnet", *(NETWORK_ABLATIONS if which == "all" else (which,)))
    whole = network_ablations(res, resolve_config(config, opts.freq), scenarios=scen)
    mine = whole["scenarios"]["pim-capsnet"]["time_s"]
    for s in scen:
        if s != "pim-capsnet":
            speedup[s] = whole["scenarios"][s]["time_s"] / mine
            scope[s] = "whole network"
    return dataclasses.replace(
        res, variants={a: RoutingVariant.of(r) for a, r in others.items()},
        speedup_vs=speedup,
        energy_saving_vs={a: 1 - res.energy_j["total"] / r.energy_j["total"]
                          for a, r in others.items()},
        speedup_scope=scope, whole_network=whole)
