"""Slice: reference and infer vs ORT (clamping, negative steps, attribute form); symbolic dims."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops.base import TensorType
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_shape, t

RNG = np.random.default_rng(4)
BIG = 2**63 - 1


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ([1], [3], None, None),
        ([0, 1], [BIG, -1], [1, 0], None),
        ([-1], [-BIG], [1], [-1]),
        ([5, -100], [1, 100], [0, 2], [-2, 3]),
        ([10], [20], [-1], [1]),
        ([2, 0], [0, 4], [1, 2], [-1, 2]),
    ],
)
def test_slice_vs_ort(starts, ends, axes, steps) -> None:
    x = RNG.standard_normal((6, 5, 7)).astype(np.float32)
    args = [starts, ends, axes, steps]
    while args[-1] is None:
        args.pop()
    inputs = [x] + [None if a is None else np.array(a, np.int64) for a in args]
    check_op("Slice", inputs, const_inputs=(1, 2, 3, 4))


def test_slice_attribute_form_vs_ort() -> None:
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    check_op("Slice", [x], {"starts": [1, 0], "ends": [4, 3], "axes": [0, 1]}, opset=9)


def test_slice_symbolic_and_unknown() -> None:
    x = t("b", "s", 768)
    c = {"consts": [None, [0], [BIG], [1]]}
    assert infer_shape("Slice", x, **c) == ("b", "s", 768)
    assert infer_shape("Slice", x, consts=[None, [0, 0], [1, 100], [1, 2]]) == ("b", None, 100)
    assert infer_shape("Slice", x, consts=[None, [1], [-1], [-1]]) == ("b", "s", 766)
    i1 = TensorType(7, (1,))
    assert infer_shape("Slice", x, i1, i1, consts=[None, None, None, [1]]) == ("b", None, 768)
    assert infer_shape("Slice", x, i1, i1, i1) == (None, None, None)
    assert infer_shape("Slice", t(None), **c) is None
    # ORT reads an end of INT64_MAX as "to the end" in the step's direction, also for step < 0
    # (onnx shape inference clamps it to d - 1 and infers 0 here).
    assert infer_shape("Slice", t(4, "s"), consts=[None, [-1, -1], [BIG, BIG], None, [-1, -1]]) == (
        4,
        "s",
    )
    with pytest.raises(ShapeError, match="a step is 0"):
        infer_shape("Slice", x, consts=[None, [0], [1], [0], [0]])
    with pytest.raises(ShapeError, match="repeated axis"):
        infer_shape("Slice", x, consts=[None, [0, 0], [1, 1], [0, 0]])
