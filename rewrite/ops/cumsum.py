"""CumSum (opset 11+): the running sum of X along one axis.

Contract: CumSum(X, axis, exclusive=0, reverse=0): axis a constant INT32/INT64 scalar (0-D,
or a one-element 1-D tensor) in [-r, r) for X of rank r >= 1; the output has X's dtype and
shape. With reverse=1 the sum runs from the end of the axis; with exclusive=1 each element
sums the ones strictly before it (the first is 0). ORT 1.32's CPU kernel (math/cumsum.cc)
runs float, double, float16, int32 and int64 and computes, along the axis (in scan order):
- inclusive: out[0] = x[0] (a copy: -0 stays -0), out[i] = out[i-1] + x[i];
- exclusive: out[0] = +0, out[i] = out[i-1] + x[i-1];
each addition in the dtype, integers wrapping; float16 accumulates in float32 (the running
sum is a float32, each output that sum rounded to float16: checked against ORT).

Typed form: `(CumSum exclusive reverse X axis)` with the axis a constant vector input
(`scalar_inputs`: a 0-D axis is read as one element; written back as 1-D INT64). A computed
axis keeps the node opaque.
Z3 semantics: exactly the sequential order above. Exact in the IEEE model (float32, float64:
RNE additions in that order, NaN and ±inf as IEEE gives them; float16: the terms widened to
float32, summed so, each output rounded to float16) and for integers (bit-vector wrap); the
real model is the exact prefix sum. Outside the proof: nothing.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import RNE, const
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, elementwise_flops, fail
from rewrite.ops.registry import register

Array = np.ndarray


def cumsum_axis(call: OpCall, rank: int) -> int | None:
    """The axis normalized to [0, rank), None when it is not a known constant."""
    a = call.const(1)
    if a is None:
        return None
    flat = np.asarray(a).reshape(-1)
    if flat.size != 1:
        raise fail(call, "axis must be a scalar")
    ax = int(flat[0])
    if not -rank <= ax < rank:
        raise fail(call, f"axis {ax} out of range for rank {rank}")
    return ax % rank


def infer_cumsum(call: OpCall) -> list[TensorType]:
    """X's type; X must have rank >= 1 and the axis (when constant) lie in [-r, r)."""
    x = call.input(0)
    if x.shape is not None:
        if len(x.shape) < 1:
            raise fail(call, "X must have rank >= 1")
        cumsum_axis(call, len(x.shape))
    return [x]


def scan(x: Array, axis: int, exclusive: bool, reverse: bool, zero: Any) -> Array:
    """ORT's running sum of `x` (numbers or terms) along `axis` (module docstring); `zero`
    is the exclusive form's first value."""
    xs = np.moveaxis(x, axis, 0)
    n = xs.shape[0]
    order = list(range(n - 1, -1, -1)) if reverse else list(range(n))
    out = np.empty_like(xs)
    if n == 0:
        return np.moveaxis(out, 0, axis)
    first = order[0]
    out[first, ...] = np.full(xs.shape[1:], zero, dtype=xs.dtype) if exclusive else xs[first]
    for prev, cur in itertools.pairwise(order):
        out[cur, ...] = out[prev, ...] + (xs[prev, ...] if exclusive else xs[cur, ...])
    return np.moveaxis(out, 0, axis)


def _flags(call: OpCall) -> tuple[bool, bool]:
    return bool(int(call.attr("exclusive", 0))), bool(int(call.attr("reverse", 0)))


def ref_cumsum(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    axis = cumsum_axis(call, x.ndim)
    assert axis is not None, "CumSum's axis must be a constant"
    exclusive, reverse = _flags(call)
    wide = x.astype(np.float32) if x.dtype == np.float16 else x
    with np.errstate(all="ignore"):
        out = scan(wide, axis, exclusive, reverse, np.zeros((), wide.dtype))
        return [out.astype(x.dtype)]


def z3_cumsum(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The sequential scan over terms (module docstring)."""
    x = arrays[0]
    assert x is not None
    axis = cumsum_axis(call, x.ndim)
    if axis is None:
        raise fail(call, "the axis must be a constant")
    exclusive, reverse = _flags(call)
    cells = x.reshape(-1)
    half = bool(cells.size) and z3.is_fp(cells[0]) and cells[0].sort() == z3.Float16()
    if half:  # ORT's float16 kernel sums in float32
        x = to_sort(x, z3.Float32())
    zero = const(0, x.reshape(-1)[0]) if cells.size else 0
    out = scan(x, axis, exclusive, reverse, zero)
    return [to_sort(out, z3.Float16()) if half else out]


def to_sort(x: Array, sort: Any) -> Array:
    """Every IEEE term of `x` rounded (RNE) to `sort`."""
    return np.frompyfunc(lambda t: z3.fpFPToFP(RNE, t, sort), 1, 1)(x).astype(object)


def cumsum_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """axis: every axis of X, counted from either end; exclusive and reverse: 0 and 1."""
    if name in ("exclusive", "reverse"):
        return [0, 1]
    if name == "axis":
        r = len(inputs[0].shape or ()) if inputs and inputs[0] is not None else 0
        return [(a,) for a in range(-r, r)]
    return None


CUMSUM = register(
    OpSpec(
        name="CumSum",
        infer=infer_cumsum,
        reference=ref_cumsum,
        flops=elementwise_flops,
        egg=EggSig(
            attrs=(("exclusive", "i64", 0), ("reverse", "i64", 0)),
            n_inputs=1,
            const_inputs=(1,),
            scalar_inputs=(1,),
        ),
        z3=z3_cumsum,
        attr_values=cumsum_values,
        doc="CumSum(X, axis, exclusive, reverse): the sequential running sum along axis.",
    )
)
