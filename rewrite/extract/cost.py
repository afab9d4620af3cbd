"""Per-e-node cost estimates (µs) for a `Target`, and the DAG cost of a `Choice`.

The model is a roofline with a per-op coefficient and a fixed per-op overhead:

    cost(e-node) = max(flops / throughput, bytes / bandwidth) · coeff[op] + overhead

in microseconds, where `throughput` is `target.peak_flops` for GEMM-like ops (`GEMM_OPS`)
and `target.vector_flops` for everything else, `flops` and `bytes` come from the op's
`OpSpec` (`flops`, `bytes`) evaluated on the e-node's `OpCall` (`Snapshot.call`) and its
output types, and `coeff` defaults to 1. Leaves (`Input`, `Init`, `Absent`) and `Out`
projections cost 0. View-like ops (`VIEW_OPS`: Reshape, Squeeze, Unsqueeze, Flatten, Identity,
Dropout) cost the overhead only, so removing an Identity is always a win. An op with no spec
(opaque or unknown) costs `bytes / bandwidth · coeff + overhead` with bytes = its inputs' and
outputs' sizes from the class types.

Unknown sizes never crash. Before a spec's functions see a type, every symbolic dim (`str`)
and unknown dim (`None`) counts as `ASSUMED_DIM` (1) unless `dims` names its size (e.g.
`{"batch": 1, "sequence": 128}`), a tensor of unknown rank counts as shape `(ASSUMED_DIM,)`,
and an unknown dtype as 4 bytes. Why 1 and not a "typical" 128: the same data reaches
equivalent e-nodes under different shapes (`(b, s, 768)` and its flattened `(b·s, 768)`, whose
first dim shape inference leaves unnamed); only 1 gives both the same size, so no rewrite wins
on a counting artifact. Where nothing is known the estimate degrades toward counting kernels
(the overhead), never toward a bias for one shape form. When a spec's function raises on the
assumed shapes (or at all), the e-node falls back to the no-spec estimate and
`CostModel.fallbacks` names it.

Costs live in a `NodeCosts` dict keyed by (class id, e-node); extractors never pick an e-node
that is missing from it or whose cost is `inf`. Costs are finite and >= 0 otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rewrite.errors import ExtractionError
from rewrite.extract.snapshot import LEAVES, Choice, ENode, Snapshot
from rewrite.ops.base import OpCall, OpSpec, TensorType, itemsize
from rewrite.ops.registry import lookup

NodeCosts = dict[tuple[int, ENode], float]
"""(class id, e-node) -> estimated cost in µs."""

ASSUMED_DIM = 1
"""Size of a symbolic or unknown dim that `dims` does not name (module doc: why 1)."""

Dims = Mapping[str, int]
"""Sizes of named symbolic dims, e.g. {"batch": 1, "sequence": 128}."""

GEMM_OPS = frozenset(
    {
        "MatMul",
        "Gemm",
        "Conv",
        "ConvTranspose",
        "FusedMatMul",
        "FusedGemm",
        "FusedConv",
        "MatMulInteger",
        "QLinearMatMul",
        "QLinearConv",
        "Attention",
        "MultiHeadAttention",
    }
)
"""Ops that run at the target's GEMM throughput (`peak_flops`)."""

VIEW_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout"})
"""Ops that move no data in ORT (a view or a pass-through): they cost the overhead only."""

FREE_OPS = LEAVES | {"Out"}
"""Labels that are not kernels at all: cost 0."""


@dataclass(frozen=True)
class Target:
    """A machine + execution provider, as the roofline sees it.

    `peak_flops` (FLOP/s) applies to `GEMM_OPS`, `vector_flops` (FLOP/s) to all other ops,
    `bandwidth` is effective memory bandwidth (bytes/s), `overhead` is the fixed cost of one
    kernel launch / ORT node dispatch (seconds), `coeffs` multiplies an op's roofline time
    (default 1.0; calibration fills it).
    """

    name: str
    peak_flops: float
    vector_flops: float
    bandwidth: float
    overhead: float
    coeffs: Mapping[str, float] = field(default_factory=dict)

    def coeff(self, op: str) -> float:
        return self.coeffs.get(op, 1.0)


CPU = Target(
    name="cpu",
    peak_flops=85e9,
    vector_flops=8e9,
    bandwidth=10e9,
    overhead=2e-6,
    # Until `rewrite calibrate` exists: ops with scattered or strided access run below
    # streaming bandwidth.
    coeffs={"Transpose": 1.5, "Gather": 1.5, "ScatterND": 2.0, "Softmax": 1.5},
)
"""Default for ORT's CPU EP on a few cores (fp32): the numbers a later calibration replaces."""

CUDA = Target(
    name="cuda",
    peak_flops=20e12,
    vector_flops=2e12,
    bandwidth=1.0e12,
    overhead=8e-6,
    coeffs={"Transpose": 1.5, "Gather": 1.5, "ScatterND": 2.0, "Softmax": 1.5},
)
"""Default for ORT's CUDA EP on a datacenter GPU (fp32/TF32): launch overhead dominates."""

TARGETS = {t.name: t for t in (CPU, CUDA)}


