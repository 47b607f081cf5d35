"""GPU roofline model of the paper's baseline (sim/capsnet/gpu_roofline.py)."""

import pytest

from pimforge.sim.capsnet.gpu_roofline import (
    P100,
    V100,
    Kernel,
    network_kernels,
    roofline,
    roofline_table,
    routing_kernels,
)
from pimforge.sim.capsnet.networks import CapsNetSpec

TINY = CapsNetSpec("tiny", "none", batch=2, n_l=3, n_h=2, iterations=2, c_l=2, c_h=4)


def test_peaks():
    assert P100.peak_flops == pytest.approx(8.53e12, rel=1e-3)
    assert P100.bandwidth == 320e9 and V100.bandwidth == 900e9
    assert V100.peak_flops == pytest.approx(15.67e12, rel=1e-3)
    assert P100.ridge == pytest.approx(26.66, rel=1e-3)


def test_routing_counts_by_hand():
    k = {x.name.split()[0]: x for x in routing_kernels(TINY)}
    # Eq.1: 2*3*2*4*(2*2-1) FLOPs; 4*(2*3*2 + 3*2*4*2 + 2*3*2*4) bytes
    assert (k["Eq.1"].flops, k["Eq.1"].bytes, k["Eq.1"].count) == (144, 4 * (12 + 48 + 48), 1)
    # Eq.5: exp 6 + sum 3*(2-1) + divide 6
    assert (k["Eq.5"].flops, k["Eq.5"].bytes, k["Eq.5"].count) == (15, 48, 2)
    # Eq.2: 2*2*4*(2*3-1)
    assert (k["Eq.2"].flops, k["Eq.2"].bytes) == (80, 4 * (48 + 6 + 16))
    # Eq.3: 2*2*(3*4+3)
    assert (k["Eq.3"].flops, k["Eq.3"].bytes) == (60, 4 * 32)
    # Eq.4: 2*3*2*(2*4-1) + 2*3*2
    assert (k["Eq.4"].flops, k["Eq.4"].bytes) == (96, 4 * (48 + 16 + 12))


def test_roofline_time_is_max_of_compute_and_memory():
    k = Kernel("x", flops=10 ** 12, bytes=10 ** 9, count=3)
    assert k.time_s(P100) == pytest.approx(3 * 1e12 / P100.peak_flops)
    assert k.bound(P100) == "compute"
    k = Kernel("y", flops=10 ** 9, bytes=10 ** 9)
    assert k.time_s(P100) == pytest.approx(1e9 / 320e9) and k.bound(P100) == "memory"


def test_routing_is_memory_bound_and_network_totals():
    r = roofline("Caps-MN1", P100)
    for k in routing_kernels(CapsNetSpec("m", "x", 100, 1152, 10, 3)):
        assert k.bound(P100) == "memory"
    ks = network_kernels(CapsNetSpec("m", "x", 100, 1152, 10, 3))
    assert r.total_s == pytest.approx(sum(k.time_s(P100) for k in ks))
    assert 0 < r.routing_share < 1
    # conv1 of MNIST: 2*81*256*400 FLOP per image
    assert ks[0].flops == 2 * 81 * 256 * 400 * 100
    # bandwidth-bound routing is 900/320 faster on the V100
    assert roofline("Caps-MN1", V100).routing_s == pytest.approx(r.routing_s * 320 / 900, rel=1e-6)
    # routing grows with batch (Observation 1): MN3 = 3x MN1 within the W-read term
    assert roofline("Caps-MN3").routing_s > 2.9 * r.routing_s


def test_table_mentions_model():
    t = roofline_table()
    assert t.startswith("GPU roofline MODEL") and "Caps-SV3" in t
