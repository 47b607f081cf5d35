"""The GPU models beside a measured GPU (sim/gpu_measured.py, scripts/gpu/gpu_report.py).

No GPU is needed: the measurement kept in ``scripts/gpu/measured/gpu.json`` (made by
``scripts/gpu/gpu_measure.py`` on a GPU) is read, and synthetic measurements check that the
models are evaluated at the measured peaks.
"""

from __future__ import annotations

import copy
import json
import runpy
import sys
from pathlib import Path

import pytest

from pimforge.sim.capsnet.gpu_eager import eager
from pimforge.sim.capsnet.networks import NETWORKS, network
from pimforge.sim.gpu_measured import (
    MeasurementError,
    capsnet_rows,
    dnn_calibration,
    dnn_rows,
    load,
    measured_gpu,
    report,
)
from pimforge.sim.nicepim.gpu_roofline import BATCHES, best_per_sample, gpu_seconds
from pimforge.sim.nicepim.networks import network as dnn
from pimforge.sim.nicepim.networks import network_names

KEPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu" / "measured" / "gpu.json"


@pytest.fixture(scope="module")
def kept():
    return load(KEPT)


def test_the_kept_measurement_covers_every_network_and_passed_its_checks(kept):
    rows = capsnet_rows(kept)
    assert [r["network"] for r in rows] == [n.name for n in NETWORKS]
    assert all(r["matches_reference"] for r in rows)
    keys = {(r["network"], r["precision"]) for r in dnn_rows(kept)}
    assert keys == {(n, p) for n in network_names() for p in ("fp32", "fp16")}
    text = report(kept)
    for n in NETWORKS:
        assert f"| {n.name} |" in text
    assert "not measured" not in text


def test_dnn_calibration_is_the_measured_shortfall_from_the_roofline(kept):
    """The V100 calibration: per network and precision, the faster of the measured eager
    and graph times over the roofline at the measured peaks (with launches); every
    network is covered, and the FP16 tensor-core roofline is the more optimistic."""
    cal = dnn_calibration(kept)
    for r in dnn_rows(kept):
        best = min(x for x in (r["eager_s"], r["graph_s"]) if x)
        assert cal[(r["network"], r["precision"])] == pytest.approx(best / r["model_s"])
    assert set(cal) == {(n, p) for n in network_names() for p in ("fp32", "fp16")}
    assert all(cal[(n, "fp16")] > cal[(n, "fp32")] for n in network_names())


def test_the_models_are_lower_bounds_of_the_measured_gpu(kept):
    """On the GPU it was measured on, the roofline is below eager PyTorch and the eager
    model without launches below the same kernels replayed as a graph."""
    for r in capsnet_rows(kept):
        assert r["roofline_s"] < r["eager_no_launch_s"] < r["measured_graph_s"]
        assert r["measured_graph_s"] <= r["measured_routing_s"] * 1.05


def test_models_are_evaluated_at_the_measured_peaks(kept):
    """Doubling the measured bandwidth halves the memory-bound eager model's time; the
    measured times are passed through unchanged."""
    fast = copy.deepcopy(kept)
    fast["peaks"]["copy_bytes_per_s"] *= 2
    a, b = capsnet_rows(kept)[0], capsnet_rows(fast)[0]
    assert b["eager_no_launch_s"] == pytest.approx(a["eager_no_launch_s"] / 2, rel=0.02)
    assert b["measured_routing_s"] == a["measured_routing_s"]
    gpu = measured_gpu(kept)
    assert a["eager_no_launch_s"] == eager(network(a["network"]), gpu, 0.0).routing_s


def test_a_measurement_at_reduced_size_is_compared_with_the_reduced_networks(kept):
    small = copy.deepcopy(kept)
    small["device"]["capsnet_scale"] = 4
    a, b = capsnet_rows(kept)[0], capsnet_rows(small)[0]
    assert b["eager_no_launch_s"] < a["eager_no_launch_s"] / 3
    assert "Table 1 sizes / 4" in report(small)


def test_best_per_sample_is_the_least_over_the_batches():
    net = dnn("googlenet")
    gpu = measured_gpu({"device": {"name": "g"}, "peaks": {
        "fp16_matmul_flops_per_s": 1e14, "copy_bytes_per_s": 1e12}}, "fp16")
    per, b = best_per_sample(net, gpu, 2, 5e-6)
    assert b in BATCHES
    assert per == min(gpu_seconds(net, gpu, 2, x, 5e-6) / x for x in BATCHES)
    # with a launch cost, batch 1 is never the best of a 100-layer network
    assert b > 1


def test_bad_measurement_files_are_one_line_errors(tmp_path):
    with pytest.raises(MeasurementError, match="no such file"):
        load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(MeasurementError, match="not JSON"):
        load(bad)
    bad.write_text(json.dumps({"device": {}}))
    with pytest.raises(MeasurementError, match="'peaks'"):
        load(bad)


def test_report_script(capsys, monkeypatch, tmp_path):
    script = KEPT.parents[1] / "gpu_report.py"
    monkeypatch.setattr(sys, "argv", [str(script)])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(script), run_name="__main__")
    assert e.value.code == 0
    assert "CapsNet routing (Table 1 sizes)" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [str(script), "--json", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(script), run_name="__main__")
    assert e.value.code == 2
    assert "no such file" in capsys.readouterr().err


def test_routing_seconds_only_for_full_size_measurements(kept):
    from pimforge.sim.gpu_measured import routing_seconds
    assert routing_seconds(kept, "Caps-MN1") == kept["capsnet"]["Caps-MN1"]["routing"]["median_s"]
    assert routing_seconds(kept, "Caps-XX") is None
    small = copy.deepcopy(kept)
    small["device"]["capsnet_scale"] = 16
    assert routing_seconds(small, "Caps-MN1") is None
