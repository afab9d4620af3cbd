"""Z3 terms for tensors, and the bridge back to numbers.

- `symbols(name, type)`: a numpy object array of fresh Z3 constants in the current model
  (`ops._z3.symbol`: bit-vectors for integer dtypes, reals or IEEE floats for floating ones,
  booleans for BOOL), one per element, named `name[i,j]`.
- `interpret(term, env)`: the value of a Z3 term at concrete inputs, with every uninterpreted
  function replaced by the function it stands for (`UF.concrete`): this is how a
  counterexample found with uninterpreted functions is confirmed in real arithmetic (float64),
  and how the semantics and axioms are tested against the numpy references and ORT.
- `axioms(terms)`: the ground instances of the UF axioms for every application in `terms`.
- `number(value)`: a Z3 numeral (integer, rational, bit-vector, IEEE float) as a Python number.

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

from rewrite.ops._z3 import SIGNED, UFS, fp_number, symbol
from rewrite.ops.base import TensorType

Array = np.ndarray
_REL = 1e-9


def symbols(name: str, t: TensorType, fill: int | None = None) -> Array:
    """Fresh Z3 constants shaped like `t` (or the numeral `fill` everywhere)."""
    shape = tuple(int(d) for d in t.shape or ())  # type: ignore[arg-type]
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        out[idx] = symbol(f"{name}[{','.join(map(str, idx))}]", t.dtype, fill)
    return out


def number(v: Any, dtype: int | None = None) -> int | float | bool:
    """A Z3 numeral as a Python number (a bit-vector as signed when `dtype` is signed or
    not given)."""
    if z3.is_bv_value(v):
        return int(v.as_long()) if dtype is not None and dtype not in SIGNED else v.as_signed_long()
    if z3.is_fp_value(v):
        return fp_number(v)
    if z3.is_true(v) or z3.is_false(v):
        return bool(z3.is_true(v))
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


def _wide(*xs: Any) -> list[Any]:
    """Operands as object arrays when one is an integer beyond int64 (bit-vector widths)."""
    if any(isinstance(x, int) and abs(x) >= 2**63 for x in xs):
        return [np.asarray(x, dtype=object) for x in xs]
    return list(xs)


def _objects(xs: list[Any]) -> bool:
    return any(isinstance(x, int) and abs(x) >= 2**63 for x in xs) or any(
        isinstance(x, np.ndarray) and x.dtype == object for x in xs
    )


def _pair(a: Any, b: Any) -> list[Any]:
    """Both branches of an If as object arrays when either holds wide integers."""
    if _objects([a, b]):
        return [np.asarray(a, dtype=object), np.asarray(b, dtype=object)]
    return [a, b]


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
    z3.Z3_OP_SUB: lambda a, b: np.subtract(*_wide(a, b)),
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


def _wrap(x: Any, w: int) -> Any:
    """Integers as signed w-bit two's complement (bit-vectors are read as signed)."""
    x = np.asarray(x)
    x = np.asarray(np.frompyfunc(int, 1, 1)(x) if x.size else x, dtype=object)
    m = 1 << w
    return np.asarray((x + (m >> 1)) % m - (m >> 1)).astype(np.int64)


def _unsigned(x: Any, w: int) -> Any:
    return _wrap(x, w).astype(object) % (1 << w)


def _bv_div(a: Any, b: Any, w: int, signed: bool) -> Any:
    a, b = np.asarray(a).astype(object), np.asarray(b).astype(object)
    a, b = _wrap(a, 64).astype(object), _wrap(b, 64).astype(object)
    if not signed:
        a, b = a % (1 << w), b % (1 << w)
    safe = np.where(b == 0, 1, b)
    q = np.vectorize(lambda x, y: abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1))(a, safe)
    return _wrap(np.where(b == 0, 0, q), w)


def _bv_rem(a: Any, b: Any, w: int, kind: str) -> Any:
    """bvsrem (sign of a), bvsmod (sign of b) or bvurem; a where b is 0 (SMT-LIB)."""
    a, b = _wrap(a, 64).astype(object), _wrap(b, 64).astype(object)
    if kind == "urem":
        a, b = a % (1 << w), b % (1 << w)
    safe = np.where(b == 0, 1, b)
    if kind == "smod":
        r = np.vectorize(lambda x, y: x % y, otypes=[object])(a, safe)  # Python's: sign of y
    else:
        r = np.vectorize(lambda x, y: abs(x) % abs(y) * (1 if x >= 0 else -1), otypes=[object])(
            a, safe
        )
    return _wrap(np.where(b == 0, a, r), w)


