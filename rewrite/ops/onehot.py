"""OneHot (opset 9, 11): `values[1]` (on) where an index points, `values[0]` (off) elsewhere.

Contract: OneHot(indices, depth, values, axis=-1). `depth` holds one number (0-D or one
element); d = depth cast to int64 (truncated toward zero: ORT's `static_cast<int64_t>`), and
ORT fails the run unless d > 0. `values` is [off, on]; the output has values' dtype and shape
indices.shape with d inserted at `axis` (in [-r-1, r] for indices of rank r; a negative axis
counts from the end of the output, -1 last). With i = indices[p] (p: the output position
without the new axis, j: the position along it):

    out[p with j at axis] = on if i == j or i + d == j else off

so an index in [-d, 0) wraps by d and one outside [-d, d) gives a line of all off. Float
indices (ORT 1.32: float32 and, through float32, float16) are truncated toward zero first;
NaN and ±inf give off. ORT 1.32's CPU kernels run (indices, depth, values) dtypes
(int64, int64, int64|float32|float16), (int64, int32|float32, float32|float16|int32),
(int32, int32|float32, float32|float16) and (float32|float16, int64, int64),
(float32|float16, float32, float32|float16).

Typed form: `(OneHot axis indices depth values)`, every operand a tensor, in ONNX order, so the
node is written back as it was (depth keeps its dtype and shape: ORT's kernels pair them).
Its output dims are static when depth is a constant (`infer` reads `call.consts`). Z3
semantics: the formula above, element by element, for integer indices; depth must simplify to
a numeral (a constant: the output shape depends on it, as ReshapeDyn's on its shape operand),
else `ShapeError` and a case that needs it cannot be proved. Float indices are not modelled
(`ShapeError`); the numpy reference runs them. The op copies values: no FLOPs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.errors import ShapeError
from rewrite.ops._range_z3 import concrete_number
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

Array = np.ndarray
INT64 = TensorProto.INT64
INT32 = TensorProto.INT32


def onehot_axis(call: OpCall, rank: int) -> int:
    """The new axis's position in the output, in [0, rank]."""
    axis = int(call.attr("axis", -1))
    if not -rank - 1 <= axis <= rank:
        raise fail(call, f"axis {axis} out of range for indices of rank {rank}")
    return axis + rank + 1 if axis < 0 else axis


def depth_of(call: OpCall, depth: Any) -> int:
    """d: the one number of `depth` (numbers or numerals) cast to int64, which must be > 0."""
    flat = np.asarray(depth, dtype=object).reshape(-1)
    if flat.size != 1:
        raise fail(call, "depth must hold one number")
    v = concrete_number(flat[0])
    if isinstance(v, float) and not np.isfinite(v):
        raise fail(call, f"depth {v} is not a number of classes")
    d = int(v)  # truncation toward zero, as static_cast<int64_t>
    if d <= 0:
        raise fail(call, f"depth {d} must be positive")
    return d


def infer_onehot(call: OpCall) -> list[TensorType]:
    """values' dtype; indices' shape with depth's value (unknown unless constant) at axis."""
    if len(call.inputs) != 3 or not all(call.has_input(i) for i in range(3)):
        raise fail(call, "takes indices, depth and values")
    idx, vals = call.input(0), call.input(2)
    if vals.shape is not None and tuple(vals.shape) != (2,):
        raise fail(call, "values must be [off, on]")
    if idx.shape is None:
        return [TensorType(vals.dtype, None)]
    axis = onehot_axis(call, len(idx.shape))
    depth = call.const(1)
    d = depth_of(call, depth) if depth is not None else None
    return [TensorType(vals.dtype, (*idx.shape[:axis], d, *idx.shape[axis:]))]


def _positions(idx: Array, d: int) -> Array:
    """Each index as int64 (floats truncated; NaN, ±inf and beyond int64 -> -d - 1: off),
    negative ones wrapped by d."""
    if idx.dtype.kind == "f":
        x = idx.astype(np.float64)
        ok = np.isfinite(x) & (np.abs(x) < 2.0**63)
        i = np.where(ok, np.trunc(np.where(ok, x, 0.0)), -d - 1).astype(np.int64)
    else:
        i = idx.astype(np.int64)
    return np.where(i < 0, i + d, i)


def ref_onehot(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    idx, depth, vals = arrays
    assert idx is not None and depth is not None and vals is not None
    d = depth_of(call, depth)
    axis = onehot_axis(call, idx.ndim)
    hot = _positions(idx, d)[..., None] == np.arange(d)
    out = np.where(hot, vals[1], vals[0]).astype(vals.dtype)
    return [np.moveaxis(out, -1, axis)]


def _hot(i: Any, j: int, d: int) -> Any:
    """Whether index i points at j (i == j, or i == j - d: a negative index wrapped)."""
    if z3.is_expr(i):
        bits = i.size() if z3.is_bv(i) else None
        if bits is not None and d > 2 ** (bits - 1):
            raise ShapeError(f"OneHot: depth {d} beyond the {bits}-bit indices")
        return z3.Or(i == j, i == j - d)
    return int(i) == j or int(i) == j - d


def z3_onehot(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The module docstring's formula: If(hot, on, off) per output element."""
    idx, depth, vals = arrays
    assert idx is not None and depth is not None and vals is not None
    in_dtype = call.input(0).dtype
    if in_dtype not in (0, INT64, INT32) or any(z3.is_fp(t) for t in idx.reshape(-1)):
        raise fail(call, "float indices are not modelled")
    d = depth_of(call, depth)
    axis = onehot_axis(call, idx.ndim)
    off, on = vals.reshape(-1)
    out = np.empty((*idx.shape[:axis], d, *idx.shape[axis:]), dtype=object)
    for p in np.ndindex(*idx.shape):
        i = idx[p]
        for j in range(d):
            hit = _hot(i, j, d)
            cell = (*p[:axis], j, *p[axis:])
            out[cell] = z3.If(hit, on, off) if z3.is_expr(hit) else (on if hit else off)
    return [out]


def _i64(*values: int) -> Array:
    return np.array(values, dtype=np.int64)


_F32_VALUES = np.array([-0.0, 3.5], np.float32)
SELF_TEST_VALUES: dict[str, list[tuple[dict[str, Any], tuple[int, ...] | None, list[Any]]]] = {
    "OneHot": [
        ({}, (2, 3), [np.array(5, np.int64), _F32_VALUES]),
        ({"axis": 0}, (4,), [_i64(3), _F32_VALUES]),
        ({"axis": 1}, (2, 3), [np.array(4, np.int32), _F32_VALUES]),
        ({}, None, [_i64(-4, -3, -1, 0, 2, 3, 9), np.array(3, np.int64), _i64(-7, 2**40)]),
        ({"axis": -2}, None, [_i64(1, -2, 6), _i64(4), np.array([np.nan, -np.inf], np.float32)]),
    ],
}
"""The self-test's cases (`verify.selftest_values`): attributes, indices' shape (drawn) or
None (every input given), then depth and values."""

ONEHOT = register(
    OpSpec(
        name="OneHot",
        infer=infer_onehot,
        reference=ref_onehot,
        flops=no_flops,
        egg=EggSig(attrs=(("axis", "i64", -1),), n_inputs=3),
        z3=z3_onehot,
        input_dtypes=((INT64,), (INT64,), None),
        doc="OneHot(indices, depth, values, axis): on where an index points, off elsewhere.",
    )
)
