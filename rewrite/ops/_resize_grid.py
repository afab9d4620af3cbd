"""Resize's sampling grid as ONNX Runtime 1.32's CPU kernel computes it (not an op module).

Everything here is a function of the shapes and the constant roi / scales / sizes only, so it
is computed on numbers, in float32 where ORT computes in float (tensor/upsamplebase.h,
upsample.cc, upsample.h); the data values meet it only as the indices it picks (nearest) and
the float32 weights it gives (linear, `resize.py`).

- Output shape: `sizes` as given (per `axes`; `keep_aspect_ratio_policy` not_larger /
  not_smaller: one scale, the min / max of sizes[i] / in[i] in float32, and
  O = round(scale·in); ORT matches `axes` unnormalized there, so negative axes leave Y = X);
  else O = trunc(float32(scale)·in). The scale of an axis is the given one, or
  float32(O) / float32(in) when sizes are given.
- Original coordinate of output index x (`original`): the coordinate_transformation_mode's
  formula in float32 (half_pixel_symmetric and the 1-sample tf_crop_and_resize in double,
  then float32), as ORT writes them.
- Nearest (`nearest_maps`): an axis of scale 1 maps x -> x (ORT skips the transform; rank >= 2),
  else nearest_mode's rounding of the coordinate, clamped to [0, L - 1]; -1 where
  tf_crop_and_resize puts the coordinate outside [0, L - 1] (extrapolation_value).
- Linear (`linear_axis`): in = clamp(coordinate, 0, L - 1) (scale 1: in = x), i1 = trunc(in),
  i2 = min(i1 + 1, L - 1), d1 = |in - i1|, d2 = |in - i2| in float32, both 0.5 where i1 = i2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rewrite.ops.base import OpCall, fail

F32 = np.float32
COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True)
class Plan:
    """The output shape, the float32 scale of every axis and the roi (starts, then ends)."""

    out: tuple[int, ...]
    scales: tuple[float, ...]
    roi: tuple[float, ...]


def _per_axis(call: OpCall, rank: int, values: Sequence, fill: float) -> list:
    axes = [int(a) + rank if int(a) < 0 else int(a) for a in (call.attr("axes") or [])]
    if not axes:
        if len(values) != rank:
            raise fail(call, f"{len(values)} scales/sizes for rank {rank}")
        return list(values)
    if len(values) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise fail(call, f"axes {axes} do not fit {len(values)} values and rank {rank}")
    out = [fill] * rank
    for a, v in zip(axes, values, strict=True):
        out[a] = v
    return out


def _roi(call: OpCall, rank: int, roi: np.ndarray | None) -> tuple[float, ...]:
    if roi is None or roi.size == 0:
        return (0.0,) * rank + (1.0,) * rank
    vals = [float(F32(v)) for v in roi.reshape(-1)]
    axes = call.attr("axes") or []
    if axes:
        half = len(vals) // 2
        starts = _per_axis(call, rank, vals[:half], 0.0)
        ends = _per_axis(call, rank, vals[half:], 1.0)
        return tuple(starts + ends)
    if len(vals) != 2 * rank:
        raise fail(call, f"roi of {len(vals)} values for rank {rank}")
    return tuple(vals)


def plan(
    call: OpCall,
    shape: Sequence[int],
    roi: np.ndarray | None,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
) -> Plan:
    """The output shape and per-axis scales for an X of `shape` (see the module docstring)."""
    rank = len(shape)
    if sizes is not None and sizes.size:
        out = [int(v) for v in _per_axis(call, rank, [int(v) for v in sizes.reshape(-1)], -1)]
        out = [d if o == -1 else o for o, d in zip(out, shape, strict=True)]
        sc = [F32(1) if d == 0 else F32(o) / F32(d) for o, d in zip(out, shape, strict=True)]
        policy = call.attr("keep_aspect_ratio_policy", "stretch") or "stretch"
        if policy != "stretch":
            # ORT matches the raw axes here: a negative one matches no axis (all keep scale 1)
            raw = {int(a) for a in call.attr("axes") or []}
            axes = {i for i in range(rank) if not raw or i in raw}
            if not axes:
                return Plan(tuple(shape), (1.0,) * rank, _roi(call, rank, roi))
            pick = min if policy == "not_larger" else max
            s = pick(sc[i] for i in axes)
            sc = [s if i in axes else F32(1) for i in range(rank)]
            out = [int(_round(F32(s * F32(d)))) if i in axes else d for i, d in enumerate(shape)]
    elif scales is not None and scales.size:
        if (call.attr("keep_aspect_ratio_policy", "stretch") or "stretch") != "stretch":
            raise fail(call, "scales with a keep_aspect_ratio_policy (ONNX refuses them)")
        sc = [F32(v) for v in _per_axis(call, rank, list(scales.reshape(-1)), 1.0)]
        out = [int(F32(s * F32(d))) for s, d in zip(sc, shape, strict=True)]
    else:
        raise fail(call, "one of scales and sizes must be given")
    if any(s <= 0 for s in sc):
        raise fail(call, "scales must be > 0")
    return Plan(tuple(out), tuple(float(s) for s in sc), _roi(call, rank, roi))


def _round(x: F32) -> float:
    """std::round: half away from zero (exact in float64 for a float32 value)."""
    v = float(x)
    return math.copysign(math.floor(abs(v) + 0.5), v)


def original(mode: str, x: int, scale: float, lr: int, lo: int, rs: float, re: float) -> F32:
    """The input coordinate of output index x on an axis of lengths lr (out), lo (in)."""
    xf, s, lrf, lof = F32(x), F32(scale), F32(lr), F32(lo)
    half, one = F32(0.5), F32(1)
    if mode == "asymmetric":
        return F32(xf / s)
    if mode == "pytorch_half_pixel":
        return F32((xf + half) / s - half) if lrf > 1 else F32(0)
    if mode == "tf_half_pixel_for_nn":
        return F32((xf + half) / s)
    if mode == "align_corners":
        return F32(0) if lrf == 1 else F32(xf * (lof - one) / (lrf - one))
    if mode == "tf_crop_and_resize":
        a, b = F32(rs), F32(re)
        if lrf > 1:
            return F32(a * (lof - one) + xf * (b - a) * (lof - one) / (lrf - one))
        return F32(0.5 * float(F32(a + b)) * float(lof - one))
    if mode == "half_pixel_symmetric":
        width = F32(s * lof)
        adjustment = F32(lrf / width)
        center = F32(lof / F32(2))
        offset = F32(center * F32(one - adjustment))
        return F32(float(offset) + (float(xf) + 0.5) / float(s) - 0.5)
    return F32((xf + half) / s - half)  # half_pixel


def _nearest(mode: str, x: F32) -> int:
    if mode == "round_prefer_ceil":
        return int(_round(x))
    if mode == "floor":
        return math.floor(float(x))
    if mode == "ceil":
        return math.ceil(float(x))
    if float(x) == float(F32(F32(math.trunc(float(x))) + F32(0.5))):  # round_prefer_floor
        return math.floor(float(x))
    return int(_round(x))


def nearest_maps(call: OpCall, shape: Sequence[int], p: Plan) -> list[list[int]]:
    """Per axis, the input index of every output index (-1: extrapolation_value)."""
    mode = call.attr("coordinate_transformation_mode", "half_pixel") or "half_pixel"
    rounding = call.attr("nearest_mode", "round_prefer_floor") or "round_prefer_floor"
    rank, maps = len(shape), []
    for a, (lo, lr) in enumerate(zip(shape, p.out, strict=True)):
        if p.scales[a] == 1.0 and rank > 1:
            maps.append(list(range(lr)))
            continue
        row = []
        for x in range(lr):
            c = original(mode, x, p.scales[a], lr, lo, p.roi[a], p.roi[rank + a])
            if mode == "tf_crop_and_resize" and (c < 0 or c > lo - 1):
                row.append(-1)
                continue
            row.append(min(max(_nearest(rounding, c), 0), lo - 1))
        maps.append(row)
    return maps


@dataclass(frozen=True)
class LinearAxis:
    """One axis of the bilinear grid: per output index, the two input indices, their float32
    weights (d2 weighs i1, d1 weighs i2) and whether the coordinate is outside the input."""

    i1: list[int]
    i2: list[int]
    d1: list[float]
    d2: list[float]
    outside: list[bool]


def linear_axis(call: OpCall, a: int, shape: Sequence[int], p: Plan) -> LinearAxis:
    mode = call.attr("coordinate_transformation_mode", "half_pixel") or "half_pixel"
    rank, lo, lr = len(shape), shape[a], p.out[a]
    ax = LinearAxis([], [], [], [], [])
    for x in range(lr):
        if p.scales[a] == 1.0:
            c = F32(x)
        else:
            c = original(mode, x, p.scales[a], lr, lo, p.roi[a], p.roi[rank + a])
        ax.outside.append(mode == "tf_crop_and_resize" and bool(c < 0 or c > F32(lo - 1)))
        v = F32(max(F32(0), min(c, F32(lo - 1))))
        i1 = min(int(v), lo - 1)
        i2 = min(i1 + 1, lo - 1)
        same = i1 == i2
        ax.i1.append(i1)
        ax.i2.append(i2)
        ax.d1.append(0.5 if same else float(F32(abs(F32(v - F32(i1))))))
        ax.d2.append(0.5 if same else float(F32(abs(F32(v - F32(i2))))))
    return ax
