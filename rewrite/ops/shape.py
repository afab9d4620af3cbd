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

Typed forms: `Shape(start, end, x)` (end's default `END` = INT64_MAX reads as "to the end"),
`Size(x)`, `ConstantOfShape(value, dtype, input)` (the shape vector a constant; `value` the
one-element tensor as a float and its dtype, float32 0 when absent, `constant_to_egg`; a
computed shape is `ConstantOfShapeDyn`, `dynamic.py`), `Expand(shape, x)`
and `Tile(repeats, x)` with constant int vectors (an Expand with a computed shape is
`ExpandDyn`, `dynamic.py`), `Range(start, limit, delta)` with three scalar tensor operands
(its output length depends on their values: 1-D of unknown length unless all are constant).
Z3 semantics: Shape and Size are int64 numerals of the (static) case shape, ConstantOfShape
the numeral of its fill value, Expand and Tile the references (they only move elements),
Range the numerals of its output where start, limit and delta are concrete (`_range_z3.py`).
Cost: Range writes only its output (its inputs are scalars).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from rewrite.errors import ShapeError
from rewrite.ops import _z3
from rewrite.ops._dims import as_ints, vec_len
from rewrite.ops._range_z3 import z3_range
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
    np_dtype,
)
from rewrite.ops.registry import register

INT64 = onnx.TensorProto.INT64
FLOAT = onnx.TensorProto.FLOAT
END = 2**63 - 1
"""Shape's `end` in the typed form when the attribute is absent (clamped to the rank)."""


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


def z3_shape(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """int64 numerals of x.shape[start:end] (the case's shape is static)."""
    (dims,) = ref_shape(call, arrays)
    return [_numerals(dims, INT64)]


def _numerals(values: np.ndarray, dtype: int) -> np.ndarray:
    """An object array of Z3 numerals of `dtype` holding `values`."""
    out = np.empty(values.shape, dtype=object)
    for idx in np.ndindex(*values.shape):
        out[idx] = _z3.symbol("", dtype, values[idx].item())
    return out


def shape_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Shape's `start` (0, 1, -1) and `end` (to the end, -1, 1)."""
    if name == "start":
        return [0, 1, -1]
    if name == "end":
        return [END, -1, 1]
    return None


def infer_size(call: OpCall) -> list[TensorType]:
    return [TensorType(INT64, ())]


def ref_size(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    x = arrays[0]
    assert x is not None
    return [np.array(x.size, dtype=np.int64)]


def z3_size(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """The element count as an int64 numeral."""
    return [_numerals(ref_size(call, arrays)[0], INT64)]


def fill_value(call: OpCall) -> np.ndarray:
    """ConstantOfShape's one-element `value` (float32 0 when absent): a tensor attribute, or
    the typed form's float `value` and `dtype` (`constant_to_egg`)."""
    value = call.attr("value")
    if value is None or isinstance(value, int | float):
        dtype = np_dtype(int(call.attr("dtype", FLOAT)))
        with np.errstate(all="ignore"):
            return np.array([0.0 if value is None else value]).astype(dtype)
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


def z3_constant_of_shape(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """The fill value's numeral (in the current arithmetic) at every position."""
    (out,) = ref_constant_of_shape(call, arrays)
    return [_numerals(out, infer_constant_of_shape(call)[0].dtype)]


def constant_of_shape_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """ConstantOfShape's shape (ONNX names the input `input`): a scalar, vectors, rank 3; its
    fill value 0, 1, -2 as float32, float16, int64 or bool."""
    if name == "input":
        return [(), (1,), (3,), (2, 3), (2, 1, 3)]
    if name == "value":
        return [0.0, 1.0, -2.0]
    if name == "dtype":
        return [FLOAT, onnx.TensorProto.FLOAT16, INT64, onnx.TensorProto.BOOL]
    return None


def constant_to_egg(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """`value` (a one-element tensor) -> float `value` and `dtype`, when the float holds it
    exactly (finite, integers below 2^53); None otherwise (the node stays opaque)."""
    value = attrs.pop("value", None)
    if value is None:
        return attrs
    if not isinstance(value, onnx.TensorProto):
        return None
    arr = onnx.numpy_helper.to_array(value).reshape(-1)
    if arr.size != 1 or arr.dtype.kind not in "fiub":
        return None
    v = arr[0]
    as_float = float(v)
    if not np.isfinite(as_float) or np.array([as_float]).astype(arr.dtype)[0] != v:
        return None
    return {**attrs, "value": as_float, "dtype": int(value.data_type)}


def constant_from_egg(attrs: dict[str, Any]) -> dict[str, Any]:
    """The typed form's `value` and `dtype` -> the one-element tensor (left out for float32 0)."""
    out = dict(attrs)
    value, dtype = float(out.pop("value", 0.0)), int(out.pop("dtype", FLOAT))
    if (value, dtype) != (0.0, FLOAT):
        arr = np.array([value]).astype(np_dtype(dtype))
        out["value"] = onnx.numpy_helper.from_array(arr, "value")
    return out


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


def tile_values(name: str, inputs: list[TensorType]) -> list[Any] | None:
    """Tile's `repeats` for rank r: all ones, 2 on the first axis, 3 on the last."""
    if name != "repeats" or not inputs or inputs[0].rank is None:
        return None
    r = inputs[0].rank
    if r == 0:
        return [()]
    ones = (1,) * (r - 1)
    return list(dict.fromkeys([(1, *ones), (2, *ones), (*ones, 3)]))


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
        egg=EggSig(attrs=(("start", "i64", 0), ("end", "i64", END)), n_inputs=1),
        z3=z3_shape,
        attr_values=shape_values,
        doc="Shape(x, start, end): int64 dims of x.shape[start:end], Python-slice clamping.",
    )
)
SIZE = register(
    OpSpec(
        name="Size",
        infer=infer_size,
        reference=ref_size,
        flops=no_flops,
        bytes=output_bytes,
        egg=EggSig(n_inputs=1),
        z3=z3_size,
        doc="Size(x): the element count as an int64 scalar.",
    )
)
CONSTANT_OF_SHAPE = register(
    OpSpec(
        name="ConstantOfShape",
        infer=infer_constant_of_shape,
        reference=ref_constant_of_shape,
        flops=no_flops,
        # `value` as a float and its dtype (constant_to_egg); decode writes the tensor back
        egg=EggSig(
            attrs=(("value", "f64", 0.0), ("dtype", "i64", FLOAT)),
            n_inputs=0,
            const_inputs=(0,),
            to_egg=constant_to_egg,
            from_egg=constant_from_egg,
        ),
        z3=z3_constant_of_shape,
        attr_values=constant_of_shape_values,
        doc="ConstantOfShape(shape, value): a tensor of that shape filled with value's element "
        "(float32 0 when absent).",
    )
)
RANGE = register(
    OpSpec(
        name="Range",
        infer=infer_range,
        reference=ref_range,
        flops=no_flops,
        bytes=output_bytes,
        egg=EggSig(n_inputs=3),
        z3=z3_range(ref_range),
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
        egg=EggSig(n_inputs=1, const_inputs=(1,)),
        z3=ref_tile,  # moves Z3 terms like numbers
        attr_values=tile_values,
        doc="Tile(x, repeats): numpy tile, out.shape[i] = x.shape[i] * repeats[i].",
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
