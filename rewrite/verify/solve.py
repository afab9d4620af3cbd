"""Asking Z3 whether the two sides of a case can differ, one element at a time.

`solve(diffs, facts, rhs_defined, timeout_ms, memo)` returns a model where some element
equality is false (or the right side undefined), or None when none can be (a query the
default solver gives up on is asked once more, split on its if-conditions first); elementwise
formulas repeat up to renaming, so each query is memoized under a canonical form (its input
constants renamed in order of occurrence), and a query Z3 gave up on is not asked twice.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]  # ships no type hints

from rewrite.verify.semantics import axioms


def solve(
    diffs: list[Any],
    facts: list[Any],
    rhs_defined: list[Any],
    timeout_ms: int,
    memo: dict[str, bool] | None = None,
    second_try: bool = True,
) -> tuple[Any, str]:
    """(a model where some diff is false or the right side undefined, or None; why Z3 gave
    up). Each element's equality is asked alone, with the facts connected to its variables
    (directly or through other facts' variables): elementwise formulas repeat up to renaming,
    so `memo` (canonical query -> holds) answers most of them without the solver. A model found
    is extended to satisfy every fact, so its inputs are ones the guards allow; when the other
    facts cannot hold together there is no such input and the case holds vacuously."""
    memo = {} if memo is None else memo
    queries = [[z3.Not(c) for c in rhs_defined]] if rhs_defined else []
    queries += [[z3.Not(d)] for d in diffs]
    for goal in queries:
        mine = _connected(goal, facts) if len(goal) == 1 else facts
        key = _canonical([*mine, *goal])
        if key in memo:
            if memo[key]:
                continue
            return None, "timeout (the same query up to renaming)"
        facts_axioms = [*mine, *axioms([*goal, *mine])]
        special = _at_extremes(facts_axioms, goal, timeout_ms)
        if special is not None:
            return _extended(special, goal, facts_axioms, facts, timeout_ms)
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(*facts_axioms)
        solver.add(z3.Or(goal))
        res = solver.check()
        if res == z3.unknown and second_try:
            solver = _without_ifs(facts_axioms, goal, timeout_ms)
            res = solver.check()
        if res == z3.unsat:
            memo[key] = True
            continue
        if res == z3.unknown:
            memo[key] = False
            return None, solver.reason_unknown()
        return _extended(solver.model(), goal, facts_axioms, facts, timeout_ms)
    return None, ""


def _without_ifs(facts: list[Any], goal: list[Any], timeout_ms: int) -> Any:
    """The query for a second try, after the default solver gave up: split on the conditions
    of its if-terms first (`cofactor-term-ite`). A symbolic index (Gather's
    `ops.gather._select`) puts sums of products under if-chains, nonlinear real arithmetic
    the default solver does not decide within seconds even for a 4x2 input; split per index
    value, both sides are the same sum."""
    tactic = z3.Then("simplify", "cofactor-term-ite", "simplify", "smt")
    solver = z3.TryFor(tactic, timeout_ms).solver()  # a tactic solver ignores "timeout"
    solver.add(*facts)
    solver.add(z3.Or(goal))
    return solver


def _connected(goal: list[Any], facts: list[Any]) -> list[Any]:
    """The facts that share a variable with `goal`, or with a fact that does (transitively):
    a guard reached through another variable (`w == z`, `z > 0`) constrains the goal too."""
    names = _names(goal)
    rest = [(f, _names([f])) for f in facts]
    mine: list[Any] = []
    grown = True
    while grown:
        grown = False
        for f, fn in rest:
            if fn & names and not any(f is g for g in mine):
                mine.append(f)
                names |= fn
                grown = True
    return [f for f in facts if any(f is g for g in mine)]


def _extended(
    model: Any, goal: list[Any], mine: list[Any], facts: list[Any], timeout_ms: int
) -> tuple[Any, str]:
    """`model` (of `mine` and `goal`) with values for every other variable that satisfy the
    remaining facts. Those facts share no variable with `mine`, so they are solved alone;
    unsat means no input satisfies the guards at all (the case holds vacuously)."""
    others = [f for f in facts if not any(f is g for g in mine)]
    if not others:
        return model, ""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*mine, *others, *axioms(others), z3.Or(goal))
    for c in _consts([*mine, *goal]):
        value = model.eval(c, model_completion=True)
        solver.add(c == value)
    res = solver.check()
    if res == z3.unsat:
        return None, ""
    if res == z3.unknown:
        return None, solver.reason_unknown()
    return solver.model(), ""


def _at_extremes(facts: list[Any], goal: list[Any], timeout_ms: int) -> Any:
    """A model with every bit-vector input at an extreme (0, ±1, ±2, INT_MIN, INT_MAX, ...),
    or None. Wrapping and division counterexamples sit there, and this small search is quick
    where a query over 32/64-bit products and quotients can exhaust Z3's time."""
    bvs = [c for c in _consts(goal) if z3.is_bv(c)]
    if not bvs:
        return None
    solver = z3.Solver()
    solver.set("timeout", max(1, timeout_ms // 5))
    for c in bvs:
        w = c.size()
        values = {0, 1, -1, 2, -2, 3, 1 << (w - 1), (1 << (w - 1)) - 1, 1 << (w - 2)}
        solver.add(z3.Or([c == z3.BitVecVal(v, w) for v in values]))
    solver.add(*facts, z3.Or(goal))
    return solver.model() if solver.check() == z3.sat else None


def _consts(exprs: list[Any]) -> list[Any]:
    """The input constants in `exprs`, in order of first occurrence."""
    seen: set[int] = set()
    out: list[Any] = []
    stack = list(reversed(exprs))
    while stack:
        e = stack.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(e)
        stack.extend(reversed(e.children()))
    return out


def _names(exprs: list[Any]) -> set[str]:
    return {c.decl().name() for c in _consts(exprs)}


def _canonical(exprs: list[Any]) -> str:
    consts = _consts(exprs)
    fresh = [(c, z3.Const(f"_v{i}", c.sort())) for i, c in enumerate(consts)]
    return " ".join(z3.substitute(e, *fresh).sexpr() if fresh else e.sexpr() for e in exprs)
