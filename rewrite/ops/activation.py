"""Parametric activations: Softplus, Softsign, LeakyRelu, PRelu, Elu, Celu, Selu,
ThresholdedRelu, HardSigmoid, HardSwish, Mish, Gelu (opset 20) and Clip.

Contract: each maps X to an output of X's dtype and shape. Attributes take their ONNX
defaults when absent. Clip takes its bounds from attributes `min`/`max` before opset 11 and
from optional inputs 1 and 2 from opset 11 (either form is accepted at any opset); the
bounds are scalars (shape () or [1], as ORT requires); a missing bound is the dtype's lowest
(highest) finite value, as ORT's kernel uses: Clip(X, lo, hi) = min(max(X, lo), hi) with
max(x, lo) = lo if x < lo else x and min(y, hi) = hi if hi < y else y, so a NaN bound clips
nothing, a NaN in X stays NaN and lo > hi gives hi everywhere. PRelu's slope broadcasts
unidirectionally to X.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.errors import ShapeError
from rewrite.ops._z3 import SIGNED, const, is_int, vmap
from rewrite.ops.activation_z3 import (
    GELU_B64,
    GELU_C64,
    HARD_SWISH_ALPHA,
    Z3_SEMANTICS,
    selu,
)
from rewrite.ops.base import (
    EggSig,
    OpCall,
    OpSpec,
    ReferenceFn,
    TensorType,
    broadcast,
    fail,
    np_dtype,
)
from rewrite.ops.elementwise import per_element, same_type
from rewrite.ops.registry import register
from rewrite.ops.unary import TRANSCENDENTAL, erf

Array = np.ndarray
F32 = np.float32

SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


def _f64(fn: Callable[[OpCall, Array], Array]) -> ReferenceFn:
    """Evaluate `fn(call, x)` in float64 and return it in X's dtype."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        with np.errstate(all="ignore"):
            return [np.asarray(fn(call, x.astype(np.float64))).astype(x.dtype)]

    return reference


def _stepwise(fn: Callable[[OpCall, Array], Array]) -> ReferenceFn:
    """Evaluate `fn(call, x)` step by step in ORT's working type (float32, float64 for a
    double X: ORT runs float16 through float32) and return it in X's dtype: the kernels'
    roundings, so float32 outputs are ORT's bit for bit where `fn` uses no exp."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        work = np.float64 if x.dtype == np.float64 else np.float32
        with np.errstate(all="ignore"):
            return [np.asarray(fn(call, x.astype(work))).astype(x.dtype)]

    return reference


def _attr(call: OpCall, name: str, default: float) -> float:
    """A float attribute as ORT's kernel holds it (a float32; ORT's defaults are float
    literals too)."""
    return float(F32(call.attr(name, default)))


def _softplus(call: OpCall, x: Array) -> Array:
    """Softplus(x) = log(1 + exp(x))."""
    return np.logaddexp(0.0, x)


def _softsign(call: OpCall, x: Array) -> Array:
    """Softsign(x) = (1 + |x|)⁻¹·x."""
    one = x.dtype.type(1)
    return (one / (one + np.abs(x))) * x


def _leaky_relu(call: OpCall, x: Array) -> Array:
    """LeakyRelu(x) = x if x >= 0 else alpha·x (alpha = 0.01)."""
    return np.where(x >= 0, x, x.dtype.type(_attr(call, "alpha", 0.01)) * x)


def _expm1(x: Array) -> Array:
    """exp(x) - 1 as ORT's kernels compute it (no expm1)."""
    return np.exp(x) - x.dtype.type(1)


def _elu(call: OpCall, x: Array) -> Array:
    """Elu(x) = x if x >= 0 else alpha·(exp(x) - 1) (alpha = 1)."""
    return np.where(x >= 0, x, x.dtype.type(_attr(call, "alpha", 1.0)) * _expm1(x))


def _celu(call: OpCall, x: Array) -> Array:
    """Celu(x) = max(x, 0) + min(alpha·(exp(x / alpha) - 1), 0) (alpha = 1)."""
    alpha, zero = x.dtype.type(_attr(call, "alpha", 1.0)), x.dtype.type(0)
    return np.maximum(x, zero) + np.minimum(alpha * _expm1(x / alpha), zero)


def _selu(call: OpCall, x: Array) -> Array:
    """Selu(x) = gamma·(max(x, 0) + min(alpha·(exp(x) - 1), 0))."""
    alpha = x.dtype.type(_attr(call, "alpha", SELU_ALPHA))
    gamma, zero = x.dtype.type(_attr(call, "gamma", SELU_GAMMA)), x.dtype.type(0)
    return gamma * (np.maximum(x, zero) + np.minimum(alpha * _expm1(x), zero))


