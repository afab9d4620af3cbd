"""Elementwise binary/variadic/comparison ops: reference and infer vs ORT and onnx."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import ShapeError
from rewrite.ops import OpCall, TensorType, lookup
from tests.ops.harness import check_op

RNG = np.random.default_rng(1234)
F, I64, BOOL = 1, 7, 9


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def i32(*shape: int, lo: int = -20, hi: int = 20) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape).astype(np.int32)


def nonzero_i32(*shape: int) -> np.ndarray:
    x = i32(*shape)
    return np.where(x == 0, 3, x).astype(np.int32)


def bools(*shape: int) -> np.ndarray:
    return RNG.random(shape) < 0.5


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize(
    ("a", "b"), [((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2)), ((1, 3, 1), (2, 1, 4))]
)
def test_arith_float_broadcast(op: str, a: tuple, b: tuple) -> None:
    check_op(op, [f32(*a), f32(*b) + (3.0 if op == "Div" else 0.0)])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Min", "Max"])
def test_arith_int(op: str) -> None:
    """Integer Div truncates toward zero (C semantics), not numpy's floor division."""
    check_op(op, [i32(3, 4), nonzero_i32(4)])


def test_pow_keeps_base_dtype() -> None:
    check_op("Pow", [np.abs(f32(3, 4)) + 0.5, f32(4)], rtol=1e-5)
    check_op("Pow", [i32(3, 4, lo=-4, hi=5), np.array([2, 3, 0, 1], np.int64)])
    check_op("Pow", [f32(2, 3), np.array(2, np.int32)])


@pytest.mark.parametrize(("fmod", "make"), [(0, nonzero_i32), (1, nonzero_i32), (1, f32)])
def test_mod(fmod: int, make) -> None:  # type: ignore[no-untyped-def]
    a, b = make(3, 4), make(3, 4)
    if a.dtype.kind == "f":
        b = b + np.sign(b) * 0.5
    check_op("Mod", [a, b], {"fmod": fmod})


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction: str) -> None:
    a = RNG.integers(0, 200, size=(3, 4)).astype(np.uint8)
    b = RNG.integers(0, 4, size=(4,)).astype(np.uint8)
    check_op("BitShift", [a, b], {"direction": direction})


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
def test_variadic(op: str) -> None:
    check_op(op, [f32(2, 3, 4), f32(3, 1), f32(4)])
    check_op(op, [f32(5)])


@pytest.mark.parametrize("op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
def test_comparisons_give_bool(op: str) -> None:
    check_op(op, [i32(2, 3, lo=0, hi=3), i32(3, lo=0, hi=3)])
    check_op(op, [f32(2, 1), f32(4)])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op: str) -> None:
    check_op(op, [bools(2, 3), bools(1, 3)])


def test_where() -> None:
    check_op("Where", [bools(3, 1), f32(1, 4), f32(3, 4)])
    check_op("Where", [bools(4), i32(2, 4), i32(1)])


def call(op: str, *shapes: tuple | None, dtypes: tuple[int, ...] = ()) -> OpCall:
    types = [TensorType(dtypes[i] if dtypes else F, s) for i, s in enumerate(shapes)]
    return OpCall(op, types, [None] * len(types), {})


def infer(op: str, *shapes: tuple | None, dtypes: tuple[int, ...] = ()) -> TensorType:
    spec = lookup(op)
    assert spec is not None
    (out,) = spec.infer(call(op, *shapes, dtypes=dtypes))
    return out


def test_infer_symbolic_and_unknown_dims() -> None:
    assert infer("Add", ("batch", "seq", 768), (768,)).shape == ("batch", "seq", 768)
    assert infer("Mul", ("batch", 1), (1, "n")).shape == ("batch", "n")
    assert infer("Add", ("a", 3), ("b", 3)).shape == (None, 3)
    assert infer("Add", (None, 3), (5, 1)).shape == (5, 3)
    assert infer("Add", None, (5, 1)) == TensorType(F, None)
    assert infer("Less", ("b", 4), (4,)) == TensorType(BOOL, ("b", 4))
    assert infer("Where", (4,), ("n", 1), (1, 4), dtypes=(BOOL, I64, I64)) == TensorType(
        I64, ("n", 4)
    )
    assert infer("Pow", (2, 3), (), dtypes=(F, I64)).dtype == F
    assert infer("Sum", ("n",), (1,), ("n",)).shape == ("n",)


def test_invalid_broadcast_and_dtypes_raise() -> None:
    with pytest.raises(ShapeError, match=r"Add: inputs do not broadcast \(inputs \(3, 4\)"):
        infer("Add", (3, 4), (5,))
    with pytest.raises(ShapeError, match="Sub: input dtypes differ"):
        infer("Sub", (3,), (3,), dtypes=(F, I64))


def test_flops() -> None:
    spec = lookup("Sum")
    assert spec is not None
    c = call("Sum", (2, 3), (2, 3), (2, 3))
    assert spec.flops(c, spec.infer(c)) == 12.0
    add = lookup("Add")
    assert add is not None and add.egg is not None and add.egg.n_inputs == 2
