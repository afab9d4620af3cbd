"""ONNX Runtime contrib ops (domain com.microsoft) that rules fuse into.

QuickGelu(X, alpha) = X·sigmoid(alpha·X)  (alpha = 1 is SiLU / Swish);
Gelu(X) = X/2·(1 + erf(X/√2)); FastGelu(X) = X/2·(1 + tanh(√(2/π)·(X + 0.044715·X³)));
BiasGelu(A, B) = Gelu(A + B); FusedMatMul(A, B, alpha, transA, transB) = alpha·(A' @ B')
where A' swaps A's last two axes when transA (likewise B). Implemented by ORT's CPU and CUDA
execution providers; other runtimes do not have them (rules that use them target `ort-*`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import float_only, vmap
from rewrite.ops.base import EggSig, OpCall, OpSpec, Shape, TensorType, broadcast, fail
from rewrite.ops.elementwise import per_element, same_type
from rewrite.ops.matmul import matmul_shape
from rewrite.ops.registry import register
from rewrite.ops.unary import ERF, TANH, TRANSCENDENTAL, erf, z3_sigmoid

MS = "com.microsoft"
Array = np.ndarray


def _f64(fn):  # type: ignore[no-untyped-def]
    """Compute in float64, return in the input's dtype (matches ORT's float32 to rounding)."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        xs = [np.asarray(a, dtype=np.float64) for a in arrays if a is not None]
        return [np.asarray(fn(call, *xs)).astype(arrays[0].dtype)]  # type: ignore[union-attr]

    return reference


def _gelu(x: Array) -> Array:
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _fast_gelu(x: Array) -> Array:
    return 0.5 * x * (1.0 + np.tanh(_FAST_K * (x + _FAST_C * x**3)))


def _bias_infer(call: OpCall) -> list[TensorType]:
    """BiasGelu(A, B) -> A's type; ORT's kernel takes only a 1-D bias of A's last dim."""
    a, b = call.input(0), call.input(1)
    if a.shape is not None and b.shape is not None:
        if len(b.shape) != 1 or not a.shape:
            raise fail(call, "the bias must be 1-D (ORT's kernel)")
        last, n = a.shape[-1], b.shape[0]
        if isinstance(last, int) and isinstance(n, int) and last != n:
            raise fail(call, "the bias must have A's last dim (ORT's kernel)")
        broadcast(a.shape, b.shape)
    return [a]


def _rank1_same_type(call: OpCall) -> list[TensorType]:
    """X's type; ORT's kernel refuses a rank-0 X ("expected to have 1 or more dimensions")."""
    x = call.input(0)
    if x.shape is not None and not x.shape:
        raise fail(call, "the input must have rank >= 1 (ORT's kernel)")
    return [x]


def _fused_matmul_infer(call: OpCall) -> list[TensorType]:
    """alpha·(A' @ B'): numpy's MatMul shapes, 1-D operands included (as ORT runs them);
    transA / transB swap the last two axes of an operand of rank >= 2 only."""
    a, b = call.input(0), call.input(1)
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, None)]
    sa, sb = _swapped(a.shape, call.attr("transA", 0)), _swapped(b.shape, call.attr("transB", 0))
    return [TensorType(a.dtype, matmul_shape(call, sa, sb))]


def _swapped(shape: Shape, trans: Any) -> Shape:
    if not trans or len(shape) < 2:
        return tuple(shape)
    return (*shape[:-2], shape[-1], shape[-2])


def _trans(x: Array, trans: Any) -> Array:
    return np.swapaxes(x, -1, -2) if trans and x.ndim >= 2 else x


def _fused_matmul_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    a, b = _trans(a, call.attr("transA", 0)), _trans(b, call.attr("transB", 0))
    alpha = float(np.float32(call.attr("alpha", 1.0)))  # an ONNX float attribute is float32
    out = np.asarray(np.matmul(a.astype(np.float64), b.astype(np.float64)) * alpha)
    return [out.astype(arrays[0].dtype)]  # type: ignore[union-attr]


def _fused_matmul_flops(call: OpCall, outputs: list[TensorType]) -> float:
    a = call.input(0)
    k = a.shape[-2 if call.attr("transA", 0) and len(a.shape) >= 2 else -1] if a.shape else None
    n = outputs[0].numel
    return 2.0 * n * k if isinstance(k, int) and n is not None else 0.0


