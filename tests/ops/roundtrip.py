"""Typed ops through the whole pipeline: `optimize --no-rules --no-fold` of a model built in
code must write it back with every node typed on the way (0 opaque), the same ops, a model the
full checker accepts (the caller then compares ORT's outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type hints

from rewrite.cli import main
from rewrite.egraph.encode import encode
from rewrite.onnx_io import load
from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules.load import select_rulesets


def round_trip(model: onnx.ModelProto, folder: Path) -> onnx.ModelProto:
    """The model `optimize` writes for `model` (greedy extraction, in this process)."""
    src, dst, rep = folder / "in.onnx", folder / "out.onnx", folder / "r.json"
    onnx.save(model, src)
    argv = [str(src), str(dst), "--no-rules", "--no-fold", "--no-isolate", "-q"]
    assert main(["optimize", *argv, "--extractor", "greedy", "--report", str(rep)]) == 0
    report = json.loads(rep.read_text())
    assert report["status"] == "optimized"
    assert report["egraph"]["opaque_nodes"] == 0
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    ops = sorted(n.op_type for n in model.graph.node)
    assert sorted(n.op_type for n in out.graph.node) == ops
    return out


def assert_optimizes_identically(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], folder: Path
) -> None:
    """`model` (one typed op) encodes with no opaque node, and `optimize` with no rules writes a
    model whose ORT outputs are bit-identical to the input's (same dtypes and shapes)."""
    src, dst = folder / "in.onnx", folder / "out.onnx"
    onnx.save(model, src)
    enc = encode(load(src))
    op = model.graph.node[0].op_type
    assert enc.opaque_nodes == 0 and enc.typed == 1, f"{op} is not encoded typed"
    opts = Options(rulesets=select_rulesets(no_rules=True, target="cpu"), isolate=False)
    report = optimize(src, dst, opts)
    assert report.status == STATUS_OPTIMIZED, report.warnings
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(str(dst)).run(None, feeds)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.shape == g.shape
        assert w.tobytes() == g.tobytes(), f"{op}: {w} != {g}"
