"""The typed form of LogSoftmax: one-op models encode with no opaque node and `optimize`
without rules writes models whose ORT outputs are bit-identical; the reference gives ORT's
values to float32 accuracy; the Z3 semantics (self-test) are checked in
tests/verify/test_selftest.py and tests/verify/test_semantics.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, run_ort

CASES = [((2, 5), -1), ((1, 4, 3, 8), -1), ((3, 4, 2), 1), ((6,), 0)]


@pytest.mark.parametrize(("shape", "axis"), CASES)
def test_log_softmax_optimizes_to_identical_outputs(
    shape: tuple[int, ...], axis: int, tmp_path: Path
) -> None:
    x = data(shape, np.float32, 0)
    assert_optimizes_identically(
        model("LogSoftmax", {"x": x}, {}, 1, axis=axis), {"x": x}, tmp_path
    )


@pytest.mark.parametrize(("shape", "axis"), CASES)
def test_log_softmax_reference_gives_orts_values(shape: tuple[int, ...], axis: int) -> None:
    spec = lookup("LogSoftmax")
    assert spec is not None and spec.reference is not None and spec.egg is not None
    for seed in range(3):
        x = data(shape, np.float32, seed) * np.float32(4 * seed + 1)
        want = run_ort(model("LogSoftmax", {"x": x}, {}, 1, axis=axis), {"x": x})
        got = spec.reference(call_of("LogSoftmax", [x], {}, {"axis": axis}), [x])[0]
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
