"""Comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual), boolean ops (And, Or,
Xor) and Where, with numpy broadcasting.

Contract: a comparison maps A, B of one dtype (broadcast together) to BOOL: A = B, A < B,
A <= B, A > B, A >= B elementwise, as IEEE compares floats (NaN compares false, NaN = NaN is
false, -0 = +0) and integers by their signedness. And, Or, Xor take and give BOOL.
Where(C, X, Y) = X where C else Y: C is BOOL, X and Y share the output's dtype, the shape is
the broadcast of all three. Not (unary) lives in `unary.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import SIGNED, is_int, vmap
from rewrite.ops.base import (
    EggSig,
    OpCall,
    OpSpec,
    ReferenceFn,
    TensorType,
    Z3Fn,
    elementwise_flops,
)
from rewrite.ops.elementwise import broadcast_inputs, common_dtype
from rewrite.ops.registry import register

Array = np.ndarray
ArrayFn = Callable[..., Array]
Term = Any
BOOL = TensorProto.BOOL


def _bool_infer(call: OpCall) -> list[TensorType]:
    """Comparisons and logic: operands share a dtype; the result is BOOL."""
    common_dtype(call)
    return [TensorType(BOOL, broadcast_inputs(call))]


def _where_infer(call: OpCall) -> list[TensorType]:
    """Where(C, X, Y): X and Y share a dtype; shape = broadcast(C, X, Y)."""
    return [TensorType(common_dtype(call, (1, 2)), broadcast_inputs(call))]


def _compare(fn: ArrayFn) -> ReferenceFn:
    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        return [np.asarray(fn(arrays[0], arrays[1]), dtype=np.bool_)]

    return reference


def _where_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    c, x, y = arrays
    assert c is not None and x is not None and y is not None
    return [np.where(c, x, y).astype(x.dtype, copy=False)]


# -- Z3 semantics ---------------------------------------------------------------------------
# Element functions (a, b) -> Bool. On IEEE terms z3's operators are IEEE's predicates
# (fpLT, ...); `==` on them would be SMT equality (NaN = NaN, -0 != +0), so Equal uses fpEQ.
# Bit-vector `<` is signed: unsigned dtypes use ULT/ULE/UGT/UGE.


def _equal(a: Term, b: Term) -> Term:
    return z3.fpEQ(a, b) if z3.is_fp(a) else a == b


_ORDER: dict[str, tuple[Callable[[Term, Term], Term], Callable[[Term, Term], Term]]] = {
    "Less": (lambda a, b: a < b, z3.ULT),
    "LessOrEqual": (lambda a, b: a <= b, z3.ULE),
    "Greater": (lambda a, b: a > b, z3.UGT),
    "GreaterOrEqual": (lambda a, b: a >= b, z3.UGE),
}


def _z3_compare(name: str) -> Z3Fn:
    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        a, b = arrays[0], arrays[1]
        assert a is not None and b is not None
        if name == "Equal":
            return [vmap(_equal, a, b)]
        signed, unsigned = _ORDER[name]
        dt = call.input(0).dtype
        return [vmap(unsigned if is_int(dt) and dt not in SIGNED else signed, a, b)]

    semantics.__doc__ = f"{name} elementwise, as IEEE and the dtype's signedness say."
    return semantics


def _z3_logic(fn: Callable[[Term, Term], Term]) -> Z3Fn:
    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        a, b = arrays[0], arrays[1]
        assert a is not None and b is not None
        return [vmap(fn, a, b)]

    return semantics


def _z3_where(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """If(c, x, y) elementwise (broadcast)."""
    c, x, y = arrays
    assert c is not None and x is not None and y is not None
    return [vmap(z3.If, c, x, y)]


_EGG2 = EggSig(n_inputs=2)
_COMPARE: tuple[tuple[str, ArrayFn], ...] = (
    ("Equal", np.equal),
    ("Less", np.less),
    ("LessOrEqual", np.less_equal),
    ("Greater", np.greater),
    ("GreaterOrEqual", np.greater_equal),
)
for _name, _cfn in _COMPARE:
    register(
        OpSpec(
            _name, _bool_infer, _compare(_cfn), elementwise_flops, egg=_EGG2, z3=_z3_compare(_name)
        )
    )
_LOGIC: tuple[tuple[str, ArrayFn, Callable[[Term, Term], Term]], ...] = (
    ("And", np.logical_and, z3.And),
    ("Or", np.logical_or, z3.Or),
    ("Xor", np.logical_xor, lambda a, b: a != b),  # Distinct: what `semantics.interpret` reads
)
for _name, _lfn, _zfn in _LOGIC:
    register(
        OpSpec(
            _name,
            _bool_infer,
            _compare(_lfn),
            elementwise_flops,
            egg=_EGG2,
            z3=_z3_logic(_zfn),
            input_dtypes=((BOOL,), (BOOL,)),
        )
    )
register(
    OpSpec(
        "Where",
        _where_infer,
        _where_ref,
        elementwise_flops,
        egg=EggSig(n_inputs=3),
        z3=_z3_where,
        input_dtypes=((BOOL,), None, None),
    )
)
