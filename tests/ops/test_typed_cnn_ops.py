"""The typed e-graph forms of Conv, Gemm, BatchNormalization, Pad and AveragePool: small
models encode with no opaque node, `rewrite optimize --no-rules` writes them back so that ORT
computes the same outputs, the ops left opaque stay opaque, and the attribute values the
proofs range over fit the input shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import round_trip

F = TensorProto.FLOAT
TYPED = ("Conv", "Gemm", "BatchNormalization", "Pad", "AveragePool")
RNG = np.random.default_rng(7)


def _f32(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _vi(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, F, shape)


X = _vi("x", ["n", 4, 6, 6])
A = _vi("a", [3, 5])
# case -> (nodes, initializers); inputs x (n, 4, 6, 6) and a (3, 5)
CASES: dict[str, tuple[list[onnx.NodeProto], list[onnx.TensorProto]]] = {
    "Conv": (
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
            helper.make_node("Conv", ["x", "w"], ["c1"]),  # no bias, no attributes
            helper.make_node("Conv", ["x", "wd"], ["c2"], group=4, auto_pad="SAME_UPPER"),
        ],
        [_f32("w", 3, 4, 3, 3), _f32("b", 3), _f32("wd", 4, 1, 2, 2)],
    ),
    "Gemm": (
        [
            helper.make_node("Gemm", ["a", "g", "gc"], ["g0"], alpha=0.5, transB=1),
            helper.make_node("Gemm", ["a", "g2"], ["g1"]),  # no C
        ],
        [_f32("g", 2, 5), _f32("gc", 2), _f32("g2", 5, 4)],
    ),
    "BatchNormalization": (
        [helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["bn"], epsilon=1e-3)],
        [
            _f32("s", 4),
            _f32("bb", 4),
            _f32("m", 4),
            numpy_helper.from_array(RNG.uniform(0.5, 2, 4).astype(np.float32), "v"),
        ],
    ),
    "Pad": (
        [
            helper.make_node("Pad", ["x", "p"], ["p0"]),
            helper.make_node("Pad", ["x", "p", "cv"], ["p1"]),
            helper.make_node("Pad", ["x", "p"], ["p2"], mode="reflect"),
            helper.make_node("Pad", ["x", "pc"], ["p3"], mode="edge"),
        ],
        [
            _i64("p", [0, 0, 1, 2, 0, 0, 2, 1]),
            _i64("pc", [0, 0, -1, 1, 0, 0, 1, -2]),
            numpy_helper.from_array(np.array(1.5, np.float32), "cv"),
        ],
    ),
    "AveragePool": (
        [
            helper.make_node("AveragePool", ["x"], ["ap0"], kernel_shape=[3, 3]),
            helper.make_node(
                "AveragePool",
                ["x"],
                ["ap1"],
                kernel_shape=[2, 3],
                pads=[1, 0, 1, 2],
                strides=[2, 2],
                ceil_mode=1,
                count_include_pad=1,
            ),
        ],
        [],
    ),
}


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    used = {i for n in nodes for i in n.input}
    inputs = [vi for vi in (X, A) if vi.name in used]
    outs = [helper.make_tensor_value_info(o, 0, None) for n in nodes for o in n.output]
    graph = helper.make_graph(nodes, "cnn", inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim
        shape = [d.dim_value if d.HasField("dim_value") else 2 for d in dims]
        feeds[vi.name] = rng.normal(size=shape).astype(np.float32)
    return feeds


def _run(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    src = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


@pytest.mark.parametrize("key", sorted(CASES))
def test_the_model_encodes_with_no_opaque_node(key: str, tmp_path: Path) -> None:
    nodes, inits = CASES[key]
    path = tmp_path / "in.onnx"
    onnx.save(_model(nodes, inits), path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 0, enc.opaque
    assert enc.typed == len(nodes)


def test_every_op_is_typed_and_provable() -> None:
    for name in TYPED:
        spec = lookup(name)
        assert spec is not None and spec.egg is not None and spec.z3 is not None, name


def test_optimize_round_trips_the_typed_ops_and_ort_agrees(tmp_path: Path) -> None:
    nodes = [n for ns, _ in CASES.values() for n in ns]
    inits = [t for _, ts in CASES.values() for t in ts]
    model = _model(nodes, inits)
    out = round_trip(model, tmp_path)
    dst = tmp_path / "out.onnx"
    conv = next(n for n in out.graph.node if n.output[0] == "c1")
    assert not conv.attribute and list(conv.input)[:2] == ["x", "w"]  # defaults stay omitted
    feeds = _feeds(model)
    for a, b in zip(_run(model, feeds), _run(str(dst), feeds), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # decode writes an omitted bias / C / constant_value as a trailing empty input name, with
    # which ORT's Conv takes another kernel path (last-bit differences); without it, identical
    for n in out.graph.node:
        while n.input and not n.input[-1]:
            n.input.pop()
    trimmed = tmp_path / "trimmed.onnx"
    onnx.save(out, trimmed)
    for a, b in zip(_run(model, feeds), _run(str(trimmed), feeds), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("node", "inits"),
    [
        (helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2]), []),
        (
            helper.make_node("Pad", ["x", "p", "", "ax"], ["y"]),
            [_i64("p", [1, 1]), _i64("ax", [3])],
        ),
        (
            helper.make_node(
                "BatchNormalization", ["x", "s", "s", "s", "s"], ["y"], training_mode=0
            ),
            [_f32("s", 4)],
        ),
    ],
)
def test_the_ops_left_opaque_stay_opaque(
    node: onnx.NodeProto, inits: list[onnx.TensorProto], tmp_path: Path
) -> None:
    """MaxPool with Indices, Pad with axes and BatchNormalization with training_mode have no
    typed form (LRN has one: tests/ops/test_typed_lrn_global_max.py)."""
    model = _model([node], inits)
    model.opset_import[0].version = 18
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    assert encode(load(path)).opaque_nodes == 1


@pytest.mark.parametrize(
    ("op", "inputs"),
    [
        ("Conv", [(2, 4, 5, 6), (6, 2, 3, 2), (6,)]),
        ("Conv", [(1, 3, 7), (3, 1, 2), (3,)]),
        ("AveragePool", [(1, 2, 4, 4)]),
        ("MaxPool", [(1, 2, 4, 4)]),
        ("MaxPool", [(1, 2, 5)]),
    ],
)
def test_attribute_values_fit_the_input_shapes(op: str, inputs: list[tuple[int, ...]]) -> None:
    """Every combination of the attribute values the proofs range over is either accepted by
    infer or refused as ORT refuses it; the group is the one the channels allow."""
    spec = lookup(op)
    assert spec is not None and spec.egg is not None and spec.attr_values is not None
    types = [TensorType(F, s) for s in inputs]
    values = {n: spec.attr_values(n, types) for n, _, _ in spec.egg.attrs}
    n = len(inputs[0]) - 2
    for name, vals in values.items():
        assert vals, name
        for v in vals:
            assert not isinstance(v, tuple) or len(v) in (n, 2 * n), (name, v)
    if op == "Conv":
        assert values["group"] == [inputs[0][1] // inputs[1][1]]
        call = OpCall(op, types, [None] * len(types), {"group": values["group"][0]})
        assert spec.infer(call)[0].shape is not None
