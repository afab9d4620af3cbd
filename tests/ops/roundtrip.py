"""Typed ops through the whole pipeline: `optimize --no-rules --no-fold` of a model built in
code must write it back with every node typed on the way (0 opaque), the same ops, a model the
full checker accepts (the caller then compares ORT's outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx

from rewrite.cli import main


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
