"""`make demo` (the README's first command) works: run by make itself, from the Makefile as it
stands, in a scratch copy of the files it reads, with this test run's virtual environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]
DEMO_INPUT = Path("examples/models/tiny_bert_block.onnx")
DEMO_OUTPUT = Path("out/tiny_bert_block.opt.onnx")
DEMO_REPORT = Path("out/report.json")


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs: token ids below the vocabulary size of the embedding they index."""
    inits = {t.name: t for t in model.graph.initializer}
    vocab = {
        n.input[1]: numpy_helper.to_array(inits[n.input[0]]).shape[0]
        for n in model.graph.node
        if n.op_type == "Gather" and n.input[0] in inits
    }
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if vi.name in vocab:
            feeds[vi.name] = rng.integers(0, vocab[vi.name], size=shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_make_demo_writes_a_checked_model_that_agrees_with_its_input(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / DEMO_INPUT).parent.mkdir(parents=True)
    shutil.copy(ROOT / DEMO_INPUT, tmp_path / DEMO_INPUT)
    venv = Path(sys.prefix)  # the environment running this test has `rewrite` installed
    assert (venv / "bin" / "rewrite").exists(), f"no rewrite command in {venv}"
    # `-o STAMP`: the environment counts as installed; make runs the demo recipe only
    run = subprocess.run(
        ["make", "-o", f"{venv}/.installed", f"VENV={venv}", "demo"],
        cwd=tmp_path,
        env={**os.environ, "MAKEFLAGS": ""},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "pip install" not in run.stdout, "make demo tried to reinstall the environment"
    out = tmp_path / DEMO_OUTPUT
    assert out.is_file(), f"make demo wrote no {DEMO_OUTPUT}: {run.stdout}"
    onnx.checker.check_model(str(out), full_check=True)
    report = json.loads((tmp_path / DEMO_REPORT).read_text())
    assert report["status"] == "optimized" and report["verification"]["ok"] is True
    src = onnx.load(str(ROOT / DEMO_INPUT))
    assert len(onnx.load(str(out)).graph.node) < len(src.graph.node)
    for seed in range(3):  # an independent check: this test's own inputs and tolerance
        feeds = _feeds(src, seed)
        for want, got in zip(_run(ROOT / DEMO_INPUT, feeds), _run(out, feeds), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            scale = max(1.0, float(np.max(np.abs(want))))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)
