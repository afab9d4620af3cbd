"""What breaks a rule's numeric claim on one input set, and the counterexample that shows it.

A rule claims one class (its tags):
- `bit-exact`: both sides give bit-identical outputs in ORT (NaN equals NaN whatever its
  payload; +0 and -0 differ);
- `exact` (the default): exact in the reals, and the float error of the rewrite stays within
  the differential check's tolerance on every input, per element as `verify.confirm.agree`
  checks a prover's counterexample: NaN and ±inf at the same positions, elsewhere
  |right - left| <= atol·max(1, |left|) + rtol·|left|, (rtol, atol) per dtype as
  `verify.compare.TOLERANCES`; integer and bool outputs equal;
- `approximate`: the scaled error (`scaled_error`) within a declared tolerance.
Outputs of different shape or dtype break every claim.

`violation(claim, left, right, tolerance)` says why a pair of ORT outputs breaks the claim
("" when it does not); `shrink` makes a failing input set small (every element that is not
needed to fail set to 1); `counterexample` packs a failing input set as the prover's
`Counterexample` (JSON-ready: NaN and ±inf written as strings) and one readable line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rewrite.verify.cases import Case
from rewrite.verify.compare import TOLERANCES

Array = np.ndarray
BIT_EXACT_CLAIM, EXACT_CLAIM, APPROXIMATE_CLAIM = "bit-exact", "exact", "approximate"
APPROX_TOLERANCE = 1e-3
"""Default tolerance of an `approximate` rule (scaled error, `scaled_error`)."""


def claim_of(tags: frozenset[str] | set[str]) -> str:
    """The numeric class a rule's tags claim (`exact` when none is given)."""
    if "bit-exact" in tags:
        return BIT_EXACT_CLAIM
    if "approximate" in tags:
        return APPROXIMATE_CLAIM
    return EXACT_CLAIM


def scaled_error(a: Array, b: Array, scale: Array | None = None) -> float:
    """max |a - b| / max(1, max |b|) over elements finite in both; inf when NaN/Inf differ.
    With `scale` (b's shape: a `term-relative` rule's terms, `verify.terms`), each element's
    divisor is max(1, max |b|, scale there): never above the error without it."""
    if a.shape != b.shape or (scale is not None and scale.shape != b.shape):
        return float("inf")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    fa, fb = np.isfinite(a64), np.isfinite(b64)
    if not np.array_equal(fa, fb) or not np.array_equal(a64[~fa], b64[~fb], equal_nan=True):
        return float("inf")
    if not fa.any():
        return 0.0
    floor = max(1.0, float(np.max(np.abs(b64[fb]))))
    if scale is None:
        return float(np.max(np.abs(a64[fa] - b64[fb]))) / floor
    denom = np.maximum(floor, np.where(np.isfinite(scale), scale, np.inf))[fa]
    return float(np.max(np.abs(a64[fa] - b64[fb]) / denom))


def _at(mask: Array, left: Array, right: Array, what: str) -> str:
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{what} at {list(idx)}: left {_num(left[idx])}, right {_num(right[idx])}"


def excuse_overflow(
    left: Array,
    right: Array,
    exact: Array | None,
    tolerance: float | None = None,
    scale: Array | None = None,
) -> tuple[Array, Array]:
    """`left`, `right` with the elements that agree by overflow made equal, given `exact` (the
    left side in float64):
    - both non-finite where `exact` overflows the dtype: NaN on both sides (see `violation`);
    - with a `tolerance` (approximate claims): the left non-finite where `exact` is within the
      dtype's range and the right within `tolerance` of it (max(1, |exact|) scaled): the right
      there (the rewrite removed an intermediate overflow; it is closer to the exact value);
      `scale` (a `term-relative` rule's terms, `verify.terms`) widens that to max(1, |exact|,
      scale)."""
    if exact is None or not exact.shape == left.shape == right.shape or left.dtype.kind != "f":
        return left, right
    e64 = exact.astype(np.float64)
    e = np.abs(e64)
    top = float(np.finfo(left.dtype).max)
    over = (np.isinf(e) | (e > top)) & ~np.isnan(e)
    both = ~np.isfinite(left) & ~np.isfinite(right) & over
    if both.any():
        left, right = np.where(both, np.nan, left), np.where(both, np.nan, right)
    if tolerance is not None:
        with np.errstate(all="ignore"):
            room = np.maximum(1.0, e) if scale is None else np.maximum(np.maximum(1.0, e), scale)
            near = np.abs(right.astype(np.float64) - e64) <= tolerance * room
        closer = ~np.isfinite(left) & np.isfinite(e64) & (e <= top) & np.isfinite(right) & near
        if closer.any():
            left = np.where(closer, right, left)
    return left, right


