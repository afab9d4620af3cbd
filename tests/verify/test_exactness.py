"""Exactness classes: what is proved in IEEE float32 and bit-vector integers, what the float
check refuses, and what the axioms now prove (issue 12's causes 1, 3, 4, 7).

Every refutation here carries a counterexample that ORT reproduced (`lhs_ort`/`rhs_ort`).
"""

from __future__ import annotations

import numpy as np
import pytest

from rewrite.errors import RuleError
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.verify.prove import PROVED, REFUTED, prove

RS = RuleSet("exactness")


@RS.rule
def cast_int64_int32_int64(x: Tensor) -> Rewrite:
    """Cast(Cast(x, int32), int64) = x for int64 x   (wrong: 2^31 wraps)"""
    return rewrite(op.Cast(op.Cast(x, to=6), to=7)).to(x, x.dtype == 7)


@RS.rule
def cast_int_float_int(x: Tensor) -> Rewrite:
    """Cast(Cast(x, float32), int64) = x for int64 x   (wrong: 2^24 + 1 rounds)"""
    return rewrite(op.Cast(op.Cast(x, to=1), to=7)).to(x, x.dtype == 7)


@RS.rule
def cast_float16_round_trip(x: Tensor) -> Rewrite:
    """Cast(Cast(x, float16), float32) = x for float32 x   (wrong: 11-bit mantissa)"""
    return rewrite(op.Cast(op.Cast(x, to=10), to=1)).to(x, x.dtype == 1)


@RS.rule
def cast_float32_float64_float32(x: Tensor) -> Rewrite:
    """Cast(Cast(x, float64), float32) = x for float32 x   (right: float64 holds float32)"""
    return rewrite(op.Cast(op.Cast(x, to=11), to=1)).to(x, x.dtype == 1)


@RS.rule
def add_sub_cancel(a: Tensor, b: Tensor) -> Rewrite:
    """(a + b) - b = a   (exact in reals; cancellation in float32)"""
    return rewrite((a + b) - b).to(a, a.shape == b.shape)


@RS.rule
def mul_zero(x: Tensor, c: Tensor) -> Rewrite:
    """x · 0 = 0   (inf · 0 is NaN)"""
    return rewrite(x * c).to(c, c.is_zero(), x.shape == c.shape)


@RS.rule
def div_as_mul_reciprocal(a: Tensor, b: Tensor) -> Rewrite:
    """a / b = a · Reciprocal(b) for float32   (right at b = 0, both ±inf / NaN; but wrong at a
    subnormal b: 1 / 1e-40 overflows to inf, so 1e-3 / 1e-40 = 1e37 becomes inf, and
    -0 / -1e-40 = 0 becomes -0 · -inf = NaN, as ORT computes it)"""
    return rewrite(a / b).to(a * op.Reciprocal(b), a.dtype == 1)


@RS.rule
def neg_int64(x: Tensor) -> Rewrite:
    """Neg(Neg(x)) = x   (right, also at INT64_MIN: both negations wrap)"""
    return rewrite(op.Neg(op.Neg(x))).to(x)


@RS.rule
def exp_of_sum(a: Tensor, b: Tensor) -> Rewrite:
    """Exp(a) · Exp(b) = Exp(a + b)   (exact in reals; exp(100) · exp(-100) = inf in float32)"""
    return rewrite(op.Exp(a) * op.Exp(b)).to(op.Exp(a + b), a.shape == b.shape)


@RS.rule
def tanh_as_sigmoid(x: Tensor, c: Tensor, d: Tensor) -> Rewrite:
    """d·Sigmoid(d·x) - 1 = Tanh(x) for d = 2   (right: tanh(x) = 2·sigmoid(2x) - 1)"""
    return rewrite(d * op.Sigmoid(d * x) - c).to(
        op.Tanh(x),
        c.is_one(),
        c.is_scalar(),
        d.is_scalar(),
        d.value() == 2.0,
        x.rank >= 1,
        c.rank <= x.rank,  # a one-element c or d of higher rank broadcasts x up
        d.rank <= x.rank,
    )


@RS.rule(tags=["bit-exact"])
def relu_of_exp_bit_exact(x: Tensor) -> Rewrite:
    """Relu(Exp(x)) = Exp(x), bit-exact   (exp is never negative, nor -0)"""
    return rewrite(op.Relu(op.Exp(x))).to(op.Exp(x))


@RS.rule(tags=["bit-exact"])
def add_zero_bit_exact(x: Tensor, z: Tensor) -> Rewrite:
    """x + 0 = x, bit-exact   (wrong: -0 + 0 = +0)"""
    return rewrite(x + z).to(x, z.is_zero(), z.shape == x.shape)


@RS.rule(tags=["bit-exact"])
def mul_one_bit_exact(x: Tensor, c: Tensor) -> Rewrite:
    """x · 1 = x, bit-exact   (right: NaN, ±inf and ±0 kept)"""
    return rewrite(x * c).to(x, c.is_one(), c.shape == x.shape)


def _rule(name: str):  # type: ignore[no-untyped-def]
    return next(r for r in RS if r.name == name)


WRONG = [
    "cast_int64_int32_int64",
    "cast_int_float_int",
    "cast_float16_round_trip",
    "add_sub_cancel",
    "mul_zero",
    "exp_of_sum",
    "add_zero_bit_exact",
    "div_as_mul_reciprocal",
]
RIGHT = [
    "cast_float32_float64_float32",
    "neg_int64",
    "tanh_as_sigmoid",
    "relu_of_exp_bit_exact",
    "mul_one_bit_exact",
]


@pytest.mark.parametrize("name", WRONG)
def test_wrong_rule_is_refuted_with_a_counterexample_ort_reproduces(name: str) -> None:
    result = prove(_rule(name))
    assert result.status == REFUTED, result.reason
    cx = result.counterexample
    assert cx is not None and cx.lhs_ort is not None, cx.line() if cx else ""
    left, right = np.asarray(cx.lhs_ort), np.asarray(cx.rhs_ort)
    if left.dtype.kind in "iub" and right.dtype.kind in "iub":  # exact: 2^62 + 1 stays whole
        assert (left.astype(object) != right.astype(object)).any()
        return
    left, right = left.astype(float), right.astype(float)
    differ = ~((left == right) & (np.signbit(left) == np.signbit(right)))
    assert (differ & ~(np.isnan(left) & np.isnan(right))).any()


@pytest.mark.parametrize("name", RIGHT)
def test_sound_rule_is_proved(name: str) -> None:
    result = prove(_rule(name))
    assert result.status == PROVED, (
        result.counterexample.line() if result.counterexample else result.reason
    )


def test_int64_to_int32_counterexample_wraps() -> None:
    cx = prove(_rule("cast_int64_int32_int64")).counterexample
    assert cx is not None
    x = int(np.ravel(cx.inputs["x"])[0])
    assert not -(2**31) <= x < 2**31


def test_float_check_names_the_unbounded_error() -> None:
    cx = prove(_rule("add_sub_cancel")).counterexample
    assert cx is not None and "exact in reals only" in cx.why


def test_a_rule_has_one_class() -> None:
    bad = RuleSet("bad")
    with pytest.raises(RuleError, match="one class"):

        @bad.rule(tags=["bit-exact", "exact"])
        def both(x: Tensor) -> Rewrite:
            return rewrite(op.Neg(op.Neg(x))).to(x)
