"""Multi-output ops in rules: `y, mean, inv = op.LayerNormalization(x, s, b, outputs=3)` gives
one `LayerNormalizationPart(..., index=i)` term per output (`rules.ops`); the call without
`outputs` is the single-output op. A rule on SkipLayerNormalization's sum output is proved;
one on LayerNormalization's Mean output is refuted (an inf in x makes ORT's Mean NaN where
ReduceMean gives inf) and still matches a model whose Mean is read by another node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from rewrite.errors import RuleError
from rewrite.rules import Float, Rewrite, RuleSet, Tensor, op, rewrite
from rewrite.rules.language import App
from rewrite.rules.saturate import Limits, saturate
from rewrite.verify.bound import Bound
from rewrite.verify.prove import PROVED, REFUTED, prove
from tests.egraph.models import model, vi
from tests.rules.test_saturate import encoded

RS = RuleSet("multi_output")
SMALL = Bound(shapes=((3,), (2, 3)), few=((2,),), dtypes=(T.FLOAT,))
"""A bound small enough for a unit test (the full one takes ~20 s on this rule)."""


@RS.rule
def layer_norm_mean(x: Tensor, s: Tensor, b: Tensor, eps: Float) -> Rewrite:
    """LayerNormalization(x, s, b, axis=-1)'s Mean output = ReduceMean(x, axes=[-1], keepdims=1)
    for float32 x, s, b: true in the reals, false in ORT where a row holds an inf"""
    _, mean, _ = op.LayerNormalization(x, s, b, axis=-1, epsilon=eps, outputs=3)
    same = (s.dtype == x.dtype, b.dtype == x.dtype)
    return rewrite(mean).to(op.ReduceMean(x, axes=[-1], keepdims=1), x.dtype == "float32", *same)


@RS.rule
def skip_layer_norm_sum(x: Tensor, skip: Tensor, g: Tensor, b: Tensor, eps: Float) -> Rewrite:
    """SkipLayerNormalization(x, skip, g, b)'s input_skip_bias_sum output = x + skip"""
    _, _, _, total = op.ms.SkipLayerNormalization(x, skip, g, b, epsilon=eps, outputs=4)
    return rewrite(total).to(x + skip)


def test_outputs_gives_one_part_per_output() -> None:
    x, s, b = Tensor("x"), Tensor("s"), Tensor("b")
    single = op.LayerNormalization(x, s, b)
    assert isinstance(single, App) and single.op == "LayerNormalization"
    parts = op.LayerNormalization(x, s, b, axis=-1, outputs=3)
    assert [p.op for p in parts] == ["LayerNormalizationPart"] * 3
    assert [dict(p.attrs)["index"].value for p in parts] == [0, 1, 2]  # type: ignore[union-attr]
    _, mean = op.LayerNormalization(x, s, b, outputs=2)
    assert dict(mean.attrs)["index"].value == 1  # type: ignore[union-attr]
    skip = op.ms.SkipLayerNormalization(x, s, b, outputs=4)
    assert skip[1] is None and skip[2] is None and skip[3].op == "SkipLayerNormalizationPart"
    with pytest.raises(RuleError, match="outputs=1 to 3"):
        op.LayerNormalization(x, s, b, outputs=4)
    lstm = op.LSTM(x, s, b, hidden_size=2, outputs=3)  # no single-output form: parts only
    assert [p.op for p in lstm] == ["LSTMPart"] * 3
    with pytest.raises(RuleError, match="outputs=1 to 3"):
        op.LSTM(x, s, b, hidden_size=2)


def test_a_rule_on_the_sum_output_is_proved() -> None:
    result = prove(RS.rules[1], SMALL)
    assert result.status == PROVED, result


def test_a_rule_on_the_mean_output_is_refuted_by_an_inf() -> None:
    result = prove(RS.rules[0], SMALL)
    assert result.status == REFUTED, result
    cex = result.counterexample
    assert cex is not None and cex.lhs_ort is not None and cex.rhs_ort is not None
    assert not np.isfinite(np.asarray(cex.lhs_ort, dtype=np.float64)).all()


def test_the_rule_fires_where_the_mean_is_used(tmp_path: Path) -> None:
    nodes = [
        h.make_node("LayerNormalization", ["x", "s", "b"], ["y", "m"], axis=-1),
        h.make_node("Add", ["y", "m"], ["z"]),
    ]
    ins = [vi("x", [2, 3, 4]), vi("s", [4]), vi("b", [4])]
    enc = encoded(model(nodes, ins, [vi("z", [2, 3, 4])]), tmp_path)
    assert enc.opaque_nodes == 0
    assert "LayerNormalizationPart" in enc.text
    stats = saturate(enc, [RS], Limits(iterations=2))
    assert stats.refused == [] and stats.matches["layer_norm_mean"] > 0
