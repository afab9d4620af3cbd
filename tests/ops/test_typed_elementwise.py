"""The typed forms of the comparison, logic, rounding, sign, log, trigonometric, Pow, Max/Min,
Where and Clip ops: each one-op model encodes with no opaque node, and `rewrite optimize`
(no rules) writes a model whose ORT outputs are bit-identical to the input's. Plus the ORT
behaviours the references model (Pow's multiply path, Clip's default bounds, float16 Sign).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints
import pytest
from onnx import TensorProto as P
from onnx import helper as h

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from rewrite.ops._binary_z3 import pow_multiplies
from tests.ops.harness import check_op
from tests.ops.roundtrip import assert_optimizes_identically

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.5, 0.5, 3.0, 1e-40, 3e38]
Input = tuple[int, tuple[int, ...]]


def _values(dtype: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(shape))
    if dtype == P.BOOL:
        return rng.integers(0, 2, size=shape).astype(bool)
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    if np.dtype(np_dt).kind in "iu":
        return rng.integers(-5, 6, size=shape).astype(np_dt)
    with np.errstate(all="ignore"):
        return np.resize(np.array(SPECIAL), n).reshape(shape).astype(np_dt)


def _model(op: str, inputs: list[Input | None], attrs: dict[str, Any]) -> onnx.ModelProto:
    names = [f"x{i}" if t is not None else "" for i, t in enumerate(inputs)]
    node = h.make_node(op, names, ["y"], **attrs)
    graph_inputs = [
        h.make_tensor_value_info(n, t[0], t[1])
        for n, t in zip(names, inputs, strict=True)
        if t is not None
    ]
    graph = h.make_graph([node], op, graph_inputs, [h.make_empty_tensor_value_info("y")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


F, F16, I64, I32, B = P.FLOAT, P.FLOAT16, P.INT64, P.INT32, P.BOOL
CASES: list[tuple[str, list[Input | None], dict[str, Any]]] = [
    ("Where", [(B, (3, 1)), (F, (1, 4)), (F, (3, 4))], {}),
    ("Where", [(B, (4,)), (I64, (2, 4)), (I64, ())], {}),
    ("IsNaN", [(F, (13,))], {}),
    ("IsInf", [(F, (13,))], {}),
    ("IsInf", [(P.DOUBLE, (13,))], {"detect_negative": 0}),
    ("Not", [(B, (2, 3))], {}),
    ("Abs", [(F, (13,))], {}),
    ("Abs", [(I32, (2, 3))], {}),
    ("Log", [(F, (13,))], {}),
    ("Sin", [(F, (13,))], {}),
    ("Cos", [(F16, (13,))], {}),
    ("Sign", [(F16, (13,))], {}),
    ("Sign", [(I64, (4,))], {}),
    ("Floor", [(F, (13,))], {}),
    ("Ceil", [(F, (13,))], {}),
    ("Round", [(F, (13,))], {}),
    ("Pow", [(F, (13,)), (F, ())], {}),
    ("Pow", [(I64, (2, 3)), (I64, (2, 1))], {}),
    ("Pow", [(F, (13,)), (I64, (13,))], {}),
    ("Max", [(F, (13,)), (F, (13,))], {}),
    ("Min", [(I32, (2, 3)), (I32, (3,))], {}),
    ("Clip", [(F, (13,)), (F, ()), (F, ())], {}),
    ("Clip", [(F, (13,)), None, (F, (1,))], {}),
    ("Clip", [(F, (13,))], {}),
    ("Clip", [(I64, (2, 3)), (I64, ())], {}),
]
for _op in ["And", "Or", "Xor"]:
    CASES.append((_op, [(B, (2, 3)), (B, (3,))], {}))
for _op in ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]:
    CASES.append((_op, [(F, (13,)), (F, (13, 1))], {}))
CASES.append(("Equal", [(B, (4,)), (B, (4,))], {}))
CASES.append(("Less", [(I64, (2, 3)), (I64, (3,))], {}))


def _id(case: tuple[str, list[Input | None], dict[str, Any]]) -> str:
    op, inputs, attrs = case
    types = ",".join("-" if t is None else f"{t[0]}{list(t[1])}" for t in inputs)
    return f"{op}({types}){attrs or ''}"


def _ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    src = model if isinstance(model, Path) else model.SerializeToString()
    sess = ort.InferenceSession(str(src) if isinstance(src, Path) else src)
    return sess.run(None, feeds)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_one_op_model_is_typed_and_optimizes_identically(
    case: tuple[str, list[Input | None], dict[str, Any]], tmp_path: Path
) -> None:
    op, inputs, attrs = case
    model = _model(op, inputs, attrs)
    rng = np.random.default_rng(0)
    feeds = {f"x{i}": _values(t[0], t[1], rng) for i, t in enumerate(inputs) if t is not None}
    assert_optimizes_identically(model, feeds, tmp_path)


def test_a_clip_with_a_non_scalar_bound_stays_opaque_in_infer() -> None:
    clip = lookup("Clip")
    assert clip is not None
    x = TensorType(F, (2, 3))
    bounds: list[tuple[int | str, ...]] = [(), (1,), ("n",)]
    for bound in bounds:
        assert clip.infer(OpCall("Clip", [x, TensorType(F, bound)], [None, None], {})) == [x]
    for bad in [(3,), (1, 1)]:
        with pytest.raises(ShapeError, match="scalar"):
            clip.infer(OpCall("Clip", [x, None, TensorType(F, bad)], [None] * 3, {}))


SHAPES = [(), (1,), (2,), (1, 1), (2, 1), (1, 2), (3, 2)]


def test_pow_multiplies_where_ort_does() -> None:
    """65536² in int32 is 0 where ORT multiplies, INT32_MIN where it converts std::pow."""
    for xs in SHAPES:
        for ys in SHAPES:
            try:
                np.broadcast_shapes(xs, ys)
            except ValueError:
                continue
            x, y = np.full(xs, 65536, np.int32), np.full(ys, 2, np.int32)
            (got,) = check_op("Pow", [x, y])
            assert (got == 0).all() == pow_multiplies(xs, ys), (xs, ys, got)


def test_references_follow_ort_on_special_values() -> None:
    with np.errstate(all="ignore"):
        f = np.array(SPECIAL, np.float32)
        f16, neg = f.astype(np.float16), np.float32(-0.0) * f
    check_op("Clip", [f])  # no bounds: ±inf become the float32 extremes
    check_op("Clip", [f, np.array(np.nan, np.float32), np.array(1.0, np.float32)])
    check_op("Clip", [f, np.array(1.0, np.float32), np.array(-1.0, np.float32)])
    check_op("Sign", [f16])  # ORT's float16 Sign(NaN) is 0
    check_op("Max", [f, f[::-1].copy()])
    check_op("Min", [f, neg])
    ints = np.array([2, 3, -3, 46341, 2**20, 7], np.int32)
    check_op("Pow", [ints, np.array(2, np.int32)])  # multiplies: wraps
    check_op("Pow", [ints, np.array([2, 3, 3, 2, 2, -1], np.int32)])  # std::pow: saturates
    check_op("Pow", [ints.astype(np.int64), np.array(0.5, np.float32)])
