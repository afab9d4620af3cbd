"""`optimize --measure`: input and output timed in ORT, interleaved; the output is kept only
when it is faster beyond the noise floor (`rewrite.measure`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.cli import main
from rewrite.measure import MIN_NOISE, Measurement, measure


def matmuls(n: int, size: int = 96) -> onnx.ModelProto:
    """y = x @ W @ W ... (n MatMuls): n sets the work."""
    w = onnx.numpy_helper.from_array(
        (np.eye(size) + 0.01 * np.ones((size, size))).astype(np.float32), "w"
    )
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(h.make_node("MatMul", [prev, "w"], [f"m{i}"]))
        prev = f"m{i}"
    nodes.append(h.make_node("Relu", [prev], ["y"]))
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [size, size])],
        [h.make_tensor_value_info("y", T.FLOAT, [size, size])],
        [w],
    )
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_model_with_a_tenth_of_the_work_is_faster_beyond_noise(tmp_path: Path) -> None:
    heavy, light = tmp_path / "heavy.onnx", tmp_path / "light.onnx"
    onnx.save(matmuls(30), heavy)
    onnx.save(matmuls(3), light)
    feeds = {"x": np.ones((96, 96), np.float32)}
    m = measure(heavy, light, feeds, rounds=3, runs=3)
    assert m.faster and m.speedup > 3 and m.rounds == 3 and len(m.ratios) == 3
    assert m.input_ms > m.output_ms > 0 and m.noise >= MIN_NOISE
    back = measure(light, heavy, feeds, rounds=3, runs=3)
    assert not back.faster and back.speedup < 0.5


def test_faster_means_beyond_the_noise_floor() -> None:
    def at(speedup: float, noise: float) -> Measurement:
        return Measurement(1.0, 1.0 / speedup, speedup, noise, 3, 3, 1, "cpu", [speedup] * 3)

    assert at(1.05, 0.01).faster and not at(1.05, 0.06).faster and not at(1.0, 0.01).faster
    assert "(1.050x, noise ±1.0%, 3 rounds of 3, 1 thread)" in at(1.05, 0.01).line()


def test_optimize_measure_keeps_the_input_when_the_output_is_not_faster(tmp_path: Path) -> None:
    """Nothing to optimize in a MatMul chain: the output runs as fast as the input, so the
    input graph is written, exit 0, and the report says what was measured."""
    src, dst, rep = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(matmuls(4), src)
    code = main(["optimize", str(src), str(dst), "--measure", "--report", str(rep), "-q"])
    report = json.loads(rep.read_text())
    assert code == 0 and report["status"] == "not faster"
    measured = report["measured"]
    assert measured["faster"] is False and measured["rounds"] >= 3
    assert 0.8 < measured["speedup"] < 1.25
    assert any("not faster beyond noise" in w for w in report["warnings"])
    assert onnx.load(dst).graph.node[0].op_type == "MatMul"  # the input graph, checked
