"""SplitPart: one output of an ONNX Split, as a single-output typed e-graph term.

A multi-output op is one term per output (the tensat encoding): output `index` of
`Split(x, split=sizes, axis=axis)` is `(SplitPart axis sizes index x)`, whose value is

    SplitPart(x; axis, sizes, index) = Slice(x, start, start + sizes[index], axis),
    start = sizes[0] + ... + sizes[index - 1],

an exact copy of elements (no FLOPs). `sizes` is non-negative and sums to x's `axis` dim;
`axis` is normalized to [0, rank) when encoded. Encode (`egraph.encode`) makes one term per
output of a Split whose sizes are known statically (`split_plan`: the `split` input or
attribute, `num_outputs` from opset 18 with a smaller last piece, or equal pieces); decode
groups every chosen part of one (x, axis, sizes) back into one Split node. No ONNX op is
called SplitPart: a rule side with one is written to ORT as a Split (`split_part_node`).

Cost: each part reads and writes its own piece (`part_bytes`), so the parts of one Split add
up to the Split's bytes moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper

from rewrite.errors import ShapeError
from rewrite.ops._dims import norm_axis
from rewrite.ops.base import EggSig, OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.concat import split_sizes
from rewrite.ops.registry import register


def split_plan(call: OpCall) -> tuple[int, list[int]] | None:
    """(axis in [0, rank), sizes) of an ONNX Split call, or None when x's rank or any piece's
    size is not known statically (such a Split stays opaque)."""
    shape = call.input(0).shape
    if shape is None or call.n_outputs < 1:
        return None
    try:
        axis = norm_axis(call, call.attr("axis", 0), len(shape))
        sizes = split_sizes(call, shape[axis])
    except ShapeError:
        return None
    if any(not isinstance(s, int) for s in sizes):
        return None
    return axis, [int(s) for s in sizes]  # type: ignore[arg-type]


def _part(call: OpCall, rank: int) -> tuple[int, list[int], int]:
    """(axis, sizes, index) of a SplitPart call, checked against x's rank."""
    sizes = [int(s) for s in call.attr("sizes", ())]
    index = int(call.attr("index", 0))
    axis = norm_axis(call, int(call.attr("axis", 0)), rank)
    if not sizes or any(s < 0 for s in sizes):
        raise fail(call, f"sizes {sizes} must be non-empty and non-negative")
    if not 0 <= index < len(sizes):
        raise fail(call, f"index {index} is not one of the {len(sizes)} pieces")
    return axis, sizes, index


def infer_split_part(call: OpCall) -> list[TensorType]:
    """x's dtype; x's shape with the `axis` dim replaced by `sizes[index]`."""
    x = call.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    axis, sizes, index = _part(call, len(x.shape))
    d = x.shape[axis]
    if isinstance(d, int) and sum(sizes) != d:
        raise fail(call, f"sizes {sizes} do not sum to the dim {d}")
    shape = (*x.shape[:axis], sizes[index], *x.shape[axis + 1 :])
    return [TensorType(x.dtype, shape)]


def ref_split_part(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """x[..., start:start + sizes[index], ...] along `axis` (numpy or Z3 object arrays)."""
    x = arrays[0]
    assert x is not None
    axis, sizes, index = _part(call, x.ndim)
    if sum(sizes) != x.shape[axis]:
        raise fail(call, f"sizes {sizes} do not sum to the dim {x.shape[axis]}")
    start = sum(sizes[:index])
    window: list[slice] = [slice(None)] * x.ndim
    window[axis] = slice(start, start + sizes[index])
    return [x[tuple(window)].copy()]


def part_bytes(call: OpCall, outputs: list[TensorType]) -> float:
    """The piece read plus the piece written (the parts of a Split add up to its bytes)."""
    return float(2 * sum((t.numel or 0) * t.itemsize for t in outputs))


def _attr_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Proof/self-test values: the last axis (and axis 0), cut whole, 1 | rest, rest | 1."""
    shape = inputs[0].shape if inputs else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    if not shape:
        return []
    if name == "axis":
        return [-1, 0] if len(shape) > 1 else [0]
    if name == "index":
        return [0, 1]
    if name != "sizes":
        return None
    out: list[tuple[int, ...]] = []
    for d in dict.fromkeys([shape[-1], shape[0]]):  # type: ignore[list-item]
        assert isinstance(d, int)
        out += [(d,)] + ([(1, d - 1), (d - 1, 1)] if d >= 2 else [])
    return list(dict.fromkeys(out))


def split_part_node(
    x: str, out: str, attrs: Mapping[str, Any], sizes_name: str
) -> tuple[onnx.NodeProto, onnx.TensorProto]:
    """A SplitPart as ONNX (opset >= 13): the Split of `x` whose output `index` is `out`
    (the other pieces get names of their own), and its `split` initializer `sizes_name`."""
    sizes = [int(v) for v in attrs["sizes"]]
    index = int(attrs["index"])
    outs = [out if i == index else f"{out}/piece{i}" for i in range(len(sizes))]
    init = helper.make_tensor(sizes_name, onnx.TensorProto.INT64, [len(sizes)], sizes)
    node = helper.make_node("Split", [x, sizes_name], outs, axis=int(attrs["axis"]))
    return node, init


SPLIT_PART = register(
    OpSpec(
        name="SplitPart",
        infer=infer_split_part,
        reference=ref_split_part,
        flops=no_flops,
        bytes=part_bytes,
        doc="SplitPart(x, axis, sizes, index): output `index` of Split(x, sizes, axis).",
        egg=EggSig(attrs=(("axis", "i64", None), ("sizes", "VecI", None), ("index", "i64", None))),
        z3=ref_split_part,  # moves Z3 terms like numbers
        attr_values=_attr_values,
    )
)
