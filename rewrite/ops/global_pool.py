"""Global pooling and LRN: GlobalMaxPool, GlobalAveragePool, LRN.

Contract: the global pools reduce all spatial axes of X (N, C, D...) to 1 (max or mean).
LRN(X) = X / (bias + alpha/size · Σ_{local channels} X²)^beta.

Typed forms: `(GlobalAveragePool X)`: MLAS's global kernel, float32 and float16 (in float32,
rounded once) with 1 to 3 spatial axes (`_mlas_mean`; ORT has no double kernel).
`(GlobalMaxPool X)`: float32 with 1 to 3 spatial axes, MLAS's global max kernel replayed
(`_max_pool`'s global path: four lanes from -FLT_MAX, so an all -inf plane gives -FLT_MAX,
and which of NaN and ±0 wins follows the lanes' comparisons); ORT has no double kernel and its
float16 kernel is outside the typed domain (`infer` refuses both).
`(LRN alpha beta bias size X)`: ORT's float32 kernel for X of rank 4 (`_lrn`: the running
channel sum and Eigen's pow, an uninterpreted function); `infer` refuses what ORT refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._lrn import check_ort_form, lrn_f32, lrn_params, lrn_terms
from rewrite.ops._max_pool import Geometry, max_pool
from rewrite.ops._z3 import RNE, const, divide
from rewrite.ops.base import (
    EggSig,
    OpCall,
    OpSpec,
    ReferenceFn,
    TensorType,
    elementwise_flops,
    fail,
)
from rewrite.ops.conv import float_dtype
from rewrite.ops.registry import register

Array = np.ndarray


def _global_infer(call: OpCall) -> list[TensorType]:
    """Y: (N, C, 1, ...) in X's dtype."""
    x = call.input(0)
    float_dtype(call, x.dtype)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if len(x.shape) < 2:
        raise fail(call, "X must have rank >= 2")
    return [TensorType(x.dtype, (*x.shape[:2], *[1] * (len(x.shape) - 2)))]


def _global_average_infer(call: OpCall) -> list[TensorType]:
    """As the other global pools, for what ORT runs: float32 or float16 with 1 to 3 spatial
    axes (it has no double kernel; MLAS refuses other ranks)."""
    x = call.input(0)
    float_dtype(call, x.dtype, frozenset({TensorProto.FLOAT, TensorProto.FLOAT16}))
    if x.shape is not None and not 3 <= len(x.shape) <= 5:
        raise fail(call, "X must have 1 to 3 spatial axes (ORT)")
    return _global_infer(call)


def _global_ref(fn: Callable[..., Array]) -> ReferenceFn:
    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        axes = tuple(range(2, x.ndim))
        return [fn(x.astype(np.float64), axis=axes, keepdims=True).astype(x.dtype)]

    return reference


def _mlas_mean(vals: list[Any], zero: Any, count: Any) -> Any:
    """MLAS's global average (`MlasPoolGlobalKernel`): four lanes from +0 (`zero`), lane j
    adding elements j, j + 4, ... of each whole block of 4, reduced as (l0 + l2) + (l1 + l3);
    the elements after the last whole block added one by one; divided by `count`. On Z3 terms
    or on numpy arrays (one plane per row)."""
    n4 = len(vals) // 4 * 4
    lanes = [zero] * 4
    for b in range(0, n4, 4):
        lanes = [lane + v for lane, v in zip(lanes, vals[b : b + 4], strict=True)]
    total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3])
    for v in vals[n4:]:
        total = total + v
    return divide(total, count) if z3.is_expr(total) else total / count


def _global_average_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The mean over the spatial axes in MLAS's order (`_mlas_mean`), in X's dtype (float16
    in float32, rounded once)."""
    x = arrays[0]
    assert x is not None
    wide = np.dtype(np.float32 if x.dtype in (np.float16, np.float32) else x.dtype)
    flat = x.reshape(x.shape[0] * x.shape[1], -1).astype(wide)
    with np.errstate(all="ignore"):
        y = _mlas_mean(list(flat.T), wide.type(0), wide.type(flat.shape[1]))
    return [np.asarray(y).astype(x.dtype).reshape(*x.shape[:2], *[1] * (x.ndim - 2))]


def _z3_global_average_pool(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The mean of each (N, C) plane in MLAS's order (`_mlas_mean`); float16 in float32,
    rounded once (ORT converts the buffer)."""
    x = arrays[0]
    assert x is not None
    _global_average_infer(call)  # float32 / float16, 1 to 3 spatial axes
    flat = x.reshape(*x.shape[:2], -1)
    y = np.empty((*x.shape[:2], *[1] * (x.ndim - 2)), dtype=object)
    for nc in np.ndindex(*x.shape[:2]):
        vals = list(flat[nc])
        narrow = vals[0].sort() if z3.is_fp(vals[0]) and vals[0].sort().sbits() < 24 else None
        if narrow is not None:
            vals = [z3.fpToFP(RNE, v, z3.Float32()) for v in vals]
        m = _mlas_mean(vals, const(0, vals[0]), const(len(vals), vals[0]))
        y[nc + (0,) * (x.ndim - 2)] = m if narrow is None else z3.fpToFP(RNE, m, narrow)
    return [y]


