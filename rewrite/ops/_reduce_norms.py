"""ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceProd as ORT 1.32's CPU kernels
compute them (not an op module; `reduce.py` registers the ops with these).

ORT has no fast (KR/RK/KRK/RKR) kernel for these aggregators, so with the shape merged into
runs of reduced and kept dims (`_reduce_order.runs`) there are two paths per output element:
- all reduced (one run): `aggall`, Eigen over the whole buffer (`eigen_tree`: 4-lane packets
  for float32, 2 for double): L1 `cwiseAbs().sum()`, L2 `norm()` = sqrt(`squaredNorm()`),
  LogSum log(`sum()`), Prod `prod()` (the same tree with ·); LogSumExp m = `maxCoeff()` (the
  tree of `_reduce_extrema`), then m if m is ±inf, else log(+0 + e(x0) + e(x1) + ...) + m
  with e(v) = exp(v - m), an element equal to -inf skipped;
- otherwise (also rank 0 and noop_with_empty_axes=1 with no axes, where every element is its
  own row): the generic loop over the reduced elements in row-major order, from +0 (L1:
  + |x|; L2: + x·x, then sqrt; LogSum: + x, then log; Prod: from 1, · x); LogSumExp first
  m = row[0] (+0 if that is ±inf), then m = v unless v is ±inf, NaN or v < m, for each v in
  turn, then log(+0 + e(x0) + ...) + m as above.
float16 is reduced as float32 (inputs widened exactly, the result rounded once).
Integers (int32, int64) go through float64: each element converted (rounding to nearest),
summed in row-major order from +0 on both paths (int64: with Kahan compensation, except
Prod, which multiplies from 1), then L2 takes sqrt; LogSum gives INT_MIN for a sum <= 0,
else log; LogSumExp is log(count of elements equal to the max) + max; the float64 result
then saturates (>= 2^(w-1): INT_MAX; <= -2^(w-1): INT_MIN) or truncates toward zero.

For floats exp and log are the shared uninterpreted functions (`unary.EXP`,
`_unary_z3.z3_log`, with IEEE's special values interpreted), so in IEEE the semantics are
ORT's up to libm's exp and log; sqrt is IEEE's. The integer forms need no uninterpreted
function: LogSum's trunc(log s) of an integer sum s >= 1 is the number of steps T_j <= s (T_j
the least double whose libm log is >= j, found once by bisection; libm's log is monotone),
and LogSumExp's log(count), count in 1..n, a table of libm's values.
The numpy counterpart (`norm_reference`) runs the same computation with
the C library's exp and log (expf and logf for float32), the functions ORT's kernels call:
bit for bit ORT's on every shape, axes subset and dtype tests/ops/test_typed_reduce_norms.py
tries (NaN, ±inf, ±0, overflow included).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
import sys
from functools import cache
from math import prod
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._reduce_extrema import combine, evaluate, extrema_trees
from rewrite.ops._reduce_order import Tree, eigen_tree, int_rows, lanes, runs
from rewrite.ops._reduce_sum_z3 import _saturate
from rewrite.ops._unary_z3 import z3_log
from rewrite.ops._z3 import RNE, const, square_root
from rewrite.ops.base import OpCall, fail
from rewrite.ops.unary import EXP, SQRT

Array = np.ndarray
P = TensorProto
NORMS = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd")
_F64 = z3.Float64()


def check_norm_dtype(call: OpCall) -> int:
    """X's dtype; fail (no ORT kernel, so no such graph) outside float/double/float16/int."""
    dtype = call.input(0).dtype
    if dtype not in (P.FLOAT, P.DOUBLE, P.FLOAT16, P.INT32, P.INT64):
        raise fail(call, "ORT has kernels for float, double, float16, int32 and int64 only")
    return dtype


class _Ops:
    """Scalar arithmetic on Z3 terms (IEEE or real) or on numpy scalars of one dtype."""

    def __init__(self, like: Any) -> None:
        self.terms = z3.is_expr(like)
        self.fp = self.terms and z3.is_fp(like)
        self.like = like

    def num(self, v: float) -> Any:
        return const(v, self.like) if self.terms else self.like.dtype.type(v)

    def abs(self, t: Any) -> Any:
        if self.fp:
            return z3.fpAbs(t)
        if self.terms:
            return z3.If(t < 0, -t, t)
        return np.abs(t)

    def sqrt(self, t: Any) -> Any:
        return square_root(t, SQRT) if self.terms else np.sqrt(t)

    def log(self, t: Any) -> Any:
        return z3_log(t) if self.terms else libm("log", t)

    def exp(self, t: Any) -> Any:
        return EXP(t) if self.terms else libm("exp", t)

    def isinf(self, t: Any) -> Any:
        if self.terms:
            return z3.fpIsInf(t) if self.fp else z3.BoolVal(False)
        return bool(np.isinf(t))

    def isnan(self, t: Any) -> Any:
        if self.terms:
            return z3.fpIsNaN(t) if self.fp else z3.BoolVal(False)
        return bool(np.isnan(t))

    def is_minus_inf(self, t: Any) -> Any:
        if self.terms:
            return z3.And(z3.fpIsInf(t), z3.fpIsNegative(t)) if self.fp else z3.BoolVal(False)
        return bool(t == -np.inf)

    def pick(self, cond: Any, a: Any, b: Any) -> Any:
        """cond ? a : b."""
        if self.terms:
            return z3.If(cond, a, b)
        return a if cond else b

    def any(self, *conds: Any) -> Any:
        return z3.Or(*conds) if self.terms else any(conds)


