"""Unary math ops, Cast/CastLike and Dropout: reference and infer vs ORT and onnx."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewrite.ops import OpCall, TensorType, lookup
from rewrite.ops.unary import erf
from tests.ops.harness import check_op

RNG = np.random.default_rng(99)
F, F16, I64, BOOL = 1, 10, 7, 9


def f32(*shape: int, scale: float = 2.0) -> np.ndarray:
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


POSITIVE = {"Log", "Sqrt", "Reciprocal"}
UNIT = {"Asin", "Acos"}


@pytest.mark.parametrize(
    "op",
    [
        "Identity", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt",
        "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos",
        "Atan", "Sinh", "Cosh",
    ],
)  # fmt: skip
def test_math_float32(op: str) -> None:
    x = f32(3, 5, 7)
    if op in POSITIVE:
        x = np.abs(x) + 0.1
    if op in UNIT:
        x = np.tanh(x)
    if op == "Round":
        x[0, 0, :4] = [0.5, 1.5, 2.5, -0.5]  # half to even
    check_op(op, [x], rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["Neg", "Abs", "Relu", "Sign", "Identity"])
def test_math_int(op: str) -> None:
    check_op(op, [RNG.integers(-9, 9, size=(4, 5)).astype(np.int32)])


def test_erf_matches_math_erf_to_float32_precision() -> None:
    x = np.concatenate([np.linspace(-6, 6, 20001), [0.0, 1e-8, -1e-30, 0.4999, 0.5, 0.5001]])
    want = np.array([math.erf(v) for v in x])
    got = erf(x.astype(np.float32)).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-30)
    np.testing.assert_array_equal(erf(x), want)  # float64: exact


def test_is_nan_is_inf_not() -> None:
    x = np.array([[1.0, np.nan, np.inf], [-np.inf, 0.0, -2.0]], np.float32)
    check_op("IsNaN", [x])
    for pos, neg in [(1, 1), (1, 0), (0, 1)]:
        check_op("IsInf", [x], {"detect_positive": pos, "detect_negative": neg})
    check_op("Not", [RNG.random((2, 3)) < 0.5])


@pytest.mark.parametrize(
    ("src", "to"),
    [(np.float32, 10), (np.float32, 7), (np.float32, 9), (np.int64, 1), (np.bool_, 1),
     (np.float16, 11), (np.int32, 3)],
)  # fmt: skip
def test_cast(src: type, to: int) -> None:
    x = (RNG.standard_normal((3, 4)) * 50).astype(src)
    check_op("Cast", [x], {"to": to})


def test_castlike() -> None:
    check_op("CastLike", [f32(2, 3), np.zeros(1, np.float16)], opset=15)


@pytest.mark.parametrize("opset", [13, 21])
def test_dropout_inference(opset: int) -> None:
    x = f32(2, 3, 4)
    check_op("Dropout", [x], opset=opset)
    check_op("Dropout", [x], n_outputs=2, opset=opset)
    ratio, training = np.array(0.3, np.float32), np.array(False)
    check_op("Dropout", [x, ratio, training], n_outputs=2, const_inputs=(1, 2), opset=opset)


def test_dropout_training_has_no_reference() -> None:
    spec = lookup("Dropout")
    assert spec is not None and spec.reference is not None
    x = f32(2, 2)
    c = OpCall("Dropout", [TensorType(F, (2, 2))] * 3, [None] * 3, {})
    with pytest.raises(ValueError, match="training_mode"):
        spec.reference(c, [x, np.array(0.5, np.float32), np.array(True)])


def test_infer_keeps_symbolic_dims() -> None:
    def infer(op: str, t: TensorType, **attrs: object) -> list[TensorType]:
        spec = lookup(op)
        assert spec is not None
        return spec.infer(OpCall(op, [t], [None], attrs, n_outputs=2 if op == "Dropout" else 1))

    t = TensorType(F, ("batch", None, 768))
    assert infer("Gelu" if lookup("Gelu") else "Tanh", t) == [t]
    assert infer("Sigmoid", TensorType(F, None)) == [TensorType(F, None)]
    assert infer("IsNaN", t) == [TensorType(BOOL, t.shape)]
    assert infer("Cast", t, to=F16) == [TensorType(F16, t.shape)]
    assert infer("Dropout", t) == [t, TensorType(BOOL, t.shape)]


def test_egg_signatures() -> None:
    for op in ["Identity", "Neg", "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Dropout"]:
        spec = lookup(op)
        assert spec is not None and spec.egg is not None and spec.egg.n_inputs == 1, op
    cast = lookup("Cast")
    assert cast is not None and cast.egg is not None
    assert cast.egg.attrs == (("to", "i64", None),)
    castlike = lookup("CastLike")
    assert castlike is not None and castlike.egg is not None and castlike.egg.n_inputs == 2
    for op in ["Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh"]:
        spec = lookup(op)
        assert spec is not None and spec.egg is not None and spec.egg.n_inputs == 1, op
