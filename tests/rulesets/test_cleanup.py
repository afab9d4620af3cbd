"""cleanup: every rule fires on a model made for it, and its guard stops it where it must.

Each case runs the whole pipeline (no folding, so the rule alone does the work) with CLEANUP
only, then checks the report's match count, the op count of the written model and that ORT
gives bit-identical outputs (these rules are exact: the removed op computes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED, Report
from rulesets.cleanup import CLEANUP
from tests.egraph.models import assert_bit_identical, const, ints, model, vi, write


@dataclass(frozen=True)
class Case:
    rule: str
    build: Callable[[], onnx.ModelProto]
    op: str
    """The op whose count the rule changes."""
    after: int = 0
    """How many `op` nodes are left when the rule fires."""


def _unary(
    nodes: list[onnx.NodeProto],
    shape: list[int | str | None],
    out: list[int | str | None] | None = None,
    inits: list[onnx.TensorProto] | None = None,
) -> onnx.ModelProto:
    """`nodes` read `x` and write `v`; `y = Abs(v)` so the graph output is never `x` itself."""
    return model(
        [*nodes, h.make_node("Abs", ["v"], ["y"], name="abs")],
        [vi("x", shape)],
        [vi("y", out or shape)],
        inits=inits,
    )


def identity() -> onnx.ModelProto:
    return _unary([h.make_node("Identity", ["x"], ["v"], name="id")], [2, 3])


def dropout() -> onnx.ModelProto:
    return _unary([h.make_node("Dropout", ["x"], ["v"], name="drop")], [2, 3])


def double_neg() -> onnx.ModelProto:
    return _unary(
        [h.make_node("Neg", ["x"], ["n"], name="neg1"), h.make_node("Neg", ["n"], ["v"])],
        [2, 3],
    )


def transpose_identity() -> onnx.ModelProto:
    return _unary([h.make_node("Transpose", ["x"], ["v"], perm=[0, 1, 2])], [2, 3, 4])


def transpose_transpose() -> onnx.ModelProto:
    """(1, 2, 0) then (0, 2, 1): composed (1, 0, 2), not the identity."""
    return _unary(
        [
            h.make_node("Transpose", ["x"], ["t"], perm=[1, 2, 0]),
            h.make_node("Transpose", ["t"], ["v"], perm=[0, 2, 1]),
        ],
        [2, 3, 4],
        [3, 2, 4],
    )


def reshape_reshape() -> onnx.ModelProto:
    return _unary(
        [
            h.make_node("Reshape", ["x", "s1"], ["r"]),
            h.make_node("Reshape", ["r", "s2"], ["v"]),
        ],
        [2, 3, 4],
        [4, 6],
        inits=[const("s1", ints(6, 4)), const("s2", ints(4, 6))],
    )


def reshape_noop() -> onnx.ModelProto:
    return _unary(
        [h.make_node("Reshape", ["x", "s"], ["v"])], [2, 3, 4], inits=[const("s", ints(2, -1, 4))]
    )


def expand_noop() -> onnx.ModelProto:
    return _unary(
        [h.make_node("Expand", ["x", "s"], ["v"])], [2, 3, 4], inits=[const("s", ints(3, 1))]
    )


def cast_noop() -> onnx.ModelProto:
    return _unary([h.make_node("Cast", ["x"], ["v"], to=T.FLOAT)], [2, 3])


def mul_one() -> onnx.ModelProto:
    """x · 1 and 1 · x (both forms of the rule)."""
    return _unary(
        [
            h.make_node("Mul", ["x", "one"], ["m"]),
            h.make_node("Mul", ["one", "m"], ["v"]),
        ],
        [2, 3],
        inits=[const("one", np.ones((3,), np.float32))],
    )


def add_zero() -> onnx.ModelProto:
    return _unary(
        [
            h.make_node("Add", ["x", "zero"], ["a"]),
            h.make_node("Add", ["zero", "a"], ["v"]),
        ],
        [2, 3],
        inits=[const("zero", np.zeros((2, 1), np.float32))],
    )


def sub_zero() -> onnx.ModelProto:
    return _unary(
        [h.make_node("Sub", ["x", "zero"], ["v"])],
        [2, 3],
        inits=[const("zero", np.zeros((), np.float32))],
    )


def div_one() -> onnx.ModelProto:
    return _unary(
        [h.make_node("Div", ["x", "one"], ["v"])],
        [2, 3],
        inits=[const("one", np.ones((1, 3), np.float32))],
    )


CASES = [
    Case("identity_elim", identity, "Identity"),
    Case("dropout_inference", dropout, "Dropout"),
    Case("double_neg", double_neg, "Neg"),
    Case("transpose_identity", transpose_identity, "Transpose"),
    Case("transpose_transpose", transpose_transpose, "Transpose", after=1),
    Case("reshape_reshape", reshape_reshape, "Reshape", after=1),
    Case("reshape_noop", reshape_noop, "Reshape"),
    Case("expand_noop", expand_noop, "Expand"),
    Case("cast_noop", cast_noop, "Cast"),
    Case("mul_one", mul_one, "Mul"),
    Case("add_zero", add_zero, "Add"),
    Case("sub_zero", sub_zero, "Sub"),
    Case("div_one", div_one, "Div"),
]


def run(m: onnx.ModelProto, folder: Path) -> tuple[Report, onnx.ModelProto]:
    src = write(m, folder)
    dst = folder / "out.onnx"
    report = optimize(src, dst, Options(rulesets=[CLEANUP], fold=False))
    assert report.status == STATUS_OPTIMIZED, report.warnings
    return report, onnx.load(dst)


def count(m: onnx.ModelProto, op: str) -> int:
    return sum(n.op_type == op for n in m.graph.node)


def test_every_rule_has_a_case() -> None:
    assert sorted(c.rule for c in CASES) == sorted(r.name for r in CLEANUP)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_rule_fires_and_removes_the_op(case: Case, tmp_path: Path) -> None:
    m = case.build()
    assert count(m, case.op) > case.after
    report, out = run(m, tmp_path)
    assert report.saturation["rule_matches"][case.rule] > 0
    assert count(out, case.op) == case.after, [n.op_type for n in out.graph.node]
    onnx.checker.check_model(out, full_check=True)
    assert report.verification["ok"] is True
    assert_bit_identical(m, out)


# -- guards ----------------------------------------------------------------------------------


def mul_ones_that_broadcast() -> onnx.ModelProto:
    """x (3,) · ones (2, 3) is (2, 3): removing the Mul would change the shape."""
    return _unary(
        [h.make_node("Mul", ["x", "one"], ["v"])],
        [3],
        [2, 3],
        inits=[const("one", np.ones((2, 3), np.float32))],
    )


def cast_to_other_dtype() -> onnx.ModelProto:
    return model(
        [h.make_node("Cast", ["x"], ["y"], to=T.DOUBLE)],
        [vi("x", [2, 3])],
        [vi("y", [2, 3], T.DOUBLE)],
    )


def reshape_reshape_copy_dim() -> onnx.ModelProto:
    """(n, 2, 3) -> (-1, 3) = (2n, 3) -> (0, 3, 1): the 0 copies 2n, not n, so the inner
    Reshape cannot be dropped."""
    return _unary(
        [
            h.make_node("Reshape", ["x", "s1"], ["r"]),
            h.make_node("Reshape", ["r", "s2"], ["v"]),
        ],
        ["n", 2, 3],
        [None, 3, 1],
        inits=[const("s1", ints(-1, 3)), const("s2", ints(0, 3, 1))],
    )


def transpose_non_identity() -> onnx.ModelProto:
    return _unary([h.make_node("Transpose", ["x"], ["v"], perm=[0, 2, 1])], [2, 3, 4], [2, 4, 3])


def add_not_all_zero() -> onnx.ModelProto:
    return _unary(
        [h.make_node("Add", ["x", "c"], ["v"])],
        [2, 3],
        inits=[const("c", np.array([0.0, 0.0, 1.0], np.float32))],
    )


def zero_minus_x() -> onnx.ModelProto:
    """0 - x is -x, not x (sub_zero has no left form)."""
    return _unary(
        [h.make_node("Sub", ["zero", "x"], ["v"])],
        [2, 3],
        inits=[const("zero", np.zeros((3,), np.float32))],
    )


def one_over_x() -> onnx.ModelProto:
    """1 / x is not x (div_one has no left form)."""
    return _unary(
        [h.make_node("Div", ["one", "x"], ["v"])],
        [2, 3],
        inits=[const("one", np.ones((3,), np.float32))],
    )


def expand_that_grows() -> onnx.ModelProto:
    return _unary(
        [h.make_node("Expand", ["x", "s"], ["v"])],
        [1, 3],
        [4, 3],
        inits=[const("s", ints(4, 3))],
    )


def dropout_mask_used() -> onnx.ModelProto:
    """Dropout with its mask read is not the inference form."""
    return model(
        [
            h.make_node("Dropout", ["x"], ["d", "mask"], name="drop"),
            h.make_node("Not", ["mask"], ["y2"]),
            h.make_node("Abs", ["d"], ["y"]),
        ],
        [vi("x", [2, 3])],
        [vi("y", [2, 3]), vi("y2", [2, 3], T.BOOL)],
    )


GUARDED = [
    ("mul_one", mul_ones_that_broadcast, "Mul"),
    ("cast_noop", cast_to_other_dtype, "Cast"),
    ("reshape_reshape", reshape_reshape_copy_dim, "Reshape"),
    ("transpose_identity", transpose_non_identity, "Transpose"),
    ("add_zero", add_not_all_zero, "Add"),
    ("sub_zero", zero_minus_x, "Sub"),
    ("div_one", one_over_x, "Div"),
    ("expand_noop", expand_that_grows, "Expand"),
    ("dropout_inference", dropout_mask_used, "Dropout"),
]


@pytest.mark.parametrize(
    ("rule", "build", "op"), GUARDED, ids=[f"{r}-{b.__name__}" for r, b, _ in GUARDED]
)
def test_guard_stops_the_rule(
    rule: str, build: Callable[[], onnx.ModelProto], op: str, tmp_path: Path
) -> None:
    m = build()
    report, out = run(m, tmp_path)
    assert report.saturation["rule_matches"][rule] == 0
    assert count(out, op) == count(m, op)
    assert_bit_identical(m, out)
