"""Bottom-up, DAG-aware greedy extraction: the baseline every other extractor must beat.

Each class's cost is the DAG cost of the sub-graph its pick needs: the pick's own cost plus the
union of its children's needed sets, so a subterm shared by two children is paid once (the
`greedy-dag` of extraction-gym). Unlike extraction-gym, classes are finalized in increasing
order of cost with a heap (Knuth's generalization of Dijkstra to superior functions): a cost
is never below any child's cost when costs are >= 0, so once a class is the cheapest one
pending, no e-node whose children are unfinished can beat it. This reaches the same kind of
fixpoint as a worklist iteration (no class can improve given its children's picks) in one
pass, and a pick never changes once made, so each pick's children were finalized before it:
the result is acyclic by construction, even though the e-graph has cycles (an e-node whose
child is its own class, or a longer loop, simply never becomes ready before its class is
finalized). A worklist that revises picks can leave a stale pick that closes a cycle.

Ties go to the e-node that comes first: lower cost, then the class that comes first in the
snapshot, then the e-node that comes first in its class.

Needed sets are bitsets (Python ints, one bit per class reachable from the roots); a
candidate's total is the largest child's total plus the costs of the classes its other
children add, so overlapping sets cost little to sum. Time: O(E log E) heap operations plus
O(E · C / 64) word operations for the unions (E e-nodes, C classes); memory O(C² / 8) bytes
in the worst case.

Greedy is not optimal: it prices each class alone, so sharing *across siblings* (two children
that could both use one expensive subterm) is not seen. The ILP extractor handles that.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping

from rewrite.errors import ExtractionError
from rewrite.extract.check import check_choice, class_label, describe
from rewrite.extract.cost import graph_cost, reachable
from rewrite.extract.snapshot import Choice, ENode, Snapshot


def greedy(snapshot: Snapshot, costs: Mapping[tuple[int, ENode], float]) -> Choice:
    """The greedy DAG choice for the snapshot's roots; it passes `check_choice`.

    E-nodes missing from `costs` or costing `inf` are never picked. Raises ExtractionError if
    a cost is negative or NaN, if a class refers to a class not in the snapshot, or if a root
    has no e-node of finite cost whose needed classes avoid the root itself (naming the root).
    """
    ids = _needed_classes(snapshot)
    index = {cid: i for i, cid in enumerate(ids)}
    n = len(ids)

    # One record per usable e-node: its class index, e-node index, own cost, child indices.
    node_class: list[int] = []
    node_pos: list[int] = []
    node_cost: list[float] = []
    node_kids: list[list[int]] = []
    pending: list[int] = []
    parents: list[list[int]] = [[] for _ in range(n)]
    ready: list[int] = []
    for ci, cid in enumerate(ids):
        for j, node in enumerate(snapshot.classes[cid].nodes):
            c = costs.get((cid, node), math.inf)
            if c == math.inf:
                continue
            if not c >= 0.0:
                raise ExtractionError(
                    f"greedy: {describe(node)} in {class_label(snapshot, cid)} has cost {c}; "
                    f"costs must be >= 0 (or inf to forbid an e-node)"
                )
            kids = list(dict.fromkeys(index[k] for k in node.children))
            nid = len(node_cost)
            node_class.append(ci)
            node_pos.append(j)
            node_cost.append(float(c))
            node_kids.append(kids)
            pending.append(len(kids))
            for k in kids:
                parents[k].append(nid)
            if not kids:
                ready.append(nid)

    done = [False] * n
    pick = [-1] * n
    own = [0.0] * n  # cost of the class's own picked e-node
    total = [0.0] * n  # DAG cost of the class's needed set
    needed = [0] * n  # bitset of the classes the pick needs, itself included

    def candidate(nid: int) -> tuple[float, int, int, int, int]:
        ci = node_class[nid]
        kids = node_kids[nid]
        if not kids:
            return (node_cost[nid], ci, node_pos[nid], nid, 1 << ci)
        best = max(kids, key=total.__getitem__)
        union = needed[best]
        for k in kids:
            union |= needed[k]
        t = node_cost[nid] + total[best] + _sum_bits(union & ~needed[best], own)
        return (t, ci, node_pos[nid], nid, union | (1 << ci))

    heap = [candidate(nid) for nid in ready]
    heapq.heapify(heap)
    while heap:
        t, ci, _, nid, bits = heapq.heappop(heap)
        if done[ci]:
            continue
        done[ci] = True
        pick[ci] = node_pos[nid]
        own[ci] = node_cost[nid]
        total[ci] = t
        needed[ci] = bits
        for parent in parents[ci]:
            pending[parent] -= 1
            if pending[parent] == 0 and not done[node_class[parent]]:
                heapq.heappush(heap, candidate(parent))

    for root in snapshot.roots:
        if not done[index[root]]:
            raise ExtractionError(_no_pick_reason(snapshot, root, done, index))
    picks = {cid: snapshot.classes[cid].nodes[pick[ci]] for ci, cid in enumerate(ids) if done[ci]}
    choice = Choice(picks=picks, roots=list(snapshot.roots), extractor="greedy")
    choice.picks = {cid: picks[cid] for cid in reachable(choice)}
    choice.cost = graph_cost(snapshot, choice, costs)
    check_choice(snapshot, choice)
    return choice


def _needed_classes(snapshot: Snapshot) -> list[int]:
    """Classes reachable from the roots through any e-node, in snapshot order."""
    classes = snapshot.classes
    seen: set[int] = set()
    stack: list[int] = []
    for root in snapshot.roots:
        if root not in classes:
            raise ExtractionError(f"greedy: root class {root} is not in the snapshot")
        stack.append(root)
    while stack:
        cid = stack.pop()
        if cid in seen:
            continue
        seen.add(cid)
        for node in classes[cid].nodes:
            for kid in node.children:
                if kid not in classes:
                    raise ExtractionError(
                        f"greedy: {describe(node)} in {class_label(snapshot, cid)} has child "
                        f"class {kid}, which is not in the snapshot"
                    )
                if kid not in seen:
                    stack.append(kid)
    return [cid for cid in classes if cid in seen]


def _sum_bits(bits: int, values: list[float]) -> float:
    """Sum of `values[i]` over the set bits i of `bits`, lowest first."""
    s = 0.0
    while bits:
        low = bits & -bits
        s += values[low.bit_length() - 1]
        bits ^= low
    return s


def _no_pick_reason(snapshot: Snapshot, root: int, done: list[bool], index: dict[int, int]) -> str:
    """Why a root got no pick: its e-nodes and the children of each that got none."""
    parts = []
    for node in snapshot.classes[root].nodes[:6]:
        missing = [k for k in dict.fromkeys(node.children) if not done[index[k]]]
        why = f"needs {', '.join(map(str, missing))}" if missing else "forbidden (cost inf)"
        parts.append(f"{describe(node)}: {why}")
    return (
        f"greedy: root {class_label(snapshot, root)} has no e-node of finite cost that does "
        f"not depend on itself ({'; '.join(parts) or 'no e-nodes'}); classes with no pick "
        f"depend on a cycle or on a forbidden e-node"
    )
