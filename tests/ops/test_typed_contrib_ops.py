"""ORT contrib ops (domain com.microsoft) in input models are typed: a one-node model that
imports com.microsoft encodes with no opaque node, and `optimize` with no rules writes it back
(same domain, com.microsoft imported) with bit-identical ORT outputs. The numpy references of
the skip normalizations against ORT 1.32's CPU kernel: SkipSimplifiedLayerNormalization bit
for bit, SkipLayerNormalization (whose float order no model here reproduces) within 4 + C/256 ulps
of float32 at the row's largest |Y| (C the normalized size; measured up to C = 4096).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import TensorProto as P
from onnx import helper as h

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.roundtrip import assert_optimizes_identically

MS = "com.microsoft"
Arrays = list[np.ndarray | None]


def _model(op: str, ins: Arrays, n_outputs: int = 1, import_ms: bool = True, **attrs: object):
    """One `op` node of domain com.microsoft; input i is graph input `i<i>` (omitted: None)."""
    names = ["" if a is None else f"i{k}" for k, a in enumerate(ins)]
    outs = [f"y{k}" for k in range(n_outputs)]
    node = h.make_node(op, names, outs, domain=MS, **attrs)
    vis = [
        h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in zip(names, ins, strict=True)
        if a is not None
    ]
    ys = [h.make_tensor_value_info(o, P.FLOAT, None) for o in outs]
    opsets = [h.make_opsetid("", 17)] + ([h.make_opsetid(MS, 1)] if import_ms else [])
    model = h.make_model(h.make_graph([node], op, vis, ys), opset_imports=opsets)
    model.ir_version = 8
    return model


def _feeds(ins: Arrays) -> dict[str, np.ndarray]:
    return {f"i{k}": a for k, a in enumerate(ins) if a is not None}


def _ort(model: onnx.ModelProto, ins: Arrays) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, ["CPUExecutionProvider"])
    return np.asarray(sess.run(None, _feeds(ins))[0])


def _reference(op: str, ins: Arrays, **attrs: object) -> np.ndarray:
    spec = lookup(op, MS)
    assert spec is not None and spec.reference is not None
    types = [None if a is None else TensorType(P.FLOAT, a.shape) for a in ins]
    call = OpCall(op, types, [None] * len(ins), attrs)
    spec.infer(call)
    return spec.reference(call, list(ins))[0]


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _skip_inputs(simplified: bool, n: int, skip_rows: bool, beta: bool, bias: bool) -> Arrays:
    rng = np.random.default_rng(n)
    x = _rand(rng, 2, 3, n)
    skip = _rand(rng, 3, n) if skip_rows else _rand(rng, 2, 3, n)
    tail = [_rand(rng, n) if bias else None]
    if not simplified:
        tail = [_rand(rng, n) if beta else None, *tail]
    return [x, skip, _rand(rng, n), *tail]


SKIP_FORMS = [(False, False, False), (True, True, False), (False, False, True), (True, True, True)]
"""(skip of a trailing shape, beta given, bias given)"""


@pytest.mark.parametrize("form", SKIP_FORMS)
@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
def test_skip_norms_optimize_identically(
    op: str, form: tuple[bool, bool, bool], tmp_path: Path
) -> None:
    ins = _skip_inputs(op.startswith("SkipSimplified"), 16, *form)
    model = _model(op, ins, epsilon=1e-5)
    assert_optimizes_identically(model, _feeds(ins), tmp_path)
    out = onnx.load(tmp_path / "out.onnx")
    assert [n.domain for n in out.graph.node] == [MS]
    assert (MS, 1) in [(o.domain, o.version) for o in out.opset_import]


@pytest.mark.parametrize("n", [1, 3, 4, 15, 16, 17, 64, 768])
@pytest.mark.parametrize("form", SKIP_FORMS)
def test_skip_simplified_reference_is_ort_bit_for_bit(n: int, form: tuple[bool, ...]) -> None:
    op = "SkipSimplifiedLayerNormalization"
    ins = _skip_inputs(True, n, *form)
    got, want = _ort(_model(op, ins), ins), _reference(op, ins)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("n", [1, 4, 17, 64, 768, 4096])
@pytest.mark.parametrize("form", SKIP_FORMS)
def test_skip_layer_norm_reference_is_within_the_bound(n: int, form: tuple[bool, ...]) -> None:
    """Not bit-exact (module docstring of rewrite.ops.contrib_norm): |ORT - ref| <= 4 + n/256
    ulps of float32 at the row's largest |Y| (ORT's float32 sums lose what the float64
    reference keeps; the loss grows with n)."""
    op = "SkipLayerNormalization"
    ins = _skip_inputs(False, n, *form)
    got, want = _ort(_model(op, ins, epsilon=1e-5), ins), _reference(op, ins, epsilon=1e-5)
    scale = np.abs(want).max(axis=-1, keepdims=True)
    assert np.all(np.abs(got - want) <= (4 + n / 256) * np.spacing(scale))


def test_a_skip_norm_with_its_extra_outputs_stays_opaque(tmp_path: Path) -> None:
    ins = _skip_inputs(False, 8, False, True, True)
    src = tmp_path / "m.onnx"
    onnx.save(_model("SkipLayerNormalization", ins, n_outputs=4), src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 1 and enc.typed == 0


GELUS = [("Gelu", 1), ("FastGelu", 1), ("QuickGelu", 1), ("BiasGelu", 2)]


@pytest.mark.parametrize(("op", "n_inputs"), GELUS)
def test_the_older_contrib_ops_in_an_input_model_are_typed(
    op: str, n_inputs: int, tmp_path: Path
) -> None:
    rng = np.random.default_rng(1)
    ins: Arrays = [_rand(rng, 2, 8), _rand(rng, 8)][:n_inputs]
    assert_optimizes_identically(_model(op, ins), _feeds(ins), tmp_path)


def test_fused_matmul_in_an_input_model_is_typed(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    ins: Arrays = [_rand(rng, 2, 4, 3), _rand(rng, 2, 5, 4)]
    model = _model("FusedMatMul", ins, alpha=0.5, transA=1, transB=1)
    assert_optimizes_identically(model, _feeds(ins), tmp_path)


def test_an_op_of_another_domain_stays_opaque(tmp_path: Path) -> None:
    """Only com.microsoft's registered ops are typed: Gelu of a custom domain is opaque."""
    rng = np.random.default_rng(3)
    model = _model("Gelu", [_rand(rng, 2, 8)])
    model.graph.node[0].domain = "org.example"
    model.opset_import.append(h.make_opsetid("org.example", 1))
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 1 and enc.typed == 0


