"""``pimforge run dnn --onnx``: models written here with ``onnx.helper`` (none exported from
the project's own networks) imported as NicePIM networks, and one run end to end on
nicepim_small's array RTL.

The importer is checked in float: a numpy evaluator of the imported network (its layers
and float parameters, BatchNormalization folded) against ``onnx.reference`` on the
original model, for every supported operator. Weights and inputs draw from
``numpy.random.default_rng(seed)`` with ``seed`` from ``PIMFORGE_SEED`` (default 1),
logged. The run uses the Verilator build of nicepim_small's array that
tests/test_nicepim_dnn.py and tests/test_nicepim_array.py use.
"""

import json
import logging
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from pimforge.gen.cli import main
from pimforge.sim.nicepim.dnn_cli import DnnResult
from pimforge.sim.nicepim.dnn_run import QMAX, quantize
from pimforge.sim.nicepim.onnx_import import OnnxImportError, import_model, load_onnx
from pimforge.verif.models.nicepim import conv2d

log = logging.getLogger(__name__)
SEED = int(os.environ.get("PIMFORGE_SEED", "1"))


# ---- models ------------------------------------------------------------------------------------

def _model(nodes, inits, shape, out_rank=2, opset=17):
    g = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       [f"d{i}" for i in range(out_rank)])],
        [numpy_helper.from_array(np.asarray(a, dtype=np.float32), n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def _bn(rng, k, pre):
    return {f"{pre}_g": rng.uniform(0.5, 1.5, k), f"{pre}_b": rng.standard_normal(k),
            f"{pre}_m": 0.2 * rng.standard_normal(k), f"{pre}_v": rng.uniform(0.5, 2.0, k)}


def _tiny(rng, opset=17):
    """Conv+BN+Relu -> MaxPool -> Conv -> GlobalAveragePool -> Flatten -> Gemm."""
    w = {"w1": rng.standard_normal((6, 3, 3, 3)), "b1": rng.standard_normal(6),
         **_bn(rng, 6, "bn"), "w2": 0.5 * rng.standard_normal((8, 6, 3, 3)),
         "w3": rng.standard_normal((5, 8)), "b3": rng.standard_normal(5)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1] * 4),
        helper.make_node("BatchNormalization", ["c1", "bn_g", "bn_b", "bn_m", "bn_v"], ["n1"],
                         name="bn1"),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1] * 4),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1),
    ]
    return _model(nodes, w, [1, 3, 8, 8], opset=opset)


def _every_op(rng):
    """Every supported operator: a residual and a concatenated branch, both pools, a
    strided and a grouped convolution, Reshape from a Constant, MatMul with an Add bias
    and Gemm with alpha, beta and B not transposed."""
    w = {"w1": rng.standard_normal((8, 3, 3, 3)), **_bn(rng, 8, "bn"),
         "w2": rng.standard_normal((8, 4, 3, 3)), "b2": rng.standard_normal(8),
         "w3": rng.standard_normal((4, 8, 1, 1)), "w4": rng.standard_normal((6, 12, 3, 3)),
         "w5": rng.standard_normal((6 * 2 * 2, 7)), "b5": rng.standard_normal(7),
         "w6": rng.standard_normal((7, 3)), "b6": rng.standard_normal(3)}
    shape = numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
        helper.make_node("BatchNormalization", ["c1", "bn_g", "bn_b", "bn_m", "bn_v"], ["n1"],
                         name="bn1", epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="grouped", pads=[1] * 4,
                         group=2),
        helper.make_node("Add", ["c2", "r1"], ["a"], name="residual"),
        helper.make_node("Relu", ["a"], ["ra"], name="relu2"),
        helper.make_node("Conv", ["ra", "w3"], ["c3"], name="squeeze"),
        helper.make_node("Concat", ["ra", "c3"], ["cat"], name="concat", axis=1),
        helper.make_node("AveragePool", ["cat"], ["ap"], name="avg", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1] * 4, ceil_mode=1),
        helper.make_node("Conv", ["ap", "w4"], ["c4"], name="strided", strides=[2, 2],
                         pads=[1] * 4),
        helper.make_node("MaxPool", ["c4"], ["mp"], name="max", kernel_shape=[2, 2],
                         strides=[1, 1]),
        helper.make_node("Constant", [], ["shape"], name="shape", value=shape),
        helper.make_node("Reshape", ["mp", "shape"], ["f"], name="reshape"),
        helper.make_node("MatMul", ["f", "w5"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "b5"], ["mb"], name="matmul_bias"),
        helper.make_node("Relu", ["mb"], ["rm"], name="relu3"),
        helper.make_node("Gemm", ["rm", "w6", "b6"], ["y"], name="gemm", alpha=0.5, beta=2.0),
    ]
    return _model(nodes, w, [1, 3, 11, 10])


