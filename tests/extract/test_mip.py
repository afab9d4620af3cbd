"""The MIP as HiGHS runs it (`rewrite/extract/mip.py`): a model whose feasible points are exactly
the selections `ilp.py` states, warm starts HiGHS accepts, what a run claims read back as it is,
cycle cuts that cut, and a HiGHS that stays silent without taking the caller's stdout with it."""

from __future__ import annotations

import copy
import ctypes
import itertools
import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import highspy
import pytest

from rewrite.extract import check_choice, greedy, ilp, to_problem
from rewrite.extract.mip import (
    BlockModel,
    Solved,
    _set,
    configured_highs,
    levels,
    quiet_highs,
    status_name,
)
from rewrite.extract.problem import Problem
from rewrite.extract.solution import split
from tests.extract.brute import brute_force
from tests.extract.egraphs import Spec, build, random_egraph

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


# One block: classes 1, 2, 3 form a cyclic SCC where 1 and 2, and 2 and 3, can point at each
# other (the pairwise rows), 1 -> 2 -> 3 -> 1 is a 3-cycle no pairwise row forbids, and Q needs
# its own class. 2 and 3 need not be computed (a can end it at once).
HAND: dict[int, Spec] = {
    4: [("Out", (1,), 0.25)],
    1: [("P", (2,), 1.0), ("Q", (1,), 0.0), ("a", (), 3.0)],
    2: [("S", (1,), 0.5), ("T", (3,), 0.0)],
    3: [("U", (2,), 0.5), ("V", (1,), 0.0), ("c", (), 4.0)],
}


def _model(spec: dict[int, Spec], roots: list[int], *, with_order: bool) -> BlockModel:
    snap, costs = build(spec, roots)
    problem = to_problem(snap, costs)
    (block,) = split(problem)
    return BlockModel(problem, block, with_order=with_order)


def _node(problem: Problem, op: str) -> int:
    """The node of an e-node named `op` (a leaf's name, or an operator used once)."""
    (n,) = (
        n for n, (((_, node),)) in enumerate(problem.picks) if node.op == op or node.args == (op,)
    )
    return n


def _admissible(problem: Problem, model: BlockModel, x: set[int], y: set[int], order: bool) -> bool:
    """Whether (chosen nodes x, computed classes y) is a point the model must admit (`ilp.py`):
    one chosen node in each computed class and none elsewhere, chosen nodes' children and the
    roots computed, no node that needs its own class, and no cycle of chosen nodes (order
    model) or none through two classes (the cuts model before any cut)."""
    block = model.block
    if any(sum(n in x for n in problem.classes[c]) != (c in y) for c in block.classes):
        return False
    edges = {(problem.owner[n], d) for n in x for d in problem.kids[n]}
    if not set(block.roots) <= y or any(d not in y or c == d for c, d in edges):
        return False
    if not order:
        return not any((d, c) in edges for c, d in edges)
    while True:  # drop edges into classes that point nowhere; a cycle never goes
        heads = {c for c, _ in edges}
        kept = {(c, d) for c, d in edges if d in heads}
        if kept == edges:
            return not edges
        edges = kept


def _points(model: BlockModel) -> list[tuple[set[int], set[int]]]:
    """Every 0/1 point of the x and y columns within their bounds, as (x, y)."""
    free = [i for i in range(model.t0) if model.lower[i] < model.upper[i]]
    out = []
    for bits in itertools.product((0.0, 1.0), repeat=len(free)):
        value = model.lower[: model.t0].copy()
        value[free] = bits
        x = {n for n, i in model.x_of_node.items() if value[i]}
        out.append((x, {c for c, i in model.y.items() if value[i]}))
    return out


@pytest.mark.parametrize("with_order", [True, False])
def test_the_model_admits_exactly_the_selections_ilp_states(with_order: bool) -> None:
    """Each 0/1 point of x and y is fixed by its bounds and handed to HiGHS: it must be feasible
    exactly when it is admissible, with the selection's cost as objective and bound (and no
    solution, bound 0 and status infeasible otherwise)."""
    model = _model(HAND, [4], with_order=with_order)
    problem = model.problem
    feasible = 0
    for x, y in _points(model):
        fixed = copy.copy(model)
        fixed.lower, fixed.upper = model.lower.copy(), model.upper.copy()
        for n, i in model.x_of_node.items():
            fixed.lower[i] = fixed.upper[i] = float(n in x)
        for c, i in model.y.items():
            fixed.lower[i] = fixed.upper[i] = float(c in y)
        solved = fixed.solve(None, 10.0, 0.0, 0.0, presolve=True)
        where = f"x={sorted(x)} y={sorted(y)}"
        if _admissible(problem, model, x, y, with_order):
            feasible += 1
            cost = sum(problem.cost[n] for n in x)
            sel = {problem.owner[n]: n for n in x}
            assert (solved.sel, solved.status) == (sel, "optimal"), where
            assert (solved.bound, solved.objective) == pytest.approx((cost, cost)), where
        else:
            assert solved == Solved(None, 0.0, "infeasible", math.inf), where
    # 9 acyclic points with a (2 and 3 optional), 1 with P, T, c; the cuts model also admits
    # the 3-cycle P, T, V
    assert feasible == (10 if with_order else 11)


