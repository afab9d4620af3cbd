"""The pipeline's promises: nothing lost, unverified models never written as optimized."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from rewrite.cli import main
from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_FALLBACK, STATUS_OPTIMIZED
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

UNSOUND = RuleSet("unsound")


@UNSOUND.rule
def neg_is_identity(x: Tensor) -> Rewrite:
    """Neg(x) = x   (false: a deliberately wrong rule)"""
    return rewrite(-x).to(x)


RELU_WRONG = RuleSet("relu_wrong")


@RELU_WRONG.rule
def relu_is_identity(x: Tensor) -> Rewrite:
    """Relu(x) = x   (false for negative x only: a deliberately wrong rule)"""
    return rewrite(op.Relu(x)).to(x)


IN_PROCESS: dict[str, Any] = {"isolate": False, "extractor": "greedy"}
"""The stages run here (so `make mutate` sees them), with greedy extraction (fast, and the
ILP's own tests do not run again for every mutant of the verify wiring)."""


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


# -- the differential check runs the optimized model, not the input again -----------------------

WRONG_RULE_FILE = """
from rewrite.rules import Rewrite, RuleSet, Tensor, rewrite

WRONG = RuleSet("wrong")


@WRONG.rule
def neg_is_identity(x: Tensor) -> Rewrite:
    \"\"\"Neg(x) = x   (false)\"\"\"
    return rewrite(-x).to(x)
"""


def _two_outputs(path: Path) -> None:
    """y = Relu(Neg(x)) (the wrong rule changes it), z = Sigmoid(x) (untouched)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("y", "z")]
    nodes = [
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
        helper.make_node("Relu", ["n"], ["y"], name="relu"),
        helper.make_node("Sigmoid", ["x"], ["z"], name="sigmoid"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], outs), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, path)


def test_cli_with_a_trusted_wrong_rule_writes_the_input_graph_and_exits_3(tmp_path: Path) -> None:
    """Through the CLI: the rewritten model differs in one of two outputs; the check (which
    must run the rewritten file, not the input twice) catches it and names that output."""
    src, dst, rep = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "report.json"
    rules = tmp_path / "wrong.py"
    rules.write_text(WRONG_RULE_FILE)
    _two_outputs(src)
    argv = ["optimize", str(src), str(dst), "--rules", str(rules), "--ruleset", "wrong"]
    assert main([*argv, "--trust-rules", "--report", str(rep), "-q"]) == 3
    report = json.loads(rep.read_text())
    assert report["status"] == "fallback" and report["verification"]["ok"] is False
    assert report["saturation"]["rule_matches"]["neg_is_identity"] > 0
    verdicts = {o["name"]: o["ok"] for o in report["verification"]["outputs"]}
    assert verdicts == {"y": False, "z": True}
    assert report["verification"]["candidate"] == str(dst)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    for a, b in zip(_run_all(dst, x), _run_all(src, x), strict=True):
        np.testing.assert_array_equal(a, b)
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["Neg", "Relu", "Sigmoid"]


def _run_all(path: Path, x: np.ndarray) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def _relu_model(path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, path)


def test_user_inputs_alone_decide_the_check(tmp_path: Path) -> None:
    """With no random trials, the check runs both models on the user's inputs only: a rule
    wrong for negative values passes on positive inputs and is caught on negative ones."""
    src = tmp_path / "in.onnx"
    _relu_model(src)
    # in this process (the stages' code where mutation testing sees it; the CLI test isolates)
    wrong = Options(rulesets=[RELU_WRONG], prove_rules=False, trials=0, **IN_PROCESS)
    for sign, status in ((1.0, STATUS_OPTIMIZED), (-1.0, STATUS_FALLBACK)):
        npz, dst = tmp_path / f"x{sign:+.0f}.npz", tmp_path / f"out{sign:+.0f}.onnx"
        np.savez(npz, x=np.full((2, 3), sign, np.float32))
        report = optimize(src, dst, replace(wrong, inputs=str(npz)))
        assert report.saturation["rule_matches"]["relu_is_identity"] > 0
        assert report.status == status, report.warnings
        assert report.verification["ok"] is (status == STATUS_OPTIMIZED)
        assert report.verification["trials"] == 1
    # what was written as optimized really is the wrong rewrite: the check saw that file
    assert [n.op_type for n in onnx.load(tmp_path / "out+1.onnx").graph.node] in ([], ["Identity"])
    assert [n.op_type for n in onnx.load(tmp_path / "out-1.onnx").graph.node] == ["Relu"]


# -- the verify stage's record, in this process (where mutation testing sees the stages) --------


def _model(
    path: Path,
    nodes: list[onnx.NodeProto],
    x: list[int | str],
    y: list[int | str],
    inits: list[onnx.TensorProto],
) -> Path:
    """A model from `nodes` with input x and output y (float, of these shapes)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_failed_check_is_reported_with_its_options(tmp_path: Path) -> None:
    """The check runs with the run's seed, dims and calibration, and its failure is the
    report's verdict and a warning."""
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    src = _model(tmp_path / "in.onnx", relu, ["batch", 3], ["batch", 3], [])
    opts = Options(
        rulesets=[RELU_WRONG], prove_rules=False, seed=7, trials=1, dims={"batch": 5}, **IN_PROCESS
    )
    report = optimize(src, tmp_path / "out.onnx", opts)
    v = report.verification
    assert report.status == STATUS_FALLBACK and v["ok"] is False and "verify" in report.stages
    assert v["trials"] == 1 and v["calibrated"] is True
    assert "on seed 7" in v["reason"] and v["summary"].startswith("FAILED: output 'y'")
    assert [o["shape"] for o in v["outputs"]] == [[5, 3]]  # checked at the given batch size
    assert f"differential check failed, input graph written instead: {v['summary']}" in (
        report.warnings
    )


def test_a_passed_check_is_reported(tmp_path: Path) -> None:
    src = tmp_path / "in.onnx"
    _neg_model(src)
    report = optimize(src, tmp_path / "out.onnx", Options(rulesets=[], trials=3, **IN_PROCESS))
    v = report.verification
    assert report.status == STATUS_OPTIMIZED and v["ok"] is True and v["trials"] == 3
    assert v["summary"].startswith("ok: 1 output agrees") and "verify" in report.stages
    assert not any("differential" in w for w in report.warnings)


def test_no_verify_skips_the_check_and_says_so(tmp_path: Path) -> None:
    """--no-verify: nothing is checked, so even a wrong rewrite is written as optimized."""
    src = tmp_path / "in.onnx"
    _relu_model(src)
    opts = Options(rulesets=[RELU_WRONG], prove_rules=False, verify=False, **IN_PROCESS)
    report = optimize(src, tmp_path / "out.onnx", opts)
    assert report.status == STATUS_OPTIMIZED
    assert report.verification == {"ok": None, "summary": "skipped (--no-verify)"}
    assert "verify" not in report.stages
    assert "Relu" not in [n.op_type for n in onnx.load(tmp_path / "out.onnx").graph.node]


def test_an_input_model_no_generated_input_runs_is_written_back(tmp_path: Path) -> None:
    """Reshape of 3·batch elements to [5] fails on every generated input: nothing can be
    compared, so the input graph is written and the report says why."""
    shape = numpy_helper.from_array(np.array([5], np.int64), "s")
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Relu", ["r"], ["y"])]
    src = _model(tmp_path / "in.onnx", nodes, ["batch", 3], [5], [shape])
    report = optimize(src, tmp_path / "out.onnx", Options(rulesets=[], **IN_PROCESS))
    v = report.verification
    assert report.status == STATUS_FALLBACK and set(v) == {"ok", "summary"} and v["ok"] is False
    assert v["summary"].startswith("could not run: the input model ") and "--inputs" in v["summary"]
    assert f"{v['summary'].removeprefix('could not run: ')}; input graph written instead" in (
        report.warnings
    )


def test_a_check_that_cannot_make_its_inputs_writes_the_input_graph(tmp_path: Path) -> None:
    """An input of 2^41 floats cannot be generated (MemoryError at once, nothing allocated)."""
    big = [2**40, 2]
    src = _model(tmp_path / "in.onnx", [helper.make_node("Relu", ["x"], ["y"])], big, big, [])
    report = optimize(src, tmp_path / "out.onnx", Options(rulesets=[], **IN_PROCESS))
    v = report.verification
    assert report.status == STATUS_FALLBACK and set(v) == {"ok", "summary"} and v["ok"] is False
    assert v["summary"].startswith("could not run: Unable to allocate")
    (warning,) = [w for w in report.warnings if "differential" in w]
    assert warning.startswith("the differential check could not run (MemoryError: Unable to")
    assert warning.endswith("); input graph written instead")
