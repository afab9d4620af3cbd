"""`int8_static`: Conv, Add and MaxPool in ONNX's QDQ form, activation scales calibrated.

    Conv(X, W, B)  ≈  DQ(Q(Conv(DQ(Q(X; sx, zx)), DQ(q(W); sw), DQ(q(B); sx·sw)); sy, zy))

X and the output Y are quantized per tensor to uint8 (asymmetric: the calibrated range
[lo, hi], widened to hold 0, gives s = (hi - lo) / 255 and zero point round(-lo / s)); W per
output channel to int8 (symmetric, sw_c = max |W_c| / 127, zero point 0); the bias to int32
at scale sx · sw_c. ORT fuses the DequantizeLinear → Conv → QuantizeLinear group into one
QLinearConv (VNNI int8 kernels: about 3x a float 3x3 Conv here, slower on depthwise Convs,
which `kernels.py` prices); a tensor that several lowered ops read or write is quantized
once (`QDQ.value`), so a chain of lowered Convs passes int8 from one to the next.

An Add of two float32 operands, neither constant (ResNet's residual Add), has the form

    Add(A, B)  ≈  DQ(Q(Add(DQ(Q(A; sa, za)), DQ(Q(B; sb, zb))); sy, zy))

which ORT runs as QLinearAdd: between lowered Convs the residual path stays int8.

A MaxPool of a float32 input pools the input's quantized values (ORT's uint8 MaxPool), its
output at the input's scale: exact on them, since max commutes with the monotone rounding.

The forms are priced as they run inside an int8 chain (uint8 in, uint8 out: one QLinearConv
or QLinearAdd, `kernels.py`); the QuantizeLinear / DequantizeLinear kernels left where a
lowered op meets a float one are priced per value as the choice's boundary terms
(`select.py`), so a form pays only with the neighbours it is chosen with.

Error model: X's rounding is at most sx / 2 per element and W's sw_c / 2, Y's sy / 2 per
output element; activations outside the calibrated range are clipped, so the error on inputs
unlike the calibration sets is unbounded: each candidate's error is measured
(`sensitivity.py`) and the lowered model checked end to end on held-back sets (`lower.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

FORM = "int8_static"
MIN_OPSET = 13
"""Per-axis DequantizeLinear (W's per-channel scales) needs ONNX opset 13."""
Fresh = Callable[[str], str]
Ranges = Mapping[str, tuple[float, float]]
"""Value name -> (min, max) seen on the calibration sets."""


def conv_fits(node: onnx.NodeProto, inits: Mapping[str, onnx.TensorProto]) -> bool:
    """Whether a Conv node has the form: float32 constant W of rank >= 3, a constant float32
    bias of shape (C_out,) or none, X given."""
    if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
        return False
    w = inits.get(node.input[1])
    if not node.input[0] or w is None or w.data_type != onnx.TensorProto.FLOAT:
        return False
    if len(w.dims) < 3:
        return False
    if len(node.input) > 2 and node.input[2]:
        b = inits.get(node.input[2])
        if b is None or b.data_type != onnx.TensorProto.FLOAT or list(b.dims) != [w.dims[0]]:
            return False
    return True


def add_fits(
    node: onnx.NodeProto,
    inits: Mapping[str, onnx.TensorProto],
    types: Mapping[str, tuple[int, tuple[int | str, ...] | None]],
) -> bool:
    """Whether an Add node has the form: two float32 operands of one shape (by `types`,
    `value_types`), neither a constant (an Add of a bias stays with its op)."""
    if node.op_type != "Add" or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
        return False
    a, b = (types.get(v) if v and v not in inits else None for v in node.input)
    return (
        a is not None
        and a[0] == onnx.TensorProto.FLOAT
        and a[1] is not None
        and a == b
        and all(d for d in a[1])  # no unknown dim: equal names are equal sizes
    )


def maxpool_fits(
    node: onnx.NodeProto, types: Mapping[str, tuple[int, tuple[int | str, ...] | None]]
) -> bool:
    """Whether a MaxPool node has the form: a float32 input, no Indices output named."""
    if node.op_type != "MaxPool" or node.domain not in ("", "ai.onnx") or not node.input:
        return False
    t = types.get(node.input[0])
    return t is not None and t[0] == onnx.TensorProto.FLOAT and not any(node.output[1:])


def value_types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple[int | str, ...] | None]]:
    """Value name -> (elem type, dims: int, symbolic name or "" where unknown; None for an
    unknown rank) of the main graph's values, by ONNX shape inference ({} where it fails)."""
    try:
        g = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # no types: no Add is a candidate
        return {}
    out: dict[str, tuple[int, tuple[int | str, ...] | None]] = {}
    for v in (*g.input, *g.value_info, *g.output):
        if not v.type.HasField("tensor_type"):
            continue
        t = v.type.tensor_type
        dims = (
            tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim)
            if t.HasField("shape")
            else None
        )
        out[v.name] = (t.elem_type, dims)
    return out


