"""Resize (opset 11+): nearest, bilinear and bicubic sampling of X on a grid given by constant
scales or sizes.

Contract: Resize(X, roi?, scales?, sizes?) -> Y in X's dtype; Y's shape and the sampling grid
come from the constant roi / scales / sizes and the attributes as ONNX Runtime 1.32's CPU
kernel computes them (`_resize_grid`: float32 coordinates, every
coordinate_transformation_mode, every nearest_mode, axes, keep_aspect_ratio_policy,
tf_crop_and_resize's extrapolation_value). Y = X when Y's shape is X's (ORT copies).

- mode nearest (any rank, any dtype): Y[o] = X[map(o)] per axis, or extrapolation_value (cast
  to X's dtype) where the map says -1: a gather, bit for bit.
- mode linear, rank 2 or rank 4 with scales[0] = scales[1] = 1 (bilinear on the last two
  axes, float X): as ORT 1.32's kernel (upsample.h, UpsampleBilinear):
  Y = ((c11·X11 + c21·X21) + c12·X12) + c22·X22 with X11 = X[y1, x1], X21 = X[y1, x2],
  X12 = X[y2, x1], X22 = X[y2, x2] and the float32 coefficients c11 = d2x·d2y, c21 = d1x·d2y,
  c12 = d2x·d1y, c22 = d1x·d1y (weights from `_resize_grid.linear_axis`), each product and
  sum one float32 operation in that order; extrapolation_value where tf_crop_and_resize
  leaves the input.
- mode cubic, rank 2 or rank 4 with scales[0] = scales[1] = 1, float32 X, any
  cubic_coeff_a and exclude_outside: ORT's ResizeBiCubic, 4 taps per row then 4 rows, in its
  float32 order (`_resize_cubic`), bit for bit.

Typed form: `(Resize mode coordinate_transformation_mode nearest_mode cubic_coeff_a
exclude_outside extrapolation_value antialias axes keep_aspect_ratio_policy X roi scales
sizes)`, the last three `(Absent)` when omitted. Left opaque (`to_egg` returns None):
antialias = 1, exclude_outside = 1 outside cubic, and Resize of opset 10 (other inputs;
encode). Linear on other ranks (trilinear, NHWC), cubic on other ranks / NHWC / non-float32
X, and linear on integer X have no semantics here: the reference and Z3 raise ShapeError,
so no proof speaks of them.

Z3 semantics: roi / scales / sizes must be numerals (a constant, or a case's given values:
`SELF_TEST_VALUES`); the data's terms are gathered (nearest) or combined with float32
constant weights (linear, cubic), in the orders above.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import onnx
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import ShapeError
from rewrite.ops import _resize_cubic as cubic
from rewrite.ops import _resize_grid as grid
from rewrite.ops._z3 import FLOAT_DTYPES, const, fp_number
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail
from rewrite.ops.registry import register

Array = np.ndarray
FLOAT, INT64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def _mode(call: OpCall) -> str:
    mode = call.attr("mode", "nearest") or "nearest"
    if mode not in ("nearest", "linear", "cubic"):
        raise fail(call, f"mode {mode!r}")
    coord = call.attr("coordinate_transformation_mode", "half_pixel") or "half_pixel"
    if coord not in grid.COORDINATE_MODES:
        raise fail(call, f"coordinate_transformation_mode {coord!r}")
    near = call.attr("nearest_mode", "round_prefer_floor") or "round_prefer_floor"
    if near not in grid.NEAREST_MODES:
        raise fail(call, f"nearest_mode {near!r}")
    return mode


def _infer(call: OpCall) -> list[TensorType]:
    """Y: X's dtype; X's rank; the dims when roi / scales / sizes are constants."""
    _mode(call)
    x = call.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if not x.is_static:
        return [TensorType(x.dtype, (None,) * len(x.shape))]
    known = [call.const(i) if call.has_input(i) else None for i in (1, 2, 3)]
    if any(call.has_input(i) and known[i - 1] is None for i in (2, 3)):
        return [TensorType(x.dtype, (None,) * len(x.shape))]
    p = grid.plan(call, x.shape, *known)  # type: ignore[arg-type]
    return [TensorType(x.dtype, p.out)]


def _numbers(a: Any, what: str) -> Array | None:
    """A numpy array, or Z3 numerals, as float64 numbers (None stays None)."""
    if a is None:
        return None
    arr = np.asarray(a, dtype=object)
    out = np.empty(arr.shape, dtype=np.float64)
    for idx in np.ndindex(*arr.shape):
        v = arr[idx]
        if isinstance(v, z3.ExprRef):
            v = z3.simplify(v)
            if z3.is_fp_value(v):
                v = fp_number(v)
            elif z3.is_bv_value(v):
                v = v.as_signed_long()
            elif z3.is_int_value(v):
                v = v.as_long()
            elif z3.is_rational_value(v):
                v = float(Fraction(v.numerator_as_long(), v.denominator_as_long()))
            else:
                raise ShapeError(f"Resize's {what} is not a constant in this case: {v}")
        out[idx] = float(v)
    return out


def _plan(call: OpCall, arrays: list[Any]) -> tuple[Array, grid.Plan]:
    x = arrays[0]
    assert x is not None
    operands = ((1, "roi"), (2, "scales"), (3, "sizes"))
    vals = [_numbers(arrays[i] if len(arrays) > i else None, w) for i, w in operands]
    mode = _mode(call)
    if call.attr("antialias", 0) or (call.attr("exclude_outside", 0) and mode != "cubic"):
        raise ShapeError("Resize: antialias and exclude_outside outside cubic are not modelled")
    return x, grid.plan(call, x.shape, *vals)


def _compute(call: OpCall, arrays: list[Any], lift: Callable[[float, Any], Any]) -> Array:
    """Y from X over the grid; `lift(w, like)` makes the float32 weight or the
    extrapolation value w an element like X's."""
    x, p = _plan(call, arrays)
    if call.attr("mode") == "cubic":
        cubic.check(x.ndim, p)  # before the copy: ORT refuses the other forms
    if p.out == x.shape:
        return x.copy()
    fill = float(call.attr("extrapolation_value", 0.0) or 0.0)
    if (call.attr("mode", "nearest") or "nearest") == "nearest":
        maps = grid.nearest_maps(call, x.shape, p)
        idx = np.ix_(*[np.maximum(m, 0) for m in maps])
        y = x[idx]
        hole = np.zeros(p.out, dtype=bool)
        for a, m in enumerate(maps):
            shape = [1] * x.ndim
            shape[a] = len(m)
            hole |= (np.asarray(m) < 0).reshape(shape)
        if hole.any():
            y = y.copy()
            y[hole] = lift(fill, x.flat[0])
        return y
    if call.attr("mode") == "cubic":
        return cubic.bicubic(call, x, p, fill, lift)
    return _bilinear(call, x, p, fill, lift)


