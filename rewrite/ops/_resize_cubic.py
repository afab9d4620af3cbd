"""Resize mode cubic as ONNX Runtime 1.32's CPU kernel computes it (upsample.cc,
ResizeBiCubic; not an op module).

Bicubic on the last two axes: X of rank 2, or rank 4 with scales[0] = scales[1] = 1 (NCHW),
float32 only (ORT reads the data as float). Every step below is one float32 operation, in
this order:

- Coordinates (`_resize_grid.original`, the index itself on an axis of scale 1); an output
  row (column) whose coordinate c is outside [0, L - 1] under tf_crop_and_resize is
  extrapolation_value. Else start = floor(c), s = c - start.
- Coefficients of s (GetCubicCoeffs, a = cubic_coeff_a, float32):
  c0 = ((a·(s+1) - 5a)·(s+1) + 8a)·(s+1) - 4a, c1 = ((a+2)·s - (a+3))·s·s + 1,
  c2 = ((a+2)·(1-s) - (a+3))·(1-s)·(1-s) + 1, c3 = ((a·(2-s) - 5a)·(2-s) + 8a)·(2-s) - 4a.
  exclude_outside: a tap start - 1 + i outside [0, L) gets 0, and sum = ((((0 + c0) + c1) +
  c2) + c3) over the kept ones; else sum = 1.
- One row's 1-D value at column start_x (taps clamped into X): r = 0, then
  r = r + (cx_i / sum_x)·X[row, clamp(start_x - 1 + i)] for i = 0..3.
- The output: v = 0, then v = v + (r_i·cy_i) / sum_y for the rows start_y - 1 + i (clamped),
  i = 0..3 (the division by sum_y = 1 is the identity in IEEE and is left out).
- ORT caches the 1-D values per channel under (s_x, row·W + start_x - 1) with the row
  unclamped: a later lookup whose key collides with an earlier one (start_x = -1 at row y
  and start_x = W - 1 at row y - 1, the same s_x) reuses the earlier value. `sources`
  replays that cache (it depends on the grid only). No coordinate mode's columns span the
  W it takes to collide (tf_crop_and_resize extrapolates outside [0, W - 1]; the others
  span (W_out - 1) / scale < W), so on ORT's grids the replay is the identity; it is kept
  so the order of evaluation is ORT's by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewrite.errors import ShapeError
from rewrite.ops import _resize_grid as grid
from rewrite.ops.base import OpCall

F32 = np.float32
Array = np.ndarray


@dataclass(frozen=True)
class CubicAxis:
    """One axis of the bicubic grid: per output index its float32 coordinate's floor and
    fraction, and whether tf_crop_and_resize puts it outside the input."""

    start: list[int]
    s: list[float]
    outside: list[bool]


def cubic_axis(call: OpCall, a: int, shape: Sequence[int], p: grid.Plan) -> CubicAxis:
    mode = call.attr("coordinate_transformation_mode", "half_pixel") or "half_pixel"
    rank, lo, lr = len(shape), shape[a], p.out[a]
    ax = CubicAxis([], [], [])
    for x in range(lr):
        if p.scales[a] == 1.0:
            c = F32(x)
        else:
            c = grid.original(mode, x, p.scales[a], lr, lo, p.roi[a], p.roi[rank + a])
        ax.outside.append(mode == "tf_crop_and_resize" and bool(c < 0 or c > F32(lo - 1)))
        start = int(np.floor(c)) if np.isfinite(c) else 0
        ax.start.append(start)
        ax.s.append(float(F32(c - F32(start))))
    return ax


def coefficients(s: float, a: float) -> tuple[F32, F32, F32, F32]:
    """GetCubicCoeffs in float32, in ORT's order."""
    s, a = F32(abs(F32(s))), F32(a)
    one, two = F32(1), F32(2)
    five_a, eight_a, four_a = F32(F32(5) * a), F32(F32(8) * a), F32(F32(4) * a)
    a2, a3 = F32(a + two), F32(a + F32(3))

    def outer(t: F32) -> F32:
        return F32(F32(F32(F32(F32(a * t) - five_a) * t) + eight_a) * t - four_a)

    def inner(t: F32) -> F32:
        return F32(F32(F32(F32(F32(a2 * t) - a3) * t) * t) + one)

    return outer(F32(s + one)), inner(s), inner(F32(one - s)), outer(F32(two - s))


def weights(s: float, start: int, length: int, a: float, exclude: bool) -> tuple[list[F32], F32]:
    """The four tap coefficients (0 for taps outside when exclude_outside) and their sum."""
    c = list(coefficients(s, a))
    if not exclude:
        return c, F32(1)
    total = F32(0)
    for i in range(4):
        if not 0 <= start - 1 + i < length:
            c[i] = F32(0)
        total = F32(total + c[i])
    return c, total


