"""Parametric activations and Clip: reference and infer vs ORT and onnx."""

from __future__ import annotations

import numpy as np
import pytest

import rewrite.ops.activation  # noqa: F401  (registers the activations)
from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op

RNG = np.random.default_rng(7)


def f32(*shape: int) -> np.ndarray:
    return (3 * RNG.standard_normal(shape)).astype(np.float32)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("Softplus", {}),
        ("Softsign", {}),
        ("LeakyRelu", {}),
        ("LeakyRelu", {"alpha": 0.2}),
        ("Elu", {"alpha": 0.7}),
        ("Celu", {"alpha": 1.5}),
        ("Selu", {}),
        ("ThresholdedRelu", {"alpha": 0.5}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("HardSwish", {}),
        ("Mish", {}),
    ],
)
def test_activation(op: str, attrs: dict) -> None:
    check_op(op, [f32(3, 4, 5)], attrs, opset=18, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
def test_gelu_opset20(approximate: str | None) -> None:
    attrs = {} if approximate is None else {"approximate": approximate}
    check_op("Gelu", [f32(4, 64)], attrs, opset=20, rtol=2e-6, atol=2e-6)


def test_prelu() -> None:
    check_op("PRelu", [f32(2, 3, 4), f32(3, 1)])
    check_op("PRelu", [f32(2, 3, 4), f32(1)])
    spec = lookup("PRelu")
    assert spec is not None
    t = TensorType(1, (2, 3, 4))
    with pytest.raises(ShapeError, match="slope does not broadcast"):
        spec.infer(OpCall("PRelu", [t, TensorType(1, (5,))], [None, None], {}))


def test_clip_bounds_as_inputs_and_attributes() -> None:
    x = f32(3, 4)
    lo, hi = np.array(-1.0, np.float32), np.array(2.0, np.float32)
    check_op("Clip", [x, lo, hi])
    check_op("Clip", [x, lo, hi], const_inputs=(1, 2))
    check_op("Clip", [x, None, hi])
    check_op("Clip", [x, lo])
    check_op("Clip", [x])
    check_op("Clip", [x, hi, lo])  # min > max: every element is max
    check_op("Clip", [RNG.integers(-9, 9, (3, 4)).astype(np.int32), np.array(-2, np.int32)])
    check_op("Clip", [x], {"min": -0.5, "max": 0.5}, opset=6)


def test_infer_symbolic() -> None:
    for op in ["Gelu", "Clip", "HardSwish"]:
        spec = lookup(op)
        assert spec is not None
        t = TensorType(1, ("batch", "seq", 3072))
        assert spec.infer(OpCall(op, [t], [None], {})) == [t]
        assert spec.egg is not None  # Gelu (opset 20) too
