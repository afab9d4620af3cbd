"""Mean and Mod as ORT computes them: numpy references and Z3 semantics (not an op module:
`elementwise.py` registers the ops with these).

Mean(x1..xn) = (x1 + ... + xn)·(1/n): ORT's kernel sums left to right and multiplies by 1/n,
both in float32 for float16 and float32 inputs (float16 is widened once and the result rounded
once; 1/n is the float32 quotient); ORT has no double Mean (double is modelled the same way in
double).

Mod(a, b), broadcast, a's dtype:
- fmod=0 (integers only: ORT refuses floats before opset 28): the remainder with the sign of
  the divisor, a - b·floor(a/b) (Python's %; bit-vector `bvsmod`, `bvurem` unsigned);
- fmod=1: the remainder with the sign of the dividend, a - b·trunc(a/b) (C's fmod; integers
  `bvsrem` / `bvurem`; floats exact: IEEE's remainder, moved by |b| toward a's sign where its
  sign differs from a's; fmod(x, ±inf) = x, fmod(±inf, y) = fmod(x, 0) = NaN; in reals
  a - b·trunc(a/b), defined for b != 0).
An integer divisor of 0 is undefined (ORT fails: "Integer modulo by zero"): `require`.
INT_MIN mod -1 is 0 (ORT gives 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import SIGNED, const, domain, float_only, is_int, require, to_real, vmap
from rewrite.ops.base import OpCall, fail

Array = np.ndarray
_F16, _DOUBLE = TensorProto.FLOAT16, TensorProto.DOUBLE


def mean_scale(n: int, dtype: int) -> float:
    """1/n as ORT's Mean multiplies by it: the float32 quotient (double: the double one)."""
    if dtype == _DOUBLE:
        return 1.0 / n
    return float(np.float32(1) / np.float32(n))


def mean_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Mean(x1..xn) = (x1 + ... + xn)·(1/n), summed and scaled in float32 (double: double)."""
    xs = [a for a in arrays if a is not None]
    work = np.float64 if xs[0].dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        total = xs[0].astype(work)
        for x in xs[1:]:
            total = total + x.astype(work)
        out = total * work(mean_scale(len(xs), call.input(0).dtype))
        return [np.asarray(out).astype(xs[0].dtype)]


def _widen(t: Any) -> Any:
    """A float16 IEEE term as float32 (exact); other terms as they are."""
    if z3.is_fp(t) and t.sort() == z3.Float16():
        return z3.fpFPToFP(z3.RNE(), t, z3.Float32())
    return t


def mean_z3(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Mean over Z3 terms: ((x1 + x2) + ...)·(1/n) in float32 for float16, rounded once."""
    float_only(call)
    xs = [a for a in arrays if a is not None]
    scale = mean_scale(len(xs), call.input(0).dtype)

    def mean(*ts: Any) -> Any:
        total = _widen(ts[0])
        for t in ts[1:]:
            total = total + _widen(t)
        out = total * const(scale, total)
        if z3.is_fp(ts[0]) and out.sort() != ts[0].sort():
            return z3.fpFPToFP(z3.RNE(), out, ts[0].sort())
        return out

    return [vmap(mean, *xs)]


def mod_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """fmod=0: sign of the divisor (Python %); fmod=1: sign of the dividend (C fmod)."""
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    fn = np.fmod if call.attr("fmod", 0) else np.mod
    with np.errstate(all="ignore"):
        return [fn(a, b).astype(a.dtype, copy=False)]


def _fp_fmod(a: Any, b: Any) -> Any:
    """C fmod of IEEE terms, exactly: IEEE's remainder r (|r| <= |b|/2), plus |b| with a's
    sign where r's sign differs from a's (the sum is fmod's value, representable: exact)."""
    r = z3.fpRem(a, b)
    toward = z3.If(z3.fpIsNegative(a), z3.fpNeg(z3.fpAbs(b)), z3.fpAbs(b))
    flip = z3.And(z3.Not(z3.fpIsZero(r)), z3.fpIsNegative(r) != z3.fpIsNegative(a))
    return z3.If(flip, z3.fpAdd(z3.RNE(), r, toward), r)


def _real_fmod(a: Any, b: Any) -> Any:
    """a - b·trunc(a/b) in reals, defined for b != 0."""
    a, b = to_real(a), to_real(b)
    domain(b != 0)
    q = a / b
    trunc = z3.If(q >= 0, z3.ToReal(z3.ToInt(q)), -z3.ToReal(z3.ToInt(-q)))
    return a - b * trunc


def mod_z3(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Mod over Z3 terms (module docstring)."""
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    dt = call.input(0).dtype
    fmod = int(call.attr("fmod", 0))
    if not is_int(dt):
        float_only(call)
        if not fmod:
            raise fail(call, "fmod must be 1 for floating dtypes")
        return [vmap(lambda s, t: _fp_fmod(s, t) if z3.is_fp(s) else _real_fmod(s, t), a, b)]
    signed = dt in SIGNED

    def rem(s: Any, t: Any) -> Any:
        require(t != 0)
        if not signed:
            return z3.URem(s, t)
        return z3.SRem(s, t) if fmod else s % t  # `%` of bit-vectors is bvsmod

    return [vmap(rem, a, b)]
