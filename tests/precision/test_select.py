"""`precision.select`: the HiGHS knapsack over candidates under a per-output budget."""

from __future__ import annotations

import itertools

from rewrite.precision.select import Boundary, boundary_cost, select


def test_the_choice_saves_the_most_within_the_budget_of_every_output() -> None:
    """Errors add in variance: sqrt(Σ e²) <= budget for each output."""
    saving = {1: 10.0, 2: 7.0, 3: 6.0, 4: 1.0, 5: 3.0}
    error = {
        1: {"a": 0.8, "b": 0.1},
        2: {"a": 0.5, "b": 0.7},
        3: {"a": 0.5, "b": 0.6},
        4: {"a": 0.0, "b": 0.0},
        5: {"a": 0.1, "b": 0.75},
    }
    sel = select(saving, error, 1.0)
    best = max(
        (s for r in range(6) for s in itertools.combinations(saving, r)
         if all(sum(error[c][o] ** 2 for c in s) <= 1.0 for o in "ab")),
        key=lambda s: sum(saving[c] for c in s),
    )  # fmt: skip
    assert sorted(sel.chosen) == sorted(best) == [1, 3, 4, 5]
    assert sel.saving_us == 20.0
    linear = [1, 2, 4]  # the best choice were errors added in magnitude: too timid
    assert sum(saving[c] for c in linear) < sel.saving_us


def test_candidates_that_save_nothing_or_exceed_the_budget_alone_are_never_chosen() -> None:
    saving = {1: 5.0, 2: -1.0, 3: 4.0, 4: 3.0}
    error = {1: {"y": 2.0}, 2: {"y": 0.0}, 3: {"y": 0.1}, 4: {"y": float("inf")}}
    assert select(saving, error, 1.0).chosen == [3]
    empty = select({1: 5.0}, {1: {"y": 2.0}}, 1.0)
    assert empty.chosen == [] and empty.status == "empty"


def test_unmeasured_candidates_stay_exact() -> None:
    assert select({1: 5.0, 2: 9.0}, {1: {"y": 0.1}}, 1.0).chosen == [1]


def test_tiny_errors_are_held_to_the_budget_not_to_the_solvers_absolute_tolerance() -> None:
    """Errors of 2e-4 against a budget of 1e-3: squared, 4e-8 against 1e-6, below HiGHS's
    default feasibility tolerance of 1e-7; the rows are normalized so that does not matter."""
    saving = {i: 1.0 + i / 100 for i in range(40)}
    error = {i: {"y": 2e-4 * (1 + (i % 7) / 10)} for i in range(40)}
    sel = select(saving, error, 1e-3)
    assert sel.chosen and sum(error[c]["y"] ** 2 for c in sel.chosen) <= 1e-6
    assert "repaired" not in sel.status
    more = sorted(set(saving) - set(sel.chosen), key=lambda c: error[c]["y"])
    assert sum(error[c]["y"] ** 2 for c in [*sel.chosen, more[0]]) > 1e-6  # nothing fits beside


def _chain() -> list[Boundary]:
    """x -> A -> t -> B -> y: x written by a float op, y read by one; 8 µs per kernel."""
    return [
        Boundary(None, ("A",), False, 8.0, 8.0),
        Boundary("A", ("B",), False, 8.0, 8.0),
        Boundary("B", (None,), False, 8.0, 8.0),
    ]


def test_ops_lowered_together_pay_for_the_quantize_kernels_where_they_meet_float_ones() -> None:
    saving = {"A": 10.0, "B": 10.0}
    error = {"A": {"y": 0.1}, "B": {"y": 0.1}}
    alone = select({"A": 10.0}, {"A": error["A"]}, 1.0, boundaries=_chain())
    assert alone.chosen == []  # 10 saved, 16 spent quantizing x and dequantizing t
    both = select(saving, error, 1.0, boundaries=_chain())
    assert sorted(both.chosen) == ["A", "B"]
    assert both.saving_us == 20.0 - 8.0 - 8.0  # x's quantize, y's dequantize; t stays int8
    assert boundary_cost({"A", "B"}, _chain()) == 16.0
    assert boundary_cost({"A"}, _chain()) == 16.0 and boundary_cost(set(), _chain()) == 0.0
    one = select(saving, error, 0.12, boundaries=_chain())  # room for one op's error only
    assert one.chosen == []


def test_a_graph_output_written_by_a_lowered_op_is_dequantized() -> None:
    edges = [Boundary(None, ("A",), False, 1.0, 1.0), Boundary("A", (), True, 1.0, 5.0)]
    assert boundary_cost({"A"}, edges) == 6.0
    assert select({"A": 5.5}, {"A": {"y": 0.1}}, 1.0, boundaries=edges).chosen == []
    assert select({"A": 6.5}, {"A": {"y": 0.1}}, 1.0, boundaries=edges).chosen == ["A"]
