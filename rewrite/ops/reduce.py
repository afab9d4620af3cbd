"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin.

Contract: Reduce*(X[, axes]) reduces X over `axes` (negative counts from the end), keeping
them as size-1 dims when keepdims=1 (the default). The axes are an attribute before opset 18
(before 13 for ReduceSum) and an optional INT64 input after; either form is accepted at any
opset. No axes (absent or empty) reduces every axis, or, with noop_with_empty_axes=1, returns
X with each element reduced alone, as ORT computes it (X for Sum/Mean/Max/Min/Prod; X·X,
|X|, sqrt(X·X), log X, LogSumExp of one element). The result keeps X's dtype.
ArgMax / ArgMin(X) give the INT64 index of the first (or, with select_last_index=1, last)
extremum along `axis` (default 0).

Typed forms: `(ArgMax axis keepdims select_last_index X)` (and ArgMin), with the Z3 semantics
and reference of a scan as ORT's kernel does it (`_reduce_z3`: NaN wins only at element 0);
`(ReduceSum keepdims noop_with_empty_axes X axes)` with the axes a constant vector input
(empty: none given, written back as an omitted input), and `(ReduceMean axes keepdims X)`
(and ReduceSumSquare) with the axes an attribute (read from, and written back to, the
constant input at opset 18 and later; a node with noop_with_empty_axes=1, an opset-18
attribute, stays opaque). Their Z3 semantics add in the order ORT 1.32's CPU kernels do with
one intra-op thread (`_reduce_order`: Eigen's 4-lane packets as a function of the row's
offset, MLAS's order, the generic loop from +0; float16 in float32; integers through float64,
saturated), for float, double, float16, int32 and int64.
`(ReduceMax axes keepdims X)` (and ReduceMin) have the same form as ReduceMean; their Z3
semantics and reference pick as ORT 1.32's kernels do (`_reduce_extrema`: m(a, b) = a < b ?
b : a over the same paths, so which NaN or signed zero survives is ORT's), exact for float,
float16, int32 and int64 (double: except the KRK path's NaN/±0 choice).
`(ReduceL1 axes keepdims X)` (and ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceProd) have
the same form too; their Z3 semantics and reference compute as ORT 1.32's kernels do
(`_reduce_norms`: Eigen's tree when every axis is reduced, else the generic row-major loop;
LogSumExp's max and -inf/inf cases as ORT; float16 in float32; integers through float64,
saturated), with a float's exp and log uninterpreted (the reference calls the C library's,
as ORT does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import TensorProto

from rewrite.ops._reduce_extrema import extremum, extremum_reference
from rewrite.ops._reduce_norms import NORMS, check_norm_dtype, norm_reference, norm_terms
from rewrite.ops._reduce_sum_z3 import (
    check_dtype,
    float_reference,
    int_reference,
    reduce_terms,
)
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
        return tuple(int(a) for a in given) or None
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


def resolve_axes(call: OpCall, rank: int, axes_input: Array | None) -> tuple[int, ...] | None:
    """The normalized reduced axes (every axis when none are given), or None for
    noop_with_empty_axes=1 with none given."""
    axes = reduce_axes(call, axes_input)
    if axes == UNKNOWN_AXES:
        raise fail(call, "the axes are not a known constant")
    if axes is None:
        return None if call.attr("noop_with_empty_axes", 0) else tuple(range(rank))
    return _normalize(call, axes, rank)  # type: ignore[arg-type]


def _reducer(name: str, fn: Reducer) -> ReferenceFn:
    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        """Floats in float64, rounded once; the typed ops as ORT computes them."""
        x = arrays[0]
        assert x is not None
        norm = resolve_axes(call, x.ndim, arrays[1] if len(arrays) > 1 else None)
        if name in TYPED and x.dtype in (np.int32, np.int64):
            y = int_reference(name, x, norm)
        elif name in TYPED and x.dtype in (np.float16, np.float32, np.float64):
            y = float_reference(name, x, norm)
        elif name in EXTREMA and x.dtype in _EXTREMA_DTYPES and norm is not None:
            y = extremum_reference(name == "ReduceMax", x, norm)
        elif name in NORMS and x.dtype in _EXTREMA_DTYPES:
            y = norm_reference(name, x, norm)
        elif norm is None:
            return [x * x if name == "ReduceSumSquare" else x.copy()]
        else:
            xw = x.astype(np.float64) if x.dtype.kind == "f" else x
            with np.errstate(all="ignore"):
                y = fn(xw, norm)
        if norm is not None and not call.attr("keepdims", 1):
            y = np.squeeze(y, axis=norm)
        return [np.asarray(y).astype(x.dtype)]

    return reference


Z3Fn = Callable[[OpCall, list[Array | None]], list[Array]]
TermsFn = Callable[[Array, int, tuple[int, ...] | None], Array]


def _z3_reduction(check: Callable[[OpCall], int], terms: TermsFn) -> Z3Fn:
    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        """`terms(X, dtype, axes)` (X as an object array, the checked dtype, the normalized
        axes or None for noop_with_empty_axes with none given): keepdims-shaped, squeezed
        when keepdims=0. An empty X fails."""
        dtype = check(call)
        x = arrays[0]
        assert x is not None
        if 0 in x.shape:
            raise fail(call, "X is empty")
        norm = resolve_axes(call, x.ndim, arrays[1] if len(arrays) > 1 else None)
        y = terms(np.asarray(x, dtype=object), dtype, norm)
        if norm is not None and not call.attr("keepdims", 1):
            y = np.squeeze(y, axis=norm)
        return [np.asarray(y, dtype=object)]

    return semantics


def _z3_reduce(name: str) -> Z3Fn:
    """The sum ORT computes, in its order (`_reduce_sum_z3`)."""
    return _z3_reduction(check_dtype, lambda x, dtype, axes: reduce_terms(name, x, dtype, axes))


def _z3_extremum(name: str) -> Z3Fn:
    """The max or min ORT picks, in its order (`_reduce_extrema`); no axes: X itself."""

    def terms(x: Array, dtype: int, axes: tuple[int, ...] | None) -> Array:
        return x if axes is None else extremum(name == "ReduceMax", x, dtype, axes)

    return _z3_reduction(check_dtype, terms)


def _z3_norm(name: str) -> Z3Fn:
    """What ORT's kernel computes, in its order (`_reduce_norms`)."""
    return _z3_reduction(check_norm_dtype, lambda x, dtype, axes: norm_terms(name, x, dtype, axes))


def _axes_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Axes: none, the last, the first, the second, first and last (RKR), the last two (KR),
    the second and third (KRK), all of them; keepdims 1 and 0; noop_with_empty_axes 0 and 1."""
    if name == "keepdims":
        return [1, 0]
    if name == "noop_with_empty_axes":
        return [0, 1]
    if name != "axes":
        return None
    r = len(inputs[0].shape or ()) if inputs and inputs[0] is not None else 0
    out: list[tuple[int, ...]] = [()]
    seen: set[frozenset[int]] = set()
    for axes in ((-1,), (0,), (1,), (0, r - 1), (r - 2, r - 1), (1, 2), tuple(range(r))):
        norm = frozenset(a % r for a in axes if r and -r <= a < r)
        if r and len(norm) == len(axes) and all(-r <= a < r for a in axes) and norm not in seen:
            seen.add(norm)
            out.append(axes)
    return out


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


TYPED = ("ReduceSum", "ReduceMean", "ReduceSumSquare")
EXTREMA = ("ReduceMax", "ReduceMin")
_EXTREMA_DTYPES = (np.float16, np.float32, np.float64, np.int32, np.int64)


def _no_noop(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """ReduceMean / ReduceSumSquare: noop_with_empty_axes (opset 18) stays opaque, so the typed
    form, written at any opset, never needs the attribute."""
    if attrs.pop("noop_with_empty_axes", 0):
        return None
    return attrs


_FLAGS = (("keepdims", "i64", 1), ("noop_with_empty_axes", "i64", 0))
_SIGS = {
    "ReduceSum": EggSig(attrs=_FLAGS, const_inputs=(1,), omittable=(1,)),
    "ReduceMean": EggSig(
        attrs=(("axes", "VecI", ()), _FLAGS[0]),
        attr_inputs=(("axes", 1, 18),),
        to_egg=_no_noop,
    ),
}
_SIGS["ReduceSumSquare"] = _SIGS["ReduceMax"] = _SIGS["ReduceMin"] = _SIGS["ReduceMean"]
_SIGS |= {name: _SIGS["ReduceMean"] for name in NORMS}
_Z3 = {name: _z3_extremum for name in EXTREMA} | {name: _z3_norm for name in NORMS}
for _name, (_fn, _k) in _REDUCERS.items():
    typed = _name in TYPED or _name in EXTREMA or _name in NORMS
    register(
        OpSpec(
            _name,
            _reduce_infer,
            _reducer(_name, _fn),
            _per_input_element(_k),
            egg=_SIGS.get(_name),
            z3=_Z3.get(_name, _z3_reduce)(_name) if typed else None,
            attr_values=_axes_values if typed else None,
        )
    )
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
