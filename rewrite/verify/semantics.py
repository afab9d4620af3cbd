"""Z3 terms for tensors, and the bridge back to numbers.

- `symbols(name, type)`: a numpy object array of fresh Z3 constants (`Real` for floating
  dtypes, `Int` for integer ones), one per element, named `name[i,j]`.
- `interpret(term, env)`: the value of a Z3 term at concrete inputs, with every uninterpreted
  function replaced by the function it stands for (`UF.concrete`): this is how a
  counterexample found with uninterpreted functions is confirmed in real arithmetic (float64),
  and how the semantics and axioms are tested against the numpy references and ORT.
- `axioms(terms)`: the ground instances of the UF axioms for every application in `terms`.
- `number(value)`: a Z3 numeral as a Python int or float.

`interpret` computes with numpy, so one call evaluates a whole batch of inputs. Equality of
floats in it is up to float64 rounding (relative 1e-9): it decides whether an axiom holds at
a point, not whether two floats are bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import UFS, is_int
from rewrite.ops.base import TensorType

Array = np.ndarray
_REL = 1e-9


def symbols(name: str, t: TensorType, fill: int | None = None) -> Array:
    """Fresh Z3 constants shaped like `t` (or the numeral `fill` everywhere)."""
    shape = tuple(int(d) for d in t.shape or ())  # type: ignore[arg-type]
    mk = z3.Int if is_int(t.dtype) else z3.Real
    val = z3.IntVal if is_int(t.dtype) else z3.RealVal
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        out[idx] = val(fill) if fill is not None else mk(f"{name}[{','.join(map(str, idx))}]")
    return out


def number(v: Any) -> int | float:
    """A Z3 numeral (int, rational or algebraic) as a Python number."""
    if z3.is_int_value(v):
        return int(v.as_long())
    if z3.is_rational_value(v):
        return float(Fraction(int(v.numerator_as_long()), int(v.denominator_as_long())))
    if z3.is_algebraic_value(v):
        return float(Fraction(v.approx(20).as_fraction()))
    if isinstance(v, int | float):
        return v
    raise TypeError(f"not a numeral: {v}")


def close(a: Any, b: Any) -> Any:
    """Equal up to float64 rounding, elementwise (NaN equals NaN, infinities must match)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == bool or b.dtype == bool:
        return a == b
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        near = np.abs(a - b) <= _REL * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    return np.where(np.isnan(a) | np.isnan(b), np.isnan(a) & np.isnan(b), near | (a == b))


def _div(a: Any, b: Any) -> Any:
    with np.errstate(all="ignore"):
        return np.divide(np.asarray(a, dtype=np.float64), b)


def _idiv(a: Any, b: Any) -> Any:
    """SMT-LIB integer division (Euclidean); by zero: NaN (undefined)."""
    a, b = np.asarray(a), np.asarray(b)
    safe = np.where(b == 0, 1, b)
    q = np.where(safe > 0, np.floor_divide(a, safe), -np.floor_divide(a, -safe))
    return np.where(b == 0, np.nan, q)


def _mod(a: Any, b: Any) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    safe = np.where(b == 0, 1, np.abs(b))
    return np.where(b == 0, np.nan, np.mod(a, safe))


_BINARY: dict[int, Any] = {
    z3.Z3_OP_SUB: lambda a, b: np.subtract(a, b),
    z3.Z3_OP_DIV: _div,
    z3.Z3_OP_IDIV: _idiv,
    z3.Z3_OP_MOD: _mod,
    z3.Z3_OP_LT: np.less,
    z3.Z3_OP_LE: np.less_equal,
    z3.Z3_OP_GT: np.greater,
    z3.Z3_OP_GE: np.greater_equal,
    z3.Z3_OP_POWER: lambda a, b: np.power(np.asarray(a, dtype=np.float64), b),
    z3.Z3_OP_IMPLIES: lambda a, b: np.logical_or(np.logical_not(a), b),
    z3.Z3_OP_EQ: close,
    z3.Z3_OP_DISTINCT: lambda a, b: np.logical_not(close(a, b)),
}
_NARY: dict[int, Any] = {
    z3.Z3_OP_ADD: np.add,
    z3.Z3_OP_MUL: np.multiply,
    z3.Z3_OP_AND: np.logical_and,
    z3.Z3_OP_OR: np.logical_or,
}
_UNARY: dict[int, Any] = {
    z3.Z3_OP_UMINUS: np.negative,
    z3.Z3_OP_NOT: np.logical_not,
    z3.Z3_OP_TO_REAL: lambda a: np.asarray(a, dtype=np.float64),
    z3.Z3_OP_TO_INT: np.floor,
}