@pytest.mark.parametrize("with_order", [True, False])
def test_highs_out_of_time_hands_back_the_warm_start_as_it_was_given(with_order: bool) -> None:
    """With no time left HiGHS stops at its first interrupt check: what it returns is the warm
    start (levels included, for the order model: HiGHS drops a start that breaks a row), its
    cost as objective and no bound. Presolve off: with it, HiGHS 1.16 reported another
    objective beside a warm start (`test_ilp_trust.py`)."""
    model = _model(HAND, [4], with_order=with_order)
    problem = model.problem
    starts = [x for x, y in _points(model) if _admissible(problem, model, x, y, True)]
    assert len(starts) == 10
    for x in starts:
        sel = {problem.owner[n]: n for n in x}
        cost = sum(problem.cost[n] for n in x)
        solved = model.solve(sel, 0.0, 0.0, 0.0, presolve=False)
        assert (solved.sel, solved.bound, solved.status) == (sel, 0.0, "time limit"), sorted(x)
        assert solved.objective == pytest.approx(cost), sorted(x)


@pytest.mark.parametrize("presolve", [True, False])
def test_highs_out_of_time_without_a_start_has_no_solution(presolve: bool) -> None:
    """No start and no time: no solution, no bound (a block presolve does not solve alone)."""
    snap, costs = random_egraph(7, 50, max_nodes=3, window=12, p_cycle=0.5, n_roots=1)
    problem = to_problem(snap, costs)
    block = max(split(problem), key=lambda b: len(b.classes))
    model = BlockModel(problem, block, with_order=True)
    solved = model.solve(None, 0.0, 0.0, 0.0, presolve=presolve)
    assert solved == Solved(None, 0.0, "time limit", math.inf)


# Classes 1-4 form a cyclic SCC (1 reaches 2 and 3, each of 2, 3, 4 reaches 1), 5 and 6 another;
# Out is in neither.
TWO_SCCS: dict[int, Spec] = {
    9: [("Out", (1, 6), 0.0)],
    1: [("A", (2, 3), 0.0), ("a", (), 1.0)],
    2: [("B", (3,), 0.0), ("B1", (1,), 0.0)],
    3: [("C", (4,), 0.0), ("C1", (1,), 0.0)],
    4: [("D", (5,), 0.0), ("D1", (1,), 0.0)],
    5: [("e", (), 0.0), ("E6", (6,), 0.0)],
    6: [("F", (5,), 0.0)],
}


def test_levels_are_heights_over_selected_edges_inside_each_scc() -> None:
    model = _model(TWO_SCCS, [9], with_order=True)
    problem = model.problem
    assert sorted(sorted(c for c in model.scc if model.scc[c][0] == i) for i in (0, 1)) == [
        [1, 2, 3, 4],
        [5, 6],
    ]
    # A's children 2 and 3 sit at 2 and 1 (a diamond: the higher counts); D's child 5 is in the
    # other SCC; Out is in none. Out comes first, and each SCC is entered from its top.
    ops = {9: "Out", 1: "A", 2: "B", 3: "C", 4: "D", 6: "F", 5: "e"}
    sel = {c: _node(problem, op) for c, op in ops.items()}
    assert levels(problem, sel, model.scc) == {1: 3, 2: 2, 3: 1, 4: 0, 6: 1, 5: 0}


def test_the_columns_are_the_ones_ilp_states() -> None:
    """x per node, y per class of several nodes (or none), and with the order a continuous level
    in [0, |S| - 1] per class of a cyclic SCC S; x and y binary."""
    nodes, several = 12, 5
    cuts = _model(TWO_SCCS, [9], with_order=False)
    assert (cuts.cols, cuts.t0, cuts.level) == (nodes + several, nodes + several, {})
    assert list(cuts.integrality) == [1] * cuts.cols
    order = _model(TWO_SCCS, [9], with_order=True)
    assert order.cols == nodes + several + 6 and order.t0 == nodes + several
    assert sorted(order.level.values()) == list(range(order.t0, order.cols))
    assert list(order.integrality) == [1] * order.t0 + [0] * 6
    for c, col in order.level.items():
        assert (order.lower[col], order.upper[col]) == (0.0, 3.0 if c <= 4 else 1.0)
    assert list(order.upper[: order.t0]) == [1.0] * order.t0


@pytest.mark.parametrize("reduce", [True, False])
@pytest.mark.parametrize("acyclic", ["order", "cuts"])
def test_a_class_with_every_e_node_forbidden_is_never_computed(reduce: bool, acyclic: str) -> None:
    """Class 2's only e-node costs inf (forbidden): A, which needs it, cannot be chosen. Without
    shrink the class reached the MIP with no node, as a y free of any row."""
    snap, costs = build({1: [("A", (2,), 1.0), ("a", (), 5.0)], 2: [("b", (), 1.0)]}, [1])
    costs = {pick: math.inf if pick[0] == 2 else cost for pick, cost in costs.items()}
    choice, stats = ilp(snap, costs, acyclic=acyclic, reduce=reduce)  # type: ignore[arg-type]
    check_choice(snap, choice)
    assert choice.cost == pytest.approx(5.0) and stats.status in ("optimal", "no ILP needed")


