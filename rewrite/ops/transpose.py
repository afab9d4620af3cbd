"""Transpose (opset 13-21): out.shape[i] = x.shape[perm[i]]; perm defaults to reversed axes.

`perm` must be a permutation of range(rank). The output has the input's dtype; ORT copies the
data (bytes read + written), no FLOPs.
"""

from __future__ import annotations

import numpy as np

from rewrite.ops._dims import as_ints
from rewrite.ops.base import EggSig, OpCall, OpSpec, Shape, TensorType, fail, no_flops
from rewrite.ops.registry import register


def perm_of(call: OpCall, rank: int) -> list[int]:
    """The checked permutation for an input of rank `rank`."""
    perm = as_ints(call.attr("perm"))
    if perm is None:
        return list(range(rank))[::-1]
    if sorted(perm) != list(range(rank)):
        raise fail(call, f"perm {perm} is not a permutation of {rank} axes")
    return perm


def transpose_dims(call: OpCall, shape: Shape | None) -> Shape | None:
    if shape is None:
        perm = as_ints(call.attr("perm"))
        return None if perm is None else (None,) * len(perm)
    return tuple(shape[p] for p in perm_of(call, len(shape)))


def infer_transpose(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [TensorType(x.dtype, transpose_dims(call, x.shape))]


def ref_transpose(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    return [np.transpose(x, perm_of(call, x.ndim)).copy()]


TRANSPOSE = register(
    OpSpec(
        name="Transpose",
        infer=infer_transpose,
        reference=ref_transpose,
        flops=no_flops,
        egg=EggSig(attrs=(("perm", "VecI", None),), n_inputs=1),
        z3=ref_transpose,  # moves Z3 terms like numbers
        doc="Transpose(x, perm): out.shape[i] = x.shape[perm[i]].",
    )
)
