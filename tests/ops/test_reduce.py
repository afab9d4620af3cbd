"""Reductions and ArgMax/ArgMin: reference and infer vs ORT and onnx, both axes forms."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op

RNG = np.random.default_rng(3)
F, I64 = 1, 7
OPS = [
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
]  # fmt: skip
CASES = [([1], 1), ([0, 2], 0), ([-1], 0), (None, 1), (None, 0), ([], 1)]


def x_for(op: str) -> np.ndarray:
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    if op == "ReduceLogSum":
        return np.abs(x) + 0.1
    if op == "ReduceProd":
        return (0.5 + np.abs(x)).astype(np.float32)
    return x


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("axes", "keepdims"), CASES)
def test_axes_as_input_opset18(op: str, axes: list | None, keepdims: int) -> None:
    inputs: list = [x_for(op)]
    if axes is not None:
        inputs.append(np.array(axes, np.int64))
    check_op(op, inputs, {"keepdims": keepdims}, const_inputs=(1,), opset=18, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("axes", "keepdims"), CASES[:5])
def test_axes_as_attribute_opset13(op: str, axes: list | None, keepdims: int) -> None:
    if op == "ReduceSum":  # axes became an input at opset 13 for ReduceSum
        inputs = [x_for(op)] + ([] if axes is None else [np.array(axes, np.int64)])
        check_op(op, inputs, {"keepdims": keepdims}, const_inputs=(1,), opset=13, atol=1e-5)
        return
    attrs = {"keepdims": keepdims} | ({} if axes is None else {"axes": axes})
    check_op(op, [x_for(op)], attrs, opset=13, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
def test_noop_with_empty_axes(op: str) -> None:
    check_op(op, [x_for(op)], {"noop_with_empty_axes": 1}, opset=18)
    check_op(
        op,
        [x_for(op), np.array([], np.int64)],
        {"noop_with_empty_axes": 1},
        const_inputs=(1,),
        opset=18,
    )


def test_int_reduce_sum() -> None:
    x = RNG.integers(-50, 50, (3, 4)).astype(np.int64)
    check_op("ReduceSum", [x, np.array([1], np.int64)], {"keepdims": 0}, const_inputs=(1,))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"axis": 1, "keepdims": 0},
        {"axis": -1, "select_last_index": 1},
        {"axis": 2, "select_last_index": 1},
    ],
)
def test_arg(op: str, attrs: dict) -> None:
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties make select_last_index matter
    check_op(op, [x], attrs)


def infer(
    op: str, shape: tuple | None, axes: list | None = None, const: bool = True, **attrs: object
) -> TensorType:
    spec = lookup(op)
    assert spec is not None
    types = [TensorType(F, shape)]
    consts: list = [None]
    if axes is not None:
        types.append(TensorType(I64, (len(axes),)))
        consts.append(np.array(axes, np.int64) if const else None)
    (out,) = spec.infer(OpCall(op, types, consts, attrs, opset=18))
    return out


def test_infer_symbolic() -> None:
    assert infer("ReduceMean", ("batch", "seq", 768), [-1]).shape == ("batch", "seq", 1)
    assert infer("ReduceSum", ("batch", "seq", 768), [1], keepdims=0).shape == ("batch", 768)
    assert infer("ReduceMax", ("b", "s", 4), None, keepdims=0).shape == ()
    assert infer("ReduceMax", ("b", "s", 4), [2], const=False).shape == (None, None, None)
    assert infer("ReduceMax", ("b", "s", 4), [2], const=False, keepdims=0).shape is None
    assert infer("ReduceL2", ("b", 4), None, noop_with_empty_axes=1).shape == ("b", 4)
    assert infer("ReduceL2", None, [1]).shape is None
    assert infer("ReduceL2", None, None, keepdims=0).shape == ()
    assert infer("ReduceProd", ("b", 4, 5), axes=None, keepdims=1).shape == (1, 1, 1)
    spec = lookup("ReduceMean")
    assert spec is not None
    t = TensorType(F, ("b", 3))
    assert spec.infer(OpCall("ReduceMean", [t], [None], {"axes": [0]}, opset=13)) == [
        TensorType(F, (1, 3))
    ]
    assert lookup("ArgMax").infer(OpCall("ArgMax", [t], [None], {"keepdims": 0})) == [
        TensorType(I64, (3,))
    ]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("axes", "match"), [([3], r"axes \[3\] invalid for rank 3"), ([0, -3], "invalid")]
)
def test_invalid_axes_raise(axes: list, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        infer("ReduceSum", (2, 3, 4), axes)


def test_flops() -> None:
    spec = lookup("ReduceSumSquare")
    assert spec is not None
    call = OpCall("ReduceSumSquare", [TensorType(F, (4, 5))], [None], {"axes": [1]}, opset=13)
    assert spec.flops(call, spec.infer(call)) == 40.0
