"""`rewrite optimize`: exit status, the report file, one-line errors, the input left alone."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.cli import main
from tests.egraph.models import assert_bit_identical, const, model, rand, vi, write

REPO = Path(__file__).resolve().parents[1]
REWRITE = Path(sys.executable).parent / "rewrite"


def cleanable() -> onnx.ModelProto:
    """MatMul -> Identity -> Transpose pair -> Mul by ones: three cleanup rules fire."""
    return model(
        [
            h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
            h.make_node("Identity", ["m"], ["i"], name="id"),
            h.make_node("Transpose", ["i"], ["t1"], name="tr1", perm=[1, 0]),
            h.make_node("Transpose", ["t1"], ["t2"], name="tr2", perm=[1, 0]),
            h.make_node("Mul", ["t2", "one"], ["y"], name="mul"),
        ],
        [vi("x", ["batch", 4])],
        [vi("y", ["batch", 3])],
        inits=[const("w", rand((4, 3), 1)), const("one", np.ones(3, np.float32))],
    )


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return write(cleanable(), tmp_path)


def check_report(path: Path) -> dict[str, object]:
    report = json.loads(path.read_text())
    for key in (
        "status",
        "stages",
        "saturation",
        "nodes_before",
        "nodes_after",
        "cost_before_us",
        "cost_after_us",
        "verification",
    ):
        assert key in report, key
    assert report["status"] == "optimized"
    assert {"load", "encode", "saturate", "extract", "decode", "save", "verify"} <= set(
        report["stages"]
    )
    assert report["saturation"]["stop_reason"] == "saturated"
    assert isinstance(report["saturation"]["rule_matches"], dict)
    assert report["verification"]["ok"] is True
    assert report["cost_after_us"] <= report["cost_before_us"]
    verified = report["rules_verified"]  # every rule used, with how it was proved
    assert isinstance(verified, list) and verified
    assert {r["status"] for r in verified} == {"proved"} and all(r["bound"] for r in verified)
    by_op = report["cost_by_op"]  # where the estimated saving is, per op; sums to the totals
    assert isinstance(by_op, dict) and by_op
    for i, total in enumerate((report["cost_before_us"], report["cost_after_us"])):
        assert sum(v[i] for v in by_op.values()) == pytest.approx(total, rel=1e-3, abs=1e-2)
    return report


def test_optimize_writes_model_and_report(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sha(src)
    dst, rep = tmp_path / "out.onnx", tmp_path / "report.json"
    assert main(["optimize", str(src), str(dst), "--report", str(rep)]) == 0
    assert sha(src) == before
    report = check_report(rep)
    matches = report["saturation"]["rule_matches"]  # type: ignore[index]
    assert matches["identity_elim"] > 0 and matches["transpose_transpose"] > 0
    assert matches["mul_one"] > 0
    assert report["nodes_before"] == {"Identity": 1, "MatMul": 1, "Mul": 1, "Transpose": 2}
    assert report["nodes_after"] == {"MatMul": 1}
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    assert_bit_identical(cleanable(), out)
    assert "optimized:" in capsys.readouterr().out


def test_optimize_as_a_subprocess(src: Path, tmp_path: Path) -> None:
    before = sha(src)
    dst, rep = tmp_path / "out.onnx", tmp_path / "report.json"
    done = subprocess.run(
        [str(REWRITE), "optimize", str(src), str(dst), "--report", str(rep), "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
    check_report(rep)
    assert sha(src) == before and dst.exists()


def test_no_rules_is_bit_identical(src: Path, tmp_path: Path) -> None:
    before = sha(src)
    dst, rep = tmp_path / "out.onnx", tmp_path / "report.json"
    assert main(["optimize", str(src), str(dst), "--no-rules", "-q", "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["saturation"]["stop_reason"] == "no rules"
    assert report["nodes_after"] == report["nodes_before"]
    assert_bit_identical(cleanable(), onnx.load(dst))
    assert sha(src) == before


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rewrite: error: ")
    return lines[0]


def test_missing_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.onnx"
    assert main(["optimize", str(missing), str(tmp_path / "out.onnx")]) == 1
    line = error_line(capsys)
    assert str(missing) in line and "no such file" in line
    assert not (tmp_path / "out.onnx").exists()


def test_output_is_input(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sha(src)
    assert main(["optimize", str(src), str(src)]) == 1
    line = error_line(capsys)
    assert "refusing" in line and str(src) in line
    assert sha(src) == before


def test_output_is_input_through_another_spelling(
    src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sha(src)
    other = src.parent / "." / ".." / src.parent.name / src.name
    assert main(["optimize", str(src), str(other)]) == 1
    assert "refusing" in error_line(capsys)
    assert sha(src) == before


def test_unknown_ruleset(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dst = tmp_path / "out.onnx"
    assert main(["optimize", str(src), str(dst), "--ruleset", "nosuch"]) == 1
    line = error_line(capsys)
    assert "unknown ruleset nosuch" in line and "available: cleanup" in line
    assert not dst.exists()


def test_missing_output_folder(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "no" / "such" / "out.onnx"
    assert main(["optimize", str(src), str(dst)]) == 1
    line = error_line(capsys)
    assert "does not exist" in line and str(dst.parent) in line
    assert not dst.parent.exists()


def test_named_ruleset_and_limits(src: Path, tmp_path: Path) -> None:
    dst, rep = tmp_path / "out.onnx", tmp_path / "report.json"
    args = ["optimize", str(src), str(dst), "--ruleset", "cleanup", "--iter-limit", "1", "-q"]
    assert main([*args, "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["saturation"]["stop_reason"] == "iteration_limit"
    assert report["options"]["rulesets"] == ["cleanup"]
    assert report["options"]["limits"]["iterations"] == 1


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["optimize"])
    assert e.value.code == 2
    assert "usage:" in capsys.readouterr().err
