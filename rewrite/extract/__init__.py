"""Extraction: price the e-nodes of a `Snapshot` for a `Target`, pick a `Choice`, validate it.

`node_costs(snapshot, target)` prices every e-node (µs); `greedy(snapshot, costs)` picks the
DAG-aware greedy choice; `check_choice(snapshot, choice)` is the validator every extractor's
result passes; `graph_cost` is the DAG cost of a choice. `extract(snapshot, costs)` runs
greedy, then the ILP (`ilp`, after the exact reductions of `shrink`) warm-started from it, and
returns the validated cheaper choice (greedy's, with a note saying why, when the ILP fails).
Nothing here imports egglog or `rewrite.egraph`: extractors see only a `Snapshot`.
"""

from rewrite.extract.check import check_choice
from rewrite.extract.cost import (
    CPU,
    CUDA,
    TARGETS,
    CostModel,
    NodeCosts,
    Target,
    cost_by_op,
    enode_cost,
    graph_cost,
    node_costs,
)
from rewrite.extract.greedy import greedy
from rewrite.extract.ilp import ILPStats, ilp
from rewrite.extract.problem import Problem, to_problem
from rewrite.extract.select import Extraction, extract, run_extraction
from rewrite.extract.shrink import ShrinkStats, shrink
from rewrite.extract.snapshot import Choice, EClass, ENode, OpaqueInfo, Snapshot
from rewrite.extract.solution import split

__all__ = [
    "CPU",
    "CUDA",
    "TARGETS",
    "Choice",
    "CostModel",
    "EClass",
    "ENode",
    "Extraction",
    "ILPStats",
    "NodeCosts",
    "OpaqueInfo",
    "Problem",
    "ShrinkStats",
    "Snapshot",
    "Target",
    "check_choice",
    "cost_by_op",
    "enode_cost",
    "extract",
    "graph_cost",
    "greedy",
    "ilp",
    "node_costs",
    "run_extraction",
    "shrink",
    "split",
    "to_problem",
]
