"""Egglog literal syntax for the values encode writes into terms: strings, int vectors and
attribute values of each sort."""

from __future__ import annotations

import math
from typing import Any


def q(s: str) -> str:
    """An egglog string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def vec(dims: list[int]) -> str:
    return f"(vec-of {' '.join(str(d) for d in dims)})" if dims else "(vec-empty)"


def literal(val: Any, sort: str) -> str:
    """An attribute value as an egglog literal of `sort`."""
    if sort == "i64":
        return str(int(val))
    if sort == "f64":
        f = float(val)
        if math.isnan(f) or math.isinf(f):
            raise ValueError("non-finite float attribute")
        return repr(f) if "." in repr(f) or "e" in repr(f) else f"{f}.0"
    if sort == "String":
        return q(str(val))
    if sort == "VecI":
        return vec([int(x) for x in val])
    raise ValueError(f"unknown attribute sort {sort}")
