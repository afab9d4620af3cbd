"""Elementwise binary and variadic arithmetic ops with numpy broadcasting.

Contract: every op here maps inputs that broadcast together (ONNX multidirectional
broadcasting, `base.broadcast`) to one output of the broadcast shape, in the first input's
dtype (Pow keeps the base's; Pow, Max and Min as ORT computes them: `_binary_z3`; Mean and
Mod: `_mean_mod_z3`). Max, Min, Sum and Mean are typed for 1 to 8 inputs, Mod for fmod 0 and
1. Comparisons, logical ops and Where live in `logic.py`. Shared helpers `same_type` and
`per_element` (used by the unary, norm and reduce modules too) live here because these are
the simplest ops.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

import numpy as np
from onnx import TensorProto

from rewrite.errors import ShapeError
from rewrite.ops._binary_z3 import pow_general, pow_multiplies, z3_max_min, z3_pow
from rewrite.ops._mean_mod_z3 import mean_ref, mean_z3, mod_ref, mod_z3
from rewrite.ops._z3 import SIGNED, divide, divide_unsigned, float_only, is_int, vmap
from rewrite.ops.base import (
    EggSig,
    OpCall,
    OpSpec,
    ReferenceFn,
    Shape,
    TensorType,
    broadcast,
    elementwise_flops,
    fail,
    per_element,
    same_type,
)
from rewrite.ops.registry import register

__all__ = ["broadcast_inputs", "common_dtype", "per_element", "same_type"]

BOOL = TensorProto.BOOL

Array = np.ndarray
ArrayFn = Callable[..., Array]


def broadcast_inputs(call: OpCall, indices: range | tuple[int, ...] | None = None) -> Shape | None:
    """Broadcast shape of the given inputs (all by default); None if any rank is unknown."""
    idx = range(len(call.inputs)) if indices is None else indices
    shapes = [call.input(i).shape for i in idx]
    if any(s is None for s in shapes):
        return None
    try:
        return broadcast(*shapes)  # type: ignore[arg-type]
    except ShapeError:
        raise fail(call, "inputs do not broadcast") from None


def common_dtype(call: OpCall, indices: range | tuple[int, ...] | None = None) -> int:
    """The inputs' shared dtype (0 if none known); differing known dtypes are invalid."""
    idx = range(len(call.inputs)) if indices is None else indices
    known = {call.input(i).dtype for i in idx} - {0}
    if len(known) > 1:
        raise fail(call, f"input dtypes differ ({sorted(known)})")
    return known.pop() if known else 0


def _arith_infer(call: OpCall) -> list[TensorType]:
    """Same dtype in, same dtype out; shape = broadcast of all inputs."""
    if not call.inputs:
        raise fail(call, "needs at least one input")
    dtype = common_dtype(call)
    if dtype == BOOL:
        raise fail(call, "not defined for bool (ONNX's type constraints)")
    return [TensorType(dtype, broadcast_inputs(call))]


def _pow_infer(call: OpCall) -> list[TensorType]:
    """Pow(X, Y): X's dtype (Y may differ), broadcast shape."""
    return [TensorType(call.input(0).dtype, broadcast_inputs(call))]


def _binary(fn: ArrayFn) -> ReferenceFn:
    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        a, b = arrays[0], arrays[1]
        assert a is not None and b is not None
        with np.errstate(all="ignore"):
            return [np.asarray(fn(a, b)).astype(a.dtype, copy=False)]

    return reference


def _div(a: Array, b: Array) -> Array:
    """Integer Div truncates toward zero (C semantics), unlike numpy's floor division."""
    if a.dtype.kind in "iu":
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q + fix.astype(q.dtype)
    return np.divide(a, b)


def _pow(a: Array, b: Array) -> Array:
    """ORT's Pow (`_binary_z3`): x·x or x·x·x where its kernel multiplies, else std::pow."""
    out = pow_general(a, b)
    if pow_multiplies(a.shape, b.shape):
        out = np.where(b == 2, a * a, np.where(b == 3, a * a * a, out))
    return out


def _variadic(fn: ArrayFn) -> ReferenceFn:
    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        xs = [a for a in arrays if a is not None]
        out = reduce(fn, xs)
        return [np.asarray(out).astype(xs[0].dtype, copy=False)]

    return reference


def _variadic_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """(n - 1) operations per output element for n inputs (Mean: n)."""
    n = max(1, len([t for t in call.inputs if t is not None]) - (call.op_type != "Mean"))
    return n * elementwise_flops(call, outputs)


def _z3_div(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """IEEE or real division (`_z3.divide`); integers truncate toward zero, undefined at 0."""
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    dt = call.input(0).dtype
    if is_int(dt) and dt not in SIGNED:
        return [vmap(divide_unsigned, a, b)]
    return [vmap(divide, a, b)]


def _sum_z3(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """((x0 + x1) + x2) + ...; ONNX (and ORT) define Sum for floating dtypes only."""
    float_only(call)
    xs = [a for a in arrays if a is not None]
    out = xs[0]
    for x in xs[1:]:
        out = np.add(out, x)
    return [np.asarray(out, dtype=object)]


def _fold(two: ReferenceFn) -> ReferenceFn:
    """A variadic op's semantics from its two-input form: f(f(x0, x1), x2) ..."""

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        xs = [a for a in arrays if a is not None]
        out = xs[0]
        for x in xs[1:]:
            out = two(call, [out, x])[0]
        return [np.asarray(out, dtype=object)]

    semantics.__doc__ = two.__doc__
    return semantics


_EGG2 = EggSig(n_inputs=2)
# (name, numpy function, Z3 semantics: None = the reference itself)
_ARITH: tuple[tuple[str, ArrayFn, ReferenceFn | None], ...] = (
    ("Add", np.add, None),
    ("Sub", np.subtract, None),
    ("Mul", np.multiply, None),
    ("Div", _div, _z3_div),
)
for _name, _fn, _z3fn in _ARITH:
    _ref = _binary(_fn)
    register(OpSpec(_name, _arith_infer, _ref, elementwise_flops, egg=_EGG2, z3=_z3fn or _ref))

register(OpSpec("Pow", _pow_infer, _binary(_pow), per_element(4), egg=_EGG2, z3=z3_pow))
register(
    OpSpec(
        "Mod",
        _arith_infer,
        mod_ref,
        per_element(2),
        egg=EggSig(attrs=(("fmod", "i64", 0),), n_inputs=2),
        z3=mod_z3,
        doc="Mod(a, b) = a - b·floor(a/b) (fmod=0) or a - b·trunc(a/b) (fmod=1)",
    )
)
_VARIADIC: tuple[tuple[str, ArrayFn], ...] = (
    ("Min", np.minimum),
    ("Max", np.maximum),
    ("Sum", np.add),
)
_VARIADIC_EGG = EggSig(n_inputs=2, arities=(1, *range(3, 9)))
"""Typed for 1 to 8 inputs: a constructor per count (Sum, Sum_3, ...)."""
for _name, _vfn in _VARIADIC:
    _z3n = _sum_z3 if _name == "Sum" else _fold(z3_max_min(_name))
    _ref = _variadic(_vfn)
    register(OpSpec(_name, _arith_infer, _ref, _variadic_flops, egg=_VARIADIC_EGG, z3=_z3n))
register(
    OpSpec(
        "Mean",
        _arith_infer,
        mean_ref,
        _variadic_flops,
        egg=_VARIADIC_EGG,
        z3=mean_z3,
        doc="Mean(x1..xn) = (x1 + ... + xn) / n",
    )
)
