"""`Snapshot` and `Choice`: the egglog-free view of an e-graph that extractors work on.

A `Snapshot` is a set of e-classes; each holds e-nodes, and an e-node's children are e-class
ids. Classes of sort `T` are tensors and carry a `TensorType`; classes of sort `N` are the
multi-output op nodes that `Out(node, i)` projections point to (no type). `roots` are the
classes the graph must compute (its outputs, in order). `rewrite/egraph/` fills it;
hand-made snapshots drive the extractor tests.

A `Choice` picks one e-node for every class needed to compute the roots.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rewrite.ops.base import UNKNOWN, OpCall, TensorType
from rewrite.ops.registry import lookup

LEAVES = frozenset({"Input", "Init", "Absent"})
"""Leaf kinds: a graph input, a constant (initializer or folded), an omitted optional input."""


@dataclass(frozen=True)
class ENode:
    """One e-node: op label, attribute arguments, child classes.

    `op` is the ONNX op type for typed and opaque op nodes, or a leaf kind: `Input` (args:
    (name,)), `Init` (args: (name,)), `Out` (args: (index,); one child, an `N` class).
    `domain` is the op's domain ("" = ai.onnx). `args` are the primitive arguments (attribute
    values, or an opaque node's attribute key). `opaque` marks nodes carried unchanged.
    """

    op: str
    children: tuple[int, ...] = ()
    args: tuple[Any, ...] = ()
    domain: str = ""
    opaque: bool = False

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass
class EClass:
    id: int
    nodes: list[ENode]
    type: TensorType = UNKNOWN
    sort: str = "T"
    names: list[str] = field(default_factory=list)
    """Original value names held by this class (from the input graph), in graph order."""


@dataclass(frozen=True)
class OpaqueInfo:
    """What an opaque node's key stands for."""

    attrs: dict[str, Any]
    n_inputs: int
    """Explicit inputs; children beyond these are implicit subgraph inputs."""
    n_outputs: int = 1


@dataclass
class Snapshot:
    classes: dict[int, EClass]
    roots: list[int]
    opaque: dict[str, OpaqueInfo] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    """Init name -> value, for the constants a cost or decode needs to read."""

    def __iter__(self) -> Iterator[EClass]:
        return iter(self.classes.values())

    def __len__(self) -> int:
        return len(self.classes)

    @property
    def n_nodes(self) -> int:
        return sum(len(c.nodes) for c in self.classes.values())

    def enodes(self) -> Iterator[tuple[int, ENode]]:
        for c in self.classes.values():
            for n in c.nodes:
                yield c.id, n

    def type_of(self, cid: int) -> TensorType:
        return self.classes[cid].type

    def retyped(self, types: Mapping[str, TensorType]) -> Snapshot:
        """A copy whose non-static classes take the static type one of their value names has
        in `types` (same dtype and rank; e.g. `onnx_io.concrete_types` at the user's input
        sizes). Class ids, e-nodes and roots are shared, so costs computed on the copy apply
        to this snapshot."""
        classes = dict(self.classes)
        for cid, cls in self.classes.items():
            if cls.type.is_static or cls.type.shape is None:
                continue
            for name in cls.names:
                t = types.get(name)
                if t is not None and t.dtype == cls.type.dtype and t.rank == cls.type.rank:
                    classes[cid] = replace(cls, type=t)
                    break
        return replace(self, classes=classes)

    def call(self, node: ENode, out_class: int | None = None) -> OpCall | None:
        """The `OpCall` an op e-node stands for (None for leaves, `Out` and unknown ops)."""
        if node.op in LEAVES or node.op == "Out":
            return None
        spec = lookup(node.op, node.domain)
        if node.opaque:
            info = self.opaque[node.args[0]]
            explicit = node.children[: info.n_inputs]
            return OpCall(
                node.op,
                [self._input_type(k) for k in explicit],
                [self._const(k) for k in explicit],
                info.attrs,
                info.n_outputs,
            )
        if spec is None or spec.egg is None:
            return None
        sig = spec.egg
        names = [a[0] for a in sig.attrs]
        attrs = {
            n: (list(v) if isinstance(v, tuple) else v)
            for n, v in zip(names, node.args, strict=False)
        }
        vecs = node.args[len(names) :]
        n_total = len(node.children) + len(sig.const_inputs)
        types: list[TensorType | None] = []
        consts: list[np.ndarray | None] = []
        kids = iter(node.children)
        vec_iter = iter(vecs)
        for i in range(n_total):
            if i in sig.const_inputs:
                v = np.asarray(next(vec_iter), dtype=np.int64)
                types.append(TensorType(7, v.shape))
                consts.append(v)
            else:
                k = next(kids)
                types.append(self._input_type(k))
                consts.append(self._const(k))
        return OpCall(node.op, types, consts, attrs, 1)

    def _input_type(self, cid: int) -> TensorType | None:
        c = self.classes[cid]
        if any(n.op == "Absent" for n in c.nodes):
            return None
        return c.type

    def _const(self, cid: int) -> np.ndarray | None:
        for n in self.classes[cid].nodes:
            if n.op == "Init" and n.args[0] in self.consts:
                return self.consts[n.args[0]]
        return None


@dataclass
class Choice:
    """One e-node per needed class (classes not needed to compute the roots may be absent)."""

    picks: dict[int, ENode]
    roots: list[int]
    cost: float = 0.0
    extractor: str = ""
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, cid: int) -> ENode:
        return self.picks[cid]
