"""Every subcommand: `--help` works, bad input is one error line with exit 1 (never a
traceback), and rule files are accepted or refused at load, never half-used at compile time."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.cli import build_parser, main
from tests.egraph.models import const, model, rand, vi, write

REPO = Path(__file__).resolve().parents[1]
REWRITE = Path(sys.executable).parent / "rewrite"


def command_paths(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every command and sub-command of `parser` as its arguments: (), ("rules", "list"), ..."""
    out = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += command_paths(sub, (*prefix, name))
    return out


COMMANDS = command_paths(build_parser())


def test_the_command_tree_is_walked() -> None:
    expected = {("optimize",), ("rules", "list"), ("rules", "explain"), ("verify",)}
    assert expected | {("calibrate",), ("rules",), ()} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "rewrite")
def test_help_of_every_command(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([*path, "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {' '.join(('rewrite', *path))}")


def test_optimize_help_as_a_subprocess() -> None:
    done = subprocess.run(
        [str(REWRITE), "optimize", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--max-memory MB" in done.stdout and "% of RAM" in done.stdout and done.stderr == ""


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rewrite: error: ")
    return lines[0]


def matmul() -> onnx.ModelProto:
    return model(
        [h.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [vi("x", [2, 4])],
        [vi("y", [2, 3])],
        inits=[const("w", rand((4, 3), 0))],
    )


def test_rules_explain_on_a_model_whose_data_file_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(matmul(), path, save_as_external_data=True, location="w.bin", size_threshold=0)
    (tmp_path / "w.bin").unlink()
    assert main(["rules", "explain", "identity_elim", str(path)]) == 1
    line = error_line(capsys)
    assert str(path) in line and "'w.bin', which does not exist" in line


def test_rules_explain_on_a_model_without_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = matmul()
    m.graph.initializer[0].ClearField("raw_data")  # dims kept, values gone: a hollow model
    m.graph.initializer[0].ClearField("float_data")
    path = tmp_path / "hollow.onnx"
    onnx.save(m, path)
    assert main(["rules", "explain", "identity_elim", str(path)]) == 1
    line = error_line(capsys)
    assert f"{path}: tensor 'w' declares dims [4, 3] but holds no data" in line


def test_verify_report_in_a_missing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "no" / "report.json"
    assert main(["verify", "--no-sample", "--report", str(report)]) == 1
    assert f"{report}: the folder {report.parent} does not exist" in error_line(capsys)
    assert capsys.readouterr().out == ""  # refused before any proof ran


def test_calibrate_out_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--quick", "--out", str(tmp_path)]) == 1
    assert "cannot write the calibration table there" in error_line(capsys)


RELU_RELU = '''

@{rs}.rule
def relu_relu(x: Tensor) -> Rewrite:
    """Relu(Relu(x)) = Relu(x)"""
    return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x))
'''
HEADER = "from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite\n"


def test_a_rule_name_in_two_rule_files_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = write(relu_chain(1.0), tmp_path), tmp_path / "out.onnx"
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(HEADER + "A = RuleSet('a')\n" + RELU_RELU.format(rs="A"))
    b.write_text(HEADER + "B = RuleSet('b')\n" + RELU_RELU.format(rs="B"))
    assert main(["optimize", str(src), str(dst), "--rules", str(a), "--rules", str(b)]) == 1
    line = error_line(capsys)
    assert f"rule 'relu_relu' is defined twice: {a}:5 (ruleset 'a') and {b}:5" in line
    assert not dst.exists()
    assert main(["verify", str(a), str(b)]) == 1
    assert "rule 'relu_relu' is defined twice" in error_line(capsys)


def relu_chain(c: float) -> onnx.ModelProto:
    """y = Relu(Relu((x · c) / c)) with c a one-element float constant."""
    return model(
        [
            h.make_node("Mul", ["x", "c"], ["m"]),
            h.make_node("Div", ["m", "c"], ["d"]),
            h.make_node("Relu", ["d"], ["r"]),
            h.make_node("Relu", ["r"], ["y"]),
        ],
        [vi("x", ["batch", 3])],
        [vi("y", ["batch", 3])],
        inits=[const("c", np.array([c], np.float32))],
    )


SCALE = '''

@MINE.rule
def mul_by_one(x: Tensor, s: Tensor) -> Rewrite:
    """x · s = x   when s is a one-element 1 (the int literal compares with a float value)"""
    y = x * s
    return rewrite(y).to(x, s.is_scalar(), s.value() == 1, y.shape == x.shape)


@MINE.rule
def div_by_one(x: Tensor, s: Tensor) -> Rewrite:
    """x / s = x   when s is a one-element 1"""
    y = x / s
    return rewrite(y).to(x, s.is_scalar(), s.value() == 1, y.shape == x.shape)
'''


def test_a_float_guard_with_an_int_literal_is_proved_and_used(tmp_path: Path) -> None:
    rules = tmp_path / "mine.py"
    rules.write_text(HEADER + "MINE = RuleSet('mine')\n" + SCALE + RELU_RELU.format(rs="MINE"))
    src, dst, rep = write(relu_chain(1.0), tmp_path), tmp_path / "out.onnx", tmp_path / "r.json"
    args = ["optimize", str(src), str(dst), "--rules", str(rules), "--ruleset", "mine", "-q"]
    assert main([*args, "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    matches = report["saturation"]["rule_matches"]
    assert matches["mul_by_one"] > 0 and matches["div_by_one"] > 0 and matches["relu_relu"] > 0
    assert report["saturation"]["refused_rules"] == []
    assert report["nodes_after"] == {"Relu": 1}


def test_optimize_refuses_a_model_without_weights_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = matmul()
    m.graph.initializer[0].ClearField("raw_data")
    m.graph.initializer[0].ClearField("float_data")
    src, dst = tmp_path / "hollow.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert main(["optimize", str(src), str(dst)]) == 1
    assert f"{src}: tensor 'w' declares dims [4, 3] but holds no data" in error_line(capsys)
    assert not dst.exists()


def test_rules_ops_lists_every_typed_op_and_the_multi_output_forms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rewrite.rules.ops import typed_ops

    assert main(["rules", "ops"]) == 0
    out = capsys.readouterr().out
    for name in [*typed_ops(""), *(f"ms.{n}" for n in typed_ops("com.microsoft"))]:
        assert f"op.{name}(" in out, name
    assert "op.Split(x, axis=a, sizes=" in out
    assert "op.LayerNormalization(..., outputs=n)" in out
    assert "op.ms.SkipLayerNormalization(..., outputs=n)" in out