def static_nodes(
    qdq: QDQ, node: onnx.NodeProto, output: str, inits: Mapping[str, onnx.TensorProto]
) -> list[onnx.NodeProto]:
    """Conv, Add or MaxPool `node` in its `int8_static` form, its output named `output` (the
    output of the Relu folded into it, `relu_readers`, where there is one)."""
    n = onnx.NodeProto()
    n.CopyFrom(node)
    n.output[0] = output
    if node.op_type == "Add":
        return qdq.add(n)
    if node.op_type == "MaxPool":
        return qdq.maxpool(n)
    w = numpy_helper.to_array(inits[node.input[1]])
    has_b = len(node.input) > 2 and node.input[2]
    b = numpy_helper.to_array(inits[node.input[2]]) if has_b else None
    return qdq.conv(n, w, b, node.input[1])


def relu_readers(g: onnx.GraphProto) -> dict[str, tuple[int, str]]:
    """Value -> (index, output) of the Relu node that is its only reader, for the values of
    the main graph that are not graph outputs and that no subgraph reads: a lowered Conv
    writing such a value quantizes the Relu's output instead, in the range [0, max] (zero
    point 0), where Q(y) = Q(Relu(y)): the Relu is dropped (ORT's quantizer does the same)."""
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(g.node):
        for v in set(n.input):
            readers.setdefault(v, []).append(i)
        for a in n.attribute:
            for sub in (*([a.g] if a.HasField("g") else []), *a.graphs):
                for v in names_read(sub):
                    readers.setdefault(v, []).extend([-1, -1])
    outputs = {o.name for o in g.output}
    out = {}
    for v, idx in readers.items():
        if len(idx) == 1 and idx[0] >= 0 and v not in outputs:
            n = g.node[idx[0]]
            if n.op_type == "Relu" and n.domain in ("", "ai.onnx"):
                out[v] = (idx[0], n.output[0])
    return out


def names_read(g: onnx.GraphProto) -> set[str]:
    """Every value name a node of `g` or of its subgraphs reads."""
    out: set[str] = set()
    for n in g.node:
        out.update(n.input)
        for a in n.attribute:
            for sub in (*([a.g] if a.HasField("g") else []), *a.graphs):
                out |= names_read(sub)
    return out


def attrs_key(node: onnx.NodeProto) -> str:
    """The node's attributes as sorted JSON (the kernel table's key for a Conv)."""
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    return json.dumps(
        {k: (v.decode() if isinstance(v, bytes) else v) for k, v in sorted(a.items())}
    )


def activation_qparams(lo: float, hi: float) -> tuple[np.float32, np.uint8]:
    """(scale, zero point) of uint8 asymmetric quantization of the range [lo, hi] with 0
    inside it: scale (hi - lo) / 255 (1 for an all-zero range), zero point round(-lo / s)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"calibrated range [{lo}, {hi}] is not finite")
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zero = np.uint8(np.clip(np.rint(-lo / float(scale)), 0, 255))
    return scale, zero


def quantize_conv_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(q, s): int8 W and float32 (C_out,) scales, W[c] ≈ q[c] · s[c], |q| <= 127."""
    w = np.asarray(w, np.float32)
    s = np.max(np.abs(w.reshape(w.shape[0], -1)), axis=1) / np.float32(127.0)
    s = np.where(s > 0, s, np.float32(1.0)).astype(np.float32)
    shape = (-1,) + (1,) * (w.ndim - 1)
    q = np.clip(np.rint(w / s.reshape(shape)), -127, 127).astype(np.int8)
    return q, s


