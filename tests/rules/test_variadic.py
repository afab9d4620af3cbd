"""Variadic ops in rules and in the e-graph: `op.Concat(a, b, c, axis=0)` is the constructor
`Concat_3`; a node of any supported input count encodes typed and is written back as it was."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h

from rewrite.egraph.schema import constructors, egg_name
from rewrite.errors import RuleError
from rewrite.ops.registry import lookup
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.prove import PROVED, prove
from tests.egraph.models import model, vi
from tests.rules.test_saturate import encoded

RS = RuleSet("variadic")


@RS.rule
def concat3_as_pairs(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """Concat(a, b, c) = Concat(Concat(a, b), c)   on any axis"""
    return rewrite(op.Concat(a, b, c, axis=0)).to(op.Concat(op.Concat(a, b, axis=0), c, axis=0))


@RS.rule
def sum3_as_adds(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """Sum(a, b, c) = (a + b) + c"""
    return rewrite(op.Sum(a, b, c)).to((a + b) + c)


def concat3() -> onnx.ModelProto:
    return model(
        [
            h.make_node("Concat", ["a", "b", "c"], ["y0"], axis=0),
            h.make_node("Relu", ["y0"], ["y"]),
        ],
        [vi("a", [2, 3]), vi("b", [1, 3]), vi("c", [4, 3])],
        [vi("y", [7, 3])],
    )


def test_each_arity_is_its_own_constructor() -> None:
    spec = lookup("Concat")
    assert spec is not None and spec.egg is not None
    assert egg_name(spec) == egg_name(spec, 2) == "Concat"
    assert egg_name(spec, 3) == "Concat_3" and constructors()["Concat_16"] is spec
    with pytest.raises(ValueError, match="no typed form with 17 inputs"):
        egg_name(spec, 17)
    with pytest.raises(RuleError, match="takes 1 to 16 tensor input"):
        op.Concat(*[op.Relu(None) for _ in range(0)], axis=0)


def test_a_three_input_rule_is_proved_and_fires(tmp_path: Path) -> None:
    assert prove(RS.rules[0]).status == PROVED
    assert prove(RS.rules[1]).status == PROVED
    enc = encoded(concat3(), tmp_path)
    assert enc.opaque_nodes == 0
    stats = saturate(enc, [RS], Limits(iterations=2))
    assert stats.refused == [] and stats.matches["concat3_as_pairs"] > 0


def test_a_variadic_node_is_written_back_and_runs_the_same(tmp_path: Path) -> None:
    from rewrite.cli import main

    src, dst = tmp_path / "c3.onnx", tmp_path / "out.onnx"
    onnx.save(concat3(), src)
    assert main(["optimize", str(src), str(dst), "--no-rules"]) == 0
    out = onnx.load(dst)
    assert [n.op_type for n in out.graph.node] == ["Concat", "Relu"]
    assert len(out.graph.node[0].input) == 3
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in
             (("a", (2, 3)), ("b", (1, 3)), ("c", (4, 3)))}  # fmt: skip
    run = [ort.InferenceSession(str(p)).run(None, feeds)[0] for p in (src, dst)]
    assert np.array_equal(run[0], run[1])
