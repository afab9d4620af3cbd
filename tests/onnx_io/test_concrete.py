"""observed_types: value types at the user's input sizes, from one ORT run; `--dim` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.cli import main
from rewrite.onnx_io import load
from rewrite.onnx_io.concrete import observed_types, sizing_types
from tests.egraph.models import const, ints, model, rand, vi, write


def dynamic_block() -> onnx.ModelProto:
    """x (batch, seq, 8) -> Reshape to (batch*seq, 8) through a computed shape -> MatMul ->
    Reshape back: the exporter pattern whose sizes shape inference loses."""
    return model(
        [
            h.make_node("Shape", ["x"], ["s"]),
            h.make_node("Gather", ["s", "zero"], ["b"], axis=0),
            h.make_node("Gather", ["s", "one"], ["q"], axis=0),
            h.make_node("Mul", ["b", "q"], ["bq"]),
            h.make_node("Unsqueeze", ["bq", "axes0"], ["bq1"]),
            h.make_node("Concat", ["bq1", "eight"], ["flat_shape"], axis=0),
            h.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
            h.make_node("MatMul", ["flat", "w"], ["mm"]),
            h.make_node("Reshape", ["mm", "s"], ["y"]),
        ],
        [vi("x", ["batch", "seq", 8])],
        [vi("y", ["batch", "seq", 8])],
        inits=[
            const("zero", np.array(0, np.int64)),
            const("one", np.array(1, np.int64)),
            const("axes0", ints(0)),
            const("eight", ints(8)),
            const("w", rand((8, 8), 3)),
        ],
    )


def test_observed_types_are_the_sizes_one_run_shows(tmp_path: Path) -> None:
    path = write(dynamic_block(), tmp_path)
    graph = load(path)
    assert not graph.types["mm"].is_static  # what shape inference leaves
    types, note = observed_types(path, {"batch": 3, "seq": 5})
    assert note == ""
    assert types["mm"].shape == (15, 8) and types["y"].shape == (3, 5, 8)


def test_observed_types_never_raise(tmp_path: Path) -> None:
    types, note = observed_types(tmp_path / "missing.onnx", {"batch": 2})
    assert types == {} and "sizing run failed" in note


@pytest.mark.parametrize("bad", ["batch", "batch=0", "=3", "batch=x"])
def test_dim_option_is_checked(bad: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write(dynamic_block(), tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["optimize", str(path), str(tmp_path / "out.onnx"), "--dim", bad])
    assert e.value.code == 2 and "expected NAME=N" in capsys.readouterr().err


def test_dim_prices_at_the_given_sizes(tmp_path: Path) -> None:
    path = write(dynamic_block(), tmp_path)
    costs = []
    for dims in ([], ["--dim", "batch=64", "--dim", "seq=128"]):
        rep = tmp_path / "r.json"
        args = ["optimize", str(path), str(tmp_path / "out.onnx"), "-q", "--report", str(rep)]
        assert main([*args, *dims]) == 0
        report = json.loads(rep.read_text())
        costs.append(report["cost_by_op"]["MatMul"][0])
        assert report["verification"]["ok"] is True
    assert costs[1] > 20 * costs[0]  # 64 x 128 rows instead of 1


def positions() -> onnx.ModelProto:
    """Static input, symbolic value inside: `Range(0, seq)` rows of a table (shape inference
    cannot size a Range)."""
    return model(
        [
            h.make_node("Shape", ["x"], ["s"]),
            h.make_node("Gather", ["s", "one"], ["q"], axis=0),
            h.make_node("Range", ["zero", "q", "one"], ["ids"]),
            h.make_node("Gather", ["table", "ids"], ["pos"], axis=0),
            h.make_node("Add", ["x", "pos"], ["y"]),
        ],
        [vi("x", [2, 4, 8])],
        [vi("y", [2, 4, 8])],
        inits=[
            const("zero", np.array(0, np.int64)),
            const("one", np.array(1, np.int64)),
            const("table", rand((16, 8), 5)),
        ],
    )


def test_sizing_runs_only_where_sizes_are_missing_and_knowable(tmp_path: Path) -> None:
    graph = load(write(dynamic_block(), tmp_path))
    assert sizing_types(graph, {}) == ({}, "")  # symbolic inputs, no sizes given: no run
    types, _ = sizing_types(graph, {"batch": 2, "seq": 4})
    assert types["mm"].shape == (8, 8)
    inside = load(write(positions(), tmp_path, "positions.onnx"))
    assert not inside.types["pos"].is_static
    assert sizing_types(inside, {})[0]["pos"].shape == (4, 8)  # static inputs: no --dim needed
    static = dynamic_block()
    for d, size in zip(static.graph.input[0].type.tensor_type.shape.dim, (2, 4, 8), strict=True):
        d.dim_value = size
    resolved = load(write(static, tmp_path, "static.onnx"))  # inference sizes every value
    assert all(t.is_static for t in resolved.types.values())
    assert sizing_types(resolved, {}) == ({}, "")
