"""Per-e-node cost estimates (µs) for a `Target`, and the DAG cost of a `Choice`.

The model is a roofline with a per-op coefficient and a fixed per-node overhead:

    cost(e-node) = max(flops / throughput, act / bandwidth + weights / mem_bandwidth)
                   · coeff[key] + overhead

in microseconds. `throughput` is `target.peak_flops` for GEMM-like ops (`GEMM_OPS`) and
`target.vector_flops` for the others. `flops` and the bytes moved come from the op's `OpSpec`
(`flops`, `bytes`; for contrib ops the registry lacks, from `contrib.py`) evaluated on the
e-node's `OpCall` (`Snapshot.call`) and its output types; `weights` are the bytes of its
constant inputs (at most the bytes moved: a Gather reads only its rows) and `act` the rest,
because a whole model reads each weight once per run from memory but its activations from
cache. `key` is `target.coeff_key` (the op, or a variant such as `Conv:grouped`); `coeff`
and the target's numbers come from calibration (`calibrate.py`, `target.py`).

Leaves (`Input`, `Init`, `Absent`) and `Out` projections cost 0. View-like ops (`VIEW_OPS`)
cost the overhead only, so removing an Identity is always a win. An op neither the registry
nor `contrib` knows costs its inputs' and outputs' bytes (from the class types) at
`bandwidth`, times its coefficient, plus the overhead.

ORT rewrites some patterns after us (ORT_ENABLE_ALL), and prices must follow what it runs.
One fusion changes a ranking on the CPU EP: `LayerNormalization(Add(x, s))` becomes
`SkipLayerNormalization`, 5x slower than the pair on ORT 1.32 (corpus README). An Add that ORT
would fuse that way is priced as what the fusion adds (`CostModel.cost`); writing it as `Sum`
avoids the fusion, and the extractor sees the difference.

Constants are free. An e-node of a deterministic ai.onnx op (`registry.foldable_op`) whose
children are all constant classes computes a constant: the pipeline folds it after decoding
(`fold.fold_constants`) and ORT folds what is left when it loads the model, so it costs 0 at run
time (`Concat(W1, W2)` of a merged MatMul's weights, say). A class is constant when it holds an
initializer (`Init`) or such an e-node; its bytes count as weights where an op reads it.

Unknown sizes never crash. Before a spec's functions see a type, every symbolic dim (`str`)
and unknown dim (`None`) counts as `ASSUMED_DIM` (1) unless `dims` names its size (e.g.
`{"batch": 1, "sequence": 128}`), a tensor of unknown rank counts as shape `(ASSUMED_DIM,)`,
and an unknown dtype as 4 bytes. Why 1 and not a "typical" 128: the same data reaches
equivalent e-nodes under different shapes (`(b, s, 768)` and its flattened `(b·s, 768)`, whose
first dim shape inference leaves unnamed); only 1 gives both the same size, so no rewrite wins
on a counting artifact. When a spec's function raises on the assumed shapes (or at all), the
e-node falls back to the no-spec estimate and `CostModel.fallbacks` names it.

Costs live in a `NodeCosts` dict keyed by (class id, e-node); extractors never pick an e-node
that is missing from it or whose cost is `inf`. Costs are finite and >= 0 otherwise.
"""

from __future__ import annotations

import math

from rewrite.extract.constants import computes_constant, constant_classes
from rewrite.extract.dag import cost_by_op, graph_cost, reachable
from rewrite.extract.fusions import activation_fused, pad_fused, skip_layer_norm
from rewrite.extract.nchwc import NchwcLayout, block_size
from rewrite.extract.snapshot import LEAVES, ENode, Snapshot
from rewrite.extract.target import (
    BUILTIN_CPU,
    BUILTIN_CUDA,
    CPU,
    CUDA,
    GEMM_OPS,
    TARGETS,
    Target,
    coeff_key,
    load_target,
    target_from_table,
)
from rewrite.extract.work import Dims, Work, call_work, type_bytes
from rewrite.onnx_io.ort_ops import is_ort_only
from rewrite.ops.base import OpCall, TensorType

