"""ILP extraction on HiGHS: the cheapest acyclic DAG choice, or a bound on how far from it.

`ilp(snapshot, costs, warm=greedy_choice)` shrinks the problem (`shrink.py`: exact
reductions), splits it into independent blocks and solves each block as a MIP:

    x_n ∈ {0, 1} per node, y_c ∈ {0, 1} per class         (y_c = 1: class c is computed)
    Σ_{n ∈ c} x_n = y_c                   every class     (exactly one node per computed class)
    x_n ≤ y_d                             every node n, child class d of n
    y_r = 1                               every required class (roots, and what they force)
    minimize Σ cost_n · x_n               (DAG cost: each chosen node paid once)

"Exactly one" rather than "at least one": with costs >= 0 a second node never helps, and one
node per class makes the mapping back trivial and cycle cuts valid per class.

Acyclicity is needed only inside the cyclic strongly connected components of the class graph
(edge c -> d when a node of c has child d); elsewhere no choice can close a cycle. Two ways:
- `"order"` (default): a continuous level t_c ∈ [0, |S| - 1] per class of a cyclic SCC S and,
  for each node n of c with a child d in S, t_c - t_d ≥ 1 - |S|·(1 - x_n): a chosen node's
  children sit strictly lower. One solve.
- `"cuts"`: solve without them; while the chosen graph has cycles, add for each cycle
  c_1 -> … -> c_k -> c_1 (one per back edge of a DFS) Σ_i Σ{x_n : n ∈ c_i, c_{i+1} child of
  n} ≤ k - 1 (those classes cannot all point along the cycle) and solve again.
Both also get, for every two classes c, d of one SCC that can point at each other,
Σ{x_n : n ∈ c, d child of n} + Σ{x_m : m ∈ d, c child of m} ≤ 1: valid, and it closes most of
big-M's LP gap on short cycles (dense-cycle random e-graphs: 1.5-7x faster to optimal).
"order" is the default: one solve, and on those e-graphs as fast or faster than cuts, which
took up to 16 rounds (`bench/extract.py --acyclic both`). Real e-graphs seldom need either:
no corpus model's e-graph measured (cleanup, +AC, +custom rules) has a cyclic SCC of two or
more classes; its self-loops (Identity(x) = x) are dropped by shrink.

Warm start: per block, the given choice (`warm`, e.g. greedy's) mapped onto the block, or
greedy run on the block when it does not map; HiGHS starts from it, so the result is never
worse. The time limit covers shrink (not interruptible; about 20-40 µs per e-node) and all
blocks, smallest first; HiGHS is also interrupted from its MIP callback. One phase hears
neither: a root cut-separation round, measured at up to 9 s on a 10,000-class random e-graph
(under 1 s on every corpus e-graph), so the limit can be overshot by one such round. Every
result is checked for acyclicity and completeness before it is returned; `check_choice` is
left to the caller (`select.run_extraction` runs it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from rewrite.errors import ExtractionError
from rewrite.extract.cost import graph_cost
from rewrite.extract.mip import BlockModel, Solved
from rewrite.extract.problem import Pick, Problem, to_problem
from rewrite.extract.shrink import ShrinkStats, shrink
from rewrite.extract.snapshot import Choice, Snapshot
from rewrite.extract.solution import (
    Block,
    block_greedy,
    find_cycles,
    from_picks,
    needed,
    split,
)

Acyclic = Literal["order", "cuts"]


@dataclass
class ILPStats:
    """What the ILP did. Costs in the cost model's unit (µs), the shrink's constant included.

    `status` is "optimal" (proved within `rel_gap` of the whole graph's cost: each block stops
    within its share, by warm-start cost, of that tolerance), "time limit" (some block stopped
    early; its best solution is used), "unverified" (for some block HiGHS gave no answer whose
    claims matched its selection, even re-solved: `checks` says what), or "no ILP needed"
    (shrink solved it all). A status is never copied from HiGHS unchecked.
    `objective` is the returned choice's cost, `bound` a proved lower bound on the optimum,
    `gap` = (objective - bound) / objective (0 when both are 0).
    """

    status: str = "not run"
    objective: float = math.inf
    bound: float = 0.0
    gap: float = math.inf
    warm_cost: float = math.inf
    seconds: float = 0.0
    blocks: int = 0
    rows: int = 0
    cols: int = 0
    solves: int = 0
    """HiGHS runs: one per block, more with `acyclic="cuts"` (one per round of cuts) and for
    every answer re-solved because its claims did not match its selection."""
    checks: list[str] = field(default_factory=list)
    """Each HiGHS answer that was distrusted: what it claimed, what it returned, what was done."""
    shrink: ShrinkStats = field(default_factory=ShrinkStats)

    def summary(self) -> str:
        return (
            f"ilp {self.status}: cost {self.objective:.6g}, bound {self.bound:.6g}, "
            f"gap {self.gap:.2%}, {self.seconds:.2f} s, {self.blocks} blocks "
            f"({self.shrink.nodes_before} -> {self.shrink.nodes_after} e-nodes after shrink)"
        )

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            k: (round(v, 6) if math.isfinite(v) else None) if isinstance(v, float) else v
            for k, v in vars(self).items()
            if k != "shrink"
        }
        out["shrink"] = self.shrink.to_json()
        return out


@dataclass
class _Result:
    nodes: list[int]
    objective: float
    bound: float
    status: str
    rows: int = 0
    cols: int = 0
    solves: int = 0


def ilp(
    snapshot: Snapshot,
    costs: Mapping[Pick, float],
    *,
    warm: Choice | None = None,
    time_limit: float = 10.0,
    rel_gap: float = 1e-4,
    acyclic: Acyclic = "order",
    reduce: bool = True,
) -> tuple[Choice, ILPStats]:
    """The ILP choice for the snapshot's roots and its stats (module doc: model and options).

    `reduce=False` skips `shrink` (for measuring it; the optimum is the same).

    Raises ExtractionError when the snapshot has no valid choice, or when HiGHS fails and no
    warm start exists for a block. The choice is acyclic and complete; callers still run
    `check_choice` on it.
    """
    start = time.perf_counter()
    deadline = start + max(time_limit, 0.0)
    full = to_problem(snapshot, costs)
    if reduce:
        problem, sstats = shrink(full)
    else:
        problem, sstats = full, ShrinkStats(len(full.classes), full.n_nodes)
        sstats.classes_after, sstats.nodes_after = sstats.classes_before, sstats.nodes_before
    blocks = sorted(split(problem), key=lambda b: b.n_nodes(problem))
    stats = ILPStats(shrink=sstats, blocks=len(blocks))
    warm_picks = warm.picks if warm is not None else {}
    starts = [_warm_start(problem, block, warm_picks) for block in blocks]
    warm_costs = [problem.solution_cost(s.values()) - problem.offset for s in starts]
    warm_total = problem.offset + sum(warm_costs)
    chosen: list[int] = []
    bound = problem.offset
    statuses = set()
    for block, start_sel, block_cost in zip(blocks, starts, warm_costs, strict=True):
        # The gap is the whole graph's: each block may stop within its share of
        # rel_gap · (total cost), a much looser target than rel_gap of its own cost.
        share = rel_gap * warm_total * block_cost / max(sum(warm_costs), 1e-300)
        res = solve_block(
            problem, block, start_sel, deadline, rel_gap, share, acyclic, stats.checks
        )
        chosen += res.nodes
        bound += min(res.bound, res.objective)
        statuses.add(res.status)
        stats.rows += res.rows
        stats.cols += res.cols
        stats.solves += res.solves
    picks = problem.picks_of(chosen)
    choice = Choice(picks=picks, roots=list(snapshot.roots), extractor="ilp")
    choice.cost = graph_cost(snapshot, choice, costs)
    stats.status = (
        "no ILP needed"
        if not blocks
        else "unverified"
        if "unverified" in statuses
        else "time limit"
        if "time limit" in statuses
        else "optimal"
        if statuses == {"optimal"}
        else ", ".join(sorted(statuses))
    )
    stats.objective = choice.cost
    stats.bound = min(bound, choice.cost)
    stats.gap = _gap(choice.cost, stats.bound)
    stats.warm_cost = warm_total
    stats.seconds = time.perf_counter() - start
    choice.notes.append(stats.summary())
    choice.notes += [f"ilp check: {c}" for c in stats.checks]
    return choice, stats


def _gap(upper: float, lower: float) -> float:
    if upper <= 0.0:
        return 0.0
    return max(0.0, (upper - lower) / upper)


def _warm_start(problem: Problem, block: Block, warm: Mapping[int, object]) -> dict[int, int]:
    """A valid selection (class -> node) to start from: `warm` mapped onto the block, or, when
    it does not map (no warm choice, or it picked a node that shrink dropped), greedy on the
    block."""
    mapped = from_picks(problem, block, warm) if warm else None
    return mapped if mapped is not None else block_greedy(problem, block)


ATTEMPTS: tuple[tuple[bool, bool], ...] = (
    (True, True),
    (False, True),
    (True, False),
    (False, False),
)
"""(warm start given, presolve on) of each HiGHS run of one solve, tried in this order until
what HiGHS claims matches the selection it returns (`inconsistency`)."""


def solve_block(
    problem: Problem,
    block: Block,
    warm: dict[int, int],
    deadline: float,
    rel_gap: float,
    abs_gap: float,
    acyclic: Acyclic,
    checks: list[str] | None = None,
) -> _Result:
    """Solve one block, starting from the valid selection `warm` (never returns worse).

    Every HiGHS answer is checked against the selection it returns (`trusted_solve`); what was
    distrusted and what was done about it is appended to `checks`.
    """
    best = warm
    best_cost = problem.solution_cost(warm.values()) - problem.offset
    res = _Result(list(warm.values()), best_cost, 0.0, "time limit")
    if deadline <= time.perf_counter():
        return res
    model = BlockModel(problem, block, with_order=acyclic == "order")
    res.rows, res.cols = model.rows, model.cols
    while True:
        if deadline - time.perf_counter() <= 0:
            return res
        solved, runs = trusted_solve(model, best, deadline, rel_gap, abs_gap, checks)
        res.bound = max(res.bound, solved.bound)
        res.solves += runs
        sel = solved.sel
        if sel is None:
            if solved.status == "infeasible":
                raise ExtractionError(f"extract: HiGHS says block {block.roots} is infeasible")
            return res
        cycles = find_cycles(problem, block.roots, sel)
        if not cycles:
            nodes = needed(problem, block.roots, sel)
            cost = sum(problem.cost[n] for n in nodes)
            if cost <= best_cost:
                res.nodes, res.objective = nodes, cost
            res.status = solved.status
            res.rows, res.cols = model.rows, model.cols
            return res
        if acyclic == "order":
            raise ExtractionError(f"extract: HiGHS returned a cycle through classes {cycles[0]}")
        for cycle in cycles:
            model.cut(cycle)


def trusted_solve(
    model: BlockModel,
    warm: dict[int, int],
    deadline: float,
    rel_gap: float,
    abs_gap: float,
    checks: list[str] | None = None,
) -> tuple[Solved, int]:
    """A HiGHS answer whose claims match its selection, and the number of HiGHS runs.

    Runs HiGHS as `ATTEMPTS` says until `inconsistency` finds nothing. When every attempt is
    inconsistent (or time runs out first), the last selection is returned (it is still a
    selection; the caller keeps it only if it is valid and no worse than `warm`) with status
    "unverified" and bound 0: nothing HiGHS claimed about it is used.
    """
    solved = Solved(None, 0.0, "time limit", math.inf)
    runs = 0
    for use_warm, presolve in ATTEMPTS:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        solved = model.solve(warm if use_warm else None, left, rel_gap, abs_gap, presolve=presolve)
        runs += 1
        why = inconsistency(model.problem, solved, rel_gap, abs_gap)
        if why is None:
            if runs > 1 and checks is not None:
                checks.append(
                    f"block {model.block.roots}: consistent after {_how(use_warm, presolve)}"
                )
            return solved, runs
        if checks is not None:
            checks.append(f"block {model.block.roots}: {why} ({_how(use_warm, presolve)})")
    if runs and checks is not None:
        checks.append(f"block {model.block.roots}: no consistent HiGHS answer; its claims unused")
    return Solved(solved.sel, 0.0, "unverified" if runs else "time limit", math.inf), runs


def _how(use_warm: bool, presolve: bool) -> str:
    return f"{'with' if use_warm else 'without'} warm start, presolve {'on' if presolve else 'off'}"


def inconsistency(problem: Problem, solved: Solved, rel_gap: float, abs_gap: float) -> str | None:
    """Why HiGHS's claims do not match the selection it returned (None when they match).

    The selection's own cost (Σ cost of its nodes, what the objective sums) must equal the
    reported objective, the reported bound must not exceed it, and an `optimal` status must have
    the selection within the gap tolerances of the bound.
    """
    if solved.sel is None:
        return None
    cost = sum(problem.cost[n] for n in solved.sel.values())
    tol = 1e-6 * max(1.0, abs(cost))
    if math.isfinite(solved.objective) and abs(cost - solved.objective) > tol:
        return (
            f"HiGHS reported {solved.status} with objective {solved.objective:.6g}, but the "
            f"selection it returned costs {cost:.6g}"
        )
    if solved.bound > cost + tol:
        return f"HiGHS's bound {solved.bound:.6g} exceeds its own selection's cost {cost:.6g}"
    if solved.status == "optimal" and cost - solved.bound > max(abs_gap, rel_gap * cost) + tol:
        return (
            f"HiGHS reported optimal, but its selection costs {cost:.6g} against bound "
            f"{solved.bound:.6g} (beyond the gap tolerance)"
        )
    return None
