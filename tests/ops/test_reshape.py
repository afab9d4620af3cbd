"""Reshape, Flatten, Squeeze, Unsqueeze: reference and infer vs ORT; symbolic and invalid shapes."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_shape as infer
from tests.ops.infer_helper import t

F = 1  # onnx.TensorProto.FLOAT
RNG = np.random.default_rng(0)
I64 = np.int64


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("shape", "target", "allowzero"),
    [
        ((2, 3, 4), [0, -1], 0),
        ((2, 3, 4), [4, 6], 0),
        ((2, 3, 4), [-1], 0),
        ((2, 3, 4), [2, 0, 2, 2], 0),
        ((0, 3), [3, 0], 1),
        ((2, 3, 4), [1, 1, -1, 1], 1),
    ],
)
def test_reshape_vs_ort(shape, target, allowzero) -> None:
    attrs = {"allowzero": allowzero} if allowzero else {}
    check_op("Reshape", [x(*shape), np.array(target, I64)], attrs, const_inputs=(1,), opset=14)


@pytest.mark.parametrize(
    ("op", "shape", "attrs", "axes", "opset"),
    [
        ("Flatten", (2, 3, 4), {"axis": 2}, None, 17),
        ("Flatten", (2, 3, 4), {"axis": 0}, None, 17),
        ("Flatten", (2, 3, 4), {"axis": -1}, None, 17),
        ("Flatten", (2, 3, 4), {"axis": 3}, None, 17),
        ("Squeeze", (1, 3, 1, 4), {}, [0, -2], 17),
        ("Squeeze", (1, 3, 1, 4), {}, None, 17),
        ("Squeeze", (1, 3, 1, 4), {"axes": [2]}, None, 11),
        ("Unsqueeze", (3, 4), {}, [0, -1, 2], 17),
        ("Unsqueeze", (3, 4), {"axes": [1]}, None, 11),
    ],
)
def test_view_ops_vs_ort(op, shape, attrs, axes, opset) -> None:
    inputs = [x(*shape)] + ([] if axes is None else [np.array(axes, I64)])
    check_op(op, inputs, attrs, const_inputs=(1,), opset=opset)


def test_reshape_symbolic() -> None:
    t = TensorType(F, ("batch", 128, 768))
    assert infer("Reshape", t, None, consts=[None, np.array([0, 0, 12, 64])]) == (
        "batch",
        128,
        12,
        64,
    )
    assert infer("Reshape", t, None, consts=[None, np.array([-1, 768])]) == (None, 768)
    assert infer("Reshape", t, None, consts=[None, np.array([0, -1])]) == ("batch", 98304)
    t2 = TensorType(F, ("b", "s", 12, 64))
    assert infer("Reshape", t2, None, consts=[None, np.array([0, -1, 768])]) == ("b", "s", 768)
    assert infer("Reshape", t2, None, consts=[None, np.array([-1, 64])]) == (None, 64)


def test_reshape_unknowns() -> None:
    shape_in = TensorType(7, (3,))
    assert infer("Reshape", TensorType(F, ("b", 4)), shape_in) == (None, None, None)
    assert infer("Reshape", TensorType(F, (2, 4)), TensorType(7, (None,))) is None
    unknown_rank = TensorType(F, None)
    assert infer("Reshape", unknown_rank, None, consts=[None, np.array([0, 4, -1])]) == (
        None,
        4,
        None,
    )
    assert infer("Reshape", TensorType(F, (None, 4)), None, consts=[None, np.array([-1])]) == (
        None,
    )


@pytest.mark.parametrize(
    ("shape", "target", "match"),
    [
        ((2, 3), [4, 2], "cannot reshape 6 elements"),
        ((2, 3), [4, -1], "6 elements are not a multiple of 4"),
        ((2, 3), [-1, -1], "more than one -1"),
        ((2, 3), [0, 0, 0], "copies dim 2"),
        (("b", 3), [-2, 3], "negative dim"),
    ],
)
def test_reshape_invalid(shape, target, match) -> None:
    with pytest.raises(ShapeError, match=match):
        infer("Reshape", TensorType(F, shape), None, consts=[None, np.array(target)])


def test_squeeze_unsqueeze_flatten_symbolic() -> None:
    s = TensorType(F, ("b", 1, "s"))
    assert infer("Squeeze", s, None, consts=[None, np.array([1])]) == ("b", "s")
    assert infer("Squeeze", s) is None  # a symbolic dim might be 1
    # empty axes squeeze every 1, as ORT does (onnx shape inference keeps them)
    assert infer("Squeeze", t(1, 3, 1), consts=[None, np.array([], np.int64)]) == (3,)
    assert infer("Squeeze", TensorType(F, None), None, consts=[None, np.array([0])]) is None
    assert infer("Squeeze", s, TensorType(7, (1,))) == (None, None)
    with pytest.raises(ShapeError, match="cannot squeeze axis 2 of size 4"):
        infer("Squeeze", TensorType(F, (1, 3, 4)), None, consts=[None, np.array([2])])
    assert infer("Unsqueeze", s, None, consts=[None, np.array([0, -1])]) == (1, "b", 1, "s", 1)
    assert infer("Unsqueeze", TensorType(F, ("b",)), None, attrs={"axes": [1]}, opset=11) == (
        "b",
        1,
    )
    assert infer("Unsqueeze", s, TensorType(7, (2,))) == (None,) * 5
    assert infer("Unsqueeze", TensorType(F, None), None, consts=[None, np.array([0])]) is None
    with pytest.raises(ShapeError, match="repeated axis"):
        infer("Unsqueeze", s, None, consts=[None, np.array([0, 0])])
    assert infer("Flatten", s, attrs={"axis": 1}) == ("b", "s")
    assert infer("Flatten", TensorType(F, ("b", 3, "s")), attrs={"axis": 1}) == ("b", None)
    assert infer("Flatten", TensorType(F, None)) == (None, None)


def test_views_move_no_bytes() -> None:
    for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
        spec = lookup(op)
        assert spec is not None
        t = TensorType(F, (2, 3))
        assert spec.bytes(OpCall(op, [t], [None], {}), [t]) == 0.0