def _bilinear(call: OpCall, x: Array, p: grid.Plan, fill: float, lift: Callable) -> Array:
    r = x.ndim
    if not (r == 2 or (r == 4 and p.scales[0] == 1.0 and p.scales[1] == 1.0)):
        raise ShapeError(f"Resize: linear on rank {r} with scales {p.scales} is not modelled")
    ys, xs = grid.linear_axis(call, r - 2, x.shape, p), grid.linear_axis(call, r - 1, x.shape, p)
    like, f32 = x.flat[0], np.float32

    def coef(dy: list[float], dx: list[float]) -> Array:
        """The float32 products dx·dy (ORT: p.dx[x] * p.dy[y]), lifted: (H_out, W_out)."""
        w = f32(np.asarray(dx, f32)[None, :] * np.asarray(dy, f32)[:, None])
        return np.array([[lift(float(v), like) for v in row] for row in w], dtype=x.dtype)

    rows1, rows2 = x[..., ys.i1, :], x[..., ys.i2, :]
    y = coef(ys.d2, xs.d2) * rows1[..., xs.i1] + coef(ys.d2, xs.d1) * rows1[..., xs.i2]
    y = y + coef(ys.d1, xs.d2) * rows2[..., xs.i1]
    y = y + coef(ys.d1, xs.d1) * rows2[..., xs.i2]
    out = np.add.outer(np.asarray(ys.outside), np.asarray(xs.outside)) > 0
    if out.any():
        y = y.copy()
        y[..., out] = lift(fill, like)
    return y


