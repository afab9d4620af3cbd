"""Graph structure: implicit subgraph inputs, SSA, defined inputs, acyclicity, topological order.

Every check raises a one-line `ModelError` that starts with `where` (the model file) and names
the node or value at fault.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

import onnx

from rewrite.errors import ModelError
from rewrite.onnx_io.graph import Node

_GRAPH = onnx.AttributeProto.GRAPH
_GRAPHS = onnx.AttributeProto.GRAPHS


def implicit_inputs(attributes: Iterable[onnx.AttributeProto]) -> list[str]:
    """Outer-scope names the GRAPH/GRAPHS attributes read but do not define (first-read order).

    Nested subgraphs count: a name a nested body reads is implicit unless an enclosing body
    defines it. Empty for nodes without subgraphs.
    """
    out: dict[str, None] = {}
    for a in attributes:
        if a.type == _GRAPH:
            bodies: Sequence[onnx.GraphProto] = [a.g]
        elif a.type == _GRAPHS:
            bodies = list(a.graphs)
        else:
            continue
        for body in bodies:
            for name in free_names(body):
                out.setdefault(name)
    return list(out)


def free_names(graph: onnx.GraphProto) -> list[str]:
    """Names `graph` reads (node inputs, nested bodies, outputs) that it does not define."""
    defined = {i.name for i in graph.input}
    defined.update(t.name for t in graph.initializer)
    defined.update(t.values.name for t in graph.sparse_initializer)
    for n in graph.node:
        defined.update(o for o in n.output if o)
    out: dict[str, None] = {}
    for n in graph.node:
        for name in [*n.input, *implicit_inputs(n.attribute)]:
            if name and name not in defined:
                out.setdefault(name)
    for o in graph.output:
        if o.name and o.name not in defined:
            out.setdefault(o.name)
    return list(out)


def check_and_sort(
    nodes: list[Node],
    inputs: Sequence[str],
    initializers: Iterable[str],
    outputs: Sequence[str],
    where: str,
) -> list[Node]:
    """The nodes in topological order, after checking SSA, definedness and acyclicity.

    Keeps the file's order when it is already topological; otherwise a stable sort (among
    ready nodes, the one earliest in the file goes first). Raises `ModelError` naming the
    value and node(s) on a duplicate definition, an undefined input, an output nothing
    produces, or a cycle.
    """
    definer: dict[str, str] = {}
    for name in inputs:
        if name in definer:
            raise ModelError(f"{where}: graph input '{name}' is declared twice")
        definer[name] = f"graph input '{name}'"
    for name in initializers:
        definer.setdefault(name, f"initializer '{name}'")
    producer: dict[str, int] = {}
    for idx, n in enumerate(nodes):
        for o in n.outputs:
            if not o:
                continue
            if o in definer:
                raise ModelError(
                    f"{where}: {n.label()} defines '{o}', which {definer[o]} already defines "
                    "(value names must be unique)"
                )
            definer[o] = n.label()
            producer[o] = idx
    for n in nodes:
        for name in [*n.inputs, *n.implicit_inputs]:
            if name and name not in definer:
                how = "its subgraph reads" if name not in n.inputs else "reads"
                raise ModelError(
                    f"{where}: {n.label()} {how} '{name}', which no node, graph input or "
                    "initializer defines"
                )
    for name in outputs:
        if name not in definer:
            raise ModelError(
                f"{where}: graph output '{name}' is not produced by any node, graph input or "
                "initializer"
            )
    preds = [
        sorted({producer[i] for i in [*n.inputs, *n.implicit_inputs] if i in producer})
        for n in nodes
    ]
    if all(p < idx for idx, ps in enumerate(preds) for p in ps):
        return list(nodes)
    return [nodes[i] for i in _kahn(preds, nodes, where)]


def _kahn(preds: list[list[int]], nodes: list[Node], where: str) -> list[int]:
    """Stable topological order of node indices; raises on a cycle."""
    succs: list[list[int]] = [[] for _ in preds]
    missing = [len(ps) for ps in preds]
    for idx, ps in enumerate(preds):
        for p in ps:
            succs[p].append(idx)
    ready = [i for i, m in enumerate(missing) if m == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for s in succs[i]:
            missing[s] -= 1
            if missing[s] == 0:
                heapq.heappush(ready, s)
    if len(order) < len(nodes):
        cycle = _find_cycle(preds, {i for i, m in enumerate(missing) if m > 0})
        shown = " -> ".join(nodes[i].label() for i in cycle[:6])
        more = " -> ..." if len(cycle) > 6 else ""
        raise ModelError(
            f"{where}: the graph has a cycle through {nodes[cycle[0]].label()} "
            f"({shown}{more} -> back)"
        )
    return order


def _find_cycle(preds: list[list[int]], stuck: set[int]) -> list[int]:
    """Node indices on one cycle among `stuck` (nodes Kahn could not order), in data order."""
    # Every stuck node has a stuck predecessor, so walking predecessors must revisit a node.
    seen: dict[int, int] = {}
    path: list[int] = []
    i = min(stuck)
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        i = next(p for p in preds[i] if p in stuck)
    return list(reversed(path[seen[i] :]))
