"""The saturation driver (limits, stop reasons, per-rule stats) and the RuleSet form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.egraph.encode import Encoded, encode
from rewrite.errors import RuleError
from rewrite.onnx_io import load
from rewrite.rules import RuleSet
from rewrite.rules.saturate import Limits, saturate
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
    assert stats.iterations == 1


def test_time_limit(tmp_path: Path) -> None:
    stats = saturate(encoded(transpose_chain(), tmp_path), [CLEANUP], Limits(seconds=0.0))
    assert stats.stop_reason == "time_limit"
    assert stats.iterations == 1


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


# -- the RuleSet form ------------------------------------------------------------------------


MINE = RuleSet("mine")


@MINE.rule
def neg_neg_gone() -> str:
    """Neg(Neg(x)) = x

    A second paragraph."""
    return "(rewrite (Neg (Neg x)) x)"


def test_rule_records_name_doc_and_source() -> None:
    (rule,) = MINE
    lines = Path(__file__).read_text().splitlines()
    line = lines.index("@MINE.rule") + 1  # where the definition starts: its decorator
    assert rule.name == "neg_neg_gone"
    assert rule.identity == "Neg(Neg(x)) = x"
    assert rule.doc.startswith("Neg(Neg(x)) = x") and "second paragraph" in rule.doc
    assert rule.source == f"{Path(__file__).name}:{line}"
    assert rule.forms == ("(rewrite (Neg (Neg x)) x)",)
    assert rule.tags == frozenset({"exact", "portable"})
    assert rule.compile("rs") == ['(rewrite (Neg (Neg x)) x :ruleset rs :name "neg_neg_gone")']


def test_multi_form_rule_compiles_with_numbered_names() -> None:
    rs = RuleSet("mine")

    @rs.rule(tags=["exact", "ort-cpu"])
    def two_forms() -> list[str]:
        """a = b"""
        return ["(rewrite (Neg x) x)", "(rewrite (Relu x) x)"]

    (rule,) = rs
    assert rule.tags == frozenset({"exact", "ort-cpu"})
    assert [c.rsplit(":name ", 1)[1] for c in rule.compile("r")] == [
        '"two_forms@0")',
        '"two_forms@1")',
    ]


def test_unknown_tag_raises() -> None:
    rs = RuleSet("mine")
    with pytest.raises(RuleError, match=r"bad_tag: unknown tags \['fast'\]"):

        @rs.rule(tags=["fast"])
        def bad_tag() -> str:
            return "(rewrite (Neg x) x)"


def test_duplicate_rule_name_raises() -> None:
    rs = RuleSet("mine")

    @rs.rule
    def twice() -> str:
        return "(rewrite (Neg x) x)"

    with pytest.raises(
        RuleError, match=r"twice \(test_saturate\.py:\d+\).*already in ruleset 'mine'"
    ):

        @rs.rule
        def twice() -> str:  # the point of the test
            return "(rewrite (Relu x) x)"

    assert len(rs) == 1


def test_rule_that_is_not_an_s_expression_raises() -> None:
    rs = RuleSet("mine")

    @rs.rule
    def unbalanced() -> str:
        return "(rewrite (Neg x) x"

    with pytest.raises(RuleError, match=r"unbalanced \(test_saturate\.py:\d+\): form 0"):
        rs.rules[0].compile("r")


@pytest.mark.parametrize(
    "form",
    ["(rewrite (NoSuchOp x) x)", "(rewrite (Relu x) 3)", "(rule ((= e (Relu x))) ((union e y)))"],
    ids=["unknown-constructor", "sort-mismatch", "unbound-variable"],
)
def test_rule_with_invalid_egglog_raises_naming_it(form: str, tmp_path: Path) -> None:
    rs = RuleSet("broken")

    @rs.rule
    def good_rule() -> str:
        return "(rewrite (Neg (Neg x)) x)"

    @rs.rule
    def broken_rule() -> str:
        return form

    enc = encoded(transpose_chain(1), tmp_path)
    with pytest.raises(
        RuleError, match=r"broken_rule \(test_saturate\.py:\d+\) in ruleset 'broken'"
    ):
        saturate(enc, [rs], Limits())
