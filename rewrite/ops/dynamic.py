"""Second typed forms of Reshape, Expand, Slice and ConstantOfShape: shape-like inputs computed
at run time.

The first typed forms (`reshape.py`, `shape.py`, `slice.py`) fold a constant int vector into
the term (`Reshape(allowzero, shape, x)`). A model with dynamic axes computes those vectors
at run time (`Shape -> Gather -> Unsqueeze -> Concat -> Reshape`), so encode writes such a
node in its second form, where the vector is an ordinary int64 tensor operand, in ONNX input
order (`OpSpec.onnx_op` names the op the form is written back as):

- `ReshapeDyn(allowzero, x, shape)`: Reshape(x, shape).
- `ExpandDyn(x, shape)`: Expand(x, shape).
- `SliceDyn(x, starts, ends, axes?, steps?)`: Slice; omitted axes/steps are `(Absent)`.
- `ConstantOfShapeDyn(value, dtype, shape)`: ConstantOfShape(shape) filled with `value`'s one
  element; `value` and `dtype` as the first form holds them (`shape.constant_to_egg`: a float
  and its ONNX dtype, float32 0 when the attribute is absent; decode writes the tensor back).

Identity: each form computes exactly what the ONNX op computes on the same inputs (the
references are the first forms'). Types: the output rank is known when the shape operand's
length is static (Reshape, Expand, ConstantOfShape) or the data's rank is (Slice); dims are
unknown unless the operand is a constant (`infer` reads `call.consts`); ConstantOfShapeDyn's
dtype is its value's. Encode seeds every original value with the loader's shape inference,
so dims it knows (symbolic `batch`, `sequence`) stay known.

Cost: ReshapeDyn is a view (0 bytes, as Reshape); ExpandDyn and SliceDyn read their input
and write their output (as Expand and Slice); ConstantOfShapeDyn writes its output.

Z3 semantics (what is modelled): the output's shape depends on the shape operand's values,
so the semantics need those values as numerals: every element of the operand must simplify
to a concrete integer (a constant, or `Shape` of a tensor of the case's static shape: `Shape`
yields numerals). The elements of `x` are then moved exactly as the first forms move them
(ConstantOfShapeDyn: its value's numeral at every position of that shape).
A shape operand with symbolic values is not modelled: the semantics raise `ShapeError`, and a
case that needs them cannot be proved (the bounded prover fixes every shape before values).
For the same reason the self-test checks these forms, and Range, on the cases listed in
`SELF_TEST_VALUES` (`verify/selftest_values.py`) instead of the sampling bound's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.errors import ShapeError
from rewrite.ops.base import EggSig, OpCall, OpSpec, no_flops
from rewrite.ops.registry import register
from rewrite.ops.reshape import infer_reshape, ref_reshape, view_bytes
from rewrite.ops.shape import (
    constant_from_egg,
    constant_to_egg,
    infer_constant_of_shape,
    infer_expand,
    output_bytes,
    ref_constant_of_shape,
    ref_expand,
    z3_constant_of_shape,
)
from rewrite.ops.slice import infer_slice, ref_slice

INT64 = onnx.TensorProto.INT64
INT32 = onnx.TensorProto.INT32
FLOAT = onnx.TensorProto.FLOAT


def concrete_ints(values: Any, what: str) -> np.ndarray:
    """An array of Z3 terms (or numbers) as int64 numbers; ShapeError unless every element
    simplifies to an integer numeral."""
    arr = np.asarray(values, dtype=object)
    out = np.empty(arr.shape, dtype=np.int64)
    for idx in np.ndindex(*arr.shape):
        v = arr[idx]
        if isinstance(v, int | np.integer):
            out[idx] = int(v)
            continue
        s = z3.simplify(v) if isinstance(v, z3.ExprRef) else v
        if isinstance(s, z3.BitVecNumRef):
            out[idx] = s.as_signed_long()
        elif isinstance(s, z3.IntNumRef):
            out[idx] = s.as_long()
        else:
            raise ShapeError(f"{what} is not a concrete integer in this case: {v}")
    return out


def _concrete_from(
    arrays: list[np.ndarray | None], first: int, what: str
) -> list[np.ndarray | None]:
    """`arrays` with the operands from index `first` on made concrete (None stays None)."""
    return [
        a if i < first or a is None else concrete_ints(a, f"{what} operand {i}")
        for i, a in enumerate(arrays)
    ]


def z3_reshape_dyn(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """Reshape's element order over the shape operand's concrete values."""
    return ref_reshape(call, _concrete_from(arrays, 1, "ReshapeDyn's shape"))


def z3_expand_dyn(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """Expand's broadcast over the shape operand's concrete values."""
    return ref_expand(call, _concrete_from(arrays, 1, "ExpandDyn's shape"))


def z3_slice_dyn(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """Slice's window over the concrete starts, ends, axes and steps."""
    return ref_slice(call, _concrete_from(arrays, 1, "SliceDyn's"))


