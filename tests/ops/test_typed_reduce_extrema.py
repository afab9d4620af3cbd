"""The typed forms of ReduceMax and ReduceMin (`rewrite/ops/_reduce_extrema.py`).

One-op models (opset 17 axes attribute, opset 18 axes input) encode with no opaque node and
`optimize` without rules writes models whose ORT outputs are bit-identical. The reference and
the Z3 semantics, evaluated on numbers, give ORT's values bit for bit on every axes subset of
ranks 0-4 with NaN, ±inf and ±0 (which NaN or signed zero survives is the kernel's order),
in float32 (Z3 and reference), float16, int32 and int64 (reference).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
import pytest

from rewrite.ops.registry import lookup
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.typed_consts import call_of, data, model, run_ort, same, z3_numbers

SHAPES = [(), (7,), (2, 9), (3, 4, 5), (2, 3, 4, 2), (2, 5, 3), (20, 300)]
OPS = ["ReduceMax", "ReduceMin"]


def _axes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    r = len(shape)
    return [a for k in range(r + 1) for a in itertools.combinations(range(r), k)]


def _model(op: str, x: np.ndarray, axes: tuple[int, ...], keepdims: int = 1) -> onnx.ModelProto:
    attrs = {"axes": list(axes)} if axes else {}
    return model(op, {"x": x}, {}, 1, keepdims=keepdims, **attrs)


@pytest.mark.parametrize("op", OPS)
def test_optimizes_to_identical_outputs(op: str, tmp_path: Path) -> None:
    x = data((2, 3, 4), np.float32, 0)
    for n, (axes, keep) in enumerate([((1,), 1), ((0, 2), 0), ((), 1)]):
        (tmp_path / str(n)).mkdir()
        assert_optimizes_identically(_model(op, x, axes, keep), {"x": x}, tmp_path / str(n))
    # opset 18: the axes as a constant input
    m = model(op, {"x": x}, {1: np.array([-1], np.int64)}, 2, keepdims=0)
    m.opset_import[0].version = 18
    (tmp_path / "18").mkdir()
    assert_optimizes_identically(m, {"x": x}, tmp_path / "18")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_float32_semantics_give_orts_values(op: str, shape: tuple[int, ...]) -> None:
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    big = shape == (20, 300)
    for axes in _axes(shape):
        for seed in range(1 if big else 4):
            x = data(shape, np.float32, seed, special=seed >= 1 or big)
            want = run_ort(_model(op, x, axes), {"x": x})
            attrs = {"axes": list(axes)} if axes else {}
            call = call_of(op, [x], {}, attrs)
            assert same(want, spec.reference(call, [x])[0]), (axes, x)
            if not big:
                assert same(want, z3_numbers(op, [x], {}, attrs)), (axes, x)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64])
def test_other_dtypes_reference_gives_orts_values(dtype: type) -> None:
    for op, shape in itertools.product(OPS, SHAPES[:6]):
        spec = lookup(op)
        assert spec is not None and spec.reference is not None
        for axes in _axes(shape):
            x = data(shape, dtype, 1, special=True)
            want = run_ort(_model(op, x, axes), {"x": x})
            attrs = {"axes": list(axes)} if axes else {}
            assert same(want, spec.reference(call_of(op, [x], {}, attrs), [x])[0]), (axes, x)


def test_a_nan_survives_only_as_the_left_operand() -> None:
    """The generic loop keeps a NaN at element 0 and drops a later one; numpy propagates."""
    x = np.array([[np.nan, 1.0, 2.0], [1.0, np.nan, 2.0]], np.float32)
    for axes in [(1,), (0,)]:
        want = run_ort(_model("ReduceMax", x, axes), {"x": x})
        assert same(want, z3_numbers("ReduceMax", [x], {}, {"axes": list(axes)}))
    row = run_ort(_model("ReduceMax", x, (1,)), {"x": x}).reshape(-1)
    assert np.isnan(row[0]) and row[1] == 2.0
