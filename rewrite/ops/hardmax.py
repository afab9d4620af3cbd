"""Hardmax: 1 at the first maximum of each line, 0 elsewhere (float32, as ORT 1.32 runs it).

Contract: Hardmax(X, axis) keeps X's dtype and shape. From opset 13 the lines run along `axis`
(default -1); before 13 (default axis 1) X is coerced to 2-D at `axis` and the lines are its
rows. ORT 1.32's CPU kernel (float32 only): for `axis` not last it swaps `axis` with the last
dim (a transposed copy); each line, D contiguous floats in that buffer, gets its maximum m from
Eigen's vectorized `maxCoeff()` (the tree of `_reduce_order.eigen_tree`, combining with
m(a, b) = (a < b ? b : a), the line's aligned head last: the same tree as ReduceMax's KR path,
so a NaN survives only in some places); then out[j] = 1 for the first j with x[j] == m, 0
elsewhere. Hence: no NaN in a line -> 1 at the first maximum (of ±0 the first zero, as
-0 == +0); a NaN m (which only a NaN can give) -> the line is all 0.

Typed form: `(Hardmax axis X)`. Z3 semantics: exactly that (IEEE: fpEQ against the tree's
m; reals: the first greatest). Checked bit for bit against ORT with NaN, ±inf and ±0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._reduce_extrema import combine, evaluate
from rewrite.ops._reduce_order import eigen_tree, lanes
from rewrite.ops._z3 import const
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, per_element
from rewrite.ops.registry import register

Array = np.ndarray


def _axis(call: OpCall, rank: int) -> int:
    """`axis` in [0, rank) (default -1 from opset 13, 1 before)."""
    axis = int(call.attr("axis", -1 if call.opset >= 13 else 1))
    if not -rank <= axis < max(rank, 1):
        raise fail(call, f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def infer_hardmax(call: OpCall) -> list[TensorType]:
    """X's type; X float32 (ORT's only kernel) and the axis within its rank."""
    x = call.input(0)
    if x.dtype not in (0, TensorProto.FLOAT):
        raise fail(call, "ORT's Hardmax runs float32 only")
    if x.rank is not None:
        _axis(call, x.rank)
    return [x]


def _lines(call: OpCall, x: Array) -> tuple[Array, Any]:
    """The kernel's buffer as (rows, D), and how to put a (rows, D) result back in X's shape."""
    axis = _axis(call, x.ndim)
    if call.opset < 13:
        d = int(np.prod(x.shape[axis:], dtype=np.int64))
        return x.reshape(-1, d), lambda y: y.reshape(x.shape)
    moved = np.swapaxes(x, axis, -1)
    shape = moved.shape
    return moved.reshape(-1, x.shape[axis]), lambda y: np.swapaxes(y.reshape(shape), axis, -1)


def _first_equal(row: list[Any], m: Any, one: Any, zero: Any) -> list[Any]:
    """1 at the first element equal to m, 0 elsewhere (terms or numbers)."""
    out: list[Any] = []
    if row and z3.is_expr(row[0]):
        seen: Any = z3.BoolVal(False)
        for t in row:
            hit = z3.fpEQ(t, m) if z3.is_fp(t) else t == m  # IEEE ==: NaN never, -0 == +0
            out.append(z3.If(z3.And(hit, z3.Not(seen)), one, zero))
            seen = z3.Or(seen, hit)
        return out
    found = False
    for t in row:
        hit = not found and t == m
        found = found or hit
        out.append(one if hit else zero)
    return out


def _hardmax(call: OpCall, x: Array, terms: bool) -> Array:
    rows, back = _lines(call, x)
    n, d = rows.shape
    out = np.empty(rows.shape, dtype=object)
    if x.size == 0:
        return back(out)
    m = combine(True, terms)
    p = lanes(TensorProto.FLOAT)
    for r in range(n):
        row = list(rows[r])
        tree = eigen_tree(list(range(d)), p, -r * d % p)
        one, zero = (const(1, row[0]), const(0, row[0])) if terms else (1.0, 0.0)
        out[r] = _first_equal(row, evaluate(tree, row, m), one, zero)
    return back(out)


def ref_hardmax(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    y = _hardmax(call, x, terms=False)
    return [np.asarray(y.tolist() if y.size else np.zeros(x.shape), dtype=x.dtype)]


def z3_hardmax(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The module docstring's semantics over terms."""
    x = arrays[0]
    assert x is not None
    return [_hardmax(call, x, terms=True)]


HARDMAX = register(
    OpSpec(
        name="Hardmax",
        infer=infer_hardmax,
        reference=ref_hardmax,
        flops=per_element(2),
        egg=EggSig(attrs=(("axis", "i64", -1),), n_inputs=1),
        z3=z3_hardmax,
        doc="Hardmax(X, axis): 1 at the first maximum along axis (ORT's tree max), else 0.",
    )
)
