"""merge: the per-step input projections of unrolled RNN cells batched into one MatMul.

Each case runs the whole pipeline on a family from `tests/families_seq.py` (or a variant whose
steps are taken with Split + Squeeze, as exporters write `x.unbind(1)`), then counts the
MatMuls (2T in, T + 1 out: the T input projections become one, the recurrent h·U stays per
step) and compares the outputs with the input model's in ORT, bit for bit (ORT's MLAS computes
every row of a product by a prepacked float32 W in one order). Every case proves the rules
as `optimize` does by default.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED, Report
from rewrite.verify.prove import PROVED, prove
from rulesets.merge import MERGE
from tests.egraph.models import assert_bit_identical, const, model, rand, vi, write
from tests.families_seq import lstm_unrolled, rnn_unrolled

STEPS = 8
SIZES = {"n_in": 64, "hidden": 64, "steps": STEPS}


def _index_of(m: onnx.ModelProto, name: str) -> int:
    """The value of the scalar int constant `name` (an initializer or a Constant node)."""
    for init in m.graph.initializer:
        if init.name == name:
            return int(numpy_helper.to_array(init))
    node = next(n for n in m.graph.node if n.op_type == "Constant" and name in n.output)
    return int(numpy_helper.to_array(node.attribute[0].t))


def _unbound(m: onnx.ModelProto) -> onnx.ModelProto:
    """`m` with each step x_t = Gather(x, t, axis=1) written as output t of one
    Split(x, [1]*T, axis=1), squeezed on axis 1 (`x.unbind(1)`)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    nodes: list[onnx.NodeProto] = []
    one = [h.make_tensor("merge.axis1", T.INT64, [1], [1])]
    split_outs = [f"merge.split.{t}" for t in range(STEPS)]
    one.append(h.make_tensor("merge.sizes", T.INT64, [STEPS], [1] * STEPS))
    nodes.append(h.make_node("Split", ["x", "merge.sizes"], split_outs, axis=1))
    for n in m.graph.node:
        if n.op_type != "Gather" or n.input[0] != "x":
            nodes.append(n)
            continue
        t = _index_of(m, n.input[1])
        nodes.append(h.make_node("Squeeze", [split_outs[t], "merge.axis1"], list(n.output)))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(one)
    onnx.checker.check_model(out, full_check=True)
    return out


def run(m: onnx.ModelProto, folder: Path) -> tuple[Report, onnx.ModelProto]:
    """The pipeline with MERGE, its rules proved."""
    opts = Options(rulesets=[MERGE], dims={"batch": 4})
    report = optimize(write(m, folder), folder / "out.onnx", opts)
    assert report.status == STATUS_OPTIMIZED, report.warnings
    return report, onnx.load(folder / "out.onnx")


def matmuls(m: onnx.ModelProto) -> int:
    return sum(n.op_type == "MatMul" for n in m.graph.node)


FAMILIES: dict[str, Callable[..., onnx.ModelProto]] = {
    "rnn": rnn_unrolled,
    "lstm": lstm_unrolled,
}
CASES = [(f, form) for f in FAMILIES for form in ("gather", "split")]


@pytest.mark.parametrize(("family", "form"), CASES)
def test_input_projections_merge_into_one_matmul(family: str, form: str, tmp_path: Path) -> None:
    m = FAMILIES[family](**SIZES)
    if form == "split":
        m = _unbound(m)
    assert matmuls(m) == 2 * STEPS
    report, out = run(m, tmp_path)
    rule = {"gather": "matmul_of_gather", "split": "matmul_of_split"}
    assert report.saturation["rule_matches"][rule[form]] >= STEPS
    assert matmuls(out) == STEPS + 1
    onnx.checker.check_model(out, full_check=True)
    assert report.verification["ok"] is True
    assert_bit_identical(m, out)


def _gathers(axis: int, shared_w: bool, w_const: bool) -> onnx.ModelProto:
    """x [4, 6, 5] -> for t in 0..2: MatMul(Gather(x, t, axis), W_t) summed; W [k, 3] (k = x's
    dim after the Gather), one shared W or one per step, an initializer or a graph input."""
    k = {1: 5, 2: 6, -1: 6}[axis]
    ws = ["w0"] if shared_w else ["w0", "w1", "w2"]
    inits = [const(f"t{t}", np.array(t, np.int64)) for t in range(3)]
    inputs = [vi("x", [4, 6, 5])]
    if w_const:
        inits += [const(w, rand((k, 3), i + 1)) for i, w in enumerate(ws)]
    else:
        inputs += [vi(w, [k, 3]) for w in ws]
    nodes, terms = [], []
    for t in range(3):
        w = ws[0] if shared_w else ws[t]
        nodes.append(h.make_node("Gather", ["x", f"t{t}"], [f"g{t}"], axis=axis))
        nodes.append(h.make_node("MatMul", [f"g{t}", w], [f"m{t}"]))
        terms.append(f"m{t}")
    nodes.append(h.make_node("Sum", terms, ["y"]))
    return model(nodes, inputs, [vi("y", [4, 3])], inits=inits)


KEPT = {
    "last_axis": _gathers(2, shared_w=True, w_const=True),
    "last_axis_negative": _gathers(-1, shared_w=True, w_const=True),
    "w_not_constant": _gathers(1, shared_w=True, w_const=False),
    "w_not_shared": _gathers(1, shared_w=False, w_const=True),
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_a_product_the_rules_cannot_batch_is_kept(name: str, tmp_path: Path) -> None:
    m = KEPT[name]
    report, out = run(m, tmp_path)
    assert matmuls(out) == 3, [n.op_type for n in out.graph.node]
    if name != "w_not_shared":  # three different Ws: the rule fires, extraction declines
        assert report.saturation["rule_matches"].get("matmul_of_gather", 0) == 0
    assert_bit_identical(m, out)


@pytest.mark.parametrize("rule", list(MERGE), ids=lambda r: r.name)
def test_merge_rules_are_proved(rule: object) -> None:
    result = prove(rule)  # type: ignore[arg-type]
    assert result.status == PROVED, result.reason