__all__ = [
    "BUILTIN_CPU",
    "BUILTIN_CUDA",
    "CPU",
    "CUDA",
    "GEMM_OPS",
    "TARGETS",
    "VIEW_OPS",
    "CostModel",
    "NodeCosts",
    "Target",
    "call_work",
    "coeff_key",
    "cost_by_op",
    "enode_cost",
    "graph_cost",
    "load_target",
    "node_costs",
    "reachable",
    "target_from_table",
]

NodeCosts = dict[tuple[int, ENode], float]
"""(class id, e-node) -> estimated cost in µs."""

VIEW_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout"})
"""Ops that move no data in ORT (a view or a pass-through): they cost the overhead only."""

FREE_OPS = LEAVES | {"Out"}
"""Labels that are not kernels at all: cost 0."""


FUSED_PAD = 0.01
"""A Pad that ORT folds into its Conv costs this share of one node's overhead: nothing as ORT
runs it, but a graph that folds it itself is preferred (it is what ORT will run, written)."""


class CostModel:
    """Prices the e-nodes of one snapshot for one target.

    Building it indexes the `Out` projections (so multi-output op nodes in `N` classes see
    their outputs' types) and each class's consumers (for ORT's SkipLayerNormalization
    fusion). `fallbacks` lists the e-nodes priced without their spec; `fused` the Adds priced
    as ORT will fuse them.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        target: Target = CPU,
        dims: Dims | None = None,
        symbolic: Snapshot | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.symbolic = symbolic or snapshot
        """The types ORT sees (symbolic dims by name), for deciding what ORT will fuse."""
        self.target = target
        self.dims: Dims = dict(dims or {})
        self.fallbacks: list[str] = []
        self.fused: list[str] = []
        outs: dict[int, dict[int, TensorType]] = {}
        users: dict[int, list[tuple[int, ENode, int]]] = {}
        for cid, node in snapshot.enodes():
            if node.op == "Out" and node.children:
                index = int(node.args[0]) if node.args else 0
                outs.setdefault(node.children[0], {}).setdefault(index, snapshot.classes[cid].type)
            for i, kid in enumerate(node.children):
                users.setdefault(kid, []).append((cid, node, i))
        self._outs = outs
        self.users = users
        self.roots = set(snapshot.roots)
        self.declared_dims = {
            d
            for cls in self.symbolic
            if cls.type.shape and any(n.op == "Input" for n in cls.nodes)
            for d in cls.type.shape
            if isinstance(d, str)
        }
        """Dim names the graph's inputs declare (`batch`, `sequence`): ORT sees them too."""
        self.constants = constant_classes(snapshot)
        """Classes whose value is known before the model runs (module doc)."""
        block = block_size() if target.name == CPU.name else 0
        self.layout = NchwcLayout(
            snapshot,
            self.call,
            self.constants,
            self._copy_us,
            block,
            lambda cid, node: (
                (node.op == "Pad" and pad_fused(self, cid, node))
                or activation_fused(self, cid, node)
            ),
        )
        """ORT's NCHWc layout on the CPU EP: the reorders an e-node makes ORT insert."""

    def output_types(self, cid: int) -> list[TensorType]:
        """The types an e-node in class `cid` produces: the class's own, or its projections'."""
        cls = self.snapshot.classes[cid]
        proj = self._outs.get(cid)
        if proj:
            return [proj[i] for i in sorted(proj)]
        if cls.sort == "N":
            return []
        return [cls.type]

    def cost(self, cid: int, node: ENode) -> float:
        """Estimated µs of `node` in class `cid` (module doc: formula and assumptions)."""
        if node.op in FREE_OPS or computes_constant(node, self.constants):
            return 0.0
        if node.op in VIEW_OPS:
            return self.target.overhead * 1e6
        if node.op == "Pad" and not node.domain and pad_fused(self, cid, node):
            return self.target.overhead * 1e6 * FUSED_PAD
        reorders = self.layout.extra(cid, node)
        if node.op == "Add" and not node.domain:
            fused = skip_layer_norm(self, cid, node)
            if fused is not None:
                return fused + reorders
        return self.roofline(node.op, self.key(node), self.work(cid, node)) + reorders

    def _copy_us(self, t: TensorType) -> float:
        """µs of one layout reorder of a tensor of type `t` (read and write it once)."""
        nbytes = type_bytes(t, self.dims)
        return self.roofline("ReorderOutput", "ReorderOutput", (0.0, 2 * nbytes, 0.0))

    def roofline(self, op: str, key: str, work: Work) -> float:
        """µs of `work` for an op (`GEMM_OPS` run at `peak_flops`) under key `key`."""
        t = self.target
        flops, nbytes, weights = work
        compute = flops / (t.peak_flops if op in GEMM_OPS else t.vector_flops)
        memory = (nbytes - weights) / t.bandwidth + weights / t.weight_bandwidth
        return (max(compute, memory) * t.coeff(key) + t.overhead) * 1e6

    def key(self, node: ENode) -> str:
        """`coeff_key` of `node`, with the snapshot telling whether input 1 is a constant."""
        const_b = len(node.children) > 1 and self._is_const(node.children[1])
        return coeff_key(node, self.call(node), const_b)

    def work(self, cid: int, node: ENode) -> Work:
        """(FLOPs, bytes, constant bytes) of `node`: `call_work` when it can, else the bytes of
        its classes (all counted as activations)."""
        outputs = self.output_types(cid)
        call = self.call(node)
        # An op module's flops/bytes may reject the assumed shapes, or have a bug; a cost
        # estimate must not abort extraction, so fall back and record it.
        try:
            if call is not None:
                flags = None
                if len(node.children) == len(call.inputs):  # else Snapshot.call's consts say
                    flags = [self._is_const(k) for k in node.children]
                known = call_work(node.op, node.domain, call, outputs, self.dims, flags)
                if known is not None:
                    return known
        except Exception as err:  # any failure -> no-spec estimate
            self.fallbacks.append(f"{node.op} in class {cid}: {type(err).__name__}: {err}")
        if call is not None:
            inputs = list(call.inputs)
        else:
            kids = (self.snapshot.classes.get(k) for k in node.children)
            inputs = [
                k.type for k in kids if k is not None and k.sort != "N" and not _is_absent(k.nodes)
            ]
        return 0.0, sum(type_bytes(x, self.dims) for x in [*inputs, *outputs]), 0.0

    def _is_const(self, cid: int) -> bool:
        return cid in self.constants

    def call(self, node: ENode) -> OpCall | None:
        try:
            return self.snapshot.call(node)
        except Exception:  # a malformed opaque key or signature: no spec view
            return None


