"""The DAG cost of a choice: each picked e-node reachable from the roots paid once.

`reachable(choice)` lists the classes a choice needs; `graph_cost` sums their picks' costs
(the objective every extractor minimizes); `cost_by_op` splits that sum by op for the report.
"""

from __future__ import annotations

from collections.abc import Mapping

from rewrite.errors import ExtractionError
from rewrite.extract.snapshot import LEAVES, Choice, ENode, Snapshot

_FREE = LEAVES | {"Out"}


def reachable(choice: Choice, roots: list[int] | None = None) -> list[int]:
    """Classes needed by `choice` from `roots` (default: its own), each once, roots first.

    Raises ExtractionError if a needed class has no pick (cycles are not detected here:
    `check_choice` does that).
    """
    order: list[int] = []
    seen: set[int] = set()
    stack = list(reversed(choice.roots if roots is None else roots))
    while stack:
        cid = stack.pop()
        if cid in seen:
            continue
        seen.add(cid)
        node = choice.picks.get(cid)
        if node is None:
            raise ExtractionError(f"class {cid} is needed by the choice but has no pick")
        order.append(cid)
        stack.extend(reversed(node.children))
    return order


def graph_cost(
    snapshot: Snapshot, choice: Choice, costs: Mapping[tuple[int, ENode], float]
) -> float:
    """DAG cost of `choice`: every picked e-node reachable from the snapshot's roots, paid once.

    An e-node missing from `costs` costs `inf`.
    """
    return sum(
        costs.get((cid, choice.picks[cid]), float("inf"))
        for cid in reachable(choice, snapshot.roots)
    )


def cost_by_op(
    snapshot: Snapshot, choice: Choice, costs: Mapping[tuple[int, ENode], float]
) -> dict[str, float]:
    """`graph_cost` split by op: op label (`domain.Op` outside ai.onnx) -> µs of the picked
    e-nodes of that op. Free labels (leaves, projections) are left out."""
    out: dict[str, float] = {}
    for cid in reachable(choice, snapshot.roots):
        node = choice.picks[cid]
        if node.op in _FREE:
            continue
        label = f"{node.domain}.{node.op}" if node.domain not in ("", "ai.onnx") else node.op
        out[label] = out.get(label, 0.0) + costs.get((cid, node), float("inf"))
    return out
