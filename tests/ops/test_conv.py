"""Conv and ConvTranspose: reference and infer vs ORT and onnx; symbolic and invalid shapes."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op

RNG = np.random.default_rng(31)
F = 1


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


CONV_CASES = [
    ((1, 3, 8, 8), (4, 3, 3, 3), {}),
    ((2, 3, 9, 7), (6, 3, 3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1]}),
    ((1, 4, 10, 10), (4, 2, 3, 3), {"group": 2, "dilations": [2, 1]}),
    ((1, 4, 9, 9), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 8, 9), (3, 2, 4, 2), {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ((1, 2, 8, 9), (3, 2, 4, 2), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((2, 3, 11), (5, 3, 4), {"strides": [3], "pads": [2, 1]}),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
    ((1, 2, 6, 6), (3, 2, 3, 3), {"kernel_shape": [3, 3]}),
]


@pytest.mark.parametrize(("x", "w", "attrs"), CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv(x: tuple, w: tuple, attrs: dict, bias: bool) -> None:
    inputs = [f32(*x), f32(*w)] + ([f32(w[0])] if bias else [])
    check_op("Conv", inputs, attrs, const_inputs=(1, 2), rtol=1e-4, atol=1e-4)


TRANSPOSE_CASES = [
    ((1, 3, 4, 4), (3, 2, 3, 3), {}),
    ((2, 4, 3, 5), (4, 3, 3, 2), {"strides": [2, 3], "pads": [1, 0, 0, 1], "group": 2}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_padding": [1, 0]}),
    ((1, 2, 4, 5), (2, 3, 2, 3), {"dilations": [2, 1], "strides": [1, 2]}),
    ((1, 2, 5, 4), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 5, 4), (2, 2, 4, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 5, 4), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [10, 8]}),
    ((1, 2, 5, 4), (2, 2, 4, 4), {"strides": [2, 2], "output_shape": [11, 9]}),
    ((2, 3, 7), (3, 4, 3), {"strides": [2], "pads": [1, 2]}),
    ((1, 2, 3, 2, 3), (2, 2, 2, 2, 2), {"strides": [2, 1, 2]}),
]


@pytest.mark.parametrize(("x", "w", "attrs"), TRANSPOSE_CASES)
def test_conv_transpose(x: tuple, w: tuple, attrs: dict) -> None:
    g = attrs.get("group", 1)
    check_op("ConvTranspose", [f32(*x), f32(*w), f32(w[1] * g)], attrs, rtol=1e-4, atol=1e-4)


def infer(
    op: str, x: tuple | None, w: tuple | None, b: tuple | None = None, **attrs: object
) -> TensorType:
    spec = lookup(op)
    assert spec is not None
    types = [TensorType(F, x), TensorType(F, w)] + ([TensorType(F, b)] if b else [])
    (out,) = spec.infer(OpCall(op, types, [None] * len(types), attrs))
    return out


@pytest.mark.parametrize(
    ("x", "w", "attrs", "want"),
    [
        (
            ("N", 3, 224, 224),
            (64, 3, 7, 7),
            {"strides": [2, 2], "pads": [3] * 4},
            ("N", 64, 112, 112),
        ),
        (("N", 3, "H", "W"), (8, 3, 3, 3), {"pads": [1] * 4}, ("N", 8, "H", "W")),
        (("N", 3, "H", "W"), (8, 3, 3, 3), {}, ("N", 8, None, None)),
        (("N", 3, "H", "W"), (8, 3, 3, 3), {"auto_pad": "SAME_UPPER"}, ("N", 8, "H", "W")),
        (("N", 3, "H", 9), (8, 3, 1, 1), {"strides": [2, 2]}, ("N", 8, None, 5)),
        (None, (8, 3, 3, 3), {}, (None, 8, None, None)),
        (None, None, {"kernel_shape": [3]}, (None, None, None)),
        (None, None, {}, None),
        ((1, 3, 8, 8), None, {"kernel_shape": [3, 3]}, (1, None, 6, 6)),
    ],
)
def test_conv_infer_symbolic(x: tuple, w: tuple, attrs: dict, want: tuple | None) -> None:
    assert infer("Conv", x, w, **attrs).shape == want


def test_conv_transpose_infer_symbolic() -> None:
    assert infer("ConvTranspose", ("N", 4, 8, 8), (4, 2, 2, 2), strides=[2, 2]).shape == (
        "N", 2, 16, 16,
    )  # fmt: skip
    assert infer("ConvTranspose", ("N", 4, "H", 8), (4, 2, 2, 2), group=2).shape == (
        "N", 4, None, 9,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("x", "w", "attrs", "match"),
    [
        ((1, 3, 8, 8), (4, 2, 3, 3), {}, r"Conv: input channels 3 != 2 x group 1"),
        ((1, 4, 8, 8), (6, 1, 3, 3), {"group": 4}, "channels 6 not divisible by group 4"),
        ((1, 3, 8, 8), (4, 3, 3), {}, "same rank"),
        ((1, 3, 2, 2), (4, 3, 3, 3), {}, "kernel extent 3 exceeds padded input 2"),
        ((1, 3, 8, 8), (4, 3, 3, 3), {"strides": [1]}, "do not fit 2 spatial axes"),
        ((1, 3, 8, 8), (4, 3, 3, 3), {"auto_pad": "SAME"}, "auto_pad 'SAME'"),
    ],
)
def test_conv_invalid_raises(x: tuple, w: tuple, attrs: dict, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        infer("Conv", x, w, **attrs)


def test_conv_bias_length_checked() -> None:
    assert infer("Conv", (1, 3, 8, 8), (4, 3, 1, 1), ("m",)).shape == (1, 4, 8, 8)
    with pytest.raises(ShapeError, match=r"bias shape \(5,\) is not \(4,\)"):
        infer("Conv", (1, 3, 8, 8), (4, 3, 1, 1), (5,))


def test_conv_flops() -> None:
    spec = lookup("Conv")
    assert spec is not None
    call = OpCall(
        "Conv",
        [TensorType(F, (2, 4, 8, 8)), TensorType(F, (6, 2, 3, 3))],
        [None] * 2,
        {"group": 2, "pads": [1] * 4},
    )
    (out,) = spec.infer(call)
    assert out.shape == (2, 6, 8, 8)
    assert spec.flops(call, [out]) == 2 * 2 * 6 * 8 * 8 * 2 * 3 * 3