def _is_absent(nodes: list[ENode]) -> bool:
    return any(n.op == "Absent" for n in nodes)


STANDARD_DOMAINS = frozenset({"", "ai.onnx"})


def standard_only(costs: NodeCosts, snapshot: Snapshot, keep: set[tuple[str, str]]) -> NodeCosts:
    """`costs` with every e-node of an op outside the standard ONNX domains (or one ONNX Runtime
    defines in the ONNX domain: SimplifiedLayerNormalization, `onnx_io.ort_ops`) priced `inf`, so
    no extractor writes it, unless the input graph already has that (domain, op) (`keep`):
    the `portable` target writes only standard ONNX ops besides the input's own."""
    out = dict(costs)
    for c in snapshot:
        for n in c.nodes:
            if (
                n.op not in LEAVES
                and (n.domain not in STANDARD_DOMAINS or is_ort_only(n.domain, n.op))
                and (n.domain, n.op) not in keep
            ):
                out[(c.id, n)] = math.inf
    return out


def op_types(snapshot: Snapshot) -> set[tuple[str, str]]:
    """Every (domain, op) of a snapshot's e-nodes."""
    return {(n.domain, n.op) for c in snapshot for n in c.nodes}


def enode_cost(
    snapshot: Snapshot, cid: int, enode: ENode, target: Target = CPU, dims: Dims | None = None
) -> float:
    """Estimated µs of one e-node. Indexes the snapshot each call: use `node_costs` for many."""
    return CostModel(snapshot, target, dims).cost(cid, enode)


def node_costs(
    snapshot: Snapshot,
    target: Target = CPU,
    dims: Dims | None = None,
    symbolic: Snapshot | None = None,
) -> NodeCosts:
    """The cost (µs) of every e-node of `snapshot` on `target`, keyed by (class id, e-node).
    `symbolic`: the snapshot with the types ORT sees, when `snapshot` was `retyped` to
    concrete sizes (`CostModel`)."""
    model = CostModel(snapshot, target, dims, symbolic)
    return {(cid, node): model.cost(cid, node) for cid, node in snapshot.enodes()}