def assume_type(t: TensorType | None, dims: Dims | None = None) -> TensorType | None:
    """`t` with every symbolic/unknown dim replaced by its assumed size (see module doc)."""
    if t is None or t.is_static:
        return t
    if t.shape is None:
        return TensorType(t.dtype, (ASSUMED_DIM,))
    named = dims or {}
    sizes = tuple(
        d
        if isinstance(d, int)
        else named.get(d, ASSUMED_DIM)
        if isinstance(d, str)
        else ASSUMED_DIM
        for d in t.shape
    )
    return TensorType(t.dtype, sizes)


def type_bytes(t: TensorType | None, dims: Dims | None = None) -> float:
    """Bytes of a tensor under the assumed sizes (0 for an omitted input)."""
    a = assume_type(t, dims)
    if a is None:
        return 0.0
    return float((a.numel or 0) * itemsize(a.dtype))


class CostModel:
    """Prices the e-nodes of one snapshot for one target.

    Building it indexes the `Out` projections once, so multi-output op nodes (in `N` classes)
    see their outputs' types. `fallbacks` lists the e-nodes priced without their spec.
    """

    def __init__(self, snapshot: Snapshot, target: Target = CPU, dims: Dims | None = None) -> None:
        self.snapshot = snapshot
        self.target = target
        self.dims: Dims = dict(dims or {})
        self.fallbacks: list[str] = []
        outs: dict[int, dict[int, TensorType]] = {}
        for cid, node in snapshot.enodes():
            if node.op == "Out" and node.children:
                index = int(node.args[0]) if node.args else 0
                outs.setdefault(node.children[0], {}).setdefault(index, snapshot.classes[cid].type)
        self._outs = outs

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
        if node.op in FREE_OPS:
            return 0.0
        t = self.target
        if node.op in VIEW_OPS:
            return t.overhead * 1e6
        flops, nbytes = self._work(cid, node)
        throughput = t.peak_flops if node.op in GEMM_OPS else t.vector_flops
        seconds = max(flops / throughput, nbytes / t.bandwidth) * t.coeff(node.op) + t.overhead
        return seconds * 1e6

    def _work(self, cid: int, node: ENode) -> tuple[float, float]:
        """(FLOPs, bytes) of `node`: from its spec when it has one, else bytes only."""
        outputs = self.output_types(cid)
        call = self._call(node)
        spec = lookup(node.op, node.domain)
        if call is not None and spec is not None:
            # An op module's flops/bytes may reject the assumed shapes, or have a bug; a cost
            # estimate must not abort extraction, so fall back and record it.
            try:
                return _spec_work(spec, call, outputs, self.dims)
            except Exception as err:  # any failure -> no-spec estimate
                self.fallbacks.append(f"{node.op} in class {cid}: {type(err).__name__}: {err}")
        if call is not None:
            inputs = list(call.inputs)
        else:
            kids = (self.snapshot.classes.get(k) for k in node.children)
            inputs = [
                k.type for k in kids if k is not None and k.sort != "N" and not _is_absent(k.nodes)
            ]
        return 0.0, sum(type_bytes(x, self.dims) for x in [*inputs, *outputs])

    def _call(self, node: ENode) -> OpCall | None:
        try:
            return self.snapshot.call(node)
        except Exception:  # a malformed opaque key or signature: no spec view
            return None


def _spec_work(
    spec: OpSpec, call: OpCall, outputs: list[TensorType], dims: Dims
) -> tuple[float, float]:
    """(FLOPs, bytes) from the spec on assumed shapes; outputs of unknown type are inferred."""
    assumed = replace(call, inputs=[assume_type(t, dims) for t in call.inputs])
    if not outputs or any(o.shape is None or o.dtype == 0 for o in outputs):
        try:
            inferred = spec.infer(assumed)
        except Exception:  # keep what the classes say
            inferred = []
        if len(inferred) >= len(outputs):
            outputs = [
                i if o.shape is None or o.dtype == 0 else o
                for o, i in zip([*outputs, *inferred[len(outputs) :]], inferred, strict=True)
            ]
    outs = [a for a in (assume_type(o, dims) for o in outputs) if a is not None]
    flops, nbytes = float(spec.flops(assumed, outs)), float(spec.bytes(assumed, outs))
    if not (0.0 <= flops < math.inf and 0.0 <= nbytes < math.inf):
        raise ValueError(f"flops={flops}, bytes={nbytes} is not a finite work estimate")
    return flops, nbytes


def _is_absent(nodes: list[ENode]) -> bool:
    return any(n.op == "Absent" for n in nodes)


def enode_cost(
    snapshot: Snapshot, cid: int, enode: ENode, target: Target = CPU, dims: Dims | None = None
) -> float:
    """Estimated µs of one e-node. Indexes the snapshot each call: use `node_costs` for many."""
    return CostModel(snapshot, target, dims).cost(cid, enode)


def node_costs(snapshot: Snapshot, target: Target = CPU, dims: Dims | None = None) -> NodeCosts:
    """The cost (µs) of every e-node of `snapshot` on `target`, keyed by (class id, e-node)."""
    model = CostModel(snapshot, target, dims)
    return {(cid, node): model.cost(cid, node) for cid, node in snapshot.enodes()}


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
