"""Literals in rules: numbers in patterns, values compared in the constant's dtype, `approx`,
dtype conditions by name, and the errors that say what to write instead."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.errors import RuleError
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.language import Var
from rewrite.rules.literals import in_dtype, value_variants
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.bound import rule_domain
from rewrite.verify.prove import PROVED, REFUTED, prove
from tests.egraph.models import model, vi
from tests.rules.test_saturate import encoded

RS = RuleSet("literals")


@RS.rule(tags=["bit-exact"])
def sub_tenth_as_add(x: Tensor) -> Rewrite:
    """x - 0.1 = x + Neg(0.1)"""
    return rewrite(x - 0.1).to(op.Add(x, op.Neg(0.1)))


@RS.rule
def scale_by_almost_one(x: Tensor, c: Tensor) -> Rewrite:
    """x · c = x   when c is within 1e-3 of 1 (wrong: 1.001·x != x)"""
    return rewrite(x * c).to(x, c.is_scalar(), c.approx(1.0, rtol=1e-3), c.rank <= x.rank)


@RS.rule(tags=["bit-exact"])
def relu_relu_float(x: Tensor) -> Rewrite:
    """Relu(Relu(x)) = Relu(x)   for float tensors"""
    return rewrite(op.Relu(op.Relu(x))).to(op.Relu(x), x.is_float(), x.dtype == "float32")


def _rule(name: str):  # type: ignore[no-untyped-def]
    return next(r for r in RS.rules if r.name == name)


def test_a_number_in_a_pattern_is_a_one_element_constant_condition() -> None:
    rw = _rule("sub_tenth_as_add").rewrites[0]
    assert repr(rw).endswith(
        "when _k0.is_scalar() and _k0.rank <= 1 and _k0.value() == 0.1 and _k0.rank <= x.rank"
    )
    assert repr(rw).startswith("Sub(x, _k0) = Add(x, Neg(_k0))")


def test_values_compare_in_the_constants_dtype() -> None:
    assert in_dtype(0.1, T.FLOAT) == float(np.float32(0.1)) != 0.1
    assert in_dtype(0.1, T.FLOAT16) == float(np.float16(0.1))
    assert in_dtype(0.5, T.INT64) is None and in_dtype(3.0, T.INT64) == 3.0
    assert in_dtype(65536.0, T.FLOAT16) is None  # overflows float16: no such constant
    assert value_variants(0.5) == [(None, 0.5)]  # exact in every float type: one variant
    groups = dict((v, d) for d, v in value_variants(0.1))
    assert T.FLOAT in groups[float(np.float32(0.1))]
    assert len(_rule("sub_tenth_as_add").compile("t")) == len(value_variants(0.1))


def sub_model(c: float, dtype: int = T.FLOAT) -> onnx.ModelProto:
    arr = np.array([c], dtype=onnx.helper.tensor_dtype_to_np_dtype(dtype))
    return model(
        [h.make_node("Sub", ["x", "c"], ["s"]), h.make_node("Relu", ["s"], ["y"])],
        [vi("x", [3], dtype)],
        [vi("y", [3], dtype)],
        inits=[onnx.numpy_helper.from_array(arr, "c")],
    )


@pytest.mark.parametrize(
    ("c", "dtype", "fires"),
    [
        (0.1, T.FLOAT, True),  # float32(0.1) is the model's 0.1
        (0.1, T.FLOAT16, True),
        (0.1, T.DOUBLE, True),
        (0.1000001, T.FLOAT, False),
        (0.2, T.FLOAT, False),
    ],
)
def test_a_literal_matches_the_models_constant_of_that_value(
    tmp_path: Path, c: float, dtype: int, fires: bool
) -> None:
    only = RuleSet("l", [_rule("sub_tenth_as_add")])
    stats = saturate(encoded(sub_model(c, dtype), tmp_path), [only], Limits(iterations=2))
    assert stats.refused == []
    assert (stats.matches["sub_tenth_as_add"] > 0) is fires


def test_literal_rules_are_proved_and_approx_is_refuted() -> None:
    assert prove(_rule("sub_tenth_as_add")).status == PROVED
    assert prove(_rule("relu_relu_float")).status == PROVED
    result = prove(_rule("scale_by_almost_one"))
    assert result.status == REFUTED and result.counterexample is not None
    c = float(np.ravel(result.counterexample.inputs["c"])[0])
    assert c != 1.0 and abs(c - 1.0) <= 1e-3 * (1 + 1e-6)


def test_approx_and_dtype_names_compile_and_fire(tmp_path: Path) -> None:
    m = model(
        [h.make_node("Mul", ["x", "c"], ["s"]), h.make_node("Relu", ["s"], ["y"])],
        [vi("x", [3])],
        [vi("y", [3])],
        inits=[onnx.numpy_helper.from_array(np.array([1.0005], np.float32), "c")],
    )
    only = RuleSet("l", [_rule("scale_by_almost_one")])
    stats = saturate(encoded(m, tmp_path), [only], Limits(iterations=2))
    assert stats.refused == [] and stats.matches["scale_by_almost_one"] > 0
    relu2 = model(
        [h.make_node("Relu", ["x"], ["r"]), h.make_node("Relu", ["r"], ["y"])],
        [vi("x", [3])],
        [vi("y", [3])],
    )
    guarded = RuleSet("g", [replace(_rule("relu_relu_float"), domain=None)])
    assert saturate(encoded(relu2, tmp_path), [guarded], Limits()).matches["relu_relu_float"]
    assert rule_domain(_rule("relu_relu_float")).same_dtype is False  # it tests dtypes


def test_errors_say_what_to_write() -> None:
    x = Var("x")
    with pytest.raises(RuleError, match="did you mean MatMul"):
        op.Matmul(x, x)
    with pytest.raises(RuleError, match="did you mean perm"):
        op.Transpose(x, prem=(1, 0))
    with pytest.raises(TypeError, match="typed Ints"):
        op.Transpose(x, perm=x)
    with pytest.raises(RuleError, match="only a new constant"):

        @RuleSet("e").rule
        def relu_as_two(x: Tensor) -> Rewrite:
            return rewrite(op.Relu(x)).to(2.0)

    with pytest.raises(TypeError, match="unknown dtype 'float31'"):
        _ = x.dtype == "float31"


def test_a_bad_condition_names_the_line_that_wrote_it(tmp_path: Path) -> None:
    from rewrite.rules.load import load_rule_file

    path = tmp_path / "bad_rules.py"
    path.write_text(
        "from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite\n"
        "\n"
        'BAD = RuleSet("bad")\n'
        "\n"
        "\n"
        "@BAD.rule\n"
        "def relu_shape_three(x: Tensor) -> Rewrite:\n"
        '    """Relu(x) = x"""\n'
        "    return rewrite(op.Relu(x)).to(\n"
        "        x,\n"
        "        x.shape == 3,\n"
        "    )\n"
    )
    with pytest.raises(RuleError, match=r"mixes .* \(the condition at bad_rules\.py:11\)"):
        load_rule_file(path)


NAMED = RuleSet("named")


@NAMED.rule
def double_as_sum(x: Tensor) -> Rewrite:
    """x · 2 = x + x   (a condition names the left side, which holds a literal)"""
    lhs = x * 2.0
    return rewrite(lhs).to(x + x, x.dtype == "float32", lhs.shape == x.shape)


def test_a_condition_may_name_a_left_side_holding_a_literal() -> None:
    """`lhs.shape == x.shape` where lhs holds `0.5`: the condition follows the left side as its
    literal becomes a variable (before, "not part of the left side")."""
    rule = next(iter(NAMED))
    rule.compile("named")  # compiles: the condition's term is the desugared left side
    assert prove(rule).status == PROVED