def interpret(term: Any, env: Mapping[str, Any], memo: dict[int, Any] | None = None) -> Any:
    """The value of a Z3 term at the inputs `env` (constant name -> number, or numpy array
    for a batch of inputs at once), with every UF replaced by the real function."""
    memo = {} if memo is None else memo
    key = term.get_id()
    if key in memo:
        return memo[key]
    value = _interpret(term, env, memo)
    memo[key] = value
    return value


def _interpret(t: Any, env: Mapping[str, Any], memo: dict[int, Any]) -> Any:
    if z3.is_int_value(t) or z3.is_rational_value(t) or z3.is_algebraic_value(t):
        return number(t)
    if z3.is_true(t):
        return True
    if z3.is_false(t):
        return False
    decl = t.decl()
    kind = decl.kind()
    if kind == z3.Z3_OP_UNINTERPRETED and t.num_args() == 0:
        if decl.name() not in env:
            raise KeyError(f"no value for {decl.name()}")
        return env[decl.name()]
    args = [interpret(a, env, memo) for a in t.children()]
    with np.errstate(all="ignore"):
        if kind == z3.Z3_OP_UNINTERPRETED:
            uf = UFS.get(decl.name())
            if uf is None:
                raise KeyError(f"no concrete meaning for the function {decl.name()}")
            return np.vectorize(uf.concrete, otypes=[np.float64])(args[0])
        if kind in _NARY:
            out = args[0]
            for a in args[1:]:
                out = _NARY[kind](out, a)
            return out
        if kind in _UNARY:
            return _UNARY[kind](args[0])
        if kind == z3.Z3_OP_ITE:
            return np.where(args[0], args[1], args[2])
        if kind in _BINARY:
            return _BINARY[kind](args[0], args[1])
    raise NotImplementedError(f"cannot interpret {decl} ({t})")


def uf_applications(terms: Iterable[Any]) -> list[Any]:
    """Every application f(t) of a registered UF inside `terms` (each once)."""
    seen: set[int] = set()
    found: list[Any] = []
    stack = [t for t in terms if z3.is_expr(t)]
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if not z3.is_app(t):
            continue
        decl = t.decl()
        if decl.kind() == z3.Z3_OP_UNINTERPRETED and t.num_args() == 1 and decl.name() in UFS:
            found.append(t)
        stack.extend(t.children())
    return found


def axioms(terms: Iterable[Any]) -> list[Any]:
    """The axioms of every UF application in `terms`, instantiated at its argument."""
    facts = []
    for app in uf_applications(terms):
        uf = UFS[app.decl().name()]
        facts += [ax(app.arg(0)) for ax in uf.axioms]
    return facts


def uses_ufs(terms: Iterable[Any]) -> bool:
    return bool(uf_applications(terms))


def environment(arrays: Mapping[str, Array], values: Mapping[str, Any]) -> dict[str, Any]:
    """Constant name -> value, for the symbols `arrays[name]` bound to `values[name]` (shaped
    like the symbols, with optional trailing batch axes)."""
    env: dict[str, Any] = {}
    for name, sym in arrays.items():
        vals = np.asarray(values[name])
        for idx in np.ndindex(*sym.shape):
            s: Any = sym[idx]
            if z3.is_const(s) and not (z3.is_int_value(s) or z3.is_rational_value(s)):
                env[s.decl().name()] = vals[idx]
    return env


def interpret_array(arr: Array, env: Mapping[str, Any]) -> Array:
    """`interpret` of every element of an object array, as float64 of shape
    `arr.shape + batch` (batch: the broadcast shape of the values in `env`)."""
    batch = np.broadcast_shapes(*(np.shape(v) for v in env.values())) if env else ()
    memo: dict[int, Any] = {}
    out = np.empty(arr.shape + batch, dtype=np.float64)
    for idx in np.ndindex(*arr.shape):
        e = arr[idx]
        out[idx] = interpret(e, env, memo) if z3.is_expr(e) else e
    return out
