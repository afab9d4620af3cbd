"""ONNX Runtime contrib ops (domain com.microsoft) that rules fuse into.

QuickGelu(X, alpha) = X·sigmoid(alpha·X)  (alpha = 1 is SiLU / Swish);
Gelu(X) = X/2·(1 + erf(X/√2)); FastGelu(X) = X/2·(1 + tanh(√(2/π)·(X + 0.044715·X³)));
BiasGelu(A, B) = Gelu(A + B); FusedMatMul(A, B, alpha, transA, transB) = alpha·(A' @ B')
where A' swaps A's last two axes when transA (likewise B). Implemented by ORT's CPU and CUDA
execution providers; other runtimes do not have them (rules that use them target `ort-*`).
"""

from __future__ import annotations

import math

import numpy as np

from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, broadcast, fail
from rewrite.ops.elementwise import per_element, same_type
from rewrite.ops.registry import register
from rewrite.ops.unary import TRANSCENDENTAL, erf

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
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _bias_infer(call: OpCall) -> list[TensorType]:
    a, b = call.input(0), call.input(1)
    if a.shape is not None and b.shape is not None:
        broadcast(a.shape, b.shape)
    return [a]


def _fused_matmul_infer(call: OpCall) -> list[TensorType]:
    a, b = call.input(0), call.input(1)
    if a.shape is None or b.shape is None or len(a.shape) < 2 or len(b.shape) < 2:
        return [TensorType(a.dtype, None)]
    sa = list(a.shape)
    sb = list(b.shape)
    if call.attr("transA", 0):
        sa[-1], sa[-2] = sa[-2], sa[-1]
    if call.attr("transB", 0):
        sb[-1], sb[-2] = sb[-2], sb[-1]
    if isinstance(sa[-1], int) and isinstance(sb[-2], int) and sa[-1] != sb[-2]:
        raise fail(call, f"inner dims {sa[-1]} and {sb[-2]} differ")
    return [TensorType(a.dtype, (*broadcast(tuple(sa[:-2]), tuple(sb[:-2])), sa[-2], sb[-1]))]


def _fused_matmul_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    if call.attr("transA", 0):
        a = np.swapaxes(a, -1, -2)
    if call.attr("transB", 0):
        b = np.swapaxes(b, -1, -2)
    alpha = float(call.attr("alpha", 1.0))
    out = np.matmul(a.astype(np.float64), b.astype(np.float64)) * alpha
    return [out.astype(arrays[0].dtype)]  # type: ignore[union-attr]


def _fused_matmul_flops(call: OpCall, outputs: list[TensorType]) -> float:
    a = call.input(0)
    k = a.shape[-2 if call.attr("transA", 0) else -1] if a.shape else None
    n = outputs[0].numel
    return 2.0 * n * k if isinstance(k, int) and n is not None else 0.0


register(
    OpSpec(
        "QuickGelu",
        same_type,
        _f64(lambda call, x: x / (1.0 + np.exp(-float(call.attr("alpha", 1.702)) * x))),
        per_element(TRANSCENDENTAL + 3),
        domain=MS,
        egg=EggSig(attrs=(("alpha", "f64", 1.702),), n_inputs=1),
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
        doc="Gelu(X) = X/2·(1 + erf(X/√2))",
    )
)
register(
    OpSpec(
        "FastGelu",
        same_type,
        _f64(lambda call, x: _fast_gelu(x)),
        per_element(TRANSCENDENTAL + 7),
        domain=MS,
        egg=EggSig(n_inputs=1),
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
        doc="FusedMatMul(A, B) = alpha·(A' @ B')",
    )
)
