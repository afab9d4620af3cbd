"""The typed forms of Tan, Asin, Acos, Atan, Sinh, Cosh, Mean, Mod and CastLike: each one-op
model encodes with no opaque node and `rewrite optimize` (no rules) writes a model whose ORT
outputs are bit-identical to the input's; the references match ORT on special values, and
Mod's and Mean's Z3 semantics, evaluated in IEEE / bit-vector numerals, equal ORT's outputs
bit for bit (signs of remainders, INT_MIN mod -1, fmod's ±0 and NaN, Mean's float32 path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto as P

from rewrite.ops import OpCall, TensorType, _z3, lookup
from rewrite.verify.semantics import number
from tests.ops.roundtrip import assert_optimizes_identically
from tests.ops.test_typed_activation import (
    Input,
    _id,
    _model,
    _ort,
    _values,
    assert_matches_ort,
)

F, F16, F64, I64, I32, I8, U8, B = (
    P.FLOAT,
    P.FLOAT16,
    P.DOUBLE,
    P.INT64,
    P.INT32,
    P.INT8,
    P.UINT8,
    P.BOOL,
)
X = (4, 3, 2, 5)
TRIG = ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh")
Case = tuple[str, list[Input], dict[str, Any]]
CASES: list[Case] = [(op, [(dt, X)], {}) for op in TRIG for dt in (F, F16)]  # no double kernel
CASES += [
    (op, [(dt, s) for s in shapes], {})
    for op, shapes in (("Mean", [X]), ("Mean", [X, (5,)]), ("Mean", [X, (3, 1, 1), X]))
    for dt in (F, F16)
]
CASES += [("Mod", [(dt, X), (dt, (2, 5))], {"fmod": 1}) for dt in (F, F16, F64)]
CASES += [
    ("Mod", [(dt, X), (dt, (5,))], {"fmod": fmod}) for dt in (I64, I32, I8, U8) for fmod in (0, 1)
]
CASES += [
    ("CastLike", [(a, X), (b, (1,))], {})
    for a, b in ((F, I64), (F, F16), (I64, F), (F16, F), (F, B), (I32, F64), (F64, I8))
]


def _feeds(inputs: list[Input], seed: int) -> dict[str, np.ndarray]:
    """Special and random values; a divisor of 0 (which ORT refuses for integers) is 3."""
    rng = np.random.default_rng(seed)
    feeds = {f"x{i}": _values(t[0], t[1], rng) for i, t in enumerate(inputs)}
    if len(inputs) == 2 and feeds["x1"].dtype.kind in "iu":
        feeds["x1"] = np.where(feeds["x1"] == 0, 3, feeds["x1"]).astype(feeds["x1"].dtype)
    return feeds


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_one_op_model_is_typed_and_optimizes_identically(case: Case, tmp_path: Path) -> None:
    op, inputs, attrs = case
    assert_optimizes_identically(_model(op, inputs, attrs), _feeds(inputs, 0), tmp_path)


def _reference(op: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    spec = lookup(op)
    assert spec is not None and spec.reference is not None
    types = [TensorType(onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for a in arrays]
    return spec.reference(OpCall(op, types, [None] * len(arrays), attrs), list(arrays))[0]


@pytest.mark.parametrize("case", [c for c in CASES if c[1][0][0] != F16], ids=_id)
def test_reference_matches_ort(case: Case) -> None:
    """Bit for bit, except the transcendental functions: NaN and ±inf alike, elsewhere within
    4 ulps of max(1, |y|) (numpy's libm and ORT's kernels round differently)."""
    op, inputs, attrs = case
    feeds = _feeds(inputs, 1)
    (want,) = _ort(_model(op, inputs, attrs), feeds)
    assert_matches_ort(_reference(op, list(feeds.values()), attrs), want, op not in TRIG)


def _z3_numerals(op: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """The op's Z3 semantics at `arrays`, in IEEE / bit-vector numerals, as numbers."""
    spec = lookup(op)
    assert spec is not None and spec.z3 is not None
    dts = [onnx.helper.np_dtype_to_tensor_dtype(a.dtype) for a in arrays]
    types = [TensorType(d, a.shape) for d, a in zip(dts, arrays, strict=True)]
    with _z3.arithmetic(_z3.IEEE):
        terms = [
            np.vectorize(lambda v, d=d: _z3.symbol("c", d, v), otypes=[object])(a)
            for d, a in zip(dts, arrays, strict=True)
        ]
        out = spec.z3(OpCall(op, types, [None] * len(arrays), attrs), terms)[0]
    out_dt = spec.infer(OpCall(op, types, [None] * len(arrays), attrs))[0].dtype
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(out_dt)
    values = [number(z3.simplify(t), out_dt) for t in np.asarray(out).reshape(-1)]
    return np.asarray(values).astype(np_dt).reshape(np.shape(out))


def _assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """NaN at the same places (any payload), every other element bit for bit (±0 too)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{got} != {want}"
    assert got[~nan].tobytes() == want[~nan].tobytes(), f"{got} != {want}"


EDGE = [np.nan, np.inf, -np.inf, 0.0, -0.0, 5.5, -5.5, 1e30, 1e-40, 3.0, -3.0, 6.0, -6.0, 7.25]
INT_EDGE = [(-(2**31), -1), (7, 3), (-7, 3), (7, -3), (-7, -3), (0, 5), (2**31 - 1, -2), (6, -3)]


@pytest.mark.parametrize("dtype", [F, F16, F64])
def test_float_fmod_z3_is_orts_bit_for_bit(dtype: int) -> None:
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    a, b = np.meshgrid(np.array(EDGE), np.array(EDGE))
    with np.errstate(all="ignore"):
        a, b = a.reshape(-1).astype(np_dt), b.reshape(-1).astype(np_dt)
    inputs: list[Input] = [(dtype, a.shape), (dtype, b.shape)]
    (want,) = _ort(_model("Mod", inputs, {"fmod": 1}), {"x0": a, "x1": b})
    _assert_same_bits(_z3_numerals("Mod", [a, b], {"fmod": 1}), want)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [I32, U8])
def test_integer_mod_z3_is_orts(dtype: int, fmod: int) -> None:
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    pairs = np.array(INT_EDGE, dtype=np.int64)
    a, b = pairs[:, 0].astype(np_dt), pairs[:, 1].astype(np_dt)  # uint8: wrapped
    b = np.where(b == 0, 1, b).astype(np_dt)
    inputs: list[Input] = [(dtype, a.shape), (dtype, b.shape)]
    (want,) = _ort(_model("Mod", inputs, {"fmod": fmod}), {"x0": a, "x1": b})
    np.testing.assert_array_equal(_z3_numerals("Mod", [a, b], {"fmod": fmod}), want)


@pytest.mark.parametrize("dtype", [F, F16])
def test_mean_z3_is_orts_bit_for_bit(dtype: int) -> None:
    """ORT sums and scales float16 in float32: 60000 + 60000 - 60000 does not overflow."""
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    rng = np.random.default_rng(2)
    xs = [np.concatenate([[60000.0, np.nan, 1.0], rng.normal(0, 3, 9)]) for _ in range(3)]
    xs[2][0] = -60000.0
    arrays = [x.astype(np_dt) for x in xs]
    inputs: list[Input] = [(dtype, a.shape) for a in arrays]
    (want,) = _ort(_model("Mean", inputs, {}), {f"x{i}": a for i, a in enumerate(arrays)})
    _assert_same_bits(_z3_numerals("Mean", arrays, {}), want)
    assert want[0] == 20000
