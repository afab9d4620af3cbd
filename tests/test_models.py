"""Issue-level acceptance: real models through the whole pipeline.

Every `onnx/backend/test/data/light` model (always) and every corpus model (slow; in
`tests.conftest.CORPUS`, which `make test-corpus` fills; skipped without it, failed in CI):
exit status 0, the output passes the full checker and loads in ORT, the differential check
passes, the node count is not above the input file's, and the report is written. With no
rules, every output is bit-identical to the input's.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest

from rewrite.cli import main
from rewrite.verify import differential
from tests.conftest import corpus_models, require

LIGHT = Path(onnx.__file__).parent / "backend/test/data/light"
LIGHT_MODELS = sorted(LIGHT.glob("*.onnx"))
CORPUS_MODELS = corpus_models()


def _node_count(path: Path) -> int:
    return len(onnx.load(str(path), load_external_data=False).graph.node)


def _optimize_and_check(model: Path, tmp_path: Path, *extra: str) -> dict:
    out, rep = tmp_path / "out.onnx", tmp_path / "report.json"
    before = model.read_bytes() if model.stat().st_size < 50_000_000 else None
    assert main(["optimize", str(model), str(out), "--report", str(rep), "-q", *extra]) == 0
    report = json.loads(rep.read_text())
    assert report["status"] == "optimized"
    onnx.checker.check_model(str(out), full_check=True)
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    if "--no-verify" not in extra:
        assert report["verification"]["ok"] is True
    assert _node_count(out) <= _node_count(model)
    if before is not None:
        assert model.read_bytes() == before, "the input file was modified"
    return report


@pytest.mark.parametrize("model", LIGHT_MODELS, ids=lambda p: p.stem)
def test_light_model_optimizes_and_verifies(model: Path, tmp_path: Path) -> None:
    report = _optimize_and_check(model, tmp_path)
    assert report["saturation"]["stop_reason"] in {
        "saturated",
        "iteration_limit",
        "time_limit",
        "node_limit",
    }


@pytest.mark.parametrize("model", LIGHT_MODELS[:3], ids=lambda p: p.stem)
def test_no_rules_is_bit_identical(model: Path, tmp_path: Path) -> None:
    _optimize_and_check(model, tmp_path, "--no-rules")
    result = differential(str(model), str(tmp_path / "out.onnx"), trials=2)
    assert result.ok and all(o.bit_identical for o in result.outputs), result.summary()


@pytest.mark.slow
@pytest.mark.parametrize("model", CORPUS_MODELS, ids=lambda p: p.stem)
def test_corpus_model_optimizes_and_verifies(model: Path, tmp_path: Path) -> None:
    report = _optimize_and_check(require(model), tmp_path)
    assert report["stages"]


@pytest.mark.slow
@pytest.mark.parametrize("model", CORPUS_MODELS, ids=lambda p: p.stem)
def test_corpus_no_rules_is_bit_identical(model: Path, tmp_path: Path) -> None:
    _optimize_and_check(require(model), tmp_path, "--no-rules", "--no-verify")
    result = differential(str(model), str(tmp_path / "out.onnx"), trials=1)
    assert result.ok and all(o.bit_identical for o in result.outputs), result.summary()
