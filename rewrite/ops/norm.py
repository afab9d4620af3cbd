"""Normalizations: LayerNormalization, BatchNormalization (inference), InstanceNormalization,
and Softmax / LogSoftmax (Hardmax: `hardmax.py`).

Contract: LayerNormalization(X, Scale[, B]) normalizes over axes [axis, rank) (axis = -1):
Y = (X - mean) / sqrt(var + epsilon) · Scale + B; optional outputs Mean and InvStdDev have
X's shape with the normalized axes set to 1, in the `stash_type` dtype (FLOAT).
BatchNormalization(X, scale, B, mean, var) at inference: per channel (axis 1),
Y = (X - mean) / sqrt(var + epsilon) · scale + B; typed (one output, no training_mode
attribute) as `(BatchNormalization epsilon momentum X scale B mean var)`, its Z3 semantics in
the order ORT's kernel computes it: s = scale · (1 / sqrt(var + epsilon)),
Y = X·s + (B - mean·s). InstanceNormalization: `instance_norm.py`. Softmax along `axis`
from opset 13 (default -1); before 13 (default axis 1) over X coerced to 2-D at `axis` (dims
[0, axis) x [axis, rank)). All keep X's dtype and shape. Softmax and LogSoftmax are typed,
`(LogSoftmax axis X)`, with Z3 semantics in ORT's order (x - max first; LogSoftmax:
(x - max) - log(sum(exp(x - max)))), exact in reals with exp and log as UFs; in floats not
bit-exact (MLAS's exp and log).

SimplifiedLayerNormalization(X, scale) (RMSNorm; ORT registers it in the ONNX domain "", not
in com.microsoft) normalizes over axes [axis, rank): Y = X / sqrt(mean(X²) + epsilon) · scale;
typed (one output) with its Z3 semantics in the order ORT 1.32's CPU kernel computes it, in
X's dtype: X² rounded, summed left to right, divided by n, + epsilon, sqrt, then X / that,
then · scale (bit-identical to ORT for n < 16; ORT's kernel sums 16 or more elements
vectorized, in an order no semantics here states). A scale that broadcasts (fewer than n
elements) takes ORT's other path: float64 throughout, rounded once (as LayerNormalization).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._unary_z3 import z3_log
from rewrite.ops._z3 import (
    IEEE,
    RNE,
    const,
    current_model,
    divide,
    float_only,
    square_root,
    vmap,
)
from rewrite.ops.base import EggSig, OpCall, OpSpec, ReferenceFn, TensorType, broadcast, fail
from rewrite.ops.elementwise import per_element
from rewrite.ops.registry import register
from rewrite.ops.unary import EXP, SQRT

Array = np.ndarray


def _axis(call: OpCall, rank: int | None, default: int) -> int | None:
    """`axis` normalized to [0, rank); None when the rank is unknown."""
    axis = int(call.attr("axis", default))
    if rank is None:
        return None
    if not -rank <= axis < max(rank, 1):
        raise fail(call, f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _layer_norm_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type; Mean, InvStdDev: X's shape with axes >= axis set to 1, stash dtype."""
    x = call.input(0)
    axis = _axis(call, x.rank, -1)
    stat_shape = None
    if x.shape is not None and axis is not None:
        stat_shape = (*x.shape[:axis], *[1] * (len(x.shape) - axis))
    if x.shape is not None and axis is not None:
        normalized = tuple(x.shape[axis:])
        for i in (1, 2):
            s = call.input(i).shape if call.has_input(i) else None
            if s is not None and broadcast(normalized, s) != normalized:
                raise fail(call, f"input {i} of shape {s} does not broadcast to {normalized}")
    stat = TensorType(int(call.attr("stash_type", TensorProto.FLOAT)), stat_shape)
    return [x, stat, stat][: max(1, call.n_outputs)]


