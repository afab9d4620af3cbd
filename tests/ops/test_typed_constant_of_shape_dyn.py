"""ConstantOfShapeDyn (`rewrite.ops.dynamic`): ConstantOfShape whose shape is computed at run
time (zeros(batch, hidden) from Shape -> Gather -> Concat, a mask of ones(seq, seq)) encodes
typed, with no opaque node, `optimize --no-rules` writes it back as ConstantOfShape with its
`value` so that ORT computes bit-identical outputs, and the Z3 semantics fill the concrete
shape with the value's numeral (and refuse a symbolic shape)."""

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

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
X = helper.make_tensor_value_info("x", F, ["batch", "sequence", 8])
VALUES: dict[str, np.ndarray | None] = {
    "default": None,  # no `value` attribute: float32 zeros
    "float32": np.array([-1.25], dtype=np.float32),
    "int64": np.array([7], dtype=np.int64),
    "bool": np.array([True]),
}


def _fill(shape: str, out: str, value: np.ndarray | None) -> onnx.NodeProto:
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    return helper.make_node("ConstantOfShape", [shape], [out], **attrs)


def computed_shapes(value: np.ndarray | None) -> onnx.ModelProto:
    """full(Shape(x), value) and full(Concat([sequence], [4]), value): a shape read from x
    and one concatenated from a computed dim and a constant."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape_x"]),
        _fill("shape_x", "like_x", value),
        helper.make_node("Gather", ["shape_x", "one"], ["seq"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "ax0"], ["s"]),
        helper.make_node("Concat", ["s", "four"], ["target"], axis=0),
        _fill("target", "table", value),
    ]
    inits = [
        numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "ax0"),
        numpy_helper.from_array(np.array([4], dtype=np.int64), "four"),
    ]
    dtype = F if value is None else helper.np_dtype_to_tensor_dtype(value.dtype)
    outs = [
        helper.make_tensor_value_info("like_x", dtype, ["batch", "sequence", 8]),
        helper.make_tensor_value_info("table", dtype, ["sequence", 4]),
    ]
    graph = helper.make_graph(nodes, "g", [X], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("kind", VALUES)
def test_computed_shapes_encode_typed_and_round_trip_bit_identical(
    kind: str, tmp_path: Path
) -> None:
    model = computed_shapes(VALUES[kind])
    onnx.save(model, tmp_path / "m.onnx")
    enc = encode(load(tmp_path / "m.onnx"))
    assert enc.opaque_nodes == 0
    assert enc.text.count("(ConstantOfShapeDyn ") == 2
    out = round_trip(model, tmp_path)
    written = [n for n in out.graph.node if n.op_type == "ConstantOfShape"]
    assert len(written) == 2
    for b, s in [(2, 5), (1, 11), (3, 1)]:
        feeds = {"x": np.random.default_rng(b * s).normal(size=(b, s, 8)).astype(np.float32)}
        want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
        got = ort.InferenceSession(out.SerializeToString()).run(None, feeds)
        for w, g in zip(want, got, strict=True):
            assert w.dtype == g.dtype and w.shape == g.shape
            assert w.tobytes() == g.tobytes()


def test_types_cost_and_forms() -> None:
    """The output's rank follows the shape operand's static length (dims unknown), its dtype
    the value's; a constant operand gives the dims, and the cost is the bytes written."""
    spec = lookup("ConstantOfShapeDyn")
    assert spec is not None and spec.op_type == "ConstantOfShape"
    assert [s.name for s in second_forms("ConstantOfShape")] == ["ConstantOfShapeDyn"]
    value = numpy_helper.from_array(np.array([3], dtype=np.int64))
    call = OpCall("ConstantOfShape", [TensorType(I64, (3,))], [None], {"value": value})
    assert spec.infer(call) == [TensorType(I64, (None, None, None))]
    unknown = OpCall("ConstantOfShape", [TensorType(I64, (None,))], [None], {})
    assert spec.infer(unknown) == [TensorType(F, None)]
    known = OpCall("ConstantOfShape", [TensorType(I64, (2,))], [np.array([4, 5])], {})
    (out,) = spec.infer(known)
    assert out == TensorType(F, (4, 5)) and spec.bytes(known, [out]) == 4 * 20


def test_a_constant_shape_keeps_the_first_form(tmp_path: Path) -> None:
    shape = numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "shape")
    out = helper.make_tensor_value_info("y", F, [2, 3])
    graph = helper.make_graph([_fill("shape", "y", None)], "g", [], [out], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    text = encode(load(tmp_path / "m.onnx")).text
    assert "(ConstantOfShape " in text and "ConstantOfShapeDyn" not in text


def test_z3_fills_a_concrete_shape_and_refuses_a_symbolic_one() -> None:
    spec = lookup("ConstantOfShapeDyn")
    assert spec is not None and spec.z3 is not None
    value = numpy_helper.from_array(np.array([-2], dtype=np.int64))
    call = OpCall("ConstantOfShape", [TensorType(I64, (2,))], [None], {"value": value})
    # a shape computed by z3 arithmetic (as Shape -> Gather -> Concat gives) still resolves
    shape = np.array([_z3.symbol("", I64, 2) + 1, _z3.symbol("", I64, 2)], dtype=object)
    (out,) = spec.z3(call, [shape])
    assert out.shape == (3, 2)
    assert {number(z3.simplify(v), I64) for v in out.reshape(-1)} == {-2}
    with pytest.raises(ShapeError, match="not a concrete integer"):
        spec.z3(call, [symbols("s", TensorType(I64, (2,)))])


def test_self_test_matches_ort_and_catches_a_wrong_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    """The listed cases (`ops.dynamic.SELF_TEST_VALUES`: float32, int64, bool, float16 values,
    an empty and a scalar shape) match ORT; semantics that ignore `value` are caught."""
    (row,) = self_test(["ConstantOfShapeDyn"])
    assert row.cases >= 5 and row.ok, row.details
    spec = lookup("ConstantOfShapeDyn")
    assert spec is not None and spec.z3 is not None
    right = spec.z3

    def zeros_z3(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
        return right(replace(call, attrs={}), arrays)

    monkeypatch.setitem(registry._SPECS, spec.key, replace(spec, z3=zeros_z3))
    (row,) = self_test(["ConstantOfShapeDyn"])
    assert row.z3_mismatches > 0 and row.reference_mismatches == 0
