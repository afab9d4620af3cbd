"""Pad: reference and infer vs ORT for each mode, negative pads, axes, the attribute form."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops.base import TensorType
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_shape, t

RNG = np.random.default_rng(6)
I64 = np.int64


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("mode", "pads", "value"),
    [
        ("constant", [1, 0, 2, 3], None),
        ("constant", [1, 2, 0, 1], np.array(1.5, np.float32)),
        ("constant", [-1, 2, 1, -2], np.array(-3.0, np.float32)),
        ("reflect", [2, 1, 1, 3], None),
        ("edge", [0, 3, 2, 1], None),
    ],
)
def test_pad_vs_ort(mode, pads, value) -> None:
    inputs = [x(4, 5), np.array(pads, I64), value]
    check_op("Pad", inputs, {"mode": mode}, const_inputs=(1, 2))


@pytest.mark.parametrize("mode", ["constant", "wrap"])
def test_pad_axes_vs_ort(mode) -> None:
    inputs = [x(2, 3, 4), np.array([1, 2, 0, 1], I64), None, np.array([-1, 0], I64)]
    check_op("Pad", inputs, {"mode": mode}, const_inputs=(1, 3), opset=19)


def test_pad_int_and_attribute_form_vs_ort() -> None:
    a = RNG.integers(-5, 5, size=(3, 4)).astype(np.int32)
    check_op("Pad", [a, np.array([0, 1, 2, 0], I64), np.array(7, np.int32)], const_inputs=(1, 2))
    check_op("Pad", [x(3, 4)], {"pads": [1, 0, 0, 2], "value": 2.0}, opset=10)


def test_pad_symbolic_and_unknown() -> None:
    assert infer_shape("Pad", t("b", "s", 4), consts=[None, [0, 0, 1, 0, 0, 1]]) == ("b", "s", 6)
    assert infer_shape("Pad", t("b", "s", 4), consts=[None, [0, 1, 0, 0, 0, 0]]) == ("b", None, 4)
    assert infer_shape("Pad", t("b", 4), TensorType(7, (4,))) == (None, None)
    axes = [None, None, None, [1]]
    assert infer_shape("Pad", t("b", 4), TensorType(7, (2,)), consts=axes, opset=18) == ("b", None)
    assert infer_shape("Pad", t(None), consts=[None, [1, 1]]) is None
    with pytest.raises(ShapeError, match="pads has 2 values for 2 axes"):
        infer_shape("Pad", t(3, 4), consts=[None, [1, 1]])
    with pytest.raises(ShapeError, match="crop more than"):
        infer_shape("Pad", t(3, 4), consts=[None, [-2, 0, -2, 0]])
