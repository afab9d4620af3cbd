"""Slice (opset 13-21; attribute form before opset 10 also read): strided windows per axis.

Slice(data, starts, ends, axes?, steps?): for each listed axis, Python-style
`data[start:end:step]` with ONNX clamping (negative start/end count from the end; starts clamp
to [0, d] for step > 0 and [0, d-1] for step < 0, ends to [0, d] and [-1, d-1]); step 0 is an
error, axes default to 0..len(starts)-1 and may not repeat. Other axes are kept whole. The
output has data's dtype; ORT copies the window (bytes read + written), no FLOPs.

An end of INT32_MAX or INT64_MAX means "to the end" in the step's direction (as in ORT). On a
symbolic dim only whole-axis slices (0 to >= 2**31-1 with step 1, or -1 to INT_MIN/INT_MAX with
step -1) keep the name.
"""

from __future__ import annotations

import numpy as np

from rewrite.ops._dims import as_ints, norm_axes, vec_len
from rewrite.ops.base import Dim, EggSig, OpCall, OpSpec, Shape, TensorType, fail, no_flops
from rewrite.ops.registry import register

BIG = 2**31 - 1  # ends at or past this mean "to the end" in exporters' output
TO_END = (2**31 - 1, 2**63 - 1)  # ORT reads these ends as "to the end in the step's direction"


def slice_args(call: OpCall) -> tuple[list[int] | None, ...] | None:
    """(starts, ends, axes, steps) as constants; None where an input is not constant.

    Returns None when the number of sliced axes cannot be known.
    """
    if call.opset < 10 or not call.has_input(1):
        starts = as_ints(call.attr("starts"))
        ends = as_ints(call.attr("ends"))
        axes = as_ints(call.attr("axes"))
        steps = None
        n = None if starts is None else len(starts)
    else:
        starts, ends = as_ints(call.const(1)), as_ints(call.const(2))
        axes = as_ints(call.const(3)) if call.has_input(3) else None
        steps = as_ints(call.const(4)) if call.has_input(4) else None
        n = vec_len(call.input(1))
        if starts is not None:
            n = len(starts)
        if call.has_input(3) and axes is None:
            return None if n is None else (starts, ends, None, steps)
    if n is None:
        return None
    axes = axes if axes is not None else list(range(n))
    steps = steps if steps is not None else ([1] * n if not call.has_input(4) else None)
    for name, v in (("ends", ends), ("axes", axes), ("steps", steps)):
        if v is not None and len(v) != n:
            raise fail(call, f"{name} has {len(v)} entries, starts has {n}")
    if steps is not None and 0 in steps:
        raise fail(call, "a step is 0")
    return starts, ends, axes, steps


def slice_range(d: int, start: int, end: int, step: int) -> range:
    """The indices ORT takes from a dim of size d (Python clamps negative steps differently)."""
    if d == 0:
        return range(0)
    last = d - 1 if step < 0 else d
    start = min(max(start + d if start < 0 else start, 0), last)
    if end in TO_END:
        end = -1 if step < 0 else d
    else:
        end = min(max(end + d if end < 0 else end, -1 if step < 0 else 0), last)
    return range(start, end, step)


def sliced_dim(d: Dim, start: int | None, end: int | None, step: int | None) -> Dim:
    if start is None or end is None or step is None:
        return None
    if isinstance(d, int):
        return len(slice_range(d, start, end, step))
    whole = (step == 1 and start == 0 and end >= BIG) or (
        step == -1 and start == -1 and (end <= -BIG or end in TO_END)
    )
    if d is not None and whole:
        return d
    return None


def slice_dims(call: OpCall, shape: Shape | None) -> Shape | None:
    if shape is None:
        return None
    args = slice_args(call)
    if args is None or args[2] is None:
        return (None,) * len(shape)
    starts, ends, axes, steps = args
    assert axes is not None
    out = list(shape)
    for j, a in enumerate(norm_axes(call, axes, len(shape))):
        out[a] = sliced_dim(
            shape[a],
            None if starts is None else starts[j],
            None if ends is None else ends[j],
            None if steps is None else steps[j],
        )
    return tuple(out)


def infer_slice(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [TensorType(x.dtype, slice_dims(call, x.shape))]


def ref_slice(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    consts = [None, *arrays[1:]]
    call = OpCall(call.op_type, call.inputs, consts, call.attrs, call.n_outputs, call.opset)
    args = slice_args(call)
    assert args is not None
    starts, ends, axes, steps = args
    assert starts is not None and ends is not None and axes is not None and steps is not None
    index = [slice(None)] * x.ndim
    for j, a in enumerate(norm_axes(call, axes, x.ndim)):
        r = slice_range(x.shape[a], starts[j], ends[j], steps[j])
        index[a] = slice(r.start, r.stop if r.stop >= 0 else None, r.step)
    return [x[tuple(index)].copy()]


SLICE = register(
    OpSpec(
        name="Slice",
        infer=infer_slice,
        reference=ref_slice,
        flops=no_flops,
        doc="Slice(data, starts, ends, axes, steps): x[start:end:step] per axis.",
        # typed when starts, ends, axes and steps are all constant vectors
        egg=EggSig(n_inputs=1, const_inputs=(1, 2, 3, 4)),
        z3=ref_slice,  # moves Z3 terms like numbers
    )
)
