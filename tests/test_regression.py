"""The cocotb regression, one pytest item per bench of pimforge.verif.regression."""

import pytest

from pimforge.gen.config import bench_config
from pimforge.verif.regression import BENCHES
from pimforge.verif.runner import run_testbench


@pytest.mark.cocotb
@pytest.mark.parametrize("bench", BENCHES, ids=[b.name for b in BENCHES])
def test_bench(bench):
    r = run_testbench(bench.name, bench.block, bench.module, config=bench_config(bench))
    print(f"{bench.name}: {r.tests} tests, seed {r.seed}, build {r.build_s:.1f}s, "
          f"run {r.run_s:.1f}s")
    assert r.tests > 0, f"{bench.name} ran no cocotb test ({r.results_xml})"
    assert r.failed == 0, (f"{bench.name}: {r.failed}/{r.tests} cocotb tests failed; rerun with "
                           f"PIMFORGE_SEED={r.seed} pimforge regress -k {bench.name} "
                           f"(log: {r.results_xml.parent})")


def test_bench_names_unique():
    names = [b.name for b in BENCHES]
    assert len(names) == len(set(names))
