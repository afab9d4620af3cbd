"""An opset-8 Scan converted to opset 17 keeps its interface and what it computes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rewrite.errors import ModelError
from rewrite.onnx_io import load
from rewrite.onnx_io.save import to_model

F = TensorProto.FLOAT


def scan8_sum(batch: int) -> onnx.ModelProto:
    """Scan-8 running sum (onnx's test_scan_sum): y = initial + sum(x), z = the partial sums."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
            helper.make_node("Identity", ["sum_out"], ["scan_out"]),
        ],
        "scan_body",
        [helper.make_tensor_value_info(n, F, [2]) for n in ("sum_in", "next")],
        [helper.make_tensor_value_info(n, F, [2]) for n in ("sum_out", "scan_out")],
    )
    node = helper.make_node("Scan", ["", "initial", "x"], ["y", "z"], num_scan_inputs=1, body=body)
    graph = helper.make_graph(
        [node],
        "scan8",
        [
            helper.make_tensor_value_info("initial", F, [batch, 2]),
            helper.make_tensor_value_info("x", F, [batch, 3, 2]),
        ],
        [
            helper.make_tensor_value_info("y", F, [batch, 2]),
            helper.make_tensor_value_info("z", F, [batch, 3, 2]),
        ],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    m.ir_version = 3
    return m


def _run(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_scan8_keeps_its_batched_interface(tmp_path: Path) -> None:
    src = tmp_path / "scan8.onnx"
    onnx.save(scan8_sum(1), src)
    out = to_model(load(src))
    assert [d.dim_value for d in out.graph.input[1].type.tensor_type.shape.dim] == [1, 3, 2]
    feeds = {
        "initial": np.ones((1, 2), np.float32),
        "x": np.arange(6, dtype=np.float32).reshape(1, 3, 2),
    }
    for got, want in zip(_run(out, feeds), _run(scan8_sum(1), feeds), strict=True):
        np.testing.assert_array_equal(got, want)


def test_scan8_with_a_batch_above_one_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "scan8.onnx"
    onnx.save(scan8_sum(2), src)
    with pytest.raises(ModelError, match=r"Scan .* has batch size 2 on 'initial'"):
        load(src)
