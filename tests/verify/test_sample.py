"""Adversarial sampling: the numeric class of a rule on normal values, and refutations found
with special values, run in ORT float32 and numpy float64."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from rewrite.rules import Rewrite, Rule, RuleSet, Tensor, op, rewrite
from rewrite.verify.refute import violation
from rewrite.verify.reproduce import reproduce
from rewrite.verify.sample import (
    APPROXIMATE,
    BIT_EXACT,
    EXACT_IN_REALS,
    ORT_REJECTS,
    sample,
    scaled_error,
)
from rewrite.verify.specials import special_values
from rulesets import builtin
from tests.verify.wrong_rules import WRONG

RS = RuleSet("numeric")


@RS.rule
def add_assoc(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
    """(a + b) + c = a + (b + c): exact in the reals, rounds differently in float32"""
    return rewrite((a + b) + c).to(a + (b + c))


@RS.rule(tags=["approximate"])
def gelu_fast(x: Tensor) -> Rewrite:
    """Gelu(x) ≈ FastGelu(x) (the tanh approximation; ORT's FastGelu takes float32 of rank
    1 or more only)"""
    return rewrite(op.ms.Gelu(x)).to(op.ms.FastGelu(x), x.dtype == TensorProto.FLOAT, x.rank >= 1)


@RS.rule
def int_div_neg(a: Tensor, c: Tensor) -> Rewrite:
    """a / c = -((-a) / c): INT64_MIN / -1 traps in ORT, so such inputs are never run"""
    return rewrite(a / c).to(-((-a) / c), a.shape == c.shape, a.dtype == TensorProto.INT64)


def _rule(rs: RuleSet | dict, name: str) -> Rule:
    return next(r for r in rs if r.name == name)


def test_a_rule_that_computes_the_same_ops_is_bit_exact() -> None:
    result = sample(_rule(builtin()["cleanup"], "transpose_transpose"))
    assert result.numeric == BIT_EXACT and result.samples > 0 and result.max_error == 0.0
    assert not result.refuted


def test_reassociation_is_exact_in_reals_but_overflows_in_float32() -> None:
    result = sample(_rule(RS, "add_assoc"))
    print(result.counterexample_line)
    assert result.numeric == EXACT_IN_REALS  # on normal values it only rounds differently
    assert result.refuted  # overflow (inf on one side only) or cancellation (1 + 3e38 - 3e38)
    assert "float32" in result.counterexample_line


def test_tanh_gelu_is_approximate_with_its_measured_error() -> None:
    result = sample(_rule(RS, "gelu_fast"))
    assert result.numeric == APPROXIMATE and not result.refuted
    assert 1e-5 < result.max_error < 1e-3
    assert result.within(1e-3) and not result.within(1e-5)


def test_a_wrong_rule_samples_far_off() -> None:
    result = sample(_rule(WRONG, "sub_commutes"))
    assert result.numeric == APPROXIMATE and result.refuted


def test_sides_of_different_shape_are_refuted() -> None:
    result = sample(_rule(WRONG, "mul_one_broadcast_dropped"))
    assert result.refuted and "differ in type" in result.counterexample_line


def test_special_values_cover_the_float_and_integer_edges() -> None:
    f32 = special_values(TensorProto.FLOAT)
    assert np.isnan(f32).any() and np.isposinf(f32).any() and np.isneginf(f32).any()
    zeros = f32[f32 == 0]
    assert {bool(np.signbit(z)) for z in zeros} == {False, True}  # +0 and -0
    assert (np.abs(f32[np.isfinite(f32)]) < np.finfo(np.float32).tiny).any()  # subnormals
    for v in (3e38, 1e30, 2.0**24, 2.0**31, 2.0**53, 1.0 + 2.0**-23):
        assert np.float32(v) in f32
    i64 = special_values(TensorProto.INT64)
    assert {-(2**63), 2**63 - 1, 2**31, 2**24 + 1, 2**53 + 1} <= set(i64.tolist())
    i32 = special_values(TensorProto.INT32)
    assert i32.dtype == np.int32 and {-(2**31), 2**31 - 1} <= set(i32.tolist())
    f16 = special_values(TensorProto.FLOAT16)
    assert np.float16(65504) in f16 and np.isposinf(f16).any()


def test_only_special_values_refute_x_times_zero() -> None:
    rule = _rule(WRONG, "mul_zero_is_zero")
    assert not sample(rule, rounds=2).refuted  # two rounds of normal values: no inf, no NaN
    result = sample(rule)
    print(result.counterexample_line)
    assert result.refuted and "NaN on one side only" in result.counterexample_line


def test_a_bit_exact_claim_is_refuted_by_signed_zero_an_exact_one_is_not() -> None:
    bit = sample(_rule(WRONG, "add_zero_bit_exact"))
    assert bit.refuted and "not bit-identical" in bit.counterexample_line
    assert "-0" in bit.counterexample_line
    exact = sample(_rule(builtin()["cleanup"], "add_zero"))
    assert not exact.refuted and exact.samples > 0


def test_ort_rejecting_the_right_side_is_a_refutation() -> None:
    result = sample(_rule(WRONG, "div_div_merge"))  # int: c · d wraps to 0, a / 0 fails in ORT
    print(result.counterexample_line)
    assert result.numeric == ORT_REJECTS and result.refuted
    assert "ORT cannot run the right side" in result.counterexample_line
    bias = sample(_rule(WRONG, "bias_gelu_any_bias"))  # BiasGelu's kernel: a 1-D bias only
    line = bias.counterexample_line
    assert bias.refuted and ("ORT cannot run" in line or "right side is not defined" in line)


def test_the_sampling_bound_reaches_rank_5_and_the_rule_s_constants() -> None:
    perm = sample(_rule(WRONG, "transpose_twelve_times"))  # holds up to rank 4
    assert perm.refuted and perm.counterexample is not None
    assert max(len(s) for s in perm.counterexample["case"]["shapes"].values()) >= 5
    slice8 = sample(_rule(WRONG, "slice_to_8_noop_when_multiple"))  # holds at dim 8, not 16
    assert slice8.refuted and "[16]" in slice8.counterexample_line


def test_integer_min_over_minus_one_is_never_run() -> None:
    result = sample(_rule(RS, "int_div_neg"))  # would kill the process with SIGFPE
    assert result.samples > 0


def test_a_sampled_counterexample_reproduces_in_ort_and_is_shrunk() -> None:
    rule = _rule(WRONG, "neg_of_int_quotient")
    result = sample(rule)
    assert result.counterexample is not None
    assert reproduce(rule, result.counterexample)
    inputs = result.counterexample["inputs"]
    flat = [x for v in inputs.values() for x in np.asarray(v, dtype=object).reshape(-1)]
    assert sum(x != 1 for x in flat) <= 2  # every element the failure does not need is 1
    assert result.counterexample["lhs"] != result.counterexample["rhs"]  # ORT's outputs


def test_violation_per_class() -> None:
    one = np.array([1.0], dtype=np.float32)
    near = np.array([1.0 + 2e-5], dtype=np.float32)
    assert violation("bit-exact", one, near, 0.0)
    assert not violation("exact", one, near, 0.0)
    assert violation("exact", one, np.array([1.01], dtype=np.float32), 0.0)
    assert violation("exact", np.array([np.nan], np.float32), one, 0.0)
    assert violation("exact", np.array([np.inf], np.float32), np.array([3e38], np.float32), 0.0)
    z, nz = np.array([0.0], np.float32), np.array([-0.0], np.float32)
    assert violation("bit-exact", z, nz, 0.0) and not violation("exact", z, nz, 0.0)
    assert not violation("approximate", one, np.array([1.0005], np.float32), 1e-3)


def test_an_approximate_rule_may_remove_an_overflow_never_add_one() -> None:
    """Left inf where the float64 value (here 8e24) is in range: the right side agrees when
    within the tolerance of that value; the other way round (right overflows) never."""
    exact = np.array([-8.0e24])
    inf, near = np.array([-np.inf], np.float32), np.array([-8.0e24 * (1 + 1e-6)], np.float32)
    assert not violation("approximate", inf, near, 1e-3, exact)
    assert violation("approximate", inf, near * 2, 1e-3, exact)  # not the exact value
    assert violation("approximate", near, inf, 1e-3, exact)  # the right side overflows
    assert violation("exact", inf, near, 1e-3, exact)  # only approximate claims
    assert violation("approximate", inf, near, 1e-3, np.array([-1e39]))  # exact overflows too
    nan = np.array([np.nan], np.float32)
    assert not violation("approximate", nan, near, 1e-3, exact)  # inf - inf on the left


def test_scaled_error() -> None:
    a = np.array([1.0, 2.0, 40.0])
    assert scaled_error(a, a) == 0.0
    assert scaled_error(a + np.array([0, 0, 4.0]), a) == 0.1  # 4 / max(1, 40)
    assert scaled_error(np.array([np.nan, 1.0]), np.array([0.0, 1.0])) == float("inf")
    assert scaled_error(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])) == 0.0
    assert scaled_error(np.zeros(2), np.zeros(3)) == float("inf")
