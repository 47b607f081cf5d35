"""Print the SRAM model against DESCNet Table III, memory by memory.

Area and static energy (in the paper's time base: 116 / 9.7 frames per
second) come from the model alone; the dynamic energy is the paper's
configuration evaluated with this repository's access counts (the paper's
own counts are only drawn in Fig. 10-11), so its error mixes the model and
the profile.

    .venv/bin/python scripts/descnet/descnet_table3.py
"""

from __future__ import annotations

from pimforge.sim.descnet import sram
from pimforge.sim.descnet.dse import split_usage
from pimforge.sim.descnet.profiles import profile

MEM = {"S": 0, "D": 1, "W": 2, "A": 3}


def main() -> None:
    profs = {n: profile(n) for n in ("capsnet", "deepcaps")}
    configs: dict = {}
    for row in sram.TABLE_III:
        configs.setdefault((row[0], row[1]), {})[row[2]] = row
    print(f"{'net':8s} {'org':10s} m {'KiB':>5s} p sc | {'area':>7s} {'ours':>7s} {'err':>6s} | "
          f"{'static':>8s} {'ours':>8s} {'err':>6s} | {'dyn':>7s} {'ours':>7s}")
    for (net, org), mems in configs.items():
        prof = profs[net]
        sizes = [0, 0, 0, 0]
        for m, row in mems.items():
            sizes[MEM[m]] = row[3] * 1024
        _, access, _ = split_usage(prof, sizes, 3)
        for m, (_, _, _, kib, p, sc, area, dyn, stat, _) in mems.items():
            a = float(sram.area_mm2(kib * 1024, p, sc))
            st = float(sram.leak_mw(kib * 1024, p)) / sram.PAPER_FPS[net]
            d = float(access[:, MEM[m]].sum() * sram.access_pj(kib * 1024, p)) * 1e-9
            st_s = f"{stat:8.3f} {st:8.3f} {100 * (st / stat - 1):+5.0f}%" if sc == 1 else \
                f"{stat:8.3f} {'(PG)':>8s} {'':6s}"
            print(f"{net:8s} {org:10s} {m} {kib:5d} {p} {sc:2d} | {area:7.3f} {a:7.3f} "
                  f"{100 * (a / area - 1):+5.0f}% | {st_s} | {dyn:7.3f} {d:7.3f}")


if __name__ == "__main__":
    main()
