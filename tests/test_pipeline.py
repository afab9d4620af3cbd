"""The pipeline's promises: nothing lost, unverified models never written as optimized."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_FALLBACK, STATUS_OPTIMIZED
from rewrite.rules import Rewrite, RuleSet, Tensor, rewrite

UNSOUND = RuleSet("unsound")


@UNSOUND.rule
def neg_is_identity(x: Tensor) -> Rewrite:
    """Neg(x) = x   (false: a deliberately wrong rule)"""
    return rewrite(-x).to(x)


def _neg_model(path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
        helper.make_node("Relu", ["n"], ["y"], name="relu"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, path)


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_unsound_rewrite_is_caught_and_the_input_graph_written(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    _neg_model(src)
    report = optimize(src, dst, Options(rulesets=[UNSOUND], prove_rules=False))
    assert report.saturation["rule_matches"]["neg_is_identity"] > 0
    assert report.status == STATUS_FALLBACK
    assert report.verification["ok"] is False
    assert any("differential check failed" in w and "'y'" in w for w in report.warnings)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(_run(dst, x), _run(src, x))
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["Neg", "Relu"]


def test_sound_run_is_marked_optimized_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    _neg_model(src)
    before = src.read_bytes()
    report = optimize(src, dst, Options())
    assert report.status == STATUS_OPTIMIZED
    assert src.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx", "out.onnx"]
    assert set(report.stages) >= {
        "load",
        "encode",
        "saturate",
        "extract",
        "decode",
        "save",
        "verify",
    }


def test_unsound_rule_is_refused_before_use_with_its_counterexample(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    _neg_model(src)
    report = optimize(src, dst, Options(rulesets=[UNSOUND]))
    assert report.status == STATUS_OPTIMIZED
    (refused,) = report.rules_refused
    assert refused["rule"] == "neg_is_identity"
    assert any(
        "neg_is_identity (test_pipeline.py:" in w and "refuted" in w for w in report.warnings
    )
    assert report.saturation.get("rule_matches", {}).get("neg_is_identity", 0) == 0
