"""Z3 semantics of the typed ops: shared helpers (not an op module; it registers nothing).

An op's Z3 semantics (`OpSpec.z3`) has the signature of its numpy reference,
`(call, arrays) -> [array]`, over numpy object arrays whose elements are Z3 terms. Where numpy
already builds the formula (`+`, `np.matmul`, `transpose`, `reshape`, `broadcast_to`, `sum`),
the reference *is* the semantics; elsewhere the op module gives a Z3 version built from the
helpers here.

Modelling choices (documented once, here):
- Floating dtypes are real numbers (`z3.Real`): no rounding, no NaN, no infinities, no
  signed zero. "Proved" therefore means "exact in real arithmetic"; `verify.sample` measures
  what rounding does. Integer dtypes are mathematical integers (`z3.Int`): no overflow.
- Division by zero is Z3's: `a / 0` is an unspecified (but fixed, per numerator) value, so a
  rule that divides by something that can be zero is refuted rather than proved.
- Transcendental functions (exp, erf, tanh, sqrt) are uninterpreted functions (`UF`) that
  carry their concrete meaning (for checking counterexamples and for testing the axioms) and a
  few ground axioms, instantiated on every argument they are applied to in a query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops.base import OpCall, fail

Array = np.ndarray
Axiom = Callable[[Any], Any]
"""t -> a Z3 boolean fact about f(t) (f is the UF the axiom belongs to)."""

INT_DTYPES = frozenset(
    {
        TensorProto.INT8,
        TensorProto.INT16,
        TensorProto.INT32,
        TensorProto.INT64,
        TensorProto.UINT8,
        TensorProto.UINT16,
        TensorProto.UINT32,
        TensorProto.UINT64,
    }
)
FLOAT_DTYPES = frozenset(
    {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
)


def is_int(dtype: int) -> bool:
    """Integer element types are modelled as `z3.Int`, everything else as `z3.Real`."""
    return dtype in INT_DTYPES


def real(v: float) -> Any:
    """A float constant as the exact rational value of the float64 `v`."""
    return z3.RealVal(float(v))


@dataclass(frozen=True, eq=False)
class UF:
    """An uninterpreted function R -> R: its Z3 declaration, concrete meaning and axioms.

    `concrete` is the function the UF stands for (on Python floats); `axioms` map an argument
    `t` to facts about `self(t)` that hold for the concrete function (the ops' tests check them
    numerically). The prover adds every axiom for every application `f(t)` in a query.
    """

    name: str
    concrete: Callable[[float], float]
    axioms: tuple[Axiom, ...] = ()
    decl: Any = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decl", z3.Function(self.name, z3.RealSort(), z3.RealSort()))
        UFS[self.name] = self

    def __call__(self, t: Any) -> Any:
        return self.decl(to_real(t))


UFS: dict[str, UF] = {}
"""Every UF by name (the prover instantiates axioms and interprets counterexamples with it)."""


def to_real(t: Any) -> Any:
    """A Z3 arithmetic term (or Python number) as a Real term."""
    if isinstance(t, int | float):
        return real(t)
    if z3.is_int(t):
        return z3.ToReal(t)
    return t


def vmap(fn: Callable[..., Any], *arrays: Any) -> Array:
    """`fn` applied elementwise (with numpy broadcasting) to object arrays; an object array."""
    out = np.frompyfunc(fn, len(arrays), 1)(*arrays)
    return np.asarray(out, dtype=object)


def zero_like(t: Any) -> Any:
    return z3.IntVal(0) if z3.is_int(t) else z3.RealVal(0)


def relu(t: Any) -> Any:
    """max(t, 0)."""
    return z3.If(t > 0, t, zero_like(t))


def trunc_div(a: Any, b: Any) -> Any:
    """Integer division rounding toward zero (ONNX/C), from SMT-LIB's Euclidean `div`.

    For b == 0 the value is Z3's unspecified `a div 0`.
    """
    pos = z3.If(b > 0, a / b, -(a / -b))  # a >= 0: Euclidean = truncated for either sign of b
    neg = z3.If(b > 0, -((-a) / b), (-a) / (-b))
    return z3.If(b == 0, a / b, z3.If(a >= 0, pos, neg))


def trunc(t: Any) -> Any:
    """A real rounded toward zero, as an Int (Cast float -> int)."""
    return z3.If(t >= 0, z3.ToInt(t), -z3.ToInt(-t))


def cast(t: Any, to: int) -> Any:
    """Cast one element to ONNX dtype `to`: reals <-> ints truncate; same kind is identity."""
    if is_int(to):
        return trunc(t) if z3.is_real(t) else t
    return to_real(t)


def float_only(call: OpCall) -> None:
    """Fail (the instantiation does not exist) when an input is not a floating dtype."""
    for i in range(len(call.inputs)):
        d = call.input(i).dtype
        if d and d not in FLOAT_DTYPES:
            raise fail(call, "defined for floating dtypes only")


def unary(fn: Callable[[Any], Any], *, floats: bool = False) -> Callable[..., list[Array]]:
    """Z3 semantics of an elementwise unary op from an element function."""

    def semantics(call: OpCall, arrays: Sequence[Array | None]) -> list[Array]:
        if floats:
            float_only(call)
        x = arrays[0]
        assert x is not None
        return [vmap(fn, x)]

    semantics.__doc__ = f"elementwise {getattr(fn, '__name__', 'fn')}"
    return semantics
