"""`--target portable`: only rules that serve any runtime run, nothing outside the standard
ONNX domains is written besides the input's own ops (even by a rule that would write one),
and lowering precision chooses only the standard QDQ forms."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewrite.cli import main
from tests.perf_models import new_models

SILU_RULE = '''
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

MINE = RuleSet("mine")


@MINE.rule(tags=["exact", "portable"])  # tagged portable, but writes a com.microsoft op
def silu_to_quickgelu(x: Tensor) -> Rewrite:
    """x · sigmoid(x) = QuickGelu(x, alpha=1)"""
    return rewrite(x * op.Sigmoid(x)).to(op.ms.QuickGelu(x, alpha=1.0))
'''


def _model(path: Path) -> None:
    """x·sigmoid(x), then a residual Add into LayerNormalization (the `ort` rule set's
    add_as_sum target on CPU)."""
    n = helper.make_node
    g = helper.make_graph(
        [
            n("Sigmoid", ["x"], ["s"]),
            n("Mul", ["x", "s"], ["silu"]),
            n("Add", ["silu", "r"], ["sum"]),
            n("LayerNormalization", ["sum", "gamma", "beta"], ["y"], axis=-1),
        ],
        "m",
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, 16, 32]) for v in ("x", "r")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32])],
        [
            numpy_helper.from_array(np.ones(32, np.float32), "gamma"),
            numpy_helper.from_array(np.zeros(32, np.float32), "beta"),
        ],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def _run(tmp: Path, target: str) -> tuple[dict, set[tuple[str, str]]]:
    src, dst, rep, rules = tmp / "m.onnx", tmp / f"{target}.onnx", tmp / "r.json", tmp / "r.py"
    _model(src)
    rules.write_text(SILU_RULE)
    argv = ["optimize", str(src), str(dst), "--rules", str(rules), "--target", target]
    assert main([*argv, "--report", str(rep), "-q"]) == 0
    ops = {(nd.domain, nd.op_type) for nd in onnx.load(dst).graph.node}
    return json.loads(rep.read_text()), ops


def test_portable_writes_only_standard_ops_and_runs_only_portable_rules(tmp_path: Path) -> None:
    report, ops = _run(tmp_path, "cpu")
    assert ("com.microsoft", "QuickGelu") in ops and ("", "Sum") in ops, ops  # the control
    report, ops = _run(tmp_path, "portable")
    assert all(d in ("", "ai.onnx") for d, _ in ops), ops
    assert ("", "Sum") not in ops, "add_as_sum serves ORT's CPU EP only"
    assert "add_as_sum" not in report["rules_applied"]
    assert report["rules_applied"].get("silu_to_quickgelu", 0) > 0  # it ran, was not written
    assert report["verification"]["ok"] is True


def test_an_input_contrib_op_is_kept_under_portable(tmp_path: Path) -> None:
    src, dst = tmp_path / "m.onnx", tmp_path / "o.onnx"
    g = helper.make_graph(
        [helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", alpha=1.0)],
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    onnx.save(helper.make_model(g, opset_imports=opsets), src)
    assert main(["optimize", str(src), str(dst), "--target", "portable", "-q"]) == 0
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["QuickGelu"]


def test_lower_precision_under_portable_uses_only_standard_qdq_forms(tmp_path: Path) -> None:
    """The MatMul forms are ORT's contrib ops: left out; the QDQ forms are standard ONNX."""
    from tests.precision.models import cnn, mlp

    for name, model in (("cnn", cnn((32, 64, 64), size=56)), ("mlp", mlp((256, 512, 256)))):
        src, dst, rep = (tmp_path / f"{name}{s}" for s in (".onnx", ".opt.onnx", ".json"))
        onnx.save(model, src)
        argv = ["optimize", str(src), str(dst), "--target", "portable", "--precision", "auto"]
        assert main([*argv, "--max-error", "5e-2", "--report", str(rep), "-q"]) == 0
        precision = json.loads(rep.read_text())["precision"]
        assert precision["forms"] == (["int8_static"] if name == "cnn" else [])
        out = onnx.load(dst)
        assert all(n.domain in ("", "ai.onnx") for n in out.graph.node)
        if name == "cnn":
            assert precision["result"].startswith("lowered"), precision
            assert "QuantizeLinear" in {n.op_type for n in out.graph.node}
        else:
            assert precision["result"].startswith("exact: no op has a low-precision form")


RMS_RULE = '''
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite

MINE = RuleSet("mine")


@MINE.rule(tags=["approximate"])  # no target tag: portable, writes ORT's ONNX-domain op
def rms(x: Tensor, eps: Tensor, w: Tensor) -> list[Rewrite]:
    """x / sqrt(mean(x^2) + eps) * w = SimplifiedLayerNormalization(x, w, epsilon=eps)"""
    r = op.Sqrt(op.ReduceMean(op.Pow(x, 2.0), axes=[-1], keepdims=1) + eps)
    rhs = op.SimplifiedLayerNormalization(x, w, axis=-1, epsilon=eps.value())
    ok = (eps.is_const(), eps.is_scalar(), eps.value() > 0.0, x.dtype == "float32")
    ok += (w.rank == 1, w.dim(0) == x.dim(-1))
    forms = [n * w for n in (x / r, x * (1.0 / r))] + [w * n for n in (x / r, x * (1.0 / r))]
    return [rewrite(lhs).to(rhs, *ok) for lhs in forms]
'''


def test_portable_never_writes_an_op_only_onnxruntime_defines(tmp_path: Path) -> None:
    """SimplifiedLayerNormalization is in the ONNX domain, but only ORT defines it."""
    src, rules = tmp_path / "m.onnx", tmp_path / "r.py"
    onnx.save(new_models()["rms_norm_fusion"], src)
    rules.write_text(RMS_RULE)
    written = {}
    for target in ("cpu", "portable"):
        dst = tmp_path / f"{target}.onnx"
        argv = ["optimize", str(src), str(dst), "--rules", str(rules), "--ruleset", "mine"]
        argv += ["--trust-rules", "--allow-approximate", "--target", target, "-q"]
        assert main(argv) == 0
        written[target] = {nd.op_type for nd in onnx.load(dst).graph.node}
    assert "SimplifiedLayerNormalization" in written["cpu"], written  # the control
    assert "SimplifiedLayerNormalization" not in written["portable"], written
