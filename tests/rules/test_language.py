"""The rule language: rules are data, compile to egglog, and fail early with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewrite.errors import RuleError
from rewrite.rules import Int, Ints, Rewrite, RuleSet, Tensor, op, rewrite

MINE = RuleSet("mine")


@MINE.rule
def neg_neg_gone(x: Tensor) -> Rewrite:
    """Neg(Neg(x)) = x

    A second paragraph."""
    return rewrite(op.Neg(op.Neg(x))).to(x)


def test_rule_records_name_doc_source_and_params() -> None:
    (rule,) = MINE
    lines = Path(__file__).read_text().splitlines()
    line = lines.index("@MINE.rule") + 1
    assert rule.name == "neg_neg_gone"
    assert rule.identity == "Neg(Neg(x)) = x"
    assert "second paragraph" in rule.doc
    assert rule.source == f"{Path(__file__).name}:{line}"
    assert rule.params == (("x", "Tensor"),)
    assert rule.tags == frozenset({"exact", "portable"})
    (form,) = rule.compile("rs")
    assert form == (
        "(rule ((= _n1 (Neg _v_x)) (= _n2 (Neg _n1))) ((union _n2 _v_x)) "
        ':ruleset rs :name "neg_neg_gone")'
    )


def test_a_list_of_rewrites_compiles_with_numbered_names() -> None:
    rs = RuleSet("mine")

    @rs.rule(tags=["exact", "ort-cpu"])
    def both_orders(x: Tensor, c: Tensor) -> list[Rewrite]:
        """x·1 = 1·x = x"""
        return [rewrite(y).to(x, c.is_one()) for y in (x * c, c * x)]

    (rule,) = rs
    assert rule.tags == frozenset({"exact", "ort-cpu"})
    names = [f.rsplit(":name ", 1)[1] for f in rule.compile("r")]
    assert names == ['"both_orders@0")', '"both_orders@1")']


def test_rank_dependent_attribute_arithmetic_compiles_per_rank() -> None:
    rs = RuleSet("mine")

    @rs.rule
    def tt(x: Tensor, p: Ints, q: Ints) -> Rewrite:
        """Transpose(Transpose(x, p), q) = Transpose(x, p∘q)"""
        inner = op.Transpose(x, perm=p)
        return rewrite(op.Transpose(inner, perm=q)).to(op.Transpose(x, perm=p.compose(q)))

    forms = rs.rules[0].compile("r")
    assert len(forms) == 6
    assert "(= (vec-length _a_q) 3)" in forms[2]
    # the composed perm is computed in the query, never in the action
    query, action = forms[2].split(") ((union", 1)
    assert "(vec-get _a_p (vec-get _a_q 2))" in query and "vec-get" not in action


def test_guards_compile_to_shape_dtype_and_fact_atoms() -> None:
    rs = RuleSet("mine")

    @rs.rule
    def guarded(a: Tensor, b: Tensor, c: Tensor) -> Rewrite:
        """A @ B + A @ C = A @ (B + C)   when shape(B) == shape(C)"""
        return rewrite(a @ b + a @ c).to(
            a @ (b + c), b.shape == c.shape, a.rank == 3, b.dtype == c.dtype, a.dim(-1) % 8 == 0
        )

    (form,) = rs.rules[0].compile("r")
    assert "(= (shape _v_b) (shape _v_c))" in form
    assert "(= (vec-length (shape _v_a)) 3)" in form
    assert "(= (dtype _v_b) (dtype _v_c))" in form
    assert "(% (vec-get (shape _v_a) (+ (vec-length (shape _v_a)) -1)) 8)" in form


def _define(body: object) -> None:
    rs = RuleSet("bad")
    rs.rule(body)  # type: ignore[arg-type]


def test_unknown_op_names_the_rule_and_lists_the_ops() -> None:
    def uses_unknown(x: Tensor) -> Rewrite:
        return rewrite(op.Frobnicate(x)).to(x)

    with pytest.raises(
        RuleError,
        match=r"uses_unknown \(test_language\.py:\d+\): unknown op "
        r"op\.Frobnicate.*rules can use: .*MatMul",
    ):
        _define(uses_unknown)


def test_op_without_typed_form_is_refused_clearly() -> None:
    def uses_nonzero(x: Tensor, w: Tensor) -> Rewrite:
        return rewrite(op.NonZero(x)).to(x)

    with pytest.raises(RuleError, match=r"op\.NonZero: NonZero has no typed e-graph form yet"):
        _define(uses_nonzero)


def test_unbound_variable_on_the_right_side() -> None:
    def unbound(x: Tensor, y: Tensor) -> Rewrite:
        return rewrite(-x).to(y)

    with pytest.raises(
        RuleError,
        match=r"unbound \(test_language\.py:\d+\): variable y on the "
        r"right side is not bound",
    ):
        _define(unbound)


def test_unbound_attribute_variable_on_the_right_side() -> None:
    def unbound_attr(x: Tensor, p: Ints) -> Rewrite:
        return rewrite(-x).to(op.Transpose(x, perm=p))

    with pytest.raises(RuleError, match=r"attribute variable p on the right side is not bound"):
        _define(unbound_attr)


def test_missing_required_attribute_on_the_right_side() -> None:
    def no_to(x: Tensor) -> Rewrite:
        return rewrite(-x).to(op.Cast(x))

    with pytest.raises(RuleError, match=r"Cast on the right side needs to=\.\.\."):
        _define(no_to)


def test_unknown_attribute_lists_the_known_ones() -> None:
    def bad_attr(x: Tensor) -> Rewrite:
        return rewrite(op.Transpose(x, axes=[1, 0])).to(x)

    with pytest.raises(RuleError, match=r"Transpose has no attribute axes; it has: perm"):
        _define(bad_attr)


def test_condition_on_a_term_outside_the_left_side() -> None:
    def outside(x: Tensor, y: Tensor) -> Rewrite:
        return rewrite(-x).to(x, (x + y).shape == x.shape)

    with pytest.raises(RuleError, match=r"in a condition is not part of the left side"):
        _define(outside)


def test_parameter_without_a_type() -> None:
    def untyped(x) -> Rewrite:  # type: ignore[no-untyped-def]
        return rewrite(-x).to(x)

    with pytest.raises(RuleError, match=r"parameter x needs a type: Tensor, Ints, Int or Float"):
        _define(untyped)


def test_body_that_is_not_a_rewrite() -> None:
    def nothing(x: Tensor) -> Rewrite:
        return "(rewrite (Neg x) x)"  # type: ignore[return-value]

    with pytest.raises(RuleError, match=r"a rule returns rewrite\(lhs\)\.to\(rhs, \.\.\.\)"):
        _define(nothing)


def test_variable_as_left_side() -> None:
    def var_lhs(x: Tensor) -> Rewrite:
        return rewrite(x).to(op.Neg(op.Neg(x)))

    with pytest.raises(RuleError, match=r"a left side must be an op, not the variable x"):
        _define(var_lhs)


def test_unknown_tag_and_duplicate_name() -> None:
    rs = RuleSet("mine")
    with pytest.raises(RuleError, match=r"bad_tag \(.*\): unknown tags \['fast'\]"):

        @rs.rule(tags=["fast"])
        def bad_tag(x: Tensor) -> Rewrite:
            return rewrite(-x).to(x)

    @rs.rule
    def twice(x: Tensor) -> Rewrite:
        return rewrite(op.Neg(op.Neg(x))).to(x)

    with pytest.raises(RuleError, match=r"twice \(test_language\.py:\d+\).*already in ruleset"):

        @rs.rule
        def twice(x: Tensor) -> Rewrite:
            return rewrite(op.Neg(op.Neg(x))).to(x)


def test_python_bool_of_a_condition_is_refused() -> None:
    x = Tensor("x")
    with pytest.raises(TypeError, match="cannot be used as a Python bool"):
        bool(x.shape == x.shape)


def test_int_attribute_variable_matches_and_is_reused() -> None:
    rs = RuleSet("mine")

    @rs.rule
    def cast_twice(x: Tensor, t: Int) -> Rewrite:
        """Cast(Cast(x, t), t) = Cast(x, t)"""
        return rewrite(op.Cast(op.Cast(x, to=t), to=t)).to(op.Cast(x, to=t))

    (form,) = rs.rules[0].compile("r")
    assert "(= _n1 (Cast _a_t _v_x)) (= _n2 (Cast _a_t _n1))" in form
    # the right side equals a matched sub-term: the union reuses it instead of rebuilding it
    assert "((union _n2 _n1))" in form


def test_an_int_beside_a_float_compiles_as_a_float() -> None:
    """`s.value() != 0` means `!= 0.0`, as in the prover (Z3 compares them as reals)."""
    rs = RuleSet("mine")

    @rs.rule
    def scaled(x: Tensor, s: Tensor) -> Rewrite:
        """(x · s) / s = x   when s is a nonzero scalar"""
        return rewrite((x * s) / s).to(x, s.is_scalar(), s.value() != 0, s.value() * 2 > x.rank)

    @rs.rule
    def alpha_from_rank(a: Tensor, b: Tensor) -> Rewrite:
        """FusedMatMul(A, B, alpha=2) = FusedMatMul(A, B, alpha=rank(A))   when rank(A) == 2"""
        return rewrite(op.ms.FusedMatMul(a, b, alpha=2.0)).to(
            op.ms.FusedMatMul(a, b, alpha=a.rank), a.rank == 2
        )

    (form,) = rs.rules[0].compile("r")
    assert "(!= (scalar-value _v_s) 0.0)" in form
    assert "(> (* (scalar-value _v_s) 2.0) (to-f64 (vec-length (shape _v_x))))" in form
    (form,) = rs.rules[1].compile("r")
    assert "(to-f64 (vec-length (shape _v_a)))" in form


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda x, s: rewrite(x * s).to(x, x.shape == 3),
            r"x\.shape == 3 mixes a value of kind ints and one of int",
        ),
        (
            lambda x, s: rewrite(op.Cast(x * s, to=1)).to(op.Cast(x, to=s.value())),
            r"Cast's to is an integer; s\.value\(\) is a float",
        ),
    ],
    ids=["shape-vs-int", "float-into-int-attribute"],
)
def test_values_of_different_kinds_are_refused_at_definition(make: object, match: str) -> None:
    def mixed(x: Tensor, s: Tensor) -> Rewrite:
        return make(x, s)  # type: ignore[operator, no-any-return]

    with pytest.raises(RuleError, match=rf"mixed \(test_language\.py:\d+\): {match}"):
        _define(mixed)


COMPUTED = RuleSet("computed")


@COMPUTED.rule
def transpose_round_trip(x: Tensor, p: Ints, q: Ints) -> Rewrite:
    """Transpose(Transpose(x, p), q) = x   when p ∘ q is the identity"""
    t = op.Transpose(op.Transpose(x, perm=p), perm=q)
    return rewrite(t).to(x, p.compose(q).is_identity())


def test_a_condition_on_a_computed_ints_is_proved_and_fires(tmp_path: Path) -> None:
    """`p.compose(q).is_identity()`: the methods of `Ints` apply to a computed Ints."""
    from onnx import helper as h

    from rewrite.rules.saturate import Limits, saturate
    from rewrite.verify.prove import PROVED, prove
    from tests.egraph.models import model, vi
    from tests.rules.test_saturate import encoded

    rule = next(iter(COMPUTED))
    assert prove(rule).status == PROVED
    nodes = [h.make_node("Transpose", ["x"], ["t"], perm=[1, 2, 0])]
    nodes += [h.make_node("Transpose", ["t"], ["u"], perm=[2, 0, 1])]
    nodes += [h.make_node("Relu", ["u"], ["y"])]
    m = model(nodes, [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])])
    stats = saturate(encoded(m, tmp_path), [COMPUTED], Limits(iterations=3))
    assert stats.matches["transpose_round_trip"] > 0


def test_an_ints_method_on_a_non_ints_value_says_so() -> None:
    with pytest.raises(TypeError, match="applies to an Ints value"):
        Ints("p").length().is_identity()


def test_a_parameter_used_nowhere_is_refused_at_definition() -> None:
    """An unused parameter is an open pattern variable, almost always a leftover: refused,
    naming it."""
    rs = RuleSet("unused")
    with pytest.raises(RuleError, match=r"parameter p is used nowhere in the rule"):

        @rs.rule
        def relu_relu(x: Tensor, p: Ints) -> Rewrite:
            """Relu(Relu(x)) = Relu(x)"""
            return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x))
