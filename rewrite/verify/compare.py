"""One output of the candidate against the reference's, under the differential check's
tolerance policy (`rewrite.verify.differential`'s docstring states it): `compare` on one feed
set, `merge` over feed sets, `TOLERANCES` per dtype.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# dtype name -> (rtol, atol before scaling); see `rewrite.verify.differential`.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (1e-2, 1e-3),
    "float64": (1e-9, 1e-12),
}
CALIBRATION_FACTOR = 4.0


@dataclass
class OutputDiff:
    """How one output of the candidate compares with the reference (worst over feed sets)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    ok: bool
    bit_identical: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    error_ratio: float | None = None
    mismatches: int = 0
    calibrated: bool = False
    noise: float | None = None
    reason: str = ""


def compare(name: str, ref: Any, cand: Any, *, noise: float | None = None) -> OutputDiff:
    """Compare one output on one feed set under the policy; `noise` widens atol (see above)."""
    if not isinstance(ref, np.ndarray) or not isinstance(cand, np.ndarray):
        same = _same(ref, cand)
        kind = type(ref).__name__
        why = "" if same else f"output {name!r} ({kind}) differs"
        return OutputDiff(name, kind, (), same, same, 0.0 if same else 1.0, reason=why)
    dtype, shape = str(ref.dtype), tuple(ref.shape)
    if cand.dtype != ref.dtype or cand.shape != ref.shape:
        why = (
            f"output {name!r} is {cand.dtype}{list(cand.shape)} in the candidate, "
            f"{ref.dtype}{list(ref.shape)} in the reference"
        )
        return OutputDiff(name, dtype, shape, False, False, reason=why)
    bit = ref.tobytes() == cand.tobytes() if ref.dtype != object else bool(np.all(ref == cand))
    if dtype not in TOLERANCES:
        return _compare_exact(name, ref, cand, bit)
    return _compare_float(name, ref, cand, bit, noise)


def _compare_exact(name: str, ref: np.ndarray, cand: np.ndarray, bit: bool) -> OutputDiff:
    dtype, shape = str(ref.dtype), tuple(ref.shape)
    if ref.dtype == object or ref.dtype.kind in "SU":
        bad = int(np.sum(ref != cand))
        max_abs = max_rel = float(bad > 0)
    else:
        if ref.dtype.kind == "f":  # a float type outside the table: exact, NaN equal to NaN
            bad = int(np.sum(~((ref == cand) | (np.isnan(ref) & np.isnan(cand)))))
        else:
            bad = int(np.sum(ref != cand))
        r, c = ref.astype(np.float64), cand.astype(np.float64)
        d = np.abs(r - c)
        max_abs = float(np.nanmax(d)) if d.size and bad else 0.0
        nz = (r != 0) & np.isfinite(d)
        max_rel = float(np.max(d[nz] / np.abs(r[nz]))) if bad and nz.any() else 0.0
    why = "" if bad == 0 else (
        f"output {name!r} ({dtype}, exact): {bad} of {ref.size} elements differ, "
        f"max_abs {max_abs:.6g}"
    )  # fmt: skip
    return OutputDiff(
        name, dtype, shape, bad == 0, bit, max_abs, max_rel, mismatches=bad, reason=why
    )


def _compare_float(
    name: str, ref: np.ndarray, cand: np.ndarray, bit: bool, noise: float | None
) -> OutputDiff:
    dtype, shape = str(ref.dtype), tuple(ref.shape)
    rtol, base = TOLERANCES[dtype]
    r, c = ref.astype(np.float64), cand.astype(np.float64)
    r_nan, c_nan = np.isnan(r), np.isnan(c)
    finite = np.isfinite(r) & np.isfinite(c)
    nan_bad = r_nan != c_nan
    inf_bad = (np.isinf(r) | np.isinf(c)) & (r != c) & ~(r_nan | c_nan)
    ref_finite = np.abs(r[np.isfinite(r)])
    scale = max(1.0, float(ref_finite.max()) if ref_finite.size else 1.0)
    atol = base * scale
    calibrated = noise is not None and CALIBRATION_FACTOR * noise > atol
    if calibrated:
        atol = CALIBRATION_FACTOR * float(noise)  # type: ignore[arg-type]
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are inf
        diff = np.where(finite, np.abs(r - c), 0.0)
    allowed = atol + rtol * np.abs(np.where(finite, r, 0.0))
    ratio = diff / allowed
    n_nonfinite = int(np.sum(nan_bad | inf_bad))
    n_out = int(np.sum(ratio > 1.0))
    bad = n_out + n_nonfinite
    max_abs = float(diff.max()) if diff.size else 0.0
    nz = finite & (r != 0)
    max_rel = float(np.max(diff[nz] / np.abs(r[nz]))) if nz.any() else 0.0
    err = float(ratio.max()) if ratio.size else 0.0
    why = ""
    if n_nonfinite:
        why = f"output {name!r}: NaN/Inf positions differ at {n_nonfinite} of {ref.size} elements"
    elif n_out:
        why = (
            f"output {name!r}: max_abs {max_abs:.3g} exceeds atol {atol:.3g} + rtol {rtol:g}·|ref| "
            f"at {n_out} of {ref.size} elements (error ratio {err:.3g})"
        )
    return OutputDiff(
        name, dtype, shape, bad == 0, bit, max_abs, max_rel, atol, rtol, err, bad,
        calibrated, noise, why,
    )  # fmt: skip


def merge(per_set: list[OutputDiff], names: list[str]) -> OutputDiff:
    """Worst of one output's records over feed sets; the reason names the failing feed set."""
    first_bad = next((i for i, d in enumerate(per_set) if not d.ok), None)
    worst = max(per_set, key=lambda d: d.error_ratio or 0.0)
    if first_bad is not None:
        worst = per_set[first_bad]
    out = OutputDiff(**asdict(worst))
    out.shape = tuple(out.shape)
    out.ok = first_bad is None
    out.bit_identical = all(d.bit_identical for d in per_set)
    out.max_abs = max(d.max_abs for d in per_set)
    out.max_rel = max(d.max_rel for d in per_set)
    ratios = [d.error_ratio for d in per_set if d.error_ratio is not None]
    out.error_ratio = max(ratios) if ratios else None
    out.mismatches = sum(d.mismatches for d in per_set)
    out.calibrated = any(d.calibrated for d in per_set)
    if first_bad is not None:
        out.reason = f"{per_set[first_bad].reason} on {names[first_bad]}"
    return out


def _same(a: Any, b: Any) -> bool:
    """Exact equality of outputs that are not both tensors (sequences come back as lists, maps
    as dicts), NaN equal to NaN; a tensor never equals a sequence, whatever numpy would make of
    comparing them."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        nan = a.dtype.kind in "fc"  # (isnan is undefined on strings)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b) or (a != a and b != b)  # a map's float values: NaN equals NaN
