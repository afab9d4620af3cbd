"""Constant: each value attribute, reference and infer vs ORT."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rewrite.errors import ShapeError
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_types

RNG = np.random.default_rng(7)


@pytest.mark.parametrize(
    "attrs",
    [
        {"value": onnx.numpy_helper.from_array(RNG.standard_normal((2, 3)).astype(np.float32))},
        {"value": onnx.numpy_helper.from_array(np.array(5, np.int32))},
        {"value_float": 2.5},
        {"value_floats": [1.0, -2.0]},
        {"value_int": 7},
        {"value_ints": [1, 2, 3]},
    ],
    ids=lambda a: next(iter(a)),
)
def test_constant_vs_ort(attrs) -> None:
    check_op("Constant", [], attrs)


def test_constant_strings_and_invalid() -> None:
    [out] = infer_types("Constant", attrs={"value_strings": ["a", "b"]})
    assert (out.dtype, out.shape) == (onnx.TensorProto.STRING, (2,))
    with pytest.raises(ShapeError, match="needs exactly one of"):
        infer_types("Constant", attrs={"value_int": 1, "value_float": 1.0})
