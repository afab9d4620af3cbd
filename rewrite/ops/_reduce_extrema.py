"""ReduceMax / ReduceMin as ORT 1.32's CPU kernels compute them (not an op module; `reduce.py`
registers the ops with these).

ORT picks the same kernel paths as for ReduceSum (`_reduce_order`: the shape merged into runs
of reduced and kept dims, one intra-op thread, 16-byte aligned buffers) and combines two
values with m(a, b) = (a < b ? b : a) for max (std::max; Eigen's `pmax` passes its arguments
reversed to `maxps` to match it) and (b < a ? b : a) for min, so a NaN is kept only while it
is the left operand, and of ±0 the left one stays. Per output element (checked bit for bit
against ORT 1.32 on every axes subset of ranks 1-4, NaN, ±inf, ±0; tests/ops/
test_typed_reduce_extrema.py):
- all reduced, and KR (trailing dims): Eigen's `maxCoeff()` / `minCoeff()` of the row, the
  packet tree of `eigen_tree` (the row's aligned head last) with m in place of +;
- RK (leading dims, R > 16 and max(R, N) > 256) and KRK (a middle run): m folded over the
  reduced elements in order, from the first;
- RKR: the first element of the output's elements, then m with Eigen's tree of each
  contiguous chunk in turn;
- otherwise (the generic loop): m folded over the reduced elements in row-major order.
Integers take the same trees (an integer max or min does not depend on the order).

Modelled: exactly that, for float32, double, float16 (compared, not rounded), int32 and int64
(signed bit-vector comparisons). Outside: several intra-op threads (ORT then picks other
paths, as for the sums), unaligned buffers, other integer dtypes.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._reduce_order import ZERO, Tree, _path, chain, eigen_tree, int_rows, lanes

Array = np.ndarray
Combine = Callable[[Any, Any], Any]


def extrema_trees(shape: tuple[int, ...], axes: tuple[int, ...], dtype: int) -> list[Tree]:
    """The tree of m applications of every output element (row-major, keepdims layout)."""
    if not shape:
        return [0]
    p = lanes(dtype)
    path, m = _path(shape, axes)
    if path == "R":
        return [eigen_tree(list(range(prod(shape))), p, 0)]
    if path == "KR":
        n = m[1]
        return [eigen_tree(list(range(d * n, d * n + n)), p, -d * n % p) for d in range(m[0])]
    if path == "RK":
        return [chain([r * m[1] + j for r in range(m[0])], False) for j in range(m[1])]
    if path == "KRK":
        k0, r, n = m
        return [
            chain([(d * r + i) * n + j for i in range(r)], False)
            for d in range(k0)
            for j in range(n)
        ]
    if path == "RKR":
        r1, k, r2 = m
        out: list[Tree] = []
        for j in range(k):
            t: Tree = j * r2  # the first element of this output's chunks
            for i in range(r1):
                base = (i * k + j) * r2
                t = (t, eigen_tree(list(range(base, base + r2)), p, -base % p))
            out.append(t)
        return out
    return [chain(row, False) for row in int_rows(shape, axes)]


def evaluate(tree: Tree, flat: list[Any], m: Combine) -> Any:
    """`tree` over `flat` with m at every pair, post-order, no recursion (`ZERO` is absent
    from these trees)."""
    stack: list[tuple[Tree, bool]] = [(tree, False)]
    done: list[Any] = []
    while stack:
        t, ready = stack.pop()
        if isinstance(t, tuple) and not ready:
            stack += [(t, True), (t[1], False), (t[0], False)]
        elif isinstance(t, tuple):
            b, a = done.pop(), done.pop()
            done.append(m(a, b))
        else:
            assert t is not ZERO
            done.append(flat[t])
    return done[0]


def combine(largest: bool, terms: bool) -> Combine:
    """m for max (`largest`) or min, on Z3 terms or on numbers."""
    if terms:
        if largest:
            return lambda a, b: z3.If(a < b, b, a)
        return lambda a, b: z3.If(b < a, b, a)
    if largest:
        return lambda a, b: b if a < b else a
    return lambda a, b: b if b < a else a


def extremum(largest: bool, x: Array, dtype: int, axes: tuple[int, ...]) -> Array:
    """The keepdims-shaped ReduceMax (`largest`) or ReduceMin of `x` (numbers or terms)."""
    shape = tuple(x.shape)
    flat = list(np.asarray(x).reshape(-1))
    terms = bool(flat) and z3.is_expr(flat[0])
    m = combine(largest, terms)
    vals = [evaluate(t, flat, m) for t in extrema_trees(shape, axes, dtype)]
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out.reshape(tuple(1 if i in axes else d for i, d in enumerate(shape)))


def extremum_reference(largest: bool, x: Array, axes: tuple[int, ...]) -> Array:
    """`extremum` on a numpy array, in its dtype."""
    dtype = {np.float16: TensorProto.FLOAT16, np.float64: TensorProto.DOUBLE}.get(
        x.dtype.type, TensorProto.FLOAT
    )
    y = extremum(largest, x, dtype, axes)
    return np.asarray(y.reshape(-1).tolist(), dtype=x.dtype).reshape(y.shape)
