"""The proof bound covers what a compiled rule matches: ranks 0-6, the 1-element shape of every
rank (which broadcasts anything up), and dims on both sides of the rule's integer constants."""

from __future__ import annotations

from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.verify.bound import DEFAULT_BOUND, MAX_RANK
from rewrite.verify.cases import cases, constants
from rewrite.verify.prove import REFUTED, prove

RS = RuleSet("bound")


@RS.rule
def slice_to_5_noop(x: Tensor) -> Rewrite:
    """Slice(x, 0:5 on the last axis) = x   (wrong: only while that dim is <= 5)"""
    return rewrite(op.Slice(x, starts=(0,), ends=(5,), axes=(-1,), steps=(1,))).to(x)


@RS.rule
def slice_multiple_of_6(x: Tensor) -> Rewrite:
    """Slice(x, 0:6 on the last axis) = x   when dim % 6 == 0 (wrong at 12)"""
    return rewrite(op.Slice(x, starts=(0,), ends=(6,), axes=(-1,), steps=(1,))).to(
        x, x.dim(-1) % 6 == 0
    )


def test_every_rank_and_its_one_element_shape_is_in_the_bound() -> None:
    ranks = {len(s) for s in DEFAULT_BOUND.shapes}
    assert ranks == set(range(MAX_RANK + 1))
    for r in range(1, MAX_RANK + 1):
        assert (1,) * r in DEFAULT_BOUND.shapes


def test_dims_around_each_constant() -> None:
    assert (5, False) in constants(RS.rules[0]) and (6, True) in constants(RS.rules[1])
    around = DEFAULT_BOUND.around(constants(RS.rules[1]))
    dims = {d for s in around.shapes for d in s}
    assert {5, 6, 7, 12} <= dims
    assert DEFAULT_BOUND.around([(1, False), (10_000, False)]) is DEFAULT_BOUND


def test_a_constant_beyond_the_small_dims_is_bracketed() -> None:
    for rule, dim in ((RS.rules[0], 6), (RS.rules[1], 12)):
        assert any(c.tensors["x"].shape[-1:] == (dim,) for c in cases(rule, DEFAULT_BOUND))
        result = prove(rule)
        assert result.status == REFUTED and result.counterexample is not None
        assert result.counterexample.case["shapes"]["x"][-1] == dim
