"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin.

Contract: Reduce*(X[, axes]) reduces X over `axes` (negative counts from the end), keeping
them as size-1 dims when keepdims=1 (the default). The axes are an attribute before opset 18
(before 13 for ReduceSum) and an optional INT64 input after; either form is accepted at any
opset. No axes (absent or empty) reduces every axis, or, with noop_with_empty_axes=1, returns
X unchanged. The result keeps X's dtype. ArgMax / ArgMin(X) give the INT64 index of the
first (or, with select_last_index=1, last) extremum along `axis` (default 0).

Typed form: `(ArgMax axis keepdims select_last_index X)` (and ArgMin), with the Z3 semantics
and reference of a scan as ORT's kernel does it (`_reduce_z3`: NaN wins only at element 0).
The Reduce* ops stay opaque: ORT reduces floats in Eigen's vectorized order (4-lane packets
whose grouping depends on the kernel path and the row's alignment), so NaN handling
(ReduceMax/Min) and rounding and cancellation (ReduceSum/Mean/Prod/L2/SumSquare) differ from
any sequential semantics on special values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import TensorProto

from rewrite.ops._reduce_z3 import z3_arg_extremum
from rewrite.ops.base import (
    EggSig,
    FlopsFn,
    OpCall,
    OpSpec,
    ReferenceFn,
    Shape,
    TensorType,
    fail,
)
from rewrite.ops.registry import register

Array = np.ndarray
Reducer = Callable[[Array, tuple[int, ...]], Array]
UNKNOWN_AXES = "unknown"


def reduce_axes(call: OpCall, axes_input: Array | None) -> tuple[int, ...] | str | None:
    """The node's axes as given (not normalized): a tuple, None for "none given", or
    UNKNOWN_AXES when they come from an input whose value is not known."""
    given = call.attr("axes")
    if given is not None:
        return tuple(int(a) for a in given)
    if axes_input is None:
        return UNKNOWN_AXES if call.has_input(1) else None
    return tuple(int(a) for a in np.asarray(axes_input).reshape(-1)) or None


def _normalize(call: OpCall, axes: tuple[int, ...], rank: int) -> tuple[int, ...]:
    bad = [a for a in axes if not -rank <= a < rank]
    if bad or len(set(a % rank for a in axes if rank)) != len(axes):
        raise fail(call, f"axes {list(axes)} invalid for rank {rank}")
    return tuple(sorted(a % rank for a in axes))


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    """`shape` with `axes` (normalized) set to 1 or dropped."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_infer(call: OpCall) -> list[TensorType]:
    """Y: X's dtype; shape per the module docstring (unknown axes keep only the rank)."""
    x = call.input(0)
    keep = bool(call.attr("keepdims", 1))
    axes = reduce_axes(call, call.const(1))
    if axes == UNKNOWN_AXES:
        shape = (None,) * len(x.shape) if keep and x.shape is not None else None
        return [TensorType(x.dtype, shape)]
    if axes is None and call.attr("noop_with_empty_axes", 0):
        return [x]
    if x.shape is None:
        return [TensorType(x.dtype, None if keep or axes is not None else ())]
    rank = len(x.shape)
    norm = tuple(range(rank)) if axes is None else _normalize(call, axes, rank)  # type: ignore[arg-type]
    return [TensorType(x.dtype, reduced_shape(x.shape, norm, keep))]


def _reducer(fn: Reducer) -> ReferenceFn:
    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        axes = reduce_axes(call, arrays[1] if len(arrays) > 1 else None)
        if axes is None and call.attr("noop_with_empty_axes", 0):
            return [x.copy()]
        norm = tuple(range(x.ndim)) if axes is None else _normalize(call, axes, x.ndim)  # type: ignore[arg-type]
        xw = x.astype(np.float64) if x.dtype.kind == "f" else x
        with np.errstate(all="ignore"):
            y = fn(xw, norm)
        if not call.attr("keepdims", 1):
            y = np.squeeze(y, axis=norm)
        return [np.asarray(y).astype(x.dtype)]

    return reference


def _log_sum_exp(x: Array, axes: tuple[int, ...]) -> Array:
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return m + np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True))


_REDUCERS: dict[str, tuple[Reducer, float]] = {
    "ReduceSum": (lambda x, a: np.sum(x, axis=a, keepdims=True), 1.0),
    "ReduceMean": (lambda x, a: np.mean(x, axis=a, keepdims=True), 1.0),
    "ReduceMax": (lambda x, a: np.max(x, axis=a, keepdims=True), 1.0),
    "ReduceMin": (lambda x, a: np.min(x, axis=a, keepdims=True), 1.0),
    "ReduceProd": (lambda x, a: np.prod(x, axis=a, keepdims=True), 1.0),
    "ReduceL1": (lambda x, a: np.sum(np.abs(x), axis=a, keepdims=True), 2.0),
    "ReduceL2": (lambda x, a: np.sqrt(np.sum(x * x, axis=a, keepdims=True)), 2.0),
    "ReduceSumSquare": (lambda x, a: np.sum(x * x, axis=a, keepdims=True), 2.0),
    "ReduceLogSum": (lambda x, a: np.log(np.sum(x, axis=a, keepdims=True)), 1.0),
    "ReduceLogSumExp": (_log_sum_exp, 6.0),
}


def _per_input_element(k: float) -> FlopsFn:
    def flops(call: OpCall, outputs: list[TensorType]) -> float:
        """k operations per input element."""
        return k * float(call.input(0).numel or 0)

    return flops


def _arg_infer(call: OpCall) -> list[TensorType]:
    """INT64 indices: X's shape with `axis` set to 1 (keepdims) or dropped."""
    x = call.input(0)
    keep = bool(call.attr("keepdims", 1))
    if x.shape is None:
        return [TensorType(TensorProto.INT64, None)]
    axes = _normalize(call, (int(call.attr("axis", 0)),), len(x.shape))
    return [TensorType(TensorProto.INT64, reduced_shape(x.shape, axes, keep))]


def _arg_ref(largest: bool) -> ReferenceFn:
    """The index a scan along `axis` keeps (see `_reduce_z3`): it moves to element i when
    x_i > best (>= with select_last_index=1; < and <= for ArgMin), so NaN wins only at
    element 0, as in ORT's kernel."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        (axis,) = _normalize(call, (int(call.attr("axis", 0)),), x.ndim)
        ties = bool(call.attr("select_last_index", 0))
        moved = np.moveaxis(x, axis, -1)
        best = moved[..., 0].copy()
        idx = np.zeros(best.shape, dtype=np.int64)
        with np.errstate(invalid="ignore"):
            for i in range(1, moved.shape[-1]):
                v = moved[..., i]
                if largest:
                    take = v >= best if ties else v > best
                else:
                    take = v <= best if ties else v < best
                best = np.where(take, v, best)
                idx = np.where(take, i, idx)
        if call.attr("keepdims", 1):
            idx = np.expand_dims(idx, axis)
        return [np.asarray(idx, dtype=np.int64)]

    return reference


for _name, (_fn, _k) in _REDUCERS.items():
    register(OpSpec(_name, _reduce_infer, _reducer(_fn), _per_input_element(_k)))
_ARG_SIG = EggSig(
    attrs=(("axis", "i64", 0), ("keepdims", "i64", 1), ("select_last_index", "i64", 0))
)
for _name, _largest in (("ArgMax", True), ("ArgMin", False)):
    register(
        OpSpec(
            _name,
            _arg_infer,
            _arg_ref(_largest),
            _per_input_element(1.0),
            egg=_ARG_SIG,
            z3=z3_arg_extremum(_largest),
        )
    )
