"""Z3 semantics of the rounding, sign, log, trigonometric and float-class unary ops (not an op
module: `unary.py` registers the ops with these).

Each function maps one element term to one element term, in the model its sort says
(`rewrite.ops._z3`): a bit-vector (integers, both models), an IEEE float (`IEEE`) or a real
(`REAL`). Log, Sin and Cos are uninterpreted functions (`UF`) with true axioms
(tests/verify/test_semantics.py checks them numerically); in IEEE their special values
(NaN, ±inf, ±0, negative arguments of Log) are interpreted, as ORT computes them, so the UF
is applied only where the real function is finite and defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import SIGNED, UF, const, domain, float_only, to_real, vmap
from rewrite.ops.base import OpCall, Z3Fn

Array = np.ndarray

_FLOAT16 = TensorProto.FLOAT16


def nan_of(t: Any) -> Any:
    """The NaN of an IEEE term's sort."""
    return z3.fpNaN(t.sort())


def _edge(fn: Callable[[float], float], nan_at_inf: bool) -> Callable[[float], float]:
    """`fn` on Python floats with IEEE results at the edges: NaN in, NaN out; ±inf in: NaN
    (`nan_at_inf`, sin and cos) or `fn`'s limit; outside the domain: NaN; -inf at log(0)."""

    def f(x: float) -> float:
        x = float(x)
        if math.isnan(x) or (nan_at_inf and math.isinf(x)):
            return math.nan
        try:
            return float(fn(x))
        except ValueError:
            return -math.inf if x == 0 and fn is math.log else math.nan
        except OverflowError:
            return math.inf

    f.__name__ = fn.__name__
    return f


def _log_concrete(x: float) -> float:
    return math.inf if x == math.inf else _edge(math.log, False)(x)


LOG: UF = UF(
    "log",
    _log_concrete,
    (
        lambda t: z3.Implies(t == 1, LOG(t) == 0),
        lambda t: z3.Implies(t > 0, (LOG(t) > 0) == (t > 1)),
    ),
    (
        lambda t: z3.Implies(
            z3.And(z3.fpIsPositive(t), z3.Not(z3.fpIsZero(t)), z3.Not(z3.fpIsInf(t))),
            z3.And(z3.Not(z3.fpIsNaN(LOG(t))), z3.Not(z3.fpIsInf(LOG(t)))),
        ),
        lambda t: z3.Implies(z3.fpEQ(t, const(1, t)), LOG(t) == const(0, t)),
        lambda t: z3.Implies(z3.fpGT(t, const(1, t)), z3.fpGEQ(LOG(t), const(0, t))),
        lambda t: z3.Implies(
            z3.And(z3.fpGT(t, const(0, t)), z3.fpLT(t, const(1, t))),
            z3.fpLEQ(LOG(t), const(0, t)),
        ),
    ),
)


def _fp_trig_axioms(f: Callable[[Any], Any], odd: bool) -> tuple[Callable[[Any], Any], ...]:
    """IEEE axioms of sin and cos: NaN exactly at NaN and ±inf; else within [-1, 1]; sin odd
    and cos even bit for bit (ORT's float16/32/64 kernels are: checked on 150k values)."""
    sym = (
        (lambda t: f(z3.fpNeg(t)) == z3.fpNeg(f(t))) if odd else (lambda t: f(z3.fpNeg(t)) == f(t))
    )
    return (
        sym,
        lambda t: z3.fpIsNaN(f(t)) == z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t)),
        lambda t: z3.Implies(
            z3.Not(z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t))),
            z3.And(z3.fpGEQ(f(t), const(-1, t)), z3.fpLEQ(f(t), const(1, t))),
        ),
    )


SIN: UF = UF(
    "sin",
    _edge(math.sin, True),
    (
        lambda t: z3.And(SIN(t) >= -1, SIN(t) <= 1),
        lambda t: SIN(-t) == -SIN(t),
        lambda t: z3.Implies(t == 0, SIN(t) == 0),
        lambda t: SIN(t) * SIN(t) + COS(t) * COS(t) == 1,
    ),
    _fp_trig_axioms(lambda t: SIN(t), odd=True),
)
COS: UF = UF(
    "cos",
    _edge(math.cos, True),
    (
        lambda t: z3.And(COS(t) >= -1, COS(t) <= 1),
        lambda t: COS(-t) == COS(t),
        lambda t: z3.Implies(t == 0, COS(t) == 1),
    ),
    _fp_trig_axioms(lambda t: COS(t), odd=False),
)


def z3_log(t: Any) -> Any:
    """log(t): IEEE NaN below 0 and at NaN, -inf at ±0, +inf at +inf, else `LOG`; in reals
    `LOG`, defined for t > 0 (`domain`)."""
    if z3.is_fp(t):
        s = t.sort()
        positive = z3.If(z3.fpIsInf(t), z3.fpPlusInfinity(s), LOG(t))
        below = z3.If(z3.fpIsNegative(t), nan_of(t), positive)
        return z3.If(z3.fpIsNaN(t), nan_of(t), z3.If(z3.fpIsZero(t), z3.fpMinusInfinity(s), below))
    domain(to_real(t) > 0)
    return LOG(t)


