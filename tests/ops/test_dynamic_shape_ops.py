"""Typed forms of ops whose shape-like inputs are computed at run time (`rewrite.ops.dynamic`:
ReshapeDyn, ExpandDyn, SliceDyn; Range in `shape.py`): the dynamic-axes patterns of exported
transformers (Shape -> Gather -> Unsqueeze -> Concat -> Reshape over symbolic batch/sequence
dims) encode with no opaque node, `optimize --no-rules` writes them back as the ONNX ops so
that ORT computes bit-identical outputs, and the Z3 semantics move elements as ORT does where
the shape operand is concrete (and refuse a symbolic one)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto, helper, numpy_helper

from rewrite.egraph.encode import encode
from rewrite.errors import ShapeError
from rewrite.onnx_io import load
from rewrite.ops import _z3, registry
from rewrite.ops.base import OpCall, TensorType
from rewrite.ops.registry import lookup, second_forms
from rewrite.verify.selftest import self_test
from rewrite.verify.semantics import number, symbols
from tests.ops.roundtrip import round_trip

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str],
    inits: list[onnx.TensorProto],
    types: tuple[tuple[int, list[int | str | None]], ...],
) -> onnx.ModelProto:
    """A one-graph opset-17 model; `types`: each output's dtype and dims."""
    outs = [helper.make_tensor_value_info(o, *t) for o, t in zip(outputs, types, strict=True)]
    graph = helper.make_graph(nodes, "g", inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _dims(i: int, out: str) -> list[onnx.NodeProto]:
    """out = Unsqueeze(Gather(Shape(x), i), [0]): dim i of x as a 1-element vector."""
    return [
        helper.make_node("Gather", ["shape_x", f"idx{i}"], [f"d{i}"], axis=0),
        helper.make_node("Unsqueeze", [f"d{i}", "ax0"], [out]),
    ]


DIM_INITS = [numpy_helper.from_array(np.array(i, dtype=np.int64), f"idx{i}") for i in (0, 1)]
X = helper.make_tensor_value_info("x", F, ["batch", "sequence", 8])


def bert_reshape() -> onnx.ModelProto:
    """BERT's head split: x [batch, sequence, 8] -> [batch, sequence, 2, 4], the target
    computed from Shape(x), then merged back to [batch, sequence, 8] the same way."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape_x"]),
        *_dims(0, "b"),
        *_dims(1, "s"),
        helper.make_node("Concat", ["b", "s", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"]),
        helper.make_node("Concat", ["b", "s", "hidden"], ["back"], axis=0),
        helper.make_node("Reshape", ["split", "back"], ["merged"]),
    ]
    inits = [*DIM_INITS, _i64("ax0", [0]), _i64("heads", [2, 4]), _i64("hidden", [8])]
    types = ((F, ["batch", "sequence", 2, 4]), (F, ["batch", "sequence", 8]))
    return _model(nodes, [X], ["split", "merged"], inits, types)


def bert_expand_slice_range() -> onnx.ModelProto:
    """Position ids Range(0, sequence, 1), a position table sliced to [:sequence] and a bias
    expanded to Shape(x)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape_x"]),
        helper.make_node("Gather", ["shape_x", "idx1"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["seq", "ax0"], ["s"]),
        helper.make_node("Slice", ["table", "start", "s", "ax0"], ["window"]),
        helper.make_node("Expand", ["bias", "shape_x"], ["wide"]),
    ]
    table = numpy_helper.from_array(np.arange(96, dtype=np.float32).reshape(12, 8), "table")
    bias = numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 1, 8), "bias")
    scalars = [numpy_helper.from_array(np.array(v, dtype=np.int64), n) for n, v in
               (("zero", 0), ("one", 1))]  # fmt: skip
    inits = [*DIM_INITS, *scalars, _i64("ax0", [0]), _i64("start", [0]), table, bias]
    types = ((I64, [None]), (F, [None, 8]), (F, ["batch", "sequence", 8]))
    return _model(nodes, [X], ["positions", "window", "wide"], inits, types)


FEEDS = [
    {"x": np.random.default_rng(k).normal(size=(b, s, 8)).astype(np.float32)}
    for k, (b, s) in enumerate([(2, 5), (1, 11), (3, 1)])
]