def _ref(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    mode = call.attr("mode", "nearest") or "nearest"
    if mode == "linear" and x.dtype.kind != "f":
        raise ShapeError("Resize: linear on integer X is not modelled")
    if mode == "cubic" and x.dtype.kind != "f":  # wider floats: the real-valued checks
        raise ShapeError("Resize: cubic is modelled for floating X only (ORT's: float32)")

    def lift(w: float, like: Any) -> Any:
        return np.asarray(w).astype(x.dtype)

    return [_compute(call, arrays, lift)]


def _z3(call: OpCall, arrays: list[Array | None]) -> list[Array]:
    x = arrays[0]
    assert x is not None
    mode = call.attr("mode", "nearest") or "nearest"
    if mode == "linear" and call.input(0).dtype not in FLOAT_DTYPES:
        raise fail(call, "linear is modelled for floating X only")
    if mode == "cubic" and call.input(0).dtype != FLOAT:
        raise fail(call, "cubic is modelled for float32 X only (ORT's kernel)")
    dtype = call.input(0).dtype

    def lift(w: float, like: Any) -> Any:
        if z3.is_fp(like) or not z3.is_bv(like):
            return const(w, like)
        return const(int(np.asarray(w).astype(onnx.helper.tensor_dtype_to_np_dtype(dtype))), like)

    return [_compute(call, [np.asarray(x, dtype=object), *arrays[1:]], lift)]


def _to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """Nearest, linear and cubic; antialias (and exclude_outside outside cubic) stay opaque."""
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic") or attrs.get("antialias", 0):
        return None
    if attrs.get("exclude_outside", 0) and mode != "cubic":
        return None
    return attrs


def _from_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes at their defaults are left out (antialias, axes and
    keep_aspect_ratio_policy exist only from opset 18)."""
    return {k: v for k, v in attrs.items() if v not in (DEFAULTS.get(k), [])}


def _flops(call: OpCall, outputs: list[TensorType]) -> float:
    """Per output element: linear 6 (two lerps of 2 products and a sum), cubic 40 (four
    4-tap rows of a product and a sum each, then 4 products and sums; ORT's cache of the
    rows makes it less); nearest none."""
    n = outputs[0].numel if outputs else None
    per = {"linear": 6.0, "cubic": 40.0}.get(call.attr("mode", "nearest") or "nearest", 0.0)
    return per * n if n else 0.0


ATTRS = (
    ("mode", "String", "nearest"),
    ("coordinate_transformation_mode", "String", "half_pixel"),
    ("nearest_mode", "String", "round_prefer_floor"),
    ("cubic_coeff_a", "f64", -0.75),
    ("exclude_outside", "i64", 0),
    ("extrapolation_value", "f64", 0.0),
    ("antialias", "i64", 0),
    ("axes", "VecI", ()),
    ("keep_aspect_ratio_policy", "String", "stretch"),
)
DEFAULTS = {name: default for name, _, default in ATTRS}
register(
    OpSpec(
        "Resize",
        _infer,
        _ref,
        _flops,
        egg=EggSig(
            attrs=ATTRS,
            n_inputs=4,
            optional=3,
            to_egg=_to_egg,
            from_egg=_from_egg,
        ),
        z3=_z3,
        input_dtypes=(None, (FLOAT,), (FLOAT,), (INT64,)),
        doc="Resize(X, roi?, scales?, sizes?): nearest, bilinear or bicubic sampling (ORT's grid).",
    )
)


def _f32(*values: float) -> Array:
    return np.array(values, dtype=np.float32)


SELF_TEST_VALUES: dict[str, list[tuple[dict[str, Any], tuple[int, ...] | None, list[Any]]]] = {
    "Resize": [
        ({}, (1, 2, 3, 3), [None, _f32(1, 1, 2, 2)]),
        ({"mode": "linear"}, (1, 1, 3, 4), [None, _f32(1, 1, 1.5, 0.75)]),
        ({"mode": "cubic"}, (1, 1, 3, 4), [None, _f32(1, 1, 1.5, 0.75)]),
        (
            {"mode": "cubic", "exclude_outside": 1},
            (3, 2),
            [None, None, np.array([2, 5], dtype=np.int64)],
        ),
        (
            {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
            (2, 3),
            [None, None, np.array([4, 5], dtype=np.int64)],
        ),
        (
            {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "ceil"},
            (4, 5),
            [None, _f32(0.6, 1.7)],
        ),
    ],
}
"""The self-test's Resize cases (its output shape depends on scales / sizes values):
attributes, X's shape, then roi, scales, sizes (None: omitted)."""
