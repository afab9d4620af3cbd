"""Shape, Size, ConstantOfShape, Range, Expand, Tile, NonZero: reference and infer vs ORT."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rewrite.errors import ShapeError
from rewrite.ops.base import TensorType
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_shape, infer_types, t

RNG = np.random.default_rng(5)
I64 = np.int64


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("attrs", "opset"),
    [({}, 13), ({"start": 1}, 15), ({"start": -2, "end": 10}, 15), ({"start": 3, "end": 1}, 15)],
)
def test_shape_vs_ort(attrs, opset) -> None:
    check_op("Shape", [x(2, 3, 4)], attrs, opset=opset)


def test_size_vs_ort() -> None:
    check_op("Size", [x(2, 3, 4)])


@pytest.mark.parametrize(
    "value", [None, np.array([7], np.int64), np.array([2.5], np.float32), np.array([1], bool)]
)
def test_constant_of_shape_vs_ort(value) -> None:
    attrs = {} if value is None else {"value": onnx.numpy_helper.from_array(value)}
    check_op("ConstantOfShape", [np.array([2, 3], I64)], attrs, const_inputs=(0,))


@pytest.mark.parametrize(
    ("start", "limit", "delta"),
    [
        (np.int64(1), np.int64(10), np.int64(3)),
        (np.int32(10), np.int32(-3), np.int32(-4)),
        (np.float32(0.1), np.float32(3.3), np.float32(0.3)),
        (np.float32(1.0), np.float32(0.0), np.float32(0.5)),
    ],
)
def test_range_vs_ort(start, limit, delta) -> None:
    inputs = [np.array(v) for v in (start, limit, delta)]
    check_op("Range", inputs, const_inputs=(0, 1, 2))


@pytest.mark.parametrize(
    ("shape", "target"), [((3, 1), [2, 3, 4]), ((1, 4), [3, 1]), ((2, 3), [1]), ((3,), [2, 3])]
)
def test_expand_vs_ort(shape, target) -> None:
    check_op("Expand", [x(*shape), np.array(target, I64)], const_inputs=(1,))


@pytest.mark.parametrize(("shape", "reps"), [((2, 3), [2, 1]), ((2, 1, 3), [1, 3, 2])])
def test_tile_vs_ort(shape, reps) -> None:
    check_op("Tile", [x(*shape), np.array(reps, I64)], const_inputs=(1,))


def test_nonzero_vs_ort() -> None:
    a = RNG.integers(0, 3, size=(4, 5)).astype(np.float32)
    check_op("NonZero", [a], const_inputs=(0,))
    check_op("NonZero", [np.array(2.0, np.float32)], const_inputs=(0,))  # ORT: (1, nnz)
    [(dtype, shape)] = [(o.dtype, o.shape) for o in infer_types("NonZero", t(4, "s"))]
    assert (dtype, shape) == (onnx.TensorProto.INT64, (2, None))


def test_shape_ops_symbolic_and_unknown() -> None:
    assert infer_shape("Shape", t("b", "s", 768)) == (3,)
    assert infer_shape("Shape", t("b", "s", 768), attrs={"start": -1}, opset=15) == (1,)
    assert infer_shape("Shape", t(None)) == (None,)
    assert infer_shape("Size", t(None)) == ()
    assert infer_shape("ConstantOfShape", TensorType(7, (3,))) == (None, None, None)
    assert infer_shape("ConstantOfShape", TensorType(7, (None,))) is None
    assert infer_shape("Range", TensorType(7, ()), TensorType(7, ()), TensorType(7, ())) == (None,)
    assert infer_shape("Expand", t("b", 1, 64), consts=[None, [1, 8, 1]]) == ("b", 8, 64)
    assert infer_shape("Expand", t(3, 1), TensorType(7, (3,))) == (None, 3, None)
    assert infer_shape("Expand", t(None), TensorType(7, (3,))) is None
    assert infer_shape("Tile", t("b", 4), consts=[None, [1, 2]]) == ("b", 8)
    assert infer_shape("Tile", t("b", 4), consts=[None, [2, 1]]) == (None, 4)
    assert infer_shape("Tile", t("b", 4), TensorType(7, (2,))) == (None, None)


def test_shape_ops_invalid() -> None:
    with pytest.raises(ShapeError, match="cannot expand"):
        infer_shape("Expand", t(3, 2), consts=[None, [4, 3]])
    with pytest.raises(ShapeError, match="delta is 0"):
        infer_shape("Range", consts=[I64(0), I64(3), I64(0)])
    with pytest.raises(ShapeError, match="do not fit rank"):
        infer_shape("Tile", t(3, 2), consts=[None, [2]])
