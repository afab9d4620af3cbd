"""Z3 semantics of ReduceSum, ReduceMean and ReduceSumSquare, and their integer reference
(not an op module; `reduce.py` registers the ops).

Contract of `reduce_terms(op, x, dtype, axes)` (x: object array of Z3 terms, `axes` the
normalized reduced axes, or None for noop_with_empty_axes with no axes): the keepdims-shaped
result ORT 1.32's CPU kernel computes with one intra-op thread (`_reduce_order` says in which
order it adds, and why):
- float32 / float64: the addition tree of `_reduce_order.float_trees` in IEEE arithmetic
  (ReduceSumSquare's leaves x·x rounded first; ReduceMean's sum then divided by the count);
  float16: the same in float32 (inputs widened exactly), rounded to float16 once; in the
  real model just the sum (of squares), divided by the count for ReduceMean;
- int32: the exact sum (of squares) saturated to [INT32_MIN, INT32_MAX] (ORT sums in
  float64, exact for int32); ReduceMean the exact sum divided by the count, truncated;
- int64: ORT's float64 computation itself: each element converted to float64 (rounding to
  nearest), summed in row-major order with or without Kahan compensation
  (`_reduce_order.int_kahan`), divided by the count for ReduceMean, then saturated
  (>= 2^63: INT64_MAX, <= -2^63: INT64_MIN) or truncated toward zero;
- noop (no axes, noop_with_empty_axes=1): X itself for ReduceSum and ReduceMean; x·x for
  ReduceSumSquare (saturated through float64 for integers), as ORT does;
- other dtypes: ORT has no kernel, so the instantiation does not exist (ShapeError).
`int_reference` is the numpy counterpart for integer arrays (the same float64 computation).
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._reduce_order import ZERO, Tree, float_trees, int_kahan, int_rows
from rewrite.ops._z3 import RNE, const, to_real
from rewrite.ops.base import OpCall, fail

Array = np.ndarray
P = TensorProto
SQUARE = "ReduceSumSquare"
MEAN = "ReduceMean"
_F64 = z3.Float64()


def check_dtype(call: OpCall) -> int:
    """X's dtype; fail (no ORT kernel, so no such graph) outside float/double/float16/int."""
    dtype = call.input(0).dtype
    if dtype not in (P.FLOAT, P.DOUBLE, P.FLOAT16, P.INT32, P.INT64):
        raise fail(call, "ORT has kernels for float, double, float16, int32 and int64 only")
    return dtype


def reduce_terms(op: str, x: Array, dtype: int, axes: tuple[int, ...] | None) -> Array:
    """The keepdims-shaped result (module docstring)."""
    if axes is None:
        return _noop(op, x, dtype)
    shape = tuple(x.shape)
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
    flat = list(x.reshape(-1))
    count = prod(shape[a] for a in axes) if shape else 1
    if dtype == P.INT32:
        vals = [_int32_reduce(op, [flat[i] for i in row]) for row in int_rows(shape, axes)]
    elif dtype == P.INT64:
        kahan = int_kahan(op, shape, axes)
        vals = [_int64_reduce(op, [flat[i] for i in r], kahan) for r in int_rows(shape, axes)]
    else:
        vals = [_float(op, t, flat, count) for t in float_trees(op, shape, axes, dtype)]
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out.reshape(out_shape)


def _noop(op: str, x: Array, dtype: int) -> Array:
    if op != SQUARE:
        return x.copy()
    if dtype == P.INT32:
        sq = np.frompyfunc(lambda t: _int32_reduce(op, [t]), 1, 1)
    elif dtype == P.INT64:
        sq = np.frompyfunc(lambda t: _saturate(_f64(t) * _f64(t), 64, False), 1, 1)
    else:
        sq = np.frompyfunc(lambda t: t * t, 1, 1)
    return np.asarray(sq(x), dtype=object)


def _float(op: str, tree: Tree, flat: list[Any], count: int) -> Any:
    """One output element: `tree` over `flat` (Z3 terms or numpy scalars), in float32 for
    float16, squared leaves for ReduceSumSquare, divided by `count` for ReduceMean."""
    like = flat[0]
    if isinstance(like, np.floating):
        narrow = like.dtype == np.float16
        flat = [np.float32(t) for t in flat] if narrow else flat
    else:
        narrow = z3.is_fp(like) and like.sort().sbits() < 24
        if narrow:
            flat = [z3.fpToFP(RNE, t, z3.Float32()) for t in flat]
        elif not z3.is_fp(like):
            flat = [to_real(t) for t in flat]
    if op == SQUARE:
        flat = [t * t for t in flat]
    zero = _number(0, flat[0])
    stack: list[tuple[Tree, bool]] = [(tree, False)]
    done: list[Any] = []
    while stack:  # post-order, without recursion (deep left chains)
        t, ready = stack.pop()
        if isinstance(t, tuple) and not ready:
            stack += [(t, True), (t[1], False), (t[0], False)]
        elif isinstance(t, tuple):
            b, a = done.pop(), done.pop()
            done.append(a + b)
        else:
            done.append(zero if t is ZERO else flat[t])
    s = done[0]
    if op == MEAN:
        s = s / _number(count, s)
    if not narrow:
        return s
    return np.float16(s) if isinstance(s, np.floating) else z3.fpToFP(RNE, s, like.sort())


