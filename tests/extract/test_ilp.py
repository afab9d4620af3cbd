"""ilp + extract: optimal on tiny e-graphs (brute force), never worse than greedy, acyclic on
cyclic e-graphs, and greedy's choice (with the reason) whenever the ILP cannot be trusted."""

from __future__ import annotations

import json
import random

import pytest

import rewrite.extract.select as select
from rewrite.errors import ExtractionError
from rewrite.extract import (
    Choice,
    check_choice,
    extract,
    graph_cost,
    greedy,
    ilp,
    run_extraction,
    to_problem,
)
from tests.extract.brute import brute_force
from tests.extract.egraphs import build, random_egraph

SIBLINGS = {  # greedy pays 22 (two leaves); sharing x through G and H costs 13
    0: [("x", (), 10.0)],
    1: [("G", (0,), 1.0), ("b", (), 10.5)],
    2: [("H", (0,), 1.0), ("c", (), 10.5)],
    3: [("F", (1, 2), 1.0)],
}


def test_ilp_sees_sharing_across_siblings() -> None:
    snap, costs = build(SIBLINGS, roots=[3])
    choice, stats = ilp(snap, costs, warm=greedy(snap, costs))
    check_choice(snap, choice)
    assert choice.cost == pytest.approx(13.0)
    assert {cid: n.op for cid, n in choice.picks.items() if n.children} == {1: "G", 2: "H", 3: "F"}
    assert stats.status == "optimal" and stats.gap == pytest.approx(0.0)
    assert stats.bound == pytest.approx(13.0) and stats.warm_cost == pytest.approx(22.0)


def test_extract_returns_the_ilp_choice_with_its_gap_in_the_notes() -> None:
    snap, costs = build(SIBLINGS, roots=[3])
    result = run_extraction(snap, costs)
    assert result.choice.extractor == "ilp" and result.fallback is None
    assert result.greedy_cost == pytest.approx(22.0) and result.choice.cost == pytest.approx(13.0)
    assert any("gap 0.00%" in n for n in result.choice.notes)
    report = json.loads(json.dumps(result.to_json(), allow_nan=False))
    assert report["ilp"]["status"] == "optimal" and report["fallback"] is None


@pytest.mark.parametrize("acyclic", ["order", "cuts"])
def test_two_cheap_nodes_that_close_a_cycle_are_not_both_picked(acyclic: str) -> None:
    snap, costs = build(
        {
            1: [("Neg", (2,), 0.1), ("x", (), 5.0)],
            2: [("Neg", (1,), 0.1), ("y", (), 6.0)],
            3: [("Add", (1, 2), 1.0)],
        },
        roots=[3],
    )
    choice, _ = ilp(snap, costs, acyclic=acyclic)  # type: ignore[arg-type]
    check_choice(snap, choice)
    assert choice.cost == pytest.approx(6.1)


def test_longer_cycle_through_a_shared_class() -> None:
    # a -> b -> c -> a through cheap nodes; each class also has a dear leaf.
    snap, costs = build(
        {
            1: [("F", (2,), 0.0), ("a", (), 9.0)],
            2: [("G", (3,), 0.0), ("b", (), 8.0)],
            3: [("H", (1,), 0.0), ("c", (), 7.0)],
            4: [("Out", (1, 2, 3), 1.0)],
        },
        roots=[4],
    )
    for acyclic in ("order", "cuts"):
        choice, _ = ilp(snap, costs, acyclic=acyclic)  # type: ignore[arg-type]
        check_choice(snap, choice)
        assert choice.cost == pytest.approx(8.0), acyclic  # one leaf (c = 7) breaks the loop


def tiny(seed: int) -> tuple:
    rng = random.Random(seed)
    return random_egraph(
        seed,
        rng.randint(2, 7),
        max_nodes=3,
        p_cycle=rng.choice([0.0, 0.4, 0.9]),
        n_roots=rng.randint(1, 2),
    )


@pytest.mark.parametrize("seed", range(120))
def test_optimum_equals_brute_force_on_tiny_egraphs(seed: int) -> None:
    snap, costs = tiny(seed)
    best, _ = brute_force(to_problem(snap, costs))
    for acyclic in ("order", "cuts"):
        for reduce in (True, False):
            choice, stats = ilp(snap, costs, acyclic=acyclic, reduce=reduce, rel_gap=0.0)  # type: ignore[arg-type]
            check_choice(snap, choice)
            where = f"seed={seed} acyclic={acyclic} reduce={reduce}"
            assert choice.cost == pytest.approx(best, abs=1e-9), where
            assert stats.bound <= best + 1e-6, where


