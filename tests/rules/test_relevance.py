"""rules.relevance: only the rules that can match a model are proved and used for it."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.cli import main
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.relevance import onnx_op, relevant
from rulesets import builtin


def _names(rulesets: list[RuleSet]) -> set[str]:
    return {r.name for rs in rulesets for r in rs.rules}


def test_a_rule_needing_an_op_the_model_lacks_is_left_out() -> None:
    kept, skipped = relevant(list(builtin().values()), {"Transpose": 2, "Relu": 1})
    assert {"transpose_transpose", "transpose_identity", "identity_elim"} & _names(kept) == {
        "transpose_transpose",
        "transpose_identity",
    }
    assert {"pad_into_conv", "matmul_of_gather", "add_as_sum", "mul_one"} <= set(skipped)
    assert not _names(kept) & set(skipped)


def test_typed_forms_count_as_the_onnx_op_they_encode() -> None:
    assert onnx_op("SplitPart") == "Split" and onnx_op("SliceDyn") == "Slice"
    assert onnx_op("LayerNormalizationPart") == "LayerNormalization"
    kept, _ = relevant([builtin()["merge"]], {"MatMul": 8, "Split": 1, "Squeeze": 8})
    assert _names(kept) == {"matmul_of_split", "matmul_of_squeeze"}


CHAIN = RuleSet("chain")


@CHAIN.rule
def neg_as_sub(x: Tensor) -> Rewrite:
    """Neg(x) = 0 - x"""
    return rewrite(op.Neg(x)).to(0.0 - x, x.dtype == "float32")


@CHAIN.rule
def sub_from_zero(x: Tensor) -> Rewrite:
    """0 - x = Neg(x)"""
    return rewrite(0.0 - x).to(op.Neg(x), x.dtype == "float32")


@CHAIN.rule
def abs_of_neg(x: Tensor) -> Rewrite:
    """Abs(Sub(0, x)) = Abs(x)"""
    return rewrite(op.Abs(op.Sub(0.0, x))).to(op.Abs(x), x.dtype == "float32")


def test_a_rule_matching_what_another_rule_builds_is_kept() -> None:
    """The model has Neg and Abs, no Sub: `neg_as_sub` builds a Sub, so `abs_of_neg` (which
    needs one) can match and is kept; without Neg, neither Sub rule's left side can."""
    kept, skipped = relevant([CHAIN], ["Neg", "Abs"])
    assert _names(kept) == {"neg_as_sub", "sub_from_zero", "abs_of_neg"} and skipped == []
    kept, skipped = relevant([CHAIN], ["Abs"])
    assert _names(kept) == set() and sorted(skipped) == sorted(_names([CHAIN]))


def test_optimize_proves_only_what_can_match_and_says_so(tmp_path: Path) -> None:
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    nodes = [h.make_node("Transpose", ["x"], ["t"], perm=[1, 0])]
    nodes.append(h.make_node("Transpose", ["t"], ["y"], perm=[1, 0]))
    m = h.make_model(h.make_graph(nodes, "g", [x], [y]), opset_imports=[h.make_opsetid("", 17)])
    src, dst, rep = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(m, src)
    assert main(["optimize", str(src), str(dst), "--report", str(rep), "-q"]) == 0
    report = json.loads(rep.read_text())
    proved = {r["rule"] for r in report["rules_verified"]}
    assert "transpose_transpose" in proved and "pad_into_conv" not in proved
    assert "pad_into_conv" in report["rules_unmatchable"]
    assert not proved & set(report["rules_unmatchable"])
    assert "Transpose" not in {n.op_type for n in onnx.load(dst).graph.node}
