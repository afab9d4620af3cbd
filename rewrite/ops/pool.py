"""Windowed pooling: MaxPool and AveragePool.

Contract: MaxPool / AveragePool(X (N, C, D...)) -> Y (N, C, O...) over windows of
`kernel_shape` (required) with strides, dilations, pads and auto_pad as for Conv (see
`conv.py`); ceil_mode rounds O up, dropping a last window that would start in the end
padding. MaxPool ignores padding and its optional second output is the INT64 flat index of
each maximum in X (row-major over N, C, D..., or column-major over D... when
storage_order=1). AveragePool divides by the number of input elements in the window, or,
with count_include_pad=1, by the window size clipped to the padded input. The global
pools and LRN are in `global_pool.py`.

Typed forms: `(AveragePool auto_pad ceil_mode count_include_pad kernel_shape pads strides X)`
(kernel_shape required; an empty vector is the attribute left out, as for Conv; a node with
`dilations`, opset 19, stays opaque). Its Z3 semantics sum the input elements each window
covers in kernel order (float16 in float32, rounded once) and divide by the count.
`(MaxPool auto_pad ceil_mode dilations kernel_shape pads storage_order strides X)`, Y only (a
node that declares Indices stays opaque): its reference (where X holds NaN, -inf or -0) and
Z3 semantics replay ORT's kernel for the form (`_max_pool`: which of NaN, ±0 and the padding
value wins depends on the MLAS or generic path); float16 is outside its domain (`infer`
refuses it: ORT's float16 kernels differ between 1-D and 2-D).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.errors import ShapeError
from rewrite.ops._max_pool import LOWEST, Geometry, max_pool
from rewrite.ops._z3 import RNE, const, divide, float_only
from rewrite.ops.base import (
    EggSig,
    OpCall,
    OpSpec,
    Shape,
    TensorType,
    fail,
)
from rewrite.ops.conv import (
    FLOATS,
    Window,
    float_dtype,
    out_dim,
    resolved_pads,
    taps,
    trailing,
    window,
)
from rewrite.ops.registry import register

Array = np.ndarray
INT64 = TensorProto.INT64
MAX_POOL_TYPES = frozenset(
    {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT8, TensorProto.UINT8}
)
"""MaxPool's typed domain: ORT's float16 kernels treat padding and NaN differently between 1-D
and 2-D (`_max_pool`), and it has no bfloat16 kernel."""


def _pool_window(call: OpCall, n: int) -> Window:
    ks = call.attr("kernel_shape")
    if not ks:
        raise fail(call, "attribute 'kernel_shape' is required")
    if len(ks) != n:
        raise fail(call, f"kernel_shape {list(ks)} does not fit {n} spatial axes")
    w = window(call, n, tuple(int(k) for k in ks))
    if w.auto_pad == "NOTSET" and any(max(p) >= k for p, k in zip(w.pads, ks, strict=True)):
        raise fail(call, "pads must be smaller than the kernel (ORT)")
    return w


def _pool_infer(call: OpCall) -> list[TensorType]:
    """Y: (N, C, O...) in X's dtype; MaxPool's Indices: the same shape in INT64."""
    x = call.input(0)
    float_dtype(call, x.dtype, MAX_POOL_TYPES if call.op_type == "MaxPool" else FLOATS)
    ks = call.attr("kernel_shape")
    shape: Shape | None
    if x.shape is None:
        shape = None if not ks else (None, None, *[None] * len(ks))
    else:
        if len(x.shape) < 3:
            raise fail(call, "X must have rank >= 3")
        w = _pool_window(call, len(x.shape) - 2)
        ceil = bool(call.attr("ceil_mode", 0))
        shape = (*x.shape[:2], *(out_dim(call, w, i, d, ceil) for i, d in enumerate(x.shape[2:])))
    return [TensorType(x.dtype, shape), TensorType(INT64, shape)][: max(1, call.n_outputs)]


def _padded(call: OpCall, x: Array, fill: float) -> tuple[Array, Window, tuple[int, ...], list]:
    """X in float64 padded with `fill` so that every window fits; the window; O; the pads."""
    w = _pool_window(call, x.ndim - 2)
    ceil = bool(call.attr("ceil_mode", 0))
    out_sp = tuple(int(out_dim(call, w, i, d, ceil)) for i, d in enumerate(x.shape[2:]))  # type: ignore[arg-type]
    pads = resolved_pads(w, x.shape[2:], out_sp)
    widths = [(0, 0), (0, 0)]
    for i, (d, (pb, pe)) in enumerate(zip(x.shape[2:], pads, strict=True)):
        needed = (out_sp[i] - 1) * w.strides[i] + (w.extent(i) or 1)
        widths.append((pb, pe + max(0, needed - (d + pb + pe))))
    xp = np.pad(x.astype(np.float64), widths, constant_values=fill)
    return xp, w, out_sp, pads


def _max_pool_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    xp, w, out_sp, pads = _padded(call, x, -np.inf)
    best = np.full((*x.shape[:2], *out_sp), -np.inf)
    index = np.zeros(best.shape, dtype=np.int64)
    spatial = x.shape[2:]
    order = (
        range(len(spatial)) if call.attr("storage_order", 0) else range(len(spatial) - 1, -1, -1)
    )
    strides, acc = [0] * len(spatial), 1
    for i in order:  # flat-index stride of each spatial axis
        strides[i], acc = acc, acc * spatial[i]
    for kidx, sl in taps(w, out_sp):
        v = xp[trailing(sl)]
        better = v > best
        best = np.where(better, v, best)
        flat = sum(
            (np.arange(o) * s + k * d - pb).reshape(
                [-1 if j == i else 1 for j in range(len(out_sp))]
            )
            * st
            for i, (o, s, k, d, (pb, _), st) in enumerate(
                zip(out_sp, w.strides, kidx, w.dilations, pads, strides, strict=True)
            )
        )
        index = np.where(better, flat, index)
    nc = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2] + (1,) * len(out_sp))
    index = index + nc * math.prod(spatial)
    y = best.astype(x.dtype)
    special = x.dtype.kind == "f" and (~np.isfinite(x) | ((x == 0) & np.signbit(x))).any()
    if special and call.input(0).dtype in LOWEST:  # NaN, -inf or -0: ORT's kernels exactly
        cells = np.empty(x.size, dtype=object)
        cells[:] = list(x.reshape(-1))
        with contextlib.suppress(ShapeError):  # a form ORT's kernels refuse: as above
            y = np.array(_max_pool_y(call, cells.reshape(x.shape)).tolist(), dtype=x.dtype)
    return [y, index.astype(np.int64)][: max(1, call.n_outputs)]


def _max_pool_y(call: OpCall, x: Array) -> Array:
    w = _pool_window(call, x.ndim - 2)
    ceil = bool(call.attr("ceil_mode", 0))
    out_sp = tuple(int(out_dim(call, w, i, d, ceil)) for i, d in enumerate(x.shape[2:]))  # type: ignore[arg-type]
    pads = resolved_pads(w, x.shape[2:], out_sp)
    kernel = tuple(int(k) for k in w.kernel)  # type: ignore[arg-type]
    return max_pool(call, x, Geometry(kernel, w.strides, w.dilations, pads, out_sp))


def _z3_max_pool(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Y as ORT's kernel for this form computes it (`_max_pool`)."""
    x = arrays[0]
    assert x is not None
    return [_max_pool_y(call, x)]


