"""Brute-force optimum of a tiny extraction `Problem`: every node per class, all combinations."""

from __future__ import annotations

import itertools
import math

from rewrite.extract.problem import Problem


def brute_force(problem: Problem) -> tuple[float, dict[int, int] | None]:
    """(optimal cost, one optimal selection class -> node) or (inf, None) if none is valid."""
    classes = list(problem.classes)
    best, best_sel = math.inf, None
    for combo in itertools.product(*(problem.classes[c] for c in classes)):
        sel = dict(zip(classes, combo, strict=True))
        nodes = _needed_acyclic(problem, sel)
        if nodes is None:
            continue
        cost = problem.offset + sum(problem.cost[n] for n in nodes)
        if cost < best - 1e-12:
            best, best_sel = cost, {problem.owner[n]: n for n in nodes}
    return best, best_sel


def _needed_acyclic(problem: Problem, sel: dict[int, int]) -> list[int] | None:
    """Nodes needed from the required classes, or None if one is missing or they cycle."""
    state: dict[int, int] = {}  # 1 on the path, 2 done

    def visit(c: int) -> bool:
        if state.get(c) == 2:
            return True
        if state.get(c) == 1 or c not in sel:
            return False
        state[c] = 1
        if not all(visit(k) for k in problem.kids[sel[c]]):
            return False
        state[c] = 2
        return True

    if not all(visit(r) for r in problem.required):
        return None
    return [sel[c] for c, s in state.items() if s == 2]
