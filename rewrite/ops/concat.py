"""Concat and Split (opset 13-21): joining and cutting tensors along one axis.

- Concat(x0, x1, ..., axis): all inputs have one rank and one dtype and agree on every dim
  but `axis`; the output's `axis` dim is the sum of theirs.
- Split(x, split?, axis=0, num_outputs?): cuts `axis` into pieces of the sizes in `split`
  (an input from opset 13, an attribute before); without it into `n_outputs` pieces, equal
  ones (opset < 18: the dim must divide evenly) or, from opset 18, pieces of
  ceil(d / n) with a smaller last one.

Both copy the data (bytes read + written) and do no FLOPs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rewrite.ops._dims import int_arg, norm_axis, same_dim
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail, no_flops
from rewrite.ops.registry import register


def infer_concat(call: OpCall) -> list[TensorType]:
    types = [call.input(i) for i in range(len(call.inputs))]
    dtype = next((t.dtype for t in types if t.dtype), 0)
    shapes = [t.shape for t in types if t.shape is not None]
    if not shapes:
        return [TensorType(dtype, None)]
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise fail(call, "inputs have different ranks")
    axis = norm_axis(call, call.attr("axis", 0), rank)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[i] for s in shapes]
        if i == axis:
            known = len(shapes) == len(types) and all(isinstance(d, int) for d in dims)
            out.append(sum(d for d in dims if isinstance(d, int)) if known else None)
            continue
        ints = {d for d in dims if isinstance(d, int)}
        if len(ints) > 1:
            raise fail(call, f"inputs disagree on dim {i}: {sorted(ints)}")
        d: Dim = dims[0]
        for e in dims[1:]:
            d = same_dim(d, e)
        out.append(d)
    return [TensorType(dtype, tuple(out))]


def ref_concat(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    xs = [a for a in arrays if a is not None]
    return [np.concatenate(xs, axis=int(call.attr("axis", 0)))]


def split_sizes(call: OpCall, dim: Dim) -> Sequence[Dim]:
    """Sizes of the pieces of a dim of size `dim` (None where unknown)."""
    n = call.n_outputs
    given, split = int_arg(call, 1, "split")
    if given:
        if split is None:
            return [None] * n
        if len(split) != n:
            raise fail(call, f"split {split} has {len(split)} sizes for {n} outputs")
        if any(s < 0 for s in split):
            raise fail(call, f"split {split} has a negative size")
        if isinstance(dim, int) and sum(split) != dim:
            raise fail(call, f"split {split} does not sum to the dim {dim}")
        return list(split)
    if not isinstance(dim, int):
        return [None] * n
    if call.opset >= 18 and "num_outputs" in call.attrs:
        num = int(call.attrs["num_outputs"])
        if num != n:
            raise fail(call, f"num_outputs={num} but the node has {n} outputs")
        chunk = -(-dim // n)
        if chunk * (n - 1) > dim:
            raise fail(call, f"cannot split {dim} into {n} pieces of {chunk}")
        return [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    if dim % n:
        raise fail(call, f"cannot split {dim} into {n} equal pieces")
    return [dim // n] * n


def split_types(call: OpCall, shape: Shape | None) -> list[Shape | None]:
    if shape is None:
        return [None] * call.n_outputs
    axis = norm_axis(call, call.attr("axis", 0), len(shape))
    sizes = split_sizes(call, shape[axis])
    return [(*shape[:axis], s, *shape[axis + 1 :]) for s in sizes]


def infer_split(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [TensorType(x.dtype, s) for s in split_types(call, x.shape)]


def ref_split(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    if len(arrays) > 1 and arrays[1] is not None:
        consts = [None, arrays[1]]
        call = OpCall(call.op_type, call.inputs, consts, call.attrs, call.n_outputs, call.opset)
    axis = norm_axis(call, call.attr("axis", 0), x.ndim)
    sizes = split_sizes(call, x.shape[axis])
    cuts = np.cumsum([int(s or 0) for s in sizes])[:-1]
    return [p.copy() for p in np.split(x, cuts, axis=axis)]


CONCAT = register(
    OpSpec(
        name="Concat",
        infer=infer_concat,
        reference=ref_concat,
        flops=no_flops,
        doc="Concat(x..., axis): the axis dims add up.",
        # typed for 1 to 16 inputs (a constructor per count: Concat, Concat_3, ...)
        egg=EggSig(attrs=(("axis", "i64", None),), n_inputs=2, arities=(1, *range(3, 17))),
        z3=ref_concat,  # moves Z3 terms like numbers
    )
)
SPLIT = register(
    OpSpec(
        name="Split",
        infer=infer_split,
        reference=ref_split,
        flops=no_flops,
        doc="Split(x, split?, axis, num_outputs?): pieces along one axis.",
    )
)
