"""FusedConv (domain com.microsoft): Conv, plus an optional sum input, then an activation.

Contract (ORT's CPU kernel, contrib_ops/cpu/fused_conv.cc: ONNX's Conv<float> with an MLAS
activation; float32 only): FusedConv(X, W[, B][, Z]) = act(Conv(X, W, B) + Z), Conv's
attributes, Z of the output's shape, `activation` one of "" (none), Relu, Tanh, Sigmoid,
LeakyRelu (activation_params = [alpha]), Clip ([min, max]), HardSigmoid ([alpha,
beta]); another activation stays opaque (ORT refuses it).

Typed form: Conv's attributes, `activation` and the parameters as `alpha` and `beta` (the
first and second of activation_params; Clip's min and max): `to_egg` / `from_egg`. The
reference computes Conv's sums of products in float64, rounded to X's dtype once, then + Z,
then + B (MLAS's GEMM accumulates into the Z it is given; the bias comes after), then the
activation, in X's dtype; the Z3 semantics is Conv's sums of products (not MLAS's order: not
bit-exact, as Conv's) + Z + B in that order, then the activation: Relu max(x, 0),
LeakyRelu x >= 0 ? x : alpha·x, Clip min(max(x, lo), hi), HardSigmoid
max(min(alpha·x + beta, 1), 0) (NaN kept by all four), Sigmoid and Tanh through the
uninterpreted exp / tanh (MLAS's approximations: not bit-exact).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._z3 import const, float_only, relu, vmap
from rewrite.ops.activation_z3 import f32_attr, hard_sigmoid, z3_max, z3_min
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail
from rewrite.ops.conv import (
    CONV_ATTRS,
    _conv_attr_values,
    _conv_flops,
    _conv_infer,
    _conv_ref,
    _z3_conv,
)
from rewrite.ops.registry import register
from rewrite.ops.unary import TANH, z3_sigmoid

MS = "com.microsoft"
Array = np.ndarray
F32 = np.float32

N_PARAMS = {"": 0, "Relu": 0, "Tanh": 0, "Sigmoid": 0}
N_PARAMS |= {"LeakyRelu": 1, "Clip": 2, "HardSigmoid": 2}
"""The activations ORT 1.32's kernel takes (not Silu: later versions), and how many
activation_params each has."""


def _infer(call: OpCall) -> list[TensorType]:
    """Conv's output type; Z (input 3), when given, has that shape; float32 only."""
    if call.attr("activation", "") not in N_PARAMS:
        raise fail(call, f"unknown activation {call.attr('activation')!r}")
    y = _conv_infer(call)[0]
    for i in range(len(call.inputs)):
        if call.input(i).dtype not in (0, TensorProto.FLOAT):
            raise fail(call, "ORT's kernel is float32 only")
    z = call.input(3).shape if call.has_input(3) else None
    if z is not None and y.shape is not None and not _same_shape(z, y.shape):
        raise fail(call, f"Z of shape {z} is not the output's {y.shape}")
    return [y]


