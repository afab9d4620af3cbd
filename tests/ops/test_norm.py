"""Normalizations and Softmax family: reference and infer vs ORT and onnx."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op

RNG = np.random.default_rng(17)
F, F16 = 1, 10


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("x", "axis", "bias", "n_outputs"),
    [
        ((2, 5, 16), -1, True, 1),
        ((2, 5, 16), -1, False, 3),
        ((3, 4, 6), 1, True, 3),
        ((8, 3), 0, True, 2),
    ],
)
def test_layer_norm(x: tuple, axis: int, bias: bool, n_outputs: int) -> None:
    norm_shape = x[axis:]
    inputs = [f32(*x), f32(*norm_shape)] + ([f32(*norm_shape)] if bias else [])
    check_op(
        "LayerNormalization", inputs, {"axis": axis, "epsilon": 1e-3}, n_outputs=n_outputs,
        atol=1e-5, rtol=1e-5,
    )  # fmt: skip


@pytest.mark.parametrize("x", [(2, 3, 4, 5), (4, 3), (2, 3, 7)])
@pytest.mark.parametrize("opset", [9, 15])
def test_batch_norm_inference(x: tuple, opset: int) -> None:
    c = x[1]
    var = np.abs(f32(c)) + 0.5
    check_op(
        "BatchNormalization", [f32(*x), f32(c), f32(c), f32(c), var], {"epsilon": 1e-4},
        const_inputs=(1, 2, 3, 4), opset=opset, atol=1e-5, rtol=1e-5,
    )  # fmt: skip


@pytest.mark.parametrize("x", [(2, 3, 4, 5), (1, 4, 9)])
def test_instance_norm(x: tuple) -> None:
    check_op("InstanceNormalization", [f32(*x), f32(x[1]), f32(x[1])], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize(
    ("opset", "axis"), [(13, None), (13, 1), (13, -3), (11, None), (11, 2), (11, 0)]
)
def test_softmax_family(op: str, opset: int, axis: int | None) -> None:
    """opset >= 13: along one axis; before: over the input coerced to 2-D at axis."""
    attrs = {} if axis is None else {"axis": axis}
    check_op(op, [3 * f32(2, 3, 4, 5)], attrs, opset=opset, atol=1e-6, rtol=1e-5)


def infer(
    op: str, *types: TensorType, n_outputs: int = 1, opset: int = 17, **attrs: object
) -> list[TensorType]:
    spec = lookup(op)
    assert spec is not None
    return spec.infer(OpCall(op, list(types), [None] * len(types), attrs, n_outputs, opset))


def test_infer_symbolic() -> None:
    x = TensorType(F16, ("batch", "seq", 768))
    y, mean, inv = infer("LayerNormalization", x, TensorType(F16, (768,)), n_outputs=3)
    assert y == x and mean == inv == TensorType(F, ("batch", "seq", 1))
    (y, mean) = infer("LayerNormalization", TensorType(F, None), TensorType(F, None), n_outputs=2)
    assert y.shape is None and mean == TensorType(F, None)
    assert infer("Softmax", x, axis=-1) == [x]
    assert infer("BatchNormalization", TensorType(F, ("N", 64, "H", "W"))) == [
        TensorType(F, ("N", 64, "H", "W"))
    ]
    stats = infer(
        "BatchNormalization",
        TensorType(F, ("N", 8, 4)),
        *[TensorType(F, (8,))] * 4,
        n_outputs=3,
        training_mode=1,
    )
    assert stats[1] == stats[2] == TensorType(F, (8,))


@pytest.mark.parametrize(
    ("op", "shape", "attrs", "match"),
    [
        ("Softmax", (2, 3), {"axis": 2}, "axis 2 out of range for rank 2"),
        ("LogSoftmax", (2, 3), {"axis": -3}, "axis -3 out of range"),
        ("LayerNormalization", (2, 3), {"axis": 5}, "axis 5 out of range"),
        ("BatchNormalization", (4,), {}, "rank >= 2"),
    ],
)
def test_invalid_raises(op: str, shape: tuple, attrs: dict, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        infer(op, TensorType(F, shape), **attrs)


def test_batch_norm_training_has_no_reference() -> None:
    spec = lookup("BatchNormalization")
    assert spec is not None and spec.reference is not None
    c = OpCall(
        "BatchNormalization", [TensorType(F, (2, 3))] * 5, [None] * 5, {"training_mode": 1}, 3
    )
    with pytest.raises(ValueError, match="training mode"):
        spec.reference(c, [f32(2, 3), *[f32(3)] * 4])


def test_typed_forms() -> None:
    spec = lookup("Softmax")
    assert spec is not None and spec.egg is not None
    assert spec.egg.attrs == (("axis", "i64", -1),) and spec.egg.n_inputs == 1
    ln = lookup("LayerNormalization")
    assert ln is not None and ln.egg is not None and ln.egg.n_inputs == 3
    log_softmax = lookup("LogSoftmax")  # typed like Softmax (test_typed_log_softmax.py)
    assert log_softmax is not None and log_softmax.egg is not None
    assert log_softmax.egg.attrs == (("axis", "i64", -1),)
