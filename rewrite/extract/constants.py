"""Which e-classes hold constants: values known before the model runs.

A class is constant when it holds an initializer (`Init`), or an e-node of a deterministic
ai.onnx op with a spec (`registry.foldable_op`) whose children are all constant classes
(ConstantOfShape, a rule's new scalar constant, has none: it is constant as it is), or
an `Out` projection of such a multi-output e-node. The cost model prices such e-nodes at 0
(the pipeline folds them after decoding, and ORT folds what is left when it loads the model)
and counts constant classes read by an op as weights.
"""

from __future__ import annotations

from rewrite.extract.snapshot import LEAVES, ENode, Snapshot
from rewrite.ops.registry import foldable_op

_NOT_KERNELS = LEAVES | {"Out"}


def computes_constant(node: ENode, constants: set[int] | frozenset[int]) -> bool:
    """Whether `node` is a foldable op applied to constant classes only (module doc)."""
    return (
        (bool(node.children) or (node.op == "ConstantOfShape" and not node.domain))
        and node.op not in _NOT_KERNELS
        and all(k in constants for k in node.children)
        and foldable_op(node.op, node.domain)
    )


def constant_classes(snapshot: Snapshot) -> frozenset[int]:
    """Classes holding an `Init`, or an e-node that `computes_constant` from such classes (the
    least fixpoint; `Out` projections of a constant multi-output node are constant too)."""
    none: frozenset[int] = frozenset()
    const = {
        cid
        for cid, cls in snapshot.classes.items()
        if any(n.op == "Init" or (not n.children and computes_constant(n, none)) for n in cls.nodes)
    }
    users: dict[int, list[tuple[int, ENode]]] = {}
    for cid, node in snapshot.enodes():
        for kid in node.children:
            users.setdefault(kid, []).append((cid, node))
    todo = list(const)
    while todo:
        for cid, node in users.get(todo.pop(), []):
            if cid in const:
                continue
            projected = node.op == "Out" and all(k in const for k in node.children)
            if projected or computes_constant(node, const):
                const.add(cid)
                todo.append(cid)
    return frozenset(const)
