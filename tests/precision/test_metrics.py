"""`precision.metrics`: the three error metrics and their reduction over sets."""

from __future__ import annotations

import numpy as np

from rewrite.precision.metrics import cosine, errors, maxrel, top1


def test_maxrel_is_the_largest_difference_over_the_largest_reference() -> None:
    assert maxrel(np.array([1.0, -4.0]), np.array([1.5, -4.0])) == 0.125
    assert maxrel(np.zeros(3), np.zeros(3)) == 0.0
    assert maxrel(np.zeros(3), np.ones(3)) == float("inf")
    assert maxrel(np.ones(2), np.array([1.0, np.nan])) == float("inf")


def test_cosine_and_top1() -> None:
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    assert cosine(a, a) < 1e-12 and abs(cosine(a, -a) - 2.0) < 1e-12
    assert top1(a, a) == 0.0
    assert top1(a, np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])) == 0.5


def test_errors_take_the_worst_set_and_demand_equal_integer_outputs() -> None:
    refs = [{"y": np.array([2.0]), "i": np.array([1])}, {"y": np.array([4.0]), "i": np.array([2])}]
    outs = [{"y": np.array([2.2]), "i": np.array([1])}, {"y": np.array([4.0]), "i": np.array([3])}]
    got = errors("maxrel", refs, outs)
    assert abs(got["y"] - 0.1) < 1e-12 and got["i"] == float("inf")