def _layer_norm_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, scale = arrays[0], arrays[1]
    assert x is not None and scale is not None
    b = arrays[2] if len(arrays) > 2 else None
    axis = _axis(call, x.ndim, -1)
    axes = tuple(range(axis or 0, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(
        ((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + call.attr("epsilon", 1e-5)
    )
    y = (x64 - mean) * inv * scale
    if b is not None:
        y = y + b
    stash = np.dtype(np.float32) if call.attr("stash_type", 1) == 1 else x.dtype
    return [y.astype(x.dtype), mean.astype(stash), inv.astype(stash)][: max(1, call.n_outputs)]


def _channel(x: Array, v: Array) -> Array:
    """A per-channel vector shaped to broadcast along axis 1 of x."""
    return v.astype(np.float64).reshape(-1, *[1] * (x.ndim - 2))


def _batch_norm_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type; scale, B, mean and var must be (C,); training-mode outputs (running mean /
    var, ...) are (C,) vectors."""
    x = call.input(0)
    if x.rank is not None and x.rank < 2:
        raise fail(call, "X must have rank >= 2")
    c = x.shape[1] if x.shape is not None else None
    for i in range(1, 5):
        s = call.input(i).shape
        if s is None:
            continue
        if len(s) != 1 or (isinstance(c, int) and isinstance(s[0], int) and s[0] != c):
            raise fail(call, f"input {i} of shape {s} is not ({c},)")
    stat = TensorType(call.input(3).dtype or x.dtype, (c,))
    return [x, *[stat] * (max(1, call.n_outputs) - 1)]


def _batch_norm_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Inference mode only (training_mode = 0, one output)."""
    x, scale, b, mean, var = arrays[:5]
    assert x is not None and scale is not None and b is not None
    assert mean is not None and var is not None
    if call.attr("training_mode", 0) or call.n_outputs > 1:
        raise ValueError("BatchNormalization: training mode has no reference")
    eps = call.attr("epsilon", 1e-5)
    inv = _channel(x, scale) / np.sqrt(_channel(x, var) + eps)
    y = (x.astype(np.float64) - _channel(x, mean)) * inv + _channel(x, b)
    return [y.astype(x.dtype)]


def _z3_batch_norm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Y = X·s + (B - mean·s) with s = scale · (1 / sqrt(var + epsilon)), per channel (axis 1),
    as ORT's kernel computes it (in reals equal to (X - mean) / sqrt(var + epsilon) · scale + B)."""
    float_only(call)
    x, scale, b, mean, var = arrays[:5]
    assert x is not None and scale is not None and b is not None
    assert mean is not None and var is not None
    eps = float(np.float32(call.attr("epsilon", 1e-5)))  # an ONNX float attribute is float32
    inv = vmap(lambda v: divide(const(1, v), square_root(v + eps, SQRT)), var)
    s = inv * scale
    bias = b - mean * s
    shape = (-1, *[1] * (x.ndim - 2))
    return [x * s.reshape(shape) + bias.reshape(shape)]


def _batch_norm_attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """momentum only matters in training: its default."""
    return [0.9] if name == "momentum" else None


def _softmax_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type (the axis is checked against X's rank)."""
    x = call.input(0)
    _axis(call, x.rank, -1 if call.opset >= 13 else 1)
    return [x]


def _along_axis(fn: Callable[[Array, int], Array]) -> ReferenceFn:
    """Apply `fn(x, axis)` in float64: at `axis` (opset >= 13) or on X coerced to 2-D."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        x64 = x.astype(np.float64)
        if call.opset >= 13:
            return [fn(x64, _axis(call, x.ndim, -1) or 0).astype(x.dtype)]
        axis = _axis(call, x.ndim, 1) or 0
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        return [fn(x64.reshape(rows, -1), 1).reshape(x.shape).astype(x.dtype)]

    return reference


def _softmax(x: Array, axis: int) -> Array:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x: Array, axis: int) -> Array:
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _max_along(x: Array, axis: int) -> Array:
    """max over `axis` (kept, size 1) of a Z3 term array: the first greatest, as a loop does."""
    moved = np.moveaxis(x, axis, -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = reduce(lambda a, b: z3.If(b > a, b, a), list(moved[idx]))
    return np.expand_dims(out, axis)


def _z3_softmax(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """exp(x - max) / sum(exp(x - max), axis), as ORT computes it (opset >= 13): in reals equal
    to exp(x) / sum(exp(x)), in floats finite where that form overflows."""
    float_only(call)
    x = arrays[0]
    assert x is not None
    axis = _axis(call, x.ndim, -1) or 0
    x = x - _max_along(x, axis)
    e = vmap(EXP, x)
    return [e / e.sum(axis=axis, keepdims=True)]


def _z3_log_softmax(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """(x - max) - log(sum(exp(x - max), axis)), as ORT computes it (opset >= 13): exact in
    reals (exp and log the UFs), in floats only up to the kernel's exp/log (not bit-exact)."""
    float_only(call)
    x = arrays[0]
    assert x is not None
    axis = _axis(call, x.ndim, -1) or 0
    z = x - _max_along(x, axis)
    total = vmap(EXP, z).sum(axis=axis, keepdims=True)
    return [z - vmap(z3_log, total)]


def _z3_layer_norm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """(x - mean) / sqrt(var + epsilon) · scale + bias over axes [axis, rank), in reals; in
    IEEE floats computed in float64 and rounded to the input's type once, as ORT's kernel
    accumulates in double (no overflow of x² at 3e38)."""
    float_only(call)
    x, scale, b = arrays[0], arrays[1], arrays[2]
    assert x is not None and scale is not None and b is not None
    if current_model() == IEEE and z3.is_fp(x.flat[0]):
        sort = x.flat[0].sort()
        wide = [vmap(lambda t: z3.fpToFP(RNE, t, z3.Float64()), a) for a in (x, scale, b)]
        y = _layer_norm_terms(call, *wide)
        return [vmap(lambda t: z3.fpToFP(RNE, t, sort), y)]
    return [_layer_norm_terms(call, x, scale, b)]


def _layer_norm_terms(call: OpCall, x: Array, scale: Array, b: Array) -> Array:
    axes = tuple(range(_axis(call, x.ndim, -1) or 0, x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    mean = x.sum(axis=axes, keepdims=True) / n
    var = ((x - mean) * (x - mean)).sum(axis=axes, keepdims=True) / n
    eps = _epsilon(call, float, var.flat[0])
    inv = vmap(lambda v: 1 / square_root(v + eps, SQRT), var)
    return (x - mean) * inv * scale + b


def _epsilon(call: OpCall, kind: Callable[[float], Any], like: Any) -> Any:
    """The epsilon attribute as a number, or as the Z3 term it is where a rule's right side
    takes it from a matched constant (`epsilon=eps.value()`), in the float sort of `like`."""
    eps = call.attr("epsilon", 1e-5)
    if not isinstance(eps, z3.ExprRef):
        return float(kind(eps))
    if z3.is_fp(eps) and z3.is_fp(like) and eps.sort() != like.sort():
        return z3.fpToFP(RNE, eps, like.sort())
    return eps


def _rms_norm_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type; InvStdDev (optional): X's shape with axes >= axis set to 1, stash dtype."""
    return _layer_norm_infer(call)[: max(1, min(2, call.n_outputs))]


def _rms_norm_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """As ORT's kernel: a scale of n elements in X's dtype, x² summed left to right (a
    cumulative sum); a broadcast scale in float64, rounded once."""
    x, scale = arrays[0], arrays[1]
    assert x is not None and scale is not None
    axis = _axis(call, x.ndim, -1) or 0
    n = int(np.prod(x.shape[axis:], dtype=np.int64))
    dt = x.dtype if scale.size == n else np.dtype(np.float64)
    xs = x.astype(dt)
    with np.errstate(all="ignore"):
        flat = (xs * xs).reshape(*x.shape[:axis], n)
        total = np.cumsum(flat, axis=-1, dtype=dt)[..., -1:] if n else np.zeros_like(flat[..., :1])
        ms = (total / dt.type(n)).astype(dt).reshape(*x.shape[:axis], *[1] * (x.ndim - axis))
        r = np.sqrt(ms + dt.type(np.float32(call.attr("epsilon", 1e-5)))).astype(dt)
        y = ((xs / r).astype(dt) * scale.astype(dt)).astype(x.dtype)
    stash = np.dtype(np.float32) if call.attr("stash_type", 1) == 1 else x.dtype
    return [y, (1 / r).astype(stash)][: max(1, min(2, call.n_outputs))]


def _z3_rms_norm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """X / sqrt(sum(X·X) / n + epsilon) · scale over axes [axis, rank), as ORT's kernel: with a
    scale of n elements left to right in X's dtype (x² overflows to inf at 1e20 in float32:
    Y = 0); with a broadcast scale in float64, rounded to X's dtype once."""
    float_only(call)
    x, scale = arrays[0], arrays[1]
    assert x is not None and scale is not None
    axes = tuple(range(_axis(call, x.ndim, -1) or 0, x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    if scale.size != n and current_model() == IEEE and z3.is_fp(x.flat[0]):
        sort = x.flat[0].sort()
        wide = [vmap(lambda t: z3.fpToFP(RNE, t, z3.Float64()), a) for a in (x, scale)]
        y = _rms_norm_terms(call, axes, n, *wide)
        return [vmap(lambda t: z3.fpToFP(RNE, t, sort), y)]
    return [_rms_norm_terms(call, axes, n, x, scale)]


def _rms_norm_terms(call: OpCall, axes: tuple[int, ...], n: int, x: Array, scale: Array) -> Array:
    ms = (x * x).sum(axis=axes, keepdims=True) / n
    eps = _epsilon(call, np.float32, ms.flat[0])  # an ONNX float attribute is float32
    r = vmap(lambda v: square_root(v + eps, SQRT), ms)
    return vmap(divide, x, r) * scale


_NORM_ATTRS = (("axis", "i64", -1), ("epsilon", "f64", 1e-5), ("stash_type", "i64", 1))
"""LayerNormalization's and SimplifiedLayerNormalization's typed attributes."""

register(
    OpSpec(
        "SimplifiedLayerNormalization",
        _rms_norm_infer,
        _rms_norm_ref,
        per_element(5),
        # ORT's schema is in the ONNX domain (version 1); typed with only Y used
        egg=EggSig(attrs=_NORM_ATTRS, n_inputs=2),
        z3=_z3_rms_norm,
        doc="SimplifiedLayerNormalization(X, scale) = X / sqrt(mean(X²) + epsilon) · scale",
    )
)
register(
    OpSpec(
        "LayerNormalization",
        _layer_norm_infer,
        _layer_norm_ref,
        per_element(8),
        # typed with scale and bias given and only the normalized output used
        egg=EggSig(attrs=_NORM_ATTRS, n_inputs=3),
        z3=_z3_layer_norm,
    )
)
register(
    OpSpec(
        "BatchNormalization",
        _batch_norm_infer,
        _batch_norm_ref,
        per_element(2),
        # typed with the inference form only: one output, no training_mode attribute
        egg=EggSig(attrs=(("epsilon", "f64", 1e-5), ("momentum", "f64", 0.9)), n_inputs=5),
        z3=_z3_batch_norm,
        attr_values=_batch_norm_attr_values,
    )
)
register(
    OpSpec(
        "Softmax",
        _softmax_infer,
        _along_axis(_softmax),
        per_element(5),
        egg=EggSig(attrs=(("axis", "i64", -1),), n_inputs=1),
        z3=_z3_softmax,
    )
)
register(
    OpSpec(
        "LogSoftmax",
        _softmax_infer,
        _along_axis(_log_softmax),
        per_element(6),
        egg=EggSig(attrs=(("axis", "i64", -1),), n_inputs=1),
        z3=_z3_log_softmax,
    )
)
