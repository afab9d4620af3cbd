"""The proved domain compiled into egglog: a rule proved on float32/int64 and ranks <= R does
not match a float64, bool or higher-rank tensor, and still matches inside its domain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.domain import Domain
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.bound import rule_domain
from rulesets.cleanup import CLEANUP
from tests.egraph.models import model, vi
from tests.rules.test_saturate import encoded

NEG = RuleSet("neg")


@NEG.rule
def double_neg(x: Tensor) -> Rewrite:
    """Neg(Neg(x)) = x"""
    return rewrite(op.Neg(op.Neg(x))).to(x)


def neg_neg(shape: list[int], dtype: int) -> onnx.ModelProto:
    nodes = [h.make_node("Neg", ["x"], ["n1"]), h.make_node("Neg", ["n1"], ["y"])]
    return model(nodes, [vi("x", shape, dtype)], [vi("y", shape, dtype)])


def matches(m: onnx.ModelProto, rs: RuleSet, folder: Path) -> int:
    stats = saturate(encoded(m, folder), [rs], Limits(iterations=2))
    assert stats.refused == []
    return sum(stats.matches.values())


def proved(rs: RuleSet) -> RuleSet:
    """`rs` as the verification gate hands it on: each rule with its proved domain."""
    return RuleSet(rs.name, [replace(r, domain=rule_domain(r)) for r in rs], rs.doc)


@pytest.mark.parametrize(
    ("shape", "dtype", "fires"),
    [
        ([2, 3], T.FLOAT, True),
        ([], T.FLOAT, True),  # rank 0 is in the bound
        ([1, 1, 1, 1, 1, 2], T.FLOAT16, True),  # rank 6, float16 (the float check's view)
        ([2, 3], T.INT32, True),
        ([2, 3], T.DOUBLE, False),  # float64 is not in the bound of a non-cast rule
        ([2, 3], T.INT8, False),
        ([1, 1, 1, 1, 1, 1, 2], T.FLOAT, False),  # rank 7: past the bound
    ],
)
def test_a_proved_rule_matches_only_inside_its_domain(
    tmp_path: Path, shape: list[int], dtype: int, fires: bool
) -> None:
    assert (matches(neg_neg(shape, dtype), proved(NEG), tmp_path) > 0) is fires
    # the same rule, unverified (no domain), matches wherever its pattern does
    assert matches(neg_neg(shape, dtype), NEG, tmp_path) > 0


def test_a_rule_that_only_moves_data_holds_at_every_dtype(tmp_path: Path) -> None:
    assert rule_domain(next(r for r in CLEANUP if r.name == "identity_elim")).dtypes == ()
    m = model(
        [h.make_node("Identity", ["x"], ["i"]), h.make_node("Not", ["i"], ["y"])],
        [vi("x", [2], T.BOOL)],
        [vi("y", [2], T.BOOL)],
    )
    only = RuleSet("c", [r for r in CLEANUP if r.name == "identity_elim"])
    assert matches(m, proved(only), tmp_path) > 0


def test_an_open_perm_limits_the_rank(tmp_path: Path) -> None:
    """Transpose(Transpose(x, p), q): perms are enumerated to rank 5, so rank 6 stays out."""
    rule = next(r for r in CLEANUP if r.name == "transpose_transpose")
    assert rule_domain(rule).max_rank == 5
    only = proved(RuleSet("c", [rule]))
    for rank, fires in ((5, True), (6, False)):
        perm = [*range(1, rank), 0]
        nodes = [
            h.make_node("Transpose", ["x"], ["t"], perm=perm),
            h.make_node("Transpose", ["t"], ["y"], perm=perm),
        ]
        shape = [2] * rank
        m = model(nodes, [vi("x", shape)], [vi("y", shape)])
        assert (matches(m, only, tmp_path) > 0) is fires


def test_mixed_dtypes_stay_out_of_a_one_dtype_domain(tmp_path: Path) -> None:
    """A one-dtype proof says nothing where the variables' dtypes differ."""
    d = Domain(6, (T.FLOAT, T.INT64))
    atoms = d.atoms({"a": "_v_a", "b": "_v_b"}, [], [])
    assert "(= (dtype _v_b) (dtype _v_a))" in atoms
    assert any(f"{(1 << T.FLOAT) | (1 << T.INT64)}" in a for a in atoms)


def test_rules_list_shows_the_domain(capsys: pytest.CaptureFixture[str]) -> None:
    from rewrite.cli import main

    assert main(["rules", "list", "--ruleset", "cleanup"]) == 0
    out = capsys.readouterr().out
    assert "domain: ranks 0-5; any dtype" in out  # transpose_transpose
    assert "domain: ranks 0-6; float32/int64/float16/int32 (one dtype)" in out  # double_neg
