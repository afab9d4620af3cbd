"""A rule on a multi-output op's output 0 also matches its part form (`rules.part_forms`): a
rule on `op.LayerNormalization` fires on a LayerNormalization whose Mean is a graph output
(encoded as parts) as on a plain one, the optimized model writes the node once and computes
every output as the input model does in ORT; likewise a rule on
`op.ms.SkipLayerNormalization` where its input_skip_bias_sum is used. `rules explain` names
the match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper as h

from rewrite.pipeline import Options, optimize
from rewrite.report import STATUS_OPTIMIZED
from rewrite.rules import Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.compile import compile_rewrite, compile_steps
from rewrite.rules.explain import explain
from rewrite.rules.language import ABSENT, App, AttrVar, Lit, Var, nodes
from rewrite.rules.part_forms import MAX_COMBINED, PART_FORMS, part_app, part_variants
from tests.egraph.models import MS_OPSET, model, ort_run, vi, write

RS = RuleSet("part_forms")


@RS.rule
def relu_relu_layer_norm(x: Tensor, s: Tensor, b: Tensor) -> Rewrite:
    """Relu(Relu(LayerNormalization(x, s, b))) = Relu(LayerNormalization(x, s, b))"""
    y = op.LayerNormalization(x, s, b)
    return rewrite(op.Relu(op.Relu(y))).to(op.Relu(y))


@RS.rule
def relu_relu_skip_layer_norm(x: Tensor, k: Tensor, g: Tensor, b: Tensor) -> Rewrite:
    """Relu(Relu(SkipLayerNormalization(x, k, g, b))) = Relu(SkipLayerNormalization(x, k, g, b))"""
    y = op.ms.SkipLayerNormalization(x, k, g, b)
    return rewrite(op.Relu(op.Relu(y))).to(op.Relu(y))


X, S, B = Var("x"), Var("s"), Var("b")


def _attrs(app: App) -> dict[str, object]:
    return {n: (v.value if isinstance(v, Lit) else v) for n, v in app.attrs}


def test_a_layer_norm_on_a_left_side_gets_its_part_variant() -> None:
    eps = AttrVar("eps", "float")
    ln = op.LayerNormalization(X, S, B, epsilon=eps)
    rw = rewrite(op.Relu(ln)).to(op.Relu(op.LayerNormalization(X, S, B)), ln.shape == X.shape)
    original, variant = part_variants(rw)
    assert original is rw
    root = variant.lhs[0]
    assert isinstance(root, App) and root.op == "Relu"
    part = root.inputs[0]
    assert isinstance(part, App) and part.op == "LayerNormalizationPart"
    assert [n for n, _ in part.attrs] == ["axis", "epsilon", "stash_type", "index"]
    assert _attrs(part) == {"axis": None, "epsilon": eps, "stash_type": None, "index": 0}
    assert part.inputs == (X, S, B)
    assert variant.rhs == rw.rhs  # a new LayerNormalization on the right stays one
    (guard,) = variant.guards
    assert guard.left.args[0] == part  # type: ignore[attr-defined]


def test_a_right_side_reusing_the_matched_op_names_its_part() -> None:
    (_, variant) = part_variants(RS.rules[0].rewrites[0])
    (rhs,) = variant.rhs
    (root,) = variant.lhs
    assert isinstance(rhs, App) and isinstance(root, App)
    assert rhs == root.inputs[0]  # Relu(the part): the matched Relu, as in the original
    forms = compile_rewrite(RS.rules[0].rewrites[0], "t")
    assert len(forms) == 2 and "(LayerNormalizationPart _w1 _w2 _w3 0 " in forms[1]
    assert "(union _n6 _n5)" in forms[1]  # the right side is the matched Relu, no new node


def test_attention_part_gets_an_absent_past() -> None:
    att = op.ms.Attention(X, S, B, num_heads=2)
    part = part_app(att)
    assert part.op == "AttentionPart" and part.domain == "com.microsoft"
    assert part.inputs == (X, S, B, ABSENT, ABSENT)
    assert _attrs(part)["num_heads"] == 2 and _attrs(part)["index"] == 0


def test_the_variants_are_every_combination_up_to_the_cap() -> None:
    lns = [op.LayerNormalization(Var(f"x{i}"), S, B) for i in range(MAX_COMBINED + 1)]
    two = part_variants(rewrite(lns[0] + lns[1]).to(X))
    assert len(two) == 4
    assert len({_ln_ops(v) for v in two}) == 4
    assert len(part_variants(rewrite(lns[0] + lns[0]).to(X))) == 2  # one app, bound once
    total = lns[0]
    for ln in lns[1:]:
        total = total + ln
    capped = part_variants(rewrite(total).to(X))
    assert [_ln_ops(v) for v in capped] == [
        ("LayerNormalization",) * len(lns),
        ("LayerNormalizationPart",) * len(lns),
    ]
    plain = rewrite(op.Relu(X)).to(X)
    assert part_variants(plain) == [plain]


def _ln_ops(rw: Rewrite) -> tuple[str, ...]:
    """The LayerNormalization ops of `rw`'s left sides, in order."""
    return tuple(t.op for t in nodes(rw.lhs) if isinstance(t, App) and t.op.startswith("LayerNorm"))