def trig(uf: UF, at_zero: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A periodic function's element function: IEEE NaN at NaN and ±inf, `at_zero(t)` at
    ±0, else `uf`; in reals `uf`."""

    def fn(t: Any) -> Any:
        if z3.is_fp(t):
            body = z3.If(z3.fpIsZero(t), at_zero(t), uf(t))
            return z3.If(z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t)), nan_of(t), body)
        return uf(t)

    fn.__name__ = uf.name
    return fn


z3_sin = trig(SIN, lambda t: t)  # sin(±0) = ±0
z3_cos = trig(COS, lambda t: const(1, t))


def z3_abs(signed: bool) -> Callable[[Any], Any]:
    """|t|: IEEE fpAbs (NaN stays NaN); two's complement wraps (Abs(INT_MIN) = INT_MIN);
    unsigned integers are their own absolute value."""

    def fn(t: Any) -> Any:
        if z3.is_fp(t):
            return z3.fpAbs(t)
        if z3.is_bv(t) and not signed:
            return t
        return z3.If(t < const(0, t), -t, t)

    return fn


def z3_sign(dtype: int, signed: bool) -> Callable[[Any], Any]:
    """sign(t) in {-1, 0, 1} (Sign(±0) = +0); NaN gives NaN, except in float16 where ORT's
    kernel gives 0."""

    def fn(t: Any) -> Any:
        one, zero = const(1, t), const(0, t)
        if z3.is_bv(t) and not signed:
            return z3.If(t != zero, one, zero)
        body = z3.If(t > zero, one, z3.If(t < zero, const(-1, t), zero))
        if z3.is_fp(t):
            return z3.If(z3.fpIsNaN(t), zero if dtype == _FLOAT16 else nan_of(t), body)
        return body

    return fn


def _floor_real(t: Any) -> Any:
    return z3.ToReal(z3.ToInt(to_real(t)))


def z3_floor(t: Any) -> Any:
    """floor(t): IEEE round toward -inf (NaN, ±inf and ±0 stay); in reals ToInt."""
    return z3.fpRoundToIntegral(z3.RTN(), t) if z3.is_fp(t) else _floor_real(t)


def z3_ceil(t: Any) -> Any:
    """ceil(t): IEEE round toward +inf; in reals -floor(-t)."""
    return z3.fpRoundToIntegral(z3.RTP(), t) if z3.is_fp(t) else -_floor_real(-to_real(t))


def z3_round(t: Any) -> Any:
    """Round half to even (ONNX Round): IEEE roundToIntegral(RNE); in reals from floor."""
    if z3.is_fp(t):
        return z3.fpRoundToIntegral(z3.RNE(), t)
    r = to_real(t)
    f = _floor_real(r)
    d = r - f
    even = _floor_real(f / 2) * 2 == f
    half = z3.RealVal(1) / 2
    return z3.If(d < half, f, z3.If(d > half, f + 1, z3.If(even, f, f + 1)))


def z3_isnan(t: Any) -> Any:
    """IsNaN: IEEE's NaN class; reals have no NaN (false)."""
    return z3.fpIsNaN(t) if z3.is_fp(t) else z3.BoolVal(False)


def z3_isinf(positive: bool, negative: bool) -> Callable[[Any], Any]:
    """IsInf(detect_positive, detect_negative): the infinities asked for; reals have none."""

    def fn(t: Any) -> Any:
        if not z3.is_fp(t):
            return z3.BoolVal(False)
        pos = z3.And(z3.fpIsInf(t), z3.fpIsPositive(t)) if positive else z3.BoolVal(False)
        neg = z3.And(z3.fpIsInf(t), z3.fpIsNegative(t)) if negative else z3.BoolVal(False)
        return z3.Or(pos, neg)

    return fn


# -- per-call element functions (signedness, attributes) -----------------------------------


def detects(call: OpCall) -> tuple[bool, bool]:
    """IsInf's (detect_positive, detect_negative), both 1 by default."""
    return bool(call.attr("detect_positive", 1)), bool(call.attr("detect_negative", 1))


def z3_by_call(make: Callable[[OpCall], Callable[[Any], Any]], *, floats: bool = False) -> Z3Fn:
    """Z3 semantics of an elementwise unary op whose element function depends on the call
    (the dtype's signedness, attributes)."""

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        if floats:
            float_only(call)
        x = arrays[0]
        assert x is not None
        return [vmap(make(call), x)]

    semantics.__doc__ = make.__doc__
    return semantics


def abs_fn(call: OpCall) -> Callable[[Any], Any]:
    """|x| (`_unary_z3.z3_abs`: two's complement wraps)."""
    return z3_abs(call.input(0).dtype in SIGNED)


def sign_fn(call: OpCall) -> Callable[[Any], Any]:
    """sign(x) (`_unary_z3.z3_sign`)."""
    dtype = call.input(0).dtype
    return z3_sign(dtype, dtype in SIGNED)


def isinf_fn(call: OpCall) -> Callable[[Any], Any]:
    """IsInf with its detect_positive / detect_negative attributes."""
    return z3_isinf(*detects(call))
