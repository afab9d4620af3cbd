"""`optimize --precision auto`: opt-in, budgeted, measured; bad options are refused up front."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from rewrite.cli import main
from rewrite.onnx_io.feeds import save_inputs
from tests.precision.models import mlp


def _model(tmp_path: Path) -> Path:
    p = tmp_path / "mlp.onnx"
    onnx.save(mlp((256, 1024, 1024, 256), rows=128), str(p))
    return p


def test_precision_auto_lowers_within_the_budget_and_is_measured_faster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out, rep = _model(tmp_path), tmp_path / "out.onnx", tmp_path / "r.json"
    code = main(
        ["optimize", str(src), str(out), "--precision", "auto", "--max-error", "0.05",
         "--report", str(rep)]
    )  # fmt: skip
    assert code == 0
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert ops.count("DynamicQuantizeMatMul") >= 1
    r = json.loads(rep.read_text())
    p = r["precision"]
    assert p["max_error"] == 0.05 and p["metric"] == "maxrel"
    assert all(v <= 0.05 for v in p["error"]["held_back"].values())
    assert len(p["changed"]) == ops.count("DynamicQuantizeMatMul")
    assert p["measured"]["speedup"] > 1 and r["measured"] == p["measured"]
    assert r["nodes_after"]["DynamicQuantizeMatMul"] == ops.count("DynamicQuantizeMatMul")
    text = capsys.readouterr().out
    assert "precision  lowered" in text and "held back" in text and "measured   " in text


def test_without_precision_auto_nothing_is_lowered(tmp_path: Path) -> None:
    src, out = _model(tmp_path), tmp_path / "out.onnx"
    assert main(["optimize", str(src), str(out)]) == 0
    assert "DynamicQuantizeMatMul" not in {n.op_type for n in onnx.load(str(out)).graph.node}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-error", "0.01"], "need --precision auto"),
        (["--precision", "auto"], "needs --max-error"),
        (["--precision", "auto", "--max-error", "0"], "needs --max-error"),
    ],
)
def test_inconsistent_precision_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    src, out = _model(tmp_path), tmp_path / "out.onnx"
    assert main(["optimize", str(src), str(out), *args]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_calibration_file_that_does_not_fit_the_model_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = _model(tmp_path), tmp_path / "out.onnx"
    bad = save_inputs({"x": np.zeros((3, 3), np.float32)}, tmp_path / "bad.npz")
    code = main(
        ["optimize", str(src), str(out), "--precision", "auto", "--max-error", "0.01",
         "--calibration", str(bad)]
    )  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "bad.npz" in err and not out.exists()
