"""shrink: each reduction on a hand-made e-graph, purity, and the optimum kept on random ones."""

from __future__ import annotations

import copy
import itertools
import random

import pytest

from rewrite.errors import ExtractionError
from rewrite.extract import (
    Choice,
    EClass,
    ENode,
    NodeCosts,
    Snapshot,
    check_choice,
    graph_cost,
    greedy,
    shrink,
    split,
    to_problem,
)
from rewrite.extract.problem import Problem
from rewrite.extract.shrink import STEPS
from rewrite.ops.base import TensorType
from tests.extract.brute import brute_force
from tests.extract.egraphs import FLOAT, build, random_egraph


def label(problem: Problem, n: int) -> str:
    node = problem.picks[n][0][1]
    return node.op if node.children else node.args[0]


def test_a_dominated_node_goes_and_what_only_it_needed_is_pruned() -> None:
    # Root {x: 1, F(a): 2}: x costs less and needs nothing, so F goes, and a with it.
    snap, costs = build({0: [("a", (), 5.0)], 1: [("F", (0,), 2.0), ("x", (), 1.0)]}, roots=[1])
    small, stats = shrink(to_problem(snap, costs), steps={"dominated", "prune"})
    assert stats.dominated_nodes == 1 and stats.pruned_classes == 1
    assert [label(small, n) for n in small.classes[1]] == ["x"] and set(small.classes) == {1}
    small, stats = shrink(to_problem(snap, costs))  # all steps: nothing left to choose
    assert small.classes == {} and small.offset == pytest.approx(1.0)
    assert {c: n.args[0] for c, n in small.fixed.items()} == {1: "x"}


def test_dominance_needs_a_subset_of_children_and_no_higher_cost() -> None:
    snap, costs = build(
        {
            0: [("a", (), 1.0)],
            1: [("b", (), 1.0)],
            2: [("AB", (0, 1), 3.0), ("A", (0,), 2.0), ("B", (1,), 9.0), ("A2", (0,), 2.0)],
            3: [("R", (2,), 1.0)],
        },
        roots=[3],
    )
    small, stats = shrink(to_problem(snap, costs), steps={"dominated"})
    # AB (a superset of A's children, dearer) and A2 (equal to A, later) go; B stays: it
    # costs more than A but needs another child.
    assert stats.dominated_nodes == 2
    assert sorted(label(small, n) for n in small.classes[2]) == ["A", "B"]


def test_self_loops_and_unfounded_cycles_are_unusable() -> None:
    snap, costs = build(
        {
            0: [("Identity", (0,), 0.0), ("x", (), 5.0)],  # self loop
            1: [("F", (2,), 0.0)],  # 1 and 2 only reach each other
            2: [("G", (1,), 0.0)],
            3: [("H", (1,), 0.0), ("Add", (0, 0), 1.0)],
        },
        roots=[3],
    )
    small, stats = shrink(to_problem(snap, costs))
    assert stats.unusable_nodes == 4  # Identity, F, G, and H: it needs class 1
    assert small.classes == {} and small.offset == pytest.approx(6.0)


def test_required_single_node_classes_are_fixed_with_their_cost() -> None:
    snap, costs = build(
        {0: [("x", (), 1.0)], 1: [("Relu", (0,), 2.0)], 2: [("Neg", (1,), 3.0)]}, roots=[2]
    )
    small, stats = shrink(to_problem(snap, costs), steps={"required"})
    assert stats.fixed_classes == 3 and small.classes == {}
    assert small.offset == pytest.approx(6.0)
    assert small.picks_of([]) == greedy(snap, costs).picks


def test_children_every_node_needs_become_required() -> None:
    # Both nodes of the root need class 0, so 0 is fixed although the root has a choice.
    snap, costs = build(
        {
            0: [("x", (), 1.0)],
            1: [("y", (), 1.0), ("y2", (), 1.5)],  # no dominance: y2 costs more, same children
            2: [("F", (0, 1), 2.0), ("G", (0,), 4.0)],
        },
        roots=[2],
    )
    small, _ = shrink(to_problem(snap, costs))
    assert 0 in small.fixed and 0 not in small.classes


def test_classes_every_derivation_uses_become_required() -> None:
    # S = F(a + b, c) = G(a, b + c): no child is common to F and G, but a, b and c are
    # used by both derivations, so they are required (and fixed: one node each).
    snap, costs = build(
        {
            0: [("a", (), 1.0)],
            1: [("b", (), 2.0)],
            2: [("c", (), 4.0)],
            3: [("AddAB", (0, 1), 1.0)],
            4: [("AddBC", (1, 2), 1.0)],
            5: [("F", (3, 2), 1.0), ("G", (0, 4), 1.0)],
        },
        roots=[5],
    )
    small, _ = shrink(to_problem(snap, costs), steps={"required"})
    assert set(small.fixed) == {0, 1, 2} and set(small.classes) == {3, 4, 5}
    assert small.offset == pytest.approx(7.0)


def test_a_single_node_class_with_users_in_one_class_is_merged_into_them() -> None:
    # c = Relu(x) (cost 4) is used by both nodes of class 3 only: merged into each.
    snap, costs = build(
        {
            0: [("x", (), 0.5), ("x2", (), 0.7)],
            1: [("y", (), 1.0)],
            2: [("Relu", (0,), 4.0)],
            3: [("F", (2, 1), 1.0), ("G", (2,), 2.0), ("z", (), 6.5)],
            4: [("Out", (3, 0), 0.0)],
        },
        roots=[4],
    )
    problem = to_problem(snap, costs)
    small, stats = shrink(problem, steps={"forced"})
    assert stats.merged_classes == 2 and set(small.classes) == {0, 3, 4}  # y merged into F
    users = [n for n in small.classes.get(3, []) if label(small, n) in ("F", "G")]
    assert len(users) == 2 and all(2 in dict(small.picks[n]) for n in users)
    extra = {"F": 4.0 + 1.0, "G": 4.0}
    for n in users:
        assert small.cost[n] == pytest.approx(problem.cost[n] + extra[label(small, n)])


