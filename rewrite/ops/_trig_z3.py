"""Z3 semantics of Tan, Asin, Acos, Atan, Sinh and Cosh (not an op module: `trig.py`
registers the ops with these).

Each is an uninterpreted function (`UF`) whose concrete meaning is numpy's float64 function
(inf on overflow, NaN outside the domain). In IEEE the special values are interpreted as ORT's
CPU kernels give them (float32; float16 runs through float32), so the UF is applied only
where the real function is finite and defined:
- Tan: NaN at NaN and ±inf, tan(±0) = ±0;
- Asin: NaN at NaN and |x| > 1, asin(±0) = ±0; Acos: NaN at NaN and |x| > 1, acos(-0) =
  acos(+0);
- Atan: NaN at NaN, atan(±0) = ±0, atan(±inf) = ±π/2 rounded to the dtype;
- Sinh: NaN at NaN, sinh(±0) = ±0, sinh(±inf) = ±inf; Cosh: NaN at NaN, cosh(±inf) = +inf,
  cosh(±0) = 1.
In reals Sinh and Cosh are defined by exp ((e^x ∓ e^-x)/2) and Tan by sin/cos (defined where
cos(x) != 0); Asin and Acos are defined for |x| <= 1 (`domain`).

Axioms (true of the real functions: tests/verify/test_semantics.py checks them numerically;
the IEEE ones were checked on ORT's float32 and float16 kernels, 700k and 30k values): odd
functions are odd (bit for bit in IEEE) and keep the sign of x, Cosh is even and >= 1, Asin
and Atan lie within ±π/2 (±1.5708 in reals), Acos within [0, π] (3.1416), acos(1) = 0, asin
and atan are strictly increasing (`monotone`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._unary_z3 import COS, SIN, nan_of, trig
from rewrite.ops._z3 import UF, const, divide, domain, to_real
from rewrite.ops.unary import EXP

Axiom = Callable[[Any], Any]
HALF_PI_UP = 1.5708
"""An upper bound of π/2 (1.5707963...) as a short decimal, for the real axioms."""
PI_UP = 3.1416


def _numpy(fn: Callable[[Any], Any]) -> Callable[[float], float]:
    """numpy's float64 `fn` on a Python float (inf on overflow, NaN outside the domain)."""

    def f(x: float) -> float:
        with np.errstate(all="ignore"):
            return float(fn(np.float64(x)))

    f.__name__ = fn.__name__
    return f


def _in_domain(t: Any) -> Any:
    """-1 <= t <= 1 (asin's and acos's domain), for a real or an IEEE term."""
    if z3.is_fp(t):
        return z3.fpLEQ(z3.fpAbs(t), const(1, t))
    return z3.And(t >= -1, t <= 1)


def _fp_odd(f: Callable[[Any], Any]) -> tuple[Axiom, ...]:
    """IEEE: f(-t) = -f(t) bit for bit, and t > 0 gives f(t) >= 0."""
    return (
        lambda t: f(z3.fpNeg(t)) == z3.fpNeg(f(t)),
        lambda t: z3.Implies(z3.fpGT(t, const(0, t)), z3.fpGEQ(f(t), const(0, t))),
    )


def _fp_within(f: Callable[[Any], Any], lo: float, hi: float, where: Axiom) -> Axiom:
    """IEEE: where `where(t)`, f(t) is a number within [lo, hi] (bounds rounded to the sort)."""
    return lambda t: z3.Implies(
        where(t), z3.And(z3.fpGEQ(f(t), const(lo, t)), z3.fpLEQ(f(t), const(hi, t)))
    )


def _finite(t: Any) -> Any:
    return z3.Not(z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t)))


def _real_odd(f: Callable[[Any], Any], where: Axiom = lambda t: True) -> tuple[Axiom, ...]:
    """Reals: where `where(t)`, f(-t) = -f(t) and f(t) > 0 exactly when t > 0."""
    return (
        lambda t: z3.Implies(where(t), f(-t) == -f(t)),
        lambda t: z3.Implies(where(t), (f(t) > 0) == (t > 0)),
    )


