"""Reshape, Flatten, Squeeze, Unsqueeze (opset 13-21): views that change only the shape.

- Reshape(data, shape): `shape` holds the output dims; 0 copies the input dim at the same
  index (unless `allowzero=1`, opset 14, where 0 is a real zero), one -1 is inferred from the
  element count.
- Flatten(x, axis=1): 2-D (prod(d[:axis]), prod(d[axis:])), axis in [-r, r].
- Squeeze(x, axes): removes the listed size-1 dims (all size-1 dims when axes is omitted);
  axes is an input from opset 13, an attribute before.
- Unsqueeze(x, axes): inserts size-1 dims at `axes` (indices into the output); input from
  opset 13, attribute before.

Outputs have the input's dtype and its elements in the same order. ORT runs all four as views
of the input buffer, so they move no bytes (`bytes` is 0) and do no FLOPs.

Typed forms (the model is opset >= 13 once loaded, so axes are inputs): `Flatten(axis, x)`,
`Squeeze(axes, x)` and `Unsqueeze(axes, x)` with axes a constant int vector (a Squeeze
without axes is typed with the axes of x's size-1 dims where every dim of x is static, and
stays opaque where one is symbolic), `Reshape(allowzero, shape, x)`. Their Z3 semantics are the
references: they only move elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewrite.ops._dims import (
    as_ints,
    dim_product,
    dim_quotient,
    int_arg,
    norm_axes,
    static,
    vec_len,
)
from rewrite.ops.base import (
    Dim,
    EggSig,
    OpCall,
    OpSpec,
    Shape,
    TensorType,
    fail,
    no_flops,
)
from rewrite.ops.registry import register


def view_bytes(call: OpCall, outputs: list[TensorType]) -> float:
    """A view: ORT aliases the input buffer, so nothing is read or written."""
    return 0.0


def reshape_dims(call: OpCall, shape: Shape | None, target: list[int]) -> Shape:
    """Output dims of Reshape(x: `shape`, `target`); `shape` None is an unknown rank."""
    allowzero = int(call.attr("allowzero", 0)) == 1
    if target.count(-1) > 1:
        raise fail(call, f"shape {target} has more than one -1")
    if allowzero and 0 in target and -1 in target:
        raise fail(call, f"shape {target} has both 0 and -1 with allowzero=1")
    out: list[Dim] = []
    for i, v in enumerate(target):
        if v < -1:
            raise fail(call, f"shape {target} has a negative dim {v}")
        if v == 0 and not allowzero:
            if shape is not None and i >= len(shape):
                raise fail(call, f"shape {target} copies dim {i} of a rank-{len(shape)} input")
            out.append(None if shape is None else shape[i])
        else:
            out.append(v)
    if shape is None:
        return tuple(None if d == -1 else d for d in out)
    if -1 in out:
        at = out.index(-1)
        others = out[:at] + out[at + 1 :]
        if 0 in others:
            raise fail(call, f"shape {target} infers -1 next to a zero dim")
        try:
            out[at] = dim_quotient(shape, others)
        except ValueError as err:
            raise fail(call, f"cannot reshape {shape} to {target}: {err}") from err
    n_in, n_out = dim_product(shape), dim_product(out)
    if isinstance(n_in, int) and isinstance(n_out, int) and n_in != n_out:
        raise fail(call, f"cannot reshape {n_in} elements to {target}")
    return tuple(out)


def infer_reshape(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    target = as_ints(call.const(1))
    if target is None:
        n = vec_len(call.input(1))
        return [TensorType(x.dtype, None if n is None else (None,) * n)]
    return [TensorType(x.dtype, reshape_dims(call, x.shape, target))]


def ref_reshape(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x, target = arrays[0], as_ints(arrays[1])
    assert x is not None and target is not None
    return [x.reshape(static(reshape_dims(call, x.shape, target)))]


def flatten_dims(call: OpCall, shape: Shape | None) -> Shape:
    axis = int(call.attr("axis", 1))
    if shape is None:
        return (None, None)
    rank = len(shape)
    if not -rank <= axis <= rank:
        raise fail(call, f"axis {axis} out of range [-{rank}, {rank}]")
    axis = axis + rank if axis < 0 else axis
    return (dim_product(shape[:axis]), dim_product(shape[axis:]))


def infer_flatten(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [TensorType(x.dtype, flatten_dims(call, x.shape))]


def ref_flatten(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    return [x.reshape(static(flatten_dims(call, x.shape)))]


def squeeze_dims(call: OpCall, shape: Shape | None, axes: list[int] | None) -> Shape | None:
    """Output dims of Squeeze; axes None squeezes every static 1 (unknown if a dim is not)."""
    if shape is None:
        return None
    if not axes:  # omitted or empty: every size-1 dim
        if not all(isinstance(d, int) for d in shape):
            return None
        return tuple(d for d in shape if d != 1)
    drop = norm_axes(call, axes, len(shape))
    for a in drop:
        if isinstance(shape[a], int) and shape[a] != 1:
            raise fail(call, f"cannot squeeze axis {a} of size {shape[a]}")
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def infer_squeeze(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    given, axes = int_arg(call, 1, "axes")
    if given and axes is None:
        n = vec_len(call.input(1))
        shape = None if n is None or x.rank is None else (None,) * (x.rank - n)
        return [TensorType(x.dtype, shape)]
    return [TensorType(x.dtype, squeeze_dims(call, x.shape, axes))]


def ref_squeeze(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    axes = as_ints(arrays[1]) if len(arrays) > 1 and arrays[1] is not None else None
    axes = axes if axes is not None else as_ints(call.attr("axes"))
    return [x.reshape(static(squeeze_dims(call, x.shape, axes)))]


def unsqueeze_dims(call: OpCall, shape: Shape, axes: list[int]) -> Shape:
    rank = len(shape) + len(axes)
    add = set(norm_axes(call, axes, rank))
    rest = iter(shape)
    return tuple(1 if i in add else next(rest) for i in range(rank))


def infer_unsqueeze(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    _, axes = int_arg(call, 1, "axes")
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if axes is None:
        n = vec_len(call.input(1))
        return [TensorType(x.dtype, None if n is None else (None,) * (len(x.shape) + n))]
    return [TensorType(x.dtype, unsqueeze_dims(call, x.shape, axes))]


def ref_unsqueeze(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    axes = as_ints(arrays[1]) if len(arrays) > 1 and arrays[1] is not None else None
    axes = axes if axes is not None else as_ints(call.attr("axes", []))
    return [x.reshape(static(unsqueeze_dims(call, x.shape, axes or [])))]


MAX_RANK = 6
"""Proof and self-test cases keep outputs at or below this rank (the e-graph's shape
analysis stops there)."""


def _rank(inputs: list[TensorType]) -> int | None:
    return inputs[0].rank if inputs else None


def flatten_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Flatten's `axis`: every value in [-r, r] (r itself is valid: (prod(d), 1))."""
    r = _rank(inputs)
    if name != "axis" or r is None:
        return None
    return list(range(-r, r + 1))


