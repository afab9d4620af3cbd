"""The ILP never trusts HiGHS's status alone: what HiGHS claims (objective, bound, status) is
checked against the selection it returns, re-solved on a mismatch, and never reported as
`optimal` when the returned choice is not within the gap of a proved bound.

HiGHS 1.16 with a warm start worse than the optimum and presolve on returned the warm start
labelled `optimal` with the optimum's objective; these tests build exactly that situation and
pass on every highspy version (`constraints.txt` and `make test-latest`)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rewrite.extract.select as select
from rewrite.extract import check_choice, greedy, ilp, run_extraction, to_problem
from rewrite.extract.ilp import ILPStats, inconsistency
from rewrite.extract.mip import Solved
from tests.extract.brute import brute_force
from tests.extract.egraphs import random_egraph

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("seed", [6, 14, 71, 80, 82, 100])
def test_warm_start_worse_than_the_optimum_with_presolve_is_not_returned_as_optimal(
    seed: int,
) -> None:
    # Dense cycles on 8 classes; on each of these seeds HiGHS 1.16 (warm start from greedy,
    # presolve on) handed back the warm start as "optimal" in one of the two modes.
    snap, costs = random_egraph(seed, 8, max_nodes=3, window=6, p_cycle=0.9)
    warm = greedy(snap, costs)
    best, _ = brute_force(to_problem(snap, costs))
    for acyclic in ("order", "cuts"):
        choice, stats = ilp(snap, costs, warm=warm, acyclic=acyclic, rel_gap=0.0)  # type: ignore[arg-type]
        check_choice(snap, choice)
        assert choice.cost == pytest.approx(best, abs=1e-9), (acyclic, stats.checks)
        assert stats.status == "optimal" and stats.gap <= 1e-9, (acyclic, stats.checks)


def test_the_failing_case_is_built_warm_start_worse_than_optimum() -> None:
    snap, costs = random_egraph(100, 8, max_nodes=3, window=6, p_cycle=0.9)
    best, _ = brute_force(to_problem(snap, costs))
    assert greedy(snap, costs).cost > best + 1e-6


@pytest.mark.parametrize("seed", range(40))
def test_answers_labelled_optimal_are_within_the_gap_on_40_class_egraphs(seed: int) -> None:
    rng = random.Random(1000 + seed)
    snap, costs = random_egraph(
        1000 + seed,
        40,
        max_nodes=rng.choice([2, 3, 4]),
        window=rng.choice([None, 6, 12]),
        p_cycle=rng.choice([0.1, 0.5, 0.9]),
        n_roots=rng.randint(1, 3),
    )
    result = run_extraction(snap, costs, time_limit=5.0)
    check_choice(snap, result.choice)
    stats = result.ilp
    assert stats is not None
    if stats.status == "optimal":
        # Independent oracle: the other acyclicity formulation, solved to a zero gap.
        other, _ = ilp(snap, costs, acyclic="cuts", rel_gap=0.0, time_limit=20.0)
        check_choice(snap, other)
        assert result.choice.cost <= other.cost * (1 + 1e-4) + 1e-9, stats.checks
        assert stats.gap <= 1e-4 + 1e-9, stats.checks
        assert stats.bound <= other.cost + 1e-6, stats.checks


def test_inconsistency_names_each_kind_of_mismatch() -> None:
    snap, costs = random_egraph(3, 6, max_nodes=2)
    problem = to_problem(snap, costs)
    sel = {c: nodes[0] for c, nodes in problem.classes.items() if nodes}
    cost = sum(problem.cost[n] for n in sel.values())
    ok = Solved(sel, cost, "optimal", cost)
    assert inconsistency(problem, ok, 0.0, 0.0) is None
    lied = Solved(sel, cost - 5.0, "optimal", cost - 5.0)
    why = inconsistency(problem, lied, 1e-4, 0.0)
    assert why is not None and "objective" in why and f"{cost:.6g}" in why
    above = Solved(sel, cost + 1.0, "time limit", cost)
    assert "bound" in (inconsistency(problem, above, 0.0, 0.0) or "")
    gap = Solved(sel, cost * 0.5, "optimal", cost)
    assert "gap" in (inconsistency(problem, gap, 1e-4, 0.0) or "")
    # A time-limited answer may be far from its bound: that is not a lie.
    assert inconsistency(problem, Solved(sel, cost * 0.5, "time limit", cost), 1e-4, 0.0) is None


def test_unverified_ilp_that_does_not_improve_falls_back_to_greedy_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snap, costs = random_egraph(5, 12, max_nodes=3)
    base = greedy(snap, costs)

    def unverified(*args: object, **kwargs: object) -> tuple[object, ILPStats]:
        stats = ILPStats(status="unverified", checks=["block (1,): HiGHS reported optimal ..."])
        return base, stats

    monkeypatch.setattr(select, "ilp", unverified)
    result = run_extraction(snap, costs)
    assert result.choice.extractor == "greedy"
    assert result.fallback is not None and "did not match" in result.fallback
    assert "HiGHS reported optimal" in result.fallback
    assert result.to_json()["ilp"]["checks"] == ["block (1,): HiGHS reported optimal ..."]  # type: ignore[index]


def test_highs_prints_nothing_on_stdout() -> None:
    code = textwrap.dedent(
        """
        from rewrite.extract import run_extraction
        from tests.extract.egraphs import random_egraph
        snap, costs = random_egraph(1, 30, max_nodes=3, p_cycle=0.5)
        run_extraction(snap, costs)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout == "", out.stdout
    assert "HiGHS" not in out.stderr