# ---- a float evaluator of an imported network ----------------------------------------------

def _fconv(x, w, stride, pad, groups):
    c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    p, q = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    out = np.zeros((k, p, q))
    og = k // groups
    for g in range(groups):
        for u in range(r):
            for v in range(s):
                patch = xp[g * cg:(g + 1) * cg, u:u + stride * (p - 1) + 1:stride,
                           v:v + stride * (q - 1) + 1:stride]
                out[g * og:(g + 1) * og] += np.einsum("oc,chw->ohw",
                                                      w[g * og:(g + 1) * og, :, u, v], patch)
    return out


def _fpool(lay, x):
    c, h, w = x.shape
    ph = max(0, (lay.p - 1) * lay.stride + lay.r - h - lay.pad)
    pw = max(0, (lay.q - 1) * lay.stride + lay.s - w - lay.pad)
    fill = -np.inf if lay.kind == "maxpool" else 0.0
    xp = np.pad(x, ((0, 0), (lay.pad, ph), (lay.pad, pw)), constant_values=fill)
    real = np.pad(np.ones((h, w)), ((lay.pad, ph), (lay.pad, pw)))
    out = np.zeros((c, lay.p, lay.q))
    for i in range(lay.p):
        for j in range(lay.q):
            sl = (slice(i * lay.stride, i * lay.stride + lay.r),
                  slice(j * lay.stride, j * lay.stride + lay.s))
            win = xp[(slice(None), *sl)]
            out[:, i, j] = win.max(axis=(1, 2)) if lay.kind == "maxpool" else \
                win.sum(axis=(1, 2)) / real[sl].sum()
    return out


def _forward(net, params, x):
    t = {"input": x}
    for lay in net.layers[1:]:
        ins = [t[p] for p in lay.preds]
        if lay.kind in ("conv", "fc"):
            y = _fconv(ins[0].reshape(lay.c, lay.h, lay.w), params.weights[lay.name],
                       lay.stride, lay.pad, lay.groups)
            y = y + params.biases.get(lay.name, np.zeros(lay.k)).reshape(-1, 1, 1)
        elif lay.kind in ("maxpool", "avgpool"):
            y = _fpool(lay, ins[0])
        elif lay.kind == "add":
            y = ins[0] + ins[1]
        elif lay.kind == "concat":
            y = np.concatenate(ins)
        else:
            raise AssertionError(lay.kind)
        if "relu" in lay.post:
            y = np.maximum(y, 0)
        t[lay.name] = y
    return t


def _reference(model, x, names=None):
    ev = ReferenceEvaluator(model)
    names = names or [o.name for o in model.graph.output]
    return dict(zip(names, ev.run(names, {"x": x.astype(np.float32)}), strict=True))


# ---- the importer ------------------------------------------------------------------------------

def test_batchnorm_folded_exactly_into_the_conv():
    """The folded weights and bias are the float formula's, and the folded convolution is
    numpy's convolution followed by the normalization (to float64 rounding)."""
    rng = np.random.default_rng(SEED)
    log.info("seed %d", SEED)
    m = _tiny(rng)
    init = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    net, params = import_model(m)
    conv1 = net.by_name["conv1"]
    assert conv1.post == ("bn", "relu") and conv1.bias
    sc = init["bn_g"] / np.sqrt(init["bn_v"] + 1e-5)
    assert np.array_equal(params.weights["conv1"], init["w1"] * sc[:, None, None, None])
    assert np.array_equal(params.biases["conv1"], (init["b1"] - init["bn_m"]) * sc + init["bn_b"])
    x = rng.standard_normal((3, 8, 8))
    plain = _fconv(x, init["w1"], 1, 1, 1) + init["b1"][:, None, None]
    normalized = (plain - init["bn_m"][:, None, None]) * sc[:, None, None] + \
        init["bn_b"][:, None, None]
    folded = _fconv(x, params.weights["conv1"], 1, 1, 1) + params.biases["conv1"][:, None, None]
    assert np.allclose(folded, normalized, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [_tiny, _every_op])
