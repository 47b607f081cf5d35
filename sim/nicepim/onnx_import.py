"""A user's float ONNX model as a NicePIM :class:`~.networks.Network` with its parameters.

:func:`load_onnx` reads a model with the ``onnx`` package, infers every tensor's shape
(``onnx.shape_inference``) and turns its nodes, in the file's (topological) order, into
layers of the mapper's view (:mod:`.networks`): an activation is ``1 x C x H x W`` (a
batch of one; a flattened tensor is ``C*H*W x 1 x 1``).

====================  ==============================================================
ONNX operator         layer
====================  ==============================================================
Conv                  ``conv`` (square or not, one stride and one padding on both
                      axes, no dilation, any ``group``), its bias kept
Gemm, MatMul          ``fc`` on the flattened input; ``B`` a weight initializer
                      (``transB``, ``alpha`` and ``beta`` folded in; MatMul's bias is
                      a following Add of an initializer)
BatchNormalization    folded into the Conv or Gemm before it: ``W' = W g / sqrt(v + e)``,
                      ``b' = (b - m) g / sqrt(v + e) + beta``
Relu                  a post-operation of the layer it reads
MaxPool, AveragePool  ``maxpool``, ``avgpool`` (ceil mode; AveragePool without
                      ``count_include_pad`` when padded)
GlobalAveragePool     ``avgpool`` over the whole map
Add                   ``add`` of two activations of one shape; of an initializer: the
                      bias of the Conv, Gemm or MatMul before it
Concat                ``concat`` on the channels
Flatten, Reshape      nothing (the next Gemm or MatMul reads the map flattened); a
                      Reshape must flatten to ``[1, C*H*W]``
Constant              a value for Reshape's shape or an Add's bias
====================  ==============================================================

Any other operator, or a supported one used in a way the array cannot run, is a
:class:`OnnxImportError` of one line naming the operator and the node.

The parameters stay float here (:class:`~.dnn_run.FloatParams`); the run quantizes
them (:mod:`.dnn_run`). :func:`calibration_input` draws the float input the run
quantizes, from a seeded generator.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from pimforge.gen.errors import PimforgeError

from .dnn_run import FloatParams
from .networks import Layer, Network, NetworkError

__all__ = ["SUPPORTED", "OnnxImportError", "calibration_input", "float_check", "import_model",
           "load_onnx"]

#: The ONNX operators the importer maps.
SUPPORTED = ("Conv", "Gemm", "MatMul", "BatchNormalization", "Relu", "MaxPool",
             "AveragePool", "GlobalAveragePool", "Add", "Concat", "Flatten", "Reshape",
             "Constant")


class OnnxImportError(PimforgeError):
    """An ONNX model the importer cannot turn into a network."""


def load_onnx(path: str | Path) -> tuple[Network, FloatParams]:
    """The model in the file *path* as a network and its float parameters.

    Raises
    ------
    OnnxImportError
        The file is not a readable ONNX model, or uses what the importer cannot map."""
    import onnx

    path = Path(path)
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise OnnxImportError(f"{path}: no such file") from None
    except (OSError, ValueError, RuntimeError) as e:
        raise OnnxImportError(f"{path}: not a readable ONNX model ({_first(e)})") from None
    except Exception as e:      # protobuf's DecodeError is not one of the above
        raise OnnxImportError(f"{path}: not a readable ONNX model ({_first(e)})") from None
    if not model.graph.node:
        raise OnnxImportError(f"{path}: not an ONNX model (it has no graph nodes)")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem) or "onnx"
    return import_model(model, name, where=str(path))


def _first(e: Exception) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def calibration_input(net: Network, seed: int) -> np.ndarray:
    """A float input ``[C, H, W]`` of *net*'s shape, standard normal from
    ``numpy.random.default_rng(seed)``: the input the run quantizes and feeds."""
    x = net.layers[0]
    return np.random.default_rng(seed).standard_normal((x.c, x.h, x.w))


def float_check(path: str | Path, params: FloatParams, dequantized: dict) -> dict:
    """The model's float outputs (``onnx.reference`` on ``params.input``) against the
    run's *dequantized* ones (layer -> array): per output its largest absolute error,
    its largest float magnitude and their ratio; outputs whose layer did not run
    (``--layers``) are left out."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(str(path))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 14)
    if opset < 14:
        # onnx.reference runs BatchNormalization 9 to 13 with batch statistics (it fills
        # in the momentum attribute); from opset 14 inference is its default
        from onnx import version_converter
        model = version_converter.convert_version(model, 14)
    feed = next(i.name for i in model.graph.input
                if i.name not in {t.name for t in model.graph.initializer})
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim] \
        if model.graph.input[0].name == feed else None
    x = np.asarray(params.input, dtype=np.float32)
    x = x.reshape(shape) if shape else x[None]
    wanted = [o for o, lay in params.outputs.items() if lay in dequantized]
    if not wanted:
        return {}
    got = ReferenceEvaluator(model).run(wanted, {feed: x})
    out = {}
    for o, ref in zip(wanted, got, strict=True):
        ref = np.asarray(ref, dtype=np.float64).reshape(-1)
        q = np.asarray(dequantized[params.outputs[o]], dtype=np.float64).reshape(-1)
        err = float(np.abs(q - ref).max())
        top = float(np.abs(ref).max())
        out[o] = {"layer": params.outputs[o], "max_abs_error": err, "max_abs_float": top,
                  "relative_error": err / top if top else None}
    return out


