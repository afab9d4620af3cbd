"""growth_per_label: e-nodes one match can add, read off the compiled egglog forms."""

from __future__ import annotations

from rewrite.rules.growth import _right_side, _top_level, growth_per_label
from rulesets import builtin


def test_top_level_splits_one_s_expression() -> None:
    assert _top_level('(rewrite (Add a b) (Add b a) :name "x y")') == [
        "rewrite",
        "(Add a b)",
        "(Add b a)",
        ":name",
        '"x y"',
    ]
    assert _top_level("not a form") == []


def test_right_side_of_rewrites_rules_and_birewrites() -> None:
    assert _right_side("(rewrite (Neg (Neg x)) (Id x))") == "(Id x)"
    assert _right_side("(rule ((= e (Neg x))) ((union e (Mul (One) x))))") == (
        "((union e (Mul (One) x)))"
    )
    assert _right_side("(birewrite (A x) (B x))") == "(A x)(B x)"


def test_every_builtin_rule_adds_at_least_one_node_per_match() -> None:
    sets = list(builtin().values())
    growth = growth_per_label(sets, "rules")
    assert len(growth) >= sum(len(list(rs)) for rs in sets)
    assert min(growth.values()) >= 1
