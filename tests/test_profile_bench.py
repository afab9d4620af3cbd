"""bench/profile.py: ORT's profiler events summed per executed op type and bucket, warm-up
runs excluded, on a real session of a model built here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as P
from onnx import helper as h

from bench.profile import bucket, buckets, main, profile


def _model(path: Path) -> Path:
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    g = h.make_graph(
        [
            h.make_node("MatMul", ["x", "w"], ["m"]),
            h.make_node("Sigmoid", ["m"], ["s"]),
            h.make_node("Mul", ["m", "s"], ["y"]),  # x·sigmoid(x): ORT fuses it (QuickGelu)
            h.make_node("Exp", ["y"], ["z"]),
        ],
        "g",
        [h.make_tensor_value_info("x", P.FLOAT, [32, 64])],
        [h.make_tensor_value_info("z", P.FLOAT, [32, 64])],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def test_kernels_are_summed_per_executed_op_and_bucketed(tmp_path: Path) -> None:
    src = _model(tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    p = profile(src, {"x": x}, threads=1, runs=4, warmup=2)
    ops = p["per_op_us"]
    assert "MatMul" in ops and "Exp" in ops, ops
    assert "Sigmoid" not in ops and "QuickGelu" in ops, "the executed (fused) graph is profiled"
    b = buckets(ops)
    assert b["gemm"] == ops["MatMul"] and b["attention"] == 0.0
    assert abs(b["other"] - ops["Exp"] - ops["QuickGelu"]) < 1e-6
    assert 0 < sum(b.values()) <= p["run_us"], "per-run kernel time fits in a run"
    assert bucket("FusedMatMul") == "gemm" and bucket("Attention") == "attention"


def test_main_profiles_input_and_a_given_output(tmp_path: Path, capsys) -> None:
    models, out = tmp_path / "in", tmp_path / "out"
    models.mkdir(), out.mkdir()
    _model(models / "m.onnx"), _model(out / "m.onnx")
    assert main(["--models", str(models), "--optimized", str(out), "--runs", "2"]) == 0
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| m |")]
    assert len(row) == 1, row
    cells = [c.strip() for c in row[0].split("|")]
    assert cells[2].count("->") == 1 and 0.2 < float(cells[5]) < 5, cells  # same model twice