_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
for _name, _type in (("logf", ctypes.c_float), ("expf", ctypes.c_float)):
    getattr(_LIBM, _name).restype = _type
    getattr(_LIBM, _name).argtypes = [_type]
for _name in ("log", "exp"):
    getattr(_LIBM, _name).restype = ctypes.c_double
    getattr(_LIBM, _name).argtypes = [ctypes.c_double]


def libm(name: str, t: Any) -> Any:
    """The C library's `name` (log or exp; logf or expf for float32), the function ORT's
    kernel calls, on a numpy float32 or float64 scalar."""
    if t.dtype == np.float32:
        return np.float32(getattr(_LIBM, name + "f")(float(t)))
    return np.float64(getattr(_LIBM, name)(float(t)))


def _float_value(op: str, flat: list[Any], row: list[int], tree: Tree | None) -> Any:
    """One output element of a float reduction (module docstring): `row` its elements in
    row-major order (the generic loop), or `tree` Eigen's tree (the all-reduced path)."""
    o = _Ops(flat[0])
    if op == "ReduceLogSumExp":
        return _log_sum_exp(o, flat, row, tree)
    leaf = {"ReduceL1": o.abs, "ReduceL2": lambda t: t * t}.get(op, lambda t: t)
    if op == "ReduceProd":
        add, acc = (lambda a, b: a * b), o.num(1)
    else:
        add, acc = (lambda a, b: a + b), o.num(0)
    if tree is not None:
        acc = evaluate(tree, [leaf(t) for t in flat], add)
    else:
        for i in row:
            acc = add(acc, leaf(flat[i]))
    if op == "ReduceL2":
        return o.sqrt(acc)
    return o.log(acc) if op == "ReduceLogSum" else acc


def _log_sum_exp(o: _Ops, flat: list[Any], row: list[int], max_tree: Tree | None) -> Any:
    """m as the path picks it, then m if ±inf, else log(+0 + e(x0) + ...) + m."""
    zero = o.num(0)
    if max_tree is not None:
        m = evaluate(max_tree, flat, combine(True, o.terms))
    else:
        m = o.pick(o.isinf(flat[row[0]]), zero, flat[row[0]])
        for i in row:
            v = flat[i]
            m = o.pick(o.any(o.isinf(v), o.isnan(v), v < m), m, v)
    acc = zero
    for i in row:
        v = flat[i]
        acc = o.pick(o.is_minus_inf(v), acc, acc + o.exp(v - m))
    return o.pick(o.isinf(m), m, o.log(acc) + m)


def _to_f64(t: Any) -> Any:
    return z3.fpSignedToFP(RNE, t, _F64) if z3.is_expr(t) else np.float64(t)


def _int_value(op: str, flat: list[Any], row: list[int], width: int) -> Any:
    """One output element of an integer reduction: ORT's float64 computation (module
    docstring), saturated or truncated."""
    vals = [flat[i] for i in row]
    o = _Ops(_to_f64(vals[0]))
    if op == "ReduceLogSumExp":
        m = vals[0]
        for v in vals[1:]:
            m = o.pick(v < m, m, v)
        count = o.num(0)
        for v in vals:
            count = count + o.pick(v == m, o.num(1), o.num(0))
        log = _log_of_count(count, len(vals)) if o.terms else o.log(count)
        return _saturated(o, log + _to_f64(m), width, True)
    f = [_to_f64(v) for v in vals]
    if op == "ReduceProd":
        s = o.num(1)
        for v in f:
            s = s * v
        return _saturated(o, s, width, True)
    leaf = {"ReduceL1": o.abs, "ReduceL2": lambda t: t * t}.get(op, lambda t: t)
    s, comp = o.num(0), o.num(0)
    for v in (leaf(t) for t in f):
        if width == 64:  # Kahan compensation
            y = v - comp
            t = s + y
            comp, s = (t - s) - y, t
        else:
            s = s + v
    if op == "ReduceL2":
        return _saturated(o, o.sqrt(s), width, False)
    if op == "ReduceL1":
        return _saturated(o, s, width, False)
    low = _int_min(o, width)
    if o.terms:
        top = len(vals) * 2.0 ** (width - 1)  # |s| <= n · 2^(w-1)
        return z3.If(z3.fpLEQ(s, o.num(0)), low, _floor_log(s, width, top))
    return o.pick(s <= o.num(0), low, _saturated(o, o.log(s), width, True))


