"""Upsample (opsets 7-9) and Resize-10 as ONNX Runtime 1.32 runs them, stated as the Resize of
opset 11+ they equal (typed in `resize.py`); not ops of their own here.

ORT runs all three with one kernel (tensor/upsample.cc, upsamplebase.h `UpsampleBase`). Below
opset 11 it fixes coordinate_transformation_mode to asymmetric (x_in = x_out / scale, float32)
and the nearest rounding to SIMPLE: trunc(x_in) on an axis of scale >= 1, ceil(x_in) on one
of scale < 1 (x_in >= 0 there, so trunc = floor), clamped into the input; an axis of scale 1
maps x -> x; the 2x fast path (rank 4, scales 1, 1, 2, 2) gives the same indices. Y's shape is
trunc(scale·in) per axis, as Resize's. Linear is the same bilinear kernel on the asymmetric
grid. Upsample requires every scale >= 1 (ORT refuses others), so

- Upsample(X, scales, mode) = Resize(X, , scales, mode, coordinate_transformation_mode =
  asymmetric, nearest_mode = floor), whether scales is an attribute (opset 7-8) or an input
  (opset 9), constant or computed;
- Resize-10(X, scales, mode) = the same with nearest_mode ceil when every scale is <= 1; a
  nearest Resize-10 that both up- and downsamples, or whose scales are computed at run time,
  has no Resize-11 form (`resize_attributes` returns None).

onnx's version converter (which `onnx_io.load` runs on models below opset 13) writes these
nodes as Resize with mode only, i.e. half_pixel and round_prefer_floor: another computation
(linear always differs, nearest at non-integer scales). `resize_attributes` gives the
attributes that keep the node's meaning; tests/ops/test_typed_upsample.py checks them in ORT
bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def resize_attributes(
    op_type: str, opset: int, attrs: dict[str, Any], scales: Sequence[float] | None
) -> dict[str, Any] | None:
    """The attributes of the opset-11+ Resize that computes what this Upsample (opset 7-9) or
    Resize-10 node computes in ORT (module docstring), or None where no Resize-11 does.
    `scales`: the node's constant scales (attribute or input), None when computed."""
    if not ((op_type == "Upsample" and 7 <= opset <= 9) or (op_type, opset) == ("Resize", 10)):
        raise ValueError(f"{op_type} of opset {opset} is not an opset < 11 resize")
    mode = attrs.get("mode", "nearest")
    if isinstance(mode, bytes):
        mode = mode.decode()
    out: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": "asymmetric"}
    if mode != "nearest":
        return out
    if op_type == "Upsample":
        return {**out, "nearest_mode": "floor"}
    if scales is None:
        return None
    up, down = any(s > 1 for s in scales), any(s < 1 for s in scales)
    if up and down:
        return None
    return {**out, "nearest_mode": "ceil" if down else "floor"}