def _same_shape(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Same rank, and no two static dims that differ."""
    pairs = zip(a, b, strict=False)
    return len(a) == len(b) and not any(
        isinstance(p, int) and isinstance(q, int) and p != q for p, q in pairs
    )


def _reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Conv's sums in float64 rounded to X's dtype, then + Z, then + B (MLAS's GEMM adds into
    the Z it was given, the bias after), then the activation, in X's dtype."""
    x, b = arrays[0], arrays[2] if len(arrays) > 2 else None
    assert x is not None
    wide = [None if a is None else a.astype(np.float64) for a in arrays[:2]]
    y = _conv_ref(call, wide)[0].astype(x.dtype)
    with np.errstate(all="ignore"):
        if len(arrays) > 3 and arrays[3] is not None:
            y = y + arrays[3].astype(x.dtype)
        if b is not None:
            y = y + b.astype(x.dtype).reshape(-1, *[1] * (x.ndim - 2))
        return [_np_activation(call, y)]


def _np_activation(call: OpCall, y: Array) -> Array:
    num = y.dtype.type
    act, a, b = call.attr("activation", ""), num(_param(call, 0)), num(_param(call, 1))
    zero, one = num(0), num(1)
    if act == "Relu":
        return np.where(y < 0, zero, y)
    if act == "LeakyRelu":
        return np.where(y >= 0, y, y * a)
    if act == "Clip":
        y = np.where(y < a, a, y)
        return np.where(b < y, b, y)
    if act == "HardSigmoid":
        t = y * a + b
        return np.where(t < 0, zero, np.where(one < t, one, t))
    if act == "Sigmoid":
        return (1.0 / (1.0 + np.exp(-y.astype(np.float64)))).astype(y.dtype)
    if act == "Tanh":
        return np.tanh(y)
    return y


def _param(call: OpCall, i: int) -> Any:
    """alpha (i = 0) or beta (1) as ORT's kernel holds it: a float32."""
    return float(F32(call.attr(("alpha", "beta")[i], 0.0)))


def _z3(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    float_only(call)
    x, b = arrays[0], arrays[2] if len(arrays) > 2 else None
    assert x is not None
    y = _z3_conv(call, list(arrays[:2]))[0]
    if len(arrays) > 3 and arrays[3] is not None:
        y = y + arrays[3]
    if b is not None:
        y = y + b.reshape(-1, *[1] * (x.ndim - 2))
    act = call.attr("activation", "")
    a, b = f32_attr(call, "alpha", 0.0), f32_attr(call, "beta", 0.0)
    fns: dict[str, Any] = {
        "": lambda t: t,
        "Relu": relu,
        "LeakyRelu": lambda t: _leaky(t, a),
        "Clip": lambda t: z3_min(z3_max(t, a), b),
        "HardSigmoid": lambda t: hard_sigmoid(t, a, b),
        "Sigmoid": z3_sigmoid,
        "Tanh": TANH,
    }
    return [vmap(fns[act], y)]


def _leaky(t: Any, alpha: Any) -> Any:
    """x if x >= 0 else alpha·x (NaN: alpha·NaN = NaN)."""
    return z3.If(t >= const(0, t), t, (alpha if z3.is_expr(alpha) else const(alpha, t)) * t)


def to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """activation_params -> alpha, beta; None (opaque) for an activation ORT does not take
    or a parameter count that does not fit it."""
    act = attrs.get("activation", "")
    params = [float(v) for v in attrs.pop("activation_params", [])]
    if act not in N_PARAMS or len(params) != N_PARAMS[act]:
        return None
    for name, v in zip(("alpha", "beta"), params, strict=False):
        attrs[name] = v
    return attrs


def from_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    """alpha, beta -> activation_params (as many as the activation takes)."""
    params = [attrs.pop("alpha", 0.0), attrs.pop("beta", 0.0)]
    act = attrs.get("activation", "")
    if not act:
        attrs.pop("activation", None)
    if N_PARAMS.get(act, 0):
        attrs["activation_params"] = [float(p) for p in params[: N_PARAMS[act]]]
    return attrs


def _attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Conv's; the piecewise-linear activations (exact in IEEE arithmetic) with alpha 0.5 and
    beta 0.75 (Clip: [0.5, 0.75]). Tanh and Sigmoid are left out: with their functions
    uninterpreted the self-test evaluates the whole term in reals, where Conv + Z + B does
    not cancel as ORT's float32 sums do (tests/ops/test_typed_contrib_ops.py checks them)."""
    if name == "activation":
        return ["", "Relu", "LeakyRelu", "Clip", "HardSigmoid"]
    if name in ("alpha", "beta"):
        return [0.5] if name == "alpha" else [0.75]
    return _conv_attr_values(name, inputs)


register(
    OpSpec(
        "FusedConv",
        _infer,
        _reference,
        _conv_flops,
        domain=MS,
        egg=EggSig(
            attrs=(
                ("activation", "String", ""),
                ("alpha", "f64", 0.0),
                ("beta", "f64", 0.0),
                *CONV_ATTRS,
            ),
            n_inputs=4,
            optional=2,
            to_egg=to_egg,
            from_egg=from_egg,
        ),
        z3=_z3,
        attr_values=_attr_values,
        doc="FusedConv(X, W, B?, Z?) = activation(Conv(X, W, B) + Z)",
    )
)