def _interpret_bv(t: Any, args: list[Any]) -> Any:
    """Bit-vector operations, values as signed int64 (None: not a bit-vector operation)."""
    kind = t.decl().kind()
    w = t.size() if z3.is_bv(t) else 0
    ops: dict[int, Any] = {
        z3.Z3_OP_BADD: lambda: _wrap(sum(np.asarray(a).astype(object) for a in args), w),
        z3.Z3_OP_BSUB: lambda: _wrap(np.asarray(args[0]).astype(object) - args[1], w),
        z3.Z3_OP_BMUL: lambda: _wrap(np.prod([np.asarray(a).astype(object) for a in args], 0), w),
        z3.Z3_OP_BNEG: lambda: _wrap(-np.asarray(args[0]).astype(object), w),
        z3.Z3_OP_BSDIV: lambda: _bv_div(args[0], args[1], w, True),
        z3.Z3_OP_BSDIV_I: lambda: _bv_div(args[0], args[1], w, True),
        z3.Z3_OP_BUDIV: lambda: _bv_div(args[0], args[1], w, False),
        z3.Z3_OP_BUDIV_I: lambda: _bv_div(args[0], args[1], w, False),
        z3.Z3_OP_EXTRACT: lambda: _wrap(args[0], w),
        z3.Z3_OP_BSREM: lambda: _bv_rem(args[0], args[1], w, "srem"),
        z3.Z3_OP_BSREM_I: lambda: _bv_rem(args[0], args[1], w, "srem"),
        z3.Z3_OP_BSMOD: lambda: _bv_rem(args[0], args[1], w, "smod"),
        z3.Z3_OP_BSMOD_I: lambda: _bv_rem(args[0], args[1], w, "smod"),
        z3.Z3_OP_BUREM: lambda: _bv_rem(args[0], args[1], w, "urem"),
        z3.Z3_OP_BUREM_I: lambda: _bv_rem(args[0], args[1], w, "urem"),
        z3.Z3_OP_SIGN_EXT: lambda: np.asarray(args[0]),
        z3.Z3_OP_ZERO_EXT: lambda: _unsigned(args[0], t.arg(0).size()),
        z3.Z3_OP_INT2BV: lambda: _wrap(args[0], w),
        z3.Z3_OP_BV2INT: lambda: _unsigned(args[0], t.arg(0).size()),
        z3.Z3_OP_SLT: lambda: np.less(args[0], args[1]),
        z3.Z3_OP_SLEQ: lambda: np.less_equal(args[0], args[1]),
        z3.Z3_OP_SGT: lambda: np.greater(args[0], args[1]),
        z3.Z3_OP_SGEQ: lambda: np.greater_equal(args[0], args[1]),
    }
    fn = ops.get(kind)
    return None if fn is None else fn()


def _interpret(t: Any, env: Mapping[str, Any], memo: dict[int, Any]) -> Any:
    if z3.is_bv_value(t):
        return t.as_signed_long()
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
    bv = _interpret_bv(t, args)
    if bv is not None:
        return bv
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
            return np.where(args[0], *_pair(args[1], args[2]))
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
    """The axioms of every UF application in `terms`, instantiated at its argument, and for
    pairs of applications of one function: monotonicity (s < t <=> f(s) < f(t)) and, for exp
    in reals, exp(s) = exp(t)·exp(s - t) (one round: the new exp(s - t) gets its own ground
    axioms but no pairs). At most `PAIRS` applications per function get pair axioms."""
    facts: list[Any] = []
    apps = uf_applications(terms)
    by_decl: dict[str, list[Any]] = {}
    for app in apps:
        uf = UFS[app.decl().name()]
        fp = z3.is_fp(app)
        facts += [ax(app.arg(0)) for ax in (uf.fp_axioms if fp else uf.axioms)]
        by_decl.setdefault(app.decl().name(), []).append(app)
    for name, group in by_decl.items():
        if len(group) > PAIRS:
            continue
        uf = UFS[name]
        for i, f in enumerate(group):
            for g in group[i + 1 :]:
                s, t = f.arg(0), g.arg(0)
                if uf.monotone and not z3.is_fp(s):
                    facts.append((s < t) == (f < g))
                if name == "exp":
                    shift = uf(z3.simplify(s - t))
                    facts += [ax(shift.arg(0)) for ax in uf.axioms]
                    facts.append(f == g * shift)
    return facts


PAIRS = 12


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
