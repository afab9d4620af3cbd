"""Softmax and LogSoftmax (Hardmax: `hardmax.py`).

Contract: Softmax along `axis` from opset 13 (default -1); before 13 (default axis 1) over X
coerced to 2-D at `axis` (dims [0, axis) x [axis, rank)). All keep X's dtype and shape.
Softmax and LogSoftmax are typed, `(LogSoftmax axis X)`, with Z3 semantics in ORT's order
(x - max first; LogSoftmax: (x - max) - log(sum(exp(x - max)))), exact in reals with exp and
log as UFs; in floats not bit-exact (MLAS's exp and log).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._unary_z3 import z3_log
from rewrite.ops._z3 import float_only, vmap
from rewrite.ops.base import EggSig, OpCall, OpSpec, ReferenceFn, TensorType
from rewrite.ops.elementwise import per_element
from rewrite.ops.norm import norm_axis
from rewrite.ops.registry import register
from rewrite.ops.unary import EXP

Array = np.ndarray


def _softmax_infer(call: OpCall) -> list[TensorType]:
    """Y: X's type (the axis is checked against X's rank)."""
    x = call.input(0)
    norm_axis(call, x.rank, -1 if call.opset >= 13 else 1)
    return [x]


def _along_axis(fn: Callable[[Array, int], Array]) -> ReferenceFn:
    """Apply `fn(x, axis)` in float64: at `axis` (opset >= 13) or on X coerced to 2-D."""

    def reference(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        x64 = x.astype(np.float64)
        if call.opset >= 13:
            return [fn(x64, norm_axis(call, x.ndim, -1) or 0).astype(x.dtype)]
        axis = norm_axis(call, x.ndim, 1) or 0
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
    axis = norm_axis(call, x.ndim, -1) or 0
    x = x - _max_along(x, axis)
    e = vmap(EXP, x)
    return [e / e.sum(axis=axis, keepdims=True)]


def _z3_log_softmax(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """(x - max) - log(sum(exp(x - max), axis)), as ORT computes it (opset >= 13): exact in
    reals (exp and log the UFs), in floats only up to the kernel's exp/log (not bit-exact)."""
    float_only(call)
    x = arrays[0]
    assert x is not None
    axis = norm_axis(call, x.ndim, -1) or 0
    z = x - _max_along(x, axis)
    total = vmap(EXP, z).sum(axis=axis, keepdims=True)
    return [z - vmap(z3_log, total)]


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
