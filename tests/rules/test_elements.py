"""Per-element conditions on constants (`rules.elements`, `w.all(lambda e: ...)`): one condition,
evaluated on numpy arrays (the facts the e-graph gets), on Z3 terms (the prover's assumption)
and by the samplers (which redraw excluded elements); a rule guarded by one fires only on
constants whose every element satisfies it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import z3  # type: ignore[import-untyped]  # ships no type hints
from onnx import helper as h

from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules import Rewrite, RuleSet, Tensor, rewrite
from rewrite.rules.elements import Elem, all_hold, condition, holds_np, holds_z3, key
from rewrite.rules.language import show
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.gate import verify_rules
from rewrite.verify.specials import satisfying, special_values
from tests.egraph.models import model, vi
from tests.rules.test_saturate import encoded

F32 = onnx.TensorProto.FLOAT


def _bounded(e: Elem):  # type: ignore[no-untyped-def]
    return (e == 0) | (e.is_finite() & (abs(e) >= 1e-20) & (abs(e) <= 1e20))


RS = RuleSet("elems")


def _scale_into(w: Tensor, c: Tensor, x: Tensor, guarded: bool) -> Rewrite:
    cond = [c.is_scalar(), c.is_const(), c.rank == 0, w.is_const(), w.rank == 2]
    if guarded:
        cond += [c.value() >= 1e-3, c.value() <= 1.0, w.all(_bounded)]
    else:
        cond += [c.value() > 0.0, c.value() <= 1.0]
    return rewrite((x * c) @ w).to(x @ (w * c), *cond)


@RS.rule(tags=["approximate"])
def scale_into_bounded(x: Tensor, c: Tensor, w: Tensor) -> Rewrite:
    """(x · c) @ W = x @ (W · c)   for 1e-3 <= c <= 1 and W's elements 0 or finite with
    1e-20 <= |e| <= 1e20"""
    return _scale_into(w, c, x, guarded=True)


@RS.rule(tags=["approximate"])
def scale_into_any(x: Tensor, c: Tensor, w: Tensor) -> Rewrite:
    """(x · c) @ W = x @ (W · c)   for 0 < c <= 1 (wrong: x·c underflows to 0 and W's inf
    makes NaN on the left only)"""
    return _scale_into(w, c, x, guarded=False)


def _rule(name: str):  # type: ignore[no-untyped-def]
    return next(r for r in RS if r.name == name)


SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, 1e-30, 1e30, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize(
    ("fn", "want"),
    [
        (lambda e: e >= 0, [1, 1, 1, 0, 1, 1, 1, 0, 0]),
        (lambda e: e != 0, [0, 0, 1, 1, 1, 1, 1, 1, 1]),  # NaN != 0, -0 == 0 (IEEE)
        (lambda e: e.is_finite(), [1, 1, 1, 1, 1, 1, 0, 0, 0]),
        (lambda e: abs(e) <= 2.5, [1, 1, 1, 1, 1, 0, 0, 0, 0]),
        (lambda e: e.is_nan() | e.is_inf(), [0, 0, 0, 0, 0, 0, 1, 1, 1]),
        (lambda e: ~(e < 1), [0, 0, 1, 0, 0, 1, 1, 0, 1]),
        (_bounded, [1, 1, 1, 1, 0, 0, 0, 0, 0]),
    ],
)
def test_numpy_and_z3_agree_on_ieee_special_values(fn, want: list[int]) -> None:  # type: ignore[no-untyped-def]
    c = condition(fn)
    assert holds_np(c, SPECIAL).tolist() == [bool(w) for w in want]
    x = z3.FP("x", z3.Float32())
    for v, w in zip(SPECIAL, want, strict=True):
        s = z3.Solver()
        s.add(x == z3.FPVal(float(v), z3.Float32()), holds_z3(c, x) != bool(w))
        assert s.check() == z3.unsat, (fn, v)


def test_integers_compare_as_the_numbers_they_hold() -> None:
    c = condition(lambda e: (e >= -1) & (abs(e) != 7))
    assert holds_np(c, np.array([-2, -1, 0, 7, -7, 8], np.int64)).tolist() == [
        False, True, True, False, False, True,
    ]  # fmt: skip
    x = z3.BitVec("x", 64)
    s = z3.Solver()
    s.add(x == -7, holds_z3(c, x))
    assert s.check() == z3.unsat
    assert all_hold(c, np.zeros((0, 3), np.int64))  # nothing to break it


def test_conditions_refuse_python_bools_and_non_numbers() -> None:
    with pytest.raises(TypeError, match="join conditions with &"):
        condition(lambda e: (e >= 0) and (e <= 1))
    with pytest.raises(TypeError, match="compared with a number"):
        condition(lambda e: e >= "1")
    with pytest.raises(TypeError, match="function of the element"):
        condition(3)  # type: ignore[arg-type]


def test_a_condition_reads_back_as_written_and_names_one_key() -> None:
    g = next(iter(_rule("scale_into_bounded").rewrites[0].guards[-1:]))
    assert "w.all(lambda e: " in show(g) and "abs(e) <= 1e+20" in show(g)
    assert key(condition(_bounded)) == key(condition(_bounded))
    assert key(condition(lambda e: e >= 0)) != key(condition(lambda e: e > 0))


def test_the_sampler_redraws_excluded_elements() -> None:
    rng = np.random.default_rng(0)
    w = special_values(F32)[:12].reshape(3, 4)
    x = w.copy()
    out = satisfying({"w": w, "x": x}, {"w": [condition(_bounded)]}, rng)
    assert all_hold(condition(_bounded), out["w"]) and not all_hold(condition(_bounded), w)
    assert out["x"] is x and out["w"].dtype == w.dtype
    kept = holds_np(condition(_bounded), w)
    np.testing.assert_array_equal(out["w"][kept], w[kept])  # only what breaks it is redrawn


def test_verify_samples_the_guarded_rule_and_refutes_the_unguarded_one() -> None:
    guarded, bare = verify_rules(
        [_rule("scale_into_bounded"), _rule("scale_into_any")], cache=False
    )
    assert guarded.status in ("proved", "approximate"), guarded.message()  # Z3 within its limit
    assert bare.status == "refuted", bare.message()


def _scaled(w: np.ndarray) -> onnx.ModelProto:
    nodes = [h.make_node("Mul", ["x", "c"], ["xc"]), h.make_node("MatMul", ["xc", "w"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array(0.125, np.float32), "c")]
    inits.append(onnx.numpy_helper.from_array(w.astype(np.float32), "w"))
    return model(nodes, [vi("x", [2, 3])], [vi("y", [2, 4])], inits=inits)


W = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)


@pytest.mark.parametrize(
    ("w", "fires"),
    [(W, True), (np.where(np.eye(3, 4) > 0, np.inf, W), False), (W * 1e25, False)],
    ids=["bounded", "holds-inf", "too-large"],
)
def test_the_rule_fires_only_where_every_element_satisfies_it(
    w: np.ndarray, fires: bool, tmp_path: Path
) -> None:
    stats = saturate(
        encoded(_scaled(w), tmp_path), [RuleSet("one", [_rule("scale_into_bounded")])],
        Limits(iterations=3),
    )  # fmt: skip
    assert stats.refused == []
    assert (stats.matches.get("scale_into_bounded", 0) > 0) == fires


def test_optimize_folds_the_scale_into_bounded_weights(tmp_path: Path) -> None:
    src, dst = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(_scaled(W), src)
    opts = Options(rulesets=[RuleSet("one", [_rule("scale_into_bounded")])])
    report = optimize(src, dst, Options(**{**opts.__dict__, "allow_approximate": True}))
    assert report.status == STATUS_OPTIMIZED, report.warnings
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["MatMul"]
    assert report.verification["ok"] is True
