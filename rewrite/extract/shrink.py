"""Shrink an extraction problem before the ILP sees it, keeping its optimum exactly.

`shrink(problem)` returns a smaller `Problem` (`problem.py`; the input is not modified) and
`ShrinkStats`; `solution.split` then cuts it into independent blocks. Every solution of the
smaller problem maps back to snapshot picks with `Problem.picks_of`.

The reductions, applied until none applies. Each keeps an optimal solution and maps every
solution of the smaller problem to a valid choice of the same cost:
- prune: a class unreachable from the required classes through any node is never needed.
- unusable: a node that needs its own class, or a class with no node extractable from the
  leaves (least fixpoint: classes that only reach each other in a loop), is never chosen.
- dominated: node b goes when a node a of the same class costs no more and needs a subset of
  b's children: a in place of b keeps every needed class picked, adds no edge (no cycle) and
  costs no more. Equal nodes keep the first.
- required: a root is required, and so is every class that each derivation of a required
  class uses: a child every node needs, or, bottom-up over the class graph's components,
  N(c) = {c} ∪ ⋂_{n ∈ c} ⋃_{d child of n} N(d) (for a class on a cycle, N(c) = {c}: sound, not
  exact). A required class with one node is fixed: the node is picked, its cost becomes the
  constant `offset`, and its children stand in for it wherever it is used.
- forced: a class with one node n that is not required is merged into every node that uses
  it (n's picks and cost added, its children stand in for it) when n costs 0, or when all its
  users lie in one class (one node per class is chosen, so n is still paid once). Repeated,
  this collapses the tree-shaped regions where nothing is left to choose.
Children standing in for a class keep reachability between the remaining classes, so a picked
cycle exists in the shrunk problem exactly when its mapping back has one; a user that would
reach its own class that way can never be chosen and is dropped.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from rewrite.errors import ExtractionError
from rewrite.extract.problem import Problem, sccs

SUBSET_LOOKUP = 6
"""Dominance checks a node with at most this many children by looking up its child subsets."""

NECESSARY_MAX_CLASSES = 50_000
"""Above this many classes the necessary-set pass is skipped (its bitsets take C² bits)."""

STEPS = ("unusable", "dominated", "required", "forced", "prune")
"""The reductions, by name (module doc)."""


@dataclass
class ShrinkStats:
    """What `shrink` removed, by reduction (counts of classes or nodes)."""

    classes_before: int = 0
    nodes_before: int = 0
    classes_after: int = 0
    nodes_after: int = 0
    pruned_classes: int = 0
    unusable_nodes: int = 0
    dominated_nodes: int = 0
    fixed_classes: int = 0
    merged_classes: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, float | int]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in vars(self).items()}


def shrink(problem: Problem, steps: Collection[str] = STEPS) -> tuple[Problem, ShrinkStats]:
    """A smaller problem with the same optimum (module doc), and what each reduction removed.

    `steps` picks reductions by name (`STEPS`; any subset is exact, fewer shrink less).
    Raises ExtractionError naming a required class when no valid choice exists.
    """
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown shrink steps {sorted(unknown)}; known: {', '.join(STEPS)}")
    start = time.perf_counter()
    stats = ShrinkStats(len(problem.classes), problem.n_nodes)
    work = _Shrinker(problem.copy(), stats, frozenset(steps))
    if "unusable" in steps:
        work.drop_unusable()
    work.run(list(work.p.classes))
    while True:
        changed = "prune" in steps and work.prune()
        if "required" in steps and work.require_necessary():
            changed = True
        if not changed:
            break
        work.run(list(work.p.classes))
    stats.classes_after, stats.nodes_after = len(work.p.classes), work.p.n_nodes
    stats.seconds = time.perf_counter() - start
    return work.p, stats


class _Shrinker:
    """Applies the reductions in place with a worklist of classes to look at again."""

    def __init__(self, p: Problem, stats: ShrinkStats, steps: frozenset[str]) -> None:
        self.p = p
        self.stats = stats
        self.steps = steps
        self.parents: dict[int, set[int]] = {c: set() for c in p.classes}
        for nodes in p.classes.values():
            for n in nodes:
                for k in p.kids[n]:
                    self.parents[k].add(n)
        self.queue: deque[int] = deque()
        self.queued: set[int] = set()
        self.dirty: set[int] = set(p.classes)
        """Classes whose dominance must be (re)checked: a node's children changed."""

    def push(self, cid: int) -> None:
        if cid not in self.queued:
            self.queued.add(cid)
            self.queue.append(cid)

    def run(self, classes: Iterable[int]) -> None:
        for c in classes:
            self.push(c)
        while self.queue or self.dirty:
            if self.queue:
                cid = self.queue.popleft()
                self.queued.discard(cid)
                if cid in self.p.classes:
                    self.visit(cid)
            else:  # the slower checks last: merges first change many nodes of a big class
                cid = self.dirty.pop()
                if len(self.p.classes.get(cid, ())) > 1:
                    if "dominated" in self.steps:
                        self.drop_dominated(cid)
                    if "required" in self.steps:
                        self.propagate_required(cid)

    def visit(self, cid: int) -> None:
        p = self.p
        nodes = p.classes[cid]
        if len(nodes) != 1 or cid in p.kids[nodes[0]]:  # (a self loop, when kept)
            return
        n = nodes[0]
        if cid in p.required:
            if "required" in self.steps:
                self.substitute(cid, n, fixed=True)
                self.stats.fixed_classes += 1
            return
        users = self.parents[cid]
        if "forced" in self.steps and users and (p.cost[n] == 0.0 or _one_owner(p, users)):
            self.substitute(cid, n, fixed=False)
            self.stats.merged_classes += 1

    def require_necessary(self) -> bool:
        """Require every class that all solutions need (module doc); True if any is new."""
        p = self.p
        if len(p.classes) > NECESSARY_MAX_CLASSES:
            return False
        bit = {c: 1 << i for i, c in enumerate(p.classes)}
        need: dict[int, int] = {}  # class -> bitset of the classes every derivation of it uses
        for scc in sccs(p, p.classes):  # children first
            if len(scc) > 1:  # a cycle: claim only the class itself (sound, not exact)
                for c in scc:
                    need[c] = bit[c]
                continue
            (c,) = scc
            common = -1  # all bits: the intersection over no node yet
            for n in p.classes[c]:
                if c in p.kids[n]:  # a self loop is never chosen
                    continue
                union = 0
                for k in p.kids[n]:
                    union |= need[k]
                common &= union
            need[c] = bit[c] | (common if common != -1 else 0)
        required = 0
        for r in p.required:
            required |= need[r]
        new = [c for c in p.classes if required & bit[c] and c not in p.required]
        for c in new:
            self.require(c)
        return bool(new)

    def propagate_required(self, cid: int) -> None:
        """A child every node of required class `cid` needs is required too."""
        p = self.p
        nodes = p.classes.get(cid)
        if cid not in p.required or not nodes:
            return
        common = set(p.kids[nodes[0]]).intersection(*(p.kids[n] for n in nodes[1:]))
        for k in common - p.required:
            self.require(k)

    def require(self, cid: int) -> None:
        self.p.required.add(cid)
        self.dirty.add(cid)
        self.push(cid)

    def drop_dominated(self, cid: int) -> None:
        p = self.p
        order = sorted(p.classes[cid], key=lambda n: (p.cost[n], len(p.kids[n])))
        kept: set[tuple[int, ...]] = set()  # sorted child sets of the kept nodes (no dearer)
        for b in order:
            kids = tuple(sorted(p.kids[b]))
            if len(kids) <= SUBSET_LOOKUP:  # look up each subset: 2^k probes, k is small
                hit = any(
                    sub in kept
                    for r in range(len(kids) + 1)
                    for sub in itertools.combinations(kids, r)  # sorted, like `kept`
                )
            else:
                kb = set(kids)
                hit = any(kb.issuperset(ka) for ka in kept)
            if hit:
                self.remove_node(b, "dominated_nodes")
            else:
                kept.add(kids)
        self.dirty.discard(cid)  # its own removals need no second look

    def substitute(self, cid: int, n: int, *, fixed: bool) -> None:
        """Class `cid` (single node `n`) leaves; its users need n's children instead.

        A user q in a class n needs is on a cycle q -> cid -> q's class: it goes first. When
        that empties a class n needs (an unfounded cycle, with `unusable` not run), n and
        `cid` go with it and nothing is substituted.
        """
        p = self.p
        stand_in = p.kids[n]
        for q in [q for q in self.parents[cid] if p.owner[q] in stand_in]:
            self.remove_node(q, "unusable_nodes")
        if n not in p.classes.get(cid, ()):
            return
        if fixed:
            p.fixed.update(p.picks[n])
            p.offset += p.cost[n]
            for k in stand_in:
                if k not in p.required:
                    self.require(k)
        for q in list(self.parents[cid]):
            if not fixed:
                p.cost[q] += p.cost[n]
                p.picks[q] = p.picks[q] + p.picks[n]
            new = tuple(dict.fromkeys([*(k for k in p.kids[q] if k != cid), *stand_in]))
            for k in new:
                if q not in self.parents[k]:
                    self.parents[k].add(q)
                    self.push(k)
            p.kids[q] = new
            self.dirty.add(p.owner[q])
            self.push(p.owner[q])
        for k in stand_in:
            self.parents[k].discard(n)
            self.push(k)
        del p.classes[cid]
        del self.parents[cid]
        p.required.discard(cid)

    def remove_node(self, n: int, why: str) -> None:
        """Drop node n, counted under `why`; a class left empty takes its users with it (they
        can never be chosen; counted as unusable)."""
        p = self.p
        stack = [n]
        while stack:
            n = stack.pop()
            cid = p.owner[n]
            nodes = p.classes.get(cid)
            if nodes is None or n not in nodes:
                continue
            nodes.remove(n)
            self.dirty.add(cid)
            setattr(self.stats, why, getattr(self.stats, why) + 1)
            why = "unusable_nodes"
            for k in p.kids[n]:
                if k in self.parents:
                    self.parents[k].discard(n)
                    self.push(k)
            self.push(cid)
            if not nodes:
                if cid in p.required:
                    raise ExtractionError(
                        f"extract: required {p.labels.get(cid, f'class {cid}')} has no e-node "
                        f"of finite cost that does not depend on itself"
                    )
                del p.classes[cid]
                stack.extend(self.parents.pop(cid))

    def drop_unusable(self) -> None:
        """Remove self-loop nodes and nodes that need a class no finite tree can compute."""
        p = self.p
        pending: dict[int, int] = {}
        waiting: dict[int, list[int]] = {}
        ready: list[int] = []
        for cid, nodes in p.classes.items():
            for n in nodes:
                if cid in p.kids[n]:
                    continue
                pending[n] = len(p.kids[n])
                for k in p.kids[n]:
                    waiting.setdefault(k, []).append(n)
                if not p.kids[n]:
                    ready.append(n)
        done: set[int] = set()
        while ready:
            cid = p.owner[ready.pop()]
            if cid in done:
                continue
            done.add(cid)
            for m in waiting.get(cid, ()):
                pending[m] -= 1
                if pending[m] == 0:
                    ready.append(m)
        bad = [n for nodes in p.classes.values() for n in nodes if pending.get(n, 1) != 0]
        for n in bad:
            self.remove_node(n, "unusable_nodes")

    def prune(self) -> bool:
        """Remove classes unreachable from the required ones; True if any was removed."""
        p = self.p
        seen = set(p.required)
        stack = list(seen)
        while stack:
            for n in p.classes[stack.pop()]:
                for k in p.kids[n]:
                    if k not in seen:
                        seen.add(k)
                        stack.append(k)
        gone = [c for c in p.classes if c not in seen]
        for cid in gone:
            for n in p.classes.pop(cid):
                for k in p.kids[n]:
                    if k in seen:
                        self.parents[k].discard(n)
                        self.push(k)
            del self.parents[cid]
        self.stats.pruned_classes += len(gone)
        return bool(gone)


def _one_owner(p: Problem, nodes: Iterable[int]) -> bool:
    """Whether all of `nodes` (at least one) lie in one class; stops at the second class."""
    owner = None
    for q in nodes:
        if owner is None:
            owner = p.owner[q]
        elif p.owner[q] != owner:
            return False
    return owner is not None
