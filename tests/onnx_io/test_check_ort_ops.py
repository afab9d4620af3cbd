"""ORT's ops in the ONNX domain (SimplifiedLayerNormalization): the save check accepts them,
checked against ORT's schemas; ops neither onnx nor ORT defines are still refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.onnx_io import load, save
from rewrite.onnx_io.check import CheckerError, check_level
from rewrite.onnx_io.ort_ops import is_ort_only, ort_only_ops
from rewrite.report import Report
from rewrite.saving import Saver
from tests.onnx_io import models

EPS = 1e-5


def rms_model(*extra: onnx.NodeProto, dtype: int = T.FLOAT, **attrs: object) -> onnx.ModelProto:
    """y = Relu(SimplifiedLayerNormalization(x, w)) over the last axis, then `extra` nodes."""
    sln = h.make_node(
        "SimplifiedLayerNormalization", ["x", "w"], ["n"], axis=-1, epsilon=EPS, **attrs
    )
    w = models.rand((8,), 1).astype(onnx.helper.tensor_dtype_to_np_dtype(dtype))
    return models.model(
        [sln, h.make_node("Relu", ["n"], ["y"]), *extra],
        [models.vi("x", ["batch", 8], dtype)],
        [models.vi("y", ["batch", 8], dtype)],
        inits=[models.const("w", w)],
    )


def rms_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    r = np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + EPS)
    return np.maximum(x64 / r * w, 0.0)


def test_ort_lists_simplified_layer_norm_as_its_onnx_domain_op() -> None:
    assert "SimplifiedLayerNormalization" in ort_only_ops()
    assert is_ort_only("", "SimplifiedLayerNormalization")
    assert is_ort_only("ai.onnx", "SimplifiedLayerNormalization")
    assert not is_ort_only("", "LayerNormalization")  # onnx's own
    assert not is_ort_only("com.microsoft", "SimplifiedLayerNormalization")
    assert not is_ort_only("", "NotAnOp")


def test_rms_norm_in_the_onnx_domain_passes_the_save_check_and_runs(tmp_path: Path) -> None:
    src = models.save(rms_model(), tmp_path / "in.onnx")
    with pytest.raises(onnx.checker.ValidationError, match="No Op registered"):
        onnx.checker.check_model(str(src), full_check=True)  # plain onnx refuses it
    assert check_level(src) == ("full", "")
    out = tmp_path / "out.onnx"
    save(load(src), out)  # the full check, by default
    sess = models.session(out)
    x = models.rand((3, 8), 7)
    (y,) = sess.run(None, {"x": x})
    w = models.rand((8,), 1)
    assert np.max(np.abs(y - rms_reference(x, w))) < 1e-5
    assert not onnx.defs.has("SimplifiedLayerNormalization")  # the registry is left as it was


def test_rms_norm_passes_the_check_with_external_data(tmp_path: Path) -> None:
    src = models.save(rms_model(), tmp_path / "in.onnx")
    out = tmp_path / "out.onnx"
    save(load(src), out, external=True)
    assert check_level(out) == ("full", "")
    models.assert_same_outputs(src, out)


def test_an_unknown_op_in_the_onnx_domain_is_still_refused(tmp_path: Path) -> None:
    bogus = h.make_node("NotAnOp", ["y"], ["z"])
    m = rms_model(bogus)
    m.graph.output[0].name = "z"
    src = models.save(m, tmp_path / "in.onnx")
    level, reason = check_level(src)
    assert level == "none" and "NotAnOp" in reason
    with pytest.raises(CheckerError, match="NotAnOp") as caught:
        save(load(src), tmp_path / "out.onnx")
    assert caught.value.level == "full"
    assert not (tmp_path / "out.onnx").exists()


def test_ort_ops_are_checked_against_orts_schema(tmp_path: Path) -> None:
    """Known is not waved through: an attribute or a type ORT's schema refuses still fails."""
    for i, m in enumerate([rms_model(bogus=1), rms_model(dtype=T.INT32)]):
        src = models.save(m, tmp_path / f"in{i}.onnx")
        level, reason = check_level(src)
        assert level != "full" and "No Op registered" not in reason, reason


def test_the_saver_notes_that_the_output_is_not_portable(tmp_path: Path) -> None:
    src = models.save(models.mlp(), tmp_path / "in.onnx")
    dst, staged = tmp_path / "out.onnx", tmp_path / "staged.onnx"
    report = Report(str(src), str(dst))
    saver = Saver(src, dst, staged, report)
    assert saver.save_optimized(load(models.save(rms_model(), tmp_path / "rms.onnx")))
    (note,) = report.notes
    assert note.startswith(f"{dst} uses ONNX Runtime's ops in the ONNX domain")
    assert "SimplifiedLayerNormalization" in note and "not portable" in note
    assert report.warnings == []
    saver.save_input(load(src))  # the fallback has no such op: the note goes
    assert report.notes == []