TAN: UF = UF(
    "tan",
    _numpy(np.tan),
    (),
    (
        *_fp_odd(lambda t: TAN(t)),
        lambda t: z3.fpIsNaN(TAN(t)) == z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t)),
    ),
    real_def=lambda t: divide(SIN(t), COS(t)),
)
ASIN: UF = UF(
    "asin",
    _numpy(np.arcsin),
    (
        *_real_odd(lambda t: ASIN(t), _in_domain),
        lambda t: z3.Implies(_in_domain(t), z3.And(ASIN(t) >= -HALF_PI_UP, ASIN(t) <= HALF_PI_UP)),
    ),
    (
        *_fp_odd(lambda t: ASIN(t)),
        _fp_within(lambda t: ASIN(t), -math.pi / 2, math.pi / 2, _in_domain),
    ),
    monotone=True,
)
ACOS: UF = UF(
    "acos",
    _numpy(np.arccos),
    (
        lambda t: z3.Implies(_in_domain(t), z3.And(ACOS(t) >= 0, ACOS(t) <= PI_UP)),
        lambda t: z3.Implies(t == 1, ACOS(t) == 0),
        lambda t: z3.Implies(_in_domain(t), (ACOS(t) > 0) == (t < 1)),
    ),
    (_fp_within(lambda t: ACOS(t), 0.0, math.pi, _in_domain),),
)
ATAN: UF = UF(
    "atan",
    _numpy(np.arctan),
    (
        *_real_odd(lambda t: ATAN(t)),
        lambda t: z3.And(ATAN(t) > -HALF_PI_UP, ATAN(t) < HALF_PI_UP),
    ),
    (
        *_fp_odd(lambda t: ATAN(t)),
        _fp_within(lambda t: ATAN(t), -math.pi / 2, math.pi / 2, lambda t: z3.Not(z3.fpIsNaN(t))),
    ),
    monotone=True,
)
SINH: UF = UF(
    "sinh",
    _numpy(np.sinh),
    (),
    (
        *_fp_odd(lambda t: SINH(t)),
        lambda t: z3.fpIsNaN(SINH(t)) == z3.fpIsNaN(t),
    ),
    real_def=lambda t: (EXP(t) - EXP(-t)) / 2,
    monotone=True,
)
COSH: UF = UF(
    "cosh",
    _numpy(np.cosh),
    (),
    (
        lambda t: COSH(z3.fpNeg(t)) == COSH(t),
        lambda t: z3.Implies(_finite(t), z3.fpGEQ(COSH(t), const(1, t))),
    ),
    real_def=lambda t: (EXP(t) + EXP(-t)) / 2,
)


def z3_tan(t: Any) -> Any:
    """tan(t): IEEE NaN at NaN and ±inf, ±0 at ±0, else `TAN`; in reals sin(t)/cos(t)."""
    return trig(TAN, lambda t: t)(t)


def _arc(uf: UF, at_zero: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """asin / acos: IEEE NaN at NaN and |t| > 1, `at_zero(t)` at ±0, else `uf`; in reals
    `uf`, defined for |t| <= 1 (`domain`)."""

    def fn(t: Any) -> Any:
        if z3.is_fp(t):
            body = z3.If(z3.fpIsZero(t), at_zero(t), uf(t))
            return z3.If(z3.Not(_in_domain(t)), nan_of(t), body)  # NaN is not in the domain
        domain(_in_domain(to_real(t)))
        return uf(t)

    fn.__name__ = uf.name
    return fn


z3_asin = _arc(ASIN, lambda t: t)
z3_acos = _arc(ACOS, lambda t: ACOS(z3.fpAbs(t)))  # acos(-0) = acos(+0)


def z3_atan(t: Any) -> Any:
    """atan(t): IEEE NaN at NaN, ±0 at ±0, ±π/2 (rounded) at ±inf, else `ATAN`."""
    if not z3.is_fp(t):
        return ATAN(t)
    half_pi = const(math.pi / 2, t)
    at_inf = z3.If(z3.fpIsPositive(t), half_pi, z3.fpNeg(half_pi))
    body = z3.If(z3.fpIsInf(t), at_inf, z3.If(z3.fpIsZero(t), t, ATAN(t)))
    return z3.If(z3.fpIsNaN(t), nan_of(t), body)


def z3_sinh(t: Any) -> Any:
    """sinh(t): IEEE NaN at NaN, t itself at ±0 and ±inf, else `SINH`; in reals by exp."""
    if not z3.is_fp(t):
        return SINH(t)
    keep = z3.Or(z3.fpIsZero(t), z3.fpIsInf(t))
    return z3.If(z3.fpIsNaN(t), nan_of(t), z3.If(keep, t, SINH(t)))


def z3_cosh(t: Any) -> Any:
    """cosh(t): IEEE NaN at NaN, +inf at ±inf, 1 at ±0, else `COSH`; in reals by exp."""
    if not z3.is_fp(t):
        return COSH(t)
    body = z3.If(z3.fpIsZero(t), const(1, t), COSH(t))
    return z3.If(z3.fpIsNaN(t), nan_of(t), z3.If(z3.fpIsInf(t), z3.fpAbs(t), body))
