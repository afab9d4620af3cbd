"""The saturation driver (limits, stop reasons, per-rule stats) and the RuleSet form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.egraph.encode import Encoded, encode
from rewrite.onnx_io import load
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.prove import prove
from rulesets.cleanup import CLEANUP
from tests.egraph.models import model, vi, write


def transpose_chain(n: int = 4) -> onnx.ModelProto:
    """n Transposes by (1, 2, 0): each composition creates a term the next iteration matches."""
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(h.make_node("Transpose", [prev], [f"t{i}"], perm=[1, 2, 0]))
        prev = f"t{i}"
    nodes.append(h.make_node("Relu", [prev], ["y"]))
    return model(nodes, [vi("x", [2, 3, 4])], [vi("y", [3, 4, 2])])


def encoded(m: onnx.ModelProto, folder: Path) -> Encoded:
    return encode(load(write(m, folder)))


def test_saturated_when_no_rule_changes_anything(tmp_path: Path) -> None:
    stats = saturate(encoded(transpose_chain(), tmp_path), [CLEANUP], Limits())
    assert stats.stop_reason == "saturated"
    assert 1 < stats.iterations < Limits().iterations
    assert len(stats.sizes) == stats.iterations + 1


def test_iteration_limit_when_work_remains(tmp_path: Path) -> None:
    stats = saturate(encoded(transpose_chain(), tmp_path), [CLEANUP], Limits(iterations=1))
    assert stats.stop_reason == "iteration_limit"
    assert stats.iterations == 1
    assert stats.sizes[1] > stats.sizes[0]


def test_node_limit(tmp_path: Path) -> None:
    stats = saturate(encoded(transpose_chain(), tmp_path), [CLEANUP], Limits(nodes=1))
    assert stats.stop_reason == "node_limit"
    assert stats.iterations == 0  # the input is already over the limit: nothing is added


def test_time_limit(tmp_path: Path) -> None:
    stats = saturate(encoded(transpose_chain(), tmp_path), [CLEANUP], Limits(seconds=0.0))
    assert stats.stop_reason == "time_limit"
    assert stats.iterations == 0  # no time left: no iteration is started


def test_no_rules(tmp_path: Path) -> None:
    stats = saturate(encoded(transpose_chain(), tmp_path), [], Limits())
    assert stats.stop_reason == "no rules" and stats.iterations == 0 and stats.matches == {}


def test_stats_count_matches_per_rule(tmp_path: Path) -> None:
    """Three Identity nodes and x·1, 1·x (one rule, two forms): counts per rule, by name."""
    one = onnx.numpy_helper.from_array(np.ones(3, np.float32), "one")
    m = model(
        [
            h.make_node("Identity", ["x"], ["i1"]),
            h.make_node("Identity", ["i1"], ["i2"]),
            h.make_node("Identity", ["i2"], ["i3"]),
            h.make_node("Mul", ["i3", "one"], ["m1"]),
            h.make_node("Mul", ["one", "m1"], ["m2"]),
            h.make_node("Relu", ["m2"], ["y"]),
        ],
        [vi("x", [3])],
        [vi("y", [3])],
        inits=[one],
    )
    stats = saturate(encoded(m, tmp_path), [CLEANUP], Limits(iterations=1))
    assert set(stats.matches) == {r.name for r in CLEANUP}
    assert stats.matches["identity_elim"] == 3
    assert stats.matches["mul_one"] == 2
    assert {k for k, v in stats.matches.items() if v} == {"identity_elim", "mul_one"}
    js = stats.to_json()
    assert js["rule_matches"] == dict(sorted(stats.matches.items()))
    assert js["stop_reason"] == stats.stop_reason and js["egraph_sizes"] == stats.sizes


def scale_model(c: float) -> onnx.ModelProto:
    """y = Relu(Relu((x · c) / c)) with c a one-element float constant."""
    return model(
        [
            h.make_node("Mul", ["x", "c"], ["m"]),
            h.make_node("Div", ["m", "c"], ["d"]),
            h.make_node("Relu", ["d"], ["r"]),
            h.make_node("Relu", ["r"], ["y"]),
        ],
        [vi("x", [3])],
        [vi("y", [3])],
        inits=[onnx.numpy_helper.from_array(np.array([c], np.float32), "c")],
    )


SCALED = RuleSet("scaled")


@SCALED.rule
def mul_div_cancel(x: Tensor, s: Tensor) -> Rewrite:
    """(x · s) / s = x   when s is a nonzero scalar (exact in reals; overflows in float32)"""
    return rewrite((x * s) / s).to(
        x, s.is_scalar(), s.rank <= x.rank, s.value() != 0, s.value() * 2 > x.rank - 9
    )


@pytest.mark.parametrize(("c", "fires"), [(2.0, True), (0.0, False)])
def test_a_float_guard_beside_an_int_literal_runs_in_egglog(
    tmp_path: Path, c: float, fires: bool
) -> None:
    # the prover reads `!= 0` as `!= 0.0` too: its counterexample keeps s nonzero (the rule is
    # exact in reals only: x·s overflows in float32 and wraps in int32/int64)
    result = prove(SCALED.rules[0])
    assert result.status == "refuted" and result.counterexample is not None
    assert all(v != 0 for v in np.ravel(result.counterexample.inputs["s"]))
    stats = saturate(encoded(scale_model(c), tmp_path), [SCALED], Limits())
    assert stats.refused == [] and (stats.matches["mul_div_cancel"] > 0) is fires


def test_a_rule_egglog_refuses_is_left_out_alone(tmp_path: Path) -> None:
    # Rule names are refused twice at load; through the API, egglog refuses the second.
    twin = RuleSet("twin")

    @twin.rule
    def relu_relu(x: Tensor) -> Rewrite:
        """Relu(Relu(x)) = Relu(x)"""
        return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x))

    twin.add(next(r for r in CLEANUP if r.name == "transpose_transpose"))  # one form per rank
    twin.add(next(r for r in SCALED if r.name == "mul_div_cancel"))
    stats = saturate(encoded(scale_model(2.0), tmp_path), [CLEANUP, SCALED, twin], Limits())
    assert len(stats.refused) == 2, stats.refused
    assert stats.refused[0].startswith("transpose_transpose (cleanup.py:")
    assert stats.refused[1].startswith("mul_div_cancel (test_saturate.py:")
    assert "in ruleset 'twin': could not be compiled to egglog" in stats.refused[1]
    assert stats.matches["mul_div_cancel"] > 0 and stats.matches["relu_relu"] > 0
    assert stats.to_json()["refused_rules"] == stats.refused