def squeeze_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Squeeze's `axes`: the first size-1 dim, the last one (negative), and all of them."""
    if name != "axes" or not inputs or inputs[0].shape is None:
        return None
    shape = inputs[0].shape
    ones = [i for i, d in enumerate(shape) if d == 1]
    if not ones:
        return []
    out = [(ones[0],), (ones[-1] - len(shape),), tuple(ones)]
    return list(dict.fromkeys(out))


def unsqueeze_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Unsqueeze's `axes`: one new dim first, last, second; two (first and last, in reverse
    order), keeping the output rank at most `MAX_RANK`."""
    r = _rank(inputs)
    if name != "axes" or r is None:
        return None
    out: list[tuple[int, ...]] = []
    if r + 1 <= MAX_RANK:
        out += [(0,), (-1,), (1,)]
    if r + 2 <= MAX_RANK:
        out += [(-1, 0)]
    return out


RESHAPE = register(
    OpSpec(
        name="Reshape",
        infer=infer_reshape,
        reference=ref_reshape,
        flops=no_flops,
        bytes=view_bytes,
        egg=EggSig(attrs=(("allowzero", "i64", 0),), n_inputs=1, const_inputs=(1,)),
        z3=ref_reshape,  # moves Z3 terms like numbers
        doc="Reshape(data, shape): 0 copies a dim (unless allowzero), -1 is inferred.",
    )
)
FLATTEN = register(
    OpSpec(
        name="Flatten",
        infer=infer_flatten,
        reference=ref_flatten,
        flops=no_flops,
        bytes=view_bytes,
        egg=EggSig(attrs=(("axis", "i64", 1),), n_inputs=1),
        z3=ref_flatten,  # moves Z3 terms like numbers
        attr_values=flatten_values,
        doc="Flatten(x, axis): (prod(d[:axis]), prod(d[axis:])), axis in [-r, r].",
    )
)
SQUEEZE = register(
    OpSpec(
        name="Squeeze",
        infer=infer_squeeze,
        reference=ref_squeeze,
        flops=no_flops,
        bytes=view_bytes,
        # typed when axes is a constant vector (opset >= 13), or omitted on a static shape
        egg=EggSig(n_inputs=1, const_inputs=(1,)),
        z3=ref_squeeze,  # moves Z3 terms like numbers
        attr_values=squeeze_values,
        doc="Squeeze(x, axes): drops the size-1 dims at `axes` (every size-1 dim if omitted).",
    )
)
UNSQUEEZE = register(
    OpSpec(
        name="Unsqueeze",
        infer=infer_unsqueeze,
        reference=ref_unsqueeze,
        flops=no_flops,
        bytes=view_bytes,
        egg=EggSig(n_inputs=1, const_inputs=(1,)),
        z3=ref_unsqueeze,  # moves Z3 terms like numbers
        attr_values=unsqueeze_values,
        doc="Unsqueeze(x, axes): inserts size-1 dims at output indices `axes`.",
    )
)
