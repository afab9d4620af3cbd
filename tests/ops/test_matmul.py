"""MatMul and Gemm: reference and infer vs ORT and onnx; symbolic shapes; invalid shapes."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op

RNG = np.random.default_rng(2024)
F = 1


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (5, 4, 6)),
        ((4,), (4, 5)),
        ((2, 3, 4), (4,)),
        ((4,), (4,)),
        ((7,), (2, 7, 3)),
    ],
)
def test_matmul(a: tuple, b: tuple) -> None:
    check_op("MatMul", [f32(*a), f32(*b)], atol=1e-5)


def test_matmul_int() -> None:
    a = RNG.integers(-5, 5, (3, 4)).astype(np.int32)
    check_op("MatMul", [a, RNG.integers(-5, 5, (4, 2)).astype(np.int32)])


@pytest.mark.parametrize(
    ("attrs", "a", "b", "c"),
    [
        ({}, (3, 4), (4, 5), None),
        ({}, (3, 4), (4, 5), (5,)),
        ({"transA": 1}, (4, 3), (4, 5), (3, 5)),
        ({"transB": 1, "alpha": 0.5, "beta": 2.0}, (3, 4), (5, 4), (3, 1)),
        ({"transA": 1, "transB": 1, "beta": 0.0}, (4, 3), (5, 4), (1, 5)),
        ({"alpha": -1.5}, (3, 4), (4, 5), ()),
    ],
)
def test_gemm(attrs: dict, a: tuple, b: tuple, c: tuple | None) -> None:
    inputs = [f32(*a), f32(*b)] + ([] if c is None else [f32(*c)])
    check_op("Gemm", inputs, attrs, atol=1e-5)
    check_op("Gemm", inputs, attrs, const_inputs=(1,), atol=1e-5)


def infer(op: str, a: tuple | None, b: tuple | None, c: tuple | None = None, **attrs: object):  # type: ignore[no-untyped-def]
    spec = lookup(op)
    assert spec is not None
    types = [TensorType(F, a), TensorType(F, b)] + ([TensorType(F, c)] if c is not None else [])
    call = OpCall(op, types, [None] * len(types), attrs)
    (out,) = spec.infer(call)
    return out.shape, spec.flops(call, [out])


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (("batch", "seq", 768), (768, 3072), ("batch", "seq", 3072)),
        (("b", "h", "s", 64), ("b", "h", 64, "s"), ("b", "h", "s", "s")),
        (("b", 1, "s", 64), (12, 64, "t"), ("b", 12, "s", "t")),
        (("s", "k"), ("k",), ("s",)),
        ((None, 5), (None, 6), (None, 6)),
        (None, (4, 5), None),
    ],
)
def test_matmul_infer_symbolic(a: tuple, b: tuple, want: tuple | None) -> None:
    assert infer("MatMul", a, b)[0] == want


def test_flops() -> None:
    assert infer("MatMul", (8, 3, 4), (4, 5))[1] == 2 * 8 * 3 * 4 * 5
    assert infer("MatMul", ("b", 3, 4), (4, 5))[1] == 0.0
    assert infer("Gemm", (3, 4), (5, 4), (5,), transB=1)[1] == 2 * 3 * 4 * 5 + 15
    assert infer("Gemm", ("m", 4), (4, 5))[0] == ("m", 5)


@pytest.mark.parametrize(
    ("op", "a", "b", "c", "attrs", "match"),
    [
        ("MatMul", (2, 3), (4, 5), None, {}, r"MatMul: inner dims 3 != 4 \(inputs \(2, 3\)"),
        ("MatMul", (2, 3, 4), (5, 4, 6), None, {}, "batch dims do not broadcast"),
        ("MatMul", (), (4,), None, {}, "rank >= 1"),
        ("Gemm", (3, 4), (5, 6), None, {}, "inner dims 4 != 5"),
        ("Gemm", (3, 4), (4, 5, 1), None, {}, "B must be 2-D"),
        ("Gemm", (3, 4), (4, 5), (3, 2), {}, "C does not broadcast"),
        ("Gemm", (3, 4), (4, 5), (5, 5), {}, "C does not broadcast"),
    ],
)
def test_invalid_shapes_raise(
    op: str, a: tuple, b: tuple, c: tuple | None, attrs: dict, match: str
) -> None:
    with pytest.raises(ShapeError, match=match):
        infer(op, a, b, c, **attrs)


def test_matmul_egg() -> None:
    spec = lookup("MatMul")
    assert spec is not None and spec.egg is not None and spec.egg.n_inputs == 2
    gemm = lookup("Gemm")
    assert gemm is not None and gemm.egg is not None and gemm.egg.optional == 1  # C optional