def test_imported_network_computes_the_model(make):
    """Every supported operator: the imported network, evaluated in float, gives
    onnx.reference's output of the original model, and every intermediate tensor that
    became a layer's output has that layer's shape."""
    rng = np.random.default_rng(SEED)
    m = make(rng)
    net, params = import_model(m, "m")
    x = rng.standard_normal([d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim])
    t = _forward(net, params, x[0])
    ref = _reference(m, x)
    log.info("seed %d %s: %s", SEED, make.__name__,
             [(lay.name, lay.kind, lay.k, lay.p, lay.q) for lay in net.layers])
    assert params.outputs == {"y": net.layers[-1].name}
    assert np.allclose(t[net.layers[-1].name].reshape(-1), ref["y"].reshape(-1), rtol=1e-4,
                       atol=1e-4)
    ops = {n.op_type for n in m.graph.node}
    kinds = {lay.kind for lay in net.layers}
    assert {"conv", "fc", "maxpool", "avgpool"} <= kinds
    if make is _every_op:
        assert ops == {"Conv", "BatchNormalization", "Relu", "Add", "Concat", "AveragePool",
                       "MaxPool", "Constant", "Reshape", "MatMul", "Gemm"}
        assert {"add", "concat"} <= kinds
        assert net.by_name["grouped"].groups == 2
        assert net.by_name["matmul"].bias and net.by_name["matmul"].post == ("relu",)
        assert net.by_name["residual"].post == ("relu",)
        inter = _reference(m, x, ["cat", "ap", "c4"])
        for name, tensor in (("concat", "cat"), ("avg", "ap"), ("strided", "c4")):
            lay = net.by_name[name]
            assert list(inter[tensor].shape) == [1, lay.k, lay.p, lay.q], name
            assert np.allclose(t[name], inter[tensor][0], rtol=1e-4, atol=1e-4), name


def test_quantize_per_tensor_symmetric():
    rng = np.random.default_rng(SEED)
    x = 3.0 * rng.standard_normal((4, 5, 6))
    q, s = quantize(x)
    assert q.dtype == np.int64 and np.abs(q).max() == QMAX
    assert s == pytest.approx(np.abs(x).max() / QMAX)
    assert np.abs(q * s - x).max() <= s / 2 + 1e-12
    assert np.array_equal(quantize(-x)[0], -q)
    z, s0 = quantize(np.zeros((2, 2)))
    assert s0 == 1.0 and not z.any()


def _one_node_model(node, shape=(1, 4, 6, 6), inits=None):
    return _model([node], inits or {}, list(shape), out_rank=4)


