"""The prover's verdicts where a shortcut could pass unnoticed (each test names what it guards).

`tests/verify/test_prove.py` proves the built-in rules and refutes the wrong ones; these pin the
paths in between: guards that are false for some cases, sides that are constants, the first
element equal and a later one not, counterexamples that only seeded random inputs confirm, the
bound's limits, the exact form of a counterexample's line, the int32 view beside the int64 case,
right sides the semantics reject or that are undefined, and int64 inputs beyond 2^53.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto

from rewrite.rules import Int, Rewrite, Rule, RuleSet, Tensor, op, rewrite
from rewrite.verify.bound import DEFAULT_BOUND, Bound
from rewrite.verify.prove import PROVED, REFUTED, UNKNOWN, Counterexample, prove

RS = RuleSet("oracles")


def _rule(name: str) -> Rule:
    return next(r for r in RS if r.name == name)


@RS.rule
def mul_by_guarded_one(x: Tensor, c: Tensor) -> Rewrite:
    """x · c = x when c is the scalar 1   (sound; the guard is false for c = 0.5, 1.702, ...)"""
    y = x * c
    return rewrite(y).to(x, c.is_scalar(), c.value() == 1.0, y.shape == x.shape)


@RS.rule
def relu_of_positive(c: Tensor) -> Rewrite:
    """Relu(c) = c for a scalar 0 < c < 10   (sound; a guard of two symbolic parts)"""
    return rewrite(op.Relu(c)).to(c, c.is_scalar(), (c.value() > 0) & (c.value() < 10))


@RS.rule
def two_is_one(c: Tensor) -> Rewrite:
    """c + c = c for c = 1   (false; both sides are numbers, no symbol left)"""
    return rewrite(c + c).to(c, c.is_scalar(), c.value() == 1.0)


@RS.rule
def concat_neg_tail(x: Tensor, w: Tensor) -> Rewrite:
    """Concat(x, -w) = Concat(x, w)   (false; the first elements are the same term)"""
    return rewrite(op.Concat(x, -w, axis=0)).to(
        op.Concat(x, w, axis=0), x.rank == 1, w.shape == [1]
    )


@RS.rule
def exp_neg_and_relu(x: Tensor, y: Tensor) -> Rewrite:
    """Concat(Exp(-x), Relu(y)) = Concat(1 / Exp(x), y)   (false for y < 0; Z3 may answer
    with exp values the real function does not take, and then the seeded random inputs
    find it: which of the two depends on Z3's state, the verdict must not)"""
    lhs = op.Concat(op.Exp(-x), op.Relu(y), axis=0)
    return rewrite(lhs).to(op.Concat(op.Reciprocal(op.Exp(x)), y, axis=0), x.rank == 1, y.rank == 1)


@RS.rule
def exp_neg_and_relu_of_positive(x: Tensor, y: Tensor) -> Rewrite:
    """The same for a scalar y >= 0   (true, but not provable with exp uninterpreted: the
    random inputs must respect the guard, and then all agree)"""
    lhs = op.Concat(op.Exp(-x), op.Relu(y), axis=0)
    rhs = op.Concat(op.Reciprocal(op.Exp(x)), y, axis=0)
    return rewrite(lhs).to(rhs, x.rank == 1, y.is_scalar(), y.value() >= 0)


@RS.rule
def softmax_rank1(x: Tensor, a: Int) -> Rewrite:
    """Softmax(x, axis=a) = Softmax(x, axis=-1) when rank 1   (4 cases in the default bound)"""
    return rewrite(op.Softmax(x, axis=a)).to(op.Softmax(x, axis=-1), x.rank == 1)


@RS.rule
def add_difference_of_equals(x: Tensor, y: Tensor, z: Tensor) -> Rewrite:
    """x + (y - z) = x when y - z is zero   (a guard on a computed value: not checkable)"""
    d = y - z
    return rewrite(x + d).to(x, d.is_zero(), x.shape == d.shape, y.shape == z.shape)


@RS.rule
def relu_to_matmul(x: Tensor) -> Rewrite:
    """Relu(x) = x @ x   (false: a vector's self product is a scalar)"""
    return rewrite(op.Relu(x)).to(x @ x)


def test_a_guard_false_for_some_cases_skips_them() -> None:
    """Cases whose guard is false are skipped, and the ones after them still checked."""
    result = prove(_rule("mul_by_guarded_one"))
    assert result.status == PROVED, result.reason
    assert result.cases > 1


def test_a_guard_of_symbolic_parts_is_assumed() -> None:
    assert prove(_rule("relu_of_positive")).status == PROVED


def test_sides_that_are_different_numbers_are_refuted() -> None:
    result = prove(_rule("two_is_one"))
    assert result.status == REFUTED
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ"
    assert cx.rewrite == "Add(c, c) = c  when c.is_scalar() and c.value() == 1.0"
    assert (cx.inputs, cx.lhs, cx.rhs) == ({"c": [1.0]}, [2.0], [1.0])


def test_an_equal_first_element_does_not_end_the_comparison() -> None:
    result = prove(_rule("concat_neg_tail"))
    assert result.status == REFUTED
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ"
    left, right = np.asarray(cx.lhs, dtype=float), np.asarray(cx.rhs, dtype=float)
    assert left[0] == right[0] and left[1] == -right[1] != 0


def _exp_neg_and_relu_float64(inputs: dict[str, list[float]]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(inputs["x"]), np.asarray(inputs["y"])
    with np.errstate(over="ignore"):  # Z3 may pick a large x: exp overflows, 1 / inf = 0
        left = np.concatenate([np.exp(-x), np.maximum(y, 0.0)])
        right = np.concatenate([1.0 / np.exp(x), y])
    return left, right


def test_a_counterexample_over_exp_is_refuted_with_real_values() -> None:
    result = prove(_rule("exp_neg_and_relu"))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ (confirmed in float64)"
    assert set(cx.inputs) == {"x", "y"}
    left, right = _exp_neg_and_relu_float64(cx.inputs)
    # the outputs shown are the real functions' (float64, or ORT's float32) at those inputs
    np.testing.assert_allclose(np.asarray(cx.lhs, dtype=float), left, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(np.asarray(cx.rhs, dtype=float), right, rtol=1e-6, atol=1e-30)
    assert not np.allclose(left, right)  # a real difference (y < 0)


def test_random_inputs_respect_the_guard() -> None:
    """Drawn inputs outside the guard (y < 0) would "refute" a rule that holds where it is
    used; the search keeps only inputs the guard allows, and then nothing differs."""
    result = prove(_rule("exp_neg_and_relu_of_positive"))
    assert result.status == UNKNOWN and result.counterexample is None
    assert "30 random inputs agree" in result.reason


def test_the_case_limit_counts_every_case_drawn() -> None:
    """5 cases are drawn (one the semantics reject: 4 checked); a limit of 5 allows them all."""
    rule = _rule("softmax_rank1")
    assert prove(rule).cases == 4
    assert prove(rule, Bound(max_cases=5)).status == PROVED
    result = prove(rule, Bound(max_cases=4))
    assert result.status == UNKNOWN and result.reason == "more than 4 cases in the bound"
    assert result.cases == 4 and result.bound == Bound(max_cases=4).describe()
    assert 0 <= result.seconds < 60 and result.counterexample is None


def test_the_time_limit_is_a_reason_not_a_verdict() -> None:
    result = prove(_rule("softmax_rank1"), Bound(max_seconds=0.0))
    assert result.status == UNKNOWN and result.reason == "the proof took more than 0 s"
    assert result.cases == 0 and result.bound == Bound(max_seconds=0.0).describe()
    assert 0 <= result.seconds < 60


def test_a_rule_the_verifier_cannot_check_is_unknown_with_why() -> None:
    result = prove(_rule("add_difference_of_equals"))
    assert result.status == UNKNOWN and result.counterexample is None
    assert result.reason == (
        "the verifier cannot check this rule (RuleError: cannot evaluate Sub(y, z))"
    )
    assert result.cases == 0 and result.bound == DEFAULT_BOUND.describe()
    assert 0 <= result.seconds < 60


def test_a_right_side_of_another_type_is_a_type_counterexample() -> None:
    cx = prove(_rule("relu_to_matmul")).counterexample
    assert cx is not None and cx.rewrite == "Relu(x) = MatMul(x, x)"
    assert cx.why == "the sides differ in type: left float32[1], right float32[]"
    assert cx.case["shapes"] == {"x": [1]} and cx.lhs is None


def test_counterexample_line_and_json() -> None:
    case = {"shapes": {"x": [2], "p": [1]}, "dtypes": {"x": "float32", "p": "int64"}}
    typed = Counterexample("r", "the sides differ in type: left float32[2], right int64[2]", case)
    assert typed.line() == (
        "the sides differ in type: left float32[2], right int64[2] for x: float32[2], p: int64[1]"
    )
    valued = Counterexample(
        "r",
        "the sides differ",
        {**case, "attributes": {"Softmax.axis": 0, "scale": 0.123456789}},
        {"x": [1.5, -2.0], "p": [3]},
        [1.5, 0.0],
        [1.5, -2.0],
        [1.5, 0.0],
        [1.5, -2.0],
    )
    assert valued.line() == (
        "the sides differ for x: float32[2], p: int64[1]; Softmax.axis=0, scale=0.123456789: "
        "x=[1.5, -2] p=[3] -> left=[1.5, 0] right=[1.5, -2] "
        "(float64: left=[1.5, 0] right=[1.5, -2])"
    )
    expected = {
        "rewrite": "r",
        "why": "the sides differ",
        "case": valued.case,
        "inputs": {"x": [1.5, -2.0], "p": [3]},
        "lhs": [1.5, 0.0],
        "rhs": [1.5, -2.0],
        "lhs_float64": [1.5, 0.0],
        "rhs_float64": [1.5, -2.0],
    }
    as_json = valued.to_json()
    assert {k: as_json[k] for k in expected} == expected


@RS.rule
def relu_relu(x: Tensor) -> Rewrite:
    """Relu(Relu(x)) = Relu(x)   (sound in ORT)"""
    return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x))


def test_a_counterexample_ort_does_not_reproduce_leaves_the_rule_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Semantics that differ from ORT (Relu given Neg's formula) yield a Z3 counterexample that
    ORT does not show: the rule is unknown, and the reason gives Z3's sides and ORT's."""
    from dataclasses import replace

    from rewrite.ops import registry

    relu, neg = registry.lookup("Relu"), registry.lookup("Neg")
    assert relu is not None and neg is not None
    monkeypatch.setitem(registry._SPECS, relu.key, replace(relu, z3=neg.z3))
    result = prove(_rule("relu_relu"))
    assert result.status == UNKNOWN and result.counterexample is None
    why = result.reason
    assert "; but it does not reproduce in ORT (both sides give [" in why
    assert why.endswith("): the semantics differ from ORT's here")
    assert "float64" not in why  # no exp/erf/tanh: Z3's own values, no float64 reading
    # Z3's sides under the wrong formula: left = Neg(Neg(x)) = x, right = Neg(x) = -x
    x = why.split(": x=")[1].split(" -> ")[0]
    left = why.split("-> left=")[1].split(" right=")[0]
    right = why.split(" right=")[1].split(";")[0]
    assert left == x and right != x and right not in ("None", "")
    ort = why.split("both sides give ")[1].split("):")[0]
    assert ort != "None" and ort.startswith("[")


def test_a_value_counterexample_names_its_rewrite_and_shows_what_ort_ran() -> None:
    from tests.verify.wrong_rules import WRONG

    rule = next(r for r in WRONG if r.name == "gelu_tanh_declared_exact")
    cx = prove(rule).counterexample
    assert cx is not None and cx.rewrite == repr(rule.rewrites[0])
    assert "confirmed in float64" in cx.why  # exp/erf/tanh: float64 sides, then ORT's
    left, right = np.asarray(cx.lhs, float), np.asarray(cx.rhs, float)
    assert cx.lhs == cx.lhs_ort and cx.rhs == cx.rhs_ort
    assert left.size == right.size == np.asarray(cx.inputs["x"]).size
    assert np.max(np.abs(left - right)) > 1e-7


def test_a_case_is_named_by_every_variable() -> None:
    """The text `Z3 gave up (...) on <case>` and the random-search message use."""
    from rewrite.verify.cases import cases
    from rewrite.verify.prove import _where

    case = next(c for c in cases(_rule("exp_neg_and_relu"), DEFAULT_BOUND))
    assert _where(case) == "x: float32[1], y: float32[1]"


def test_an_undefined_right_side_names_its_rewrite() -> None:
    from tests.verify.wrong_rules import WRONG

    rule = next(r for r in WRONG if r.name == "bias_gelu_any_bias")
    cx = prove(rule).counterexample
    assert cx is not None and cx.why.startswith("the right side is not defined (")
    assert cx.rewrite == repr(rule.rewrites[0]) and cx.lhs is None


@RS.rule
def abs_of_wrapped_product(x: Tensor, c: Tensor) -> Rewrite:
    """Abs(x·c·c) = x·c·c for scalars x >= 0, c = 65536   (true in reals; at int32 x·2^32
    wraps to 0 and it holds; at int64 it wraps to negative values and it does not)"""
    y = (x * c) * c
    return rewrite(op.Abs(y)).to(
        y, x.is_scalar(), c.is_scalar(), x.rank == c.rank, x.value() >= 0, c.value() == 65536
    )


def test_an_int64_case_is_checked_when_its_int32_view_holds() -> None:
    """The int32 view is checked first; that it holds says nothing about int64."""
    result = prove(_rule("abs_of_wrapped_product"))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ"
    assert cx.case["dtypes"] == {"x": "int64", "c": "int64"}
    assert cx.lhs_ort is not None and cx.lhs_ort == [-v for v in cx.rhs_ort] != [0]


def test_an_int32_view_unknown_leaves_the_rule_unknown_when_int64_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Relu's semantics given Neg's formula at int32 only: the int32 view's counterexample does
    not reproduce in ORT (unknown), the int64 case holds; the rule stays unknown."""
    from dataclasses import replace

    from rewrite.ops import registry

    relu, neg = registry.lookup("Relu"), registry.lookup("Neg")
    assert relu is not None and neg is not None and relu.z3 and neg.z3
    real_relu, wrong = relu.z3, neg.z3

    def wrong_at_int32(call: Any, arrays: Any) -> Any:
        int32 = call.input(0).dtype == TensorProto.INT32
        return (wrong if int32 else real_relu)(call, arrays)

    monkeypatch.setitem(registry._SPECS, relu.key, replace(relu, z3=wrong_at_int32))
    result = prove(_rule("relu_relu"))
    assert result.status == UNKNOWN and result.counterexample is None
    assert "for x: int32[" in result.reason
    assert result.reason.endswith("): the semantics differ from ORT's here")


@RS.rule
def abs_as_sqrt_of_square(x: Tensor) -> Rewrite:
    """Abs(x) = Sqrt(x·x)   (the right side types for integers, but Sqrt has no integer form:
    the semantics reject it)"""
    return rewrite(op.Abs(x)).to(op.Sqrt(x * x))


def test_a_right_side_the_semantics_reject_names_its_rewrite() -> None:
    rule = _rule("abs_as_sqrt_of_square")
    cx = prove(rule, Bound(dtypes=(TensorProto.INT64,))).counterexample
    assert cx is not None and cx.rewrite == "Abs(x) = Sqrt(Mul(x, x))" == repr(rule.rewrites[0])
    assert cx.why.startswith("the right side is not defined (Sqrt: defined for floating dtypes")
    assert cx.lhs is None and not cx.inputs


@RS.rule
def mul_zero_through_quotient(x: Tensor, c: Tensor) -> Rewrite:
    """x·c = (x/x)·c for c zero   (the sides are the same term, 0, but the right side divides
    by x: undefined for integers at x = 0)"""
    return rewrite(x * c).to((x / x) * c, c.is_zero(), (x * c).shape == x.shape)


def test_a_right_side_undefined_where_the_sides_are_the_same_term_is_refuted() -> None:
    """The sides simplify to one term (no element to compare), but the right side's
    definedness is still asked; ORT is not asked to run it (integer division by zero)."""
    result = prove(_rule("mul_zero_through_quotient"), Bound(dtypes=(TensorProto.INT64,)))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why.startswith(
        "the right side is undefined where the left side is not"
    )
    assert cx.inputs is not None and cx.inputs["x"] == [0]
    assert (cx.lhs, cx.rhs, cx.lhs_ort, cx.rhs_ort) == (None, None, None, None)


@RS.rule
def mul_as_scaled_quotient(x: Tensor, c: Tensor) -> Rewrite:
    """x·c = (x·c·c)/c for a scalar c = 65536   (true in reals; the right side is defined
    everywhere, c != 0, but x·c·c wraps in integers)"""
    y = x * c
    return rewrite(y).to(
        (y * c) / c, c.is_scalar(), c.value() == 65536, y.shape == x.shape, x.rank == c.rank
    )


def test_a_right_side_defined_where_the_sides_differ_is_a_value_counterexample() -> None:
    result = prove(_rule("mul_as_scaled_quotient"))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ"
    assert cx.lhs_ort is not None and cx.lhs_ort != cx.rhs_ort


@RS.rule
def max_with_successor(x: Tensor, c: Tensor) -> Rewrite:
    """Max(x, x + c) = x + c for int64 x and c = 1   (wrong only at x = 2^63 - 1, where x + 1
    wraps: an input a float64 does not hold; the dtype condition leaves no int32 view, which
    would refute it first at 2^31 - 1)"""
    y = x + c
    return rewrite(op.Max(x, y)).to(
        y, x.dtype == TensorProto.INT64, c.is_scalar(), c.value() == 1, y.shape == x.shape
    )


def test_an_int64_counterexample_beyond_2_53_is_run_exactly() -> None:
    """Z3's inputs reach ORT as integers: 2^63 - 1 read as a float would be 2^63, which wraps
    to -2^63, where the sides agree (the counterexample would not reproduce)."""
    result = prove(_rule("max_with_successor"))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ"  # not the float check's
    assert cx.inputs == {"x": [2**63 - 1], "c": [1]}
    assert (cx.lhs_ort, cx.rhs_ort) == ([2**63 - 1], [-(2**63)])


def test_a_refutation_reports_its_bound_cases_and_time() -> None:
    """_prove 58, 59, 60, 67: the ProofResult of a case refuted in the loop (not by the float
    check) carries the bound, the cases checked (the first: float32 [1]) and the seconds."""
    t = time.perf_counter()
    result = prove(_rule("two_is_one"))
    elapsed = time.perf_counter() - t
    assert result.status == REFUTED and result.counterexample is not None
    assert result.counterexample.why == "the sides differ"  # the loop's, not the float check's
    assert result.bound == DEFAULT_BOUND.describe()
    assert result.cases == 1
    assert isinstance(result.seconds, float) and 0 < result.seconds <= elapsed
    assert isinstance(result.cases, int)


@RS.rule
def neg_at_rank_seven(x: Tensor) -> Rewrite:
    """Neg(x) = x when rank 7   (no case in the bound)"""
    return rewrite(-x).to(x, x.rank == 7)


def test_a_rule_without_cases_reports_how_long_it_looked() -> None:
    """_prove 79: the no-case result carries the seconds spent drawing cases."""
    t = time.perf_counter()
    result = prove(_rule("neg_at_rank_seven"))
    elapsed = time.perf_counter() - t
    assert result.status == UNKNOWN and result.counterexample is None
    assert result.reason == "no case in the bound matches the left side and its guards"
    assert result.cases == 0 and result.bound == DEFAULT_BOUND.describe()
    assert isinstance(result.seconds, float) and 0 < result.seconds <= elapsed
    assert isinstance(result.cases, int)


@RS.rule
def reciprocal_of_negation(x: Tensor) -> Rewrite:
    """Reciprocal(-x) = Reciprocal(x)   (false; Reciprocal's semantics reject int64 x: those
    cases are not cases)"""
    return rewrite(op.Reciprocal(-x)).to(op.Reciprocal(x))


def test_cases_the_semantics_reject_do_not_end_the_proof() -> None:
    """_prove 56 (continue -> break): with int64 first in the bound, every int64 case is
    rejected by the semantics (SKIP); the float32 cases after them are still checked."""
    result = prove(
        _rule("reciprocal_of_negation"), Bound(dtypes=(TensorProto.INT64, TensorProto.FLOAT))
    )
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ"
    assert cx.case["dtypes"] == {"x": "float32"}
    assert result.cases == 1  # the skipped int64 cases are not counted


@RS.rule
def relu_relu_and_add_sub(x: Tensor, a: Tensor, b: Tensor) -> list[Rewrite]:
    """Relu(Relu(x)) = Relu(x), and (a + b) - b = a   (two rewrites; the second is exact in
    reals and in integers but not in float32: only the float check refutes it)"""
    return [
        rewrite(op.Relu(op.Relu(x))).to(op.Relu(x)),
        rewrite((a + b) - b).to(a, a.shape == b.shape),
    ]


def test_each_rewrite_of_a_rule_is_float_checked() -> None:
    """_prove 71 (key = None): the float check gets the smallest case of every (dtypes,
    rewrite) pair, not the single smallest case of the rule (the first rewrite's, which holds
    in float32)."""
    result = prove(_rule("relu_relu_and_add_sub"))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and "beyond the tolerance" in cx.why
    assert cx.rewrite == repr(_rule("relu_relu_and_add_sub").rewrites[1])


def test_an_undefined_right_side_has_the_exact_reason_and_its_rewrite() -> None:
    """check_case 92, 97, 98 (the reason's case), 99, 107 (the rewrite's name) on the path
    where Z3 finds the right side undefined where the left side is not."""
    rule = _rule("mul_zero_through_quotient")
    cx = prove(rule, Bound(dtypes=(TensorProto.INT64,))).counterexample
    assert cx is not None and cx.why == (
        "the right side is undefined where the left side is not (ORT fails: integer "
        "division by zero or INT_MIN / -1)"
    )
    assert (
        cx.rewrite
        == repr(rule.rewrites[0])
        == "Mul(x, c) = Mul(Div(x, x), c)  when " + ("c.is_zero() and Mul(x, c).shape == x.shape")
    )


@RS.rule
def mul_zero_through_successor_quotient(x: Tensor, c: Tensor, k: Tensor) -> Rewrite:
    """x·c·k = ((x + k)/(x + k))·c·k for c zero, k = 1   (the same term, 0, on both sides; the
    right side divides by x + 1, zero at the largest unsigned value)"""
    lhs = (x * c) * k
    rhs = (((x + k) / (x + k)) * c) * k
    return rewrite(lhs).to(
        rhs, c.is_zero(), k.is_scalar(), k.value() == 1,
        x.shape == [1], c.shape == [1], k.shape == [1],
    )  # fmt: skip


def test_an_undefined_right_side_shows_unsigned_inputs_as_unsigned() -> None:
    """check_case 86, 89 (the dtype dropped from `_eval_array`): uint8 x + 1 is zero at
    x = 255, which a bit-vector read as signed shows as -1."""
    result = prove(_rule("mul_zero_through_successor_quotient"), Bound(dtypes=(TensorProto.UINT8,)))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why.startswith("the right side is undefined where")
    assert cx.inputs == {"x": [255], "c": [0], "k": [1]}


@RS.rule
def neg_head_beside_a_defined_quotient(w: Tensor, z: Tensor, k: Tensor) -> Rewrite:
    """Concat(-w, z·k) = Concat(w, z·k + z/(z + k)) for z >= 0, k = 1   (false in w only; the
    right side divides by z + 1, never zero for z >= 0)"""
    lhs = op.Concat(-w, z * k, axis=0)
    rhs = op.Concat(w, z * k + z / (z + k), axis=0)
    return rewrite(lhs).to(
        rhs, w.shape == [1], z.shape == [1], k.shape == [1],
        z.is_scalar(), z.value() >= 0, k.is_one(),
    )  # fmt: skip


def test_a_variable_outside_the_differing_element_does_not_make_the_right_side_undefined() -> None:
    """check_case 79, 81, 82 (model_completion dropped): the model of the w element leaves z
    unassigned; completed (z = 0) the right side is defined, so the counterexample is the
    sides' difference, not an undefined right side."""
    result = prove(_rule("neg_head_beside_a_defined_quotient"), Bound(dtypes=(TensorProto.INT64,)))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ"
    assert cx.lhs_ort is not None and cx.lhs_ort[0] == -cx.rhs_ort[0] != 0


@RS.rule
def relu_of_linked_positive(w: Tensor, z: Tensor) -> Rewrite:
    """Concat(Relu(w), z) = Concat(w, z) when w = z and z > 0   (sound: the guard on w is
    reached only through z)"""
    return rewrite(op.Concat(op.Relu(w), z, axis=0)).to(
        op.Concat(w, z, axis=0), w.is_scalar(), z.is_scalar(), w.rank == 1, z.rank == 1,
        w.value() == z.value(), z.value() > 0,
    )  # fmt: skip


def test_a_guard_reached_through_another_variable_is_assumed() -> None:
    """The w element's query needs `z > 0` as well as `w == z`: without it w = z = -1 is a
    'counterexample' the guards exclude, and a true rule is refuted."""
    result = prove(_rule("relu_of_linked_positive"), Bound(dtypes=(TensorProto.FLOAT,)))
    assert result.status == PROVED, result.reason


@RS.rule
def neg_head_beside_a_guarded_quotient(w: Tensor, z: Tensor, k: Tensor) -> Rewrite:
    """Concat(-w, z·k) = Concat(w, z·k + z/(z + k)) for z >= 0, k = 1 given as a guard on its
    value (not filled in as a constant)   (false in w only)"""
    lhs = op.Concat(-w, z * k, axis=0)
    rhs = op.Concat(w, z * k + z / (z + k), axis=0)
    return rewrite(lhs).to(
        rhs, w.shape == [1], z.shape == [1], k.shape == [1],
        z.is_scalar(), z.value() >= 0, k.is_scalar(), k.value() == 1,
    )  # fmt: skip


def test_a_counterexample_satisfies_the_guards_of_variables_outside_its_element() -> None:
    """The w element's model leaves z and k open; a counterexample must still give them values
    the guards allow (k = 1, z >= 0), so the reason is the sides' difference, not a right side
    'undefined' at k = 0, and ORT confirms it."""
    result = prove(_rule("neg_head_beside_a_guarded_quotient"), Bound(dtypes=(TensorProto.INT64,)))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ", cx.why
    assert cx.inputs["k"] == [1] and cx.inputs["z"][0] >= 0
    assert cx.lhs_ort is not None and cx.lhs_ort[0] == -cx.rhs_ort[0] != 0


@RS.rule
def exp_only_at_five(x: Tensor, c: Tensor) -> Rewrite:
    """Where(x == c, Exp(x), 0) = 0 for c = 5   (false only at x = 5, which no seeded random
    input hits: the counterexample must be Z3's own, confirmed in float64)"""
    lhs = op.Where(op.Equal(x, c), op.Exp(x), x - x)
    return rewrite(lhs).to(x - x, c.is_scalar(), c.value() == 5.0)


def test_a_counterexample_the_random_inputs_miss_is_z3s() -> None:
    """_counterexample 43: with the random search empty-handed and Z3's witness confirmed in
    float64, the witness is reported (not a crash reading the search's missing result)."""
    result = prove(_rule("exp_only_at_five"), Bound(dtypes=(TensorProto.FLOAT,)))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ (confirmed in float64)"
    assert cx.inputs == {"x": [5.0], "c": [5.0]}
    assert np.asarray(cx.lhs, dtype=float)[0] == pytest.approx(np.exp(5.0), rel=1e-6)


@RS.rule
def exp_of_positive_is_zero(x: Tensor) -> Rewrite:
    """Where(x > 0, Exp(x), 0) = 0   (false for every x > 0; the gap grows with x)"""
    return rewrite(op.Where(op.Greater(x, x - x), op.Exp(x), x - x)).to(x - x)


def test_the_widest_of_z3s_and_the_random_witnesses_is_reported() -> None:
    """_counterexample 45: where both Z3 (x = 0.5 here) and the seeded random inputs (normal,
    sigma 2: some above 2) find a difference, the one where the sides differ most is shown."""
    result = prove(_rule("exp_of_positive_is_zero"), Bound(dtypes=(TensorProto.FLOAT,)))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ (confirmed in float64)"
    assert cx.inputs["x"][0] > 2.0, cx.inputs
    assert np.asarray(cx.lhs, dtype=float)[0] > np.exp(2.0)


@RS.rule
def doubled_head_beside_a_defined_quotient(w: Tensor, z: Tensor, k: Tensor) -> Rewrite:
    """Concat(w, z·k) = Concat(w + w, z·k + (z / (|z| + k))·(z - z)) for k = 1   (false in w
    only; the right side divides by |z| + 1, which no int32 z makes 0, and z is in no guard)"""
    rhs = op.Concat(w + w, z * k + (z / (op.Abs(z) + k)) * (z - z), axis=0)
    return rewrite(op.Concat(w, z * k, axis=0)).to(
        rhs, w.shape == [1], z.shape == [1], k.shape == [1], k.is_one()
    )


def test_a_variable_in_no_guard_and_no_differing_element_leaves_the_right_side_defined() -> None:
    """check_case 79, 81, 82 (model_completion dropped): the w element's model has no value for
    z (no guard names it); the right side is defined for every z, so the counterexample is the
    sides' difference, not 'the right side is undefined'."""
    result = prove(
        _rule("doubled_head_beside_a_defined_quotient"), Bound(dtypes=(TensorProto.INT32,))
    )
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.why == "the sides differ", cx.why
    assert cx.lhs_ort is not None and cx.rhs_ort is not None
    w = np.int32(cx.lhs_ort[0])
    with np.errstate(over="ignore"):
        assert cx.rhs_ort[0] == w + w != w  # int32: w + w wraps
    assert cx.rhs_ort[1] == cx.lhs_ort[1]


@RS.rule(tags=["bit-exact", "portable"])
def times_three_twice(x: Tensor, a: Tensor) -> Rewrite:
    """(x·a)·a = x·(a·a) for x = 683, a = 3   (bit-exact in float32, where every product is
    an integer below 2^24; in float16 (x·3)·3 rounds twice: 6144 against 6148)"""
    return rewrite((x * a) * a).to(
        x * (a * a), x.is_scalar(), x.value() == 683.0, a.is_scalar(), a.value() == 3.0
    )


def test_a_bit_exact_rule_is_checked_bit_for_bit_in_float16() -> None:
    """_prove 100 (the float check run without `bits`): a bit-exact rule's float16 view is
    compared bit for bit, not within tolerance (6144 and 6148 are close, not equal); ORT runs
    float16 Mul in float32 here and agrees, so the verdict is unknown, never proved."""
    t = time.perf_counter()
    result = prove(_rule("times_three_twice"))
    elapsed = time.perf_counter() - t
    assert result.status == UNKNOWN, (result.status, result.reason)
    assert "in float16 where the sides differ" in result.reason
    # _prove 130-132: the float check's unknown carries the bound, the cases and the time
    assert result.bound == DEFAULT_BOUND.describe() and result.cases >= 1
    assert isinstance(result.seconds, float) and 0 < result.seconds <= elapsed
    assert isinstance(result.cases, int)


@RS.rule
def tanh_odd(x: Tensor) -> Rewrite:
    """Tanh(-x) = -Tanh(x)   (true; with tanh uninterpreted Z3 answers with values the real
    function does not take, and the random inputs all agree: unknown, with that reason)"""
    return rewrite(op.Tanh(-x)).to(-op.Tanh(x))


def test_an_unknown_case_reports_its_bound_cases_and_time() -> None:
    """_prove 108, 120, 122: the result of a rule some case left unknown (not the float check)
    carries the reason, the bound, the cases checked and the seconds."""
    bound = Bound(dtypes=(TensorProto.FLOAT,))
    t = time.perf_counter()
    result = prove(_rule("tanh_odd"), bound)
    elapsed = time.perf_counter() - t
    assert result.status == UNKNOWN
    assert result.reason.startswith("a counterexample needs values of exp/erf/tanh/sqrt")
    assert result.bound == bound.describe() and result.cases >= 1
    assert isinstance(result.seconds, float) and 0 < result.seconds <= elapsed
    assert isinstance(result.cases, int)


@RS.rule
def add_sub_cancel(a: Tensor, b: Tensor) -> Rewrite:
    """(a + b) - b = a   (exact in reals, cancellation in floats: the float check refutes it)"""
    y = a + b
    return rewrite(y - b).to(a, y.shape == a.shape)


def test_a_float_check_refutation_reports_its_bound_cases_and_time() -> None:
    """_prove 108, 111: refuted by the float check, after every case held in reals."""
    bound = Bound(dtypes=(TensorProto.FLOAT,))
    t = time.perf_counter()
    result = prove(_rule("add_sub_cancel"), bound)
    elapsed = time.perf_counter() - t
    assert result.status == REFUTED and result.counterexample is not None
    assert "beyond the tolerance of the output" in result.counterexample.why
    assert result.bound == bound.describe() and result.cases >= 1
    assert isinstance(result.seconds, float) and 0 < result.seconds <= elapsed
    assert isinstance(result.cases, int)


def test_a_proof_that_took_exactly_its_time_limit_is_within_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """_over_budget 3 (> -> >=): the limit is "more than max_seconds"; with the prover's clock
    stopped every case takes 0 s, which a limit of 0 s allows."""
    from types import SimpleNamespace

    from rewrite.verify import prove as prove_module

    monkeypatch.setattr(prove_module, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    result = prove(_rule("relu_relu"), Bound(max_seconds=0.0))
    assert result.status == PROVED, result.reason


def test_a_proof_reports_its_bound_cases_and_time() -> None:
    """_prove 140, 142: a proved rule's result carries the bound and the seconds it took."""
    t = time.perf_counter()
    result = prove(_rule("relu_relu"))
    elapsed = time.perf_counter() - t
    assert result.status == PROVED
    assert result.bound == DEFAULT_BOUND.describe() and result.cases >= 1
    assert isinstance(result.seconds, float) and 0 < result.seconds <= elapsed
    assert isinstance(result.cases, int)
