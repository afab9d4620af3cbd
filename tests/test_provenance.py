"""The report says which rules made it into the written graph, not only which matched.

`rule_effects` credits the e-nodes the written graph gained and lost to rules
(`rewrite.provenance`); the summary's `rules` line lists the rules credited with any, and
`matched` every rule that matched in saturation.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from rewrite.pipeline import Options, optimize
from rewrite.report import Report
from rewrite.rules.load import select_rulesets
from tests.test_examples import RULES, _user_model
from tests.test_pipeline import UNSOUND, _neg_model

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "models" / "tiny_bert_block.onnx"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Report:
    out = tmp_path_factory.mktemp("demo") / "out.onnx"
    return optimize(DEMO, out, Options(time_limit=120))


@pytest.fixture(scope="module")
def custom(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Path]:
    folder = tmp_path_factory.mktemp("custom")
    src, dst = folder / "m.onnx", folder / "o.onnx"
    _user_model(src)
    rulesets = select_rulesets(rule_files=[str(RULES)])
    return optimize(src, dst, Options(rulesets=rulesets, time_limit=120)), dst


def rules_line(report: Report, label: str) -> str:
    (line,) = [ln for ln in report.summary().splitlines() if ln.startswith(f"  {label} ")]
    return line


def test_a_rule_that_matched_but_is_not_in_the_output_is_not_listed_as_used(
    custom: tuple[Report, Path],
) -> None:
    report, dst = custom
    effects = report.rule_effects["per_rule"]
    merge = effects["merge_shared_matmuls"]
    assert merge["matches"] > 0  # it matched in saturation ...
    assert merge["created"] == merge["removed"] == 0  # ... but extraction kept two MatMuls
    assert [n.op_type for n in onnx.load(dst).graph.node].count("MatMul") == 2
    assert "merge_shared_matmuls" not in rules_line(report, "rules")
    assert "merge_shared_matmuls x" in rules_line(report, "matched")
    quick = effects["silu_to_quickgelu"]
    assert (quick["created"], quick["removed"]) == (1, 2)  # QuickGelu for Sigmoid + Mul
    assert "silu_to_quickgelu +1/-2 nodes" in rules_line(report, "rules")


def test_only_the_chosen_matches_count(demo: Report) -> None:
    effects = demo.rule_effects["per_rule"]
    add = effects["add_as_sum"]
    assert add["matches"] > 1  # every Add matched ...
    assert add["created"] == add["removed"] == demo.nodes_after["Sum"] == 1  # ... one chosen
    assert add["cost_delta_us"] < 0  # the Add before a LayerNorm, priced as a fused kernel
    assert effects["identity_elim"]["removed"] == demo.nodes_before["Identity"]
    assert "add_as_sum +1/-1 nodes" in rules_line(demo, "rules")


def test_created_and_removed_nodes_account_for_the_change_of_each_op(demo: Report) -> None:
    effects = demo.rule_effects["per_rule"]
    other = demo.rule_effects["unattributed"]
    assert other["created"] == other["removed"] == 0
    # Transpose 7 -> 4: transpose_transpose builds one and removes some, transpose_identity
    # removes the rest (each removed node once per rule it is credited to: `shared`).
    tt, ti = effects["transpose_transpose"], effects["transpose_identity"]
    shared = (tt["shared"] + ti["shared"]) // 2
    removed = tt["removed"] + ti["removed"] - shared
    assert demo.nodes_before["Transpose"] - removed + tt["created"] == demo.nodes_after["Transpose"]


def test_cost_deltas_sum_to_the_cost_change(demo: Report) -> None:
    per_rule = demo.rule_effects["per_rule"].values()
    total = sum(e["cost_delta_us"] for e in per_rule)
    total += demo.rule_effects["unattributed"]["cost_delta_us"]
    assert total == pytest.approx(demo.cost_after_us - demo.cost_before_us, abs=0.01)
    assert sum(e["cost_delta_us"] for e in per_rule) < 0


def test_fallback_reports_no_rule_in_the_output(tmp_path: Path) -> None:

    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    _neg_model(src)
    report = optimize(src, dst, Options(rulesets=[UNSOUND], prove_rules=False, time_limit=120))
    assert report.status == "fallback"
    assert report.rule_effects == {}
    assert not [ln for ln in report.summary().splitlines() if ln.startswith("  rules ")]