def _thresholded_relu(call: OpCall, x: Array) -> Array:
    """ThresholdedRelu(x) = x if x > alpha else 0 (alpha = 1)."""
    return np.where(x > x.dtype.type(_attr(call, "alpha", 1.0)), x, x.dtype.type(0))


def _hard_sigmoid_of(x: Array, alpha: float, beta: float) -> Array:
    t = x.dtype.type
    return np.maximum(np.minimum(t(alpha) * x + t(beta), t(1)), t(0))


def _hard_sigmoid(call: OpCall, x: Array) -> Array:
    """HardSigmoid(x) = max(min(alpha·x + beta, 1), 0) (alpha = 0.2, beta = 0.5)."""
    return _hard_sigmoid_of(x, _attr(call, "alpha", 0.2), _attr(call, "beta", 0.5))


def _hard_swish(call: OpCall, x: Array) -> Array:
    """HardSwish(x) = x·max(0, min(1, x/6 + 1/2)) (1/6 a float32, as ORT's)."""
    return x * _hard_sigmoid_of(x, HARD_SWISH_ALPHA, 0.5)


def _mish(call: OpCall, x: Array) -> Array:
    """Mish(x) = x·tanh(Softplus(x))."""
    return x * np.tanh(np.logaddexp(0.0, x))


def _gelu(call: OpCall, x: Array) -> Array:
    """approximate='none': x·Φ(x) = x/2·(1 + erf(x/√2));
    'tanh': x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (a double X: ONNX's function body's
    float32 constants, as ORT runs it)."""
    if call.attr("approximate", "none") == "tanh" and call.input(0).dtype == TensorProto.DOUBLE:
        return (0.5 * x) * (1.0 + np.tanh(GELU_B64 * (x + GELU_C64 * (x * x * x))))
    if call.attr("approximate", "none") == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _prelu_infer(call: OpCall) -> list[TensorType]:
    """PRelu(X, slope): X's type; slope must broadcast to X."""
    x, slope = call.input(0), call.input(1)
    if x.shape is not None and slope.shape is not None:
        try:
            out = broadcast(x.shape, slope.shape)
        except ShapeError:
            raise fail(call, "slope does not broadcast to X") from None
        if len(out) != len(x.shape):
            raise fail(call, "slope has a higher rank than X")
    return [x]


def _prelu_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, slope = arrays[0], arrays[1]
    assert x is not None and slope is not None
    return [np.where(x >= 0, x, slope * x).astype(x.dtype)]


def clip_bounds(call: OpCall, arrays: list[Array | None]) -> tuple[float | None, float | None]:
    """(min, max) of a Clip node: inputs 1/2 (opset >= 11) or attributes (before)."""
    lo, hi = call.attr("min"), call.attr("max")
    if len(arrays) > 1 and arrays[1] is not None:
        lo = np.asarray(arrays[1]).item()
    if len(arrays) > 2 and arrays[2] is not None:
        hi = np.asarray(arrays[2]).item()
    return lo, hi


def _clip_infer(call: OpCall) -> list[TensorType]:
    """Clip(X[, min, max]): X's type; min and max are scalars (ORT also takes shape [1])."""
    for i in (1, 2):
        shape = call.input(i).shape if call.has_input(i) else None
        if (
            shape is not None
            and shape not in ((), (1,))
            and not (len(shape) == 1 and not isinstance(shape[0], int))
        ):
            raise fail(call, f"input {i} (a bound) must be a scalar")
    return same_type(call)


def _limits(dtype: np.dtype) -> tuple[float | int, float | int]:
    """The dtype's lowest and highest finite values."""
    if dtype.kind == "f":
        f = np.finfo(dtype)
        return float(f.min), float(f.max)
    i = np.iinfo(dtype)
    return int(i.min), int(i.max)


