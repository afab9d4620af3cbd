"""Constant (opset 13-21): a node whose one output is the tensor held in its one attribute.

Exactly one of `value` (a TensorProto), `value_float` / `value_floats` (float32 scalar /
1-D), `value_int` / `value_ints` (int64 scalar / 1-D), `value_string` / `value_strings`
(string scalar / 1-D; typed here, but no rule handles strings) or `sparse_value` (typed from
its dims; no numpy reference) must be set. ORT materializes it once, at session start, so it
costs nothing per run: no FLOPs and no bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from rewrite.ops.base import OpCall, OpSpec, TensorType, fail, no_flops
from rewrite.ops.registry import register

P = onnx.TensorProto
LISTS = {"value_floats": P.FLOAT, "value_ints": P.INT64, "value_strings": P.STRING}
SCALARS = {"value_float": P.FLOAT, "value_int": P.INT64, "value_string": P.STRING}
KINDS = ("value", "sparse_value", *SCALARS, *LISTS)


def the_attr(call: OpCall) -> tuple[str, Any]:
    """The one value-bearing attribute (name, value)."""
    given = [k for k in KINDS if k in call.attrs]
    if len(given) != 1:
        raise fail(call, f"needs exactly one of {list(KINDS)}, has {given}")
    return given[0], call.attrs[given[0]]


def infer_constant(call: OpCall) -> list[TensorType]:
    name, value = the_attr(call)
    if name == "value":
        return [TensorType(int(value.data_type), tuple(int(d) for d in value.dims))]
    if name == "sparse_value":
        dims = tuple(int(d) for d in value.dims)
        return [TensorType(int(value.values.data_type), dims)]
    if name in SCALARS:
        return [TensorType(SCALARS[name], ())]
    return [TensorType(LISTS[name], (len(value),))]


def ref_constant(call: OpCall, arrays: list[np.ndarray | None]) -> list[np.ndarray]:
    name, value = the_attr(call)
    if name == "value":
        return [onnx.numpy_helper.to_array(value)]
    if name == "sparse_value":
        raise fail(call, "sparse_value has no numpy reference")
    if name in ("value_string", "value_strings"):
        texts = value.decode() if isinstance(value, bytes) else value
        if isinstance(texts, list):
            texts = [t.decode() if isinstance(t, bytes) else t for t in texts]
        return [np.array(texts, dtype=object)]
    kind = SCALARS.get(name) or LISTS[name]
    return [np.array(value, dtype=np.float32 if kind == P.FLOAT else np.int64)]


def no_bytes(call: OpCall, outputs: list[TensorType]) -> float:
    """Materialized once when the session starts: nothing moves per run."""
    return 0.0


CONSTANT = register(
    OpSpec(
        name="Constant",
        infer=infer_constant,
        reference=ref_constant,
        flops=no_flops,
        bytes=no_bytes,
        doc="Constant(value | value_float(s) | value_int(s) | value_string(s)): the tensor.",
    )
)
