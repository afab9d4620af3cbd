"""The error scale of a `term-relative` approximate rule: the magnitude of the terms an output
is computed from.

Contract: `term_scale(f, values)` = S with, per output element j,
  S_j = Σ over every element v_i of every floating-point input of |∂y_j/∂v_i| · |v_i|
(y = f(values), the left side evaluated in float64). For a sum of products, as a GEMM or a
Conv followed by a scale, S_j is Σ|w||x|·|s| plus the bias terms: the first-order bound of
every rounding error a reordered or rescaled evaluation of y_j commits (each term perturbed
relatively by the unit roundoff moves y_j by at most u·S_j). The derivatives are central
differences in float64 with a relative step (2^-20 of |v_i|); non-finite or non-float
inputs, and elements whose difference is not finite, contribute nothing.

`refute.scaled_error(a, b, S)` = max over elements finite in both of
|a_j - b_j| / max(1, max|b|, S_j) (inf where NaN/inf differ): never above
`refute.scaled_error(a, b)`, so a rule within its tolerance relative to the output is within it
relative to the terms too.

Why: folding a scale into weights (Conv + BatchNormalization, W·s) rounds W·s where the model
rounds Conv(x, W)·s. Where the Conv's sum cancels (x holding +3e38 and -3e38 whose products
sum to 18), the two differ by ~1e30: far beyond any tolerance relative to the output, within
1e-7 of the terms. That is the error any reordering of the sum (another GEMM kernel) commits;
a `term-relative` rule claims no more than that.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Array = np.ndarray
WIDE = np.longdouble
"""The evaluation type: x86's 80-bit extended (exponent to 1e4932) holds the terms of float64
inputs that overflow float64."""
STEP = 2.0**-20
"""Relative step of the central differences."""


def term_scale(f: Callable[[dict[str, Array]], Array], values: dict[str, Array]) -> Array:
    """S (module docstring) of `f` at `values` (float inputs in float64), y's shape."""
    values = {k: a.astype(WIDE) if a.dtype.kind == "f" else a for k, a in values.items()}
    y = np.asarray(f(values), dtype=WIDE)
    total = np.zeros(y.shape, dtype=WIDE)
    for name, arr in values.items():
        if arr.dtype.kind != "f":
            continue
        flat = arr.reshape(-1)
        for i in range(flat.size):
            v = float(flat[i])
            if v == 0.0 or not np.isfinite(v):
                continue
            h = STEP * abs(v)
            up = _moved(values, name, i, v + h)
            down = _moved(values, name, i, v - h)
            with np.errstate(all="ignore"):
                d = (np.asarray(f(up), WIDE) - np.asarray(f(down), WIDE)) / (2 * h)
                part = np.abs(d) * abs(v)
            if part.shape == total.shape:
                total += np.where(np.isfinite(part), part, 0.0)
    return total.astype(np.float64)  # beyond float64's range: inf


def _moved(values: dict[str, Array], name: str, i: int, v: float) -> dict[str, Array]:
    arr = values[name].copy()
    arr.reshape(-1)[i] = v
    return {**values, name: arr}
