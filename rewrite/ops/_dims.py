"""Shared helpers of the data-movement ops: axes, shape-valued inputs, products of dims.

Not an op module (it registers nothing): the functions here read an `OpCall`'s axes and
shape-like inputs the same way in every op, and multiply dims that may be symbolic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from math import prod

import numpy as np

from rewrite.ops.base import Dim, OpCall, Shape, TensorType, fail


def norm_axis(call: OpCall, axis: int, rank: int) -> int:
    """`axis` in [-rank, rank) as a non-negative index; fails outside."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise fail(call, f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(call: OpCall, axes: Iterable[int], rank: int) -> list[int]:
    """Normalized axes; a repeated axis fails."""
    out = [norm_axis(call, a, rank) for a in axes]
    if len(set(out)) != len(out):
        raise fail(call, f"repeated axis in {list(axes)}")
    return out


def as_ints(value: np.ndarray | Sequence[int] | None) -> list[int] | None:
    """A constant (any shape) or attribute value as a flat list of Python ints."""
    if value is None:
        return None
    return [int(v) for v in np.asarray(value).reshape(-1)]


def int_arg(call: OpCall, index: int, attr: str) -> tuple[bool, list[int] | None]:
    """(given, values) of an int list that is input `index` (new opsets) or attribute `attr`.

    `values` is None when the input is given but not constant.
    """
    if call.has_input(index):
        return True, as_ints(call.const(index))
    if attr in call.attrs:
        return True, as_ints(call.attrs[attr])
    return False, None


def vec_len(t: TensorType) -> int | None:
    """Static length of a 1-D (shape-like) input, else None."""
    if t.shape is not None and len(t.shape) == 1 and isinstance(t.shape[0], int):
        return t.shape[0]
    return None


def dim_product(dims: Iterable[Dim]) -> Dim:
    """Product of dims: an int when all are static, a name when it is one name times 1."""
    ints: list[int] = []
    names: list[str] = []
    for d in dims:
        if d is None:
            return None
        if isinstance(d, str):
            names.append(d)
        else:
            ints.append(d)
    total = prod(ints)
    if not names:
        return total
    if total == 0:
        return 0
    if len(names) == 1 and total == 1:
        return names[0]
    return None


def dim_quotient(num: Iterable[Dim], den: Iterable[Dim]) -> Dim:
    """prod(num) / prod(den) with symbolic names cancelled; None if unknowable.

    Raises ValueError when the static parts prove the division is inexact (an invalid shape).
    """
    num, den = list(num), list(den)
    if any(d is None for d in [*num, *den]):
        return None
    names = Counter(d for d in num if isinstance(d, str))
    names.subtract(d for d in den if isinstance(d, str))
    n = prod(d for d in num if isinstance(d, int))
    m = prod(d for d in den if isinstance(d, int))
    if any(v < 0 for v in names.values()):
        return None
    left = [k for k, v in names.items() for _ in range(v)]
    if m == 0:
        raise ValueError("division by a zero dim")
    if n % m:
        if not left:
            raise ValueError(f"{n} elements are not a multiple of {m}")
        return None
    q = n // m
    if not left:
        return q
    if q == 0:
        return 0
    return left[0] if len(left) == 1 and q == 1 else None


def static(shape: Shape | None) -> tuple[int, ...]:
    """A shape known to be static (it came from a concrete array) as ints."""
    assert shape is not None
    ints = tuple(d for d in shape if isinstance(d, int))
    assert len(ints) == len(shape), f"shape {shape} is not static"
    return ints


def same_dim(a: Dim, b: Dim) -> Dim:
    """The dim two inputs agree on: static wins over symbolic, None when unknowable."""
    if isinstance(a, int):
        return a
    if isinstance(b, int):
        return b
    return a if a == b else None
