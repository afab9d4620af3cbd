"""`examples/perf_rules.py`: each rule proved and firing on a model where its pattern occurs;
`examples/refused_rules.py`: each refused with a counterexample ORT reproduces."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from onnx import helper as h

from rewrite.cli import main
from rewrite.rules import RuleSet
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.bound import rule_domain
from rewrite.verify.gate import verify_rules
from rewrite.verify.prove import PROVED, prove
from tests.egraph.models import model, vi
from tests.perf_models import new_models
from tests.rules.test_saturate import encoded

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PERF: RuleSet = _module("perf_rules").PERF
REFUSED: RuleSet = _module("refused_rules").REFUSED
FAST_PROOFS = ["matmul_bias_as_gemm", "transpose_after_relu", "transpose_of_sum"]
FAST_PROOFS += ["transpose_reshape_round_trip"]
APPROXIMATE = ["gelu_erf_fusion", "gelu_tanh_fusion", "layer_norm_fusion", "rms_norm_fusion"]
APPROXIMATE += ["scalar_into_weights", "attention_scale_to_query"]


def _rule(rs: RuleSet, name: str):  # type: ignore[no-untyped-def]
    return next(r for r in rs if r.name == name)


def _w(name: str, shape: tuple[int, ...], seed: int) -> onnx.TensorProto:
    arr = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return onnx.numpy_helper.from_array(arr, name)


def _models() -> dict[str, onnx.ModelProto]:
    tr = [1, 0]
    return new_models() | {
        "matmul_bias_as_gemm": model(
            [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["y"])],
            [vi("x", [4, 3])],
            [vi("y", [4, 5])],
            inits=[_w("w", (3, 5), 0), _w("b", (5,), 1)],
        ),
        "transpose_after_relu": model(
            [h.make_node("Transpose", ["x"], ["t"], perm=tr), h.make_node("Relu", ["t"], ["y"])],
            [vi("x", [4, 3])],
            [vi("y", [3, 4])],
        ),
        "transpose_of_sum": model(
            [
                h.make_node("Transpose", ["a"], ["ta"], perm=tr),
                h.make_node("Transpose", ["b"], ["tb"], perm=tr),
                h.make_node("Add", ["ta", "tb"], ["y"]),
            ],
            [vi("a", [4, 3]), vi("b", [4, 3])],
            [vi("y", [3, 4])],
        ),
        "merge_three_matmuls": model(
            [
                h.make_node("MatMul", ["x", "wq"], ["q"]),
                h.make_node("MatMul", ["x", "wk"], ["k"]),
                h.make_node("MatMul", ["x", "wv"], ["v"]),
                h.make_node("Concat", ["q", "k", "v"], ["y"], axis=-1),
            ],
            [vi("x", [4, 3])],
            [vi("y", [4, 15])],
            inits=[_w("wq", (3, 5), 2), _w("wk", (3, 5), 3), _w("wv", (3, 5), 4)],
        ),
        "transpose_reshape_round_trip": model(
            [
                h.make_node("Transpose", ["x"], ["t1"], perm=tr),
                h.make_node("Transpose", ["t1"], ["t2"], perm=tr),
                h.make_node("Reshape", ["t2", "s"], ["y"]),
            ],
            [vi("x", [4, 3])],
            [vi("y", [12])],
            inits=[onnx.numpy_helper.from_array(np.array([12], np.int64), "s")],
        ),
    }


def test_every_perf_rule_has_a_model() -> None:
    assert sorted(_models()) == sorted(r.name for r in PERF)


@pytest.mark.parametrize("name", FAST_PROOFS)
def test_perf_rule_is_proved(name: str) -> None:
    result = prove(_rule(PERF, name))
    assert result.status == PROVED, result.reason or result.counterexample


@pytest.mark.slow
def test_the_qkv_merge_is_proved() -> None:
    assert prove(_rule(PERF, "merge_three_matmuls")).status == PROVED


@pytest.mark.parametrize("name", sorted(_models()))
def test_perf_rule_fires_inside_its_proved_domain(name: str, tmp_path: Path) -> None:
    rule = _rule(PERF, name)
    only = RuleSet("one", [replace(rule, domain=rule_domain(rule))])
    stats = saturate(encoded(_models()[name], tmp_path), [only], Limits(iterations=3))
    assert stats.refused == [] and stats.matches[name] > 0


def test_approximate_rules_are_tagged_so() -> None:
    assert sorted(r.name for r in PERF if not r.exact) == sorted(APPROXIMATE)


def test_the_tanh_gelu_fusion_is_sampled_within_the_tolerance() -> None:
    """The fastest of the approximate rules; `rewrite verify examples/perf_rules.py` checks
    the others the same way (minutes: the reductions and erf are sampled in ORT)."""
    (res,) = verify_rules([_rule(PERF, "gelu_tanh_fusion")], cache=False)
    assert res.status == "approximate", res.message()


@pytest.mark.parametrize("name", sorted(new_models()))
def test_perf_rule_optimizes_its_model_and_the_output_checks(name: str, tmp_path: Path) -> None:
    """`rewrite optimize --rules examples/perf_rules.py` (proofs trusted: `rewrite verify`
    proves them) fires the rule, and the differential check in ORT accepts the output."""
    src, dst, rep = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    onnx.save(_models()[name], src)
    args = ["optimize", str(src), str(dst), "--rules", str(EXAMPLES / "perf_rules.py")]
    args += ["--ruleset", "perf", "--trust-rules", "--allow-approximate", "--report", str(rep)]
    assert main([*args, "-q"]) == 0
    report = json.loads(rep.read_text())
    assert report["rules_applied"].get(name, 0) > 0, report["rules_applied"]
    assert report["verification"]["ok"] is True
    fused = {"gelu_erf_fusion": "Gelu", "gelu_tanh_fusion": "FastGelu"}
    fused["layer_norm_fusion"] = "LayerNormalization"  # the QKV merge: cheaper unmerged here
    fused["rms_norm_fusion"] = "SimplifiedLayerNormalization"  # ORT's, in the ONNX domain
    ops = {nd.op_type for nd in onnx.load(dst).graph.node}
    assert fused.get(name, "MatMul") in ops, ops


@pytest.mark.slow
def test_refused_rules_are_refused_with_a_counterexample_ort_reproduces() -> None:
    results = verify_rules(REFUSED.rules, cache=False)
    for res in results:
        assert res.status == "refuted", res.message()
        assert "ORT" in res.counterexample_line or "sampled in ORT" in res.reason + (
            res.counterexample_line
        ), res.message()
