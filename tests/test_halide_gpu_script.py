"""scripts/gpu/halide_gpu.py: the GPU measurement of Halide's image pipelines (Fig. 6).

The script runs on a GPU machine with only ``halide`` and numpy, so it carries its own
copy of the ten benchmarks' definitions. These tests tie that copy to the project's
golden models (:mod:`pimforge.verif.models.ipim.image`) on random images, run the
script's Halide pipelines on the CPU target at a small size, and check the kept H100
measurement file.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pimforge.verif.models.ipim.image import BENCHES, reference

log = logging.getLogger(__name__)
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu" / "halide_gpu.py"
KEPT = SCRIPT.parent / "measured" / "halide_gpu.json"


def _script():
    spec = importlib.util.spec_from_file_location("halide_gpu", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("bench", sorted(BENCHES))
def test_the_scripts_definitions_are_the_golden_models(bench):
    hg = _script()
    seed = 7
    log.info("seed %d", seed)
    w, h = 48, 40
    inputs = hg.make_input(bench, w, h, seed)
    img = inputs["in"]
    want = reference(bench, img)
    got = hg.NUMPY_REF[bench](img)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_the_script_runs_its_halide_pipelines_on_the_cpu(tmp_path):
    pytest.importorskip("halide", reason="pip install -e '.[test]' installs halide")
    out = tmp_path / "h.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--target", "host", "--size", "512x512",
                        "--check-size", "256x256", "--bench", "blur", "--bench", "histogram",
                        "--repeats", "10", "--warmup", "1", "--no-isolate", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == "pimforge.halide_gpu"
    got = doc["benchmarks"]
    assert set(got) == {"blur", "histogram"}
    for name, b in got.items():
        assert not b.get("error"), (name, b.get("error"))
        assert b["ms_median"] > 0, name


def test_bad_arguments_are_one_line():
    r = subprocess.run([sys.executable, str(SCRIPT), "--size", "8Kx4K"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_kept_h100_measurement_covers_the_ten_and_passed_its_checks():
    doc = json.loads(KEPT.read_text())
    assert doc["schema"] == "pimforge.halide_gpu" and "H100" in doc["device"]
    assert doc["size"] == [7680, 4320]
    assert set(doc["benchmarks"]) == set(BENCHES)
    for name, b in doc["benchmarks"].items():
        assert not b.get("error"), name
        assert 0 < b["ms_median"] < 100, name
