"""Transpose: reference and infer vs ORT; symbolic dims permute; a bad perm is refused."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from tests.ops.harness import check_op
from tests.ops.infer_helper import infer_shape, t

RNG = np.random.default_rng(1)


@pytest.mark.parametrize(
    ("shape", "perm"),
    [
        ((2, 3, 4), [2, 0, 1]),
        ((2, 3, 4, 5), [0, 2, 1, 3]),
        ((2, 3, 4), None),
        ((5,), [0]),
        ((), None),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_transpose_vs_ort(shape, perm, dtype) -> None:
    x = np.asarray(RNG.standard_normal(shape) * 10).astype(dtype)
    check_op("Transpose", [x], {} if perm is None else {"perm": perm})


def test_transpose_symbolic_and_unknown() -> None:
    assert infer_shape("Transpose", t("b", "s", 768), attrs={"perm": [1, 0, 2]}) == (
        "s",
        "b",
        768,
    )
    assert infer_shape("Transpose", t("b", None, 4)) == (4, None, "b")
    assert infer_shape("Transpose", t(None), attrs={"perm": [1, 0]}) == (None, None)
    assert infer_shape("Transpose", t(None)) is None


@pytest.mark.parametrize("perm", [[0, 1], [0, 1, 1], [0, 1, 3]])
def test_transpose_bad_perm(perm) -> None:
    with pytest.raises(ShapeError, match="is not a permutation of 3 axes"):
        infer_shape("Transpose", t(2, 3, 4), attrs={"perm": perm})
