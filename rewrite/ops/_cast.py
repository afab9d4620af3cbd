"""Z3 semantics of Cast: every pair of supported dtypes, as ORT's CPU kernel computes it.

Measured on ORT 1.2x/1.3x (tests/ops/test_cast_semantics.py re-checks each case):
- int -> int: the low bits (wrap), sign- or zero-extended by the source's signedness;
- int -> float: rounded to the target's mantissa (24 bits float32, 11 float16, 8 bfloat16),
  round to nearest even; bool -> number: 0 or 1;
- float -> float: rounded to nearest even, overflow to ±inf, NaN stays NaN;
- float -> int64 / int32: truncated toward zero; NaN, ±inf and values out of range give
  INT_MIN of the target (x86's "integer indefinite");
- float -> int16 / int8 / uint8 / uint16: through int32 as above, then wrapped;
- float -> uint32 / uint64: truncated and wrapped when the value truncates into
  [-2^31, 2^32) (uint32) or (-2^63, 2^63) (uint64); otherwise a value the semantics leave
  open (an uninterpreted function of the input);
- anything -> bool: nonzero (NaN is true).
In the real model a float is a real number: float -> float is the identity and int -> float is
exact (rounding and overflow are the IEEE model's to check); float -> int truncates, with the
out-of-range values above.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import FP_SORTS, IEEE, RNE, SIGNED, WIDTH, current_model, to_real

_OPEN: dict[tuple[Any, int], Any] = {}


def cast(t: Any, src: int, to: int) -> Any:
    """One element `t` of dtype `src` cast to dtype `to` (see the module docstring)."""
    if src == to:
        return t
    if to == 9:  # BOOL
        return _to_bool(t)
    if z3.is_bool(t):
        return _from_bool(t, to)
    if to in WIDTH:
        if z3.is_bv(t):
            return _bv_to_bv(t, src, to)
        return _float_to_int(t, to)
    if z3.is_bv(t):
        return _int_to_float(t, src, to)
    if z3.is_fp(t):
        return z3.fpToFP(RNE, t, FP_SORTS[to])
    return t  # real -> real


def _to_bool(t: Any) -> Any:
    if z3.is_bool(t):
        return t
    if z3.is_fp(t):
        return z3.Not(z3.fpIsZero(t))
    if z3.is_bv(t):
        return t != 0
    return to_real(t) != 0


def _from_bool(b: Any, to: int) -> Any:
    if to in WIDTH:
        return z3.If(b, z3.BitVecVal(1, WIDTH[to]), z3.BitVecVal(0, WIDTH[to]))
    if current_model() == IEEE:
        s = FP_SORTS[to]
        return z3.If(b, z3.FPVal(1.0, s), z3.FPVal(0.0, s))
    return z3.If(b, z3.RealVal(1), z3.RealVal(0))


def _bv_to_bv(t: Any, src: int, to: int) -> Any:
    w, v = t.size(), WIDTH[to]
    if v < w:
        return z3.Extract(v - 1, 0, t)
    if v == w:
        return t
    return z3.SignExt(v - w, t) if src in SIGNED else z3.ZeroExt(v - w, t)


def _int_to_float(t: Any, src: int, to: int) -> Any:
    if current_model() == IEEE:
        sort = FP_SORTS[to]
        return z3.fpSignedToFP(RNE, t, sort) if src in SIGNED else z3.fpUnsignedToFP(RNE, t, sort)
    return z3.BV2Int(t, is_signed=src in SIGNED) * z3.RealVal(1)


def _float_to_int(t: Any, to: int) -> Any:
    if to in (7, 6):  # INT64, INT32
        return _saturating(t, WIDTH[to])
    if to in (3, 5, 2, 4):  # INT8, INT16, UINT8, UINT16: through int32, then wrapped
        return z3.Extract(WIDTH[to] - 1, 0, _saturating(t, 32))
    w = WIDTH[to]  # UINT32, UINT64: measured only on these ranges
    via = _saturating(t, 64)
    lo, hi = (-(2**31), 2**32 - 1) if w == 32 else (-(2**63) + 1, 2**63 - 1)
    in_range = _between(t, lo, hi)
    return z3.If(in_range, z3.Extract(w - 1, 0, via), _open(t, w))


def _saturating(t: Any, w: int) -> Any:
    """Truncate toward zero to a signed w-bit int; INT_MIN for NaN, inf or out of range."""
    lo, hi = -(2 ** (w - 1)), 2 ** (w - 1)
    if z3.is_fp(t):
        ok = _between(t, lo, hi - 1)
        return z3.If(ok, z3.fpToSBV(z3.RTZ(), t, z3.BitVecSort(w)), z3.BitVecVal(lo, w))
    r = to_real(t)
    ok = z3.And(r > lo - 1, r < hi)
    whole = z3.If(r >= 0, z3.ToInt(r), -z3.ToInt(-r))
    return z3.If(ok, z3.Int2BV(whole, w), z3.BitVecVal(lo, w))


def _between(t: Any, lo: int, hi: int) -> Any:
    """lo - 1 < t < hi + 1 (t truncates into [lo, hi])."""
    if z3.is_fp(t):  # fp.to_real is exact for finite t
        r = z3.fpToReal(t)
        return z3.And(z3.Not(z3.fpIsNaN(t)), z3.Not(z3.fpIsInf(t)), r > lo - 1, r < hi + 1)
    r = to_real(t)
    return z3.And(r > lo - 1, r < hi + 1)


def _open(t: Any, w: int) -> Any:
    key = (t.sort(), w)
    if key not in _OPEN:
        name = f"cast_out_of_range_{len(_OPEN)}"
        _OPEN[key] = z3.Function(name, t.sort(), z3.BitVecSort(w))
    return _OPEN[key](t)