def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def import_model(model, name: str = "onnx", where: str = "") -> tuple[Network, FloatParams]:
    """*model* (an ``onnx.ModelProto``) as a network called *name* and its float
    parameters; *where* prefixes the error messages (the file's path).

    Raises
    ------
    OnnxImportError
        An operator the importer does not map, or one used in a way it cannot map."""
    return _Importer(model, name, where or name).run()


class _Importer:
    def __init__(self, model, name: str, where: str):
        from onnx import numpy_helper, shape_inference

        self.where = where
        self.name = name
        try:
            model = shape_inference.infer_shapes(model, strict_mode=True)
        except Exception as e:
            raise OnnxImportError(f"{where}: shape inference failed: {_first(e)}") from None
        g = model.graph
        self.graph = g
        self.const = {t.name: numpy_helper.to_array(t).astype(np.float64)
                      for t in g.initializer}
        self.shapes: dict[str, tuple] = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            t = vi.type.tensor_type
            if t.HasField("shape"):
                self.shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                             for d in t.shape.dim)
        self.consumers: dict[str, int] = {}
        for node in g.node:
            for i in node.input:
                self.consumers[i] = self.consumers.get(i, 0) + 1
        for o in g.output:
            self.consumers[o.name] = self.consumers.get(o.name, 0) + 1
        self.layers: list[Layer] = []
        self.index: dict[str, int] = {}         # layer name -> position in self.layers
        self.src: dict[str, str] = {}           # tensor -> the layer whose output it is
        self.flat: set[str] = set()             # tensors that are flattened maps
        self.weights: dict[str, np.ndarray] = {}
        self.biases: dict[str, np.ndarray] = {}
        self.used: set[str] = set()
        self.readers: dict[str, int] = {}       # layer name -> readers of its output

    # -- helpers -----------------------------------------------------------------------------

    def fail(self, node, why: str):
        raise OnnxImportError(f"{self.where}: {node.op_type} node {node.name or '(unnamed)'!r}: "
                              f"{why}")

    def lname(self, node, i: int) -> str:
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", node.name).strip("_.") or \
            f"{node.op_type.lower()}{i}"
        name, n = base, 1
        while name in self.used or name == "input":
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def add(self, lay: Layer, out: str) -> None:
        self.index[lay.name] = len(self.layers)
        self.layers.append(lay)
        self.src[out] = lay.name
        self.readers[lay.name] = self.consumers.get(out, 0)

    def alias(self, node, out: str) -> None:
        """*out* is the output of the layer that made *node*'s first input (a flatten, a
        folded operation or a post-operation): the layer's readers are *out*'s, not *node*."""
        name = self.src[node.input[0]]
        self.src[out] = name
        self.readers[name] += self.consumers.get(out, 0) - 1
        if node.input[0] in self.flat:
            self.flat.add(out)

    def layer_of(self, node, tensor: str) -> Layer:
        if tensor not in self.src:
            what = "a constant" if tensor in self.const else "an unknown tensor"
            self.fail(node, f"input {tensor!r} is {what}, not an activation")
        return self.layers[self.index[self.src[tensor]]]

    def chw(self, node, tensor: str) -> tuple[int, int, int]:
        """The activation *tensor*'s ``C, H, W`` (a flattened one: ``C*H*W, 1, 1``)."""
        lay = self.layer_of(node, tensor)
        if tensor in self.flat:
            return lay.k * lay.p * lay.q, 1, 1
        return lay.k, lay.p, lay.q

    def out_hw(self, node) -> tuple[int, int]:
        s = self.shapes.get(node.output[0])
        if s is None or len(s) != 4 or None in s[2:]:
            self.fail(node, "its output's shape is unknown after shape inference")
        return s[2], s[3]

    def replace(self, name: str, **kw) -> None:
        import dataclasses
        i = self.index[name]
        self.layers[i] = dataclasses.replace(self.layers[i], **kw)

    def single_consumer(self, node, tensor: str, what: str) -> Layer:
        lay = self.layer_of(node, tensor)
        if self.readers[lay.name] != 1:
            self.fail(node, f"{what}: its input {tensor!r} is read elsewhere too")
        return lay

    def constant(self, node, tensor: str, what: str) -> np.ndarray:
        if tensor not in self.const:
            self.fail(node, f"{what} {tensor!r} must be an initializer or a Constant")
        return self.const[tensor]

    # -- the graph -----------------------------------------------------------------------------

    def run(self) -> tuple[Network, FloatParams]:
        g = self.graph
        inputs = [i for i in g.input if i.name not in self.const]
        if len(inputs) != 1:
            raise OnnxImportError(f"{self.where}: the model must have one input, not "
                                  f"{len(inputs)}" + (f" ({', '.join(i.name for i in inputs)})"
                                                      if inputs else ""))
        x = inputs[0].name
        shape = self.shapes.get(x, ())
        if len(shape) == 4 and None not in shape[1:] and shape[0] in (1, None):
            c, h, w = shape[1:]
        elif len(shape) == 2 and shape[1] is not None and shape[0] in (1, None):
            c, h, w = shape[1], 1, 1
        else:
            raise OnnxImportError(f"{self.where}: input {x!r} must be 1 x C x H x W or 1 x F, "
                                  f"not {shape or 'of unknown shape'}")
        self.add(Layer("input", "input", 1, c, h, w, c, h, w), x)
        if len(shape) == 2:
            self.flat.add(x)
        for i, node in enumerate(g.node):
            op = node.op_type
            if node.domain not in ("", "ai.onnx") or op not in SUPPORTED:
                raise OnnxImportError(f"{self.where}: operator {op} (node "
                                      f"{node.name or '(unnamed)'!r}) is not supported; "
                                      f"supported: {', '.join(SUPPORTED[:-1])}")
            getattr(self, f"op_{op}")(node, i)
        layers = tuple(self.layers)
        try:
            net = Network(self.name, layers, f"{self.name} (ONNX), input {c}x{h}x{w}, batch 1")
        except NetworkError as e:
            raise OnnxImportError(f"{self.where}: {e}") from None
        if not net.compute_layers():
            raise OnnxImportError(f"{self.where}: the model has no Conv, Gemm or MatMul")
        outs = {o.name: self.src[o.name] for o in g.output if o.name in self.src}
        params = FloatParams(dict(self.weights), dict(self.biases), outputs=outs)
        return net, params

    # -- operators -----------------------------------------------------------------------------

    def op_Constant(self, node, i):
        from onnx import numpy_helper
        a = _attrs(node)
        if "value" not in a:
            self.fail(node, "only a tensor 'value' is supported")
        self.const[node.output[0]] = numpy_helper.to_array(a["value"]).astype(np.float64)

    def op_Conv(self, node, i):
        a = _attrs(node)
        c, h, w = self.chw(node, node.input[0])
        if node.input[0] in self.flat:
            self.fail(node, "its input is flattened")
        wt = self.constant(node, node.input[1], "the weight")
        k, cg, r, s = wt.shape
        g = int(a.get("group", 1))
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            self.fail(node, "dilations are not supported")
        strides = list(a.get("strides", [1, 1]))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            self.fail(node, "auto_pad is not supported: give explicit pads")
        if len(set(strides)) != 1:
            self.fail(node, f"strides {strides} differ between the axes")
        if len(set(pads)) != 1:
            self.fail(node, f"pads {pads} are not the same on every side")
        p, q = self.out_hw(node)
        bias = self.constant(node, node.input[2], "the bias") if len(node.input) > 2 \
            and node.input[2] else None
        name = self.lname(node, i)
        lay = Layer(name, "conv", 1, c, h, w, k, p, q, r, s, strides[0], pads[0], g,
                    (self.src[node.input[0]],), bias is not None)
        self.add(lay, node.output[0])
        self.weights[name] = wt
        if bias is not None:
            self.biases[name] = bias

    def _fc(self, node, i, wt: np.ndarray, bias):
        if len(self.shapes.get(node.input[0], (0, 0))) != 2:
            self.fail(node, "its input must be a flattened 1 x F tensor")
        c, h, w = self.chw(node, node.input[0])
        f = c * h * w
        if wt.ndim != 2 or wt.shape[1] != f:
            self.fail(node, f"a {f}-element input does not fit weights {list(wt.shape)}")
        k = wt.shape[0]
        name = self.lname(node, i)
        lay = Layer(name, "fc", 1, f, 1, 1, k, 1, 1, preds=(self.src[node.input[0]],),
                    bias=bias is not None)
        self.add(lay, node.output[0])
        self.flat.add(node.output[0])
        self.weights[name] = wt.reshape(k, f, 1, 1)
        if bias is not None:
            self.biases[name] = np.broadcast_to(bias, (k,)).astype(np.float64)

    def op_Gemm(self, node, i):
        a = _attrs(node)
        if a.get("transA", 0):
            self.fail(node, "transA is not supported")
        wt = self.constant(node, node.input[1], "B")
        wt = wt if a.get("transB", 0) else wt.T
        wt = wt * float(a.get("alpha", 1.0))
        bias = None
        if len(node.input) > 2 and node.input[2]:
            bias = self.constant(node, node.input[2], "C").reshape(-1) * float(a.get("beta", 1.0))
            if bias.size not in (1, wt.shape[0]):
                self.fail(node, f"C of {bias.size} elements is not one per output")
        self._fc(node, i, wt, bias)

    def op_MatMul(self, node, i):
        if node.input[1] not in self.const:
            self.fail(node, "a product of two activations is not supported: B must be an "
                            "initializer")
        self._fc(node, i, self.const[node.input[1]].T, None)

    def op_BatchNormalization(self, node, i):
        a = _attrs(node)
        if len(node.output) > 1 and any(node.output[1:]):
            self.fail(node, "training mode (running statistics as outputs) is not supported")
        lay = self.single_consumer(node, node.input[0], "it cannot be folded")
        if lay.kind not in ("conv", "fc") or lay.post:
            self.fail(node, "it can be folded only into a Conv, Gemm or MatMul directly "
                            "before it")
        gamma, beta, mean, var = (self.constant(node, t, "the statistic")
                                  for t in node.input[1:5])
        scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
        self.weights[lay.name] = self.weights[lay.name] * scale.reshape(-1, 1, 1, 1)
        b = self.biases.get(lay.name, np.zeros(lay.k))
        self.biases[lay.name] = (b - mean) * scale + beta
        self.replace(lay.name, bias=True, post=("bn",))
        self.alias(node, node.output[0])

    def op_Relu(self, node, i):
        lay = self.single_consumer(node, node.input[0], "it cannot be a post-operation")
        if lay.kind == "input":
            self.fail(node, "a Relu on the model's input is not supported")
        self.replace(lay.name, post=(*lay.post, "relu"))
        self.alias(node, node.output[0])

    def _pool(self, node, i, kind: str, glob: bool):
        if node.input[0] in self.flat:
            self.fail(node, "its input is flattened")
        c, h, w = self.chw(node, node.input[0])
        name = self.lname(node, i)
        if glob:
            lay = Layer(name, kind, 1, c, h, w, c, 1, 1, h, w, 1, 0,
                        preds=(self.src[node.input[0]],))
        else:
            a = _attrs(node)
            r, s = a["kernel_shape"]
            strides = list(a.get("strides", [1, 1]))
            pads = list(a.get("pads", [0, 0, 0, 0]))
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                self.fail(node, "auto_pad is not supported: give explicit pads")
            if any(d != 1 for d in a.get("dilations", [1, 1])):
                self.fail(node, "dilations are not supported")
            if len(set(strides)) != 1:
                self.fail(node, f"strides {strides} differ between the axes")
            if len(set(pads)) != 1:
                self.fail(node, f"pads {pads} are not the same on every side")
            if kind == "avgpool" and pads[0] and a.get("count_include_pad", 0):
                self.fail(node, "count_include_pad with padding is not supported")
            p, q = self.out_hw(node)
            lay = Layer(name, kind, 1, c, h, w, c, p, q, r, s, strides[0], pads[0],
                        preds=(self.src[node.input[0]],))
        self.add(lay, node.output[0])

    def op_MaxPool(self, node, i):
        if len(node.output) > 1 and any(node.output[1:]):
            self.fail(node, "the Indices output is not supported")
        self._pool(node, i, "maxpool", False)

    def op_AveragePool(self, node, i):
        self._pool(node, i, "avgpool", False)

    def op_GlobalAveragePool(self, node, i):
        self._pool(node, i, "avgpool", True)

    def op_Add(self, node, i):
        consts = [t for t in node.input if t in self.const]
        if len(consts) == 1:                    # a bias
            x = next(t for t in node.input if t not in self.const)
            lay = self.single_consumer(node, x, "it cannot be folded as a bias")
            if lay.kind not in ("conv", "fc") or lay.post:
                self.fail(node, "a constant can be added only as the bias of a Conv, Gemm "
                                "or MatMul directly before it")
            b = self.const[consts[0]]
            if b.size not in (1, lay.k) or (b.size == lay.k and b.ndim and
                                           sorted(b.shape)[-1] != lay.k) or \
                    (b.ndim >= 3 and b.shape[-1] * b.shape[-2] != 1):
                self.fail(node, f"a constant of shape {list(b.shape)} is not one value per "
                                "output channel")
            self.biases[lay.name] = self.biases.get(lay.name, np.zeros(lay.k)) + \
                np.broadcast_to(b.reshape(-1), (lay.k,))
            self.replace(lay.name, bias=True)
            self.src[node.output[0]] = lay.name
            self.readers[lay.name] += self.consumers.get(node.output[0], 0) - 1
            if x in self.flat:
                self.flat.add(node.output[0])
            return
        if consts:
            self.fail(node, "both operands are constants")
        shapes = [self.chw(node, t) for t in node.input]
        if len(node.input) != 2 or shapes[0] != shapes[1] or \
                (node.input[0] in self.flat) != (node.input[1] in self.flat):
            self.fail(node, f"operands of shapes {shapes} (no broadcasting)")
        c, h, w = shapes[0]
        name = self.lname(node, i)
        self.add(Layer(name, "add", 1, c, h, w, c, h, w,
                       preds=tuple(self.src[t] for t in node.input)), node.output[0])
        if node.input[0] in self.flat:
            self.flat.add(node.output[0])

    def op_Concat(self, node, i):
        axis = int(_attrs(node).get("axis", 1))
        rank = len(self.shapes.get(node.input[0], ()))
        if any(t in self.flat for t in node.input) or rank != 4 or axis not in (1, -3):
            self.fail(node, "only a concatenation of maps on the channel axis is supported")
        shapes = [self.chw(node, t) for t in node.input]
        if len({s[1:] for s in shapes}) != 1:
            self.fail(node, f"maps of different sizes {shapes}")
        c, h, w = shapes[0]
        name = self.lname(node, i)
        self.add(Layer(name, "concat", 1, c, h, w, sum(s[0] for s in shapes), h, w,
                       preds=tuple(self.src[t] for t in node.input)), node.output[0])

    def _flatten(self, node):
        self.layer_of(node, node.input[0])
        self.alias(node, node.output[0])
        self.flat.add(node.output[0])

    def op_Flatten(self, node, i):
        if int(_attrs(node).get("axis", 1)) != 1:
            self.fail(node, "only axis 1 (keep the batch) is supported")
        self._flatten(node)

    def op_Reshape(self, node, i):
        c, h, w = self.chw(node, node.input[0])
        shape = [int(v) for v in self.constant(node, node.input[1], "the shape").reshape(-1)]
        if len(shape) != 2 or shape[0] not in (1, -1, 0) or shape[1] not in (-1, c * h * w) \
                or shape[0] == shape[1] == -1:
            self.fail(node, f"only a flatten to [1, {c * h * w}] is supported, not {shape}")
        self._flatten(node)
