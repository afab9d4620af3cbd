"""MatMul (numpy matmul semantics) and Gemm (Y = alpha·A'·B' + beta·C).

Contract: MatMul(A, B) is `np.matmul`: (..., m, k) @ (..., k, n) -> (broadcast(...), m, n);
a 1-D A is (1, k) with the m axis dropped from the result, a 1-D B is (k, 1) with the n axis
dropped; leading (batch) dims broadcast. Gemm takes 2-D A (M, K) and B (K, N), transposed
first when transA / transB is set, and an optional C that broadcasts unidirectionally to
(M, N); alpha and beta default to 1. Both keep A's dtype.

Typed forms: `(MatMul A B)`; `(Gemm alpha beta transA transB A B C)` with C `(Absent)` when
omitted. Gemm's Z3 semantics: alpha·(A'·B') + beta·C as ORT computes it (the product scaled
once, C not read when beta = 0), float dtypes only (ORT has no integer Gemm kernel).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import ShapeError
from rewrite.ops._z3 import RNE, float_only, vmap
from rewrite.ops.base import (
    Dim,
    EggSig,
    OpCall,
    OpSpec,
    Shape,
    TensorType,
    broadcast,
    fail,
)
from rewrite.ops.registry import register

Array = np.ndarray


def _same_dim(call: OpCall, a: Dim, b: Dim, what: str) -> None:
    """Fail when two static dims that must agree differ."""
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise fail(call, f"{what} {a} != {b}")


def matmul_shape(call: OpCall, a: Shape, b: Shape) -> Shape:
    """(..., m, k) @ (..., k, n) -> (broadcast(...), m, n), with numpy's 1-D rules."""
    if len(a) == 0 or len(b) == 0:
        raise fail(call, "operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    _same_dim(call, a2[-1], b2[-2], "inner dims")
    try:
        batch = broadcast(a2[:-2], b2[:-2])
    except ShapeError:
        raise fail(call, "batch dims do not broadcast") from None
    m = (a2[-2],) if len(a) > 1 else ()
    n = (b2[-1],) if len(b) > 1 else ()
    return (*batch, *m, *n)


def _matmul_infer(call: OpCall) -> list[TensorType]:
    a, b = call.input(0), call.input(1)
    if a.dtype and b.dtype and a.dtype != b.dtype:
        raise fail(call, "operand dtypes differ")
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype or b.dtype, None)]
    return [TensorType(a.dtype or b.dtype, matmul_shape(call, a.shape, b.shape))]


def _matmul_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    return [np.matmul(a, b)]


def _matmul_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """2·m·k·n per batch element = 2·numel(Y)·k (0 when a dim is not static)."""
    a = call.input(0)
    k = a.shape[-1] if a.shape else None
    n = outputs[0].numel
    return 2.0 * n * k if isinstance(k, int) and n is not None else 0.0


def _gemm_dims(call: OpCall) -> tuple[Dim, Dim, Dim] | None:
    """(M, K, N) of a Gemm after the transposes; None when a rank is unknown."""
    a, b = call.input(0).shape, call.input(1).shape
    for name, s in (("A", a), ("B", b)):
        if s is not None and len(s) != 2:
            raise fail(call, f"{name} must be 2-D")
    if a is None or b is None:
        return None
    m, ka = (a[1], a[0]) if call.attr("transA", 0) else (a[0], a[1])
    kb, n = (b[1], b[0]) if call.attr("transB", 0) else (b[0], b[1])
    _same_dim(call, ka, kb, "inner dims")
    return m, ka if isinstance(ka, int) else kb, n


def _gemm_infer(call: OpCall) -> list[TensorType]:
    """Y: (M, N) in A's dtype; C must broadcast unidirectionally to (M, N)."""
    dims = _gemm_dims(call)
    dtype = call.input(0).dtype or call.input(1).dtype
    if dims is None:
        return [TensorType(dtype, None)]
    m, _, n = dims
    c = call.input(2).shape if call.has_input(2) else None
    if c is not None:
        if len(c) > 2:
            raise fail(call, "C has rank > 2")
        try:
            out = broadcast((m, n), c)
        except ShapeError:
            raise fail(call, "C does not broadcast to (M, N)") from None
        if any(
            isinstance(o, int) and isinstance(d, int) and o != d
            for o, d in zip(out, (m, n), strict=True)
        ):
            raise fail(call, "C does not broadcast to (M, N)")
    return [TensorType(dtype, (m, n))]


