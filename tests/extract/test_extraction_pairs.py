"""bench/extraction_pairs.py: extractions sampled from a real saturated e-graph are valid,
distinct, priced as the extractor priced them, and compute what the input model computes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rewrite.extract import check_choice, graph_cost
from rewrite.extract.cost import reachable
from rewrite.verify.differential import differential

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import extraction_pairs as ep  # noqa: E402

MODEL = ROOT / "examples" / "models" / "tiny_bert_block.onnx"


@pytest.fixture(scope="module")
def sat() -> ep.Saturated:
    # The rules are proved by their own tests; the bench proves them through the gate.
    return ep.saturated(MODEL, ep.rule_sets(prove=False))


def test_sampled_choices_are_valid_distinct_and_priced_by_the_extractors_costs(
    sat: ep.Saturated,
) -> None:
    sampled = ep.sample_choices(sat, 5, seed=0)
    labels = [label for label, _ in sampled]
    assert labels[0] == "ilp" and "input" in labels and len(labels) == 5
    sigs = set()
    for _, choice in sampled:
        check_choice(sat.snap, choice)
        assert choice.cost == graph_cost(sat.snap, choice, sat.costs)
        sigs.add(ep.signature(choice))
    assert len(sigs) == len(sampled)
    ilp = sampled[0][1]
    assert all(ilp.cost <= c.cost * (1 + 1e-9) for _, c in sampled)  # the optimum is cheapest
    assert ep.sample_choices(sat, 5, seed=0)[3][1].picks == sampled[3][1].picks  # seeded


def test_input_choice_keeps_only_input_enodes(sat: ep.Saturated) -> None:
    choice = dict(ep.sample_choices(sat, 3))["input"]
    assert all((cid, choice.picks[cid]) in sat.original for cid in reachable(choice))
    ops = {n.op for n in choice.picks.values()}
    assert "Sum" not in ops and "Slice" not in ops  # what the rules add is not the input's


def test_pairs_are_equivalent_in_ort(tmp_path: Path) -> None:
    drawn = ep.extraction_pairs(MODEL, ep.rule_sets(prove=False), 3, tmp_path, trials=1)
    assert not drawn.dropped
    assert len(drawn.choices) == 3 and all(v.startswith("ok") for _, _, v in drawn.choices)
    assert len(drawn.pairs) == 3
    assert drawn.pairs[0].name.startswith("tiny_bert_block: ilp vs input")
    by_label = {label: us for label, us, _ in drawn.choices}
    for p in drawn.pairs:
        assert p.kind == "real extraction" and p.costs is not None
        a, b = (Path(str(x)).name.split(".")[1] for x in (p.a, p.b))
        assert a != b and p.costs == (by_label[a], by_label[b])
        assert differential(str(p.a), str(p.b), trials=1).ok  # and with each other


def test_pick_pairs() -> None:
    assert ep.pick_pairs(["ilp", "greedy", "input"], 2)[0] == (0, 2)
    every = ep.pick_pairs(["a", "b", "c", "d"], 10)
    assert len(every) == 6 == len(set(every)) and all(i < j for i, j in every)
    assert [ep.choices_for(n) for n in (1, 2, 3, 4, 6, 7, 10)] == [2, 3, 3, 4, 4, 5, 5]
