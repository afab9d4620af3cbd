"""Valid values for inputs that an op reads as a shape, size, axis, divisor or threshold.

A random draw for such an input makes a model that is itself valid fail in ONNX Runtime (a
Reshape to a shape of the wrong size, an integer division by zero). `recipe_for(uses, name,
shape, dtype)` asks the ops that read the input (`Uses.value_uses`: directly, or through
Identity and Cast) what a valid value is, and returns the first answer as a `Recipe`:

- Reshape (shape): the declared output dims (one unknown dim at most, written -1), else the
  data's dims, leading ones merged or 1s prepended to the input's length;
- Expand (shape): the declared output dims, else all ones;
- Resize (scales, sizes), Upsample (scales): output / input dims at `axes` where both are
  known, else the input's dims (scale 1);
- MaxUnpool (output_shape), CenterCropPad (shape): the declared output dims (at `axes`);
- AffineGrid (size): [N, 1, *spatial] from the declared output, else N from theta;
- Col2Im (image_shape, block_shape): the output's spatial dims, and the block that gives the
  input's column count;
- Slice (axes), Unsqueeze (axes), Reduce* (axes): 0, 1, ..., k-1 (within the data's rank);
- Squeeze (axes): the data's axes of size 1; Slice (steps): ones; CumSum, CumProd (axis): 0;
- Split (split), SplitToSequence (split): the declared outputs' sizes, else a split of the
  axis into ones and the rest;
- integer Div, Mod (divisor), Range (delta), STFT (frame_step): uniform in [1, 4);
- STFT (frame_length): the window's length, else min(signal length, 4);
- NonMaxSuppression (iou_threshold): uniform in [0, 1).

A role whose value does not have exactly as many elements as the input's shape is not used,
and none is used for a value the model's dims do not determine: the caller's defaults apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import onnx

from rewrite.onnx_io.input_uses import Uses


@dataclass(frozen=True)
class Recipe:
    """How one input is filled: `fill` (randint in [low, high), ones, zeros, randn, arange,
    coin, unit: uniform in [0, 1), const: the flat `value`)."""

    fill: str
    low: int = 0
    high: int = 2
    value: tuple[float, ...] | None = None


Shape = tuple[int, ...]
Maker = Callable[[Uses, onnx.NodeProto, Shape, np.dtype], "Recipe | None"]


def recipe_for(uses: Uses, name: str, shape: Shape, dtype: np.dtype) -> Recipe | None:
    """The recipe of the first op that reads `name` with a role (module docstring), or None."""
    try:
        for node, i in uses.value_uses(name):
            maker = ROLES.get((node.op_type, i))
            if maker is None and node.op_type.startswith("Reduce") and i == 1:
                maker = _first_axes
            r = maker(uses, node, shape, dtype) if maker is not None else None
            if r is not None and (r.value is None or len(r.value) == math.prod(shape)):
                return r
    except Exception:  # a malformed graph or attribute: the defaults apply
        return None
    return None


def _const(values: list[int] | list[float]) -> Recipe:
    return Recipe("const", value=tuple(float(v) for v in values))


def _attr(node: onnx.NodeProto, name: str, default: object) -> object:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _axes(node: onnx.NodeProto, rank: int) -> list[int]:
    axes = _attr(node, "axes", None)
    return list(range(rank)) if axes is None else [int(a) % rank for a in axes]  # type: ignore[attr-defined]


def _k(shape: Shape) -> int:
    return math.prod(shape)


def _reshape_shape(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    k, out = _k(shape), u.dims(node.output[0])
    allowzero = _attr(node, "allowzero", 0)
    fits = out is not None and len(out) == k and (allowzero or 0 not in out)
    if out is not None and fits and sum(d is None for d in out) <= 1:
        return _const([-1 if d is None else d for d in out])
    data = u.static_dims(node.input[0])
    if data is None:
        return None
    r = len(data)
    if k >= r:
        return _const([1] * (k - r) + data)
    if k == 0:
        return _const([]) if math.prod(data) == 1 else None
    return _const([math.prod(data[: r - k + 1]), *data[r - k + 1 :]])


def _expand_shape(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    out = u.static_dims(node.output[0])
    return _const(out if out is not None and len(out) == _k(shape) else [1] * _k(shape))


def _sizes(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    """Resize's sizes, CenterCropPad's shape: the output's dims at `axes`, else the input's."""
    x = u.static_dims(node.input[0])
    if x is None:
        return None
    out = u.static_dims(node.output[0])
    src = out if out is not None and len(out) == len(x) else x
    return _const([src[a] for a in _axes(node, len(x))])


def _scales(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    x = u.static_dims(node.input[0])
    if x is None:
        return None
    out = u.static_dims(node.output[0])
    axes = _axes(node, len(x))
    if out is not None and len(out) == len(x) and all(x[a] for a in axes):
        return _const([out[a] / x[a] for a in axes])
    return _const([1.0] * len(axes))


def _output_dims(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    out = u.static_dims(node.output[0])
    return None if out is None else _const(out)


def _affine_size(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    k, out = _k(shape), u.static_dims(node.output[0])
    if out is not None and len(out) == k:
        return _const([out[0], 1, *out[1:-1]])
    theta = u.static_dims(node.input[0])
    return None if theta is None else _const([theta[0], 1] + [2] * (k - 2))


def _col2im(u: Uses, node: onnx.NodeProto) -> tuple[list[int], list[int]] | None:
    """(image_shape, block_shape) consistent with the input's and the output's dims."""
    x, out = u.static_dims(node.input[0]), u.static_dims(node.output[0])
    if x is None or out is None or len(x) != 3 or len(out) < 3 or not out[1] or x[1] % out[1]:
        return None
    image, n = out[2:], len(out) - 2
    dil = list(_attr(node, "dilations", [1] * n))  # type: ignore[call-overload]
    pads = list(_attr(node, "pads", [0] * 2 * n))  # type: ignore[call-overload]
    strides = list(_attr(node, "strides", [1] * n))  # type: ignore[call-overload]
    for block in _factorizations(x[1] // out[1], n):
        span = [image[i] + pads[i] + pads[i + n] - dil[i] * (block[i] - 1) - 1 for i in range(n)]
        if (
            all(s >= 0 for s in span)
            and math.prod(s // t + 1 for s, t in zip(span, strides, strict=True)) == x[2]
        ):
            return image, block
    return None


def _factorizations(target: int, n: int) -> Iterator[list[int]]:
    """Tuples of n positive ints whose product is `target`."""
    if n == 1:
        yield [target]
        return
    for d in range(1, target + 1):
        if target % d == 0:
            for rest in _factorizations(target // d, n - 1):
                yield [d, *rest]


def _col2im_image(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    found = _col2im(u, node)
    return None if found is None else _const(found[0])


def _col2im_block(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    found = _col2im(u, node)
    return None if found is None else _const(found[1])


def _first_axes(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    """0..k-1, when the data has at least k dims (Unsqueeze: any k)."""
    data = u.dims(node.input[0])
    k = _k(shape)
    if node.op_type != "Unsqueeze" and (data is None or len(data) < k):
        return None
    return _const(list(range(k)))


def _squeeze_axes(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    data = u.dims(node.input[0])
    ones = [i for i, d in enumerate(data or []) if d == 1]
    return _const(ones[: _k(shape)]) if len(ones) >= _k(shape) else None


def _ones(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    return _const([1] * _k(shape))


def _zeros(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    return _const([0] * _k(shape))


def _split(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    data = u.static_dims(node.input[0])
    if data is None:
        return None
    axis = int(_attr(node, "axis", 0)) % len(data)  # type: ignore[call-overload]
    k, d = _k(shape), data[axis]
    outs = [u.static_dims(o) for o in node.output]
    if len(outs) == k and all(o is not None and len(o) == len(data) for o in outs):
        return _const([o[axis] for o in outs if o is not None])
    if shape == ():  # SplitToSequence: one chunk size
        return _const([1]) if d >= 1 else None
    return _const([1] * (k - 1) + [d - (k - 1)]) if d >= k - 1 else None


def _nonzero(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    return Recipe("randint", 1, 4) if dtype.kind in "iu" else None


def _unit(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    return Recipe("unit") if dtype.kind == "f" else None


def _frame_length(u: Uses, node: onnx.NodeProto, shape: Shape, dtype: np.dtype) -> Recipe | None:
    window = u.static_dims(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if window is not None and len(window) == 1:
        return _const(window)
    signal = u.static_dims(node.input[0])
    return None if signal is None or len(signal) < 2 else _const([min(signal[1], 4)])


ROLES: dict[tuple[str, int], Maker] = {
    ("Reshape", 1): _reshape_shape,
    ("Expand", 1): _expand_shape,
    ("Resize", 2): _scales,
    ("Resize", 3): _sizes,
    ("Upsample", 1): _scales,
    ("CenterCropPad", 1): _sizes,
    ("MaxUnpool", 2): _output_dims,
    ("AffineGrid", 1): _affine_size,
    ("Col2Im", 1): _col2im_image,
    ("Col2Im", 2): _col2im_block,
    ("Slice", 3): _first_axes,
    ("Slice", 4): _ones,
    ("Unsqueeze", 1): _first_axes,
    ("Squeeze", 1): _squeeze_axes,
    ("CumSum", 1): _zeros,
    ("CumProd", 1): _zeros,
    ("Split", 1): _split,
    ("SplitToSequence", 1): _split,
    ("Div", 1): _nonzero,
    ("Mod", 1): _nonzero,
    ("Range", 2): _nonzero,
    ("STFT", 1): _nonzero,
    ("STFT", 3): _frame_length,
    ("NonMaxSuppression", 3): _unit,
}
"""(op, input index) -> how a valid value is made (module docstring); Reduce* ops' axes
(input 1) use `_first_axes` too."""
