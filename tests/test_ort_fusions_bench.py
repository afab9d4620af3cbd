"""bench/ort_fusions.py: every pattern is one ORT fuses (or the row says it is not), the
'not fused' session really runs the unfused graph, and both compute the same function."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ort_fusions import CASES, main, measure, verdict

APPLIED_ON_CPU = {
    "SkipLayerNormFusion", "LayerNormFusion", "SimplifiedLayerNormFusion", "GeluFusion",
    "BiasGeluFusion", "QuickGeluFusion", "MatMulScaleFusion", "MatmulTransposeFusion",
    "MatMulAddFusion", "GemmActivationFusion", "ConvBNFusion",
}  # fmt: skip
"""The fusions ORT 1.32's CPU provider applies to these patterns (BiasSoftmax is CUDA's,
Conv+Relu goes to the NCHWc transformer, the Pow form of tanh-GELU is not matched)."""


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.fusion)
def test_each_pattern_is_fused_only_in_the_fused_session(case, tmp_path: Path) -> None:
    row = measure(case, seq=8, threads=1, rounds=4, work=tmp_path)
    assert row["applied"] == (case.fusion in APPLIED_ON_CPU), (row["fused_ops"], row["plain_ops"])
    if row["applied"]:
        assert case.fused_op in row["fused_ops"]
        assert case.fused_op not in row["plain_ops"] or case.fused_op == "Conv"
        assert len(row["plain_ops"]) > len(row["fused_ops"])
    assert row["max_abs_diff"] < 1e-4
    assert row["fused_us"] > 0 and row["plain_us"] > 0 and row["gain"] > 0
    assert verdict(row) in {"pays", "SLOWER", "within noise", "not applied"}


def test_an_unknown_fusion_is_refused(capsys) -> None:
    assert main(["--only", "NoSuchFusion"]) == 1
    assert "NoSuchFusion" in capsys.readouterr().err
