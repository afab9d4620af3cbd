"""Shape-valued ops (opset 13-21): Shape, Size, ConstantOfShape, Range, Expand, Tile, NonZero.

- Shape(x, start=0, end=r) (start/end from opset 15): int64 [len] of x.shape[start:end],
  Python-slice clamping.
- Size(x): int64 scalar, the element count.
- ConstantOfShape(shape, value): a tensor of that (int64 1-D) shape filled with `value`'s one
  element (default float32 0); dtype is value's.
- Range(start, limit, delta): 1-D, n = max(ceil((limit - start) / delta), 0) elements,
  out[0] = start, out[i + 1] = out[i] + delta (accumulated, as ORT does); dtype is start's.
- Expand(x, shape): numpy broadcast of x.shape with `shape` (a 1 in either keeps the other).
- Tile(x, repeats): out.shape[i] = x.shape[i] * repeats[i] (numpy `tile`).
- NonZero(x): int64 (rank, nnz) indices of the non-zero elements, row-major order; nnz is
  known only when x is a constant.

Shape and Size read no data (only the output is written); none of these do FLOPs.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from rewrite.errors import ShapeError
from rewrite.ops._dims import as_ints, vec_len
from rewrite.ops.base import (
    Dim,
    EggSig,
    OpCall,
    OpSpec,
    Shape,
    TensorType,
    broadcast,
    fail,
    no_flops,
)
from rewrite.ops.registry import register

INT64 = onnx.TensorProto.INT64


def output_bytes(call: OpCall, outputs: list[TensorType]) -> float:
    """Only the output is written: the input's data is never read."""
    return float(sum((t.numel or 0) * t.itemsize for t in outputs))


def shape_bounds(call: OpCall, rank: int) -> tuple[int, int]:
    start, end = int(call.attr("start", 0)), int(call.attr("end", rank))
    begin, stop, _ = slice(start, end).indices(rank)
    return begin, max(begin, stop)


def infer_shape(call: OpCall) -> list[TensorType]:
    rank = call.input(0).rank
    if rank is None:
        return [TensorType(INT64, (None,))]
    begin, stop = shape_bounds(call, rank)
    return [TensorType(INT64, (stop - begin,))]


