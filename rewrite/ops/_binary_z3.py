"""Pow, Max and Min as ORT computes them: numpy and Z3 semantics (not an op module:
`elementwise.py` registers the ops with these).

Pow: ORT's kernel (element_wise_ops.cc, `PowImpl`) takes, for some shapes, a `Y is a scalar`
path that computes Y == 2 as x·x and Y == 3 as x·x·x in X's dtype (integers wrap);
everywhere else it converts `std::pow(x, y)` to X's dtype (float32 powf when both are
float32, double pow otherwise; a double out of an integer dtype's range, or NaN, becomes the
dtype's minimum, as x86 converts). Z3: on numerals the value is computed so (`pow_general`);
otherwise pow(x, ±0) = 1 and pow(1, y) = 1 (C99 F.9.4.4, NaN included), the x·x / x·x·x path
exactly, and an uninterpreted function of (x, y) per sort pair elsewhere; in reals
pow(x, y) = exp(y·log(x)), defined for x > 0 (`domain`).

Max/Min (two inputs): NaN if either is NaN, else Max = a if a > b else b, Min = a if a < b
else b (so Max(-0, +0) = +0 and Max(+0, -0) = -0, as ORT gives).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._unary_z3 import LOG
from rewrite.ops._z3 import SIGNED, const, domain, is_int, to_real, vmap
from rewrite.ops.base import OpCall, np_dtype

Array = np.ndarray
Term = Any


def pow_multiplies(x: tuple[int, ...], y: tuple[int, ...]) -> bool:
    """Whether ORT's Pow kernel takes its `Y is a scalar` path for these static shapes.

    ORT's Broadcaster walks the dims from the right: the first dim pair decides (pairs of 1s
    are skipped while more dims remain; when one input has rank 0, the other's last dim). X
    scalar there (dim <= 1): plain std::pow; else Y scalar there: the x·x / x·x·x path."""
    if not x:
        return False
    if not y:
        return x[-1] > 1
    n = min(len(x), len(y))
    for i in range(1, n + 1):
        a, b = x[-i], y[-i]
        if max(a, b) <= 1 and i < n:
            continue
        return a > 1 and b <= 1
    return False


def pow_general(a: Array, b: Array) -> Array:
    """ORT's std::pow path: powf when both are float32 (any one float dtype: numpy's power in
    it), else double pow converted to X's dtype (integers: truncated; out of range or NaN:
    the dtype's minimum)."""
    if a.dtype == b.dtype and a.dtype.kind == "f":
        return np.power(a, b)
    out = np.power(a.astype(np.float64), b.astype(np.float64))
    if a.dtype.kind not in "iu":
        return out.astype(a.dtype)
    info = np.iinfo(a.dtype)
    bad = ~np.isfinite(out) | (out <= float(info.min) - 1) | (out >= float(info.max) + 1)
    return np.where(bad, info.min, np.trunc(np.where(bad, 0, out))).astype(a.dtype)


def _value(t: Term, dtype: int) -> int | float | None:
    """The number a numeral term stands for (None: not a bit-vector or IEEE numeral)."""
    if z3.is_bv_value(t):
        return int(t.as_signed_long()) if dtype in SIGNED else int(t.as_long())
    if z3.is_fp_value(t):
        if t.isNaN():
            return float("nan")
        if t.isInf():
            return float("-inf") if t.isNegative() else float("inf")
        if t.isZero():
            return -0.0 if t.isNegative() else 0.0
        r = z3.simplify(z3.fpToReal(t))
        return float(Fraction(int(r.numerator_as_long()), int(r.denominator_as_long())))
    return None


def _numeral(v: Any, like: Term) -> Term:
    if z3.is_fp(like):
        return z3.FPVal(float(v), like.sort())
    return z3.BitVecVal(int(v), like.size())


def _is(t: Term, v: int) -> Term:
    """t == v as numbers (IEEE equality on floats: -0 = +0)."""
    return z3.fpEQ(t, const(v, t)) if z3.is_fp(t) else t == const(v, t)


_POW_DECLS: dict[str, Any] = {}


def _pow_uf(a: Term, b: Term) -> Term:
    name = f"pow_{a.sort()}_{b.sort()}".replace(" ", "").replace("(", "").replace(")", "")
    if name not in _POW_DECLS:
        _POW_DECLS[name] = z3.Function(name, a.sort(), b.sort(), a.sort())
    return _POW_DECLS[name](a, b)


def _pow_element(a: Term, b: Term, xdt: int, ydt: int) -> Term:
    """std::pow(a, b) converted to X's dtype, as a term (see the module docstring)."""
    va, vb = _value(a, xdt), _value(b, ydt)
    if va is not None and vb is not None:
        with np.errstate(all="ignore"):
            x = np.asarray(va, dtype=np_dtype(xdt))
            y = np.asarray(vb, dtype=np_dtype(ydt))
            return _numeral(pow_general(x, y).item(), a)
    if z3.is_fp(a) or z3.is_bv(a):
        one = const(1, a)
        return z3.If(_is(b, 0), one, z3.If(_is(a, 1), one, _pow_uf(a, b)))
    from rewrite.ops.unary import EXP  # unary imports elementwise, which imports this module

    y = z3.ToReal(z3.BV2Int(b, is_signed=ydt in SIGNED)) if z3.is_bv(b) else to_real(b)
    domain(to_real(a) > 0)
    return EXP(y * LOG(a))


def z3_pow(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Pow(X, Y) elementwise, as ORT computes it (see the module docstring)."""
    x, y = arrays[0], arrays[1]
    assert x is not None and y is not None
    xdt, ydt = call.input(0).dtype, call.input(1).dtype
    multiplies = pow_multiplies(x.shape, y.shape)

    def element(a: Term, b: Term) -> Term:
        general = _pow_element(a, b, xdt, ydt)
        if not multiplies:
            return general
        vb = _value(b, ydt) if z3.is_expr(b) else None
        if vb is not None:  # a numeral exponent picks its branch
            return a * a if vb == 2 else a * a * a if vb == 3 else general
        return z3.If(_is(b, 2), a * a, z3.If(_is(b, 3), a * a * a, general))

    with np.errstate(all="ignore"):  # numerals: the FPU flags are read after the whole loop
        return [vmap(element, x, y)]


def _extreme(bigger: bool, signed: bool) -> Any:
    def fn(a: Term, b: Term) -> Term:
        if z3.is_bv(a) and not signed:
            wins = z3.UGT(a, b) if bigger else z3.ULT(a, b)
        else:
            wins = a > b if bigger else a < b
        pick = z3.If(wins, a, b)
        if z3.is_fp(a):
            return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpNaN(a.sort()), pick)
        return pick

    return fn


def z3_max_min(name: str) -> Any:
    """Max or Min of two inputs (see the module docstring)."""

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        a, b = arrays[0], arrays[1]
        assert a is not None and b is not None
        dt = call.input(0).dtype
        return [vmap(_extreme(name == "Max", not is_int(dt) or dt in SIGNED), a, b)]

    semantics.__doc__ = f"{name}(a, b): NaN if either is NaN, else the {name.lower()}imum."
    return semantics
