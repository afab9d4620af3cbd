"""Z3 semantics of the typed ops: shared helpers (not an op module; it registers nothing).

An op's Z3 semantics (`OpSpec.z3`) has the signature of its numpy reference,
`(call, arrays) -> [array]`, over numpy object arrays whose elements are Z3 terms. Where numpy
already builds the formula (`+`, `np.matmul`, `transpose`, `reshape`, `broadcast_to`, `sum`),
the reference *is* the semantics; elsewhere the op module gives a Z3 version built from the
helpers here. The element sort of a term says which arithmetic it is in; the prover picks the
model (`arithmetic(REAL)` or `arithmetic(IEEE)`) before it builds a side.

Modelling choices (documented once, here):
- Integer dtypes are bit-vectors of the dtype's width in both models (`width`, `signed`):
  arithmetic wraps as ORT's does (Neg(INT64_MIN) = INT64_MIN, c·d modulo 2^64). Integer Div
  by zero and INT_MIN / -1 are *undefined*: ORT fails the run (element_wise_ops.cc: "Integer
  division by zero") or dies of SIGFPE, so the op records `require(...)`: a rule may assume
  its left side is defined and must keep its right side defined.
- `REAL`: floating dtypes are real numbers (`z3.Real`): no rounding, no NaN/inf, no signed
  zero. A real division or square root records `domain(...)` (divisor != 0, argument >= 0):
  the real model speaks only where both sides are defined in reals; the IEEE model covers
  the rest. A rule that is equal in reals is "exact in reals".
- `IEEE`: floating dtypes are IEEE-754 values (`z3.FPSort`: float32, float16, bfloat16,
  float64), round to nearest even, with inf, NaN and ±0; x/0 is ±inf or NaN as IEEE says.
- Casts (`rewrite.ops._cast`) are bit-precise in the IEEE model and as ORT's CPU kernel does
  them (checked against ORT in tests/ops/test_cast_semantics.py).
- Transcendental functions (exp, erf, tanh, sqrt) are uninterpreted functions (`UF`), one per
  sort, that carry their concrete meaning (for checking counterexamples and for testing the
  axioms) and ground axioms, instantiated on every argument they are applied to in a query
  (`verify.semantics.axioms`). In the real model tanh(t) is defined as 2/(1 + exp(-2t)) - 1
  and sqrt of t >= 0; in the IEEE model sqrt is IEEE's (correctly rounded, as ORT's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops.base import OpCall, fail

Array = np.ndarray
Axiom = Callable[[Any], Any]
"""t -> a Z3 boolean fact about f(t) (f is the UF the axiom belongs to)."""

P = TensorProto
WIDTH = {P.INT8: 8, P.INT16: 16, P.INT32: 32, P.INT64: 64}
WIDTH |= {P.UINT8: 8, P.UINT16: 16, P.UINT32: 32, P.UINT64: 64}
SIGNED = frozenset({P.INT8, P.INT16, P.INT32, P.INT64})
INT_DTYPES = frozenset(WIDTH)
FLOAT_DTYPES = frozenset({P.FLOAT, P.DOUBLE, P.FLOAT16, P.BFLOAT16})
FP_SORTS: dict[int, Any] = {
    P.FLOAT: z3.Float32(),
    P.FLOAT16: z3.Float16(),
    P.BFLOAT16: z3.FPSort(8, 8),
    P.DOUBLE: z3.Float64(),
}
REAL, IEEE = "real", "ieee"
RNE = z3.RNE()


def fp_number(v: Any) -> float:
    """An IEEE numeral as a Python float (exact: float16/float32 values fit a float64)."""
    if v.isNaN():
        return float("nan")
    if v.isInf():
        return float("-inf") if v.isNegative() else float("inf")
    if v.isZero():
        return -0.0 if v.isNegative() else 0.0
    r = z3.simplify(z3.fpToReal(v))
    return float(Fraction(int(r.numerator_as_long()), int(r.denominator_as_long())))


def is_int(dtype: int) -> bool:
    """Integer element types are bit-vectors; floating ones reals or IEEE floats."""
    return dtype in INT_DTYPES


@dataclass
class _State:
    model: str = REAL
    required: list[Any] | None = None
    """Conditions under which the terms built so far are defined (ORT does not fail)."""
    domain: list[Any] | None = None
    """Conditions under which the real model speaks (divisors nonzero, sqrt arguments >= 0)."""


_STATE = _State()


@contextmanager
def arithmetic(model: str) -> Iterator[None]:
    """Build terms in `model` (REAL or IEEE) inside the block."""
    old = _STATE.model
    _STATE.model = model
    try:
        yield
    finally:
        _STATE.model = old


def current_model() -> str:
    return _STATE.model


@contextmanager
def collecting() -> Iterator[tuple[list[Any], list[Any]]]:
    """Collect the `require` and `domain` conditions of the terms built inside the block."""
    old = (_STATE.required, _STATE.domain)
    req: list[Any] = []
    dom: list[Any] = []
    _STATE.required, _STATE.domain = req, dom
    try:
        yield req, dom
    finally:
        _STATE.required, _STATE.domain = old


def require(cond: Any) -> None:
    """The term being built is defined only when `cond` holds (ORT fails otherwise)."""
    if _STATE.required is not None and not (isinstance(cond, bool) and cond):
        _STATE.required.append(cond)


def domain(cond: Any) -> None:
    """The real model speaks only where `cond` holds (the IEEE model covers the rest)."""
    if _STATE.domain is not None:
        _STATE.domain.append(cond)


def real(v: float) -> Any:
    """A float constant as the exact rational value of the float64 `v`."""
    return z3.RealVal(float(v))


def const(v: float | int, like: Any) -> Any:
    """The number `v` in the sort of the term `like` (Real, FP, bit-vector or Int)."""
    if z3.is_fp(like):
        return z3.FPVal(float(v), like.sort())
    if z3.is_bv(like):
        return z3.BitVecVal(int(v), like.size())
    if z3.is_int(like):
        return z3.IntVal(int(v))
    return real(v)


def symbol(name: str, dtype: int, fill: int | float | None = None) -> Any:
    """A fresh Z3 constant of ONNX `dtype` in the current model (or the numeral `fill`)."""
    if dtype == P.BOOL:
        return z3.BoolVal(bool(fill)) if fill is not None else z3.Bool(name)
    if dtype in WIDTH:
        w = WIDTH[dtype]
        return z3.BitVecVal(int(fill), w) if fill is not None else z3.BitVec(name, w)
    if _STATE.model == IEEE:
        sort = FP_SORTS.get(dtype, z3.Float32())
        return z3.FPVal(float(fill), sort) if fill is not None else z3.FP(name, sort)
    return real(fill) if fill is not None else z3.Real(name)


def dtype_of(t: Any) -> int | None:
    """The ONNX dtype a term's sort stands for (None: a real, which is any float)."""
    if z3.is_fp(t):
        for d, s in FP_SORTS.items():
            if s == t.sort():
                return d
    return None