def test_two_classes_that_point_at_each_other_need_no_cut() -> None:
    """The pairwise row forbids a two-class cycle up front: "cuts" solves once."""
    snap, costs = build(
        {
            1: [("Neg", (2,), 0.1), ("x", (), 5.0)],
            2: [("Neg", (1,), 0.1), ("y", (), 6.0)],
            3: [("Add", (1, 2), 1.0)],
        },
        roots=[3],
    )
    choice, stats = ilp(snap, costs, acyclic="cuts", reduce=False)
    assert choice.cost == pytest.approx(6.1) and stats.status == "optimal"
    assert stats.solves == 1


@pytest.mark.parametrize("seed", [6, 100])
def test_a_zero_gap_is_met_on_costs_far_below_one(seed: int) -> None:
    """Costs in µs are often far below 1: a gap with any absolute floor near 1 would accept
    greedy's warm start as optimal."""
    snap, costs = random_egraph(seed, 8, max_nodes=3, window=6, p_cycle=0.9)
    costs = {pick: cost / 100.0 for pick, cost in costs.items()}
    best, _ = brute_force(to_problem(snap, costs))
    assert greedy(snap, costs).cost > best + 1e-4
    choice, stats = ilp(snap, costs, warm=greedy(snap, costs), rel_gap=0.0, reduce=False)
    assert choice.cost == pytest.approx(best, abs=1e-9) and stats.status == "optimal"


def test_quiet_highs_leaves_both_streams_as_they_were(capfd: pytest.CaptureFixture[str]) -> None:
    """In this process (the subprocess tests above see it from outside): nothing of HiGHS on
    fd 1 or 2, both still where they were after it, and C's stdout left without an error (its
    banner flushed into a /dev/null it could write to)."""
    libc = ctypes.CDLL(None)
    try:
        c_stdout: ctypes.c_void_p | None = ctypes.c_void_p.in_dll(libc, "stdout")
        libc.clearerr(c_stdout)
    except ValueError:  # not glibc
        c_stdout = None
    quiet_highs()
    os.write(1, b"out\n")
    os.write(2, b"err\n")
    snap, costs = build(THREE_CYCLE, roots=[4])
    ilp(snap, costs, reduce=False)
    os.write(1, b"out again\n")
    os.write(2, b"err again\n")
    assert capfd.readouterr() == ("out\nout again\n", "err\nerr again\n")
    if c_stdout is not None:
        assert libc.ferror(c_stdout) == 0


def test_an_option_highs_refuses_raises() -> None:
    """HiGHS only returns an error status for an option it refuses, leaving its default (a gap
    of 1e-4, no time limit): `_set` raises instead."""
    h = quiet_highs()
    _set(h, "mip_rel_gap", 0.0)
    assert h.getOptionValue("mip_rel_gap") == (highspy.HighsStatus.kOk, 0.0)
    with pytest.raises(RuntimeError, match="mip_rel_gapp"):
        _set(h, "mip_rel_gapp", 0.0)
    with pytest.raises(RuntimeError, match="time_limit"):
        _set(h, "time_limit", "soon")


def _option(h: highspy.Highs, name: str) -> object:
    status, value = h.getOptionValue(name)
    assert status == highspy.HighsStatus.kOk, name
    return value


@pytest.mark.parametrize("presolve", [True, False])
def test_highs_is_configured_as_the_solve_asks(presolve: bool) -> None:
    """Every limit reaches HiGHS (its defaults are a gap of 1e-4 and no time limit), with the
    floors that keep a zero from meaning 'stop now' or 'never prove optimal'."""
    h = configured_highs(2.5, 0.01, 0.25, presolve=presolve)
    assert _option(h, "time_limit") == 2.5
    assert _option(h, "mip_rel_gap") == 0.01
    assert _option(h, "mip_abs_gap") == 0.25
    assert _option(h, "presolve") == ("choose" if presolve else "off")
    if (
        quiet_highs().getOptionValue("mip_heuristic_run_feasibility_jump")[0]
        == highspy.HighsStatus.kOk
    ):
        assert _option(h, "mip_heuristic_run_feasibility_jump") is False
    floor = configured_highs(0.0, 0.0, 0.0)
    assert _option(floor, "time_limit") == 1e-3
    assert _option(floor, "mip_abs_gap") == 1e-9


def test_both_ways_of_running_out_of_time_are_named_time_limit() -> None:
    h = quiet_highs()
    status = highspy.HighsModelStatus
    assert status_name(h, status.kTimeLimit) == "time limit"
    assert status_name(h, status.kInterrupt) == "time limit"
    assert status_name(h, status.kOptimal) == "optimal"
    assert status_name(h, status.kInfeasible) == "infeasible"
    assert status_name(h, status.kUnbounded) == h.modelStatusToString(status.kUnbounded)
