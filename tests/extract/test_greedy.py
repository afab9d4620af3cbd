"""greedy: DAG-aware, acyclic on cyclic e-graphs, deterministic, and fast on 5,000 classes."""

from __future__ import annotations

import random
import time

import pytest

from rewrite.errors import ExtractionError
from rewrite.extract import Choice, check_choice, graph_cost, greedy
from tests.extract.egraphs import build, first_node_choice, random_egraph, tree_cost


def ops(choice: Choice) -> dict[int, str]:
    return {cid: node.op if node.children else node.args[0] for cid, node in choice.picks.items()}


def test_shared_subterm_is_paid_once() -> None:
    # r = Add(p, q), p = Relu(x), q = Sigmoid(x), x = MatMul(a, b): x (cost 10) is paid once.
    snap, costs = build(
        {
            0: [("a", (), 0.0)],
            1: [("b", (), 0.0)],
            2: [("MatMul", (0, 1), 10.0)],
            3: [("Relu", (2,), 1.0)],
            4: [("Sigmoid", (2,), 1.0)],
            5: [("Add", (3, 4), 1.0)],
        },
        roots=[5],
    )
    choice = greedy(snap, costs)
    assert choice.cost == pytest.approx(13.0)
    assert graph_cost(snap, choice, costs) == pytest.approx(13.0)
    assert choice.extractor == "greedy"


def test_prefers_the_option_that_is_cheaper_as_a_dag() -> None:
    # r0 = f(p, q) with p, q both over x (10): tree 23, DAG 13. r1 = f(p', q'): 1 + 7 + 7 = 15.
    snap, costs = build(
        {
            0: [("x", (), 10.0)],
            1: [("P", (0,), 1.0)],
            2: [("Q", (0,), 1.0)],
            3: [("p2", (), 7.0)],
            4: [("q2", (), 7.0)],
            5: [("F1", (3, 4), 1.0), ("F0", (1, 2), 1.0)],
        },
        roots=[5],
    )
    choice = greedy(snap, costs)
    assert choice.picks[5].op == "F0"
    assert choice.cost == pytest.approx(13.0)


def test_greedy_does_not_see_sharing_across_siblings() -> None:
    """A known limit (the ILP's job): b and c each prefer a leaf (10.5) over g(x) (11) alone,
    although sharing x between them would cost 13 in all, not 22."""
    snap, costs = build(
        {
            0: [("x", (), 10.0)],
            1: [("G", (0,), 1.0), ("b", (), 10.5)],
            2: [("H", (0,), 1.0), ("c", (), 10.5)],
            3: [("F", (1, 2), 1.0)],
        },
        roots=[3],
    )
    choice = greedy(snap, costs)
    assert ops(choice) == {3: "F", 1: "b", 2: "c"}
    assert choice.cost == pytest.approx(22.0)
    assert graph_cost(snap, first_node_choice(snap), costs) == pytest.approx(13.0)


def test_self_loop_is_skipped_for_the_leaf() -> None:
    # Class 0 = {Identity(0), x}: the e-graph has a cycle; the choice must not.
    snap, costs = build({0: [("Identity", (0,), 0.0), ("x", (), 5.0)]}, roots=[0])
    choice = greedy(snap, costs)
    assert ops(choice) == {0: "x"}


def test_class_whose_only_node_is_cyclic_forces_the_alternative() -> None:
    # Class 1's only e-node needs class 2, whose only e-node needs class 1: neither is
    # extractable, so the root takes its expensive leaf.
    snap, costs = build(
        {
            1: [("F", (2,), 0.0)],
            2: [("G", (1,), 0.0)],
            3: [("H", (1,), 0.0), ("y", (), 100.0)],
        },
        roots=[3],
    )
    assert ops(greedy(snap, costs)) == {3: "y"}


def test_longer_cycle_through_cheap_nodes_is_broken() -> None:
    # a = {Neg(b), x}, b = {Neg(a), y}: the two cheap Negs would make a cycle; one must go.
    snap, costs = build(
        {
            1: [("Neg", (2,), 0.1), ("x", (), 5.0)],
            2: [("Neg", (1,), 0.1), ("y", (), 6.0)],
            3: [("Add", (1, 2), 1.0)],
        },
        roots=[3],
    )
    choice = greedy(snap, costs)
    check_choice(snap, choice)
    assert ops(choice) == {3: "Add", 1: "x", 2: "Neg"}
    assert choice.cost == pytest.approx(1.0 + 5.0 + 0.1)


