"""Tan, Asin, Acos, Atan, Sinh, Cosh: elementwise, X's dtype and shape (floating dtypes; ORT's
CPU provider runs float32 and float16).

Contract: Tan(x) = tan(x), Asin(x) = arcsin(x) (NaN for |x| > 1), Acos(x) = arccos(x) (NaN for
|x| > 1), Atan(x) = arctan(x), Sinh(x) = (e^x - e^-x)/2, Cosh(x) = (e^x + e^-x)/2. Their Z3
semantics (`_trig_z3`) are uninterpreted functions with ORT's special values interpreted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rewrite.ops._trig_z3 import z3_acos, z3_asin, z3_atan, z3_cosh, z3_sinh, z3_tan
from rewrite.ops._z3 import unary
from rewrite.ops.base import EggSig, OpSpec, per_element, same_type
from rewrite.ops.registry import register
from rewrite.ops.unary import TRANSCENDENTAL, elementwise_ref

_OPS: tuple[tuple[str, Callable[..., Any], Callable[[Any], Any], str], ...] = (
    ("Tan", np.tan, z3_tan, "Tan(x) = tan(x)"),
    ("Asin", np.arcsin, z3_asin, "Asin(x) = arcsin(x), NaN for |x| > 1"),
    ("Acos", np.arccos, z3_acos, "Acos(x) = arccos(x), NaN for |x| > 1"),
    ("Atan", np.arctan, z3_atan, "Atan(x) = arctan(x)"),
    ("Sinh", np.sinh, z3_sinh, "Sinh(x) = (e^x - e^-x)/2"),
    ("Cosh", np.cosh, z3_cosh, "Cosh(x) = (e^x + e^-x)/2"),
)
for _name, _fn, _z3fn, _doc in _OPS:
    register(
        OpSpec(
            _name,
            same_type,
            elementwise_ref(_fn),
            per_element(TRANSCENDENTAL),
            egg=EggSig(),
            z3=unary(_z3fn, floats=True),
            doc=_doc,
        )
    )