def _global_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """One operation per input element."""
    return float(call.input(0).numel or 0)


def _lrn_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type; `size` is required, and the form is one ORT runs (`_lrn.check_ort_form`:
    float32, rank 4, odd size, alpha and beta > 0)."""
    if call.attr("size") is None:
        raise fail(call, "attribute 'size' is required")
    check_ort_form(call)
    return [call.input(0)]


def _lrn_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """ORT's float32 kernel (`_lrn.lrn_f32`); other dtypes: the formula in float64."""
    x = arrays[0]
    assert x is not None
    if x.dtype == np.float32 and x.ndim == 4:
        return [lrn_f32(x, *lrn_params(call))]
    size = int(call.attr("size"))
    alpha, beta, bias = call.attr("alpha", 1e-4), call.attr("beta", 0.75), call.attr("bias", 1.0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.pad(x.astype(np.float64) ** 2, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    c = x.shape[1]
    ssum = sum(sq[:, j : j + c] for j in range(size))
    return [(x / (bias + alpha / size * ssum) ** beta).astype(x.dtype)]


def _z3_lrn(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Y as ORT's kernel computes it (`_lrn.lrn_terms`)."""
    x = arrays[0]
    assert x is not None
    return [lrn_terms(call, x)]


def _lrn_attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Sizes 1, 3, 5 (ORT takes odd ones), alpha, beta (integer and not) and bias > 0."""
    values: dict[str, list[Any]] = {
        "size": [1, 3, 5],
        "alpha": [1e-4, 0.5],
        "beta": [0.75, 1.0],
        "bias": [1.0, 2.0],
    }
    return values.get(name)


def _global_max_infer(call: OpCall) -> list[TensorType]:
    """As the other global pools, for what ORT runs typed: float32 with 1 to 3 spatial axes
    (no double kernel; float16 is outside the typed domain; MLAS refuses other ranks)."""
    x = call.input(0)
    float_dtype(call, x.dtype, frozenset({TensorProto.FLOAT}))
    if x.shape is not None and not 3 <= len(x.shape) <= 5:
        raise fail(call, "X must have 1 to 3 spatial axes (ORT)")
    return _global_infer(call)


def _global_max_y(call: OpCall, x: Array) -> Array:
    """MLAS's global max kernel replayed (`_max_pool`, kernel = the spatial dims)."""
    _global_max_infer(call)
    n = x.ndim - 2
    sp = tuple(int(d) for d in x.shape[2:])
    geo = Geometry(sp, (1,) * n, (1,) * n, [(0, 0)] * n, (1,) * n)
    return max_pool(call, x, geo)


def _global_max_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """ORT's values (`_global_max_y` on numpy scalars); other dtypes: numpy's max."""
    x = arrays[0]
    assert x is not None
    if x.dtype != np.float32 or not 3 <= x.ndim <= 5:
        return _global_ref(np.max)(call, arrays)
    cells = np.empty(x.size, dtype=object)
    cells[:] = list(x.reshape(-1))
    return [np.array(_global_max_y(call, cells.reshape(x.shape)).tolist(), dtype=x.dtype)]


def _z3_global_max_pool(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The max of each (N, C) plane as MLAS's global kernel computes it."""
    x = arrays[0]
    assert x is not None
    return [_global_max_y(call, x)]


def _lrn_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """size multiply-adds plus ~4 (scale, pow, divide) per element."""
    return (int(call.attr("size", 1)) + 4) * elementwise_flops(call, outputs)


register(
    OpSpec(
        "GlobalMaxPool",
        _global_max_infer,
        _global_max_ref,
        _global_flops,
        egg=EggSig(),
        z3=_z3_global_max_pool,
    )
)
register(
    OpSpec(
        "GlobalAveragePool",
        _global_average_infer,
        _global_average_ref,
        _global_flops,
        egg=EggSig(),
        z3=_z3_global_average_pool,
    )
)
register(
    OpSpec(
        "LRN",
        _lrn_infer,
        _lrn_ref,
        _lrn_flops,
        egg=EggSig(
            attrs=(
                ("alpha", "f64", 1e-4),
                ("beta", "f64", 0.75),
                ("bias", "f64", 1.0),
                ("size", "i64", None),
            )
        ),
        z3=_z3_lrn,
        attr_values=_lrn_attr_values,
    )
)