def _log_of_count(count: Any, n: int) -> Any:
    """libm's log(count) for a float64 term `count` in 1..n: a table of numerals."""
    out = z3.FPVal(float(libm("log", np.float64(n))), _F64)
    for c in range(n - 1, 0, -1):
        value = z3.FPVal(float(libm("log", np.float64(c))), _F64)
        out = z3.If(z3.fpEQ(count, z3.FPVal(float(c), _F64)), value, out)
    return out


@cache
def _log_steps() -> tuple[float, ...]:
    """T_j (j = 1, 2, ...): the least double with libm's log(T_j) >= j, up to the largest
    float64 (libm's log is monotone)."""
    steps: list[float] = []
    bits = lambda v: struct.unpack("<q", struct.pack("<d", v))[0]  # noqa: E731
    value = lambda b: struct.unpack("<d", struct.pack("<q", b))[0]  # noqa: E731
    j = 1
    while libm("log", np.float64(sys.float_info.max)) >= j:
        lo, hi = bits(1.0), bits(sys.float_info.max)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if libm("log", np.float64(value(mid))) >= j else (mid + 1, hi)
        steps.append(value(lo))
        j += 1
    return tuple(steps)


def _floor_log(s: Any, width: int, top: float) -> Any:
    """trunc(libm's log(s)) for a float64 term 1 <= s <= top (an integer sum), as a w-bit
    integer: the count of steps T_j <= s (exact, no uninterpreted function)."""
    one, zero = z3.BitVecVal(1, width), z3.BitVecVal(0, width)
    k = zero
    for t in (t for t in _log_steps() if t <= top):
        k = k + z3.If(z3.fpGEQ(s, z3.FPVal(t, _F64)), one, zero)
    return k


def _int_min(o: _Ops, width: int) -> Any:
    return z3.BitVecVal(-(2 ** (width - 1)), width) if o.terms else -(2 ** (width - 1))


def _saturated(o: _Ops, s: Any, width: int, low: bool) -> Any:
    """The float64 `s` cast as ORT guards it (`_reduce_sum_z3._saturate`)."""
    if o.terms:
        return _saturate(s, width, low)
    top = float(2 ** (width - 1))
    if np.isnan(s):  # the branch not taken of LogSum's s <= 0
        return 0
    if s >= top:
        return 2 ** (width - 1) - 1
    if low and s <= -top:
        return -(2 ** (width - 1))
    return int(np.trunc(s))


def norm_terms(op: str, x: Array, dtype: int, axes: tuple[int, ...] | None) -> Array:
    """The keepdims-shaped result of `op` over `axes` (None: noop_with_empty_axes with no
    axes, each element its own row) of `x` (an object array of Z3 terms or numpy scalars)."""
    shape = tuple(x.shape)
    flat = list(x.reshape(-1))
    red = () if axes is None else axes
    rows = int_rows(shape, red)
    if dtype in (P.INT32, P.INT64):
        w = 32 if dtype == P.INT32 else 64
        vals = [_int_value(op, flat, row, w) for row in rows]
    else:
        vals = _float_values(op, flat, shape, red, rows, dtype)
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out.reshape(tuple(1 if i in red else d for i, d in enumerate(shape)))


def _float_values(
    op: str,
    flat: list[Any],
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    rows: list[list[int]],
    dtype: int,
) -> list[Any]:
    narrow = dtype == P.FLOAT16
    if narrow:
        flat = [_widen(t) for t in flat]
    whole = bool(shape) and bool(axes) and len(runs(shape, axes)[0]) == 1
    if not whole:
        vals = [_float_value(op, flat, row, None) for row in rows]
    elif op == "ReduceLogSumExp":
        vals = [_float_value(op, flat, rows[0], extrema_trees(shape, axes, dtype)[0])]
    else:
        vals = [
            _float_value(op, flat, rows[0], eigen_tree(list(range(prod(shape))), lanes(dtype), 0))
        ]
    return [_narrow(v) for v in vals] if narrow else vals


def _widen(t: Any) -> Any:
    """float16 as float32, exactly (a real stays a real)."""
    if z3.is_fp(t):
        return z3.fpToFP(RNE, t, z3.Float32())
    return t if z3.is_expr(t) else np.float32(t)


def _narrow(t: Any) -> Any:
    """A float32 result rounded once to float16."""
    if z3.is_fp(t):
        return z3.fpToFP(RNE, t, z3.Float16())
    return t if z3.is_expr(t) else np.float16(t)


def norm_reference(op: str, x: Array, axes: tuple[int, ...] | None) -> Array:
    """`norm_terms` on a numpy array (float16 through float32; integers through float64),
    keepdims-shaped, in x's dtype."""
    dtype = {np.float16: P.FLOAT16, np.float64: P.DOUBLE, np.int32: P.INT32, np.int64: P.INT64}.get(
        x.dtype.type, P.FLOAT
    )
    cells = np.empty(x.size, dtype=object)
    cells[:] = list(x.reshape(-1))
    with np.errstate(all="ignore"):
        out = norm_terms(op, cells.reshape(x.shape), dtype, axes)
    return np.asarray(out.reshape(-1).tolist(), dtype=x.dtype).reshape(out.shape)