# -- Z3 semantics: the formulas above, with erf, tanh and exp uninterpreted -------------------
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_FAST_K = float(np.float32(math.sqrt(2.0 / math.pi)))
_FAST_C = float(np.float32(0.044715))
"""FastGelu's constants as ORT's kernel holds them: float32 values, at every dtype."""


def _z3_gelu(t: object) -> object:
    return t * 0.5 * (1 + ERF(t * _INV_SQRT2))  # type: ignore[operator]


def _z3_fast_gelu(t: object) -> object:
    return t * 0.5 * (1 + TANH(_FAST_K * (t + _FAST_C * t * t * t)))  # type: ignore[operator]


def _z3_elementwise(fn):  # type: ignore[no-untyped-def]
    """Z3 semantics `fn(call, *inputs)` applied to float inputs (broadcasting)."""

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        float_only(call)
        return [fn(call, *[a for a in arrays if a is not None])]

    return semantics


def _alpha(call: OpCall, default: float) -> object:
    """A float attribute (a Python float, or a Z3 term: a rule's `c.value()`)."""
    a = call.attr("alpha", default)
    return a if z3.is_expr(a) else float(np.float32(a))  # an ONNX float attribute is float32


def _z3_quick_gelu(call: OpCall, x: Array) -> Array:
    alpha = _alpha(call, 1.702)
    return vmap(lambda t: t * z3_sigmoid(alpha * t), x)  # type: ignore[operator]


def _z3_fused_matmul(call: OpCall, a: Array, b: Array) -> Array:
    a, b = _trans(a, call.attr("transA", 0)), _trans(b, call.attr("transB", 0))
    alpha = _alpha(call, 1.0)
    return vmap(lambda t: alpha * t, np.matmul(a, b))  # type: ignore[operator]


register(
    OpSpec(
        "QuickGelu",
        same_type,
        _f64(lambda call, x: x / (1.0 + np.exp(-float(call.attr("alpha", 1.702)) * x))),
        per_element(TRANSCENDENTAL + 3),
        domain=MS,
        egg=EggSig(attrs=(("alpha", "f64", 1.702),), n_inputs=1),
        z3=_z3_elementwise(_z3_quick_gelu),
        doc="QuickGelu(X, alpha) = X·sigmoid(alpha·X)",
    )
)
register(
    OpSpec(
        "Gelu",
        same_type,
        _f64(lambda call, x: _gelu(x)),
        per_element(TRANSCENDENTAL + 4),
        domain=MS,
        egg=EggSig(n_inputs=1),
        z3=_z3_elementwise(lambda call, x: vmap(_z3_gelu, x)),
        doc="Gelu(X) = X/2·(1 + erf(X/√2))",
    )
)
register(
    OpSpec(
        "FastGelu",
        _rank1_same_type,
        _f64(lambda call, x: _fast_gelu(x)),
        per_element(TRANSCENDENTAL + 7),
        domain=MS,
        egg=EggSig(n_inputs=1),
        z3=_z3_elementwise(lambda call, x: vmap(_z3_fast_gelu, x)),
        doc="FastGelu(X) = X/2·(1 + tanh(√(2/π)·(X + 0.044715·X³)))",
    )
)
register(
    OpSpec(
        "BiasGelu",
        _bias_infer,
        _f64(lambda call, a, b: _gelu(a + b)),
        per_element(TRANSCENDENTAL + 5),
        domain=MS,
        egg=EggSig(n_inputs=2),
        z3=_z3_elementwise(lambda call, a, b: vmap(lambda s, t: _z3_gelu(s + t), a, b)),
        doc="BiasGelu(A, B) = Gelu(A + B)",
    )
)
register(
    OpSpec(
        "FusedMatMul",
        _fused_matmul_infer,
        _fused_matmul_ref,
        _fused_matmul_flops,
        domain=MS,
        egg=EggSig(
            attrs=(("alpha", "f64", 1.0), ("transA", "i64", 0), ("transB", "i64", 0)), n_inputs=2
        ),
        z3=_z3_elementwise(_z3_fused_matmul),
        doc="FusedMatMul(A, B) = alpha·(A' @ B')",
    )
)
