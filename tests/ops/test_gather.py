"""Gather, GatherND, GatherElements: reference and infer vs ORT; symbolic and unknown dims."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.ops.base import TensorType
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_shape, t

RNG = np.random.default_rng(3)


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def idx(high: int, shape: tuple[int, ...], dtype: type = np.int64) -> np.ndarray:
    """Indices in [-high, high): negative ones count from the end."""
    return RNG.integers(-high, high, size=shape).astype(dtype)


@pytest.mark.parametrize(
    ("shape", "axis", "ishape", "dtype"),
    [
        ((5, 4), 0, (3,), np.int64),
        ((5, 4), 1, (2, 3), np.int32),
        ((2, 5, 4), -2, (), np.int64),
        ((10, 8), 0, (2, 3), np.int64),
    ],
)
def test_gather_vs_ort(shape, axis, ishape, dtype) -> None:
    check_op("Gather", [x(*shape), idx(shape[axis], ishape, dtype)], {"axis": axis})


@pytest.mark.parametrize(
    ("shape", "ishape", "batch_dims"),
    [((4, 5, 6), (3, 2), 0), ((4, 5, 6), (2, 3, 3), 0), ((2, 5, 6), (2, 3, 1), 1)],
)
def test_gather_nd_vs_ort(shape, ishape, batch_dims) -> None:
    k = ishape[-1]
    cols = [idx(shape[batch_dims + j], (*ishape[:-1], 1)) for j in range(k)]
    check_op("GatherND", [x(*shape), np.concatenate(cols, -1)], {"batch_dims": batch_dims})


@pytest.mark.parametrize(("shape", "axis", "ishape"), [((4, 5), 0, (3, 5)), ((4, 5), -1, (4, 2))])
def test_gather_elements_vs_ort(shape, axis, ishape) -> None:
    check_op("GatherElements", [x(*shape), idx(shape[axis], ishape)], {"axis": axis})


def test_gather_symbolic_and_unknown() -> None:
    emb, ids = t(30522, 768), TensorType(7, ("b", "s"))
    assert infer_shape("Gather", emb, ids) == ("b", "s", 768)
    assert infer_shape("Gather", t("b", "s", 768), TensorType(7, ()), attrs={"axis": 1}) == (
        "b",
        768,
    )
    assert infer_shape("Gather", t(None), ids) is None
    assert infer_shape("Gather", emb, TensorType(7, None)) is None
    nd = TensorType(7, ("n", 2))
    assert infer_shape("GatherND", t("b", 5, 6), nd) == ("n", 6)
    assert infer_shape("GatherND", t("b", 5, 6), TensorType(7, ("n", None))) is None
    assert infer_shape("GatherElements", t("b", 5), TensorType(7, ("b", 2))) == ("b", 2)
    assert infer_shape("GatherElements", t(None), TensorType(7, None)) is None
