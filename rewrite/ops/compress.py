"""Compress (opset 9, 11): the slices of `input` where a boolean `condition` is true.

Contract: Compress(input, condition, axis?). `condition` is a 1-D bool tensor; with L its
length, the kept positions are K = [k < min(L, n) with condition[k]] (ORT 1.32: entries
beyond the axis's size n are ignored, a shorter condition keeps nothing past L). With `axis`
(in [-r, r)), out = take(input, K, axis): input's shape with the axis's dim |K|; without it,
out = flatten(input)[K] (1-D, n = input's element count). The output has input's dtype; the
elements are copied (no FLOPs). ORT 1.32's CPU kernel runs every fixed-size dtype.

Typed form: `(Compress axis input condition)`, both operands tensors in ONNX order, so the node
is written back as it was; `axis` is a one-element int vector, empty when the attribute is
absent (flatten). The output shape depends on the condition's values: its dims are static
only when the condition is a constant (`infer` reads `call.consts`). A condition computed at
run time keeps the node encoded typed (the encoder admits any tensor operand), with an
unknown dim, and nothing can be proved of it. Z3 semantics: the elements of K, copied (each
output element is the input's own term); the condition must simplify to boolean numerals
(a constant), else `ShapeError`, as ReshapeDyn's shape operand.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import TensorProto

from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

Array = np.ndarray


def compress_axis(call: OpCall, rank: int) -> int | None:
    """The axis in [0, rank), or None (flatten); the attribute is an int (ONNX) or a vector
    of 0 or 1 ints (the typed form)."""
    axis = call.attr("axis")
    if isinstance(axis, list | tuple):
        if len(axis) > 1:
            raise fail(call, "axis must be one int")
        axis = axis[0] if axis else None
    if axis is None:
        return None
    if not -rank <= int(axis) < rank:
        raise fail(call, f"axis {axis} out of range for rank {rank}")
    return int(axis) % rank


def kept(call: OpCall, condition: Any, n: int) -> list[int]:
    """K: the positions k < n whose condition entry is true (numbers or boolean numerals)."""
    flat = np.asarray(condition, dtype=object).reshape(-1)
    out = []
    for k, c in enumerate(flat[:n]):
        if z3.is_expr(c):
            c = z3.simplify(c)
            if not (z3.is_true(c) or z3.is_false(c)):
                raise fail(call, "the condition is not a constant here")
            c = z3.is_true(c)
        if bool(c):
            out.append(k)
    return out


def infer_compress(call: OpCall) -> list[TensorType]:
    """input's dtype; the kept count (unknown unless the condition is constant) in place of
    the axis's dim, or alone (flatten)."""
    x, cond = call.input(0), call.input(1)
    if cond.shape is not None and len(cond.shape) != 1:
        raise fail(call, "condition must be 1-D")
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if not x.shape:
        raise fail(call, "input must have rank >= 1")
    axis = compress_axis(call, len(x.shape))
    n = x.numel if axis is None else x.shape[axis]
    c = call.const(1)
    count = len(kept(call, c, n)) if c is not None and isinstance(n, int) else None
    if axis is None:
        return [TensorType(x.dtype, (count,))]
    return [TensorType(x.dtype, (*x.shape[:axis], count, *x.shape[axis + 1 :]))]


def _compress(call: OpCall, x: Array, cond: Any) -> Array:
    infer_compress(call)
    axis = compress_axis(call, x.ndim)
    if axis is None:
        flat = x.reshape(-1)
        return flat[kept(call, cond, flat.size)]
    return np.take(x, kept(call, cond, x.shape[axis]), axis=axis)


def ref_compress(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x, cond = arrays
    assert x is not None and cond is not None
    return [_compress(call, x, cond)]


def z3_compress(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    """The kept elements' own terms (module docstring); a symbolic condition: ShapeError."""
    x, cond = arrays
    assert x is not None and cond is not None
    return [_compress(call, np.asarray(x, dtype=object), cond)]


def _to_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    """axis as a vector: [axis], or [] when absent (flatten)."""
    return {"axis": [int(attrs["axis"])] if "axis" in attrs else []}


def _from_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    axis = list(attrs.get("axis", []))
    return {"axis": int(axis[0])} if axis else {}


def _b(*values: int) -> Array:
    return np.array(values, dtype=np.bool_)


SELF_TEST_VALUES: dict[str, list[tuple[dict[str, Any], tuple[int, ...] | None, list[Any]]]] = {
    "Compress": [
        ({"axis": 0}, (3, 4), [_b(1, 0, 1)]),
        ({"axis": -1}, (2, 4), [_b(0, 1, 1, 0, 1, 1)]),
        ({"axis": 1}, (2, 3, 2), [_b(0, 1)]),
        ({}, (2, 3), [_b(1, 0, 0, 1, 1)]),
        ({}, (4,), [_b(0, 0, 0, 0)]),
    ],
}
"""The self-test's cases (`verify.selftest_values`): attributes, input's shape (drawn), the
condition."""

COMPRESS = register(
    OpSpec(
        name="Compress",
        infer=infer_compress,
        reference=ref_compress,
        flops=no_flops,
        egg=EggSig(attrs=(("axis", "VecI", ()),), n_inputs=2, to_egg=_to_egg, from_egg=_from_egg),
        z3=z3_compress,
        input_dtypes=(None, (TensorProto.BOOL,)),
        doc="Compress(input, condition, axis?): the slices (or elements) where condition holds.",
    )
)