@dataclass(frozen=True, eq=False)
class UF:
    """An uninterpreted function of one float: a Z3 declaration per sort, its concrete
    meaning and axioms.

    `concrete` is the function the UF stands for (on Python floats); `axioms` map an argument
    `t` to facts about `self(t)` in the real model, `fp_axioms` in the IEEE model (the ops'
    tests check them numerically). `real_def`, when given, is the function's definition in
    the real model (then no real UF is declared). `monotone`: strictly increasing (the prover
    adds s < t <=> f(s) < f(t) for pairs of applications).
    """

    name: str
    concrete: Callable[[float], float]
    axioms: tuple[Axiom, ...] = ()
    fp_axioms: tuple[Axiom, ...] = ()
    real_def: Callable[[Any], Any] | None = None
    monotone: bool = False
    decl: Any = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "decl", z3.Function(self.name, z3.RealSort(), z3.RealSort()))
        UFS[self.name] = self

    def fp_decl(self, sort: Any) -> Any:
        name = f"{self.name}_{sort.ebits()}_{sort.sbits()}"
        if name not in UFS:
            UFS[name] = self
            _FP_DECLS[name] = z3.Function(name, sort, sort)
        return _FP_DECLS[name]

    def __call__(self, t: Any) -> Any:
        if z3.is_fp(t):
            return self.fp_decl(t.sort())(t)
        if self.real_def is not None:
            return self.real_def(to_real(t))
        return self.decl(to_real(t))


UFS: dict[str, UF] = {}
"""Every UF by declaration name (the prover instantiates axioms and interprets
counterexamples with it)."""
_FP_DECLS: dict[str, Any] = {}


def to_real(t: Any) -> Any:
    """A Z3 arithmetic term (or Python number) as a Real term (FP terms stay FP)."""
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
    return const(0, t)


def relu(t: Any) -> Any:
    """max(t, 0); NaN and -0 stay as they are (as ORT's Relu)."""
    if z3.is_fp(t):
        return z3.If(z3.fpLT(t, zero_like(t)), zero_like(t), t)
    return z3.If(t > 0, t, zero_like(t))


def divide(a: Any, b: Any) -> Any:
    """a / b: IEEE floats as IEEE; reals where b != 0 (`domain`); signed bit-vectors
    truncated toward zero, undefined (ORT fails) at b == 0 and INT_MIN / -1."""
    if z3.is_bv(a) or z3.is_bv(b):
        a, b = _bv_pair(a, b)
        w = a.size()
        require(b != 0)
        require(z3.Not(z3.And(a == z3.BitVecVal(1 << (w - 1), w), b == z3.BitVecVal(-1, w))))
        return a / b
    if z3.is_fp(a) or z3.is_fp(b):
        return a / b
    domain(to_real(b) != 0)
    return to_real(a) / to_real(b)


def divide_unsigned(a: Any, b: Any) -> Any:
    """Unsigned integer division; undefined at b == 0."""
    a, b = _bv_pair(a, b)
    require(b != 0)
    return z3.UDiv(a, b)


def _bv_pair(a: Any, b: Any) -> tuple[Any, Any]:
    if not z3.is_bv(a):
        a = z3.BitVecVal(int(a), b.size())
    if not z3.is_bv(b):
        b = z3.BitVecVal(int(b), a.size())
    return a, b


def square_root(t: Any, uf: UF) -> Any:
    """sqrt: IEEE's fpSqrt (NaN below 0); in reals `uf`, defined for t >= 0 (`domain`)."""
    if z3.is_fp(t):
        return z3.fpSqrt(RNE, t)
    domain(to_real(t) >= 0)
    return uf(t)


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