def ref_shape(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    begin, stop = shape_bounds(call, x.ndim)
    return [np.array(x.shape[begin:stop], dtype=np.int64)]


def infer_size(call: OpCall) -> list[TensorType]:
    return [TensorType(INT64, ())]


def ref_size(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    return [np.array(x.size, dtype=np.int64)]


def fill_value(call: OpCall) -> np.ndarray:
    """ConstantOfShape's one-element `value` (float32 0 when absent)."""
    value = call.attr("value")
    if value is None:
        return np.zeros(1, np.float32)
    arr = onnx.numpy_helper.to_array(value).reshape(-1)
    if arr.size != 1:
        raise fail(call, f"value has {arr.size} elements, not one")
    return arr


def shape_input(call: OpCall, i: int) -> Shape | None:
    """The dims a shape-valued input holds: its values, or unknowns of its static length."""
    dims = as_ints(call.const(i))
    if dims is not None:
        return tuple(dims)
    n = vec_len(call.input(i))
    return None if n is None else (None,) * n


def infer_constant_of_shape(call: OpCall) -> list[TensorType]:
    dtype = onnx.helper.np_dtype_to_tensor_dtype(fill_value(call).dtype)
    shape = shape_input(call, 0)
    if shape is not None and any(isinstance(d, int) and d < 0 for d in shape):
        raise fail(call, f"negative dim in shape {shape}")
    return [TensorType(int(dtype), shape)]


def ref_constant_of_shape(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    dims = as_ints(arrays[0])
    assert dims is not None
    return [np.full(dims, fill_value(call)[0])]


def range_len(call: OpCall, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> int:
    if delta == 0:
        raise fail(call, "delta is 0")
    span = (limit - start).astype(np.float64)
    return max(0, math.ceil(float(span) / float(delta)))


def infer_range(call: OpCall) -> list[TensorType]:
    dtype = call.input(0).dtype
    start, limit, delta = (call.const(i) for i in range(3))
    if start is None or limit is None or delta is None:
        return [TensorType(dtype, (None,))]
    return [TensorType(dtype, (range_len(call, start, limit, delta),))]


def ref_range(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    start, limit, delta = (np.asarray(a) for a in arrays[:3])
    n = range_len(call, start, limit, delta)
    steps = np.full(n, delta, dtype=start.dtype)
    if n:
        steps[0] = start
    return [np.add.accumulate(steps, dtype=start.dtype)]


def expand_dims(call: OpCall, shape: Shape | None) -> Shape | None:
    target = shape_input(call, 1)
    if target is not None and any(isinstance(d, int) and d < 0 for d in target):
        raise fail(call, f"negative dim in shape {list(target)}")
    if shape is None or target is None:
        return None
    if all(d is not None for d in target):
        try:
            return broadcast(shape, target)
        except ShapeError as err:
            raise fail(call, f"cannot expand {shape} to {list(target)}") from err
    rank = max(len(shape), len(target))
    padded = (1,) * (rank - len(shape)) + tuple(shape)
    return tuple(d if isinstance(d, int) and d != 1 else None for d in padded)


def infer_expand(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    return [TensorType(x.dtype, expand_dims(call, x.shape))]


def ref_expand(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x, dims = arrays[0], as_ints(arrays[1])
    assert x is not None and dims is not None
    out = np.broadcast_shapes(x.shape, tuple(dims))
    return [np.broadcast_to(x, out).copy()]


def tiled_dim(d: Dim, r: int) -> Dim:
    if isinstance(d, int):
        return d * r
    return d if r == 1 else None


def infer_tile(call: OpCall) -> list[TensorType]:
    x = call.input(0)
    reps = as_ints(call.const(1))
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if reps is None:
        return [TensorType(x.dtype, tuple(0 if d == 0 else None for d in x.shape))]
    if len(reps) != len(x.shape) or any(r < 0 for r in reps):
        raise fail(call, f"repeats {reps} do not fit rank {len(x.shape)}")
    return [TensorType(x.dtype, tuple(tiled_dim(d, r) for d, r in zip(x.shape, reps, strict=True)))]


def ref_tile(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x, reps = arrays[0], as_ints(arrays[1])
    assert x is not None and reps is not None
    return [np.tile(x, reps)]


def infer_nonzero(call: OpCall) -> list[TensorType]:
    x, value = call.input(0), call.const(0)
    nnz = None if value is None else int(np.count_nonzero(value))
    return [TensorType(INT64, None if x.rank is None else (max(x.rank, 1), nnz))]


def ref_nonzero(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    return [np.array(np.nonzero(x.reshape(-1) if x.ndim == 0 else x), dtype=np.int64)]


SHAPE = register(
    OpSpec(
        name="Shape",
        infer=infer_shape,
        reference=ref_shape,
        flops=no_flops,
        bytes=output_bytes,
        doc="Shape(x, start, end): int64 dims of x.shape[start:end].",
    )
)
SIZE = register(
    OpSpec(
        name="Size",
        infer=infer_size,
        reference=ref_size,
        flops=no_flops,
        bytes=output_bytes,
        doc="Size(x): the element count as an int64 scalar.",
    )
)
CONSTANT_OF_SHAPE = register(
    OpSpec(
        name="ConstantOfShape",
        infer=infer_constant_of_shape,
        reference=ref_constant_of_shape,
        flops=no_flops,
        doc="ConstantOfShape(shape, value): a tensor of that shape filled with value.",
    )
)
RANGE = register(
    OpSpec(
        name="Range",
        infer=infer_range,
        reference=ref_range,
        flops=no_flops,
        doc="Range(start, limit, delta): start, start + delta, ... below limit.",
    )
)
EXPAND = register(
    OpSpec(
        name="Expand",
        infer=infer_expand,
        reference=ref_expand,
        flops=no_flops,
        egg=EggSig(n_inputs=1, const_inputs=(1,)),
        z3=ref_expand,  # moves Z3 terms like numbers
        doc="Expand(x, shape): numpy broadcast of x to shape.",
    )
)
TILE = register(
    OpSpec(
        name="Tile",
        infer=infer_tile,
        reference=ref_tile,
        flops=no_flops,
        doc="Tile(x, repeats): numpy tile.",
    )
)
NONZERO = register(
    OpSpec(
        name="NonZero",
        infer=infer_nonzero,
        reference=ref_nonzero,
        flops=no_flops,
        doc="NonZero(x): int64 (rank, nnz) indices of the non-zero elements.",
    )
)