def violation(
    claim: str,
    left: Array,
    right: Array,
    tolerance: float,
    exact: Array | None = None,
    excused: tuple[Array, Array] | None = None,
) -> str:
    """Why ORT outputs `left`, `right` break `claim` ("" when they do not). `exact` (the
    left side in float64, optional): for `exact` and `approximate` claims, an element where
    both sides are non-finite (NaN, ±inf) and the float64 value overflows the dtype agrees:
    a sum whose partial sums overflow gives NaN or either infinity depending on the order
    (and FMA use) of the kernel, as merging two MatMuls into one changes. For `approximate`
    claims, an element the left side overflows (±inf or NaN) where the float64 value is within
    the dtype's range agrees when the right side is within the tolerance of that value: the
    rewrite removed an intermediate overflow (a scale moved into the weights). `excused`: the
    sides as `excuse_overflow(left, right, exact, tol)` already gave them (tol: `tolerance`
    for `approximate` claims, else None), for a caller that computed it."""
    if left.shape != right.shape or left.dtype != right.dtype:
        return (
            f"the sides differ in type: left {left.dtype}{list(left.shape)}, "
            f"right {right.dtype}{list(right.shape)}"
        )
    if left.dtype.kind != "f":
        differ = left != right
        return _at(differ, left, right, "the sides differ") if differ.any() else ""
    if claim != BIT_EXACT_CLAIM:
        tol = tolerance if claim == APPROXIMATE_CLAIM else None
        if excused is None:
            excused = excuse_overflow(left, right, exact, tol)
        left, right = excused
    ln, rn = np.isnan(left), np.isnan(right)
    if not np.array_equal(ln, rn):
        return _at(ln != rn, left, right, "NaN on one side only")
    if claim == BIT_EXACT_CLAIM:
        lb = left.view(f"u{left.itemsize}")
        rb = right.view(f"u{right.itemsize}")
        differ = (lb != rb) & ~ln
        return _at(differ, left, right, "not bit-identical") if differ.any() else ""
    l64, r64 = left.astype(np.float64), right.astype(np.float64)
    inf = np.isinf(l64) | np.isinf(r64)
    bad_inf = inf & (l64 != r64)
    if bad_inf.any():
        return _at(bad_inf, left, right, "±inf on one side only")
    if claim == APPROXIMATE_CLAIM:
        err = scaled_error(right, left)
        return (
            f"scaled error {err:.3g} exceeds the tolerance {tolerance:g}" if err > tolerance else ""
        )
    rtol, atol = TOLERANCES.get(str(left.dtype), (0.0, 0.0))
    fin = ~(ln | inf)
    with np.errstate(all="ignore"):
        bound = atol * np.maximum(1.0, np.abs(l64)) + rtol * np.abs(l64)
        too_far = fin & (np.abs(r64 - l64) > bound)
    if too_far.any():
        why = f"differ beyond the exact class's float error (rtol {rtol:g}, atol {atol:g})"
        return _at(too_far, left, right, f"the sides {why}")
    return ""


def shrink(
    values: dict[str, Array], fixed: set[str], fails: Callable[[dict[str, Array]], bool]
) -> dict[str, Array]:
    """`values` with every element that the failure does not need set to 1 (one pass)."""
    cur = {v: a.copy() for v, a in values.items()}
    for v, arr in cur.items():
        if v in fixed:
            continue
        unit = one_like(arr)
        flat = arr.reshape(-1)
        for i in range(flat.size):
            if flat[i].tobytes() == unit.tobytes():
                continue
            old = flat[i].copy()
            flat[i] = unit
            if not fails(cur):
                flat[i] = old
    return cur


def one_like(arr: Array) -> Array:
    return np.ones((), dtype=arr.dtype) if arr.dtype != np.bool_ else np.array(True)


def jsonable(a: Any) -> Any:
    """An array as nested lists of Python numbers; NaN and ±inf as "nan", "inf", "-inf"."""
    arr = np.asarray(a)
    if arr.dtype.kind == "f":
        out = np.empty(arr.shape, dtype=object)
        for idx in np.ndindex(*arr.shape):
            x = float(arr[idx])
            out[idx] = x if np.isfinite(x) else str(x)
        return out.tolist()
    return arr.tolist()


def show_array(a: Array) -> str:
    """Short text for a tensor: its values, or the common value and the exceptions."""
    flat = a.reshape(-1)
    if flat.size <= 6:
        return "[" + ", ".join(_num(x) for x in flat) + "]"
    vals, counts = np.unique(flat.astype(str), return_counts=True)
    common = vals[int(np.argmax(counts))]
    odd = [f"{list(idx)}={_num(a[idx])}" for idx in np.ndindex(*a.shape) if str(a[idx]) != common]
    more = f" (+{len(odd) - 4} more)" if len(odd) > 4 else ""
    head = (
        f"{a.dtype}{list(a.shape)} all {_num(a.reshape(-1)[list(flat.astype(str)).index(common)])}"
    )
    return head + (" except " + ", ".join(odd[:4]) + more if odd else "")


def _num(x: Any) -> str:
    if isinstance(x, np.floating | float):
        return f"{float(x):.8g}"
    return str(x.item() if isinstance(x, np.generic) else x)


def counterexample(
    case: Case,
    why: str,
    values: dict[str, Array],
    left: Array | None,
    right: Array | None,
) -> tuple[Any, str]:
    """The prover's `Counterexample` for a failing sample, and its one-line text."""
    from rewrite.verify.result import Counterexample

    cx = Counterexample(
        repr(case.rewrite),
        f"sampled in ORT: {why}",
        case.describe(),
        {v: jsonable(a) for v, a in values.items()},
        None if left is None else jsonable(left),
        None if right is None else jsonable(right),
    )
    d = case.describe()
    types = ", ".join(f"{v}: {d['dtypes'][v]}{s}" for v, s in d["shapes"].items())
    attrs = d.get("attributes")
    where = types + (f"; {attrs}" if attrs else "")
    ins = " ".join(f"{v}={show_array(a)}" for v, a in values.items())
    line = f"{cx.why} for {where}: {ins}"
    if left is not None:
        line += f" -> left={show_array(left)}"
    if right is not None:
        line += f" right={show_array(right)}"
    return cx, line


__all__ = [
    "APPROXIMATE_CLAIM",
    "APPROX_TOLERANCE",
    "BIT_EXACT_CLAIM",
    "EXACT_CLAIM",
    "claim_of",
    "counterexample",
    "scaled_error",
    "shrink",
    "violation",
]