def test_a_shared_costly_class_used_by_two_classes_is_kept() -> None:
    snap, costs = build(
        {
            0: [("x", (), 1.0)],
            1: [("Exp", (0,), 5.0)],  # used by classes 2 and 3: must stay one class
            2: [("F", (1,), 1.0), ("f", (), 5.5)],
            3: [("G", (1,), 1.0), ("g", (), 5.5)],
            4: [("Add", (2, 3), 1.0)],
        },
        roots=[4],
    )
    small, _ = shrink(to_problem(snap, costs))
    assert 1 in small.classes and {2, 3} <= set(small.classes)


def test_independent_parts_are_split_into_blocks() -> None:
    snap, costs = build(
        {
            0: [("x", (), 1.0)],
            1: [("Exp", (0,), 5.0)],
            2: [("F", (1,), 1.0), ("f", (), 5.5)],
            3: [("G", (1,), 1.0), ("g", (), 5.5)],
            10: [("y", (), 1.0)],
            11: [("Exp", (10,), 5.0)],
            12: [("F", (11,), 1.0), ("f", (), 5.5)],
            13: [("G", (11,), 1.0), ("g", (), 5.5)],
            20: [("Out", (2, 3, 12, 13), 0.0)],
        },
        roots=[20],
    )
    small, _ = shrink(to_problem(snap, costs))
    blocks = split(small)
    assert sorted(sorted(b.classes) for b in blocks) == [[1, 2, 3], [11, 12, 13]]
    assert sorted(sorted(b.roots) for b in blocks) == [[2, 3], [12, 13]]


def test_shrink_does_not_modify_its_input() -> None:
    snap, costs = random_egraph(3, 80, window=6)
    problem = to_problem(snap, costs)
    before = copy.deepcopy(problem)
    shrink(problem)
    assert problem == before


def test_no_valid_choice_is_an_error_naming_the_class() -> None:
    snap, costs = build({1: [("F", (2,), 0.0)], 2: [("G", (1,), 0.0)]}, roots=[1])
    with pytest.raises(ExtractionError, match="required class 1 has no e-node of finite cost"):
        shrink(to_problem(snap, costs))


@pytest.mark.parametrize("seed", range(150))
def test_shrink_keeps_the_optimum_and_maps_back_to_a_valid_choice(seed: int) -> None:
    rng = random.Random(seed)
    snap, costs = random_egraph(
        seed,
        rng.randint(2, 8),
        max_nodes=3,
        max_kids=rng.choice([1, 2, 3]),
        p_leaf=rng.choice([0.15, 0.4]),
        p_cycle=rng.choice([0.0, 0.4, 0.9]),
        n_roots=rng.randint(1, 2),
    )
    full = to_problem(snap, costs)
    best, _ = brute_force(full)
    small, _ = shrink(full)
    small_best, sel = brute_force(small)
    assert small_best == pytest.approx(best, abs=1e-9), f"seed={seed}"
    assert sel is not None, f"seed={seed}"
    choice = Choice(small.picks_of(sel.values()), list(snap.roots), extractor="shrunk")
    check_choice(snap, choice)
    assert graph_cost(snap, choice, costs) == pytest.approx(best, abs=1e-9), f"seed={seed}"


def with_unfounded_cycle(seed: int) -> tuple[Snapshot, NodeCosts]:
    """A small random e-graph (`random_egraph`) plus two classes that only derive each other
    (no finite term: what `unusable` removes), used by cheap nodes of random classes."""
    rng = random.Random(seed)
    snap, costs = random_egraph(
        seed,
        rng.randint(2, 5),
        max_nodes=2,
        max_kids=rng.choice([1, 2]),
        p_leaf=0.3,
        p_cycle=rng.choice([0.0, 0.4]),
        n_roots=rng.randint(1, 2),
    )
    a, b = 1000, 1001
    loop = {a: ENode("F", (b,)), b: ENode("G", (a,))}
    for cid, node in loop.items():
        snap.classes[cid] = EClass(cid, [node], TensorType(FLOAT, (4,)))
        costs[(cid, node)] = rng.choice([0.0, 1.0])
    for cid in rng.sample(sorted(c for c in snap.classes if c < a), rng.randint(1, 2)):
        node = ENode("UsesLoop", (rng.choice([a, b]),))
        snap.classes[cid].nodes.insert(0, node)
        costs[(cid, node)] = 0.0
    return snap, costs


@pytest.mark.parametrize("seed", range(40))
def test_every_subset_of_steps_keeps_the_optimum(seed: int) -> None:
    snap, costs = with_unfounded_cycle(seed)
    full = to_problem(snap, costs)
    best, _ = brute_force(full)
    for r in range(len(STEPS) + 1):
        for steps in itertools.combinations(STEPS, r):
            small, _ = shrink(full, steps=steps)
            small_best, sel = brute_force(small)
            assert small_best == pytest.approx(best, abs=1e-9), f"seed={seed} steps={steps}"
            assert sel is not None, f"seed={seed} steps={steps}"
            choice = Choice(small.picks_of(sel.values()), list(snap.roots), extractor="shrunk")
            check_choice(snap, choice)
