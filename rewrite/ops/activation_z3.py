"""Z3 semantics of the parametric activations (not an op module: `activation.py` registers
the ops with these).

Each element function follows the formula of ORT's CPU kernel (activations.h, or the ONNX
function body ORT expands: HardSwish, Mish), step by step, so that the IEEE model rounds
where the kernel rounds and NaN, ±inf and ±0 come out as ORT's do:
- `max(a, b)` / `min(a, b)` are Eigen's cwiseMax / cwiseMin (std::max / std::min): `a`
  unless `a < b` (`b < a`), so a NaN first operand stays NaN and max(-0, +0) = -0;
- `select(c, a, b)` is `If(c, a, b)`: a NaN never satisfies a comparison;
- exp, tanh and log are the shared UFs (`unary.EXP`, `unary.TANH`, `_unary_z3.LOG`; in IEEE
  `_unary_z3.z3_log` interprets log's special values).
A float attribute is a float32 (ONNX stores it so, and ORT's defaults are float literals); a
rule's attribute may also be a Z3 term (`c.value()`), used as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops._unary_z3 import LOG, z3_abs, z3_log
from rewrite.ops._z3 import SIGNED, const, divide, float_only, is_int, vmap
from rewrite.ops.base import OpCall, Z3Fn, fail
from rewrite.ops.unary import ERF, EXP, TANH

Array = np.ndarray
DOUBLE = TensorProto.DOUBLE
Element = Callable[..., Any]

HARD_SWISH_ALPHA = float(np.float32(1.0 / 6.0))
"""HardSwish's function body: HardSigmoid with alpha = 1/6 (a float32) and beta = 1/2."""


def f32_attr(call: OpCall, name: str, default: float) -> Any:
    """A float attribute as ORT's kernel holds it: a float32 (a Z3 term stays as it is)."""
    v = call.attr(name, default)
    return v if z3.is_expr(v) else float(np.float32(v))


def _num(v: Any, like: Any) -> Any:
    """A Python number as a term of `like`'s sort (Z3 terms pass through)."""
    return v if z3.is_expr(v) else const(v, like)


def z3_max(a: Any, b: Any) -> Any:
    """std::max(a, b) = b if a < b else a (Eigen's cwiseMax)."""
    b = _num(b, a)
    return z3.If(a < b, b, a)


def z3_min(a: Any, b: Any) -> Any:
    """std::min(a, b) = b if b < a else a (Eigen's cwiseMin)."""
    b = _num(b, a)
    return z3.If(b < a, b, a)


def _log(t: Any) -> Any:
    """log(t) for t = 1 + exp(s) > 0: IEEE's special values in IEEE, the UF in reals."""
    return z3_log(t) if z3.is_fp(t) else LOG(t)


def z3_softplus(t: Any) -> Any:
    """Softplus(x) = x + log(exp(-x) + 1) if x > 0 else log(exp(x) + 1)."""
    one = const(1, t)
    return z3.If(t > const(0, t), t + _log(EXP(-t) + one), _log(EXP(t) + one))


def z3_softsign(t: Any) -> Any:
    """Softsign(x) = (1 + |x|)⁻¹ · x (so ±inf gives NaN, as ORT's)."""
    one = const(1, t)
    return divide(one, one + z3_abs(True)(t)) * t


def _leaky_relu(call: OpCall) -> Element:
    """LeakyRelu(x) = x if x >= 0 else alpha·x (alpha = 0.01)."""
    alpha = f32_attr(call, "alpha", 0.01)
    return lambda t: z3.If(t >= const(0, t), t, _num(alpha, t) * t)


def _elu(call: OpCall) -> Element:
    """Elu(x) = x if x >= 0 else alpha·(exp(x) - 1) (alpha = 1)."""
    alpha = f32_attr(call, "alpha", 1.0)
    return lambda t: z3.If(t >= const(0, t), t, _num(alpha, t) * (EXP(t) - const(1, t)))


def _celu(call: OpCall) -> Element:
    """Celu(x) = max(x, 0) + min(alpha·(exp(x / alpha) - 1), 0) (alpha = 1)."""
    alpha = f32_attr(call, "alpha", 1.0)

    def fn(t: Any) -> Any:
        a = _num(alpha, t)
        return z3_max(t, 0) + z3_min(a * (EXP(divide(t, a)) - const(1, t)), 0)

    return fn


def _selu(call: OpCall, alpha_default: float, gamma_default: float) -> Element:
    """Selu(x) = gamma·(max(x, 0) + min(alpha·(exp(x) - 1), 0))."""
    alpha = f32_attr(call, "alpha", alpha_default)
    gamma = f32_attr(call, "gamma", gamma_default)

    def fn(t: Any) -> Any:
        neg = z3_min(_num(alpha, t) * (EXP(t) - const(1, t)), 0)
        return _num(gamma, t) * (z3_max(t, 0) + neg)

    return fn