@pytest.mark.parametrize("model, match", [
    (lambda: _one_node_model(helper.make_node("Sigmoid", ["x"], ["y"], name="act")),
     "operator Sigmoid (node 'act') is not supported"),
    (lambda: _model([helper.make_node("MaxPool", ["x"], ["p"], name="mp", kernel_shape=[2, 2]),
                     helper.make_node("BatchNormalization", ["p", "g", "b", "m", "v"], ["y"],
                                      name="norm")],
                    {k: np.ones(4) for k in "gbmv"}, [1, 4, 6, 6], out_rank=4),
     "BatchNormalization node 'norm': it can be folded only into a Conv"),
    (lambda: _one_node_model(helper.make_node("Conv", ["x", "w"], ["y"], name="dil",
                                              dilations=[2, 2]),
                             inits={"w": np.ones((2, 4, 3, 3))}),
     "Conv node 'dil': dilations are not supported"),
    (lambda: _one_node_model(helper.make_node("Conv", ["x", "w"], ["y"], name="asym",
                                              pads=[1, 0, 1, 0]),
                             inits={"w": np.ones((2, 4, 3, 3))}),
     "Conv node 'asym': pads [1, 0, 1, 0] are not the same on every side"),
])
def test_unmappable_model_is_one_line_naming_the_node(tmp_path, capsys, model, match):
    path = tmp_path / "m.onnx"
    onnx.save(model(), str(path))
    with pytest.raises(OnnxImportError, match=match.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        load_onnx(path)
    out = tmp_path / "out"
    rc = main(["run", "dnn", "--onnx", str(path), "--config", "nicepim_small",
               "--json", str(out / "r.json"), "--dump", str(out / "d")])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("argv, match", [
    (["--onnx", "MODEL", "--scale", "4"], "--scale does not apply to --onnx"),
    (["--onnx", "MODEL", "--net", "vgg16"], "not allowed with argument"),
    (["--onnx", "NOFILE"], "no such file"),
    (["--onnx", "JUNK"], "not a readable ONNX model"),
])
def test_bad_onnx_options_are_one_line(tmp_path, capsys, argv, match):
    path, junk = tmp_path / "m.onnx", tmp_path / "junk.onnx"
    onnx.save(_tiny(np.random.default_rng(SEED)), str(path))
    junk.write_bytes(b"\x00not a model at all\xff" * 3)
    argv = [{"MODEL": str(path), "NOFILE": str(tmp_path / "none.onnx"),
             "JUNK": str(junk)}.get(a, a) for a in argv]
    out = tmp_path / "out"
    rc = main(["run", "dnn", *argv, "--config", "nicepim_small", "--json", str(out / "r.json")])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


# ---- on the RTL --------------------------------------------------------------------------------

def test_tiny_onnx_model_on_the_rtl_bit_exact(tmp_path, capsys):
    """Conv+BN+Relu -> MaxPool -> Conv -> GlobalAveragePool -> Gemm on nicepim_small's
    array: every MAC layer bit-exact against numpy int64 (wrapped to 32 bits), the pools on
    the host, the dump consistent with itself, and the dequantized output close to the
    float model's (onnx.reference) on the same input."""
    rng = np.random.default_rng(SEED)
    path = tmp_path / "tiny.onnx"
    onnx.save(_tiny(rng, opset=13), str(path))     # opset 13: the float check converts it
    out, dump = tmp_path / "r.json", tmp_path / "dump"
    rc = main(["run", "dnn", "--onnx", str(path), "--config", "nicepim_small",
               "--seed", str(SEED), "--dump", str(dump), "--json", str(out)])
    log.info("seed %d\n%s", SEED, capsys.readouterr().out)
    assert rc == 0
    res = DnnResult.from_json(json.loads(out.read_text()))
    assert res.engine == "rtl" and res.network == "tiny" and res.onnx == str(path) and res.ok
    on = {x["name"]: x["runs_on"] for x in res.layers}
    assert on == {"conv1": "rtl", "pool1": "host", "conv2": "rtl", "gap": "host", "fc": "rtl"}
    for x in res.layers:
        if x["runs_on"] == "rtl":
            assert x["matches_reference"] is True, x["name"]
            assert x["cycles_rtl"] > 0 and x["quant"]["weight_scale"] > 0
    assert res.totals["all_match_reference"]
    fc = res.totals["float_check"]["y"]
    log.info("seed %d float check %s", SEED, fc)
    assert fc["layer"] == "fc" and fc["relative_error"] < 0.15
    for name, kind in on.items():
        x = np.load(dump / name / "input.npy")[0]
        y = np.load(dump / name / "output.npy")[0]
        meta = json.loads((dump / name / "layer.json").read_text())
        assert np.abs(x).max() <= QMAX, name         # 8-bit activations in 16-bit words
        if kind == "rtl":
            w = np.load(dump / name / "weight.npy")
            assert np.abs(w).max() == QMAX, name
            want = conv2d(x.reshape(meta["input_shape"][1:]), w, stride=meta["stride"],
                          pad=meta["padding"], groups=meta["groups"])
            assert np.array_equal(y, want), name
            assert (meta["post"][0]["op"] == "bias") == (name != "conv2"), name
    # each next input is its producer's raw output after the recorded post-operations
    for a, b in (("conv1", "pool1"), ("pool1", "conv2"), ("conv2", "gap"), ("gap", "fc")):
        y = np.load(dump / a / "output.npy")[0].astype(np.int64)
        for op in json.loads((dump / a / "layer.json").read_text())["post"]:
            if op["op"] == "bias":
                y = y + np.array(op["values"]).reshape(-1, 1, 1)
            elif op["op"] == "relu":
                y = np.maximum(y, 0)
            elif op["op"] == "requantize":
                y = np.clip(y >> op["shift"], *op["clip"])
        x = np.load(dump / b / "input.npy")[0]
        assert np.array_equal(y.reshape(x.shape), x), (a, b)