@pytest.mark.parametrize("build", [bert_reshape, bert_expand_slice_range])
def test_dynamic_patterns_encode_typed_and_round_trip_bit_identical(
    build: object, tmp_path: Path
) -> None:
    model = build()  # type: ignore[operator]
    onnx.save(model, tmp_path / "m.onnx")
    enc = encode(load(tmp_path / "m.onnx"))
    assert enc.opaque_nodes == 0
    for form in ("ReshapeDyn", "ExpandDyn", "SliceDyn", "Range"):
        onnx_op = lookup(form).op_type  # type: ignore[union-attr]
        if any(n.op_type == onnx_op for n in model.graph.node):
            assert f"({form} " in enc.text, f"{onnx_op} is not encoded as {form}"
    out = round_trip(model, tmp_path)
    for feeds in FEEDS:
        want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
        got = ort.InferenceSession(out.SerializeToString()).run(None, feeds)
        for w, g in zip(want, got, strict=True):
            assert w.dtype == g.dtype and w.shape == g.shape
            assert w.tobytes() == g.tobytes()


def test_second_form_output_types_keep_shape_inference_dims(tmp_path: Path) -> None:
    """The output rank follows the shape operand's static length; symbolic dims the loader's
    shape inference knows are seeded into the e-graph, unknown ones stay unknown."""
    spec = lookup("ReshapeDyn")
    assert spec is not None
    call = OpCall(
        "Reshape", [TensorType(F, ("b", "s", 8)), TensorType(I64, (4,))], [None, None], {}
    )
    assert spec.infer(call) == [TensorType(F, (None, None, None, None))]
    range_spec = lookup("Range")
    assert range_spec is not None
    scalar = TensorType(I64, ())
    assert range_spec.infer(OpCall("Range", [scalar] * 3, [None] * 3, {}))[0].shape == (None,)
    assert [s.name for s in second_forms("Reshape")] == ["ReshapeDyn"]
    assert [s.name for s in second_forms("Slice", "ai.onnx")] == ["SliceDyn"]


def test_a_constant_shape_keeps_the_first_form(tmp_path: Path) -> None:
    nodes = [helper.make_node("Reshape", ["x", "t"], ["y"])]
    model = _model(
        nodes, [X], ["y"], [_i64("t", [0, 0, 2, 4])], ((F, ["batch", "sequence", 2, 4]),)
    )
    onnx.save(model, tmp_path / "m.onnx")
    text = encode(load(tmp_path / "m.onnx")).text
    assert "(Reshape " in text and "ReshapeDyn" not in text