def _average_pool_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    xp, w, out_sp, pads = _padded(call, x, 0.0)
    inside = np.zeros(xp.shape[2:])
    if call.attr("count_include_pad", 0):
        inside[
            tuple(slice(0, d + pb + pe) for d, (pb, pe) in zip(x.shape[2:], pads, strict=True))
        ] = 1.0
    else:
        inside[tuple(slice(pb, pb + d) for d, (pb, _) in zip(x.shape[2:], pads, strict=True))] = 1.0
    total = np.zeros((*x.shape[:2], *out_sp))
    count = np.zeros(out_sp)
    for _, sl in taps(w, out_sp):
        total += xp[trailing(sl)]
        count += inside[sl]
    return [(total / count).astype(x.dtype)]


def _window_taps(
    call: OpCall, shape: tuple[int, ...]
) -> Iterator[tuple[tuple[int, ...], list[tuple[int, ...]], int]]:
    """Per output position: its index, the input positions its window covers (kernel order,
    row-major) and the number of its taps inside the padded input (count_include_pad)."""
    w = _pool_window(call, len(shape) - 2)
    ceil = bool(call.attr("ceil_mode", 0))
    out_sp = tuple(int(out_dim(call, w, i, d, ceil)) for i, d in enumerate(shape[2:]))  # type: ignore[arg-type]
    pads = resolved_pads(w, shape[2:], out_sp)
    for o in np.ndindex(*out_sp):
        inside: list[list[int]] = []
        padded = 1
        for i, d in enumerate(shape[2:]):
            start = o[i] * w.strides[i] - pads[i][0]
            pos = [start + k * w.dilations[i] for k in range(w.kernel[i] or 1)]
            inside.append([p for p in pos if 0 <= p < d])
            padded *= sum(1 for p in pos if -pads[i][0] <= p < d + pads[i][1])
        yield o, list(itertools.product(*inside)), padded


