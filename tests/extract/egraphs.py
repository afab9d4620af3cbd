"""Hand-made and seeded random e-graphs for extractor tests (no egglog involved).

`build` turns a compact description into a `Snapshot` plus explicit costs; `random_egraph`
makes a seeded e-graph that has an acyclic "first e-node" choice by construction and extra
e-nodes that close cycles. Other extractors' tests (ILP) use the same generators.
"""

from __future__ import annotations

import math
import random

from rewrite.extract import Choice, EClass, ENode, NodeCosts, Snapshot
from rewrite.ops.base import TensorType

FLOAT = 1

Spec = list[tuple[str, tuple[int, ...], float]]
"""A class's e-nodes as (op, children, cost); a leaf has no children."""


def build(classes: dict[int, Spec], roots: list[int]) -> tuple[Snapshot, NodeCosts]:
    """A snapshot whose e-nodes are unknown ops with the given costs.

    Leaves become `Input` nodes named `<op>` so two leaves in one class stay distinct.
    """
    snap_classes: dict[int, EClass] = {}
    costs: NodeCosts = {}
    for cid, spec in classes.items():
        nodes = []
        for op, kids, cost in spec:
            node = ENode(op, kids) if kids else ENode("Input", args=(op,))
            nodes.append(node)
            costs[(cid, node)] = cost
        snap_classes[cid] = EClass(cid, nodes, TensorType(FLOAT, (4,)))
    return Snapshot(snap_classes, roots), costs


def first_node_choice(snapshot: Snapshot) -> Choice:
    """Every class picks its first e-node (may be cyclic)."""
    picks = {c.id: c.nodes[0] for c in snapshot}
    return Choice(picks=picks, roots=list(snapshot.roots), extractor="first-node")


def tree_cost(snapshot: Snapshot, choice: Choice, costs: NodeCosts) -> float:
    """Cost of `choice` as a tree: a class used twice is paid twice. Needs an acyclic choice."""
    memo: dict[int, float] = {}

    def cost(cid: int) -> float:
        if cid not in memo:
            node = choice.picks[cid]
            memo[cid] = costs[(cid, node)] + sum(cost(k) for k in node.children)
        return memo[cid]

    return sum(cost(r) for r in snapshot.roots)


def random_egraph(
    seed: int,
    n_classes: int = 40,
    *,
    max_nodes: int = 3,
    max_kids: int = 3,
    p_leaf: float = 0.15,
    p_cycle: float = 0.3,
    window: int | None = None,
    n_roots: int = 2,
) -> tuple[Snapshot, NodeCosts]:
    """A seeded random e-graph with `n_classes` classes and random costs in [0, 10).

    Class i's e-nodes take children among earlier classes (within `window` of i when given,
    which makes long chains with heavily shared sets, like a network's layers), so picking
    each class's acyclic e-nodes gives an acyclic choice. With probability `p_cycle` a class
    also gets an e-node with a child at or after it (possibly itself), inserted at a random
    position, which makes cycles and may make the first-node choice cyclic. Class ids are
    sparse and the classes come in shuffled order, so extractors cannot rely on either.
    """
    rng = random.Random(seed)
    ids = [3 + 7 * i for i in range(n_classes)]
    classes: dict[int, EClass] = {}
    costs: NodeCosts = {}
    for i, cid in enumerate(ids):
        nodes: list[ENode] = []
        for j in range(rng.randint(1, max_nodes)):
            lo = 0 if window is None else max(0, i - window)
            if i < 2 or rng.random() < p_leaf:
                nodes.append(ENode("Input", args=(f"x{i}_{j}",)))
            else:
                k = rng.randint(1, min(max_kids, i - lo))
                nodes.append(ENode(f"Op{j}", tuple(ids[c] for c in rng.sample(range(lo, i), k))))
        if i >= 1 and rng.random() < p_cycle:
            back = rng.randint(i, n_classes - 1)
            kids = (ids[back], ids[rng.randrange(i)])
            nodes.insert(rng.randint(0, len(nodes)), ENode("Cyc", kids))
        for node in nodes:
            costs[(cid, node)] = 0.0 if rng.random() < 0.1 else rng.uniform(0.0, 10.0)
        classes[cid] = EClass(cid, nodes, TensorType(FLOAT, (4,)))
    order = list(classes.items())
    rng.shuffle(order)
    roots = ids[-n_roots:]
    return Snapshot(dict(order), roots), costs


def is_finite(x: float) -> bool:
    return not math.isinf(x) and not math.isnan(x)
