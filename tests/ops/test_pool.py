"""MaxPool, AveragePool, global pools and LRN: reference and infer vs ORT and onnx."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op

RNG = np.random.default_rng(5)
F, I64 = 1, 7


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


WINDOWS = [
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 3, 9, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 9, 7), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    (
        (1, 2, 10, 9),
        {"kernel_shape": [3, 3], "strides": [3, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1},
    ),
    ((1, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 9, 8), {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 9, 8), {"kernel_shape": [2, 3], "auto_pad": "VALID"}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 2], "dilations": [2, 2], "pads": [2, 1, 2, 1]}),
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((1, 2, 5, 6, 4), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 1]}),
]


@pytest.mark.parametrize(("x", "attrs"), WINDOWS)
def test_max_pool(x: tuple, attrs: dict) -> None:
    check_op("MaxPool", [f32(*x)], attrs, opset=12)


@pytest.mark.parametrize(
    ("x", "attrs"),
    [(x, {**a, "storage_order": 1}) for x, a in WINDOWS[:5]] + WINDOWS[:4] + WINDOWS[8:],
)
def test_max_pool_indices(x: tuple, attrs: dict) -> None:
    """Indices are flat over (N, C, D...); storage_order=1 is column-major over (H, W)."""
    check_op("MaxPool", [f32(*x)], attrs, n_outputs=2, opset=12)


@pytest.mark.parametrize(("x", "attrs"), WINDOWS)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(x: tuple, attrs: dict, count_include_pad: int) -> None:
    attrs = {**attrs, "count_include_pad": count_include_pad}
    check_op("AveragePool", [f32(*x)], attrs, opset=19, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("x", [(2, 3, 5, 4), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pool(op: str, x: tuple) -> None:
    check_op(op, [f32(*x)])


@pytest.mark.parametrize(
    ("size", "attrs"), [(3, {}), (5, {"alpha": 0.01, "beta": 0.5, "bias": 2.0}), (1, {})]
)
def test_lrn(size: int, attrs: dict) -> None:
    check_op("LRN", [f32(2, 6, 4, 3)], {"size": size, **attrs}, rtol=1e-5)


def infer(op: str, x: tuple | None, n_outputs: int = 1, **attrs: object) -> list[TensorType]:
    spec = lookup(op)
    assert spec is not None
    return spec.infer(OpCall(op, [TensorType(F, x)], [None], attrs, n_outputs=n_outputs))


def test_infer_symbolic() -> None:
    (y, idx) = infer(
        "MaxPool", ("N", 64, 112, 112), 2, kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
    )
    assert y == TensorType(F, ("N", 64, 56, 56)) and idx == TensorType(I64, y.shape)
    (y,) = infer("AveragePool", ("N", "C", "H", "W"), kernel_shape=[3, 3], pads=[1] * 4)
    assert y.shape == ("N", "C", "H", "W")
    (y,) = infer("MaxPool", ("N", "C", "H", 8), kernel_shape=[2, 2], strides=[2, 2])
    assert y.shape == ("N", "C", None, 4)
    assert infer("MaxPool", None, kernel_shape=[2, 2])[0].shape == (None,) * 4
    assert infer("GlobalAveragePool", ("N", 512, "H", "W"))[0].shape == ("N", 512, 1, 1)
    assert infer("GlobalMaxPool", None)[0].shape is None
    assert infer("LRN", ("N", 8, "H", "W"), size=5)[0].shape == ("N", 8, "H", "W")


@pytest.mark.parametrize(
    ("op", "x", "attrs", "match"),
    [
        ("MaxPool", (1, 2, 8, 8), {}, "'kernel_shape' is required"),
        ("MaxPool", (1, 2, 8, 8), {"kernel_shape": [2]}, "does not fit 2 spatial axes"),
        ("AveragePool", (1, 2, 2, 8), {"kernel_shape": [3, 3]}, "kernel extent 3 exceeds"),
        ("AveragePool", (8, 8), {"kernel_shape": [3, 3]}, "rank >= 3"),
        ("LRN", (1, 2, 8, 8), {}, "'size' is required"),
    ],
)
def test_invalid_raises(op: str, x: tuple, attrs: dict, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        infer(op, x, **attrs)


def test_flops() -> None:
    spec = lookup("MaxPool")
    assert spec is not None
    call = OpCall(
        "MaxPool",
        [TensorType(F, (1, 2, 8, 8))],
        [None],
        {"kernel_shape": [2, 2], "strides": [2, 2]},
    )
    assert spec.flops(call, spec.infer(call)) == 2 * 16 * 4