@pytest.mark.parametrize("seed", range(60))
def test_random_egraphs_ilp_no_worse_than_greedy_and_both_valid(seed: int) -> None:
    rng = random.Random(seed)
    snap, costs = random_egraph(
        seed,
        rng.randint(10, 70),
        max_nodes=rng.choice([2, 3, 4]),
        window=rng.choice([None, 4, 12]),
        p_cycle=rng.choice([0.1, 0.5]),
        n_roots=rng.randint(1, 3),
    )
    base = greedy(snap, costs)
    result = run_extraction(snap, costs, time_limit=2.0)
    check_choice(snap, base)
    check_choice(snap, result.choice)
    assert result.choice.cost <= base.cost + 1e-9, f"seed={seed}"
    cost = graph_cost(snap, result.choice, costs)
    assert result.choice.cost == pytest.approx(cost), f"seed={seed}"
    if result.ilp is not None and result.ilp.status == "optimal":
        assert result.ilp.gap <= 1e-4 + 1e-9, f"seed={seed}"


def test_cycle_cuts_and_order_agree_on_cyclic_egraphs() -> None:
    for seed in range(20):  # dense cycles: one in ~10 seeds takes seconds at 25 classes
        snap, costs = random_egraph(seed, 16, max_nodes=3, window=6, p_cycle=0.9)
        order, _ = ilp(snap, costs, acyclic="order", rel_gap=0.0)
        cuts, _ = ilp(snap, costs, acyclic="cuts", rel_gap=0.0)
        check_choice(snap, order)
        check_choice(snap, cuts)
        assert order.cost == pytest.approx(cuts.cost, rel=1e-6), f"seed={seed}"


def test_zero_time_limit_falls_back_to_greedy_and_says_so() -> None:
    snap, costs = build(SIBLINGS, roots=[3])
    result = run_extraction(snap, costs, time_limit=0.0)
    assert result.choice.extractor == "greedy"
    assert result.choice.cost == pytest.approx(22.0)
    assert result.fallback is not None and "time limit" in result.fallback
    assert any("greedy's choice used" in n for n in result.choice.notes)
    check_choice(snap, result.choice)


def test_failing_ilp_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    snap, costs = build(SIBLINGS, roots=[3])

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("solver crashed")

    monkeypatch.setattr(select, "ilp", broken)
    choice = extract(snap, costs)
    assert choice.extractor == "greedy"
    assert any("RuntimeError: solver crashed" in n for n in choice.notes)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({3: ("F", (1, 2)), 1: ("b", ()), 2: ("Cyc", (2,))}, "rejected by the validator"),
        ({3: ("F", (1, 2)), 1: ("b", ()), 2: ("c", ())}, "exceeds greedy"),
    ],
)
def test_invalid_or_dearer_ilp_choice_is_refused(
    monkeypatch: pytest.MonkeyPatch, bad: dict, why: str
) -> None:
    spec = {**SIBLINGS, 1: [*SIBLINGS[1], ("Cheap", (), 0.0)]}  # greedy: F(Cheap, c) = 11.5
    spec[2] = [*SIBLINGS[2], ("Cyc", (2,), 0.0)]
    snap, costs = build(spec, roots=[3])
    nodes = {(cid, n.op if n.children else n.args[0]): n for cid, n in snap.enodes()}

    def fake(*args: object, **kwargs: object) -> tuple[Choice, object]:
        picks = {cid: nodes[(cid, op)] for cid, (op, _) in bad.items()}
        choice = Choice(picks, [3], extractor="ilp")
        choice.cost = sum(costs[(c, n)] for c, n in picks.items())
        return choice, ilp(snap, costs)[1]

    monkeypatch.setattr(select, "ilp", fake)
    result = run_extraction(snap, costs)
    assert result.choice.extractor == "greedy"
    assert result.fallback is not None and why in result.fallback
    check_choice(snap, result.choice)


def test_greedy_method_and_unknown_method() -> None:
    snap, costs = build(SIBLINGS, roots=[3])
    assert extract(snap, costs, method="greedy").cost == pytest.approx(22.0)
    with pytest.raises(ExtractionError, match="unknown extraction method 'magic'; known: ilp"):
        extract(snap, costs, method="magic")


def test_unextractable_root_is_an_error() -> None:
    snap, costs = build({0: [("x", (), 1.0)], 5: [("Identity", (5,), 0.0)]}, roots=[0, 5])
    with pytest.raises(ExtractionError, match="root class 5"):
        extract(snap, costs)
    with pytest.raises(ExtractionError, match="class 5 has no e-node"):
        ilp(snap, costs)


def test_large_random_egraph_within_its_time_limit() -> None:
    snap, costs = random_egraph(5, 2000, max_nodes=3, window=10, p_cycle=0.1)
    result = run_extraction(snap, costs, time_limit=3.0)
    check_choice(snap, result.choice)
    assert result.choice.cost <= result.greedy_cost + 1e-9
    assert result.ilp is not None and result.ilp.seconds < 5.0
