"""CapsNet/DeepCaps operation profiles: totals checked by hand from the layer shapes."""

import pytest

from pimforge.gen.errors import UnknownNameError
from pimforge.sim.descnet.profiles import ACC_BYTES, PIPE, profile


def by_name(p):
    return {o.name: o for o in p.ops}


def test_capsnet_ops_and_hand_totals():
    p = profile("capsnet")
    assert p.names == ["Conv1", "Prim", "Class", "Sum1", "Upd1", "Sum2", "Upd2", "Sum3", "Upd3"]
    o = by_name(p)
    # Conv1: 28x28x1 -> 20x20x256, 9x9 kernel.
    c1 = o["Conv1"]
    assert c1.macs == 20 * 20 * 81 * 256
    assert (c1.D, c1.A) == (784, 20 * 20 * 16 * ACC_BYTES)
    # 16 output groups x (6 reduction tiles x (16 load + 400 pixels) + pipeline fill).
    assert c1.cycles == 16 * (6 * (16 + 400) + PIPE)
    assert c1.wr[1] == 81 * 256                  # every weight loaded once
    # PrimaryCaps: 20x20x256 -> 6x6x256, stride 2.
    assert o["Prim"].macs == 6 * 6 * 81 * 256 * 256
    assert o["Prim"].D == 20 * 20 * 256
    # ClassCaps: 1152 8D capsules -> 10 x 16D predictions, kept for routing.
    assert o["Class"].macs == 1152 * 10 * 8 * 16
    for k in ("Sum1", "Upd1", "Sum3", "Upd3"):
        assert o[k].W == 1152 * 10 * 16        # u_hat in the weight memory, 8 bit
    # Logits b persist in the accumulators from the first update on.
    assert o["Sum1"].A == 160 * ACC_BYTES
    assert o["Sum2"].A == 160 * ACC_BYTES + 11520 * ACC_BYTES
    assert p.usage.shape == (9, 3)


def test_offchip_equations_3_and_4():
    p = profile("capsnet")
    o = p.ops
    # Eq. 3: off-chip reads = what the op writes into D and W from DRAM.
    assert p.offchip_reads[0] == o[0].wr[0] + o[0].wr[1] == 784 + 81 * 256
    assert p.offchip_reads[1] == o[1].wr[0] + o[1].wr[1]
    # Eq. 4: op i writes off chip what op i+1 loads into its data memory.
    assert p.offchip_writes[0] == o[1].wr[0] == 20 * 20 * 256
    assert p.offchip_writes[1] == o[2].wr[0] == 1152 * 8
    # Routing: reads only in its first op (the coupling coefficients), writes only the
    # final output vectors in its last.
    assert list(p.offchip_reads[3:]) == [11520, 0, 0, 0, 0, 0]
    assert list(p.offchip_writes[2:]) == [0, 0, 0, 0, 0, 0, 160]


def test_deepcaps_structure():
    p = profile("deepcaps")
    names = p.names
    convcaps2d = [n for n in names if n.startswith("C") and ("L" in n[2:] or "Skip" in n)]
    assert len(convcaps2d) == 15                 # Sec. II-A: 15 ConvCaps2D layers
    assert "C4Caps3D" in names
    assert sum(n.startswith("C4R") for n in names) == 6
    assert names[-7] == "Class" and len(names) == 1 + 15 + 1 + 6 + 1 + 6
    o = by_name(p)
    assert o["Conv2D"].macs == 64 * 64 * 27 * 128
    assert o["C1L1"].D == 64 * 64 * 128          # conv output feeds cell 1
    assert o["Class"].macs == (8 * 8 * 32 + 4 * 4 * 32) * 8 * 320
    assert p.cycles.sum() > profile("capsnet").cycles.sum()


def test_unknown_net():
    with pytest.raises(UnknownNameError, match="allowed: capsnet, deepcaps"):
        profile("lenet")
