"""`rules explain`: every site counted, each named by the node the pattern's root matched, and
bad models refused with a ModelError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.errors import ModelError
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.explain import MAX_SITES, explain
from rulesets.cleanup import CLEANUP
from tests.egraph.models import const, model, rand, vi, write

N = MAX_SITES + 1


def reshape_chains(second: list[int], out: list[int]) -> onnx.ModelProto:
    """N chains x_i -> Reshape [3, 4] (node inner_i) -> Reshape `second` (node outer_i) -> y_i."""
    nodes = []
    for i in range(N):
        nodes.append(h.make_node("Reshape", [f"x{i}", "s1"], [f"r{i}"], name=f"inner{i}"))
        nodes.append(h.make_node("Reshape", [f"r{i}", "s2"], [f"y{i}"], name=f"outer{i}"))
    return model(
        nodes,
        [vi(f"x{i}", [2, 6]) for i in range(N)],
        [vi(f"y{i}", list(out)) for i in range(N)],
        inits=[const("s1", np.array([3, 4], np.int64)), const("s2", np.array(second, np.int64))],
    )


def test_every_match_is_counted_and_named_by_the_root_node(tmp_path: Path) -> None:
    path = write(reshape_chains([4, 3], [4, 3]), tmp_path)
    result = explain("reshape_reshape", path, [CLEANUP])
    (rx,) = result.rewrites
    assert result.matched and rx.n_matched == N
    assert rx.matched == [f"y{i} (node outer{i})" for i in range(MAX_SITES)]
    text = result.text()
    assert f"MATCHED at {N} site(s): y0 (node outer0), " in text
    assert text.rstrip().endswith("y4 (node outer4), and 1 more")
    assert rx.steps[0].label == "pattern Reshape(x, shape=s1)"
    assert rx.steps[0].sites >= N and rx.steps[-1].sites == N


def test_nearest_partial_matches_are_all_counted(tmp_path: Path) -> None:
    # y_i = x_i * 2: the pattern matches every Mul, the condition `c.is_one()` none.
    nodes = [h.make_node("Mul", [f"x{i}", "two"], [f"y{i}"], name=f"scale{i}") for i in range(N)]
    m = model(
        nodes,
        [vi(f"x{i}", [3]) for i in range(N)],
        [vi(f"y{i}", [3]) for i in range(N)],
        inits=[const("two", np.full(3, 2.0, np.float32))],
    )
    result = explain("mul_one", write(m, tmp_path), [CLEANUP])
    assert not result.matched
    for rx in result.rewrites:  # x · c and c · x
        assert rx.failed_step == "condition c.is_one()"
        assert rx.n_near == N and rx.near == [f"y{i} (node scale{i})" for i in range(MAX_SITES)]
    assert "nearest partial matches: y0 (node scale0), " in result.text()
    assert "y4 (node scale4), and 1 more" in result.text()


def hollow(tmp_path: Path) -> Path:
    """A MatMul whose weight declares dims [4, 3] but holds no values (a hollow model)."""
    m = model(
        [h.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [vi("x", [2, 4])],
        [vi("y", [2, 3])],
        inits=[const("w", rand((4, 3), 0))],
    )
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.ClearField("float_data")
    path = tmp_path / "hollow.onnx"
    onnx.save(m, path)
    return path


def test_a_model_without_its_weights_is_a_model_error(tmp_path: Path) -> None:
    path = hollow(tmp_path)
    with pytest.raises(ModelError, match=r"hollow\.onnx: tensor 'w' declares dims \[4, 3\]"):
        explain("identity_elim", path, [CLEANUP])


def test_a_rule_egglog_refuses_leaves_the_others_explainable(tmp_path: Path) -> None:
    # Two rule sets with the same rule name reach saturation only through the API (loading
    # refuses them): egglog refuses the second definition alone.
    twin = RuleSet("twin")

    @twin.rule
    def identity_elim(x: Tensor) -> Rewrite:
        """Identity(x) = x"""
        return rewrite(op.Identity(x)).to(x)

    m = model([h.make_node("Identity", ["x"], ["y"])], [vi("x", [2], T.FLOAT)], [vi("y", [2])])
    result = explain("identity_elim", write(m, tmp_path), [CLEANUP, twin])
    assert result.matched and result.rewrites[0].n_matched == 1
