"""The five NicePIM workloads against their published totals, and their graph structure."""

import pytest

from pimforge.gen.errors import UnknownNameError
from pimforge.sim.nicepim import networks as nets

#: (MACs, parameters) as torchvision publishes them (conv/fc/matmul MACs; trainable
#: parameters, batch-norm scale and shift included).
EXACT = {
    "vgg16": (15_470_264_320, 138_357_544),
    "resnet152": (11_513_626_624, 60_192_808),
    "googlenet": (1_498_376_192, 6_624_904),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_torchvision_totals_exactly(name):
    net = nets.network(name)
    assert (net.macs, net.params) == EXACT[name]


def test_darknet53_within_the_published_rounding():
    """The published DarkNet53 figures (9.29 G MACs at 256x256, 41.6 M parameters) have
    three significant digits: the count must round to them (half a unit of the last
    digit, 0.05% and 0.12%)."""
    net = nets.network("darknet53")
    assert abs(net.macs - 9.29e9) <= 0.005e9, net.macs
    assert abs(net.params - 41.6e6) <= 0.05e6, net.params
    assert net.layers[0].h == 256


def test_bert_base_params_and_attention_layers():
    net = nets.network("bert_base")
    assert net.params == 109_482_240
    seq, d, heads, ff = 128, 768, 12, 3072
    # per encoder layer: four d x d projections, two attention products, the FFN
    per_layer = 4 * seq * d * d + 2 * heads * seq * seq * (d // heads) + 2 * seq * d * ff
    assert net.macs == 12 * per_layer + d * d          # + the pooler on the CLS token
    qk = net.by_name["enc0_qk"]
    assert qk.kind == "matmul" and qk.dynamic_weights and qk.params == 0
    assert qk.operand == "enc0_k" and qk.groups == heads
    assert qk.macs == heads * seq * seq * (d // heads)
    av = net.by_name["enc0_av"]
    assert av.preds == ("enc0_softmax", "enc0_v") and av.k == d


def test_graphs_have_their_branches():
    g = nets.network("googlenet")
    cat = g.by_name["inc3a_concat"]
    assert cat.kind == "concat" and len(cat.preds) == 4 and cat.k == 256
    assert g.by_name["inc4e_concat"].k == 832 and g.by_name["inc5b_concat"].p == 7
    seg = next(s for s in g.segments() if any(lay.name == "inc3a_1x1" for lay in s))
    branches = g.branches(seg)
    # four branches of the inception module, and the concat that joins them
    assert sorted(len(b) for b in branches) == [1, 1, 2, 2, 2]
    r = nets.network("resnet152")
    add = r.by_name["res3_0_add"]
    assert add.preds == ("res3_0_c", "res3_0_down")
    assert r.by_name["res3_0_b"].stride == 2 and r.by_name["res3_0_a"].stride == 1  # v1.5
    assert r.by_name["res5_2_add"].p == 7
    # a chain network is cut after every layer
    v = nets.network("vgg16")
    assert len(v.segments()) == len(v.layers)


@pytest.mark.parametrize("name", nets.network_names())
def test_segments_cover_the_graph_in_order(name):
    net = nets.network(name)
    segs = net.segments()
    flat = [lay.name for s in segs for lay in s]
    assert flat == [lay.name for lay in net.layers]
    pos = {n: i for i, s in enumerate(segs) for n in (lay.name for lay in s)}
    for lay in net.layers:            # no edge jumps over a segment
        for p in lay.preds:
            assert pos[lay.name] - pos[p] <= 1, (p, lay.name)
    for lay in net.layers:            # shapes chain: a conv reads its predecessor's output
        if lay.kind in ("conv", "maxpool", "avgpool") and lay.preds:
            src = net.by_name[lay.preds[0]]
            assert (lay.c, lay.h, lay.w) == (src.k, src.p, src.q), lay.name


def test_unknown_network_and_bad_graphs():
    with pytest.raises(UnknownNameError, match="available: vgg16"):
        nets.network("alexnet")
    with pytest.raises(nets.NetworkError, match="not an earlier layer"):
        nets.Network("x", (nets.Layer("a", "conv", 1, 1, 1, 1, 1, 1, 1, preds=("b",)),))
    with pytest.raises(nets.NetworkError, match="groups = 3 must divide"):
        nets.Layer("a", "conv", 1, 4, 1, 1, 4, 1, 1, groups=3)
