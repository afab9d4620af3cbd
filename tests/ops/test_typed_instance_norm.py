"""The typed form of InstanceNormalization (ORT's float32 kernel's order).

One-op models encode with no opaque node and `optimize` without rules writes models whose
ORT outputs are bit-identical. The numpy reference and the Z3 semantics (float32), evaluated
on numbers, give ORT's values bit for bit on random and special inputs: rows at offsets that
are not multiples of 4 (Eigen's aligned head for the mean, none for the squared norm).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, run_ort, same, z3_numbers

CASES: list[tuple[tuple[int, ...], float]] = [
    ((2, 3, 5), 1e-5),
    ((1, 4, 3, 3), 1e-3),
    ((2, 3, 6), 1e-5),
    ((1, 2, 33), 1e-2),
    ((1, 3, 16), 1e-5),
    ((2, 2, 1, 7), 1e-5),
]


def _feeds(shape: tuple[int, ...], seed: int, special: bool = False) -> dict[str, np.ndarray]:
    c = shape[1]
    x = data(shape, np.float32, seed, special)
    return {"x": x, "s": data((c,), np.float32, seed + 9), "b": data((c,), np.float32, seed + 19)}


@pytest.mark.parametrize("case", CASES[:3], ids=str)
def test_optimizes_to_identical_outputs(case: tuple, tmp_path: Path) -> None:
    shape, eps = case
    feeds = _feeds(shape, 0)
    m = model("InstanceNormalization", feeds, {}, 3, epsilon=eps)
    assert_optimizes_identically(m, feeds, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_semantics_give_orts_values(case: tuple) -> None:
    shape, eps = case
    spec = lookup("InstanceNormalization")
    assert spec is not None and spec.reference is not None
    for seed in range(4):
        feeds = _feeds(shape, seed, special=seed >= 2)
        want = run_ort(model("InstanceNormalization", feeds, {}, 3, epsilon=eps), feeds)
        arrays = list(feeds.values())
        call = call_of("InstanceNormalization", arrays, {}, {"epsilon": eps})
        assert spec.infer(call)[0].shape == want.shape
        assert same(want, spec.reference(call, arrays)[0])
        assert same(want, z3_numbers("InstanceNormalization", arrays, {}, {"epsilon": eps}))


def test_float16_reference_is_close_to_ort() -> None:
    """float16 is outside the Z3 semantics; the reference (float64, rounded once) is close."""
    feeds = {k: v.astype(np.float16) for k, v in _feeds((1, 3, 7), 1).items()}
    want = run_ort(model("InstanceNormalization", feeds, {}, 3), feeds)
    spec = lookup("InstanceNormalization")
    assert spec is not None and spec.reference is not None
    got = spec.reference(
        call_of("InstanceNormalization", list(feeds.values()), {}, {}), list(feeds.values())
    )[0]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=1e-2)


@pytest.mark.parametrize(
    "shapes",
    [((2, 3), (3,), (3,)), ((1, 3, 4), (2,), (3,)), ((1, 3, 4), (3, 1), (3,))],
)
def test_forms_outside_the_op_are_refused(shapes: tuple) -> None:
    spec = lookup("InstanceNormalization")
    assert spec is not None
    arrays = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(ShapeError, match="InstanceNormalization"):
        spec.infer(call_of("InstanceNormalization", arrays, {}, {}))