def _gemm_ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    c = arrays[2] if len(arrays) > 2 else None
    a = a.T if call.attr("transA", 0) else a
    b = b.T if call.attr("transB", 0) else b
    alpha, beta = call.attr("alpha", 1.0), call.attr("beta", 1.0)
    y = np.matmul(a, b)
    if alpha != 1.0:
        y = alpha * y
    if c is not None and beta != 0.0:
        y = y + (beta * c if beta != 1.0 else c)
    return [np.asarray(y, dtype=a.dtype)]


def _f32(v: Any) -> Any:
    """An ONNX float attribute as the float32 value it holds (a Z3 term stays as it is)."""
    return v if z3.is_expr(v) else float(np.float32(v))


def _z3_gemm(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """alpha·(A'·B') + beta·C over Z3 terms: the sums of products of `np.matmul`, scaled by
    alpha when alpha != 1, plus C (scaled by beta when beta != 1) unless beta = 0. In IEEE
    float16 computed in float32 and rounded once, as ORT's kernel does."""
    float_only(call)
    a, b = arrays[0], arrays[1]
    assert a is not None and b is not None
    c = arrays[2] if len(arrays) > 2 else None
    first: Any = a.flat[0] if a.size else None
    if z3.is_fp(first) and first.sort().sbits() < 24:  # float16 / bfloat16: float32 inside
        sort = first.sort()

        def widen(t: Array) -> Array:
            return vmap(lambda e: z3.fpToFP(RNE, e, z3.Float32()), t)

        (y,) = _gemm_terms(call, widen(a), widen(b), None if c is None else widen(c))
        return [vmap(lambda e: z3.fpToFP(RNE, e, sort), y)]
    return _gemm_terms(call, a, b, c)


def _gemm_terms(call: OpCall, a: Array, b: Array, c: Array | None) -> list[Array]:
    a = a.T if call.attr("transA", 0) else a
    b = b.T if call.attr("transB", 0) else b
    alpha, beta = _f32(call.attr("alpha", 1.0)), _f32(call.attr("beta", 1.0))
    y = np.matmul(a, b)
    if z3.is_expr(alpha) or alpha != 1.0:
        y = vmap(lambda t: alpha * t, y)
    if c is not None and (z3.is_expr(beta) or beta != 0.0):
        bc = c if not z3.is_expr(beta) and beta == 1.0 else vmap(lambda t: beta * t, c)
        y = y + bc
    return [np.asarray(y, dtype=object)]


def _gemm_attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """transA / transB both ways; beta also 0 (C not read)."""
    if name in ("transA", "transB"):
        return [0, 1]
    if name == "beta":
        return [1.0, 0.5, 0.0]
    return None


def _gemm_flops(call: OpCall, outputs: list[TensorType]) -> float:
    """2·M·K·N, plus M·N to add C."""
    dims = _gemm_dims(call)
    if dims is None or not all(isinstance(d, int) for d in dims):
        return 0.0
    m, k, n = dims
    return 2.0 * m * k * n + (m * n if call.has_input(2) else 0)  # type: ignore[operator]


register(
    OpSpec(
        "MatMul",
        _matmul_infer,
        _matmul_ref,
        _matmul_flops,
        egg=EggSig(n_inputs=2),
        z3=_matmul_ref,  # np.matmul on Z3 terms builds the sums of products
    )
)
register(
    OpSpec(
        "Gemm",
        _gemm_infer,
        _gemm_ref,
        _gemm_flops,
        egg=EggSig(
            attrs=(
                ("alpha", "f64", 1.0),
                ("beta", "f64", 1.0),
                ("transA", "i64", 0),
                ("transB", "i64", 0),
            ),
            n_inputs=3,
            optional=1,
        ),
        z3=_z3_gemm,
        attr_values=_gemm_attr_values,
        doc="Gemm(A, B, C?, alpha, beta, transA, transB) = alpha·A'·B' + beta·C",
    )
)
