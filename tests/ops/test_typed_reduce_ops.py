"""The typed e-graph forms of ArgMax and ArgMin: small models encode with no opaque node,
`rewrite optimize --no-rules --no-fold` writes them back so that ORT computes identical
outputs, the reference scans as ORT does (NaN wins only at element 0), and the reductions and
pools whose order- or path-dependent float semantics are not modelled stay opaque (ReduceSum,
ReduceMean and ReduceSumSquare are typed: tests/ops/test_typed_reduce_sum.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import TensorProto, helper

from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import round_trip

F, I64 = TensorProto.FLOAT, TensorProto.INT64
TYPED = ("ArgMax", "ArgMin")
NODES = [
    helper.make_node("ArgMax", ["x"], ["a0"]),  # defaults: axis 0, keepdims 1
    helper.make_node("ArgMax", ["x"], ["a1"], axis=-1, keepdims=0, select_last_index=1),
    helper.make_node("ArgMin", ["x"], ["a2"], axis=1),
    helper.make_node("ArgMin", ["k"], ["a3"], axis=2, keepdims=0, select_last_index=1),
]


def _model(nodes: list[onnx.NodeProto], opset: int = 17) -> onnx.ModelProto:
    used = {i for n in nodes for i in n.input}
    inputs = [
        helper.make_tensor_value_info("x", F, ["n", 3, 5]),
        helper.make_tensor_value_info("k", I64, [2, 3, 4]),
    ]
    outs = [helper.make_tensor_value_info(o, 0, None) for n in nodes for o in n.output]
    graph = helper.make_graph(nodes, "g", [vi for vi in inputs if vi.name in used], outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, size=(2, 3, 5)).astype(np.float32)  # ties
    x[0, 0, 0], x[1, 2, 3], x[0, 1, 2] = np.nan, np.nan, -0.0
    feeds = {"x": x, "k": rng.integers(-2, 3, size=(2, 3, 4)).astype(np.int64)}
    return {vi.name: feeds[vi.name] for vi in model.graph.input}


def _run(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    src = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def test_every_op_is_typed_and_provable() -> None:
    for name in TYPED:
        spec = lookup(name)
        assert spec is not None and spec.egg is not None and spec.z3 is not None, name


def test_the_model_encodes_with_no_opaque_node(tmp_path: Path) -> None:
    path = tmp_path / "in.onnx"
    onnx.save(_model(NODES), path)
    enc = encode(load(path))
    assert enc.opaque_nodes == 0, enc.opaque
    assert enc.typed == len(NODES)


def test_optimize_round_trips_the_typed_ops_and_ort_agrees(tmp_path: Path) -> None:
    model = _model(NODES)
    out = round_trip(model, tmp_path)
    dst = tmp_path / "out.onnx"
    first = next(n for n in out.graph.node if n.output[0] == "a0")
    assert not first.attribute  # defaults stay omitted
    feeds = _feeds(model)
    for a, b in zip(_run(model, feeds), _run(str(dst), feeds), strict=True):
        assert a.dtype == b.dtype == np.int64
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.output[0])
def test_the_reference_scans_as_ort_does(node: onnx.NodeProto) -> None:
    """NaN at element 0 wins, a later NaN never does; ties go to the first (or last) index."""
    model = _model([node])
    feeds = _feeds(model)
    spec = lookup(node.op_type)
    assert spec is not None and spec.reference is not None
    x = next(iter(feeds.values()))
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    call = OpCall(
        node.op_type, [TensorType(I64 if x.dtype == np.int64 else F, x.shape)], [None], attrs
    )
    (want,) = _run(model, feeds)
    (got,) = spec.reference(call, [x])
    assert spec.infer(call)[0] == TensorType(I64, want.shape)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("node", "opset"),
    [
        (helper.make_node("ReduceL1", ["x"], ["y"], axes=[-1]), 17),
        (helper.make_node("ReduceL2", ["x"], ["y"]), 17),
        (helper.make_node("ReduceProd", ["x"], ["y"], keepdims=0), 17),
    ],
    ids=lambda v: v.op_type if isinstance(v, onnx.NodeProto) else str(v),
)
def test_the_norm_reductions_are_typed(node: onnx.NodeProto, opset: int, tmp_path: Path) -> None:
    """ReduceL1, ReduceL2 and ReduceProd (and ReduceLogSum, ReduceLogSumExp) are typed, with
    ORT's order and paths (tests/ops/test_typed_reduce_norms.py), a symbolic dim included."""
    path = tmp_path / "in.onnx"
    onnx.save(_model([node], opset), path)
    assert encode(load(path)).opaque_nodes == 0