def test_unreachable_classes_are_not_picked_even_when_unextractable() -> None:
    snap, costs = build(
        {
            0: [("x", (), 1.0)],
            1: [("Relu", (0,), 1.0)],
            7: [("Loop", (7,), 1.0)],  # unreachable and unextractable
            8: [("Relu", (1,), 1.0)],  # unreachable, extractable
        },
        roots=[1],
    )
    choice = greedy(snap, costs)
    assert set(choice.picks) == {0, 1}


def test_ties_go_to_the_first_e_node() -> None:
    snap, costs = build({0: [("x", (), 2.0), ("y", (), 2.0), ("z", (), 2.0)]}, roots=[0])
    assert ops(greedy(snap, costs)) == {0: "x"}
    snap, costs = build({0: [("y", (), 2.0), ("x", (), 2.0)]}, roots=[0])
    assert ops(greedy(snap, costs)) == {0: "y"}


def test_inf_cost_forbids_an_e_node() -> None:
    snap, costs = build({0: [("x", (), float("inf")), ("y", (), 9.0)]}, roots=[0])
    assert ops(greedy(snap, costs)) == {0: "y"}


def test_multiple_roots_share_their_subgraph() -> None:
    snap, costs = build(
        {0: [("x", (), 4.0)], 1: [("A", (0,), 1.0)], 2: [("B", (0,), 1.0)]}, roots=[1, 2]
    )
    choice = greedy(snap, costs)
    assert choice.roots == [1, 2]
    assert choice.cost == pytest.approx(6.0)


def test_unextractable_root_is_named() -> None:
    snap, costs = build({0: [("x", (), 1.0)], 5: [("Identity", (5,), 0.0)]}, roots=[0, 5])
    with pytest.raises(ExtractionError, match=r"root class 5 .*Identity\(5\): needs 5"):
        greedy(snap, costs)


def test_negative_cost_is_refused() -> None:
    snap, costs = build({0: [("x", (), -1.0)]}, roots=[0])
    with pytest.raises(ExtractionError, match=r"cost -1.0; costs must be >= 0"):
        greedy(snap, costs)


def test_child_outside_the_snapshot_is_refused() -> None:
    snap, costs = build({0: [("Relu", (9,), 1.0)]}, roots=[0])
    with pytest.raises(ExtractionError, match="child class 9, which is not in the snapshot"):
        greedy(snap, costs)


@pytest.mark.parametrize("seed", range(300))
def test_random_egraphs_valid_and_no_worse_than_tree_of_first_nodes(seed: int) -> None:
    """Greedy's DAG cost is at most the tree cost of any acyclic choice (here: first nodes, and
    a random acyclic one). Not at most its DAG cost: see the sibling-sharing test above."""
    rng = random.Random(seed)
    snap, costs = random_egraph(
        seed, rng.randint(5, 60), window=rng.choice([None, 3, 10]), n_roots=rng.randint(1, 3)
    )
    choice = greedy(snap, costs)
    check_choice(snap, choice)
    assert choice.cost == pytest.approx(graph_cost(snap, choice, costs)), f"seed={seed}"
    assert set(choice.picks) <= set(snap.classes), f"seed={seed}"

    base = first_node_choice(snap)
    try:
        check_choice(snap, base)
    except ExtractionError:
        pass  # a "Cyc" e-node came first and closed a cycle
    else:
        assert choice.cost <= tree_cost(snap, base, costs) + 1e-9, f"seed={seed}"

    acyclic = {
        c.id: rng.choice([n for n in c.nodes if n.op != "Cyc"]) for c in snap.classes.values()
    }
    other = Choice(picks=acyclic, roots=list(snap.roots))
    assert choice.cost <= tree_cost(snap, other, costs) + 1e-9, f"seed={seed}"


def test_random_egraph_is_deterministic() -> None:
    snap, costs = random_egraph(7, 200, window=10)
    assert greedy(snap, costs).picks == greedy(snap, costs).picks


def test_five_thousand_classes_in_well_under_a_second() -> None:
    snap, costs = random_egraph(11, 5000, window=20, p_leaf=0.0)
    start = time.perf_counter()
    choice = greedy(snap, costs)
    elapsed = time.perf_counter() - start
    assert len(choice.picks) > 1000  # deep, heavily shared sets: the hard case for the bitsets
    assert elapsed < 2.0, f"greedy took {elapsed:.2f}s on 5,000 classes"
