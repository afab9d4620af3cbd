"""Whose fault a model onnx.checker rejects is, and which files the messages name.

An input that ONNX Runtime runs but that fails the full checker is optimized, with a warning
naming the input file; an output that fails a check the input passes is ours: the input graph
is written and the warning names the output path. No message or report field names the
staging file the model is first written to.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rewrite.cli import main
from rewrite.errors import ModelError
from rewrite.onnx_io import load
from rewrite.onnx_io.check import check_level
from rewrite.pipeline import Options, optimize
from rewrite.publish import staging
from rewrite.report import Report
from rewrite.saving import Saver
from tests.onnx_io import models


def relu_chain(declared: list[int]) -> onnx.ModelProto:
    """Relu -> Identity -> Relu on a (2, 3) input, its output declared with shape `declared`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, declared)
    nodes = [
        helper.make_node("Relu", ["x"], ["t"]),
        helper.make_node("Identity", ["t"], ["u"]),
        helper.make_node("Relu", ["u"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def no_staging_path(report: dict[str, object], dst: Path) -> None:
    """Nothing in the report names the staging folder (`.NAME.xxxx/` beside `dst`)."""
    text = json.dumps(report)
    assert f"/.{dst.name}." not in text, text


def test_input_failing_the_full_checker_is_optimized_and_named_as_the_culprit(
    tmp_path: Path,
) -> None:
    src, dst, rep = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "report.json"
    onnx.save(relu_chain([3, 2]), src)  # ORT runs it; shape inference says (2, 3)
    assert check_level(src)[0] == "basic"
    assert main(["optimize", "-q", str(src), str(dst), "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["status"] == "optimized" and report["verification"]["ok"] is True
    (warning,) = [w for w in report["warnings"] if "checker" in w]
    assert warning.startswith(f"input model invalid: {src} fails onnx.checker's full check")
    assert "Inferred shape and existing shape differ" in warning
    assert "not refused, since ONNX Runtime loads it" in warning
    assert f"{dst} is held to the checks the input passes (onnx.checker's basic check)" in warning
    assert report["verification"]["candidate"] == str(dst)
    no_staging_path(report, dst)
    assert check_level(dst)[0] == "basic"  # as valid as the input, no less
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["Relu", "Relu"]


def test_input_failing_even_the_basic_checker_is_held_to_ort_alone(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    model = relu_chain([2, 3])
    for value in ("1", "2"):  # duplicate metadata keys: the checker refuses, ORT does not
        model.metadata_props.add(key="k", value=value)
    onnx.save(model, src)
    assert check_level(src)[0] == "none"
    report = optimize(src, dst, Options(time_limit=120))
    assert report.status == "optimized"
    assert any(
        w.startswith(f"input model invalid: {src}") and "(no onnx.checker check)" in w
        for w in report.warnings
    ), report.warnings
    no_staging_path(report.to_json(), dst)


def test_input_the_checker_and_ort_both_reject_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = onnx.numpy_helper.from_array(np.ones((2, 3), np.int64), "w")  # Add(float, int64)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    assert main(["optimize", "-q", str(src), str(dst)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rewrite: error: {src}: invalid model: it fails onnx.checker's full")
    assert "inconsistent type tensor(int64)" in line and "ONNX Runtime cannot load it" in line
    assert not dst.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_valid_input_gives_no_checker_warning(tmp_path: Path) -> None:
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(relu_chain([2, 3]), src)
    report = optimize(src, dst, Options(time_limit=120))
    assert report.status == "optimized"
    assert not [w for w in report.warnings if "checker" in w]
    assert check_level(dst)[0] == "full"


def test_output_we_made_invalid_is_our_fault_and_names_the_output(tmp_path: Path) -> None:
    src = models.save(models.mlp(), tmp_path / "in.onnx")
    dst = tmp_path / "out.onnx"
    broken = load(src)
    broken.nodes[0].op_type = "NoSuchOp"  # what a bug of ours could write
    report = Report(str(src), str(dst))
    with staging(dst) as tmpdir:
        saver = Saver(src, dst, tmpdir / dst.name, report)
        assert saver.save_optimized(broken) is False
        assert list(tmpdir.iterdir()) == []
        saver.save_input(load(src))  # the fallback passes the full check
        assert check_level(tmpdir / dst.name)[0] == "full"
    (warning,) = report.warnings
    assert warning.startswith(f"optimized model rejected, input graph written instead: {dst}: ")
    assert "onnx.checker (full check) rejects the optimized model" in warning
    assert f"though the input {src} passes it" in warning and "NoSuchOp" in warning
    assert str(tmpdir) not in warning


def test_input_graph_we_cannot_write_back_names_both_files(tmp_path: Path) -> None:
    src = models.save(models.mlp(), tmp_path / "in.onnx")
    dst = tmp_path / "out.onnx"
    broken = load(src)
    broken.nodes[0].op_type = "NoSuchOp"
    with staging(dst) as tmpdir, pytest.raises(ModelError) as caught:
        Saver(src, dst, tmpdir / dst.name, Report(str(src), str(dst))).save_input(broken)
    message = str(caught.value)
    assert message.startswith(f"{dst}: onnx.checker (full check) rejects our copy of the input")
    assert f"the input {src} passes it" in message and str(tmpdir) not in message