def _thresholded_relu(call: OpCall) -> Element:
    """ThresholdedRelu(x) = x if x > alpha else 0 (alpha = 1; NaN gives 0)."""
    alpha = f32_attr(call, "alpha", 1.0)
    return lambda t: z3.If(t > _num(alpha, t), t, const(0, t))


def hard_sigmoid(t: Any, alpha: Any, beta: Any) -> Any:
    """max(min(alpha·x + beta, 1), 0)."""
    return z3_max(z3_min(_num(alpha, t) * t + _num(beta, t), 1), 0)


def _hard_sigmoid(call: OpCall) -> Element:
    """HardSigmoid(x) = max(min(alpha·x + beta, 1), 0) (alpha = 0.2, beta = 0.5)."""
    alpha, beta = f32_attr(call, "alpha", 0.2), f32_attr(call, "beta", 0.5)
    return lambda t: hard_sigmoid(t, alpha, beta)


def z3_hard_swish(t: Any) -> Any:
    """HardSwish(x) = x · HardSigmoid(x, alpha = 1/6, beta = 1/2)."""
    return t * hard_sigmoid(t, HARD_SWISH_ALPHA, 0.5)


def z3_mish(t: Any) -> Any:
    """Mish(x) = x · tanh(Softplus(x))."""
    return t * TANH(z3_softplus(t))


def _prelu(call: OpCall) -> Element:
    """PRelu(x, slope) = x if x >= 0 else slope·x; integers wrap (two's complement), an
    unsigned x is never negative (ORT runs the ONNX function: Where(x < 0, slope·x, x))."""
    if is_int(call.input(0).dtype) and call.input(0).dtype not in SIGNED:
        return lambda t, slope: t
    return lambda t, slope: z3.If(t >= const(0, t), t, slope * t)


def _prelu_semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """PRelu over Z3 terms (`_prelu`), any numeric dtype."""
    x, slope = arrays[0], arrays[1]
    assert x is not None and slope is not None
    return [vmap(_prelu(call), x, slope)]


_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_GELU_B = float(np.float32(math.sqrt(2.0 / math.pi)))
_GELU_C = float(np.float32(0.044715 * math.sqrt(2.0 / math.pi)))
"""ORT's Gelu kernel (opset 20, approximate="tanh"): x·(C·x² + B), float32 constants."""
GELU_B64 = math.sqrt(float(np.float32(2.0 / math.pi)))
GELU_C64 = float(np.float32(0.044715))
"""ONNX's Gelu function body, which ORT runs for a double X (it has a float kernel only):
(x/2)·(1 + tanh(B·(x + C·x³))) with B = sqrt(float32(2/π)) and C = float32(0.044715) cast to
double (`CastLike`)."""


def _gelu(call: OpCall) -> Element:
    """Gelu(x) = x/2·(erf(x/√2) + 1); approximate="tanh": x/2·(tanh(x·(C·x² + B)) + 1)
    with B = √(2/π), C = 0.044715·√(2/π) (ORT's kernel); a double X runs ONNX's function
    body instead (`GELU_B64`)."""
    approximate = call.attr("approximate", "none")
    if approximate == "tanh" and call.input(0).dtype == DOUBLE:
        return lambda t: (t * 0.5) * (TANH(GELU_B64 * (t + GELU_C64 * (t * t * t))) + 1)
    if approximate == "tanh":
        return lambda t: t * 0.5 * (TANH(t * (_GELU_C * t * t + _GELU_B)) + 1)
    if approximate == "none":
        return lambda t: t * 0.5 * (ERF(t * _INV_SQRT2) + 1)
    raise fail(call, f"approximate must be 'none' or 'tanh', not {approximate!r}")


def by_call(make: Callable[[OpCall], Element]) -> Z3Fn:
    """Z3 semantics of a float elementwise op whose element function depends on the call's
    attributes (inputs broadcast as numpy does)."""

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        float_only(call)
        return [vmap(make(call), *[a for a in arrays if a is not None])]

    semantics.__doc__ = make.__doc__
    return semantics


def fixed(fn: Element) -> Z3Fn:
    """Z3 semantics of a float elementwise op without attributes."""
    return by_call(lambda call: fn)


Z3_SEMANTICS: dict[str, Z3Fn] = {
    "Softplus": fixed(z3_softplus),
    "Softsign": fixed(z3_softsign),
    "LeakyRelu": by_call(_leaky_relu),
    "Elu": by_call(_elu),
    "Celu": by_call(_celu),
    "ThresholdedRelu": by_call(_thresholded_relu),
    "HardSigmoid": by_call(_hard_sigmoid),
    "HardSwish": fixed(z3_hard_swish),
    "Mish": fixed(z3_mish),
    "Gelu": by_call(_gelu),
    "PRelu": _prelu_semantics,
}
"""Op name -> Z3 semantics (Selu's needs its defaults: `selu`)."""


def selu(alpha: float, gamma: float) -> Z3Fn:
    """Selu's Z3 semantics with ONNX's default alpha and gamma."""
    return by_call(lambda call: _selu(call, alpha, gamma))
