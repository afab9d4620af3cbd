"""The checks the family tests share (`tests/test_families*.py`): a model through
`rewrite optimize`, its agreement with the input in ORT, and the op types left opaque."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx

from rewrite.cli import main
from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.rules.fold import fold_to_fixpoint
from rewrite.verify import make_inputs
from tests.egraph.models import ort_run, write


def optimize(m: onnx.ModelProto, tmp_path: Path, *extra: str) -> tuple[onnx.ModelProto, dict]:
    """Run the CLI on `m`; exit status 0 and a verified, optimized report are required."""
    src, out, rep = write(m, tmp_path), tmp_path / "out.onnx", tmp_path / "report.json"
    assert main(["optimize", str(src), str(out), "--report", str(rep), "-q", *extra]) == 0
    report = json.loads(rep.read_text())
    assert report["status"] == "optimized", report.get("warnings")
    assert report["verification"]["ok"] is True
    result = onnx.load(out)
    onnx.checker.check_model(result, full_check=True)
    return result, report


def opaque_op_types(m: onnx.ModelProto, folder: Path) -> tuple[set[str], int]:
    """The op types `optimize` (with rules) keeps opaque in `m`, and its count of opaque
    nodes: the loaded model, folded to a fixpoint, then encoded, as `stages` does."""
    graph, _ = fold_to_fixpoint(load(write(m, folder, "opaque.onnx")))
    enc = encode(graph)
    return {e.op_type for e in enc.opaque.values()}, enc.opaque_nodes


def assert_agrees(m: onnx.ModelProto, out: onnx.ModelProto) -> None:
    """Every output of `out` matches `m`'s in ORT (dtype, shape, values) on seeds 0 and 1."""
    for seed in (0, 1):
        feeds = make_inputs(m, seed=seed)
        want, got = ort_run(m, feeds), ort_run(out, feeds)
        assert list(got) == list(want)
        for name, w in want.items():
            assert got[name].dtype == w.dtype and got[name].shape == w.shape, name
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=name)


def check_optimize_agrees(m: onnx.ModelProto, tmp_path: Path) -> None:
    """`optimize` (with rules) verifies `m`, does not raise its cost, agrees with it in ORT,
    and reports as many opaque nodes as `opaque_op_types` counts."""
    out, report = optimize(m, tmp_path)
    assert report["cost_after_us"] <= report["cost_before_us"]
    assert_agrees(m, out)
    _, count = opaque_op_types(m, tmp_path)
    assert report["egraph"]["opaque_nodes"] == count


def check_expected_opaque(m: onnx.ModelProto, tmp_path: Path, expected: set[str]) -> None:
    """The op types left opaque in `m` are exactly `expected`."""
    types, _ = opaque_op_types(m, tmp_path)
    assert types == expected