ACTIVATIONS = [
    ("", []),
    ("Relu", []),
    ("Tanh", []),
    ("Sigmoid", []),
    ("LeakyRelu", [0.1]),
    ("Clip", [-0.5, 0.25]),
    ("HardSigmoid", [0.3, 0.4]),
]


def _conv_inputs(with_z: bool) -> Arrays:
    rng = np.random.default_rng(5)
    x, w, b = _rand(rng, 1, 2, 5, 5), _rand(rng, 3, 2, 3, 3), _rand(rng, 3)
    return [x, w, b, _rand(rng, 1, 3, 3, 3) if with_z else None]


def _conv_model(ins: Arrays, act: str, params: list[float]) -> onnx.ModelProto:
    attrs: dict[str, object] = {"kernel_shape": [3, 3]}
    if act:
        attrs["activation"] = act
    if params:
        attrs["activation_params"] = params
    return _model("FusedConv", ins if ins[-1] is not None else ins[:-1], **attrs)


@pytest.mark.parametrize("with_z", [False, True])
@pytest.mark.parametrize(("act", "params"), ACTIVATIONS)
def test_fused_conv_optimizes_identically(
    act: str, params: list[float], with_z: bool, tmp_path: Path
) -> None:
    ins = _conv_inputs(with_z)
    model = _conv_model(ins, act, params)
    assert_optimizes_identically(model, _feeds(ins), tmp_path)
    node = onnx.load(tmp_path / "out.onnx").graph.node[0]
    assert node.domain == MS
    got = {a.name: h.get_attribute_value(a) for a in node.attribute}
    assert got.get("activation", b"").decode() == act
    assert list(got.get("activation_params", [])) == pytest.approx(params)


@pytest.mark.parametrize("with_z", [False, True])
@pytest.mark.parametrize(("act", "params"), ACTIVATIONS)
def test_fused_conv_reference_is_close_to_ort(act: str, params: list[float], with_z: bool) -> None:
    """Not bit-exact (Conv's sums in float64, not MLAS's order; MLAS's tanh and exp)."""
    ins = _conv_inputs(with_z)
    attrs: dict[str, object] = {"kernel_shape": (3, 3), "activation": act}
    attrs |= dict(zip(("alpha", "beta"), params, strict=False))
    spec = lookup("FusedConv", MS)
    assert spec is not None and spec.reference is not None
    types = [None if a is None else TensorType(P.FLOAT, a.shape) for a in ins]
    want = spec.reference(OpCall("FusedConv", types, [None] * 4, attrs), list(ins))[0]
    got = _ort(_conv_model(ins, act, params), ins)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_fused_conv_with_a_wrong_parameter_count_stays_opaque(tmp_path: Path) -> None:
    ins = _conv_inputs(False)
    src = tmp_path / "m.onnx"
    onnx.save(_conv_model(ins, "LeakyRelu", [0.1, 0.2]), src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 1 and enc.typed == 0


def test_silu_which_ort_1_32s_fused_conv_refuses_stays_opaque(tmp_path: Path) -> None:
    src = tmp_path / "m.onnx"
    onnx.save(_conv_model(_conv_inputs(False), "Silu", []), src)
    enc = encode(load(src))
    assert enc.opaque_nodes == 1 and enc.typed == 0


@pytest.mark.parametrize(("x_shape", "skip_shape"), [((2, 3, 8), (8,)), ((1, 2, 3, 8), (3, 8))])
def test_skip_shapes_ort_refuses_are_refused(
    x_shape: tuple[int, ...], skip_shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(4)
    ins: Arrays = [_rand(rng, *x_shape), _rand(rng, *skip_shape), _rand(rng, 8)]
    with pytest.raises(ShapeError):
        _reference("SkipSimplifiedLayerNormalization", ins)
    with pytest.raises(Exception, match="dimensions"):
        _ort(_model("SkipSimplifiedLayerNormalization", ins), ins)