def test_only_droppable_ops_with_parts_have_part_forms() -> None:
    assert set(PART_FORMS) == {
        ("LayerNormalization", ""),
        ("SkipLayerNormalization", "com.microsoft"),
        ("SkipSimplifiedLayerNormalization", "com.microsoft"),
        ("Attention", "com.microsoft"),
    }


def _ln_model(outputs: list[str]) -> onnx.ModelProto:
    """x -> LayerNormalization(epsilon 1e-3, outputs `outputs`) -> Relu -> Relu -> z."""
    rng = np.random.default_rng(0)
    inits = [
        onnx.numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "s"),
        onnx.numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
    ]
    nodes = [
        h.make_node("LayerNormalization", ["x", "s", "b"], outputs, epsilon=1e-3),
        h.make_node("Relu", ["y"], ["r"]),
        h.make_node("Relu", ["r"], ["z"]),
    ]
    outs = [vi("z", [2, 3, 4])] + [vi(o, [2, 3, 1]) for o in outputs[1:]]
    return model(nodes, [vi("x", [2, 3, 4])], outs, inits=inits)


def _optimized(m: onnx.ModelProto, tmp_path: Path, rule: str) -> onnx.ModelProto:
    """`m` optimized with RS (unproved), after checking `rule` fired and ORT agrees."""
    dst = tmp_path / "out.onnx"
    opts = Options(rulesets=[RS], prove_rules=False, isolate=False)
    report = optimize(write(m, tmp_path), dst, opts)
    assert report.status == STATUS_OPTIMIZED, report.warnings
    assert report.saturation["rule_matches"].get(rule, 0) > 0, report.saturation
    out = onnx.load(dst)
    feeds = {i.name: _feed(i) for i in m.graph.input}
    want, got = ort_run(m, feeds), ort_run(out, feeds)
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name].tobytes() == value.tobytes(), name
    return out


def _feed(i: onnx.ValueInfoProto) -> np.ndarray:
    shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def test_a_layer_norm_rule_fires_where_the_mean_is_used(tmp_path: Path) -> None:
    m = _ln_model(["y", "mean"])
    out = _optimized(m, tmp_path, "relu_relu_layer_norm")
    ops = [n.op_type for n in out.graph.node]
    assert ops == ["LayerNormalization", "Relu"]
    (ln,) = [n for n in out.graph.node if n.op_type == "LayerNormalization"]
    assert len([o for o in ln.output if o]) == 2
    assert h.get_attribute_value(ln.attribute[0]) == np.float32(1e-3)


def test_a_layer_norm_rule_still_fires_on_a_plain_one(tmp_path: Path) -> None:
    out = _optimized(_ln_model(["y"]), tmp_path, "relu_relu_layer_norm")
    assert [n.op_type for n in out.graph.node] == ["LayerNormalization", "Relu"]


def test_a_skip_layer_norm_rule_fires_where_the_sum_is_used(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    inits = [
        onnx.numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "g"),
        onnx.numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "be"),
    ]
    nodes = [
        h.make_node(
            "SkipLayerNormalization",
            ["x", "k", "g", "be"],
            ["y", "", "", "sum"],
            domain="com.microsoft",
            epsilon=1e-5,
        ),
        h.make_node("Relu", ["y"], ["r"]),
        h.make_node("Relu", ["r"], ["z"]),
    ]
    ins = [vi("x", [2, 3, 4]), vi("k", [2, 3, 4])]
    m = model(nodes, ins, [vi("z", [2, 3, 4]), vi("sum", [2, 3, 4])], inits=inits, opsets=MS_OPSET)
    out = _optimized(m, tmp_path, "relu_relu_skip_layer_norm")
    assert [n.op_type for n in out.graph.node] == ["SkipLayerNormalization", "Relu"]


def test_explain_names_the_match_on_the_part(tmp_path: Path) -> None:
    result = explain("relu_relu_layer_norm", write(_ln_model(["y", "mean"]), tmp_path), [RS])
    assert result.matched
    (rx,) = result.rewrites
    assert rx.n_matched == 1 and rx.matched[0] in ("r", "z"), result.text()
    assert "pattern LayerNormalizationPart(x, s, b, index=0)" in result.text()
    plain, part = compile_steps(RS.rules[0].rewrites[0], "t")
    ops = [steps.anchors[0][1] for steps in (plain, part)]
    assert ops == ["LayerNormalization"] * 2  # sites named by the ONNX node
