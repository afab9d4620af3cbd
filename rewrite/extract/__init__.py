"""Extraction: price the e-nodes of a `Snapshot` for a `Target`, pick a `Choice`, validate it.

`node_costs(snapshot, target)` prices every e-node (µs); `greedy(snapshot, costs)` picks the
DAG-aware greedy choice; `check_choice(snapshot, choice)` is the validator every extractor's
result passes; `graph_cost` is the DAG cost of a choice. Nothing here imports egglog or
`rewrite.egraph`: extractors see only a `Snapshot`.
"""

from rewrite.extract.check import check_choice
from rewrite.extract.cost import (
    CPU,
    CUDA,
    TARGETS,
    CostModel,
    NodeCosts,
    Target,
    enode_cost,
    graph_cost,
    node_costs,
)
from rewrite.extract.greedy import greedy
from rewrite.extract.snapshot import Choice, EClass, ENode, OpaqueInfo, Snapshot

__all__ = [
    "CPU",
    "CUDA",
    "TARGETS",
    "Choice",
    "CostModel",
    "EClass",
    "ENode",
    "NodeCosts",
    "OpaqueInfo",
    "Snapshot",
    "Target",
    "check_choice",
    "enode_cost",
    "graph_cost",
    "greedy",
    "node_costs",
]
