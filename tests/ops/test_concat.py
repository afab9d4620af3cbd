"""Concat and Split: reference and infer vs ORT; symbolic and unknown dims."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_shape, infer_types, t

RNG = np.random.default_rng(2)


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("shapes", "axis"),
    [([(2, 3), (2, 5)], 1), ([(1, 3), (4, 3), (2, 3)], 0), ([(2, 3, 4), (2, 3, 1)], -1)],
)
def test_concat_vs_ort(shapes, axis) -> None:
    check_op("Concat", [x(*s) for s in shapes], {"axis": axis})


@pytest.mark.parametrize(
    ("shape", "attrs", "split", "n", "opset"),
    [
        ((6, 4), {"axis": 0}, [1, 2, 3], 3, 13),
        ((6, 4), {"axis": -1}, None, 2, 13),
        ((6, 4), {"axis": 1, "split": [3, 1]}, None, 2, 11),
        ((7, 4), {"axis": 0, "num_outputs": 3}, None, 3, 18),
        ((6, 4), {"axis": 0, "num_outputs": 3}, None, 3, 18),
    ],
)
def test_split_vs_ort(shape, attrs, split, n, opset) -> None:
    inputs = [x(*shape)] + ([] if split is None else [np.array(split, np.int64)])
    check_op("Split", inputs, attrs, n_outputs=n, const_inputs=(1,), opset=opset)


def test_concat_symbolic_and_unknown() -> None:
    a, b = t("b", "s", 64), t("b", 7, 64)
    assert infer_shape("Concat", a, b, attrs={"axis": 2}) == ("b", 7, 128)  # s must be 7
    assert infer_shape("Concat", a, b, attrs={"axis": 1}) == ("b", None, 64)
    assert infer_shape("Concat", t("b", 3), t("b", 5), attrs={"axis": 1}) == ("b", 8)
    assert infer_shape("Concat", t("b", 3), t(None), attrs={"axis": 1}) == ("b", None)
    assert infer_shape("Concat", t(None), t(None), attrs={"axis": 0}) is None
    assert infer_shape("Concat", t(None, 3), t(4, 3), attrs={"axis": 0}) == (None, 3)
    with pytest.raises(ShapeError, match="disagree on dim 1"):
        infer_shape("Concat", t(2, 3), t(2, 4), attrs={"axis": 0})
    with pytest.raises(ShapeError, match="different ranks"):
        infer_shape("Concat", t(2, 3), t(2), attrs={"axis": 0})


def test_split_symbolic_and_invalid() -> None:
    outs = infer_types("Split", t("b", 8), attrs={"axis": 0}, n_outputs=2)
    assert [o.shape for o in outs] == [(None, 8), (None, 8)]
    outs = infer_types("Split", t("b", 8), consts=[None, [3, 5]], attrs={"axis": 1}, n_outputs=2)
    assert [o.shape for o in outs] == [("b", 3), ("b", 5)]
    with pytest.raises(ShapeError, match="does not sum"):
        infer_types("Split", t(4, 8), consts=[None, [3, 4]], attrs={"axis": 1}, n_outputs=2)
    with pytest.raises(ShapeError, match="3 equal pieces"):
        infer_types("Split", t(4, 8), attrs={"axis": 0}, n_outputs=3, opset=13)
