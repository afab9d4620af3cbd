"""The prover: every built-in rule is proved; every wrong rule is refuted with a counterexample.

The suite fails if a built-in rule is not `proved` (refuted and unknown both fail), or if a
deliberately wrong rule (tests/verify/wrong_rules.py) is not refuted with a counterexample
that names its case, inputs and both sides' outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from rewrite.rules import Int, Rewrite, Rule, RuleSet, Tensor, op, rewrite
from rewrite.verify.bound import DEFAULT_BOUND, Bound
from rewrite.verify.cases import cases
from rewrite.verify.floatcheck import float_check
from rewrite.verify.prove import PROVED, REFUTED, UNKNOWN, prove
from rulesets import builtin
from tests.verify.wrong_rules import WRONG

BUILTIN = [r for rs in builtin().values() for r in rs]


@pytest.mark.parametrize("rule", BUILTIN, ids=lambda r: r.name)
def test_builtin_rule_is_proved(rule: Rule) -> None:
    result = prove(rule)
    assert result.status == PROVED, (
        result.counterexample.line() if result.counterexample else result.reason
    )
    assert result.cases > 0


def test_there_are_at_least_15_wrong_rules() -> None:
    assert len(WRONG) >= 15


@pytest.mark.parametrize("rule", list(WRONG), ids=lambda r: r.name)
def test_wrong_rule_is_refuted_with_a_counterexample(rule: Rule) -> None:
    result = prove(rule)
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None
    assert cx.case["shapes"] and cx.case["dtypes"]
    line = cx.line()
    assert cx.why in line and "for " in line
    if cx.lhs is not None:  # a value counterexample: inputs and both outputs
        assert set(cx.inputs) == set(cx.case["shapes"])
        assert not _same_bits(cx.lhs, cx.rhs)


def _same_bits(a: object, b: object) -> bool:
    """Equal as IEEE values are bit-identical: NaN equals NaN, -0 and +0 differ (a bit-exact
    claim is refuted by -0 vs +0, which `np.array_equal` calls equal)."""
    if isinstance(a, str) or isinstance(b, str):  # ORT's message: the right side did not run
        return False
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return False
    if x.dtype.kind in "iub" and y.dtype.kind in "iub":  # int64 beyond 2^53: compare exactly
        return bool(np.array_equal(x, y))
    x, y = x.astype(float), y.astype(float)
    same = ((x == y) & (np.signbit(x) == np.signbit(y))) | (np.isnan(x) & np.isnan(y))
    return bool(same.all())


def _rule(rs: RuleSet, name: str) -> Rule:
    return next(r for r in rs if r.name == name)


def test_division_by_a_value_that_can_be_zero_is_refuted_at_zero() -> None:
    """(x·y)/y = x: integers wrap (x·y modulo 2^32 at int32, checked before int64), and in
    float32 y = 0 gives NaN and x·y overflows (the float check; the real model speaks only
    where y != 0)."""
    cx = prove(_rule(WRONG, "mul_div_cancel")).counterexample
    assert cx is not None and cx.lhs_ort is not None  # reproduced in ORT
    assert cx.case["dtypes"]["x"] in ("int32", "int64")
    x, y = (int(np.asarray(cx.inputs[v]).reshape(-1)[0]) for v in ("x", "y"))
    assert y != 0 and not -(2**31) <= x * y < 2**31  # the product wrapped
    floats = [c for c in cases(_rule(WRONG, "mul_div_cancel"), DEFAULT_BOUND)]
    floats = [c for c in floats if c.tensors["x"].dtype == TensorProto.FLOAT][:1]
    cx = float_check(floats, bits=False)
    assert cx is not None and not isinstance(cx, str) and "beyond the tolerance" in cx.why
    assert cx.lhs_ort is not None  # y = 0 (NaN) or x·y overflowing (inf / y): ORT shows it


def test_gelu_counterexample_is_confirmed_in_float64() -> None:
    cx = prove(_rule(WRONG, "gelu_tanh_declared_exact")).counterexample
    assert cx is not None and "confirmed in float64" in cx.why
    left, right = np.asarray(cx.lhs, dtype=float), np.asarray(cx.rhs, dtype=float)
    assert np.max(np.abs(left - right)) > 1e-7


def test_integer_semantics_truncate() -> None:
    cx = prove(_rule(WRONG, "div_mul_int_truncates")).counterexample
    assert cx is not None and set(cx.case["dtypes"].values()) <= {"int32", "int64"}


def test_a_rule_wrong_in_one_element_of_many_is_refuted() -> None:
    """The query asks whether *any* element differs: the other elements are equal only by
    distributivity (left to the solver, not simplified away), so asking whether every
    element differs would call this rule proved."""
    result = prove(_rule(WRONG, "concat_wrong_in_one_element"))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.lhs is not None
    left, right = np.asarray(cx.lhs, dtype=float), np.asarray(cx.rhs, dtype=float)
    assert left.size >= 2 and np.flatnonzero(left != right).tolist() == [left.size - 1]


def test_cast_removal_is_a_type_counterexample() -> None:
    cx = prove(_rule(WRONG, "cast_removed")).counterexample
    assert cx is not None and "differ in type" in cx.why and cx.lhs is None


RS = RuleSet("t")


@RS.rule
def exp_neg_reciprocal(x: Tensor) -> Rewrite:
    """Exp(-x) = 1 / Exp(x): true, but not provable with exp uninterpreted"""
    return rewrite(op.Exp(-x)).to(op.Reciprocal(op.Exp(x)))


@RS.rule
def relu_of_exp(x: Tensor) -> Rewrite:
    """Relu(Exp(x)) = Exp(x): needs the axiom exp(t) > 0"""
    return rewrite(op.Relu(op.Exp(x))).to(op.Exp(x))


@RS.rule
def sub_self(x: Tensor, c: Tensor) -> Rewrite:
    """x - x = 0: equal in reals, NaN at x = inf in float32"""
    y = x - x
    return rewrite(y + c).to(c, c.is_zero(), (y + c).shape == c.shape, y.shape == c.shape)


@RS.rule
def never_matches(x: Tensor) -> Rewrite:
    """Neg(x) = x when rank 7: no case in the bound"""
    return rewrite(-x).to(x, x.rank == 7)


@RS.rule
def softmax_rank1(x: Tensor, a: Int) -> Rewrite:
    """Softmax(x, axis=a) = Softmax(x, axis=-1) when rank 1"""
    return rewrite(op.Softmax(x, axis=a)).to(op.Softmax(x, axis=-1), x.rank == 1)


@RS.rule
def mul_commutes_both_ways(x: Tensor, y: Tensor) -> list[Rewrite]:
    """x · y = y · x, as a two-pattern rule"""
    return [rewrite(x * y, y * x).to(y * x, x * y)]


@RS.rule
def matmul_assoc_2d(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """(A @ B) @ C = A @ (B @ C) for matrices: exact in reals, overflows in float32"""
    return rewrite((a @ b) @ c).to(a @ (b @ c), a.rank == 2, b.rank == 2, c.rank == 2)


@RS.rule
def relu_of_nonnegative(x: Tensor, y: Tensor) -> Rewrite:
    """Relu(b) = b for b = (x·x + y·y)^2 - (x·y)^2 >= 0: true (also in IEEE floats), but a
    nonlinear query Z3 does not decide within 1 ms (integer examples no longer serve: with
    bit-vectors Z3 settles them or they wrap)"""
    a = x * x + y * y
    b = a * a - x * y * x * y
    return rewrite(op.Relu(b)).to(b, x.shape == y.shape)


TINY = Bound(
    shapes=((1,),), few=((1,),), dtypes=(TensorProto.FLOAT,), timeout_ms=1, second_try=False
)
"""1 ms and no second try (which, split on Relu's condition, can decide it within 1 ms)."""


def test_a_query_z3_gives_up_on_is_unknown_not_proved() -> None:
    result = prove(_rule(RS, "relu_of_nonnegative"), TINY)
    assert result.status == UNKNOWN and result.counterexample is None
    assert result.reason.startswith("Z3 gave up") and result.cases == 1


def test_multi_pattern_rules_are_proved() -> None:
    assert prove(_rule(RS, "mul_commutes_both_ways")).status == PROVED


def test_matmul_associativity_is_exact_in_reals_only() -> None:
    """Equal in reals for matrices, but 1e30·1e30 overflows on one side only in float32: the
    float check refuses it as exact (it was `proved` when floats were reals)."""
    result = prove(_rule(RS, "matmul_assoc_2d"))
    assert result.status == REFUTED and result.counterexample is not None
    assert "beyond the tolerance" in result.counterexample.why


def test_true_rule_needing_more_than_the_axioms_is_unknown_not_refuted() -> None:
    result = prove(_rule(RS, "exp_neg_reciprocal"))
    assert result.status == UNKNOWN and "random inputs agree" in result.reason


def test_axioms_are_used() -> None:
    assert prove(_rule(RS, "relu_of_exp")).status == PROVED


def test_x_minus_x_is_zero_in_reals_not_in_float32() -> None:
    """x - x = 0 in reals; at x = inf (or NaN) float32 gives NaN: refused as exact (it was
    `proved` when inf and NaN were outside the semantics)."""
    result = prove(_rule(RS, "sub_self"))
    assert result.status == REFUTED and result.counterexample is not None
    assert result.counterexample.lhs_ort is not None


def test_guards_on_attributes_and_rank_select_cases() -> None:
    result = prove(_rule(RS, "softmax_rank1"))
    assert result.status == PROVED and result.cases == 4  # (1,) (3,) float32, (1,) (3,) int64


def test_a_rule_without_cases_is_unknown() -> None:
    result = prove(_rule(RS, "never_matches"))
    assert result.status == UNKNOWN and "no case" in result.reason


def test_a_bound_too_large_is_unknown() -> None:
    rule = next(r for r in builtin()["cleanup"] if r.name == "transpose_transpose")
    result = prove(rule, Bound(max_cases=10))
    assert result.status == UNKNOWN and "more than 10 cases" in result.reason


def test_a_rule_the_verifier_cannot_check_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewrite.errors import RuleError
    from rewrite.verify import cases

    def no_bound(*args: object) -> list[object]:
        raise RuleError("the proof bound has no values for Transpose's perm (VecI)")

    monkeypatch.setattr(cases, "domain", no_bound)
    result = prove(next(r for r in builtin()["cleanup"] if r.name == "transpose_identity"))
    assert result.status == UNKNOWN and "has no values for Transpose's perm" in result.reason
