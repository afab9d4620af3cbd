"""`infer_shape`: an op's `infer` on hand-written types (symbolic, unknown) and constants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rewrite.ops import OpCall, TensorType, lookup
from rewrite.ops.base import Shape, onnx_dtype

F = 1  # onnx.TensorProto.FLOAT


def t(*dims: Any) -> TensorType:
    """A float tensor type; `t(None)` alone is unknown rank."""
    return TensorType(F, None if dims == (None,) else tuple(dims))


def infer_types(
    op: str,
    *inputs: TensorType | None,
    consts: Sequence[Any] = (),
    attrs: dict[str, Any] | None = None,
    opset: int = 17,
    n_outputs: int = 1,
) -> list[TensorType]:
    """`infer` of `op`; a constant input's type (when not given) comes from its value."""
    types: list[TensorType | None] = [*inputs, *[None] * (len(consts) - len(inputs))]
    arrays = [None if c is None else np.asarray(c) for c in consts]
    for i, c in enumerate(arrays):
        if c is not None and types[i] is None:
            types[i] = TensorType(onnx_dtype(c), c.shape)
    spec = lookup(op)
    assert spec is not None, f"{op} is not registered"
    return spec.infer(OpCall(op, types, arrays, attrs or {}, n_outputs=n_outputs, opset=opset))


def infer_shape(op: str, *inputs: TensorType | None, **kw: Any) -> Shape | None:
    """The first output's shape under `infer_types`."""
    return infer_types(op, *inputs, **kw)[0].shape