def sources(ys: CubicAxis, xs: CubicAxis, width: int) -> tuple[Array, Array]:
    """Per output (y, x) and y-tap i, the (row, start_x) whose 1-D value ORT uses: its own,
    or the one that first filled the colliding cache entry. Shapes (H_out, W_out, 4)."""
    h, w = len(ys.start), len(xs.start)
    rows, starts = np.zeros((h, w, 4), np.int64), np.zeros((h, w, 4), np.int64)
    cache: dict[tuple[float, int], tuple[int, int]] = {}
    for y in range(h):
        for x in range(w):
            if ys.outside[y] or xs.outside[x]:
                continue
            for i in range(4):
                row, sx = ys.start[y] - 1 + i, xs.start[x]
                key = (xs.s[x], row * width + sx - 1)
                rows[y, x, i], starts[y, x, i] = cache.setdefault(key, (row, sx))
    return rows, starts


def check(rank: int, p: grid.Plan) -> None:
    """ORT's ScalesValidation for cubic without antialias, as far as it is modelled: rank 2,
    or rank 4 with scales[0] = scales[1] = 1 (its NHWC form is not modelled)."""
    if not (rank == 2 or (rank == 4 and p.scales[0] == 1.0 and p.scales[1] == 1.0)):
        raise ShapeError(f"Resize: cubic on rank {rank} with scales {p.scales} is not modelled")


def bicubic(
    call: OpCall, x: Array, p: grid.Plan, fill: float, lift: Callable[[float, Any], Any]
) -> Array:
    """Y of Resize mode cubic (see the module docstring); `lift(w, like)` makes the float32
    constant w an element like X's."""
    check(x.ndim, p)
    r = x.ndim
    a = float(F32(call.attr("cubic_coeff_a", -0.75)))
    exclude = bool(call.attr("exclude_outside", 0))
    (hi, wi), (ho, wo) = x.shape[-2:], p.out[-2:]
    ys, xs = cubic_axis(call, r - 2, x.shape, p), cubic_axis(call, r - 1, x.shape, p)
    rows, starts = sources(ys, xs, wi)
    wx = np.zeros((ho, wo, 4, 4), np.float32)
    seen: dict[tuple[float, int], list[F32]] = {}
    for yy, xx, i in np.ndindex(ho, wo, 4):
        key = (xs.s[xx], int(starts[yy, xx, i]))
        if key not in seen:
            c, total = weights(key[0], key[1], wi, a, exclude)
            seen[key] = [F32(v / total) for v in c]
        wx[yy, xx, i] = seen[key]
    cy = np.zeros((ho, 4), np.float32)
    sum_y = np.ones(ho, np.float32)
    for yy in range(ho):
        c, sum_y[yy] = weights(ys.s[yy], ys.start[yy], hi, a, exclude)
        cy[yy] = c
    like = x.flat[0]
    with np.errstate(over="ignore", invalid="ignore"):
        out = _combine(x, rows, starts, wx, cy, sum_y, lift)
    hole = np.add.outer(np.asarray(ys.outside), np.asarray(xs.outside)) > 0
    if hole.any():
        out = np.array(out, copy=True)
        out[..., hole] = lift(fill, like)
    return out


def _combine(
    x: Array,
    rows: Array,
    starts: Array,
    wx: Array,
    cy: Array,
    sum_y: Array,
    lift: Callable[[float, Any], Any],
) -> Array:
    """The 4x4 sum in ORT's order, on the taps `sources` chose (clamped into X)."""
    hi, wi = x.shape[-2:]
    ho, wo = wx.shape[:2]
    zero = _lifted(np.zeros((ho, wo), np.float32), x, lift)
    out = None
    for i in range(4):
        rix = np.clip(rows[..., i], 0, hi - 1)
        part: Any = zero
        for j in range(4):
            cix = np.clip(starts[..., i] - 1 + j, 0, wi - 1)
            part = part + _lifted(wx[..., i, j], x, lift) * x[..., rix, cix]
        term = part * _lifted(np.repeat(cy[:, i : i + 1], wo, axis=1), x, lift)
        if not (sum_y == 1).all():
            term = term / _lifted(np.repeat(sum_y[:, None], wo, axis=1), x, lift)
        out = zero + term if out is None else out + term
    assert out is not None
    return np.asarray(out)


def _lifted(w: Array, x: Array, lift: Callable[[float, Any], Any]) -> Array:
    """float32 constants `w` as elements like X's (an object array of terms for Z3)."""
    if x.dtype != object:
        return w.astype(x.dtype)
    like = x.flat[0]
    cells = np.empty(w.shape, dtype=object)
    for idx in np.ndindex(*w.shape):
        cells[idx] = lift(float(w[idx]), like)
    return cells