def _clip_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Clip as ORT computes it (module docstring)."""
    x = arrays[0]
    assert x is not None
    lo, hi = clip_bounds(call, arrays)
    low, high = _limits(x.dtype)
    lo_v = x.dtype.type(low if lo is None else lo)
    hi_v = x.dtype.type(high if hi is None else hi)
    out = np.where(x < lo_v, lo_v, x)
    out = np.where(hi_v < out, hi_v, out)
    return [np.asarray(out, dtype=x.dtype)]


def _bound(arr: Array | None) -> object:
    """The one element of a bound input (None when omitted)."""
    return None if arr is None else np.asarray(arr, dtype=object).reshape(-1)[0]


def _z3_clip(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """Clip over Z3 terms (module docstring); an omitted bound is the dtype's extreme finite
    value in IEEE and bit-vectors, and no bound in reals."""
    x = arrays[0]
    assert x is not None
    lo = _bound(arrays[1] if len(arrays) > 1 else None)
    hi = _bound(arrays[2] if len(arrays) > 2 else None)
    dt = call.input(0).dtype
    unsigned = is_int(dt) and dt not in SIGNED
    low, high = _limits(np_dtype(dt)) if dt else (None, None)

    def less(a: object, b: object) -> object:
        return z3.ULT(a, b) if unsigned else a < b  # type: ignore[operator]

    def extreme(v: float | int | None, t: object) -> object:
        if v is None or not (z3.is_fp(t) or z3.is_bv(t)):
            return None
        return const(v, t)

    def clip(t: object) -> object:
        a = lo if lo is not None else extreme(low, t)
        b = hi if hi is not None else extreme(high, t)
        if a is not None:
            t = z3.If(less(t, a), a, t)
        if b is not None:
            t = z3.If(less(b, t), b, t)
        return t

    return [vmap(clip, x)]


_ALPHA = (("alpha", "f64", 1.0),)
_TYPED: dict[str, EggSig] = {
    "Softplus": EggSig(),
    "Softsign": EggSig(),
    "LeakyRelu": EggSig(attrs=(("alpha", "f64", 0.01),)),
    "Elu": EggSig(attrs=_ALPHA),
    "Celu": EggSig(attrs=_ALPHA),
    "Selu": EggSig(attrs=(("alpha", "f64", SELU_ALPHA), ("gamma", "f64", SELU_GAMMA))),
    "ThresholdedRelu": EggSig(attrs=_ALPHA),
    "HardSigmoid": EggSig(attrs=(("alpha", "f64", 0.2), ("beta", "f64", 0.5))),
    "HardSwish": EggSig(),
    "Mish": EggSig(),
    "Gelu": EggSig(attrs=(("approximate", "String", "none"),)),
}
"""The typed forms. Mish (opset 18) and Gelu (opset 20) are newer than the opset the typed
forms are written for: a rule's sides run at the first opset that has them
(`registry.opset_for`), and the snapshot leaves out an e-node of an op the model's opset does
not have (`egraph.snapshot`), so no rule writes them into an older model."""


def _gelu_attr_values(name: str, inputs: list[TensorType]) -> list[str] | None:
    """Gelu's `approximate` ranges over both its values in proofs and the self-test."""
    return ["none", "tanh"] if name == "approximate" else None


_Z3 = {**Z3_SEMANTICS, "Selu": selu(SELU_ALPHA, SELU_GAMMA)}

for _name, _fn, _k in (
    ("Softplus", _softplus, TRANSCENDENTAL),
    ("Softsign", _softsign, 3.0),
    ("LeakyRelu", _leaky_relu, 2.0),
    ("Elu", _elu, TRANSCENDENTAL),
    ("Celu", _celu, TRANSCENDENTAL),
    ("Selu", _selu, TRANSCENDENTAL),
    ("ThresholdedRelu", _thresholded_relu, 1.0),
    ("HardSigmoid", _hard_sigmoid, 3.0),
    ("HardSwish", _hard_swish, 4.0),
    ("Mish", _mish, 3 * TRANSCENDENTAL),
    ("Gelu", _gelu, TRANSCENDENTAL + 4),
):
    register(
        OpSpec(
            _name,
            same_type,
            (_f64 if _name in ("Softplus", "Mish", "Gelu") else _stepwise)(_fn),
            per_element(_k),
            doc=_fn.__doc__ or "",
            egg=_TYPED.get(_name),
            z3=_Z3.get(_name),
            attr_values=_gelu_attr_values if _name == "Gelu" else None,
        )
    )
register(
    OpSpec(
        "PRelu",
        _prelu_infer,
        _prelu_ref,
        per_element(2),
        egg=EggSig(n_inputs=2),
        z3=_Z3["PRelu"],
        doc="PRelu(X, slope) = X if X >= 0 else slope·X (slope broadcasts to X)",
    )
)
register(
    OpSpec(
        "Clip",
        _clip_infer,
        _clip_ref,
        per_element(2),
        egg=EggSig(n_inputs=3, optional=2),
        z3=_z3_clip,
    )
)
