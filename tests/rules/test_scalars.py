"""New constants on a right side (`rules.scalars`): a number the left side does not have, or
a `Float` attribute used as a tensor, becomes a scalar constant of the dtype of the operand
beside it, its value rounded to that dtype; the e-graph marks it a constant, decode writes it
as an initializer, ORT runs the result, and the prover proves or refutes rules that make one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.errors import RuleError
from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules import Float, Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.language import Var
from rewrite.rules.literals import value_variants
from rewrite.verify.bound import DEFAULT_BOUND
from rewrite.verify.cases import cases
from rewrite.verify.evaluate import Evaluator, numpy_backend
from rewrite.verify.ort_sides import run_ort, side_model
from rewrite.verify.prove import PROVED, REFUTED, prove
from rewrite.verify.sample import sample
from rewrite.verify.sides import retype
from tests.egraph.models import model, ort_run, vi, write

RS = RuleSet("scalars")


@RS.rule(tags=["bit-exact"])
def add_self(x: Tensor) -> Rewrite:
    """x + x = x · 2"""
    return rewrite(x + x).to(x * 2.0)


@RS.rule
def add_self_wrong(x: Tensor) -> Rewrite:
    """x + x = x · 3   (wrong)"""
    return rewrite(x + x).to(x * 3.0)


@RS.rule(tags=["bit-exact"])
def add_thrice(x: Tensor) -> Rewrite:
    """(x + x) + x = x · 3   (x + x is exact, so both round 3x once)"""
    return rewrite((x + x) + x).to(x * 3.0)


@RS.rule(tags=["approximate"])
def mul_twice(x: Tensor) -> Rewrite:
    """(x · 0.5) · 0.2 = x · 0.1   (approximate: 0.1 is rounded once, not twice)"""
    return rewrite((x * 0.5) * 0.2).to(x * 0.1)


@RS.rule(tags=["approximate"])
def leaky_as_add(x: Tensor, a: Float) -> Rewrite:
    """LeakyRelu(x, alpha) = Relu(x) + alpha · Min(x, 0)   (an attribute as a constant)"""
    return rewrite(op.LeakyRelu(x, alpha=a)).to(op.Relu(x) + op.Min(x, x * 0.0) * a)


def _rule(name: str):  # type: ignore[no-untyped-def]
    return next(r for r in RS.rules if r.name == name)


def test_a_new_constant_takes_the_dtype_of_the_operand_beside_it() -> None:
    rw = _rule("add_self").rewrites[0]
    assert repr(rw) == "Add(x, x) = Mul(x, 2.0)"  # a new constant shows as its value
    const = rw.rhs[0].inputs[1]  # type: ignore[attr-defined]
    assert const.op == "ConstantOfShape" and dict(const.attrs)["dtype"].args == (Var("x"),)
    (compiled,) = _rule("add_self").compile("t")
    assert "(ConstantOfShape 2.0 _d2 (vec-empty))" in compiled and "(dtype _v_x)" in compiled
    # 0.1 rounds differently per dtype: one variant per group, each holding its rounding
    forms = _rule("mul_twice").compile("t")
    assert len(forms) >= len(value_variants(0.1))
    assert any(repr(float(np.float32(0.1))) in f for f in forms)
    assert any(repr(float(np.float16(0.1))) in f for f in forms)
    # a Float attribute as a tensor: its dtype from Min(x, ...)'s first operand, x
    (leaky,) = _rule("leaky_as_add").compile("t")
    assert "(ConstantOfShape _a_a " in leaky and "(dtype _v_x)" in leaky


def test_errors_say_what_a_new_constant_needs() -> None:
    with pytest.raises(RuleError, match="only a new constant"):

        @RuleSet("e").rule
        def relu_as_two(x: Tensor) -> Rewrite:
            return rewrite(op.Relu(x)).to(2.0)

    with pytest.raises(RuleError, match="tensor operand beside it"):

        @RuleSet("e").rule
        def neg_two(x: Tensor) -> Rewrite:
            return rewrite(op.Relu(x)).to(op.Neg(2.0) + x)

    with pytest.raises(RuleError, match="left side"):

        @RuleSet("e").rule
        def add_eps(x: Tensor, a: Float) -> Rewrite:
            return rewrite(op.LeakyRelu(x + a, alpha=a)).to(x)


def test_the_prover_proves_and_refutes_rules_that_make_constants() -> None:
    assert prove(_rule("add_self")).status == PROVED
    assert prove(_rule("add_thrice")).status == PROVED
    result = prove(_rule("add_self_wrong"))
    assert result.status == REFUTED and result.counterexample is not None
    cex = result.counterexample
    x = float(np.ravel(cex.inputs["x"])[0])
    assert np.ravel(cex.lhs)[0] == 2 * x != np.ravel(cex.rhs)[0] == 3 * x


def _chain(dtype: int, mul: bool) -> onnx.ModelProto:
    """(x + x) + x, or (x · 0.5) · 0.2, then Relu, in `dtype`."""
    npd = onnx.helper.tensor_dtype_to_np_dtype(dtype).type
    if mul:
        nodes = [
            h.make_node("Mul", ["x", "half"], ["a"]),
            h.make_node("Mul", ["a", "fifth"], ["b"]),
        ]
        inits = [
            onnx.numpy_helper.from_array(np.array(0.5, npd), "half"),
            onnx.numpy_helper.from_array(np.array(0.2, npd), "fifth"),
        ]
    else:
        nodes = [h.make_node("Add", ["x", "x"], ["a"]), h.make_node("Add", ["a", "x"], ["b"])]
        inits = []
    nodes.append(h.make_node("Relu", ["b"], ["y"]))
    return model(nodes, [vi("x", [4, 3], dtype)], [vi("y", [4, 3], dtype)], inits=inits)


@pytest.mark.parametrize("dtype", [T.FLOAT, T.FLOAT16])
@pytest.mark.parametrize(("mul", "value"), [(False, 3.0), (True, 0.1)])
def test_the_constant_is_written_as_an_initializer_of_the_models_dtype(
    tmp_path: Path, dtype: int, mul: bool, value: float
) -> None:
    m = _chain(dtype, mul)
    dst = tmp_path / "out.onnx"
    chain = RuleSet("chain", [_rule("add_thrice"), _rule("mul_twice")])
    opts = Options(rulesets=[chain], allow_approximate=True)
    report = optimize(write(m, tmp_path), dst, opts)
    assert report.status == STATUS_OPTIMIZED, report.warnings
    out = onnx.load(dst)
    assert [n.op_type for n in out.graph.node] == ["Mul", "Relu"]
    (init,) = [i for i in out.graph.initializer if i.name in out.graph.node[0].input]
    arr = onnx.numpy_helper.to_array(init)
    npd = onnx.helper.tensor_dtype_to_np_dtype(dtype).type
    assert init.data_type == dtype and arr.shape == () and arr == npd(value)
    assert report.verification["ok"] is True
    x = np.linspace(-3, 3, 12, dtype=npd).reshape(4, 3)
    got = ort_run(out, {"x": x})["y"]
    np.testing.assert_array_equal(got, np.maximum(x * npd(value), 0))


@pytest.mark.parametrize("dtype", [T.FLOAT, T.FLOAT16])
def test_the_rule_samplers_write_a_new_constant_as_an_initializer(dtype: int) -> None:
    rule = _rule("mul_twice")
    case = retype(next(cases(rule, DEFAULT_BOUND)), {T.FLOAT: dtype})
    npd = onnx.helper.tensor_dtype_to_np_dtype(dtype).type
    values = {"x": np.ones(case.tensors["x"].shape, npd)}
    ev = Evaluator(case, values, numpy_backend)
    side = onnx.load_from_string(side_model(case, case.rewrite.rhs[0], ev, values))
    assert [n.op_type for n in side.graph.node] == ["Mul"]
    (init,) = side.graph.initializer
    assert init.data_type == dtype and onnx.numpy_helper.to_array(init) == npd(0.1)
    got = run_ort(side.SerializeToString(), values)
    np.testing.assert_array_equal(got, values["x"] * npd(0.1))


def test_sampling_a_rule_that_makes_a_constant_finds_no_counterexample() -> None:
    result = sample(_rule("add_self"))
    assert result.samples > 0 and not result.counterexample
