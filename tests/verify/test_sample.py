"""Random testing: the numeric class of a rule (bit-exact / exact in reals / approximate),
measured with numpy float64 and ONNX Runtime float32 on larger shapes."""

from __future__ import annotations

import numpy as np

from rewrite.rules import Rewrite, Rule, RuleSet, Tensor, op, rewrite
from rewrite.verify.sample import (
    APPROXIMATE,
    BIT_EXACT,
    EXACT_IN_REALS,
    sample,
    scaled_error,
)
from rulesets import builtin
from tests.verify.wrong_rules import WRONG

RS = RuleSet("numeric")


@RS.rule
def add_assoc(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """(a + b) + c = a + (b + c): exact in the reals, rounds differently in float32"""
    return rewrite((a + b) + c).to(a + (b + c))


@RS.rule(tags=["approximate"])
def gelu_fast(x: Tensor) -> Rewrite:
    """Gelu(x) ≈ FastGelu(x) (the tanh approximation)"""
    return rewrite(op.ms.Gelu(x)).to(op.ms.FastGelu(x))


def _rule(rs: RuleSet | dict, name: str) -> Rule:
    return next(r for r in rs if r.name == name)


def test_a_rule_that_computes_the_same_ops_is_bit_exact() -> None:
    result = sample(_rule(builtin()["cleanup"], "transpose_transpose"))
    assert result.numeric == BIT_EXACT and result.samples > 0 and result.max_error == 0.0


def test_reassociation_is_exact_in_reals_only() -> None:
    result = sample(_rule(RS, "add_assoc"))
    assert result.numeric == EXACT_IN_REALS
    assert result.max_error <= 1e-9 < result.max_error_f32 < 1e-5


def test_tanh_gelu_is_approximate_with_its_measured_error() -> None:
    result = sample(_rule(RS, "gelu_fast"))
    assert result.numeric == APPROXIMATE
    assert 1e-5 < result.max_error < 1e-3
    assert result.within(1e-3) and not result.within(1e-5)


def test_a_wrong_rule_samples_far_off() -> None:
    result = sample(_rule(WRONG, "sub_commutes"))
    assert result.numeric == APPROXIMATE and result.max_error > 0.1


def test_sides_of_different_shape_have_infinite_error() -> None:
    result = sample(_rule(WRONG, "mul_one_broadcast_dropped"))
    assert result.max_error == float("inf")


def test_scaled_error() -> None:
    a = np.array([1.0, 2.0, 40.0])
    assert scaled_error(a, a) == 0.0
    assert scaled_error(a + np.array([0, 0, 4.0]), a) == 0.1  # 4 / max(1, 40)
    assert scaled_error(np.array([np.nan, 1.0]), np.array([0.0, 1.0])) == float("inf")
    assert scaled_error(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])) == 0.0
    assert scaled_error(np.zeros(2), np.zeros(3)) == float("inf")
