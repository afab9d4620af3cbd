"""Trilu (opset 14+): the upper or lower triangle of the last two dims, the rest zero.

Contract: Trilu(X[, k], upper=1): X of rank >= 2 (..., N, M); element (..., i, j) is kept when
j - i >= k (upper=1) or j - i <= k (upper=0), else it is 0 (+0 for floats, False for bools).
k is an optional INT64 scalar (0-D, or a one-element 1-D tensor; default 0). The output has
X's dtype and shape. ORT 1.32's CPU kernel runs float, double, float16, int32, int64 and bool.

Typed form: `(Trilu upper k X)` with k a constant vector input (`scalar_inputs`: a 0-D k is read
as one element; empty: k omitted, written back omitted). A computed k keeps the node opaque.
Z3 semantics (exact, every dtype, both models): each element is X's own term where it is
kept and the numeral 0 (+0, False) where it is not; the kernel copies, so NaN, ±inf and -0
kept pass unchanged. Outside the proof: nothing (no arithmetic).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import const
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

Array = np.ndarray


def trilu_k(call: OpCall) -> int:
    """k: the constant input's single value, 0 when it is omitted or empty."""
    k = call.const(1)
    if k is None:
        return 0
    flat = np.asarray(k).reshape(-1)
    if flat.size > 1:
        raise fail(call, "k must be a scalar")
    return int(flat[0]) if flat.size else 0


def infer_trilu(call: OpCall) -> list[TensorType]:
    """X's type; X must have rank >= 2 and k (when constant) one element."""
    x = call.input(0)
    if x.shape is not None and len(x.shape) < 2:
        raise fail(call, "X must have rank >= 2")
    trilu_k(call)
    return [x]


def keep_mask(call: OpCall, n: int, m: int) -> Array:
    """Boolean (n, m): which elements of one matrix Trilu keeps."""
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    k = trilu_k(call)
    return (j - i >= k) if int(call.attr("upper", 1)) else (j - i <= k)


def ref_trilu(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    mask = keep_mask(call, x.shape[-2], x.shape[-1])
    return [np.where(mask, x, np.zeros((), x.dtype))]


def _zero(t: Any) -> Any:
    """The numeral 0 in `t`'s sort (+0 for floats, False for booleans; a plain number: 0)."""
    if not z3.is_expr(t):
        return type(t)(0)
    if z3.is_bool(t):
        return z3.BoolVal(False)
    return const(0, t)


def z3_trilu(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """X's terms where kept, the numeral 0 of their sort elsewhere (module docstring)."""
    x = arrays[0]
    assert x is not None
    infer_trilu(call)
    mask = keep_mask(call, x.shape[-2], x.shape[-1])
    out = np.empty(x.shape, dtype=object)
    for idx in np.ndindex(*x.shape):
        t = x[idx]
        keep = bool(mask[idx[-2], idx[-1]])
        out[idx] = t if keep else _zero(t)
    return [out]


def trilu_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """k: omitted, 0, 1, -1 and 2; upper: 1 and 0."""
    if name == "upper":
        return [1, 0]
    if name == "k":
        return [(), (0,), (1,), (-1,), (2,)]
    return None


TRILU = register(
    OpSpec(
        name="Trilu",
        infer=infer_trilu,
        reference=ref_trilu,
        flops=no_flops,
        egg=EggSig(
            attrs=(("upper", "i64", 1),),
            n_inputs=1,
            const_inputs=(1,),
            omittable=(1,),
            scalar_inputs=(1,),
        ),
        z3=z3_trilu,
        attr_values=trilu_values,
        doc="Trilu(X, k, upper): the upper/lower triangle of the last two dims, the rest 0.",
    )
)
