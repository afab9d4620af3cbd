"""Tiny ONNX models for the verify tests, built with onnx.helper and saved where asked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: Sequence[tuple[str, np.ndarray]] = (),
    *,
    meta: dict[str, str] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    """A checked opset-`opset` model; `inits` are (name, array) pairs."""
    tensors = [numpy_helper.from_array(a, name) for name, a in inits]
    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, tensors),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    m.ir_version = 8
    if meta:
        helper.set_model_props(m, meta)
    return m


def save(m: onnx.ModelProto, path: Path) -> Path:
    """Write `m` to `path` and return it."""
    onnx.save(m, path)
    return path


def add_model(bias: np.ndarray) -> onnx.ModelProto:
    """Y = X + bias, X float32 [3, 4]."""
    return model(
        [helper.make_node("Add", ["X", "B"], ["Y"])],
        [helper.make_tensor_value_info("X", F, [3, 4])],
        [helper.make_tensor_value_info("Y", F, [3, 4])],
        [("B", bias.astype(np.float32))],
    )
