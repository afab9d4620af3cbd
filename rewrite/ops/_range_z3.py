"""Range's Z3 semantics: concrete start, limit and delta (its output length is their value).

Not an op module (it registers nothing). Range(start, limit, delta) has
n = max(ceil((limit - start) / delta), 0) elements, so the output's shape is a function of
the input values: the semantics are defined only where all three simplify to numerals (a
constant, or a value computed from the case's static shapes); there they are the numerals of
what ORT computes (`shape.ref_range`: accumulated in the input dtype, bit-exact). A symbolic
start, limit or delta is not modelled (`ShapeError`: the case cannot be proved).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import ShapeError
from rewrite.ops import _z3
from rewrite.ops.base import OpCall, np_dtype

Reference = Callable[[OpCall, list[np.ndarray | None]], list[np.ndarray]]


def concrete_number(v: Any) -> int | float:
    """A Z3 term (or number) as a Python number; ShapeError unless it simplifies to a
    numeral (a bit-vector as signed)."""
    if isinstance(v, int | float | np.number):
        return v.item() if isinstance(v, np.number) else v
    s = z3.simplify(v)
    if z3.is_bv_value(s):
        return int(s.as_signed_long())
    if z3.is_int_value(s):
        return int(s.as_long())
    if z3.is_rational_value(s):
        return float(Fraction(int(s.numerator_as_long()), int(s.denominator_as_long())))
    if z3.is_fp_value(s):
        if s.isNaN():
            return float("nan")
        if s.isInf():
            return float("-inf") if s.isNegative() else float("inf")
        if s.isZero():
            return -0.0 if s.isNegative() else 0.0
        return concrete_number(z3.fpToReal(s))
    raise ShapeError(f"Range: {v} is not a concrete number in this case")


def z3_range(reference: Reference) -> Callable[[OpCall, list[np.ndarray | None]], list[Any]]:
    """Range's semantics from its numpy `reference`: the numerals of its concrete output."""

    def semantics(call: OpCall, arrays: list[np.ndarray | None]) -> list[Any]:
        dtype = call.input(0).dtype
        nums = [
            np.asarray(concrete_number(np.asarray(a, dtype=object).reshape(-1)[0])).astype(
                np_dtype(dtype)
            )
            for a in arrays[:3]
        ]
        (values,) = reference(call, list(nums))
        out = np.empty(values.shape, dtype=object)
        for i in range(values.shape[0]):
            out[i] = _z3.symbol("", dtype, values[i].item())
        return [out]

    semantics.__doc__ = "Range over concrete start, limit, delta: numerals of ORT's values."
    return semantics
