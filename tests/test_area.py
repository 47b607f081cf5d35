"""The area model (gen/area.py): node scaling, SRAM macros, the DRAM-process factor."""

from __future__ import annotations

import pytest

from pimforge.gen import area
from pimforge.gen.area import Area, AreaError, AreaModel
from pimforge.gen.config import load_config
from pimforge.gen.synth import synth_block
from pimforge.sim.descnet import sram


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIMFORGE_CACHE", str(tmp_path))


def test_logic_area_scales_with_node_and_process():
    m45 = AreaModel(node_nm=45, sram=sram.area_mm2)
    assert m45.logic_mm2(1e6) == pytest.approx(area.NAND2_UM2)       # 1M gates at 45 nm
    m22 = AreaModel(node_nm=22.5, sram=sram.area_mm2)
    assert m22.logic_mm2(1e6) == pytest.approx(area.NAND2_UM2 / 4)
    dram = AreaModel(node_nm=22.5, sram=sram.area_mm2, dram_die=True)
    assert dram.logic_mm2(1e6) == pytest.approx(area.DRAM_PROCESS_FACTOR * area.NAND2_UM2 / 4)
    assert area.node_scale(90, 45) == 4


def test_macro_area_is_the_descnet_model():
    m32 = AreaModel(node_nm=32, sram=sram.area_mm2)
    assert m32.macro_mm2(32, 256) == pytest.approx(float(sram.area_mm2(1024, 1)))
    assert m32.macro_mm2(32, 256, ports=3) == pytest.approx(float(sram.area_mm2(1024, 3)))
    m16 = AreaModel(node_nm=16, sram=sram.area_mm2, dram_die=True)
    assert m16.macro_mm2(32, 256) == pytest.approx(float(sram.area_mm2(1024, 1)) / 4 * 2)
    with pytest.raises(AreaError, match="1 to 3 ports"):
        m32.macro_mm2(32, 256, ports=4)


@pytest.mark.parametrize("kw, msg", [({"node_nm": 1}, "node_nm"),
                                     ({"node_nm": 45, "utilization": 0}, "utilization")])
def test_bad_model(kw, msg):
    with pytest.raises(AreaError, match=msg):
        AreaModel(sram=sram.area_mm2, **kw)


def test_area_arithmetic():
    a = Area(1.0, 2.0) * 3 + Area(0.5, 0.5)
    assert (a.logic_mm2, a.macro_mm2, a.total_mm2) == (3.5, 6.5, 10.0)


def test_synthesized_block_area_grows_with_its_memory():
    model = AreaModel(node_nm=32, sram=sram.area_mm2)
    small = model.of(synth_block("simb_pgsm", load_config("default",
                                                          {"ipim.pgsm_bytes": 1024})).total)
    big = model.of(synth_block("simb_pgsm", load_config("default",
                                                        {"ipim.pgsm_bytes": 8192})).total)
    assert small.macro_mm2 > 0 and small.logic_mm2 > 0
    # Eight times the bytes: the macros grow (less than 8x: the periphery term), the
    # port logic hardly does.
    assert 3 * small.macro_mm2 < big.macro_mm2 < 8 * small.macro_mm2
    assert big.logic_mm2 < 1.5 * small.logic_mm2
