"""One vault's share of an image compiled for the whole machine (``--one-vault``).

A pipeline is compiled for the whole machine of the config (Table III: 8 cubes x 16
vaults: the bands of every PE of every vault) and one vault's share runs on a *window*
machine of one cube of four vaults: local vault 1 is the measured vault ``gv``, vaults
0 and 2 its neighbours ``gv - 1`` and ``gv + 1`` running their own programs, so that
every halo line the measured vault fetches by ``req`` between two ``sync`` barriers is
the one its neighbour computed, and every barrier waits for them as on the whole
machine. Vault 3 stands in for every vault further away: it has no program (a halted
vault counts as arrived at every barrier) and its banks hold nothing, so the
neighbours' own outer halo lines are not the machine's; this reaches the measured vault
only through a chain of stages whose halos span a neighbour's whole share (at 8K on
Table III a share is 64 rows), and the check of the measured vault's output rows
against the reference says whether it did.

Only the window's three programs are generated. Every vault runs the same kernels on
bands of the same size in lock step (the vaults after the image's last band compute on
nothing; the vault of the last band adds a few row copies, the first and last vaults
clamp instead of fetching a halo), so the measured vault's cycles are the machine's:
``machine_ms = cycles / freq``. This replaces the extrapolation of
``scripts/ipim/ipim_eval.py`` from a small band by the whole band of an 8K image.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from pimforge.rtl.ipim.isa import LANES, Instr, Opcode
from pimforge.verif.models.ipim.image import reference

from .backend import Options
from .image_run import ImageRun, compile_bench, cube_driver, energy_nj, rtl_fetch, rtl_words
from .lang import FP32, CompileError
from .layout import Array, place

__all__ = ["WINDOW_VAULTS", "OneVaultRun", "run_one_vault", "window_config"]

#: the window machine's vaults: the measured one, its two neighbours and a stand-in
WINDOW_VAULTS = 4


@dataclass
class OneVaultRun:
    """A run of vault ``vault``'s share: ``run`` holds the share's output rows
    ``rows`` (of the output's ``out_shape``) and their reference."""

    run: ImageRun
    vault: int
    vaults: int
    rows: tuple[int, int]
    window: dict[int, int]
    machine_ms: float | None
    #: instructions the measured vault executed (the simulator's count)
    instructions: int = 0

    def to_json(self) -> dict:
        return {**self.run.to_json(), "machine_ms": self.machine_ms,
                "one_vault": {"vault": self.vault, "machine_vaults": self.vaults,
                              "output_rows": list(self.rows),
                              "instructions": self.instructions,
                              "window": {str(k): v for k, v in self.window.items()}}}


def window_config(cfg):
    """*cfg* with one cube of :data:`WINDOW_VAULTS` vaults, the vault itself unchanged
    (on the RTL, the cube is the top)."""
    ip = replace(cfg.ipim, cubes=1, vaults=WINDOW_VAULTS)
    return replace(cfg, ipim=ip, top="ipim_cube")


def _remap(program: list[Instr], local: dict[int, int], ip) -> list[Instr]:
    out = []
    for ins in program:
        if ins.opcode is Opcode.REQ:
            g = ins.chip * ip.vaults + ins.vault
            ins = replace(ins, chip=0, vault=local.get(g, WINDOW_VAULTS - 1))
        out.append(ins)
    return out


def _read_share(arr: Array, fetch, ip, lv: int, gv: int) -> np.ndarray:
    """The image rows of *arr* in global vault *gv*'s bands (local vault *lv*)."""
    g0 = gv * ip.pes
    g1 = min((gv + 1) * ip.pes, arr.bands)
    blocks = []
    for g in range(g0, g1):
        blk = fetch(lv, g - g0, arr.base, arr.size).reshape(arr.R + arr.hyt + arr.hyb,
                                                            arr.pitch, LANES)
        inner = blk[arr.hyt:arr.hyt + arr.R, arr.hxl:arr.hxl + arr.S, :]
        blocks.append(inner.transpose(0, 2, 1).reshape(arr.R, arr.W))
    u = np.concatenate(blocks)[:max(0, min(arr.H - g0 * arr.R, (g1 - g0) * arr.R))]
    return u.view(np.float32) if arr.dtype == FP32 else u.view(np.int32)


def run_one_vault(name: str, img: np.ndarray, cfg, *, opt: Options | str = "opt",
                  engine: str = "iss", max_cycles: int = 200_000_000, exe=None,
                  **params) -> OneVaultRun:
    """Compile benchmark *name* for the whole machine of *cfg* and run one vault's share
    on the window machine (module docstring): on the instruction-set simulator
    (``engine="iss"``: no cycles) or the Verilated window cube (``"rtl"``, which the
    simulator's output is also compared with)."""
    from pimforge.verif.models.ipim.iss import SIMBMachine

    ip = cfg.ipim
    H, W = img.shape[:2]
    nvaults = ip.cubes * ip.vaults
    gv = min(1, nvaults - 1)
    local = {g: g - gv + 1 for g in (gv - 1, gv, gv + 1) if 0 <= g < nvaults}
    prog = compile_bench(name, H, W, cfg, opt, vaults=list(local), **params)
    if prog.reader is not None or len(prog.outputs) > 1:
        raise CompileError(f"{name}: --one-vault checks an image output's rows; its output "
                           "is not one image band")
    if prog.output.bands <= gv * ip.pes:
        raise CompileError(f"{name}'s output of {prog.output.H} rows in bands of "
                           f"{prog.output.R} leaves vault {gv} nothing to compute; use a "
                           "taller image or run the whole machine")
    wcfg = window_config(cfg)
    programs = {lv: _remap(prog.programs[g], local, ip) for g, lv in local.items()}
    banks: dict = {}
    for arr in prog.inputs.values():
        for key, blk in place(arr, img, ip, local).items():
            banks.setdefault(key, {}).update({arr.base + i: v for i, v in enumerate(blk)})
    m = SIMBMachine(wcfg)
    for lv, p in programs.items():
        m.load(p, vaults=[lv])
    for v in m.vaults:          # the AddrRF's vault and cube ids are the machine's
        g = {lv: g for g, lv in local.items()}.get(v.index)
        if g is not None:
            v.arf[:, 2], v.arf[:, 3] = g % ip.vaults, g // ip.vaults
    for (v, pe), blk in banks.items():
        for a, vec in blk.items():
            m.vaults[v].banks[pe][a] = vec.copy()
    m.run()
    counts = dict(m.counts)
    steps = m.vaults[1].steps

    def iss_fetch(v, pe, base, n):
        b = m.vaults[v].banks[pe]
        z = np.zeros(LANES, np.uint32)
        return np.array([b.get(base + i, z) for i in range(n)], dtype=np.uint32)

    out_rows, out_cols = prog.out_shape[0], prog.out_shape[1]
    r0 = min(gv * ip.pes * prog.output.R, out_rows)
    iss_share = _read_share(prog.output, iss_fetch, ip, 1, gv)
    r1 = min(r0 + iss_share.shape[0], out_rows)
    ref = reference(name, img, **params)[r0:r1, :out_cols]
    iss_share = iss_share[:r1 - r0, :out_cols]
    opt_name = opt if isinstance(opt, str) else "custom"
    freq_khz = cfg.freq_mhz * 1e3
    if engine == "iss":
        run = ImageRun(name, img.shape, opt_name, iss_share, ref, prog, "iss", counts)
        return OneVaultRun(run, gv, nvaults, (r0, r1), local, None, steps)
    from .rtl_run import run_cube

    exe = exe or cube_driver(wcfg)
    t = time.perf_counter()
    cr = run_cube(wcfg, programs, rtl_words(banks), max_cycles=max_cycles, exe=exe)
    wall = time.perf_counter() - t
    share = _read_share(prog.output, rtl_fetch(cr.banks), ip, 1, gv)[:r1 - r0, :out_cols]
    cycles = cr.core["cycles"][1]
    ipc = cr.core["issued"][1] / cycles if cycles else 0.0
    core1 = {k: v[1:2] for k, v in cr.core.items()}
    pe1 = {k: v[ip.pes:2 * ip.pes] for k, v in cr.pe.items()}
    units = {k: sum(pe1[k]) / ((cycles or 1) * ip.pes)
             for k in ("simd", "alu", "drf", "arf", "rdwr")}
    stalls = {k: v[0] for k, v in core1.items() if k.startswith(("stall_", "issued_"))}
    run = ImageRun(name, img.shape, opt_name, share, ref, prog, "rtl", counts,
                   iss_output=iss_share, cycles=cycles, ipc=ipc, stalls=stalls, units=units,
                   pe_counters={k: sum(v) for k, v in pe1.items()},
                   energy=energy_nj(ip, pe1, core1), wall_s=wall,
                   cycles_per_s=cr.cycles_per_s)
    return OneVaultRun(run, gv, nvaults, (r0, r1), local, cycles / freq_khz, steps)
