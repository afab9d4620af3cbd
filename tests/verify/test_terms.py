"""`term-relative` approximate rules: the error is measured against the magnitude of the terms
an output sums (`verify.terms`), so a scale folded into weights is accepted where the sum
cancels, and a rule that changes the value is still refuted."""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import RuleError
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.rule import Rule
from rewrite.verify import sample_cases
from rewrite.verify.gate import UNKNOWN, verify_rules
from rewrite.verify.refute import scaled_error
from rewrite.verify.sample import NOT_SAMPLED, sample
from rewrite.verify.terms import term_scale


def _scale_rule(tags: list[str], keep_scale: bool = True) -> Rule:
    rs = RuleSet("terms")

    @rs.rule(tags=tags)
    def scale_into_weights(x: Tensor, w: Tensor, c: Tensor) -> Rewrite:
        """MatMul(x, W) · c = MatMul(x, W · c) for constant 2-D W and scalar c in [1e-3, 1]"""
        ok = [w.is_const(), c.is_const(), w.rank == 2, c.rank == 0, x.dtype == "float32"]
        ok.append(w.all(lambda e: e.is_finite() & (abs(e) <= 1e4) & (abs(e) >= 1e-4)))
        ok.append(c.all(lambda e: (abs(e) >= 1e-3) & (abs(e) <= 1.0)))
        rhs = op.MatMul(x, w * c) if keep_scale else op.MatMul(x, w)
        return rewrite(op.MatMul(x, w) * c).to(rhs, *ok)

    return rs.rules[0]


def test_the_scale_of_a_dot_product_is_its_terms() -> None:
    x = np.array([3e5, -3e5, 2.0])
    w = np.array([1.5, 1.5, -4.0])

    def dot(v: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray([v["x"] @ v["w"]])

    s = term_scale(dot, {"x": x, "w": w})
    # every product x_i·w_i counts once per factor: 2·Σ|x_i·w_i|
    np.testing.assert_allclose(s, [2 * np.sum(np.abs(x * w))], rtol=1e-9)
    got, want = np.array([-7.0], np.float32), np.array([-8.0], np.float32)
    assert scaled_error(got, want) == pytest.approx(1 / 8)
    assert scaled_error(got, want, s) == pytest.approx(1 / s[0])


def test_term_scaled_error_is_never_above_the_output_scaled_one() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.normal(size=6).astype(np.float32), rng.normal(size=6).astype(np.float32)
        s = np.abs(rng.normal(size=6)) * 10
        assert scaled_error(a, b, s) <= scaled_error(a, b) + 1e-12
    nan = np.array([np.nan, 1.0], np.float32)
    assert scaled_error(nan, np.array([1.0, 1.0], np.float32), np.ones(2)) == np.inf


def test_a_scale_folded_into_weights_is_approximate_only_relative_to_its_terms() -> None:
    plain = sample(_scale_rule(["approximate"]))
    assert plain.refuted, plain  # the left side overflows where the right does not
    terms = sample(_scale_rule(["approximate", "term-relative"]))
    assert terms.within(1e-3) and terms.max_error < 1e-6, terms


def test_a_term_relative_rule_that_changes_the_value_is_refuted() -> None:
    wrong = sample(_scale_rule(["approximate", "term-relative"], keep_scale=False))
    assert wrong.refuted and "scaled error" in wrong.counterexample_line, wrong


def test_term_relative_qualifies_approximate_rules_only() -> None:
    with pytest.raises(RuleError, match="term-relative"):
        _scale_rule(["term-relative"])


def test_an_approximate_rule_with_a_rewrite_left_unsampled_is_not_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no room for typings (`sample_cases.ATTEMPTS`), no rewrite gets a case and the gate
    says unknown, not approximate; with the default room, each rewrite gets its share."""
    rs = RuleSet("coverage")

    @rs.rule(tags=["approximate", "term-relative"])
    def two_forms(a: Tensor, b: Tensor, c: Tensor) -> list[Rewrite]:
        """(a + b) + c = a + (b + c), both ways"""
        return [rewrite((a + b) + c).to(a + (b + c)), rewrite(a + (b + c)).to((a + b) + c)]

    monkeypatch.setattr(sample_cases, "ATTEMPTS", 0)
    s = sample(rs.rules[0])
    assert s.unsampled == [0, 1] and not s.within(1.0) and s.numeric == NOT_SAMPLED, s
    (res,) = verify_rules(rs.rules, cache=False)
    monkeypatch.undo()
    assert not sample(rs.rules[0]).unsampled
    (full,) = verify_rules(rs.rules, cache=False)
    assert full.status == "approximate", full
    assert res.status == UNKNOWN and "no sample of rewrite(s) 0, 1" in res.reason, res
