"""The 32 nm SRAM model against the published values of DESCNet Table III.

Areas: every memory of Table III within 30 % (observed -27 % ... +13 %);
static energy of the non-gated memories, in the paper's time base (116 FPS
CapsNet, 9.7 FPS DeepCaps), within 15 % (observed -14 % ... +7 %). The
coefficients were fitted to these very entries, so this is a check of the
fit's residuals, printed by ``pytest -s``; the dynamic energies depend on
access counts the paper does not list and are compared in the README only.
"""

import numpy as np
import pytest

from pimforge.sim.descnet import sram
from pimforge.sim.descnet.sram import PAPER_FPS, TABLE_III

ROWS = [pytest.param(r, id=f"{r[0]}-{r[1]}-{r[2]}") for r in TABLE_III]


@pytest.mark.parametrize("row", ROWS)
def test_area_vs_table_iii(row):
    net, org, mem, kib, ports, sc, area, *_ = row
    ours = float(sram.area_mm2(kib * 1024, ports, sc))
    err = ours / area - 1
    print(f"{net} {org} {mem}: {area} mm2 published, {ours:.3f} ours ({100 * err:+.1f} %)")
    assert abs(err) < 0.30


@pytest.mark.parametrize("row", [r for r in ROWS if r.values[0][5] == 1])
def test_static_energy_vs_table_iii(row):
    net, org, mem, kib, ports, _sc, _area, _dyn, stat, _wake = row
    ours = float(sram.leak_mw(kib * 1024, ports)) / PAPER_FPS[net]     # mW x s = mJ
    err = ours / stat - 1
    print(f"{net} {org} {mem}: {stat} mJ published, {ours:.3f} ours ({100 * err:+.1f} %)")
    assert abs(err) < 0.15


def test_model_shape():
    # More ports cost area; gating adds area; an absent memory costs nothing.
    assert sram.area_mm2(32768, 3) > sram.area_mm2(32768, 2) > sram.area_mm2(32768, 1)
    assert sram.area_mm2(32768, 1, 4) > sram.area_mm2(32768, 1, 2) > sram.area_mm2(32768, 1, 1)
    assert sram.area_mm2(0, 3, 4) == 0 and sram.access_pj(0) == 0
    assert np.isclose(sram.port_factor(3), 4.805, atol=0.01)
    assert sram.pg_leak_mw(32768, 1, 1) == 0 < sram.pg_leak_mw(32768, 1, 2)
    assert sram.access_pj(1 << 20, 1, 4) > sram.access_pj(1 << 10, 1, 4)
