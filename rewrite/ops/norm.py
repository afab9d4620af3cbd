"""Normalizations: LayerNormalization, BatchNormalization (inference) and
SimplifiedLayerNormalization (InstanceNormalization: `instance_norm.py`; Softmax: `softmax.py`).

Contract: LayerNormalization(X, Scale[, B]) normalizes over axes [axis, rank) (axis = -1):
Y = (X - mean) / sqrt(var + epsilon) · Scale + B; optional outputs Mean and InvStdDev have
X's shape with the normalized axes set to 1, in the `stash_type` dtype (FLOAT); typed with
an output used as `(LayerNormalizationPart axis epsilon stash_type index X Scale B)`
(`ops.parts`): Mean as ORT 1.32 gives it bit for bit (float64 sum, rounded once);
InvStdDev exact in reals, in floats float64 (two-pass variance) rounded once: within 2 ulps of
ORT's where |mean| is not far above the row's spread, up to ~500 ulps where it is (ORT's
variance order is not replayed).
BatchNormalization(X, scale, B, mean, var) at inference: per channel (axis 1),
Y = (X - mean) / sqrt(var + epsilon) · scale + B; typed (one output, no training_mode
attribute) as `(BatchNormalization epsilon momentum X scale B mean var)`, its Z3 semantics in
the order ORT's kernel computes it: s = scale · (1 / sqrt(var + epsilon)),
Y = X·s + (B - mean·s). InstanceNormalization: `instance_norm.py`.

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
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

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
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, broadcast, fail
from rewrite.ops.elementwise import per_element
from rewrite.ops.registry import register
from rewrite.ops.unary import SQRT

Array = np.ndarray


def norm_axis(call: OpCall, rank: int | None, default: int) -> int | None:
    """`axis` normalized to [0, rank); None when the rank is unknown."""
    axis = int(call.attr("axis", default))
    if rank is None:
        return None
    if not -rank <= axis < max(rank, 1):
        raise fail(call, f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _layer_norm_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type; Mean, InvStdDev: X's shape with axes >= axis set to 1, stash dtype."""
    return _layer_norm_types(call)[: max(1, call.n_outputs)]


def _layer_norm_types(call: OpCall) -> list[TensorType]:
    """[Y, Mean, InvStdDev]'s types (`_layer_norm_infer`)."""
    x = call.input(0)
    axis = norm_axis(call, x.rank, -1)
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
    return [x, stat, stat]


def _layer_norm_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    return _layer_norm_all(call, arrays)[: max(1, call.n_outputs)]


def _layer_norm_all(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """[Y, Mean, InvStdDev] in float64, each rounded once."""
    x, scale = arrays[0], arrays[1]
    assert x is not None and scale is not None
    b = arrays[2] if len(arrays) > 2 else None
    axis = norm_axis(call, x.ndim, -1)
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
    return [y.astype(x.dtype), mean.astype(stash), inv.astype(stash)]


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
    mean, inv = _layer_norm_stats(call, x)
    return (x - mean) * inv * scale + b


def _layer_norm_stats(call: OpCall, x: Array) -> tuple[Array, Array]:
    """(mean, 1 / sqrt(var + epsilon)) over axes [axis, rank), kept as 1 (var two-pass)."""
    axes = tuple(range(norm_axis(call, x.ndim, -1) or 0, x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    mean = x.sum(axis=axes, keepdims=True) / n
    var = ((x - mean) * (x - mean)).sum(axis=axes, keepdims=True) / n
    eps = _epsilon(call, float, var.flat[0])
    return mean, vmap(lambda v: 1 / square_root(v + eps, SQRT), var)


def _z3_layer_norm_part(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Output `index` of LayerNormalization: 0 is `_z3_layer_norm` (the same term: the part
    and the single-output op are provably equal); 1 and 2 are `_layer_norm_stats`' mean and
    inverse standard deviation, in IEEE floats computed in float64 and rounded once to the
    stash dtype (float32 for stash_type 1, else X's)."""
    index = int(call.attr("index", 0))
    if index == 0:
        return _z3_layer_norm(call, arrays)
    float_only(call)
    x = arrays[0]
    assert x is not None
    if current_model() == IEEE and z3.is_fp(x.flat[0]):
        stash = z3.Float32() if call.attr("stash_type", 1) == 1 else x.flat[0].sort()
        wide = vmap(lambda t: z3.fpToFP(RNE, t, z3.Float64()), x)
        stat = _layer_norm_stats(call, wide)[index - 1]
        return [vmap(lambda t: z3.fpToFP(RNE, t, stash), stat)]
    return [_layer_norm_stats(call, x)[index - 1]]


def _layer_norm_part_infer(call: OpCall) -> list[TensorType]:
    index = int(call.attr("index", 0))
    if not 0 <= index < 3:
        raise fail(call, f"index {index}")
    return [_layer_norm_types(call)[index]]


def _layer_norm_part_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Proofs and the self-test: stash_type FLOAT (the only one ORT's kernel has), every index."""
    values: dict[str, list[Any]] = {"stash_type": [TensorProto.FLOAT], "index": [0, 1, 2]}
    return values.get(name)


def _layer_norm_part_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    return [_layer_norm_all(call, arrays)[int(call.attr("index", 0))]]


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
    axis = norm_axis(call, x.ndim, -1) or 0
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
    axes = tuple(range(norm_axis(call, x.ndim, -1) or 0, x.ndim))
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
        "LayerNormalizationPart",
        _layer_norm_part_infer,
        _layer_norm_part_ref,
        per_element(8),
        egg=EggSig(attrs=(*_NORM_ATTRS, ("index", "i64", 0)), n_inputs=3),
        z3=_z3_layer_norm_part,
        attr_values=_layer_norm_part_values,
        onnx_op="LayerNormalization",
        doc="LayerNormalizationPart(...): output `index` (Y, Mean, InvStdDev) of an ONNX "
        "LayerNormalization (`ops.parts`)",
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
