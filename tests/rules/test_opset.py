"""A rule never writes an op into a model whose ai.onnx opset is older than the op: the
snapshot leaves out an e-node of an op newer than the model's opset (`egraph.snapshot`,
`registry.since_version`), so extraction cannot choose it."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper as h

from rewrite.egraph.snapshot import take_snapshot
from rewrite.ops.registry import opset_for, since_version
from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.saturate import Limits, saturate
from tests.egraph.models import model, vi
from tests.rules.test_saturate import encoded

MS = "com.microsoft"
RS = RuleSet("onnx-gelu")


@RS.rule
def gelu_of_relu(x: Tensor) -> Rewrite:
    """Tanh(Relu(x)) -> Gelu(x)   (wrong: only run unproved, where it must not apply)"""
    return rewrite(op.Tanh(op.Relu(x))).to(op.Gelu(x))


def _gelu_of_relu(opset: int) -> onnx.ModelProto:
    return model(
        [h.make_node("Relu", ["x"], ["r"]), h.make_node("Tanh", ["r"], ["y"])],
        [vi("x", [2, 3])],
        [vi("y", [2, 3])],
        opsets=[h.make_opsetid("", opset)],
    )


def test_since_version_is_the_first_opset_of_an_op() -> None:
    assert since_version("Gelu") == 20 and since_version("Mish") == 18
    assert since_version("Add") == 1 and since_version("Gelu", MS) == 1
    assert opset_for([("Relu", ""), ("Gelu", MS)]) == 17
    assert opset_for([("Gelu", ""), ("Mish", "")]) == 20


def _onnx_gelus(opset: int, folder: Path) -> int:
    folder.mkdir()
    enc = encoded(_gelu_of_relu(opset), folder)
    stats = saturate(enc, [RS], Limits(iterations=2))
    assert stats.matches["gelu_of_relu"] > 0
    snap = take_snapshot(enc)
    return sum(1 for c in snap for n in c.nodes if n.op == "Gelu" and n.domain == "")


def test_a_rules_gelu_20_is_left_out_of_an_opset_17_snapshot(tmp_path: Path) -> None:
    assert _onnx_gelus(17, tmp_path / "17") == 0
    assert _onnx_gelus(20, tmp_path / "20") == 1


def _optimized(opset: int, folder: Path) -> onnx.ModelProto:
    """The model `optimize` writes with the (wrong, so unverified) rule at `opset`."""
    src, dst = folder / f"in{opset}.onnx", folder / f"out{opset}.onnx"
    onnx.save(_gelu_of_relu(opset), src)
    opts = Options(rulesets=[RS], prove_rules=False, isolate=False, fold=False, verify=False)
    report = optimize(src, dst, opts)
    assert report.status == STATUS_OPTIMIZED, report.warnings
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    assert [o.version for o in out.opset_import if o.domain in ("", "ai.onnx")] == [opset]
    return out


def test_optimize_never_writes_gelu_20_into_an_opset_17_model(tmp_path: Path) -> None:
    assert [n.op_type for n in _optimized(20, tmp_path).graph.node] == ["Gelu"]  # cheaper
    assert [n.op_type for n in _optimized(17, tmp_path).graph.node] == ["Relu", "Tanh"]
