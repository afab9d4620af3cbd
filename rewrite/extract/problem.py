"""`Problem`: an extraction problem in index form, built from a `Snapshot` and its costs.

Nodes are numbered; each has a cost, its child classes and the snapshot picks it stands for
(its own e-node, plus those `shrink` merged into it). Classes keep their snapshot ids. A
solution (one node for each class it needs) maps back to snapshot picks with
`Problem.picks_of(nodes)`: the `fixed` picks plus every chosen node's `picks`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rewrite.errors import ExtractionError
from rewrite.extract.check import class_label, describe
from rewrite.extract.snapshot import ENode, Snapshot

Pick = tuple[int, ENode]
"""(snapshot class id, e-node): one entry of a `Choice.picks`."""


@dataclass
class Problem:
    """An extraction problem over numbered nodes; classes keep their snapshot ids.

    `classes` maps each live class to its live nodes; node `i` has `cost[i]`, child classes
    `kids[i]` (distinct), class `owner[i]` and stands for the snapshot picks `picks[i]` (its
    own e-node first). A solution picks one node in each required class and in every class a
    picked node needs, with no cycle; its cost is `offset` plus its nodes' costs. `fixed` picks
    belong to every solution.
    """

    classes: dict[int, list[int]]
    cost: list[float]
    kids: list[tuple[int, ...]]
    owner: list[int]
    picks: list[tuple[Pick, ...]]
    required: set[int]
    fixed: dict[int, ENode] = field(default_factory=dict)
    offset: float = 0.0
    labels: dict[int, str] = field(default_factory=dict)
    """Readable class names for error messages (`class 7 ('logits')`)."""

    @property
    def n_nodes(self) -> int:
        return sum(len(v) for v in self.classes.values())

    def copy(self) -> Problem:
        return Problem(
            {c: list(ns) for c, ns in self.classes.items()},
            list(self.cost),
            list(self.kids),
            list(self.owner),
            list(self.picks),
            set(self.required),
            dict(self.fixed),
            self.offset,
            self.labels,
        )

    def picks_of(self, nodes: Iterable[int]) -> dict[int, ENode]:
        """Snapshot picks of a solution given as problem node ids: `fixed` plus their picks."""
        out = dict(self.fixed)
        for n in nodes:
            out.update(self.picks[n])
        return out

    def solution_cost(self, nodes: Iterable[int]) -> float:
        return self.offset + sum(self.cost[n] for n in nodes)


def to_problem(snapshot: Snapshot, costs: Mapping[Pick, float]) -> Problem:
    """The problem of extracting the snapshot's roots: classes reachable from them, e-nodes
    with a finite cost (missing or `inf` = never picked). Raises ExtractionError on a negative
    or NaN cost, a root or child class missing from the snapshot."""
    classes = snapshot.classes
    problem = Problem({}, [], [], [], [], set(snapshot.roots))
    stack = []
    for root in snapshot.roots:
        if root not in classes:
            raise ExtractionError(f"extract: root class {root} is not in the snapshot")
        stack.append(root)
    seen: set[int] = set(stack)
    while stack:
        cid = stack.pop()
        for node in classes[cid].nodes:
            for kid in node.children:
                if kid not in classes:
                    raise ExtractionError(
                        f"extract: {describe(node)} in {class_label(snapshot, cid)} has child "
                        f"class {kid}, which is not in the snapshot"
                    )
                if kid not in seen:
                    seen.add(kid)
                    stack.append(kid)
    for cid in (c for c in classes if c in seen):  # snapshot order: deterministic
        ids: list[int] = []
        for node in classes[cid].nodes:
            c = costs.get((cid, node), math.inf)
            if c == math.inf:
                continue
            if not c >= 0.0:
                raise ExtractionError(
                    f"extract: {describe(node)} in {class_label(snapshot, cid)} has cost {c}; "
                    f"costs must be >= 0 (or inf to forbid an e-node)"
                )
            ids.append(len(problem.cost))
            problem.cost.append(float(c))
            problem.kids.append(tuple(dict.fromkeys(node.children)))
            problem.owner.append(cid)
            problem.picks.append(((cid, node),))
        problem.classes[cid] = ids
        if snapshot.classes[cid].names:
            problem.labels[cid] = class_label(snapshot, cid)
    return problem


def sccs(problem: Problem, classes: Iterable[int]) -> list[list[int]]:
    """The strongly connected components of the class graph restricted to `classes` (edge
    c -> d when a node of c has child d), each after every component it reaches (children
    first); iterative Tarjan."""
    classes = list(classes)
    members = set(classes)
    succ = {
        c: list(dict.fromkeys(d for n in problem.classes[c] for d in problem.kids[n]))
        for c in members
    }
    succ = {c: [d for d in ds if d in members] for c, ds in succ.items()}
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    for start in classes:
        if start in index:
            continue
        work = [(start, 0)]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            c, i = work[-1]
            if i < len(succ[c]):
                work[-1] = (c, i + 1)
                d = succ[c][i]
                if d not in index:
                    index[d] = low[d] = len(index)
                    stack.append(d)
                    on_stack.add(d)
                    work.append((d, 0))
                elif d in on_stack:
                    low[c] = min(low[c], index[d])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[c])
            if low[c] == index[c]:
                comp = []
                while True:
                    d = stack.pop()
                    on_stack.discard(d)
                    comp.append(d)
                    if d == c:
                        break
                out.append(comp)
    return out