def z3_constant_of_shape_dyn(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    """The fill value's numeral at every position of the concrete shape operand's shape."""
    return z3_constant_of_shape(call, _concrete_from(arrays, 0, "ConstantOfShapeDyn's shape"))


RESHAPE_DYN = register(
    OpSpec(
        name="ReshapeDyn",
        onnx_op="Reshape",
        infer=infer_reshape,
        reference=ref_reshape,
        flops=no_flops,
        bytes=view_bytes,
        egg=EggSig(attrs=(("allowzero", "i64", 0),), n_inputs=2),
        z3=z3_reshape_dyn,
        input_dtypes=(None, (INT64,)),
        doc="Reshape(data, shape) with a shape computed at run time (a tensor operand).",
    )
)
EXPAND_DYN = register(
    OpSpec(
        name="ExpandDyn",
        onnx_op="Expand",
        infer=infer_expand,
        reference=ref_expand,
        flops=no_flops,
        egg=EggSig(n_inputs=2),
        z3=z3_expand_dyn,
        input_dtypes=(None, (INT64,)),
        doc="Expand(x, shape) with a shape computed at run time (a tensor operand).",
    )
)
SLICE_DYN = register(
    OpSpec(
        name="SliceDyn",
        onnx_op="Slice",
        infer=infer_slice,
        reference=ref_slice,
        flops=no_flops,
        egg=EggSig(n_inputs=5, optional=2),
        z3=z3_slice_dyn,
        input_dtypes=(None, (INT64, INT32), (INT64, INT32), (INT64, INT32), (INT64, INT32)),
        doc="Slice(data, starts, ends, axes, steps) with index inputs computed at run time.",
    )
)
CONSTANT_OF_SHAPE_DYN = register(
    OpSpec(
        name="ConstantOfShapeDyn",
        onnx_op="ConstantOfShape",
        infer=infer_constant_of_shape,
        reference=ref_constant_of_shape,
        flops=no_flops,
        bytes=output_bytes,
        egg=EggSig(
            attrs=(("value", "f64", 0.0), ("dtype", "i64", FLOAT)),
            n_inputs=1,
            to_egg=constant_to_egg,
            from_egg=constant_from_egg,
        ),
        z3=z3_constant_of_shape_dyn,
        input_dtypes=((INT64,),),
        doc="ConstantOfShape(shape, value) with a shape computed at run time (a tensor operand).",
    )
)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _one(dtype: type, value: object) -> onnx.TensorProto:
    """ConstantOfShape's `value` attribute: a one-element tensor."""
    return onnx.numpy_helper.from_array(np.array([value], dtype=dtype))


SELF_TEST_VALUES: dict[str, list[tuple[dict[str, Any], tuple[int, ...] | None, list[Any]]]] = {
    "ReshapeDyn": [
        ({}, (2, 3, 4), [_i64(0, -1)]),
        ({}, (2, 3, 4), [_i64(6, 2, 2)]),
        ({"allowzero": 1}, (2, 0, 3), [_i64(0, 3)]),
    ],
    "ExpandDyn": [({}, (3, 1), [_i64(2, 3, 4)]), ({}, (2, 3), [_i64(1, 1)])],
    "SliceDyn": [
        ({}, (5, 4), [_i64(1), _i64(2**63 - 1), _i64(0), None]),
        ({}, (5, 4), [_i64(-1, 0), _i64(-6, 3), _i64(0, 1), _i64(-2, 2)]),
    ],
    "ConstantOfShapeDyn": [
        ({}, None, [_i64(2, 3)]),
        ({"value": _one(np.int64, -7)}, None, [_i64(3, 1, 2)]),
        ({"value": _one(np.bool_, True)}, None, [_i64(4)]),
        ({"value": _one(np.float16, 1.5)}, None, [_i64(2, 0)]),
        ({"value": _one(np.float32, 2.5)}, None, [_i64()]),
    ],
    "Range": [
        ({}, None, [np.array(v, dtype=np.int64) for v in (2, 11, 3)]),
        ({}, None, [np.array(v, dtype=np.int32) for v in (5, -4, -2)]),
        ({}, None, [np.array(v, dtype=np.float32) for v in (0.1, 1.0, 0.1)]),
        ({}, None, [np.array(v, dtype=np.float64) for v in (1.0, -2.5, -0.7)]),
    ],
}
"""The self-test's cases of the typed ops whose output shape depends on input values (the
sampling bound fixes shapes from types alone, so it has no case of them): op -> (attributes,
the drawn data input's shape (None: every input is given), the other inputs (None:
omitted)). The self-test draws input 0's values of `float32`, `int64` and special values."""