def _vals(shape: tuple[int, ...], values: list[int]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = _z3.symbol("", I64, v)
    return out.reshape(shape)


def test_z3_reshape_and_expand_move_elements_over_concrete_shapes() -> None:
    x = symbols("x", TensorType(F, (2, 3, 2)))
    reshape = lookup("ReshapeDyn")
    assert reshape is not None and reshape.z3 is not None
    types = [TensorType(F, (2, 3, 2)), TensorType(I64, (2,))]
    call = OpCall("Reshape", types, [None, None], {})
    # a shape computed by z3 arithmetic (as Shape -> Gather -> Concat gives) still resolves
    shape = np.array([_z3.symbol("", I64, 3) + 0, _z3.symbol("", I64, -1)], dtype=object)
    (out,) = reshape.z3(call, [x, shape])
    assert out.shape == (3, 4) and list(out.reshape(-1)) == list(x.reshape(-1))
    with pytest.raises(ShapeError, match="not a concrete integer"):
        reshape.z3(call, [x, symbols("s", TensorType(I64, (2,)))])
    expand = lookup("ExpandDyn")
    assert expand is not None and expand.z3 is not None
    y = symbols("y", TensorType(F, (3, 1)))
    call = OpCall("Expand", [TensorType(F, (3, 1)), TensorType(I64, (3,))], [None, None], {})
    (out,) = expand.z3(call, [y, _vals((3,), [2, 3, 4])])
    assert out.shape == (2, 3, 4) and all(out[1, 2, k] is y[2, 0] for k in range(4))


def test_z3_slice_dyn_takes_the_window_ort_takes() -> None:
    spec = lookup("SliceDyn")
    assert spec is not None and spec.z3 is not None
    x = symbols("x", TensorType(F, (5, 3)))
    vec = TensorType(I64, (1,))
    call = OpCall("Slice", [TensorType(F, (5, 3)), vec, vec, vec, None], [None] * 5, {})
    args = [x, _vals((1,), [-4]), _vals((1,), [2**63 - 1]), _vals((1,), [0]), None]
    (out,) = spec.z3(call, args)
    assert out.shape == (4, 3) and out[0, 0] is x[1, 0]


@pytest.mark.parametrize(
    ("dtype", "start", "limit", "delta"),
    [(I64, 2, 11, 3), (I64, 5, -4, -2), (I64, 3, 3, 1), (F, 0.1, 1.0, 0.1), (F, 1.0, -2.5, -0.7)],
)
def test_z3_range_is_what_ort_computes(
    dtype: int, start: float, limit: float, delta: float
) -> None:
    spec = lookup("Range")
    assert spec is not None and spec.z3 is not None
    np_t = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    feeds = {n: np.array(v, dtype=np_t) for n, v in zip("sld", (start, limit, delta), strict=True)}
    scalar = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Range", ["s", "l", "d"], ["y"])],
        "g",
        [scalar(n, dtype, []) for n in "sld"],
        [helper.make_empty_tensor_value_info("y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (want,) = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    call = OpCall("Range", [TensorType(dtype, ())] * 3, [None] * 3, {})
    with _z3.arithmetic(_z3.IEEE):
        args = [np.array(_z3.symbol("", dtype, float(feeds[n])), dtype=object) for n in "sld"]
        (out,) = spec.z3(call, args)
        got = np.array([number(z3.simplify(v)) for v in out], dtype=np_t)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    with pytest.raises(ShapeError):
        spec.z3(call, [symbols("s", TensorType(dtype, ())), *args[1:]])


def test_self_test_runs_value_shaped_ops_and_catches_a_wrong_semantics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The self-test's listed cases (`ops.dynamic.SELF_TEST_VALUES`) run in ORT and match; a
    ReshapeDyn whose Z3 semantics reverse the elements is caught."""
    rows = self_test(["ReshapeDyn", "ExpandDyn", "SliceDyn", "Range"])
    assert all(r.cases > 0 and r.ok for r in rows), [r.details for r in rows]
    spec = lookup("ReshapeDyn")
    assert spec is not None and spec.z3 is not None
    right = spec.z3

    def reversed_z3(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
        (out,) = right(call, arrays)
        return [out.reshape(-1)[::-1].reshape(out.shape)]

    monkeypatch.setitem(registry._SPECS, spec.key, replace(spec, z3=reversed_z3))
    (row,) = self_test(["ReshapeDyn"])
    assert row.z3_mismatches > 0 and row.reference_mismatches == 0


def test_gather_nd_is_typed_and_round_trips_bit_identical(tmp_path: Path) -> None:
    """bert_dynamo's mask indexing: GatherND(Cast(mask), constant index tuples), negative
    indices included, and a batch_dims=1 GatherND over a computed index."""
    mask = helper.make_tensor_value_info("mask", I64, [4, 6])
    idx = np.array([[[0, 1], [-1, 2]], [[3, -6], [2, 5]]], dtype=np.int64)
    nodes = [
        helper.make_node("Cast", ["mask"], ["m"], to=F),
        helper.make_node("GatherND", ["m", "idx"], ["picked"]),
        helper.make_node("Reshape", ["mask", "rows"], ["m3"]),
        helper.make_node("Cast", ["picked"], ["pi"], to=I64),
        helper.make_node("Unsqueeze", ["pi", "ax"], ["pi3"]),
        helper.make_node("GatherND", ["m3", "pi3"], ["by_row"], batch_dims=1),
    ]
    inits = [numpy_helper.from_array(idx, "idx"), _i64("rows", [2, 2, 6]), _i64("ax", [-1])]
    types = ((F, [2, 2]), (I64, [2, 2, 6]))
    model = _model(nodes, [mask], ["picked", "by_row"], inits, types)
    onnx.save(model, tmp_path / "m.onnx")
    enc = encode(load(tmp_path / "m.onnx"))
    assert enc.opaque_nodes == 0 and enc.text.count("(GatherND ") == 2
    out = round_trip(model, tmp_path)
    feeds = {"mask": np.random.default_rng(0).integers(0, 2, size=(4, 6)).astype(np.int64)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(out.SerializeToString()).run(None, feeds)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.shape == g.shape and w.tobytes() == g.tobytes()
