"""Blocks of a shrunk `Problem`, and selections on them: what they need, their cycles, and
starting points for the solver.

`split` puts classes linked by any node into one `Block` (union-find); blocks share nothing,
so each one's optimum is independent of the others'. A selection maps a class to one of its
nodes (problem node ids). These helpers serve the ILP (`ilp.py`): `needed` and `find_cycles`
read a solver's answer, `cyclic_sccs` says where acyclicity rows are needed, `from_picks` and
`block_greedy` build warm starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rewrite.errors import ExtractionError
from rewrite.extract.greedy import greedy
from rewrite.extract.problem import Problem, sccs
from rewrite.extract.snapshot import EClass, ENode, Snapshot


@dataclass(frozen=True)
class Block:
    """An independent part of a `Problem`: its classes (with their nodes) and required ones."""

    classes: tuple[int, ...]
    roots: tuple[int, ...]

    def n_nodes(self, problem: Problem) -> int:
        return sum(len(problem.classes[c]) for c in self.classes)


def split(problem: Problem) -> list[Block]:
    """The independent blocks of `problem`: classes linked through nodes, largest first."""
    up: dict[int, int] = {c: c for c in problem.classes}

    def find(c: int) -> int:
        while up[c] != c:
            up[c] = up[up[c]]
            c = up[c]
        return c

    for cid, nodes in problem.classes.items():
        for n in nodes:
            for k in problem.kids[n]:
                a, b = find(cid), find(k)
                if a != b:
                    up[a] = b
    groups: dict[int, list[int]] = {}
    for cid in problem.classes:
        groups.setdefault(find(cid), []).append(cid)
    blocks = [
        Block(tuple(g), tuple(c for c in g if c in problem.required)) for g in groups.values()
    ]
    blocks.sort(key=lambda b: -len(b.classes))
    return blocks


def needed(problem: Problem, roots: Iterable[int], sel: Mapping[int, int]) -> list[int]:
    """The selected nodes reachable from `roots`, each once. Raises ExtractionError when a
    reachable class has no selected node."""
    out: list[int] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        n = sel.get(c)
        if n is None:
            raise ExtractionError(f"extract: class {c} is needed but the solver selected none")
        out.append(n)
        stack.extend(problem.kids[n])
    return out


def find_cycles(
    problem: Problem, roots: Iterable[int], sel: Mapping[int, int], *, first: bool = False
) -> list[list[int]]:
    """Cycles c_1 -> … -> c_k (sel[c_i] has child c_{i+1}, sel[c_k] has child c_1) among the
    classes reachable from `roots`: one per back edge of a depth-first search, so none when the
    selection is acyclic there (only the first one found when `first`)."""
    done: set[int] = set()
    cycles: list[list[int]] = []
    for root in roots:
        if root in done:
            continue
        path, pos, nxt = [root], {root: 0}, [0]
        while path:
            c = path[-1]
            kids = problem.kids[sel[c]] if c in sel else ()
            if nxt[-1] == len(kids):
                done.add(c)
                del pos[c]
                path.pop()
                nxt.pop()
                continue
            d = kids[nxt[-1]]
            nxt[-1] += 1
            if d in pos:
                cycles.append(path[pos[d] :])
                if first:
                    return cycles
            elif d not in done:
                pos[d] = len(path)
                path.append(d)
                nxt.append(0)
    return cycles


def cyclic_sccs(problem: Problem, classes: Iterable[int]) -> list[list[int]]:
    """Strongly connected components of two or more classes of the class graph restricted to
    `classes` (edge c -> d when a node of c has child d)."""
    return [scc for scc in sccs(problem, classes) if len(scc) > 1]


def from_picks(
    problem: Problem, block: Block, picks: Mapping[int, object]
) -> dict[int, int] | None:
    """The block selection that agrees with snapshot `picks` (every snapshot pick a chosen node
    stands for is in `picks`), or None if a needed class has no such node or it has a cycle."""
    sel: dict[int, int] = {}
    stack = list(block.roots)
    while stack:
        c = stack.pop()
        if c in sel:
            continue
        for n in problem.classes[c]:
            if all(picks.get(cid) == node for cid, node in problem.picks[n]):
                sel[c] = n
                stack.extend(problem.kids[n])
                break
        else:
            return None
    return None if find_cycles(problem, block.roots, sel, first=True) else sel


def block_greedy(problem: Problem, block: Block) -> dict[int, int]:
    """Greedy's (DAG-aware) selection on the block, via `greedy` on a stand-in snapshot."""
    classes: dict[int, EClass] = {}
    costs: dict[tuple[int, ENode], float] = {}
    ids: dict[ENode, int] = {}
    for c in block.classes:
        nodes = []
        for n in problem.classes[c]:
            node = ENode(f"n{n}", problem.kids[n])
            nodes.append(node)
            costs[(c, node)] = problem.cost[n]
            ids[node] = n
        classes[c] = EClass(c, nodes)
    choice = greedy(Snapshot(classes, list(block.roots)), costs)
    return {c: ids[node] for c, node in choice.picks.items()}
