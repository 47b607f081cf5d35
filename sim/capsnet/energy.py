"""Energy MODEL of PIM-CapsNet: event counts of a run -> joules, with a breakdown.

PIM-CapsNet (Sec. 6.1) measures the PE by gate-level simulation at 24 nm
(Cadence), the memory with a modified HMC-sim 3.0, and the host P100 with
nvidia-smi; none of those is available here, so every quantity is charged a
per-event energy taken from the literature and scaled to the paper's
technology.  Each coefficient of :class:`EnergyCoefficients` names its source
or derivation; the model is only as good as those numbers, and results
derived from it are stated as modelled, not measured.

Components
----------
pe
    Per flow, the number of FP32 multiplies, adds and shifter operations one
    input costs (:func:`flow_unit_ops`, read off the PE's operation order in
    :mod:`pimforge.verif.models.capsnet.pe`), times the unit energies.
    Every active unit of a flow counts; bypassed slots count nothing.
dram
    ACT (row activation plus its precharge), RD/WR column accesses per bit
    moved between the bank and the logic die, REF as the activations of the
    rows one refresh command covers.  A PRE is charged nothing of its own:
    the activation energy below is the ACT+PRE pair.
crossbar
    Bytes moved between vaults through the logic-layer switch.
link
    Bytes moved over the host SerDes links.
static
    Leakage and clock of the logic that PIM-CapsNet adds (PEs, operation
    controllers), over the elapsed time.

:func:`gpu_energy` is the counterpart for the roofline GPU baseline of
:mod:`pimforge.sim.capsnet.gpu_roofline` (board power x modelled time).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError

from .distribution import choose_distribution
from .gpu_roofline import P100, roofline
from .networks import NETWORKS, network
from .rtl_routing import routing_pe_counts

__all__ = [
    "COUNT_KEYS",
    "DEFAULT_COEFFICIENTS",
    "P100_POWER",
    "EnergyCoefficients",
    "GPUPower",
    "energy_table",
    "flow_unit_ops",
    "gpu_energy",
    "pim_energy",
    "routing_counts_estimate",
    "routing_energy_estimate",
    "routing_energy_table",
]

#: Horowitz, "Computing's energy problem", ISSCC 2014 (45 nm, 0.9 V): FP32 add 0.9 pJ,
#: FP32 multiply 3.7 pJ, 32-bit integer add 0.1 pJ.
_H45_FADD_PJ, _H45_FMUL_PJ, _H45_IADD_PJ = 0.9, 3.7, 0.1
#: PIM-CapsNet Sec. 6.5: the logic is evaluated at 24 nm.  Dynamic energy C V^2 with the
#: switched capacitance scaling with the feature size at a constant 0.9 V: 24 / 45.
TECH_SCALE = 24.0 / 45.0
#: PIM-CapsNet Sec. 6.5: average power of the added logic (32 vaults x 16 PEs + RMAS).
PAPER_LOGIC_POWER_W = 2.24
PAPER_PES = 32 * 16
PAPER_FREQ_HZ = 312.5e6        # Table 4
#: DRAM retention window: every row is refreshed once per 64 ms (JEDEC; HMC 2.1 the same).
REFRESH_WINDOW_S = 64e-3


def _paper_static_w_per_pe() -> float:
    # The paper's 2.24 W minus what the PEs would burn dynamically running flat out
    # (one multiply and one add per PE per cycle, the MAC flow) is charged as static
    # power (leakage, clock tree, pipeline registers, controllers): an upper bound on
    # the static share, spread over the 512 PEs.
    dyn = PAPER_PES * PAPER_FREQ_HZ * (_H45_FMUL_PJ + _H45_FADD_PJ) * TECH_SCALE * 1e-12
    return (PAPER_LOGIC_POWER_W - dyn) / PAPER_PES


@dataclass(frozen=True)
class EnergyCoefficients:
    """Per-event energies (picojoules unless the name says otherwise) and their sources.

    Attributes
    ----------
    fp_add_pj, fp_mul_pj : float
        FP32 add / multiply: Horowitz ISSCC 2014 at 45 nm (0.9 / 3.7 pJ) x 24/45.
    shift_pj : float
        The shifter (bit shift plus a 32-bit integer subtract of the seed):
        Horowitz's 32-bit integer add (0.1 pJ at 45 nm) x 24/45.
    act_pj_per_row_byte : float
        ACT+PRE energy per byte of the opened row: HBM2's 909 pJ per activation of a
        1 KiB row (O'Connor et al., "Fine-Grained DRAM", MICRO 2017, Table 1) / 1024.
        HMC rows (``hmc.row_bytes``) are smaller, so an ACT costs proportionally less.
    rw_pj_per_bit : float
        Column access plus on-die data movement to the TSVs, per bit read or written:
        HBM2's pre- plus post-global-sense-amplifier movement, 1.51 + 1.17 pJ/bit
        (O'Connor et al. 2017).  Cross-check: with 256 B rows and 32 B accesses, 8 per
        ACT, ACT + RW = 227 pJ / 256 bit + 2.68 = 3.57 pJ/bit, close to the 3.7 pJ/bit
        of the HMC DRAM layers (Jeddeloh & Keeth, VLSI 2012).
    xbar_pj_per_bit : float
        One traversal of the logic-layer switch: the 1.1 pJ/bit per router hop at 28 nm
        that NicePIM (Sec. V, its ref. [47]) uses for the logic die of a 3D DRAM.
    link_pj_per_bit : float
        Host SerDes link plus link controller: the HMC logic layer's 6.78 pJ/bit
        (Jeddeloh & Keeth 2012: 10.48 pJ/bit total = 3.7 DRAM + 6.78 logic) minus one
        switch traversal (``xbar_pj_per_bit``), which a host access also makes.
    static_w_per_pe : float
        Leakage/clock power per PE (with its share of the operation controller and
        RMAS): the paper's 2.24 W average logic power (Sec. 6.5) minus the PEs' dynamic
        power at full MAC rate (512 x 312.5 MHz x (mul + add)), over 512 PEs.
    """

    fp_add_pj: float = _H45_FADD_PJ * TECH_SCALE
    fp_mul_pj: float = _H45_FMUL_PJ * TECH_SCALE
    shift_pj: float = _H45_IADD_PJ * TECH_SCALE
    act_pj_per_row_byte: float = 909.0 / 1024
    rw_pj_per_bit: float = 1.51 + 1.17
    xbar_pj_per_bit: float = 1.1
    link_pj_per_bit: float = 6.78 - 1.1
    static_w_per_pe: float = field(default_factory=_paper_static_w_per_pe)

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not (isinstance(v, (int, float)) and v >= 0):
                raise PimforgeError(f"energy coefficient {k} must be a number >= 0, not {v!r}")


DEFAULT_COEFFICIENTS = EnergyCoefficients()

#: The counts :func:`pim_energy` understands (all optional, 0 when absent).
COUNT_KEYS = (
    "mac",          # MAC products (one per PE input of the MAC flow)
    "mac_groups",   # MAC groups (outputs): each adds the La - 1 lane-reduction adds
    "isqrt", "exp", "recip", "div",   # inputs of the other flows
    "act", "pre", "rd", "wr", "ref",  # DRAM commands (summed over vaults)
    "rd_bytes", "wr_bytes",           # DRAM bytes; default rd/wr x hmc.block_bytes
    "xbar_bytes",                     # bytes through the inter-vault switch
    "link_bytes",                     # bytes over the host links
)


def flow_unit_ops(cfg) -> dict[str, dict[str, int]]:
    """FP32 multiplies, adds and shifter operations per input of each PE flow.

    Read off the operation order of the PE (``n = cfg.pe.newton_steps``,
    ``La = cfg.fp.add_latency``):

    ===========  =============================  ===========================
    flow         operations                     mul / add / shift
    ===========  =============================  ===========================
    mac          ``p = a*b``; ``S += p``         1 / 1 / 0 per product
    mac_group    ``((S0+S1)+...)+S_{La-1}``      0 / La-1 / 0 per group
    exp          ``x*log2e + bias``; FIX; ``*R``  1 (+1 recovery) / 1 / 1
    isqrt        ``x*0.5``; seed; n x (3 mul,    1+3n / n / 1
                 1 add)
    recip        seed; n x (2 mul, 1 add)        2n / n / 1
    div          recip(d); ``a*y``               2n+1 / n / 1
    ===========  =============================  ===========================
    """
    n, la = cfg.pe.newton_steps, cfg.fp.add_latency
    return {
        "mac": {"mul": 1, "add": 1, "shift": 0},
        "mac_groups": {"mul": 0, "add": la - 1, "shift": 0},
        "exp": {"mul": 1 + int(cfg.pe.exp_recovery), "add": 1, "shift": 1},
        "isqrt": {"mul": 1 + 3 * n, "add": n, "shift": 1},
        "recip": {"mul": 2 * n, "add": n, "shift": 1},
        "div": {"mul": 2 * n + 1, "add": n, "shift": 1},
    }


def _count(counts: dict, key: str) -> float:
    v = counts.get(key, 0)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
        raise PimforgeError(f"count {key!r} must be a number >= 0, not {v!r}")
    return float(v)


def pim_energy(counts: dict, elapsed_s: float, cfg,
               coeffs: EnergyCoefficients = DEFAULT_COEFFICIENTS) -> dict:
    """Joules of one PIM-CapsNet run from its event counts.

    Parameters
    ----------
    counts : dict
        Keys from :data:`COUNT_KEYS` (others are an error); missing keys are 0.
    elapsed_s : float
        Wall time of the run on the cube (static power is charged over it).
    cfg : Config
        Reads ``pe``, ``fp``, ``capsnet.pes_per_vault``, ``hmc`` (vaults, row and
        block bytes, capacity, ``timing.tREFI``).

    Returns
    -------
    dict
        ``pe_<flow>`` for each flow, ``pe`` (their sum), ``dram_act``, ``dram_rw``,
        ``dram_ref``, ``dram`` (sum), ``crossbar``, ``link``, ``static`` and ``total``,
        all in joules; ``ops`` (multiplies, adds, shifts) and ``power_w`` (total /
        elapsed) for reference.
    """
    unknown = sorted(set(counts) - set(COUNT_KEYS))
    if unknown:
        raise PimforgeError(f"unknown energy count(s) {', '.join(unknown)}; "
                            f"known: {', '.join(COUNT_KEYS)}")
    if not isinstance(elapsed_s, (int, float)) or elapsed_s < 0:
        raise PimforgeError(f"elapsed_s must be a number >= 0, not {elapsed_s!r}")
    c, pj = coeffs, 1e-12
    out: dict = {}
    ops = {"mul": 0.0, "add": 0.0, "shift": 0.0}
    unit_pj = {"mul": c.fp_mul_pj, "add": c.fp_add_pj, "shift": c.shift_pj}
    for flow, per in flow_unit_ops(cfg).items():
        n = _count(counts, flow)
        out[f"pe_{flow}"] = n * sum(per[u] * unit_pj[u] for u in per) * pj
        for u in per:
            ops[u] += n * per[u]
    out["pe"] = sum(out[f"pe_{f}"] for f in flow_unit_ops(cfg))

    hmc = cfg.hmc
    act_pj = c.act_pj_per_row_byte * hmc.row_bytes
    rd_b = counts.get("rd_bytes", _count(counts, "rd") * hmc.block_bytes)
    wr_b = counts.get("wr_bytes", _count(counts, "wr") * hmc.block_bytes)
    rd_b, wr_b = _count({"rd_bytes": rd_b}, "rd_bytes"), _count({"wr_bytes": wr_b}, "wr_bytes")
    # One REF per vault covers rows / (refresh window / tREFI) rows of that vault.
    rows_per_vault = hmc.capacity_per_vault / hmc.row_bytes
    refs_per_window = REFRESH_WINDOW_S / (hmc.timing.tREFI * 1e-9)
    out["dram_act"] = _count(counts, "act") * act_pj * pj
    _count(counts, "pre")  # validated; its energy is part of the ACT+PRE pair
    out["dram_rw"] = (rd_b + wr_b) * 8 * c.rw_pj_per_bit * pj
    out["dram_ref"] = _count(counts, "ref") * rows_per_vault / refs_per_window * act_pj * pj
    out["dram"] = out["dram_act"] + out["dram_rw"] + out["dram_ref"]
    out["crossbar"] = _count(counts, "xbar_bytes") * 8 * c.xbar_pj_per_bit * pj
    out["link"] = _count(counts, "link_bytes") * 8 * c.link_pj_per_bit * pj
    pes = hmc.vaults * cfg.capsnet.pes_per_vault
    out["static"] = c.static_w_per_pe * pes * float(elapsed_s)
    out["total"] = out["pe"] + out["dram"] + out["crossbar"] + out["link"] + out["static"]
    out["ops"] = ops
    out["power_w"] = out["total"] / elapsed_s if elapsed_s > 0 else 0.0
    return out


@dataclass(frozen=True)
class GPUPower:
    """Board power MODEL of a GPU: ``P = idle_w + (tdp_w - idle_w) * activity``.

    Attributes
    ----------
    name : str
    tdp_w : float
        Thermal design power of the board.
    idle_w : float
        Power with nothing running (clocks up, memory refreshed).
    """

    name: str
    tdp_w: float
    idle_w: float


#: Tesla P100: 250 W board TDP of the PCIe card (NVIDIA P100 datasheet; the SXM2
#: module is rated 300 W).  Idle 30 W is an assumption (a typical nvidia-smi reading
#: of an idle card with clocks up), used only when *activity* < 1.
P100_POWER = GPUPower("P100", tdp_w=250.0, idle_w=30.0)


def gpu_energy(time_s: float, power: GPUPower = P100_POWER, activity: float = 1.0) -> float:
    """Joules of a GPU busy for *time_s* (a roofline time) at *activity* in [0, 1].

    ``activity = 1`` (TDP for the whole modelled time) is the default: the roofline
    time assumes the GPU saturated by compute or bandwidth, and the paper reads the
    power of a busy card from nvidia-smi.  This is a model, not a measurement.
    """
    if not 0.0 <= activity <= 1.0:
        raise PimforgeError(f"activity must be between 0 and 1, not {activity}")
    if time_s < 0:
        raise PimforgeError(f"time_s must be >= 0, not {time_s}")
    return (power.idle_w + (power.tdp_w - power.idle_w) * activity) * time_s


def energy_table(e: dict) -> str:
    """A short text breakdown of a :func:`pim_energy` result (microjoules and %)."""
    keys = [k for k in e if k.startswith("pe_")] + ["pe", "dram_act", "dram_rw", "dram_ref",
                                                     "dram", "crossbar", "link", "static",
                                                     "total"]
    tot = e["total"] or 1.0
    return "\n".join(f"{k:<14} {1e6 * e[k]:>12.4f} uJ {100 * e[k] / tot:>6.1f} %" for k in keys)


def routing_counts_estimate(net, cfg, freq_mhz: float | None = None) -> tuple[dict, float, str]:
    """Analytic event counts and time of one routing run on the cube: ``(counts, s, dim)``.

    A first-order MODEL for use before (or beside) an RTL run's own counts:

    * PE inputs per flow: exactly those of
      :func:`pimforge.sim.capsnet.rtl_routing.routing_pe_counts` (the records that
      route the network on the PE RTL);
    * DRAM: ``W`` and ``u`` read once, ``u_hat`` written once (Eq. 1) and read twice
      per iteration (Eq. 2 and 4), everything else (``b``, ``c``, ``s``, ``v``) once
      per iteration each way; FP32 words, streamed, so one ACT per ``row_bytes``
      (every opened row fully used, the best case the PIM-CapsNet mapping aims at);
      ``rd``/``wr`` bytes only (no command counts needed);
    * crossbar: ``M`` of the chosen distribution (Eq. 8/10/12); link: ``u`` in and
      ``v`` out; time: ``alpha E + beta M`` of the chosen dimension
      (:mod:`pimforge.sim.capsnet.distribution`), refresh over that time.
    """

    net = network(net) if isinstance(net, str) else net
    B, L, H, cl, ch, it = net.batch, net.n_l, net.n_h, net.c_l, net.c_h, net.iterations
    counts = routing_pe_counts(B, L, H, cl, ch, it)
    w = 4
    uhat = B * L * H * ch
    rd = w * (L * H * ch * cl + B * L * cl + 2 * it * uhat + it * (2 * L * H + B * H * ch))
    wr = w * (uhat + it * (2 * L * H + 2 * B * H * ch))
    d = choose_distribution(net, cfg, freq_mhz)
    best = d.scores[d.best]
    t = best.time_s
    counts.update(rd_bytes=rd, wr_bytes=wr, act=-(-(rd + wr) // cfg.hmc.row_bytes),
                  xbar_bytes=best.M, link_bytes=w * (B * L * cl + B * H * ch),
                  ref=int(t / (cfg.hmc.timing.tREFI * 1e-9)) * cfg.hmc.vaults)
    counts["pre"] = counts["act"]
    return counts, t, d.best


def routing_energy_estimate(net, cfg, freq_mhz: float | None = None,
                            coeffs: EnergyCoefficients = DEFAULT_COEFFICIENTS) -> dict:
    """Modelled routing energy on PIM-CapsNet vs the P100 roofline model (both MODELS).

    Returns ``{"network", "dim", "pim_s", "pim": pim_energy(...), "gpu_s", "gpu_j",
    "saving"}`` with ``saving = 1 - pim total / gpu_j``.
    """

    counts, t, dim = routing_counts_estimate(net, cfg, freq_mhz)
    pim = pim_energy(counts, t, cfg, coeffs)
    rl = roofline(net, P100)
    gpu = gpu_energy(rl.routing_s)
    name = net if isinstance(net, str) else net.name
    return {"network": name, "dim": dim, "pim_s": t, "pim": pim, "gpu_s": rl.routing_s,
            "gpu_j": gpu, "saving": 1.0 - pim["total"] / gpu}


def routing_energy_table(cfg=None, nets=None) -> str:
    """Text table of :func:`routing_energy_estimate` for the 12 networks (config hmc_gen3)."""

    cfg = cfg if cfg is not None else load_config("hmc_gen3")
    nets = nets or [n.name for n in NETWORKS]
    head = (f"{'network':<9} {'dim':>3} {'PIM us':>9} {'PE uJ':>9} {'DRAM uJ':>9} {'xbar uJ':>8}"
            f" {'link uJ':>8} {'static uJ':>9} {'PIM uJ':>9} {'P100 us':>9} {'P100 uJ':>10}"
            f" {'saving':>7}")
    lines = [("routing energy MODEL (analytic counts; P100 = roofline time x 250 W), config "
             f"{cfg.name}"), head, "-" * len(head)]
    for n in nets:
        r = routing_energy_estimate(n, cfg)
        p = r["pim"]
        lines.append(f"{n:<9} {r['dim']:>3} {1e6 * r['pim_s']:>9.1f} {1e6 * p['pe']:>9.1f} "
                     f"{1e6 * p['dram']:>9.1f} {1e6 * p['crossbar']:>8.2f} {1e6 * p['link']:>8.2f}"
                     f" {1e6 * p['static']:>9.1f} {1e6 * p['total']:>9.1f} "
                     f"{1e6 * r['gpu_s']:>9.1f} {1e6 * r['gpu_j']:>10.1f} "
                     f"{100 * r['saving']:>6.1f}%")
    return "\n".join(lines)


if __name__ == "__main__":
    print(routing_energy_table())
