"""The MIP as HiGHS runs it (`rewrite/extract/mip.py`): cycle cuts that cut, and a HiGHS that
stays silent without taking the caller's stdout with it."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rewrite.extract import check_choice, greedy, ilp, to_problem
from tests.extract.brute import brute_force
from tests.extract.egraphs import build, random_egraph

ROOT = Path(__file__).resolve().parents[2]

# a -> b -> c -> a through free nodes; each class also has a dear leaf: the cheapest selection
# is the 3-cycle, which no pairwise row forbids, so "cuts" must cut it.
THREE_CYCLE = {
    1: [("F", (2,), 0.0), ("a", (), 9.0)],
    2: [("G", (3,), 0.0), ("b", (), 8.0)],
    3: [("H", (1,), 0.0), ("c", (), 7.0)],
    4: [("Out", (1, 2, 3), 1.0)],
}


def test_a_cycle_cut_removes_the_cycle_in_one_round() -> None:
    snap, costs = build(THREE_CYCLE, roots=[4])
    choice, stats = ilp(snap, costs, acyclic="cuts", reduce=False, time_limit=20.0)
    check_choice(snap, choice)
    assert choice.cost == pytest.approx(8.0)
    assert stats.status == "optimal", stats.summary()  # not stopped by the time limit
    assert stats.solves == 2  # the cyclic answer, then the answer under the cut


def test_the_order_model_needs_no_cut() -> None:
    snap, costs = build(THREE_CYCLE, roots=[4])
    choice, stats = ilp(snap, costs, acyclic="order", reduce=False)
    assert choice.cost == pytest.approx(8.0) and stats.status == "optimal"
    assert stats.solves == 1


def test_stdout_works_after_highs_and_carries_nothing_of_it() -> None:
    """HiGHS's banner and solve log never reach stdout, and stdout is stdout again after."""
    code = textwrap.dedent(
        """
        import sys
        from rewrite.extract import run_extraction
        from rewrite.extract.mip import quiet_highs
        from tests.extract.egraphs import random_egraph
        quiet_highs()
        print("after the constructor", flush=True)
        snap, costs = random_egraph(1, 30, max_nodes=3, p_cycle=0.5)
        run_extraction(snap, costs)
        print("after a solve", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout == "after the constructor\nafter a solve\n"
    assert out.stderr == "to stderr\n"


def test_the_mip_finds_optima_greedy_misses() -> None:
    """Where greedy is not optimal, the MIP (shrink off: every block is solved by HiGHS) must
    find the optimum itself: a MIP that silently fell back to greedy passes every test where
    greedy happens to be optimal, and fails here."""
    missed = 0
    for seed in range(150):
        rng = random.Random(seed)
        snap, costs = random_egraph(seed, rng.randint(5, 9), max_nodes=3, p_cycle=0.4)
        best, _ = brute_force(to_problem(snap, costs))
        if greedy(snap, costs).cost <= best + 1e-9:
            continue
        missed += 1
        for acyclic in ("order", "cuts"):
            choice, stats = ilp(snap, costs, acyclic=acyclic, reduce=False, rel_gap=0.0)  # type: ignore[arg-type]
            where = f"seed={seed} acyclic={acyclic}"
            assert choice.cost == pytest.approx(best, abs=1e-9), where
            assert stats.status == "optimal" and stats.bound == pytest.approx(best), where
    assert missed >= 5, f"only {missed} e-graphs where greedy is not optimal"
