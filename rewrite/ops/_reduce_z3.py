"""Z3 semantics of ArgMax / ArgMin (not an op module; `reduce.py` registers the ops).

ArgMax(X) along `axis` is the index a scan of the axis keeps: it starts at element 0 and
moves to element i when x_i > best (select_last_index=1: x_i >= best), as ORT's kernel
does. So a NaN at element 0 wins (nothing compares greater than it) and a later NaN never
does; of equal values (+0 and -0 included) the first (or the last) wins. ArgMin is the same
with < and <=. Integers compare as the dtype does (signed or unsigned bit-vectors); the
result is an INT64 bit-vector.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.ops._z3 import SIGNED, WIDTH
from rewrite.ops.base import OpCall, fail

Array = np.ndarray


def _better(dtype: int, largest: bool, ties: bool) -> Any:
    """The comparison `(v, best) -> v replaces best` of a scan over `dtype` values."""
    unsigned = dtype in WIDTH and dtype not in SIGNED
    if largest:
        if unsigned:
            return (lambda v, b: z3.UGE(v, b)) if ties else (lambda v, b: z3.UGT(v, b))
        return (lambda v, b: v >= b) if ties else (lambda v, b: v > b)
    if unsigned:
        return (lambda v, b: z3.ULE(v, b)) if ties else (lambda v, b: z3.ULT(v, b))
    return (lambda v, b: v <= b) if ties else (lambda v, b: v < b)


def z3_arg_extremum(largest: bool) -> Any:
    """Z3 semantics of ArgMax (`largest`) or ArgMin: see the module docstring."""

    def semantics(call: OpCall, arrays: list[Array | None]) -> list[Array]:
        x = arrays[0]
        assert x is not None
        if x.ndim == 0:
            raise fail(call, "X must have rank >= 1")
        axis = int(call.attr("axis", 0))
        if not -x.ndim <= axis < x.ndim:
            raise fail(call, f"axis {axis} out of range for rank {x.ndim}")
        axis %= x.ndim
        better = _better(call.input(0).dtype, largest, bool(call.attr("select_last_index", 0)))
        moved = np.moveaxis(x, axis, -1)
        out = np.empty(moved.shape[:-1], dtype=object)
        for idx in np.ndindex(*out.shape):
            row = list(moved[idx])
            best, arg = row[0], z3.BitVecVal(0, 64)
            for i, v in enumerate(row[1:], start=1):
                take = better(v, best)
                best, arg = z3.If(take, v, best), z3.If(take, z3.BitVecVal(i, 64), arg)
            out[idx] = arg
        y = np.expand_dims(out, axis) if call.attr("keepdims", 1) else out
        return [np.asarray(y, dtype=object)]

    semantics.__doc__ = f"Arg{'Max' if largest else 'Min'}: the index a scan keeps (module doc)."
    return semantics