def _number(v: int, like: Any) -> Any:
    """`v` as a value of `like`'s type (a numpy scalar's dtype, or a Z3 term's sort)."""
    return like.dtype.type(v) if isinstance(like, np.floating) else const(v, like)


def float_reference(op: str, x: Array, axes: tuple[int, ...] | None) -> Array:
    """ORT's float result (keepdims-shaped) on a numpy float array: the same trees, in the
    array's dtype (float16 through float32)."""
    dtype = {np.float16: P.FLOAT16, np.float64: P.DOUBLE}.get(x.dtype.type, P.FLOAT)
    cells = np.empty(x.size, dtype=object)
    cells[:] = list(x.reshape(-1))
    with np.errstate(all="ignore"):
        out = reduce_terms(op, cells.reshape(x.shape), dtype, axes)
    return np.asarray(out.tolist() if out.ndim else out[()], dtype=x.dtype).reshape(out.shape)


def _int32_reduce(op: str, row: list[Any]) -> Any:
    """Exact sum (of squares) of int32 bit-vectors, saturated; ReduceMean truncated."""
    w = (64 if op == SQUARE else 32) + len(row).bit_length() + 1
    wide = [z3.SignExt(w - 32, t) for t in row]
    if op == SQUARE:
        wide = [t * t for t in wide]
    s = wide[0]
    for t in wide[1:]:
        s = s + t
    if op == MEAN:
        return z3.Extract(31, 0, s / z3.BitVecVal(len(row), w))  # truncates toward zero
    hi, lo = z3.BitVecVal(2**31 - 1, w), z3.BitVecVal(-(2**31), w)
    s = z3.If(s >= hi, hi, s) if op == SQUARE else z3.If(s >= hi, hi, z3.If(s <= lo, lo, s))
    return z3.Extract(31, 0, s)


def _f64(t: Any) -> Any:
    return z3.fpSignedToFP(RNE, t, _F64)


def _int64_reduce(op: str, row: list[Any], kahan: bool) -> Any:
    """ORT's float64 sum of int64 bit-vectors (module docstring)."""
    vals = [_f64(t) for t in row]
    if op == SQUARE:
        vals = [v * v for v in vals]
    s, comp = z3.FPVal(0.0, _F64), z3.FPVal(0.0, _F64)
    for v in vals:
        if kahan:
            y = v - comp
            t = s + y
            comp, s = (t - s) - y, t
        else:
            s = s + v
    if op == MEAN:
        s = s / z3.FPVal(float(len(row)), _F64)
    return _saturate(s, 64, op != SQUARE)


def _saturate(s: Any, w: int, low: bool) -> Any:
    """static_cast of a float64 to int<w> as ORT guards it: >= 2^(w-1) gives the maximum,
    <= -2^(w-1) (when `low`) the minimum, else truncation toward zero."""
    top = z3.FPVal(float(2 ** (w - 1)), _F64)
    hi, lo = z3.BitVecVal(2 ** (w - 1) - 1, w), z3.BitVecVal(-(2 ** (w - 1)), w)
    cast = z3.fpToSBV(z3.RTZ(), s, z3.BitVecSort(w))
    inner = z3.If(z3.fpLEQ(s, -top), lo, cast) if low else cast
    return z3.If(z3.fpGEQ(s, top), hi, inner)


def int_reference(op: str, x: Array, axes: tuple[int, ...] | None) -> Array:
    """ORT's integer result (keepdims-shaped) on a numpy int32 / int64 array: float64 sums
    (Kahan where ORT's kernel uses it), saturated or truncated as `_saturate` says."""
    info = np.iinfo(x.dtype)
    if axes is None:
        if op != SQUARE:
            return x.copy()
        return _saturate_np(x.astype(np.float64) ** 2, info, low=False).astype(x.dtype)
    shape = tuple(x.shape)
    rows = np.asarray(int_rows(shape, axes), dtype=np.int64)
    g = x.reshape(-1)[rows].astype(np.float64)
    if op == SQUARE:
        g = g * g
    kahan = int_kahan(op, shape, axes)
    s, comp = np.zeros(len(g)), np.zeros(len(g))
    for j in range(g.shape[1]):
        if kahan:
            y = g[:, j] - comp
            t = s + y
            comp, s = (t - s) - y, t
        else:
            s = s + g[:, j]
    if op == MEAN:
        s = s / float(g.shape[1])
    vals = _saturate_np(s, info, low=op != SQUARE)
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
    return np.asarray(vals).astype(x.dtype).reshape(out_shape)


def _saturate_np(s: Array, info: Any, low: bool) -> Array:
    """`_saturate` on float64 numpy values: >= float(max) gives max, <= float(min) (when
    `low`) min, else truncation toward zero."""
    lim = np.nextafter(float(2 ** (info.bits - 1)), 0.0)
    vals = np.trunc(np.clip(s, -lim, lim)).astype(np.int64)
    vals = np.where(s >= float(info.max), info.max, vals)
    return np.where(s <= float(info.min), info.min, vals) if low else vals