def _mean(vals: list[Any], count: int | None = None) -> Any:
    """(((v0 + v1) + v2) + ...) / count, in float32 for float16 / bfloat16 terms and rounded
    once (as ORT's kernels compute in float)."""
    narrow = vals[0].sort() if z3.is_fp(vals[0]) and vals[0].sort().sbits() < 24 else None
    if narrow is not None:
        vals = [z3.fpToFP(RNE, v, z3.Float32()) for v in vals]
    total = vals[0]
    for v in vals[1:]:
        total = total + v
    y = divide(total, const(len(vals) if count is None else count, vals[0]))
    return y if narrow is None else z3.fpToFP(RNE, y, narrow)


def _z3_average_pool(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The mean of the input elements each window covers (count_include_pad: divided by the
    taps inside the padded input), summed in kernel order (`_mean`)."""
    x = arrays[0]
    assert x is not None
    float_only(call)
    include_pad = bool(call.attr("count_include_pad", 0))
    outs = list(_window_taps(call, x.shape))
    out_sp = tuple(max(o[i] for o, _, _ in outs) + 1 for i in range(x.ndim - 2))
    y = np.empty((*x.shape[:2], *out_sp), dtype=object)
    for nc in np.ndindex(*x.shape[:2]):
        for o, pos, padded in outs:
            vals = [x[nc + p] for p in pos]
            y[nc + o] = _mean(vals, padded if include_pad else len(pos))
    return [y]


def _pool_attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Windows of 1 and 2 per axis, pads 0 and (0..., 1...), strides 1 and 2, dilations 1,
    ceil_mode both ways, auto_pad NOTSET and VALID."""
    xs = inputs[0].shape if inputs else None
    if xs is None or len(xs) < 3:
        return []
    n = len(xs) - 2
    if name == "kernel_shape":
        return [(2,) * n, (1,) * n]
    if name == "pads":
        return [(0,) * 2 * n, (0,) * n + (1,) * n]
    if name == "strides":
        return [(1,) * n, (2,) * n]
    if name == "dilations":
        return [(1,) * n]
    if name == "auto_pad":
        return ["NOTSET"]
    if name in ("ceil_mode", "count_include_pad"):
        return [0, 1]
    if name == "storage_order":
        return [0]
    return None


_WINDOW_ATTRS: tuple[tuple[str, str, Any], ...] = (
    ("auto_pad", "String", "NOTSET"),
    ("ceil_mode", "i64", 0),
    ("kernel_shape", "VecI", None),  # required: a node without it stays opaque
    ("pads", "VecI", ()),
    ("strides", "VecI", ()),
)


def _pool_sig(*extra: tuple[str, str, Any]) -> EggSig:
    """The typed form of a windowed pool: the window attributes and `extra`, by name."""
    return EggSig(attrs=tuple(sorted(_WINDOW_ATTRS + extra, key=lambda a: a[0])))


def _pool_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """One operation per output element per kernel tap that lands inside the input.

    Bounded by input elements × windows covering each (∏⌈k/s⌉): a kernel larger than the
    input (exporters write [1280, 1280] for a global pool) costs what it reads.
    """
    y = outputs[0].numel
    ks = call.attr("kernel_shape")
    if y is None or not ks:
        return 0.0
    taps = float(y * math.prod(ks))
    x = call.input(0).numel
    if x is None:
        return taps
    strides = call.attr("strides") or [1] * len(ks)
    overlap = math.prod(-(-k // max(1, s)) for k, s in zip(ks, strides, strict=False))
    return min(taps, float(x * overlap))


register(
    OpSpec(
        "MaxPool",
        _pool_infer,
        _max_pool_ref,
        _pool_flops,
        egg=_pool_sig(("dilations", "VecI", ()), ("storage_order", "i64", 0)),
        z3=_z3_max_pool,
        attr_values=_pool_attr_values,
    )
)
register(
    OpSpec(
        "AveragePool",
        _pool_infer,
        _average_pool_ref,
        _pool_flops,
        egg=_pool_sig(("count_include_pad", "i64", 0)),
        z3=_z3_average_pool,
        attr_values=_pool_attr_values,
    )
)