class QDQ:
    """Quantize/dequantize pairs of one graph, each value quantized once."""

    def __init__(self, ranges: Ranges, fresh: Fresh) -> None:
        self.ranges, self.fresh = ranges, fresh
        self.tensors: list[onnx.TensorProto] = []
        self.params: dict[str, tuple[str, str, np.float32]] = {}
        """Value -> (scale name, zero-point name, scale) of its quantization."""
        self.dequantized: dict[str, str] = {}
        """Value -> the DequantizeLinear output standing for it."""

    def qparams(self, value: str) -> tuple[str, str, np.float32]:
        if value not in self.params:
            if value not in self.ranges:
                raise KeyError(f"no calibrated range for {value!r}")
            s, z = activation_qparams(*self.ranges[value])
            sn, zn = self.fresh(f"{value}_scale"), self.fresh(f"{value}_zero_point")
            self.tensors += [numpy_helper.from_array(s, sn), numpy_helper.from_array(z, zn)]
            self.params[value] = (sn, zn, s)
        return self.params[value]

    def value(self, value: str) -> tuple[str, list[onnx.NodeProto]]:
        """(the name of DQ(Q(value)), the nodes to add for it: none once it exists)."""
        if value in self.dequantized:
            return self.dequantized[value], []
        sn, zn, _ = self.qparams(value)
        q, dq = self.fresh(f"{value}_quantized"), self.fresh(f"{value}_dequantized")
        self.dequantized[value] = dq
        return dq, [
            helper.make_node("QuantizeLinear", [value, sn, zn], [q], name=q),
            helper.make_node("DequantizeLinear", [q, sn, zn], [dq], name=dq),
        ]

    def add(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """The nodes of `Add(a, b)` with both operands and the output quantized per tensor
        (ORT's QLinearAdd), in order: the operands' pairs unless made before, then the Add
        and its output's pair; the output keeps the node's output name."""
        a, b, y = node.input[0], node.input[1], node.output[0]
        xa, out = self.value(a)
        xb, more = self.value(b)
        ys, yz, _ = self.qparams(y)
        yf, yq = self.fresh(f"{y}_float"), self.fresh(f"{y}_quantized")
        out += [
            *more,
            helper.make_node("Add", [xa, xb], [yf], name=node.name or yf),
            helper.make_node("QuantizeLinear", [yf, ys, yz], [yq], name=yq),
            helper.make_node("DequantizeLinear", [yq, ys, yz], [y], name=self.fresh(f"{y}_dq")),
        ]
        self.dequantized[y] = y
        return out

    def maxpool(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """The nodes of MaxPool `node` (output 0 only) on X's quantized values: the output
        takes X's scale and zero point, so ORT drops the pair around it and pools uint8.
        Max commutes with the monotone quantization: no error beyond X's own."""
        x, y = node.input[0], node.output[0]
        xd, out = self.value(x)
        self.params[y] = self.qparams(x)
        sn, zn, _ = self.params[y]
        yf, yq = self.fresh(f"{y}_float"), self.fresh(f"{y}_quantized")
        pool = onnx.NodeProto()
        pool.CopyFrom(node)
        pool.input[0] = xd
        del pool.output[:]
        pool.output.append(yf)
        out += [
            pool,
            helper.make_node("QuantizeLinear", [yf, sn, zn], [yq], name=yq),
            helper.make_node("DequantizeLinear", [yq, sn, zn], [y], name=self.fresh(f"{y}_dq")),
        ]
        self.dequantized[y] = y
        return out

    def conv(
        self, node: onnx.NodeProto, w: np.ndarray, b: np.ndarray | None, weight: str
    ) -> list[onnx.NodeProto]:
        """The nodes of Conv `node`'s QDQ form (module docstring), in order: X's pair unless
        made before, W = `w` (stored under names made from `weight`) and bias `b`. The output
        keeps the node's name, so its readers are unchanged, and lowered readers of it read it
        without a second pair."""
        x, y = node.input[0], node.output[0]
        xd, out = self.value(x)
        _, _, sx = self.qparams(x)
        ys, yz, _ = self.qparams(y)
        q, s = quantize_conv_weight(w)
        f = self.fresh
        wq, ws, wd = f(f"{weight}_int8"), f(f"{weight}_scale"), f(f"{weight}_dequantized")
        self.tensors += [numpy_helper.from_array(q, wq), numpy_helper.from_array(s, ws)]
        out.append(helper.make_node("DequantizeLinear", [wq, ws], [wd], name=wd, axis=0))
        inputs = [xd, wd]
        if b is not None:
            bs = (np.float32(sx) * s).astype(np.float32)
            bq = np.clip(np.rint(np.asarray(b, np.float64) / bs), -(2**31), 2**31 - 1)
            bqn, bsn, bd = f(f"{weight}_bias_int32"), f(f"{weight}_bias_scale"), f(f"{y}_bias")
            self.tensors += [
                numpy_helper.from_array(bq.astype(np.int32), bqn),
                numpy_helper.from_array(bs, bsn),
            ]
            out.append(helper.make_node("DequantizeLinear", [bqn, bsn], [bd], name=bd, axis=0))
            inputs.append(bd)
        yf, yq = f(f"{y}_float"), f(f"{y}_quantized")
        conv = onnx.NodeProto()
        conv.CopyFrom(node)
        del conv.input[:]
        conv.input.extend(inputs)
        conv.output[0] = yf
        out += [
            conv,
            helper.make_node("QuantizeLinear", [yf, ys, yz], [yq], name=yq),
            helper.make_node("DequantizeLinear", [yq, ys, yz], [y], name=f(f"{y}_dq")),
        ]
        self.dequantized[y] = y
        return out
