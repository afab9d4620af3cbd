"""Pad (opset 13-21; attribute form before opset 11 also read): grow or crop each axis.

Pad(data, pads, constant_value?, axes?, mode="constant"): `pads` is int64
[b_0, ..., b_{k-1}, e_0, ..., e_{k-1}] for the k padded axes (`axes`, opset 18; all axes by
default); axis a grows by b before and e after, a negative amount crops. `mode` is
"constant" (fill with constant_value, default 0), "reflect" (mirror without the edge),
"edge" (repeat the edge) or "wrap" (opset 19, periodic). Before opset 11 pads and the fill
(`value`, float) are attributes. The output has data's dtype; ORT copies (bytes read +
written), no FLOPs. constant_value, when given, must hold one element (ORT refuses others).

Typed form (no `axes` input): `(Pad mode pads data constant_value)` with `pads` the constant
int64 input as a vector and constant_value `(Absent)` when omitted (fill 0). A Pad with `axes`
stays opaque. The Z3 semantics move the terms as the reference moves numbers (`_z3_pad`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewrite.ops._dims import as_ints, norm_axes
from rewrite.ops._z3 import const
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail, no_flops
from rewrite.ops.conv import pad_objects
from rewrite.ops.registry import register

MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def pad_args(call: OpCall, rank: int) -> tuple[list[int] | None, list[int] | None]:
    """(per-axis (begin, end) pads flattened as [b..., e...] over all axes, or None; axes)."""
    axes: list[int] | None
    if call.opset < 11 or not call.has_input(1):
        pads, axes = as_ints(call.attr("pads")), list(range(rank))
    else:
        pads = as_ints(call.const(1))
        axes = as_ints(call.const(3)) if call.has_input(3) else list(range(rank))
    if axes is None:
        return pads, None
    axes = norm_axes(call, axes, rank)
    if pads is None:
        return None, axes
    k = len(axes)
    if len(pads) != 2 * k:
        raise fail(call, f"pads has {len(pads)} values for {k} axes (needs {2 * k})")
    full = [0] * (2 * rank)
    for j, a in enumerate(axes):
        full[a], full[rank + a] = pads[j], pads[k + j]
    return full, axes


def padded_dim(call: OpCall, d: Dim, begin: int, end: int) -> Dim:
    if isinstance(d, int):
        n = d + begin + end
        if n < 0:
            raise fail(call, f"pads {begin}, {end} crop more than the dim {d}")
        return n
    return d if begin + end == 0 else None


def pad_dims(call: OpCall, shape: Shape | None) -> Shape | None:
    if shape is None:
        return None
    rank = len(shape)
    pads, axes = pad_args(call, rank)
    if axes is None:
        return (None,) * rank
    if pads is None:
        return tuple(None if i in axes else d for i, d in enumerate(shape))
    return tuple(padded_dim(call, d, pads[i], pads[rank + i]) for i, d in enumerate(shape))


def infer_pad(call: OpCall) -> list[TensorType]:
    mode = call.attr("mode", "constant")
    if mode not in MODES:
        raise fail(call, f"mode {mode!r} is not one of {sorted(MODES)}")
    x = call.input(0)
    if call.opset >= 11 and call.has_input(2) and call.input(2).numel not in (None, 1):
        raise fail(call, "constant_value must hold one element")
    return [TensorType(x.dtype, pad_dims(call, x.shape))]


def _widths(call: OpCall, arrays: list[Any]) -> tuple[tuple[slice, ...], list[tuple[int, int]]]:
    """The crop (negative pads) and the (begin, end) growth per axis of a Pad."""
    x = arrays[0]
    call = OpCall(call.op_type, call.inputs, [None, *arrays[1:]], call.attrs, 1, call.opset)
    rank = x.ndim
    pads, _ = pad_args(call, rank)
    assert pads is not None
    crop = tuple(slice(max(-pads[i], 0), x.shape[i] - max(-pads[rank + i], 0)) for i in range(rank))
    return crop, [(max(pads[i], 0), max(pads[rank + i], 0)) for i in range(rank)]


def ref_pad(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    crop, widths = _widths(call, arrays)
    x = x[crop]
    mode = MODES[call.attr("mode", "constant")]
    if mode != "constant":
        return [np.pad(x, widths, mode=mode)]  # type: ignore[call-overload]
    fill = arrays[2] if len(arrays) > 2 and arrays[2] is not None else None
    value = fill.reshape(-1)[0] if fill is not None and fill.size else call.attr("value", 0)
    return [np.pad(x, widths, mode="constant", constant_values=np.asarray(value, x.dtype))]


def _z3_pad(call: OpCall, arrays: list[Any]) -> list[np.ndarray]:
    """Pad over Z3 terms: crop, then grow each axis with constant_value (default 0) or the
    reflected / edge / wrapped terms, exactly as the reference moves numbers."""
    x = arrays[0]
    assert x is not None
    crop, widths = _widths(call, arrays)
    x = x[crop]
    mode = MODES[call.attr("mode", "constant")]
    if mode != "constant":
        return [np.pad(x, widths, mode=mode)]  # type: ignore[call-overload]
    fill = arrays[2] if len(arrays) > 2 and arrays[2] is not None else None
    if fill is not None:
        value = fill.reshape(-1)[0]
    else:
        like = arrays[0].reshape(-1)[0] if arrays[0].size else None
        value = 0 if like is None else const(0, like)
    return [pad_objects(x, widths, value)]


def _pad_attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """pads: none, one on every side, mixed growth, a crop of one at the end of the last
    axis, and (rank >= 3) growth of the axes after the first two only, different per axis
    and side (the padding a Conv or pool could take over); every mode (wrap exists from
    opset 19)."""
    if name == "mode":
        return list(MODES)
    if name != "pads" or not inputs or inputs[0].shape is None:
        return None
    r = len(inputs[0].shape)
    if r == 0:
        return [()]
    mixed = (1,) + (0,) * (r - 1) + (0,) * (r - 1) + (2,)
    crop = (0,) * (2 * r - 1) + (-1,)
    out = [(0,) * 2 * r, (1,) * 2 * r, mixed, crop]
    if r >= 3:
        begins = tuple((i + 1) % 2 for i in range(r - 2))
        ends = tuple(i % 2 + 1 for i in range(r - 2))
        out.append((0, 0, *begins, 0, 0, *ends))
    return out


PAD = register(
    OpSpec(
        name="Pad",
        infer=infer_pad,
        reference=ref_pad,
        flops=no_flops,
        egg=EggSig(
            attrs=(("mode", "String", "constant"),), n_inputs=2, const_inputs=(1,), optional=1
        ),
        z3=_z3_pad,
        attr_values=_pad_attr_values,
        doc="Pad(data, pads, constant_value, axes, mode): grow or crop each axis.",
    )
)
